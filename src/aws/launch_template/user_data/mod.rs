//! User data per AMI family: the bootstrap a node runs to join the cluster,
//! merged with the class's `spec.userData` the way Karpenter merges it.
//!
//! | family | format |
//! |---|---|
//! | AL2023 | MIME multipart; the user's parts first, then a nodeadm `NodeConfig` |
//! | AL2 | MIME multipart; the user's parts first, then a `/etc/eks/bootstrap.sh` call |
//! | Bottlerocket | TOML; the user's settings with the cluster-defining keys overwritten |
//! | Windows | one `<powershell>` block; the user's script before `Start-EKSBootstrap.ps1` |
//! | Custom | the user's data, unchanged |
//!
//! Everything here returns the plain text; the launch template carries it
//! base64-encoded.

mod bottlerocket;
mod eks_bootstrap;
pub mod mime;
mod nodeadm;
mod windows;

#[cfg(test)]
mod golden_tests;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

use super::LaunchSettings;
use crate::apis::ec2nodeclass::{AMIFamily, KubeletConfiguration};
use crate::apis::labels::{
    CAPACITY_TYPE_LABEL_KEY, NODE_DO_NOT_SYNC_TAINTS_LABEL_KEY, UNREGISTERED_TAINT_KEY,
};

/// Why user data could not be rendered; each names the field to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    /// `spec.userData` looks like MIME but is not a usable multipart archive.
    #[error("spec.userData is not a valid MIME multipart document: {0}")]
    Mime(String),
    /// Bottlerocket `spec.userData` is not valid TOML.
    #[error("spec.userData is not valid TOML for Bottlerocket: {0}")]
    Toml(String),
    /// Bottlerocket `spec.userData` has a key of the wrong kind.
    #[error("spec.userData: {0}")]
    Bottlerocket(String),
    /// A generated document could not be written (not expected).
    #[error("cannot write the user data: {0}")]
    Render(String),
    /// AL2023 needs the service CIDR and the controller was not given it.
    #[error(
        "the cluster's service CIDR is unknown, and AL2023's nodeadm needs it: set it in the controller's launch settings"
    )]
    MissingServiceCidr,
}

/// Everything one launch template's user data is made of.
#[derive(Debug, Clone)]
pub struct BootstrapInput<'a> {
    /// The class's AMI family.
    pub family: AMIFamily,
    /// Cluster facts.
    pub settings: &'a LaunchSettings,
    /// `spec.kubelet`.
    pub kubelet: Option<&'a KubeletConfiguration>,
    /// Pods per node of the instance types this template serves (their pod
    /// capacity; `spec.kubelet.maxPods` when set).
    pub max_pods: Option<i64>,
    /// Labels the kubelet registers the node with ([`node_labels`]).
    pub labels: BTreeMap<String, String>,
    /// Taints the kubelet registers the node with ([`registration_taints`]).
    pub taints: Vec<Taint>,
    /// `spec.userData`.
    pub custom: Option<&'a str>,
    /// `spec.instanceStorePolicy: RAID0`.
    pub instance_store_raid0: bool,
}

/// The user data for `input`, as plain text.
pub fn render(input: &BootstrapInput<'_>) -> Result<String, UserDataError> {
    match input.family {
        AMIFamily::AL2023 => nodeadm::render(input),
        AMIFamily::AL2 => eks_bootstrap::render(input),
        AMIFamily::Bottlerocket => bottlerocket::render(input),
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            Ok(windows::render(input))
        }
        AMIFamily::Custom => Ok(input.custom.unwrap_or_default().to_string()),
    }
}

/// The labels a node registers with: the NodeClaim's labels and its
/// capacity type, plus `karpenter.sh/do-not-sync-taints=true` for every
/// family but Custom (the kubelet registers the taints itself, so they
/// need not be synced afterwards); labels in the `kubernetes.io` and
/// `k8s.io` domains are dropped, as the NodeRestriction admission plugin
/// would refuse a kubelet that sets them.
pub fn node_labels(
    claim_labels: &BTreeMap<String, String>,
    capacity_type: &str,
    family: AMIFamily,
) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = claim_labels
        .iter()
        .filter(|(key, _)| !is_kubelet_restricted(key))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.insert(
        CAPACITY_TYPE_LABEL_KEY.to_string(),
        capacity_type.to_string(),
    );
    if family != AMIFamily::Custom {
        labels.insert(
            NODE_DO_NOT_SYNC_TAINTS_LABEL_KEY.to_string(),
            "true".to_string(),
        );
    }
    labels
}

fn is_kubelet_restricted(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|restricted| domain == *restricted || domain.ends_with(&format!(".{restricted}")))
}

/// The taints a node registers with: the NodeClaim's taints and startup
/// taints, and `karpenter.sh/unregistered:NoExecute` (lifted when the
/// NodeClaim controller sees the node register).
pub fn registration_taints(taints: &[Taint], startup_taints: &[Taint]) -> Vec<Taint> {
    let mut out: Vec<Taint> = taints.iter().chain(startup_taints).cloned().collect();
    if !out
        .iter()
        .any(|t| t.key == UNREGISTERED_TAINT_KEY && t.effect == "NoExecute")
    {
        out.push(Taint {
            key: UNREGISTERED_TAINT_KEY.to_string(),
            effect: "NoExecute".to_string(),
            value: None,
            time_added: None,
        });
    }
    out
}

impl BootstrapInput<'_> {
    /// DNS server IPs for pods: `spec.kubelet.clusterDNS`, else the
    /// cluster DNS IP of the launch settings.
    pub fn cluster_dns(&self) -> Vec<String> {
        match self.kubelet.and_then(|k| k.cluster_dns.clone()) {
            Some(dns) if !dns.is_empty() => dns,
            _ => self.settings.cluster_dns_ip.iter().cloned().collect(),
        }
    }

    /// `--node-labels="k=v,…"`, sorted; `None` without labels.
    fn node_labels_arg(&self) -> Option<String> {
        if self.labels.is_empty() {
            return None;
        }
        let joined: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        Some(format!("--node-labels={}", quoted(&joined.join(","))))
    }

    /// `--register-with-taints="k=v:Effect,…"`.
    fn taints_arg(&self) -> String {
        let joined: Vec<String> = self.taints.iter().map(taint_string).collect();
        format!("--register-with-taints={}", quoted(&joined.join(",")))
    }

    /// Kubelet flags for the flag-driven bootstraps (AL2, Windows): labels,
    /// taints, max pods and the `spec.kubelet` settings that have a flag.
    fn kubelet_extra_args(&self) -> Vec<String> {
        let mut args: Vec<String> = self.node_labels_arg().into_iter().collect();
        args.push(self.taints_arg());
        if let Some(max_pods) = self.max_pods {
            args.push(format!("--max-pods={max_pods}"));
        }
        let Some(kubelet) = self.kubelet else {
            return args;
        };
        if let Some(pods_per_core) = kubelet.pods_per_core {
            args.push(format!("--pods-per-core={pods_per_core}"));
        }
        let maps = [
            ("--system-reserved", &kubelet.system_reserved, "="),
            ("--kube-reserved", &kubelet.kube_reserved, "="),
            ("--eviction-hard", &kubelet.eviction_hard, "<"),
            ("--eviction-soft", &kubelet.eviction_soft, "<"),
            (
                "--eviction-soft-grace-period",
                &kubelet.eviction_soft_grace_period,
                "=",
            ),
        ];
        for (flag, map, separator) in maps {
            if let Some(map) = map.as_ref().filter(|m| !m.is_empty()) {
                let joined: Vec<String> = map
                    .iter()
                    .map(|(k, v)| format!("{k}{separator}{v}"))
                    .collect();
                args.push(format!("{flag}={}", quoted(&joined.join(","))));
            }
        }
        if let Some(seconds) = kubelet.eviction_max_pod_grace_period {
            args.push(format!("--eviction-max-pod-grace-period={seconds}"));
        }
        if let Some(high) = kubelet.image_gc_high_threshold_percent {
            args.push(format!("--image-gc-high-threshold={high}"));
        }
        if let Some(low) = kubelet.image_gc_low_threshold_percent {
            args.push(format!("--image-gc-low-threshold={low}"));
        }
        if let Some(quota) = kubelet.cpu_cfs_quota {
            args.push(format!("--cpu-cfs-quota={quota}"));
        }
        args
    }
}

/// `key=value:Effect`, or `key:Effect` without a value (the kubelet's form).
fn taint_string(taint: &Taint) -> String {
    match taint.value.as_deref().filter(|v| !v.is_empty()) {
        Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
        None => format!("{}:{}", taint.key, taint.effect),
    }
}

/// A double-quoted string with `\` and `"` escaped.
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_labels_drop_kubelet_restricted_domains_and_mark_taints_as_registered() {
        let claim: BTreeMap<String, String> = [
            ("karpenter.sh/nodepool", "general"),
            ("kubernetes.io/arch", "amd64"),
            ("node.kubernetes.io/instance-type", "m5.large"),
            ("node-restriction.kubernetes.io/team", "a"),
            ("foo.k8s.io/bar", "b"),
            ("k8s.io/bar", "c"),
            ("team", "web"),
            ("example.com/kubernetes.io", "kept"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let labels = node_labels(&claim, "spot", AMIFamily::AL2023);
        let keys: Vec<&str> = labels.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "example.com/kubernetes.io",
                "karpenter.sh/capacity-type",
                "karpenter.sh/do-not-sync-taints",
                "karpenter.sh/nodepool",
                "team"
            ]
        );
        assert_eq!(labels["karpenter.sh/capacity-type"], "spot");
        let custom = node_labels(&claim, "spot", AMIFamily::Custom);
        assert!(!custom.contains_key("karpenter.sh/do-not-sync-taints"));
    }

    #[test]
    fn the_unregistered_taint_is_added_once() {
        let taint = |key: &str, value: Option<&str>, effect: &str| Taint {
            key: key.to_string(),
            value: value.map(str::to_string),
            effect: effect.to_string(),
            time_added: None,
        };
        let taints = registration_taints(
            &[taint("dedicated", Some("gpu"), "NoSchedule")],
            &[taint("startup", None, "NoExecute")],
        );
        let rendered: Vec<String> = taints.iter().map(taint_string).collect();
        assert_eq!(
            rendered,
            [
                "dedicated=gpu:NoSchedule",
                "startup:NoExecute",
                "karpenter.sh/unregistered:NoExecute"
            ]
        );
        let again = registration_taints(&taints, &[]);
        assert_eq!(again.len(), 3);
    }
}
