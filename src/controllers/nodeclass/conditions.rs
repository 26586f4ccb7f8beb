//! What a sub-reconciler hands back, and how conditions are stamped and
//! merged into the stored list.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::apis::conditions::find_condition;
use crate::apis::{Condition, ConditionStatus};

/// The generation and time every condition of one pass carries.
#[derive(Debug, Clone)]
pub struct Stamp {
    /// `metadata.generation` of the class the pass read.
    pub generation: Option<i64>,
    /// When the pass ran (a condition's transition time if it changed).
    pub now: Time,
}

impl Stamp {
    /// A stamp for `generation`, now.
    pub fn new(generation: Option<i64>) -> Self {
        Stamp {
            generation,
            now: Time(k8s_openapi::jiff::Timestamp::now()),
        }
    }

    /// A condition of this pass.
    pub fn condition(
        &self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: impl Into<String>,
    ) -> Condition {
        Condition {
            type_: type_.to_string(),
            status,
            observed_generation: self.generation,
            last_transition_time: self.now.clone(),
            reason: Some(reason.to_string()),
            message: Some(message.into()),
        }
    }

    /// `type_` is `True`, with the type as reason (Karpenter's `SetTrue`)
    /// and `message` (empty when all is well).
    pub fn ready(&self, type_: &str, message: impl Into<String>) -> Condition {
        self.condition(type_, ConditionStatus::True, type_, message)
    }

    /// `type_` is `False` for `reason`.
    pub fn not_ready(&self, type_: &str, reason: &str, message: impl Into<String>) -> Condition {
        self.condition(type_, ConditionStatus::False, reason, message)
    }
}

/// What one sub-reconciler found. `None` leaves the stored value or
/// condition as it is: a fault worth waiting out (throttling, a server
/// error) never flips a condition.
#[derive(Debug, Clone)]
pub struct Resolved<T> {
    /// The status field's new value.
    pub value: Option<T>,
    /// The condition's new state.
    pub condition: Option<Condition>,
    /// Look again within this long (a fault to wait out, a reservation
    /// about to end).
    pub requeue_after: Option<Duration>,
}

/// How soon a pass that hit a fault looks again: the SDK has already
/// retried the call with backoff, so the fault was long or dense, but a
/// class that is not Ready holds up every launch it serves (a minute here
/// was most of the time to the first pod Running under 20 % throttling).
pub const RETRY_AFTER_FAULT: Duration = Duration::from_secs(5);

impl<T> Resolved<T> {
    /// A new value and condition.
    pub fn to(value: T, condition: Condition) -> Self {
        Resolved {
            value: Some(value),
            condition: Some(condition),
            requeue_after: None,
        }
    }

    /// A new condition; the stored value stays.
    pub fn condition(condition: Condition) -> Self {
        Resolved {
            value: None,
            condition: Some(condition),
            requeue_after: None,
        }
    }

    /// Nothing changes; look again soon.
    pub fn keep() -> Self {
        Resolved {
            value: None,
            condition: None,
            requeue_after: Some(RETRY_AFTER_FAULT),
        }
    }
}

/// `previous` with `updates` replacing conditions of the same type, sorted
/// by type. A condition whose status did not change keeps its transition
/// time.
pub fn merge_conditions(previous: &[Condition], updates: &[Condition]) -> Vec<Condition> {
    let mut out: Vec<Condition> = previous
        .iter()
        .filter(|c| !updates.iter().any(|u| u.type_ == c.type_))
        .cloned()
        .collect();
    for update in updates {
        let mut update = update.clone();
        if let Some(old) = find_condition(previous, &update.type_)
            && old.status == update.status
        {
            update.last_transition_time = old.last_transition_time.clone();
        }
        out.push(update);
    }
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// Whether a condition's status, reason or message differs from before.
pub fn changed(previous: &[Condition], now: &Condition) -> bool {
    find_condition(previous, &now.type_).is_none_or(|old| {
        old.status != now.status || old.reason != now.reason || old.message != now.message
    })
}

/// `name[1] (what), name[3] (what)` for the terms at `indexes`.
pub fn name_terms(field: &str, indexes: &[usize], describe: impl Fn(usize) -> String) -> String {
    indexes
        .iter()
        .map(|&i| format!("{field}[{i}] ({})", describe(i)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_status_keeps_its_transition_time() {
        let old = Stamp {
            generation: Some(1),
            now: Time(k8s_openapi::jiff::Timestamp::from_second(100).unwrap()),
        };
        let new = Stamp {
            generation: Some(2),
            now: Time(k8s_openapi::jiff::Timestamp::from_second(200).unwrap()),
        };
        let previous = [
            old.ready("SubnetsReady", ""),
            old.ready("Other", ""),
            old.ready("AMIsReady", ""),
        ];
        let merged = merge_conditions(
            &previous,
            &[
                new.ready("SubnetsReady", ""),
                new.not_ready("AMIsReady", "AMINotFound", "none"),
            ],
        );
        let types: Vec<&str> = merged.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["AMIsReady", "Other", "SubnetsReady"]);
        assert_eq!(merged[2].last_transition_time, old.now);
        assert_eq!(merged[2].observed_generation, Some(2));
        assert_eq!(merged[0].last_transition_time, new.now);
        assert!(changed(&previous, &merged[0]));
        assert!(!changed(&previous, &merged[2]));
        assert_eq!(
            name_terms("subnetSelectorTerms", &[0, 2], |i| format!("t{i}")),
            "subnetSelectorTerms[0] (t0), subnetSelectorTerms[2] (t2)"
        );
    }
}
