//! The flags of `nodewright controller`, each also read from an environment
//! variable (Karpenter's names where the setting is the same), and what
//! they turn into.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nodewright_host::{HostConfig, Limits, SigningKeys, credentials_from_docker_config};

use crate::apis::duration::parse_go_duration;
use crate::cli::CliError;
use crate::controllers::provisioning::{BatchWindows, ProvisioningSettings};
use crate::extensions::ExtensionSettings;
use crate::operator::{LeaseSettings, OperatorSettings};
use crate::scheduling::{MinValuesPolicy, SchedulerOptions};

/// Arguments of `nodewright controller`.
#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// The cluster's name, as Karpenter's `--cluster-name`: it names and
    /// tags the instance profiles nodewright makes for `spec.role`
    /// (`<cluster>_<number>` under `/karpenter/<region>/<cluster>/`) and
    /// tags what is launched (`kubernetes.io/cluster/<cluster>`,
    /// `eks:eks-cluster-name`).
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster_name: String,
    /// Where instances come from: `aws`, or `simulated` (an in-memory cloud
    /// launching from the embedded catalog: for trying nodewright and for
    /// tests; nothing is created in AWS).
    #[arg(long, env = "CLOUD_PROVIDER", value_enum, default_value_t = CloudProviderKind::Aws)]
    pub cloud_provider: CloudProviderKind,
    /// AWS region; by default taken from the environment (`AWS_REGION`, the
    /// profile, or instance metadata). With `--cloud-provider simulated`,
    /// the embedded catalog's region (default us-east-1).
    #[arg(long, env = "AWS_REGION")]
    pub region: Option<String>,
    /// The API server URL nodes join (`https://….eks.amazonaws.com`). By
    /// default, with `--cloud-provider aws`, asked of EKS at start
    /// (`eks:DescribeCluster` for `--cluster-name`), as Karpenter does.
    #[arg(long, env = "CLUSTER_ENDPOINT")]
    pub cluster_endpoint: Option<String>,
    /// The cluster's CA bundle, base64-encoded PEM, for node bootstrap; by
    /// default the CA the controller itself trusts for the API server (its
    /// service account's or kubeconfig's).
    #[arg(long, env = "CLUSTER_CA_BUNDLE")]
    pub cluster_ca_bundle: Option<String>,
    /// The cluster's service CIDR (`10.100.0.0/16`), which AL2023 nodes
    /// (nodeadm) need; an IPv6 CIDR makes launched nodes IPv6. By default,
    /// with `--cloud-provider aws`, asked of EKS at start.
    #[arg(long, env = "SERVICE_CIDR")]
    pub service_cidr: Option<String>,
    /// The cluster DNS IP nodes use when a class sets no
    /// `spec.kubelet.clusterDNS`; by default the ClusterIP of the
    /// `kube-system/kube-dns` Service.
    #[arg(long, env = "CLUSTER_DNS_IP")]
    pub cluster_dns_ip: Option<String>,
    /// Kubernetes minor version for AMI alias SSM paths (`1.34`); by default
    /// the API server's.
    #[arg(long, env = "KUBERNETES_VERSION")]
    pub kubernetes_version: Option<String>,
    /// Skip the dry-run checks of the EC2 calls a launch makes
    /// (`ValidationSucceeded` is then `True` without asking EC2), as
    /// Karpenter's `--disable-dry-run`.
    #[arg(long, env = "DISABLE_DRY_RUN")]
    pub disable_dry_run: bool,
    /// The SQS queue (its name) EventBridge delivers EC2 interruption
    /// events to, as Karpenter's `--interruption-queue`: spot interruptions,
    /// instance state changes, scheduled changes, rebalance recommendations
    /// and capacity-reservation interruptions are acted on (with
    /// `--cloud-provider aws`; see docs/interruption.md).
    #[arg(long, env = "INTERRUPTION_QUEUE")]
    pub interruption_queue: Option<String>,
    /// A provisioning round ends after this long without a new pending pod.
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = duration)]
    pub batch_idle_duration: Duration,
    /// A provisioning round ends at the latest this long after its first pod.
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s", value_parser = duration)]
    pub batch_max_duration: Duration,
    /// `Respect` preferred affinities and `ScheduleAnyway` spreads (relaxed
    /// one by one when a pod cannot be placed), or `Ignore` them.
    #[arg(long, env = "PREFERENCE_POLICY", value_enum, default_value_t = PreferencePolicy::Respect)]
    pub preference_policy: PreferencePolicy,
    /// `Strict`: a NodeClaim that cannot meet a requirement's `minValues`
    /// is not created; `BestEffort`: it is created with what there is.
    #[arg(long, env = "MIN_VALUES_POLICY", value_enum, default_value_t = MinValuesPolicyArg::Strict)]
    pub min_values_policy: MinValuesPolicyArg,
    /// Feature gates, `Name=true|false,…`. nodewright knows Karpenter's
    /// gates; `ReservedCapacity` is always on, `NodeRepair=true` replaces
    /// nodes whose conditions stay unhealthy (off by default),
    /// `SpotToSpotConsolidation=true` lets consolidation replace spot nodes
    /// with cheaper spot nodes (off by default), `NodeOverlay=true` applies
    /// NodeOverlays (alpha, off by default), `StaticCapacity=true` keeps
    /// static NodePools (`spec.replicas`) at their replicas (alpha, off by
    /// default), and turning on a gate whose feature nodewright does not
    /// have (`CapacityBuffer`) is refused.
    #[arg(long, env = "FEATURE_GATES", default_value = "")]
    pub feature_gates: String,
    /// Address the metrics and health endpoints listen on (all interfaces
    /// by default, as in a pod; `127.0.0.1` to keep them local).
    #[arg(long, env = "BIND_ADDRESS", default_value = "0.0.0.0")]
    pub bind_address: std::net::IpAddr,
    /// Port of `/metrics` (0 picks a free one).
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Port of `/healthz` and `/readyz` (0 picks a free one).
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// Elect a leader among replicas with a Lease, so only one acts.
    #[arg(long, env = "LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease; by default the controller's own
    /// (`SYSTEM_NAMESPACE`, as the Helm chart sets it), else `kube-system`.
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(
        long,
        env = "LEADER_ELECTION_NAME",
        default_value = "nodewright-leader-election"
    )]
    pub leader_election_name: String,
    /// How long a leader's lease holds without renewal.
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value = "15s", value_parser = duration)]
    pub leader_election_lease_duration: Duration,
    /// How long a leader tries to renew before it stops acting.
    #[arg(long, env = "LEADER_ELECTION_RENEW_DEADLINE", default_value = "10s", value_parser = duration)]
    pub leader_election_renew_deadline: Duration,
    /// How often candidates try and the leader renews.
    #[arg(long, env = "LEADER_ELECTION_RETRY_PERIOD", default_value = "2s", value_parser = duration)]
    pub leader_election_retry_period: Duration,
    /// Per-call deadline for extension modules that set no `timeout`.
    #[arg(long, env = "EXTENSION_TIMEOUT", default_value = "100ms", value_parser = duration)]
    pub extension_timeout: Duration,
    /// Most memory an extension module may grow to, MiB (at most 1024).
    #[arg(long, env = "EXTENSION_MEMORY_MIB", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub extension_memory_mib: u32,
    /// Directory for precompiled extension components (an emptyDir); by
    /// default they are kept in memory only. Its files are loaded as native
    /// code, so they live in a 0700 subdirectory (the controller refuses to
    /// start if it is writable by others) and one not owned by the
    /// controller's user, writable by others or changed since written is
    /// compiled again instead.
    #[arg(long, env = "NODEWRIGHT_EXTENSION_CACHE_DIR")]
    pub extension_cache_dir: Option<PathBuf>,
    /// Outcomes of instance filters and priority scorers kept in memory
    /// (one per NodeClass generation, NodePool, modules, catalog version and
    /// instance types); past it, the least recently used goes.
    #[arg(long, env = "EXTENSION_CACHE_ENTRIES", default_value_t = ExtensionSettings::DEFAULT_CACHE_ENTRIES, value_parser = clap::value_parser!(u64).range(1..))]
    pub extension_cache_entries: u64,
    /// Extension evaluations that may call into modules at once; more wait
    /// for a turn.
    #[arg(long, env = "EXTENSION_CONCURRENCY", default_value_t = ExtensionSettings::DEFAULT_CONCURRENCY as u64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub extension_concurrency: u64,
    /// A registry (`host` or `host:port`) that `url` and `oci` extension
    /// sources may reach over plain HTTP, such as an in-cluster registry.
    /// Repeat for more. Every other host needs HTTPS.
    #[arg(
        long = "plain-http-registry",
        env = "PLAIN_HTTP_REGISTRIES",
        value_name = "HOST",
        value_delimiter = ','
    )]
    pub plain_http_registries: Vec<String>,
    /// A Docker `config.json` with credentials for private OCI registries,
    /// such as a mounted `kubernetes.io/dockerconfigjson` Secret.
    #[arg(long, env = "NODEWRIGHT_REGISTRY_CONFIG", value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// A directory of PEM public keys (`cosign.pub` of `cosign
    /// generate-key-pair`; every file not starting with `.`, such as a
    /// mounted ConfigMap): `oci:` extension modules then load only with a
    /// cosign signature by one of them.
    #[arg(long, env = "NODEWRIGHT_MODULE_SIGNATURE_KEYS", value_name = "DIR")]
    pub module_signature_keys: Option<PathBuf>,
    /// Log level: `error`, `warn`, `info`, `debug`, `trace`, or a
    /// `tracing` filter such as `info,nodewright=debug`.
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

/// Where instances come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CloudProviderKind {
    /// EC2.
    Aws,
    /// The in-memory simulated cloud.
    Simulated,
}

/// `--preference-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "PascalCase")]
pub enum PreferencePolicy {
    /// Honour preferences, relaxing them one by one when needed.
    Respect,
    /// Schedule as if there were none.
    Ignore,
}

/// `--min-values-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "PascalCase")]
pub enum MinValuesPolicyArg {
    /// Fail a NodeClaim short of `minValues`.
    Strict,
    /// Keep what there is.
    BestEffort,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines.
    Text,
}

/// Gates nodewright knows, and whether it has the feature.
const FEATURE_GATES: &[(&str, bool)] = &[
    ("ReservedCapacity", true),
    ("NodeRepair", true),
    ("SpotToSpotConsolidation", true),
    ("NodeOverlay", true),
    ("StaticCapacity", true),
    ("CapacityBuffer", false),
];

/// `Name=true|false,…` as `--feature-gates` reads it: each gate once, in
/// order; a gate nodewright does not know, or a value that is not a
/// boolean, is an error naming it.
pub fn feature_gates(text: &str) -> Result<Vec<(&'static str, bool)>, String> {
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, value) = entry
            .split_once('=')
            .ok_or_else(|| format!("--feature-gates {entry:?}: write Name=true or Name=false"))?;
        let on: bool = value.parse().map_err(|_| {
            format!("--feature-gates {name}={value}: the value must be true or false")
        })?;
        let Some((known, _)) = FEATURE_GATES.iter().find(|(known, _)| *known == name) else {
            let known: Vec<&str> = FEATURE_GATES.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "--feature-gates: unknown gate {name:?}; known: {}",
                known.join(", ")
            ));
        };
        out.push((*known, on));
    }
    Ok(out)
}

/// A Go-style duration (`1s`, `500ms`, `1m30s`).
fn duration(text: &str) -> Result<Duration, String> {
    parse_go_duration(text).map_err(|e| e.to_string())
}

impl ControllerArgs {
    /// `--cluster-endpoint` when given (an empty value counts as not
    /// given, as the chart's default is), checked to be an absolute URL
    /// with a host, as Karpenter checks it.
    pub fn cluster_endpoint(&self) -> Result<Option<String>, CliError> {
        let Some(endpoint) = self.cluster_endpoint.as_deref().filter(|e| !e.is_empty()) else {
            return Ok(None);
        };
        let host = endpoint
            .strip_prefix("https://")
            .or_else(|| endpoint.strip_prefix("http://"))
            .map(|rest| rest.split(['/', ':']).next().unwrap_or_default());
        match host {
            Some(host) if !host.is_empty() => Ok(Some(endpoint.to_string())),
            _ => Err(format!(
                "--cluster-endpoint {endpoint:?} is not a URL with a host (https://…); \
                 pass the API server URL nodes join (`aws eks describe-cluster \
                 --query cluster.endpoint`), or leave it out to have it asked of EKS"
            )
            .into()),
        }
    }

    /// Checks `--feature-gates`: known gates only; `ReservedCapacity` on;
    /// gates of features nodewright does not have off.
    pub fn check_feature_gates(&self) -> Result<(), CliError> {
        for (name, on) in feature_gates(&self.feature_gates)? {
            let built = FEATURE_GATES
                .iter()
                .any(|(known, built)| *known == name && *built);
            match (name, on, built) {
                ("ReservedCapacity", false, _) => {
                    return Err("--feature-gates ReservedCapacity=false: nodewright always uses capacity reservations a class selects; remove capacityReservationSelectorTerms instead".into());
                }
                (_, true, false) => {
                    return Err(format!(
                        "--feature-gates {name}=true: nodewright does not have this feature yet"
                    )
                    .into());
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether gate `name` is turned on (the last value given wins; off
    /// when not given). Read after [`Self::check_feature_gates`].
    pub fn feature_gate(&self, name: &str) -> bool {
        self.feature_gates
            .split(',')
            .filter_map(|entry| entry.trim().split_once('='))
            .rfind(|(gate, _)| *gate == name)
            .is_some_and(|(_, value)| value == "true")
    }

    /// The extension host settings these flags give.
    pub fn host_config(&self) -> Result<HostConfig, CliError> {
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
        let module_signature_keys = match &self.module_signature_keys {
            None => None,
            Some(dir) => Some(Arc::new(signing_keys(dir)?)),
        };
        Ok(HostConfig {
            cache_dir: self.extension_cache_dir.clone(),
            plain_http_hosts: self.plain_http_registries.clone(),
            registry_credentials,
            module_signature_keys,
            default_limits: Limits {
                timeout: self.extension_timeout,
                memory_bytes: self.extension_memory_mib as usize * 1024 * 1024,
            },
            ..HostConfig::default()
        })
    }

    /// How much extension work these flags let the controller keep and run at once.
    pub fn extension_settings(&self) -> ExtensionSettings {
        ExtensionSettings {
            cache_entries: self.extension_cache_entries,
            concurrency: usize::try_from(self.extension_concurrency).unwrap_or(usize::MAX),
        }
    }

    /// The operator settings these flags give.
    pub fn operator_settings(&self) -> OperatorSettings {
        let identity = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| format!("nodewright-{}", std::process::id()));
        let namespace = self
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("SYSTEM_NAMESPACE").ok())
            .unwrap_or_else(|| "kube-system".to_string());
        let lease = LeaseSettings {
            lease_duration: self.leader_election_lease_duration,
            renew_deadline: self.leader_election_renew_deadline,
            retry_period: self.leader_election_retry_period,
            ..LeaseSettings::new(&namespace, &self.leader_election_name, &identity)
        };
        let any = |port| SocketAddr::from((self.bind_address, port));
        OperatorSettings {
            provisioning: ProvisioningSettings {
                batch: BatchWindows {
                    idle: self.batch_idle_duration,
                    max: self.batch_max_duration,
                },
                scheduler: SchedulerOptions {
                    ignore_preferences: self.preference_policy == PreferencePolicy::Ignore,
                    min_values_policy: match self.min_values_policy {
                        MinValuesPolicyArg::Strict => MinValuesPolicy::Strict,
                        MinValuesPolicyArg::BestEffort => MinValuesPolicy::BestEffort,
                    },
                    ..SchedulerOptions::default()
                },
                ..ProvisioningSettings::default()
            },
            leader_election: self.leader_elect.then_some(lease),
            metrics_addr: any(self.metrics_port),
            health_addr: any(self.health_probe_port),
            node_repair: self.feature_gate("NodeRepair"),
            spot_to_spot_consolidation: self.feature_gate("SpotToSpotConsolidation"),
            node_overlay: self.feature_gate("NodeOverlay"),
            static_capacity: self.feature_gate("StaticCapacity"),
        }
    }
}

/// The public keys in `dir` (`--module-signature-keys`): every regular
/// file whose name does not start with `.` (a mounted ConfigMap's entries,
/// not its `..data` links' targets).
fn signing_keys(dir: &Path) -> Result<SigningKeys, CliError> {
    let flag = format!("--module-signature-keys {}", dir.display());
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{flag}: cannot read the directory: {e}"))?;
    let mut pems = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{flag}: cannot read {name}: {e}"))?;
        pems.push((name, text));
    }
    pems.sort();
    SigningKeys::from_pems(&flag, &pems).map_err(|e| e.to_string().into())
}
