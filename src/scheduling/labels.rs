//! Well-known and restricted label keys as Karpenter v1 defines them, so that
//! compatibility checks treat provider labels the same way Karpenter does.

/// Zone label every node carries.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// Region label.
pub const REGION: &str = "topology.kubernetes.io/region";
/// Instance type label.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// CPU architecture label.
pub const ARCH: &str = "kubernetes.io/arch";
/// Operating system label.
pub const OS: &str = "kubernetes.io/os";
/// Windows build label.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// Hostname label; unique per node, restricted in NodePools.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// Capacity type label (`on-demand`, `spot`, `reserved`).
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// The NodePool a node belongs to.
pub const NODE_POOL: &str = "karpenter.sh/nodepool";
/// Capacity reservation id label (AWS).
pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";

/// Labels whose absence from a NodePool does not make a pod requirement on
/// them incompatible: the instance types supply their values.
pub const WELL_KNOWN_LABELS: &[&str] = &[
    NODE_POOL,
    CAPACITY_TYPE,
    ZONE,
    REGION,
    INSTANCE_TYPE,
    ARCH,
    OS,
    WINDOWS_BUILD,
    "topology.k8s.aws/zone-id",
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-type",
    CAPACITY_RESERVATION_ID,
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// Label domains a pod may not select on unless the key is well known
/// (Karpenter's `RestrictedLabelDomains` plus the AWS provider's).
pub const RESTRICTED_LABEL_DOMAINS: &[&str] = &["karpenter.sh", "karpenter.k8s.aws"];

/// Whether `key` is one of [`WELL_KNOWN_LABELS`].
pub fn is_well_known(key: &str) -> bool {
    WELL_KNOWN_LABELS.contains(&key)
}

/// Karpenter's `IsRestrictedLabel`: hostname, or a key in a restricted domain
/// that is not well known. Pods selecting such keys can never be provisioned for.
pub fn is_restricted(key: &str) -> bool {
    if is_well_known(key) {
        return false;
    }
    if key == HOSTNAME {
        return true;
    }
    let domain = key.split_once('/').map(|(d, _)| d).unwrap_or("");
    RESTRICTED_LABEL_DOMAINS
        .iter()
        .any(|restricted| domain == *restricted || domain.ends_with(&format!(".{restricted}")))
}

/// Maps deprecated beta label keys to their stable names
/// (Karpenter's `NormalizedLabels`).
pub fn normalize(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => ZONE,
        "failure-domain.beta.kubernetes.io/region" => REGION,
        "beta.kubernetes.io/arch" => ARCH,
        "beta.kubernetes.io/os" => OS,
        "beta.kubernetes.io/instance-type" => INSTANCE_TYPE,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_and_well_known() {
        assert!(is_restricted(HOSTNAME));
        assert!(is_restricted("karpenter.sh/foo"));
        assert!(is_restricted("sub.karpenter.sh/foo"));
        assert!(!is_restricted(CAPACITY_TYPE));
        assert!(!is_restricted("karpenter.k8s.aws/instance-family"));
        assert!(!is_restricted("example.com/team"));
        assert_eq!(normalize("beta.kubernetes.io/arch"), ARCH);
    }
}
