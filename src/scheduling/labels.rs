//! Well-known and restricted label keys as Karpenter v1 defines them, so that
//! compatibility checks treat provider labels the same way Karpenter does.

// Short names for the label keys defined in `crate::apis::labels`.
pub use crate::apis::labels::{
    ARCH_LABEL_KEY as ARCH, CAPACITY_RESERVATION_ID_LABEL_KEY as CAPACITY_RESERVATION_ID,
    CAPACITY_TYPE_LABEL_KEY as CAPACITY_TYPE, HOSTNAME_LABEL_KEY as HOSTNAME,
    INSTANCE_TYPE_LABEL_KEY as INSTANCE_TYPE, NODE_POOL_LABEL_KEY as NODE_POOL, OS_LABEL_KEY as OS,
    REGION_LABEL_KEY as REGION, WINDOWS_BUILD_LABEL_KEY as WINDOWS_BUILD, ZONE_LABEL_KEY as ZONE,
};

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
    crate::apis::labels::normalize_label(key)
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
