//! The node-repair policies of EC2 nodes (Karpenter's AWS provider's
//! `RepairPolicies`): which Node conditions, held how long, make a node
//! worth replacing. The kubelet reports `Ready`; the EKS node monitoring
//! agent reports the others.

use std::time::Duration;

use super::RepairPolicy;

/// Node conditions after which an EC2 node is replaced: the kubelet's
/// `Ready` False or Unknown for 30 minutes, and the EKS node monitoring
/// agent's conditions (accelerated hardware 10 minutes, the rest 30).
pub fn repair_policies() -> Vec<RepairPolicy> {
    let policy = |condition_type, condition_status, minutes: u64| RepairPolicy {
        condition_type,
        condition_status,
        toleration: Duration::from_secs(minutes * 60),
    };
    vec![
        policy("Ready", "False", 30),
        policy("Ready", "Unknown", 30),
        policy("AcceleratedHardwareReady", "False", 10),
        policy("StorageReady", "False", 30),
        policy("NetworkingReady", "False", 30),
        policy("KernelReady", "False", 30),
        policy("ContainerRuntimeReady", "False", 30),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policies_are_karpenters_aws_list() {
        let listed: Vec<(&str, &str, u64)> = repair_policies()
            .iter()
            .map(|p| {
                (
                    p.condition_type,
                    p.condition_status,
                    p.toleration.as_secs() / 60,
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("Ready", "False", 30),
                ("Ready", "Unknown", 30),
                ("AcceleratedHardwareReady", "False", 10),
                ("StorageReady", "False", 30),
                ("NetworkingReady", "False", 30),
                ("KernelReady", "False", 30),
                ("ContainerRuntimeReady", "False", 30),
            ]
        );
    }
}
