//! What a class's placement group does to its instance types, as
//! Karpenter's placement group compatibility check and offering injection
//! do: a type whose `PlacementGroupInfo` lacks the group's strategy is not
//! offered, and every other type carries `karpenter.k8s.aws/placement-group-id`
//! (and, for a partition group, `karpenter.k8s.aws/placement-group-partition`
//! over `1..=partitionCount`) as requirements, so pods can select the group
//! and spread over its partitions.

use crate::apis::ec2nodeclass::{PlacementGroupStatus, PlacementGroupStrategy};
use crate::apis::labels::{PLACEMENT_GROUP_ID_LABEL_KEY, PLACEMENT_GROUP_PARTITION_LABEL_KEY};
use crate::aws::catalog::InstanceTypeInfo;
use crate::scheduling::{Operator, Requirement};

/// Whether `info` can launch into `group` (always, without a group).
pub fn joins(info: &InstanceTypeInfo, group: Option<&PlacementGroupStatus>) -> bool {
    let Some(group) = group else {
        return true;
    };
    info.placement_group_info.as_ref().is_some_and(|p| {
        p.supported_strategies
            .iter()
            .any(|s| s == group.strategy.as_str())
    })
}

/// The labels every type of a class in `group` carries, as requirements.
pub fn requirements(group: &PlacementGroupStatus) -> Vec<Requirement> {
    let mut out = vec![Requirement::single(PLACEMENT_GROUP_ID_LABEL_KEY, &group.id)];
    let partitions = group.partition_count.unwrap_or(0);
    if group.strategy == PlacementGroupStrategy::Partition && partitions > 0 {
        let values = (1..=partitions).map(|p| p.to_string()).collect();
        if let Ok(requirement) =
            Requirement::from_parts(PLACEMENT_GROUP_PARTITION_LABEL_KEY, Operator::In, values)
        {
            out.push(requirement);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::catalog::PlacementGroupInfo;

    fn group(strategy: PlacementGroupStrategy, partitions: Option<i32>) -> PlacementGroupStatus {
        PlacementGroupStatus {
            id: "pg-0123".to_string(),
            name: "tight".to_string(),
            strategy,
            partition_count: partitions,
            spread_level: None,
        }
    }

    fn info(strategies: &[&str]) -> InstanceTypeInfo {
        InstanceTypeInfo {
            instance_type: "m5.large".to_string(),
            placement_group_info: Some(PlacementGroupInfo {
                supported_strategies: strategies.iter().map(|s| s.to_string()).collect(),
            }),
            ..InstanceTypeInfo::default()
        }
    }

    #[test]
    fn a_type_joins_only_groups_whose_strategy_it_supports() {
        let cluster = group(PlacementGroupStrategy::Cluster, None);
        assert!(joins(
            &info(&["cluster", "partition", "spread"]),
            Some(&cluster)
        ));
        assert!(!joins(&info(&["partition", "spread"]), Some(&cluster)));
        assert!(joins(&info(&["partition", "spread"]), None));
        let unknown = InstanceTypeInfo::default();
        assert!(
            !joins(&unknown, Some(&cluster)),
            "no PlacementGroupInfo: no strategy"
        );
    }

    #[test]
    fn partition_groups_label_every_partition_and_others_only_the_id() {
        let labels = |g: &PlacementGroupStatus| -> Vec<(String, Vec<String>)> {
            requirements(g)
                .iter()
                .map(|r| (r.key.clone(), r.values.values().to_vec()))
                .collect()
        };
        assert_eq!(
            labels(&group(PlacementGroupStrategy::Partition, Some(3))),
            [
                (
                    PLACEMENT_GROUP_ID_LABEL_KEY.to_string(),
                    vec!["pg-0123".to_string()]
                ),
                (
                    PLACEMENT_GROUP_PARTITION_LABEL_KEY.to_string(),
                    vec!["1".to_string(), "2".to_string(), "3".to_string()]
                ),
            ]
        );
        assert_eq!(
            labels(&group(PlacementGroupStrategy::Spread, None)),
            [(
                PLACEMENT_GROUP_ID_LABEL_KEY.to_string(),
                vec!["pg-0123".to_string()]
            )]
        );
    }
}
