//! Node repair's decisions, without clients: which of a Node's conditions
//! makes it unhealthy under the cloud provider's repair policies and from
//! when it may be repaired, and whether a group of nodes (a NodePool, or
//! the cluster) has too many unhealthy nodes for one more to be replaced
//! (Karpenter's `node.health` rules).

use std::hash::{Hash, Hasher};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::cloudprovider::RepairPolicy;

/// Share of a group's nodes that may be unhealthy while repair goes on,
/// in percent, rounded up like a PodDisruptionBudget percentage.
pub const ALLOWED_UNHEALTHY_PERCENT: usize = 20;

/// The condition that makes a node unhealthy, and when it may be repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// The Node condition's type, e.g. `Ready`.
    pub condition_type: String,
    /// The condition's `lastTransitionTime` plus its policy's toleration.
    pub repair_at: Timestamp,
}

impl Unhealthy {
    /// How long until the node may be repaired; `None` once it may.
    pub fn wait(&self, now: Timestamp) -> Option<Duration> {
        let left = now.duration_until(self.repair_at);
        (left > SignedDuration::ZERO)
            .then(|| Duration::try_from(left).ok())
            .flatten()
    }
}

fn conditions(node: &Node) -> &[NodeCondition] {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// A hash of the node's conditions' types, statuses and transition times:
/// as in Karpenter, repair looks at a node again when these change (or when
/// it asked to), not on every status heartbeat.
pub fn conditions_fingerprint(node: &Node) -> Option<u64> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for condition in conditions(node) {
        let since = condition.last_transition_time.as_ref().map(|t| t.0);
        (&condition.type_, &condition.status, since).hash(&mut hasher);
    }
    Some(hasher.finish())
}

fn matching<'a>(node: &'a Node, policy: &RepairPolicy) -> Option<&'a NodeCondition> {
    conditions(node)
        .iter()
        .find(|c| c.type_ == policy.condition_type)
        .filter(|c| c.status == policy.condition_status)
}

/// The condition of `node` that one of `policies` names (type and status)
/// whose toleration ends first; `None` for a healthy node. A condition
/// without a `lastTransitionTime` counts from long ago, as in Karpenter
/// (Go's zero time).
pub fn unhealthy_condition(node: &Node, policies: &[RepairPolicy]) -> Option<Unhealthy> {
    policies
        .iter()
        .filter_map(|policy| {
            let condition = matching(node, policy)?;
            let since = condition
                .last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
            let toleration =
                SignedDuration::try_from(policy.toleration).unwrap_or(SignedDuration::MAX);
            let repair_at = since.checked_add(toleration).unwrap_or(Timestamp::MAX);
            Some(Unhealthy {
                condition_type: condition.type_.clone(),
                repair_at,
            })
        })
        .min_by_key(|u| u.repair_at)
}

/// Whether any condition of `node` matches a policy, tolerated or not.
pub fn is_unhealthy(node: &Node, policies: &[RepairPolicy]) -> bool {
    policies.iter().any(|p| matching(node, p).is_some())
}

/// How many of `total` nodes may be unhealthy: 20%, rounded up (one of
/// three nodes may be, as one pod of three may be with a 20% budget).
pub fn allowed_unhealthy(total: usize) -> usize {
    (total * ALLOWED_UNHEALTHY_PERCENT).div_ceil(100)
}

/// Whether more of `nodes` are unhealthy than [`allowed_unhealthy`] lets
/// repair go on with.
pub fn too_many_unhealthy<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    policies: &[RepairPolicy],
) -> bool {
    let (mut total, mut unhealthy) = (0, 0);
    for node in nodes {
        total += 1;
        if is_unhealthy(node, policies) {
            unhealthy += 1;
        }
    }
    unhealthy > allowed_unhealthy(total)
}

/// A condition type in snake_case as Karpenter's metric labels write it
/// (`AcceleratedHardwareReady` → `accelerated_hardware_ready`,
/// `DiskIOReady` → `disk_io_ready`).
pub fn snake_case(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    // An underscore before each capital that starts a lower-case word.
    let mut words = Vec::with_capacity(chars.len() + 4);
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i + 2 < chars.len()
            && chars[i + 1].is_ascii_uppercase()
            && chars[i + 2].is_ascii_lowercase();
        words.push(chars[i]);
        i += 1;
        if starts_word {
            words.extend(['_', chars[i]]);
            i += 1;
            while i < chars.len() && chars[i].is_ascii_lowercase() {
                words.push(chars[i]);
                i += 1;
            }
        }
    }
    // Then one between a lower-case letter or digit and a capital.
    let mut out = String::with_capacity(words.len() + 4);
    let mut i = 0;
    while i < words.len() {
        out.push(words[i]);
        let lower_then_upper = (words[i].is_ascii_lowercase() || words[i].is_ascii_digit())
            && words.get(i + 1).is_some_and(char::is_ascii_uppercase);
        if lower_then_upper {
            out.extend(['_', words[i + 1]]);
            i += 1;
        }
        i += 1;
    }
    out.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloudprovider::repair_policies;

    fn at(minute: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + minute * 60).unwrap()
    }

    fn node(conditions: &[(&str, &str, Option<i64>)]) -> Node {
        let conditions: Vec<serde_json::Value> = conditions
            .iter()
            .map(|(type_, status, minute)| {
                let mut c = serde_json::json!({"type": type_, "status": status});
                if let Some(minute) = minute {
                    c["lastTransitionTime"] = serde_json::json!(at(*minute).to_string());
                }
                c
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn only_a_change_of_type_status_or_transition_time_changes_the_fingerprint() {
        let ready = node(&[("Ready", "True", Some(0))]);
        let mut heartbeat = ready.clone();
        if let Some(condition) = heartbeat
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            condition.message = Some("kubelet is posting ready status".to_string());
        }
        let fingerprint = conditions_fingerprint(&ready);
        assert_eq!(conditions_fingerprint(&heartbeat), fingerprint);
        for changed in [
            node(&[("Ready", "False", Some(0))]),
            node(&[("Ready", "True", Some(1))]),
            node(&[
                ("Ready", "True", Some(0)),
                ("DiskPressure", "False", Some(0)),
            ]),
        ] {
            assert_ne!(conditions_fingerprint(&changed), fingerprint);
        }
    }

    #[test]
    fn a_matching_type_and_status_is_unhealthy_until_its_toleration() {
        let policies = repair_policies();
        let found = unhealthy_condition(&node(&[("Ready", "False", Some(0))]), &policies).unwrap();
        assert_eq!(found.condition_type, "Ready");
        assert_eq!(found.repair_at, at(30));
        assert_eq!(found.wait(at(20)), Some(Duration::from_secs(600)));
        assert_eq!(found.wait(at(30)), None);
        assert_eq!(found.wait(at(60)), None);
        let unknown = node(&[("Ready", "Unknown", Some(0))]);
        assert!(unhealthy_condition(&unknown, &policies).is_some());
    }

    #[test]
    fn another_type_or_status_is_healthy() {
        let policies = repair_policies();
        for conditions in [
            [("Ready", "True", Some(0))],
            [("FakeHealthyNode", "False", Some(0))],
            [("StorageReady", "Unknown", Some(0))],
        ] {
            let n = node(&conditions);
            assert_eq!(unhealthy_condition(&n, &policies), None, "{conditions:?}");
            assert!(!is_unhealthy(&n, &policies));
        }
        assert_eq!(unhealthy_condition(&node(&[]), &policies), None);
    }

    #[test]
    fn the_condition_whose_toleration_ends_first_is_chosen() {
        let policies = repair_policies();
        // Ready (30 minutes) since 0 ends at 30; accelerated hardware
        // (10 minutes) since 5 ends at 15.
        let n = node(&[
            ("Ready", "False", Some(0)),
            ("AcceleratedHardwareReady", "False", Some(5)),
        ]);
        let found = unhealthy_condition(&n, &policies).unwrap();
        assert_eq!(found.condition_type, "AcceleratedHardwareReady");
        assert_eq!(found.wait(at(12)), Some(Duration::from_secs(180)));
        // Since 25, accelerated hardware ends at 35, after Ready's 30.
        let n = node(&[
            ("Ready", "False", Some(0)),
            ("AcceleratedHardwareReady", "False", Some(25)),
        ]);
        assert_eq!(
            unhealthy_condition(&n, &policies).unwrap().condition_type,
            "Ready"
        );
    }

    #[test]
    fn a_condition_without_a_transition_time_counts_from_long_ago() {
        let found =
            unhealthy_condition(&node(&[("KernelReady", "False", None)]), &repair_policies())
                .unwrap();
        assert_eq!(found.wait(at(0)), None);
    }

    #[test]
    fn twenty_percent_rounded_up_may_be_unhealthy() {
        for (total, allowed) in [(0, 0), (1, 1), (3, 1), (5, 1), (6, 2), (10, 2), (11, 3)] {
            assert_eq!(allowed_unhealthy(total), allowed, "{total}");
        }
        let policies = repair_policies();
        let sick = node(&[("Ready", "False", Some(0))]);
        let well = node(&[("Ready", "True", Some(0))]);
        let group = |sick_count: usize, total: usize| {
            let mut nodes = vec![sick.clone(); sick_count];
            nodes.resize(total, well.clone());
            too_many_unhealthy(&nodes, &policies)
        };
        assert!(!group(1, 3), "one of three is within 20% rounded up");
        assert!(group(2, 3));
        assert!(!group(2, 10));
        assert!(group(3, 10));
    }

    #[test]
    fn condition_types_are_snake_cased_as_karpenter_does() {
        for (from, to) in [
            ("Ready", "ready"),
            ("AcceleratedHardwareReady", "accelerated_hardware_ready"),
            ("ContainerRuntimeReady", "container_runtime_ready"),
            ("DiskIOReady", "disk_io_ready"),
            ("BadNode", "bad_node"),
            ("Gpu2Ready", "gpu2_ready"),
            ("", ""),
        ] {
            assert_eq!(snake_case(from), to, "{from}");
        }
    }
}
