//! What a NodePool asks for on the interruption kinds that may wait: an AWS
//! Health scheduled change and a rebalance recommendation. Carried as
//! annotations, so Karpenter reads the same NodePool and ignores them:
//!
//! - `nodewright.io/interruption-scheduled-change`: `Drain` (default, as
//!   Karpenter), `Cordon` or `Ignore`;
//! - `nodewright.io/interruption-rebalance`: `Ignore` (default, as
//!   Karpenter: an event only), `Cordon` or `Drain`.
//!
//! Spot interruptions, instance state changes and capacity-reservation
//! interruptions take the instance away whatever is asked: any other
//! `nodewright.io/interruption-*` annotation is an error that says so.

use std::collections::BTreeMap;

use crate::apis::validation::ValidationError;

/// Annotation prefix of the interruption policies.
pub const PREFIX: &str = "nodewright.io/interruption-";
/// Policy for AWS Health scheduled changes.
pub const SCHEDULED_CHANGE_ANNOTATION_KEY: &str = "nodewright.io/interruption-scheduled-change";
/// Policy for rebalance recommendations.
pub const REBALANCE_ANNOTATION_KEY: &str = "nodewright.io/interruption-rebalance";

/// What is done with a node an interruption message names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Delete the NodeClaim: the node is tainted and drained, then goes.
    Drain,
    /// Cordon the node and publish an event; its pods stay (an operator
    /// moves the data first).
    Cordon,
    /// Publish an event only.
    Ignore,
}

impl Policy {
    /// The policy as written in the annotation and in metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Drain => "Drain",
            Policy::Cordon => "Cordon",
            Policy::Ignore => "Ignore",
        }
    }
}

/// A NodePool's policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policies {
    /// For AWS Health scheduled changes.
    pub scheduled_change: Policy,
    /// For rebalance recommendations.
    pub rebalance: Policy,
}

impl Default for Policies {
    /// Karpenter's behaviour.
    fn default() -> Self {
        Policies {
            scheduled_change: Policy::Drain,
            rebalance: Policy::Ignore,
        }
    }
}

/// The policies a NodePool's annotations ask for, and every problem, each
/// naming its annotation. An annotation in error leaves its policy at the
/// default; the others still hold.
pub fn policies(annotations: &BTreeMap<String, String>) -> (Policies, Vec<ValidationError>) {
    let mut out = Policies::default();
    let mut errors = Vec::new();
    for (key, value) in annotations.iter().filter(|(k, _)| k.starts_with(PREFIX)) {
        let field = format!("metadata.annotations[{key}]");
        let slot = match key.as_str() {
            SCHEDULED_CHANGE_ANNOTATION_KEY => &mut out.scheduled_change,
            REBALANCE_ANNOTATION_KEY => &mut out.rebalance,
            _ => {
                errors.push(ValidationError::InvalidAnnotation {
                    field,
                    value: value.clone(),
                    expected: "a policy nodewright takes: spot interruptions, instance state changes and capacity-reservation interruptions are always acted on; only nodewright.io/interruption-scheduled-change and nodewright.io/interruption-rebalance take a policy",
                });
                continue;
            }
        };
        match value.as_str() {
            "Drain" => *slot = Policy::Drain,
            "Cordon" => *slot = Policy::Cordon,
            "Ignore" => *slot = Policy::Ignore,
            _ => errors.push(ValidationError::InvalidAnnotation {
                field,
                value: value.clone(),
                expected: "Drain, Cordon or Ignore",
            }),
        }
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn without_annotations_the_policies_are_karpenters() {
        let (p, errors) = policies(&of(&[("other", "x")]));
        assert!(errors.is_empty());
        assert_eq!(p, Policies::default());
        assert_eq!(p.scheduled_change, Policy::Drain);
        assert_eq!(p.rebalance, Policy::Ignore);
    }

    #[test]
    fn a_stateful_pool_cordons_on_scheduled_changes() {
        let (p, errors) = policies(&of(&[
            (SCHEDULED_CHANGE_ANNOTATION_KEY, "Cordon"),
            (REBALANCE_ANNOTATION_KEY, "Ignore"),
        ]));
        assert!(errors.is_empty());
        assert_eq!(p.scheduled_change, Policy::Cordon);
        assert_eq!(p.rebalance, Policy::Ignore);
    }

    #[test]
    fn a_bad_value_and_a_forced_kind_name_their_annotation() {
        let (_, errors) = policies(&of(&[
            (SCHEDULED_CHANGE_ANNOTATION_KEY, "cordon"),
            ("nodewright.io/interruption-spot", "Ignore"),
        ]));
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text.iter().any(|t| t
                .contains("metadata.annotations[nodewright.io/interruption-scheduled-change]")
                && t.contains("Drain, Cordon or Ignore")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("interruption-spot") && t.contains("always acted on")),
            "{text:?}"
        );
    }

    #[test]
    fn one_invalid_annotation_does_not_reset_the_valid_one() {
        let (p, errors) = policies(&of(&[
            (SCHEDULED_CHANGE_ANNOTATION_KEY, "Cordon"),
            (REBALANCE_ANNOTATION_KEY, "drain"),
        ]));
        assert_eq!(p.scheduled_change, Policy::Cordon, "the valid one holds");
        assert_eq!(
            p.rebalance,
            Policy::Ignore,
            "the invalid one is the default"
        );
        assert_eq!(errors.len(), 1);
    }
}
