//! `nodewright controller`: runs the controllers against the cluster in the
//! kubeconfig or the pod's service account.

use std::path::PathBuf;
use std::sync::Arc;

use nodewright_host::{HostConfig, credentials_from_docker_config};

use super::CliError;
use crate::aws::catalog::refresh::{CatalogRefresher, log_report};
use crate::aws::clients::{AwsClients, AwsSettings, sdk_config};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::aws::pricing::PricingProvider;
use crate::extensions::Extensions;

/// Arguments of `nodewright controller`.
#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// AWS region; by default taken from the environment (`AWS_REGION`, the
    /// profile, or instance metadata).
    #[arg(long, env = "AWS_REGION")]
    region: Option<String>,
    /// The cluster's name, as Karpenter's `--cluster-name`: it names and
    /// tags the instance profiles nodewright makes for `spec.role`
    /// (`<cluster>_<number>` under `/karpenter/<region>/<cluster>/`) and
    /// tags what is launched (`kubernetes.io/cluster/<cluster>`,
    /// `eks:eks-cluster-name`).
    #[arg(long, env = "CLUSTER_NAME")]
    cluster_name: String,
    /// Skip the dry-run checks of the EC2 calls a launch makes
    /// (`ValidationSucceeded` is then `True` without asking EC2), as
    /// Karpenter's `--disable-dry-run`.
    #[arg(long, env = "DISABLE_DRY_RUN")]
    disable_dry_run: bool,
    /// Kubernetes minor version for AMI alias SSM paths (`1.34`); by default
    /// the API server's.
    #[arg(long)]
    kubernetes_version: Option<String>,
    /// Directory for precompiled extension components (an emptyDir); by
    /// default they are kept in memory only. Must be writable by the
    /// controller alone: its files are loaded as native code.
    #[arg(long, env = "NODEWRIGHT_EXTENSION_CACHE_DIR")]
    extension_cache_dir: Option<PathBuf>,
    /// A registry (`host` or `host:port`) that `url` and `oci` extension
    /// sources may reach over plain HTTP, such as an in-cluster registry.
    /// Repeat for more. Every other host needs HTTPS.
    #[arg(long = "plain-http-registry", value_name = "HOST")]
    plain_http_registries: Vec<String>,
    /// A Docker `config.json` with credentials for private OCI registries,
    /// such as a mounted `kubernetes.io/dockerconfigjson` Secret.
    #[arg(long, env = "NODEWRIGHT_REGISTRY_CONFIG", value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    log_format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines.
    Text,
}

impl ControllerArgs {
    /// The extension host settings these flags give.
    fn host_config(&self) -> Result<HostConfig, CliError> {
        let registry_credentials = match &self.registry_config {
            None => Vec::new(),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!("--registry-config {}: cannot read it: {e}", path.display())
                })?;
                credentials_from_docker_config(&text)
                    .map_err(|e| format!("--registry-config {}: {e}", path.display()))?
            }
        };
        Ok(HostConfig {
            cache_dir: self.extension_cache_dir.clone(),
            plain_http_hosts: self.plain_http_registries.clone(),
            registry_credentials,
            ..HostConfig::default()
        })
    }
}

/// Runs the controllers until the process is told to stop.
pub fn run(args: &ControllerArgs) -> Result<(), CliError> {
    init_logging(args.log_format);
    let host_config = args.host_config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = kube::Client::try_default()
            .await
            .map_err(|e| format!("cannot reach the Kubernetes API server: {e}"))?;
        let kubernetes_version = match &args.kubernetes_version {
            Some(version) => version.clone(),
            None => {
                let info = client
                    .apiserver_version()
                    .await
                    .map_err(|e| format!("cannot read the API server's version: {e}"))?;
                minor_version(&info.major, &info.minor)?
            }
        };
        let sdk = sdk_config(&AwsSettings {
            region: args.region.clone(),
            ..AwsSettings::default()
        })
        .await;
        let region = sdk
            .region()
            .map(|r| r.to_string())
            .ok_or("no AWS region: pass --region or set AWS_REGION")?;
        let clients = AwsClients::new(&sdk);
        let extensions = Extensions::new(host_config)?;
        // The live catalog: read once now (falling back to the embedded one
        // if EC2 cannot be read), then refreshed in the background.
        let pricing = PricingProvider::new(&region, clients.pricing.clone(), clients.ec2.clone())?;
        let refresher = Arc::new(CatalogRefresher::new(clients.ec2.clone(), pricing));
        let first = refresher.refresh().await?;
        log_report(&region, &first);
        tracing::info!(%region, %kubernetes_version, cluster = %args.cluster_name, catalog = first.catalog.version(), "starting");
        let instance_types = Arc::new(InstanceTypeProvider::new(
            first.catalog,
            Arc::new(extensions),
            Arc::default(),
        ));
        tokio::spawn(refresher.run(instance_types.clone()));
        let context = crate::controllers::Context::new(
            client,
            instance_types,
            &clients,
            crate::controllers::ControllerSettings {
                kubernetes_version,
                cluster_name: args.cluster_name.clone(),
                disable_dry_run: args.disable_dry_run,
            },
        );
        crate::controllers::run(Arc::new(context)).await?;
        Ok(())
    })
}

/// `major.minor` from the API server's version fields; EKS reports minors
/// such as `34+`.
fn minor_version(major: &str, minor: &str) -> Result<String, CliError> {
    let minor = minor.trim_end_matches('+');
    if major.parse::<u32>().is_err() || minor.parse::<u32>().is_err() {
        return Err(format!(
            "the API server reports version {major:?}.{minor:?}; pass --kubernetes-version (e.g. 1.34)"
        )
        .into());
    }
    Ok(format!("{major}.{minor}"))
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // A second call (tests) leaves the first subscriber in place.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: ControllerArgs,
    }

    fn args(flags: &[&str]) -> ControllerArgs {
        let mut argv = vec!["controller", "--cluster-name", "demo"];
        argv.extend_from_slice(flags);
        Wrapper::parse_from(argv).args
    }

    #[test]
    fn flags_reach_the_extension_host() {
        let dir = std::env::temp_dir().join(format!("nodewright-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.json");
        std::fs::write(
            &config,
            r#"{"auths": {"registry.example.com": {"username": "ci", "password": "pw"}}}"#,
        )
        .unwrap();
        let host = args(&[
            "--plain-http-registry",
            "registry.kube-system:5000",
            "--plain-http-registry",
            "localhost",
            "--registry-config",
            config.to_str().unwrap(),
            "--extension-cache-dir",
            "/var/cache/nodewright",
        ])
        .host_config()
        .unwrap();
        assert_eq!(
            host.plain_http_hosts,
            ["registry.kube-system:5000", "localhost"]
        );
        assert_eq!(host.registry_credentials.len(), 1);
        assert_eq!(
            host.registry_credentials[0].registry,
            "registry.example.com"
        );
        assert_eq!(host.cache_dir, Some(PathBuf::from("/var/cache/nodewright")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_registry_config_names_the_flag_and_the_file() {
        let missing = args(&["--registry-config", "/nonexistent/config.json"])
            .host_config()
            .unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("--registry-config /nonexistent/config.json"),
            "{missing}"
        );
    }

    #[test]
    fn the_cluster_name_is_required_and_dry_runs_can_be_disabled() {
        let parsed = args(&["--disable-dry-run"]);
        assert_eq!(parsed.cluster_name, "demo");
        assert!(parsed.disable_dry_run);
        assert!(!args(&[]).disable_dry_run);
        if std::env::var_os("CLUSTER_NAME").is_none() {
            let missing = Wrapper::try_parse_from(["controller"]).unwrap_err();
            assert!(missing.to_string().contains("--cluster-name"), "{missing}");
        }
    }

    #[test]
    fn eks_minor_versions_lose_their_plus() {
        assert_eq!(minor_version("1", "34+").unwrap(), "1.34");
        assert!(minor_version("1", "x").is_err());
    }
}
