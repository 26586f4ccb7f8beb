//! Short names for the label keys the scheduler uses, and Karpenter's
//! well-known / restricted rules, all taken from [`crate::apis::labels`]:
//! that module is the one table of label keys.

pub use crate::apis::labels::{
    ARCH_LABEL_KEY as ARCH, CAPACITY_RESERVATION_ID_LABEL_KEY as CAPACITY_RESERVATION_ID,
    CAPACITY_TYPE_LABEL_KEY as CAPACITY_TYPE, HOSTNAME_LABEL_KEY as HOSTNAME,
    INSTANCE_TYPE_LABEL_KEY as INSTANCE_TYPE, NODE_POOL_LABEL_KEY as NODE_POOL, OS_LABEL_KEY as OS,
    REGION_LABEL_KEY as REGION, WELL_KNOWN_LABELS, WINDOWS_BUILD_LABEL_KEY as WINDOWS_BUILD,
    ZONE_LABEL_KEY as ZONE,
};

/// Whether `key` is well known: its values come from the instance type, so
/// a NodePool need not define it for a pod to select on it.
pub fn is_well_known(key: &str) -> bool {
    WELL_KNOWN_LABELS.contains(&key)
}

/// Karpenter's `IsRestrictedLabel`: hostname, or a key in a restricted domain
/// that is not well known. Pods selecting such keys can never be provisioned for.
pub fn is_restricted(key: &str) -> bool {
    crate::apis::labels::is_restricted_label(key)
}

/// Maps deprecated beta label keys to their stable names
/// (Karpenter's `NormalizedLabels`).
pub fn normalize(key: &str) -> &str {
    crate::apis::labels::normalize_label(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::labels::{EC2_NODE_CLASS_LABEL_KEY, INSTANCE_FAMILY_LABEL_KEY};

    #[test]
    fn restricted_and_well_known() {
        assert!(is_restricted(HOSTNAME));
        assert!(is_restricted("karpenter.sh/foo"));
        assert!(is_restricted("sub.karpenter.sh/foo"));
        assert!(!is_restricted(CAPACITY_TYPE));
        assert!(!is_restricted(INSTANCE_FAMILY_LABEL_KEY));
        assert!(!is_restricted("example.com/team"));
        assert_eq!(normalize("beta.kubernetes.io/arch"), ARCH);
    }

    #[test]
    fn the_node_class_label_is_restricted_not_well_known() {
        // Karpenter labels nodes with it but rejects pods that select on it.
        assert!(!is_well_known(EC2_NODE_CLASS_LABEL_KEY));
        assert!(is_restricted(EC2_NODE_CLASS_LABEL_KEY));
    }
}
