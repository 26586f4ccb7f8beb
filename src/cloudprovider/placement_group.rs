//! What a class's placement group (`status.placementGroup`) means for the
//! NodeClaims launched from it, for every cloud provider: the labels
//! Karpenter sets, the partition a NodeClaim targets, and placement group
//! drift.

use crate::apis::ec2nodeclass::PlacementGroupStrategy;
use crate::apis::labels::{PLACEMENT_GROUP_ID_LABEL_KEY, PLACEMENT_GROUP_PARTITION_LABEL_KEY};
use crate::apis::{EC2NodeClass, NodeClaim, RequirementOperator};

/// The lowest partition the NodeClaim's requirements allow, when they name
/// any (Karpenter's deterministic pick: EC2 takes one partition number).
pub fn targeted_partition(claim: &NodeClaim) -> Option<i32> {
    claim
        .spec
        .requirements
        .iter()
        .find(|r| {
            r.key == PLACEMENT_GROUP_PARTITION_LABEL_KEY && r.operator == RequirementOperator::In
        })
        .and_then(|r| {
            r.values()
                .iter()
                .filter_map(|v| v.parse::<i32>().ok())
                .min()
        })
}

/// The labels of a NodeClaim launched from `class` (Karpenter's): the
/// group's id, and for a partition group the partition — the one the
/// instance is in when known, else `""` until registration reads it.
pub fn placement_group_labels(
    class: &EC2NodeClass,
    partition: Option<i32>,
) -> Vec<(&'static str, String)> {
    let Some(group) = class
        .status
        .as_ref()
        .and_then(|s| s.placement_group.as_ref())
    else {
        return Vec::new();
    };
    let mut labels = vec![(PLACEMENT_GROUP_ID_LABEL_KEY, group.id.clone())];
    if group.strategy == PlacementGroupStrategy::Partition {
        let partition = partition.map(|p| p.to_string()).unwrap_or_default();
        labels.push((PLACEMENT_GROUP_PARTITION_LABEL_KEY, partition));
    }
    labels
}

/// Whether `claim` is in another placement group than `class` launches
/// into now (Karpenter's `isPlacementGroupDrifted`: the claim's
/// `karpenter.k8s.aws/placement-group-id` against the class's group, either
/// of them absent).
pub fn placement_group_drifted(claim: &NodeClaim, class: &EC2NodeClass) -> bool {
    let claimed = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(PLACEMENT_GROUP_ID_LABEL_KEY))
        .map(String::as_str)
        .unwrap_or_default();
    let current = class
        .status
        .as_ref()
        .and_then(|s| s.placement_group.as_ref())
        .map(|g| g.id.as_str())
        .unwrap_or_default();
    claimed != current
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(group: &str) -> EC2NodeClass {
        crate::yaml::from_str(&format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: c}}\nspec:\n  role: R\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  subnetSelectorTerms: [{{id: s}}]\n  securityGroupSelectorTerms: [{{id: sg}}]\nstatus: {{{group}}}\n"
        ))
        .unwrap()
    }

    fn claim(extra: &str) -> NodeClaim {
        crate::yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: n{extra}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: c}}\n  requirements:\n  - {{key: karpenter.k8s.aws/placement-group-partition, operator: In, values: ['7', '3', '5']}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn the_lowest_allowed_partition_is_targeted() {
        assert_eq!(targeted_partition(&claim("")), Some(3));
        let mut open = claim("");
        open.spec.requirements.clear();
        assert_eq!(targeted_partition(&open), None);
    }

    #[test]
    fn labels_name_the_group_and_a_partition_groups_partition() {
        let partition =
            class("placementGroup: {id: pg-1, name: p, strategy: partition, partitionCount: 7}");
        assert_eq!(
            placement_group_labels(&partition, Some(3)),
            [
                (PLACEMENT_GROUP_ID_LABEL_KEY, "pg-1".to_string()),
                (PLACEMENT_GROUP_PARTITION_LABEL_KEY, "3".to_string())
            ]
        );
        assert_eq!(
            placement_group_labels(&partition, None)[1],
            (PLACEMENT_GROUP_PARTITION_LABEL_KEY, String::new()),
            "unknown until registration"
        );
        let cluster = class("placementGroup: {id: pg-2, name: c, strategy: cluster}");
        assert_eq!(
            placement_group_labels(&cluster, Some(3)),
            [(PLACEMENT_GROUP_ID_LABEL_KEY, "pg-2".to_string())]
        );
        assert!(placement_group_labels(&class(""), None).is_empty());
    }

    #[test]
    fn a_claim_in_another_group_or_none_has_drifted() {
        let grouped = class("placementGroup: {id: pg-1, name: p, strategy: cluster}");
        let mut inside = claim("");
        inside.metadata.labels =
            Some([(PLACEMENT_GROUP_ID_LABEL_KEY.to_string(), "pg-1".to_string())].into());
        assert!(!placement_group_drifted(&inside, &grouped));
        assert!(
            placement_group_drifted(&claim(""), &grouped),
            "launched outside it"
        );
        assert!(
            placement_group_drifted(&inside, &class("")),
            "the group is gone"
        );
        assert!(!placement_group_drifted(&claim(""), &class("")));
        let other = class("placementGroup: {id: pg-9, name: p, strategy: cluster}");
        assert!(
            placement_group_drifted(&inside, &other),
            "recreated under the same name"
        );
    }
}
