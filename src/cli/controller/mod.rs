//! `nodewright controller`: runs every controller against the cluster in the
//! kubeconfig or the pod's service account (see `crate::operator`).

mod args;
mod launch;

use std::sync::Arc;

use args::{CloudProviderKind, LogFormat};
pub use args::{ControllerArgs, feature_gates};

use super::CliError;
use crate::aws::catalog::Catalog;
use crate::aws::catalog::refresh::{CatalogRefresher, log_report};
use crate::aws::clients::{AwsClients, AwsSettings, sdk_config};
use crate::aws::cloudprovider::AwsCloudProvider;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::aws::pricing::PricingProvider;
use crate::cloudprovider::simulated::{SimulatedCloudProvider, SimulatedSettings};
use crate::cloudprovider::{CloudProvider, UnavailableOfferings};
use crate::controllers::interruption::instance_status::InstanceStatusPolling;
use crate::extensions::Extensions;
use crate::operator::Operator;

/// Runs the controllers until the process is told to stop (SIGTERM,
/// Ctrl-C), or fails when this replica loses the leader lease.
pub fn run(args: &ControllerArgs) -> Result<(), CliError> {
    init_logging(args.log_format, &args.log_level)?;
    args.check_feature_gates()?;
    args.cluster_endpoint()?;
    let host_config = args.host_config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = kube::Config::infer()
            .await
            .map_err(|e| format!("no Kubernetes configuration (kubeconfig or service account): {e}"))?;
        let client = crate::operator::client::client(config.clone())
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
        let extensions = Arc::new(Extensions::with_settings(
            host_config,
            args.extension_settings(),
        )?);
        let unavailable = Arc::new(UnavailableOfferings::default());
        let queue_name = args
            .interruption_queue
            .clone()
            .filter(|q| !q.is_empty());
        let mut interruption_queue = None;
        let mut instance_status = None;
        let (instance_types, cloud, node_classes): (_, Option<Arc<dyn CloudProvider>>, _) =
            match args.cloud_provider {
                CloudProviderKind::Simulated => {
                    let region = args.region.clone().unwrap_or_else(|| "us-east-1".to_string());
                    let catalog = Arc::new(Catalog::embedded(&region)?);
                    let instance_types = Arc::new(InstanceTypeProvider::new(
                        catalog,
                        extensions,
                        unavailable.clone(),
                    ));
                    let cloud = Arc::new(SimulatedCloudProvider::new(
                        instance_types.clone(),
                        unavailable,
                        SimulatedSettings::default(),
                    ));
                    if let Some(queue) = &queue_name {
                        tracing::warn!(%queue, "--interruption-queue is read only with --cloud-provider aws; the simulated cloud has no queue");
                    }
                    tracing::info!(%region, cluster = %args.cluster_name, "starting with the simulated cloud");
                    (instance_types, Some(cloud as Arc<dyn CloudProvider>), None)
                }
                CloudProviderKind::Aws => {
                    let sdk = sdk_config(&AwsSettings {
                        region: args.region.clone(),
                        ..AwsSettings::default()
                    })
                    .await;
                    let region = sdk
                        .region()
                        .map(|r| r.to_string())
                        .ok_or("no AWS region: pass --region or set AWS_REGION")?;
                    let eks = crate::aws::clients::eks_client(&sdk);
                    let launch = launch::launch_settings(args, &config, &client, &eks).await?;
                    let clients = AwsClients::new(&sdk);
                    interruption_queue = queue_name.map(|name| {
                        Arc::new(interruption_queue::Queue::new(clients.sqs.clone(), name))
                    });
                    instance_status = Some(InstanceStatusPolling::new(clients.ec2.clone()));
                    // The live catalog: read once now (falling back to the
                    // embedded one if EC2 cannot be read), then refreshed.
                    let pricing =
                        PricingProvider::new(&region, clients.pricing.clone(), clients.ec2.clone())?;
                    let refresher = Arc::new(CatalogRefresher::new(clients.ec2.clone(), pricing));
                    let first = refresher.refresh().await?;
                    log_report(&region, &first);
                    tracing::info!(%region, %kubernetes_version, cluster = %args.cluster_name, catalog = first.catalog.version(), "starting");
                    let instance_types = Arc::new(InstanceTypeProvider::new(
                        first.catalog,
                        extensions,
                        unavailable.clone(),
                    ));
                    tokio::spawn(refresher.run(instance_types.clone()));
                    let cloud = Arc::new(AwsCloudProvider::new(
                        clients.clone(),
                        instance_types.clone(),
                        unavailable,
                        launch,
                    ));
                    let setup = crate::controllers::NodeClassSetup {
                        clients,
                        settings: crate::controllers::ControllerSettings {
                            kubernetes_version,
                            cluster_name: args.cluster_name.clone(),
                            disable_dry_run: args.disable_dry_run,
                        },
                    };
                    let cloud = cloud as Arc<dyn CloudProvider>;
                    (instance_types, Some(cloud), Some(setup))
                }
            };
        let operator = Operator {
            client,
            instance_types,
            cloud,
            node_classes,
            settings: args.operator_settings(),
            interruption_queue,
            instance_status,
        };
        operator
            .run(shutdown_signal(), |endpoints| {
                tracing::info!(metrics = %endpoints.metrics, health = %endpoints.health, "serving metrics and health probes");
            })
            .await?;
        Ok(())
    })
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
    tracing::info!("shutting down");
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

fn init_logging(format: LogFormat, level: &str) -> Result<(), CliError> {
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .map_err(|e| format!("--log-level {level:?}: {e}"))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // A second call (tests) leaves the first subscriber in place.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extensions::ExtensionSettings;
    use clap::Parser;
    use std::path::PathBuf;
    use std::time::Duration;

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
            "--extension-timeout",
            "250ms",
            "--extension-memory-mib",
            "128",
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
        assert_eq!(host.default_limits.timeout, Duration::from_millis(250));
        assert_eq!(host.default_limits.memory_bytes, 128 << 20);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn flags_bound_the_extension_cache_and_calls() {
        let defaults = args(&[]).extension_settings();
        assert_eq!(defaults, ExtensionSettings::default());
        let set = args(&[
            "--extension-cache-entries",
            "32",
            "--extension-concurrency",
            "2",
        ])
        .extension_settings();
        assert_eq!(set.cache_entries, 32);
        assert_eq!(set.concurrency, 2);
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

    /// `--module-signature-keys DIR` reads every key of a mounted
    /// ConfigMap (not its dot entries) and names the flag, the directory
    /// and the file when one is not a P-256 public key.
    #[test]
    fn module_signature_keys_are_read_from_a_directory() {
        assert!(
            args(&[])
                .host_config()
                .unwrap()
                .module_signature_keys
                .is_none()
        );
        let dir = std::env::temp_dir().join(format!("nodewright-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("..2026_12_03")).unwrap();
        let pem = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAESNRrGfSMJUWufBiY1SEhbROmJVR0\nJaj0fDGRUvvrsJGoHw6iSA6Tw/8R4v9c+Tldloa3DlIhJMCkqlHeT1oEzw==\n-----END PUBLIC KEY-----\n";
        std::fs::write(dir.join("team.pub"), pem).unwrap();
        std::fs::write(dir.join(".hidden"), "not a key").unwrap();
        let flag = ["--module-signature-keys", dir.to_str().unwrap()];
        let keys = args(&flag)
            .host_config()
            .unwrap()
            .module_signature_keys
            .unwrap();
        assert_eq!(
            keys.describe(),
            format!("--module-signature-keys {} (team.pub)", dir.display())
        );
        std::fs::write(dir.join("broken.pub"), "hello").unwrap();
        let err = args(&flag).host_config().unwrap_err().to_string();
        assert!(err.contains("key broken.pub is not a PEM"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        let err = args(&flag).host_config().unwrap_err().to_string();
        assert!(err.contains("cannot read the directory"), "{err}");
    }

    #[test]
    fn operator_settings_follow_the_flags() {
        let settings = args(&[
            "--batch-idle-duration",
            "2s",
            "--batch-max-duration",
            "30s",
            "--preference-policy",
            "Ignore",
            "--min-values-policy",
            "BestEffort",
            "--metrics-port",
            "9090",
            "--leader-election-namespace",
            "nodewright",
            "--leader-election-lease-duration",
            "30s",
        ])
        .operator_settings();
        assert_eq!(settings.provisioning.batch.idle, Duration::from_secs(2));
        assert_eq!(settings.provisioning.batch.max, Duration::from_secs(30));
        assert!(settings.provisioning.scheduler.ignore_preferences);
        assert_eq!(settings.metrics_addr.port(), 9090);
        assert_eq!(settings.health_addr.port(), 8081);
        let lease = settings.leader_election.unwrap();
        assert_eq!(lease.namespace, "nodewright");
        assert_eq!(lease.lease_duration, Duration::from_secs(30));
        assert!(
            args(&["--leader-elect", "false"])
                .operator_settings()
                .leader_election
                .is_none()
        );
    }

    #[test]
    fn the_cluster_endpoint_is_optional_and_checked_when_given() {
        assert_eq!(args(&[]).cluster_endpoint().unwrap(), None);
        assert_eq!(
            args(&["--cluster-endpoint", ""])
                .cluster_endpoint()
                .unwrap(),
            None
        );
        let endpoint = args(&["--cluster-endpoint", "https://k.example:443/x"])
            .cluster_endpoint()
            .unwrap();
        assert_eq!(endpoint.as_deref(), Some("https://k.example:443/x"));
        assert!(
            args(&["--cluster-endpoint", "http://127.0.0.1:8080"])
                .cluster_endpoint()
                .is_ok()
        );
        for bad in ["k.example", "ftp://k.example", "https://", "https://:443"] {
            let err = args(&["--cluster-endpoint", bad])
                .cluster_endpoint()
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("--cluster-endpoint") && err.contains("https://"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn feature_gates_are_checked() {
        assert!(args(&[]).check_feature_gates().is_ok());
        for gates in [
            "ReservedCapacity=true,NodeRepair=false",
            "NodeRepair=true",
            "NodeRepair=true,ReservedCapacity=true",
            "SpotToSpotConsolidation=true",
            "NodeOverlay=true",
            "StaticCapacity=true",
        ] {
            assert!(
                args(&["--feature-gates", gates])
                    .check_feature_gates()
                    .is_ok(),
                "{gates}"
            );
        }
        for (gates, needle) in [
            ("CapacityBuffer=true", "does not have"),
            ("NodeRepair=true,CapacityBuffer=true", "does not have"),
            ("Bogus=true", "unknown gate"),
            ("ReservedCapacity=false", "always uses"),
            ("NodeRepair", "Name=true"),
            ("NodeRepair=yes", "true or false"),
        ] {
            let err = args(&["--feature-gates", gates])
                .check_feature_gates()
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{gates}: {err}");
        }
    }

    #[test]
    fn the_node_repair_gate_reaches_the_operator() {
        assert!(!args(&[]).operator_settings().node_repair);
        let on = args(&["--feature-gates", "ReservedCapacity=true, NodeRepair=true"]);
        assert!(on.operator_settings().node_repair);
        let off_again = args(&["--feature-gates", "NodeRepair=true,NodeRepair=false"]);
        assert!(!off_again.operator_settings().node_repair);
    }

    #[test]
    fn the_node_overlay_gate_reaches_the_operator_off_by_default() {
        assert!(!args(&[]).operator_settings().node_overlay);
        let on = args(&["--feature-gates", "NodeOverlay=true"]);
        assert!(on.check_feature_gates().is_ok());
        assert!(on.operator_settings().node_overlay);
    }

    #[test]
    fn the_static_capacity_gate_reaches_the_operator_off_by_default() {
        assert!(!args(&[]).operator_settings().static_capacity);
        let on = args(&["--feature-gates", "StaticCapacity=true"]);
        assert!(on.check_feature_gates().is_ok());
        assert!(on.operator_settings().static_capacity);
    }

    #[test]
    fn eks_minor_versions_lose_their_plus() {
        assert_eq!(minor_version("1", "34+").unwrap(), "1.34");
        assert!(minor_version("1", "x").is_err());
    }
}
