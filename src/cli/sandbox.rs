//! `nodewright sandbox`: a whole cluster on one machine, until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::{CliError, emit};
use crate::apis::duration::parse_go_duration;
use crate::sim::sandbox::log::{self, LogFormat};
use crate::sim::sandbox::{
    CloudChoice, ControllerAccount, KUBECONFIG_MARKER, Sandbox, SandboxSettings, kubeconfig,
};

/// Arguments of `nodewright sandbox`.
#[derive(Debug, Args)]
#[command(after_help = "\
Prints `export KUBECONFIG=…` once the manifests are applied; use kubectl \
against it. With --cluster, the sandbox runs on a real cluster instead of \
the double (see --cluster). What runs: the API server double (a test double of \
kube-apiserver: everything in memory; RBAC only for the controllers' \
ServiceAccount, see --controller-service-account), a simulated \
kubelet (a launched instance becomes a Node after --register-delay, Ready \
one second later, startup taints removed a second after that), a binder \
standing in for kube-scheduler, and nodewright's controllers as \
`nodewright controller` runs them (provisioning, NodeClaim lifecycle, node \
termination and drain, garbage collection, NodePool status, /metrics on a \
loopback port it logs) with a simulated EC2NodeClass status, or with \
--cloud-provider aws the AWS cloud provider and the real EC2NodeClass \
controller. Logs go to stderr (RUST_LOG sets the filter). Ctrl-C or SIGTERM \
stops everything and removes the kubeconfig.")]
pub struct SandboxArgs {
    /// YAML files or directories to apply at start (multi-document files and
    /// `kind: List` too; CRDs and Namespaces first, then file order). A
    /// namespace a manifest uses is created if no manifest creates it.
    #[arg(value_name = "FILE_OR_DIR")]
    paths: Vec<PathBuf>,
    /// Run on the real cluster this kubeconfig points at (its current
    /// context) instead of serving the API server double: the control
    /// plane `scripts/control-plane start DIR` starts (DIR/kubeconfig), a
    /// kind or KWOK cluster. Its kube-scheduler binds the pods and its
    /// kube-controller-manager runs Deployments, garbage collection and
    /// node lifecycle; the simulated kubelet registers Nodes, renews their
    /// Leases in kube-node-lease, posts heartbeats and reports bound pods
    /// Running; nodewright's CRDs are applied to the cluster at start. Needs
    /// cluster-admin. What the sandbox made stays in the cluster when it
    /// stops.
    #[arg(long, value_name = "KUBECONFIG", conflicts_with_all = ["listen", "kubeconfig"])]
    cluster: Option<PathBuf>,
    /// Address the API server double listens on: loopback only (it has no
    /// authentication). Port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDRESS:PORT", value_parser = parse_listen)]
    listen: SocketAddr,
    /// Where to write the kubeconfig for kubectl; an existing file is only
    /// overwritten if the sandbox wrote it. Removed when the sandbox stops.
    /// With --cluster, kubectl uses the cluster's own kubeconfig, which the
    /// sandbox prints instead.
    #[arg(long, default_value = "sandbox.kubeconfig", value_name = "PATH")]
    kubeconfig: PathBuf,
    /// Where instances are launched: `simulated` (in memory, from the
    /// embedded catalog) or `aws`: EC2 through the default credential chain
    /// (`AWS_ENDPOINT_URL` for moto), with the real EC2NodeClass controller;
    /// the kubelet registers a Node for each of the cluster's instances.
    #[arg(long, value_enum, default_value_t = CloudProviderArg::Simulated)]
    cloud_provider: CloudProviderArg,
    /// With `--cloud-provider aws`: the cluster name instances are tagged
    /// with (and instance profiles named after).
    #[arg(long, default_value = "sandbox")]
    cluster_name: String,
    /// With `--cloud-provider aws`: the SQS queue (its name) of interruption
    /// events the controller polls, as `nodewright controller
    /// --interruption-queue`. With the simulated cloud, inject messages with
    /// `kubectl annotate node NODE sandbox.nodewright.io/interruption=KIND`.
    #[arg(long, value_name = "NAME")]
    interruption_queue: Option<String>,
    /// AWS region: its embedded catalog gives the instance types, zones and
    /// prices (us-east-1 or us-west-2).
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// How long a simulated launch takes (Go duration: 500ms, 2s, 1m).
    #[arg(long, default_value = "2s", value_name = "DURATION", value_parser = parse_delay)]
    launch_delay: Duration,
    /// From an instance's launch to its Node's registration; the node turns
    /// Ready min(this, 1s) later, and loses its startup taints as long after that.
    #[arg(long, default_value = "3s", value_name = "DURATION", value_parser = parse_delay)]
    register_delay: Duration,
    /// Run nodewright's controllers as this ServiceAccount (`NAMESPACE/NAME`),
    /// with RBAC enforced: each request they make is allowed only by the
    /// ClusterRoles and Roles bound to it among the manifests (pass the
    /// chart's `helm template` output), a denied one is a 403 logged at
    /// warn, and the controllers elect a leader on the Lease
    /// `NAME-leader-election` in NAMESPACE, as the chart's Deployment does.
    /// Without it they act as a cluster admin.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = parse_account)]
    controller_service_account: Option<ControllerAccount>,
    /// The controller's feature gates, `Name=true|false,…`, read as
    /// `nodewright controller` reads them; the sandbox acts on
    /// `StaticCapacity=true` (static NodePools kept at `spec.replicas`) and
    /// `NodeOverlay=true` (NodeOverlays change prices and capacity), and
    /// refuses other gates turned on.
    #[arg(long, value_name = "GATES", default_value = "", value_parser = parse_gates, action = clap::ArgAction::Set)]
    feature_gates: SandboxGates,
    /// Log lines on stderr: readable text, or one JSON object per line.
    #[arg(long, value_enum, default_value_t = LogFormatArg::Text)]
    log_format: LogFormatArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CloudProviderArg {
    /// In memory: instances of the embedded catalog's types.
    Simulated,
    /// EC2 through the AWS SDK (real AWS, or moto via AWS_ENDPOINT_URL).
    Aws,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormatArg {
    /// Readable lines with the time since start.
    Text,
    /// One JSON object per line.
    Json,
}

fn parse_delay(text: &str) -> Result<Duration, String> {
    parse_go_duration(text).map_err(|e| format!("{e} (use a Go duration such as 500ms, 2s or 1m)"))
}

/// The feature gates the sandbox acts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SandboxGates {
    static_capacity: bool,
    node_overlay: bool,
}

/// `--feature-gates` as the controller reads it, to the gates the sandbox
/// acts on; other gates may only be off (or `ReservedCapacity=true`,
/// always on).
fn parse_gates(text: &str) -> Result<SandboxGates, String> {
    let mut gates = SandboxGates::default();
    for (name, on) in super::controller::feature_gates(text)? {
        match (name, on) {
            ("StaticCapacity", on) => gates.static_capacity = on,
            ("NodeOverlay", on) => gates.node_overlay = on,
            ("ReservedCapacity", true) | (_, false) => {}
            (name, true) => {
                return Err(format!(
                    "{name}=true: the sandbox runs with StaticCapacity and NodeOverlay only; leave {name} out"
                ));
            }
        }
    }
    Ok(gates)
}

/// `NAMESPACE/NAME` of a ServiceAccount; the Lease is named as the chart names it.
fn parse_account(text: &str) -> Result<ControllerAccount, String> {
    match text.split_once('/') {
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Ok(ControllerAccount {
                namespace: namespace.to_string(),
                name: name.to_string(),
                lease: format!("{name}-leader-election"),
            })
        }
        _ => Err(format!(
            "{text:?} is not NAMESPACE/NAME (e.g. kube-system/nodewright, the chart's ServiceAccount)"
        )),
    }
}

/// An `ADDRESS:PORT`; `localhost:PORT` is 127.0.0.1.
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let text = match text.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}"),
        None => text.to_string(),
    };
    text.parse().map_err(|_| {
        format!(
            "{text:?} is not ADDRESS:PORT (e.g. 127.0.0.1:6443, or 127.0.0.1:0 for a free port)"
        )
    })
}

impl SandboxArgs {
    fn settings(&self) -> SandboxSettings {
        SandboxSettings {
            listen: self.listen,
            manifests: self.paths.clone(),
            cloud: match self.cloud_provider {
                CloudProviderArg::Simulated => CloudChoice::Simulated,
                CloudProviderArg::Aws => CloudChoice::Aws,
            },
            region: self.region.clone(),
            cluster_name: self.cluster_name.clone(),
            launch_delay: self.launch_delay,
            interruption_queue: self.interruption_queue.clone(),
            controller_account: self.controller_service_account.clone(),
            cluster: self.cluster.clone(),
            static_capacity: self.feature_gates.static_capacity,
            node_overlay: self.feature_gates.node_overlay,
            ..SandboxSettings::default()
        }
        .with_register_delay(self.register_delay)
    }
}

/// Runs the sandbox until Ctrl-C or SIGTERM.
pub fn run(args: &SandboxArgs) -> Result<(), CliError> {
    log::init(match args.log_format {
        LogFormatArg::Text => LogFormat::Text,
        LogFormatArg::Json => LogFormat::Json,
    });
    if args.interruption_queue.is_some() && args.cloud_provider == CloudProviderArg::Simulated {
        return Err("--interruption-queue needs --cloud-provider aws; with the simulated cloud, inject messages with `kubectl annotate node NODE sandbox.nodewright.io/interruption=KIND`".into());
    }
    if let Some(cluster) = &args.cluster {
        let path = std::path::absolute(cluster)
            .map_err(|e| format!("--cluster {}: {e}", cluster.display()))?;
        return run_on_cluster(args, path);
    }
    let path = std::path::absolute(&args.kubeconfig)
        .map_err(|e| format!("--kubeconfig {}: {e}", args.kubeconfig.display()))?;
    refuse_foreign_kubeconfig(&path)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let sandbox = Sandbox::start(args.settings()).await?;
        if let Err(e) = std::fs::write(&path, kubeconfig(&sandbox.url())) {
            sandbox.stop().await;
            return Err(format!("--kubeconfig {}: {e}", path.display()).into());
        }
        emit(&format!("export KUBECONFIG={}\n", shell_quoted(&path)))?;
        let stopped = stop_signal().await;
        tracing::info!(signal = stopped, "stopping");
        sandbox.stop().await;
        let _ = std::fs::remove_file(&path);
        Ok(())
    })
}

/// Runs the sandbox on the cluster of the kubeconfig at `cluster` until
/// Ctrl-C or SIGTERM; prints that kubeconfig for kubectl.
fn run_on_cluster(args: &SandboxArgs, cluster: PathBuf) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut settings = args.settings();
    settings.cluster = Some(cluster.clone());
    runtime.block_on(async {
        let sandbox = Sandbox::start(settings).await?;
        emit(&format!("export KUBECONFIG={}\n", shell_quoted(&cluster)))?;
        let stopped = stop_signal().await;
        tracing::info!(signal = stopped, "stopping");
        sandbox.stop().await;
        Ok(())
    })
}

/// Refuses to overwrite a file at `path` that the sandbox did not write
/// (a user's `~/.kube/config`, say).
fn refuse_foreign_kubeconfig(path: &Path) -> Result<(), CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.starts_with(KUBECONFIG_MARKER) => Err(format!(
            "--kubeconfig {}: the file exists and was not written by the sandbox; pass another path or remove it",
            path.display()
        )
        .into()),
        _ => Ok(()),
    }
}

/// `path` as one shell word.
fn shell_quoted(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,".contains(c));
    if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Waits for Ctrl-C or SIGTERM; says which.
async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "interrupt",
                _ = terminate.recv() => "terminate",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "interrupt"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "interrupt"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SandboxArgs,
    }

    fn args(flags: &[&str]) -> Result<SandboxArgs, clap::Error> {
        let mut argv = vec!["sandbox"];
        argv.extend_from_slice(flags);
        Wrapper::try_parse_from(argv).map(|w| w.args)
    }

    #[test]
    fn flags_become_settings() {
        let settings = args(&[
            "examples/quickstart",
            "--listen",
            "localhost:6443",
            "--launch-delay",
            "500ms",
            "--register-delay",
            "0s",
        ])
        .unwrap()
        .settings();
        assert_eq!(settings.listen, "127.0.0.1:6443".parse().unwrap());
        assert_eq!(settings.launch_delay, Duration::from_millis(500));
        assert_eq!(settings.register_delay, Duration::ZERO);
        assert_eq!(settings.ready_delay, Duration::ZERO);
        assert_eq!(settings.manifests, [PathBuf::from("examples/quickstart")]);

        let defaults = args(&[]).unwrap().settings();
        assert_eq!(defaults.register_delay, Duration::from_secs(3));
        assert_eq!(defaults.ready_delay, Duration::from_secs(1));
        assert_eq!(defaults.cloud, CloudChoice::Simulated);
    }

    #[test]
    fn the_sandbox_acts_on_the_static_capacity_and_node_overlay_gates() {
        let both = args(&[
            "--feature-gates",
            "StaticCapacity=true,NodeOverlay=true,ReservedCapacity=true",
        ])
        .unwrap()
        .settings();
        assert!(both.static_capacity && both.node_overlay);
        let off = args(&["--feature-gates", "NodeOverlay=false"])
            .unwrap()
            .settings();
        assert!(!off.static_capacity && !off.node_overlay);
        let refused = args(&["--feature-gates", "NodeRepair=true"])
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("NodeRepair=true") && refused.contains("leave NodeRepair out"),
            "{refused}"
        );
    }

    #[test]
    fn bad_flags_say_what_to_write() {
        let delay = args(&["--register-delay", "3"]).unwrap_err().to_string();
        assert!(delay.contains("Go duration"), "{delay}");
        let listen = args(&["--listen", "6443"]).unwrap_err().to_string();
        assert!(listen.contains("ADDRESS:PORT"), "{listen}");
    }

    #[test]
    fn a_kubeconfig_the_sandbox_did_not_write_is_kept() {
        let dir =
            std::env::temp_dir().join(format!("nodewright-sandbox-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let theirs = dir.join("config");
        std::fs::write(&theirs, "apiVersion: v1\nkind: Config\n").unwrap();
        let error = refuse_foreign_kubeconfig(&theirs).unwrap_err().to_string();
        assert!(error.contains("not written by the sandbox"), "{error}");
        let ours = dir.join("sandbox.kubeconfig");
        std::fs::write(&ours, kubeconfig("http://127.0.0.1:1")).unwrap();
        refuse_foreign_kubeconfig(&ours).unwrap();
        refuse_foreign_kubeconfig(&dir.join("absent")).unwrap();
        assert_eq!(shell_quoted(Path::new("/tmp/a b")), "'/tmp/a b'");
        assert_eq!(
            shell_quoted(Path::new("/tmp/sandbox.kubeconfig")),
            "/tmp/sandbox.kubeconfig"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
