//! Disruption budgets: how many of a NodePool's nodes may be disrupted at
//! once for a reason (`Underutilized`, `Empty`, `Drifted`), as Karpenter v1
//! computes it (`NodePool.GetAllowedDisruptionsByReason`,
//! `Budget.GetAllowedDisruptions`, `Budget.IsActive` and the disruption
//! controller's `BuildDisruptionBudgetMapping`).
//!
//! Pure: no API clients and no clock. The disruption controller and
//! `nodewright simulate --disruption` both call it, so a simulation blocks
//! exactly the disruptions the controller would.
//!
//! For one pool and reason:
//! 1. [`allowed_disruptions`] takes the minimum over the pool's budgets that
//!    apply to the reason (a budget without `reasons` applies to all) and are
//!    active now, of `nodes` as a count or as a percentage of the pool's
//!    nodes rounded up; no active budget means [`UNLIMITED`].
//! 2. [`remaining`] subtracts the nodes already disrupting; [`NodeCount`]
//!    says which nodes count towards the total and which are disrupting.
//!
//! A budget that cannot be evaluated is a [`BudgetError`]; Karpenter fails
//! closed on it (the pool allows no disruption for any reason), and so must
//! the caller.
//!
//! # Schedules
//! Karpenter reads `schedule` with robfig/cron's `ParseStandard` in UTC:
//! five fields (minute, hour, day of month, month, day of week, with names
//! such as `mon` and `jan`), or a descriptor (`@yearly`, `@annually`,
//! `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`). The `croner`
//! crate evaluates them here: it is maintained, reads that five-field form
//! (POSIX/Vixie, with day of month and day of week OR-ed when both are
//! restricted, as robfig does), computes the next hit on `jiff` time (the
//! code base's, so no second time library), and does not need the seconds
//! field the `cron` crate requires. What robfig does differently is matched
//! around it:
//! - `@midnight`, which croner lacks, is `@daily`; other `@` words
//!   (`@every`, upper case) are refused, as robfig refuses them or the CRD
//!   pattern does;
//! - croner's extensions that robfig refuses (`L`, `W` and `#` in the day
//!   fields, a `+` before the day of week) are refused, so a pool fails
//!   closed where Karpenter's would;
//! - `N/step` means `N-max/step`, as in robfig (croner's "sloppy ranges").
//!
//! Left as croner has them (all outside what a Karpenter user would write):
//! `7` for Sunday, `?` only in the day fields, `/step` alone, and `*/1` in a
//! day field counting as restricted.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::apis::duration::{DurationError, parse_go_duration};
use crate::apis::nodepool::{Budget, DEFAULT_BUDGET_NODES, DisruptionReason, NodePool};

/// What [`allowed_disruptions`] returns when no budget for the reason is
/// active: no limit. Karpenter returns `math.MaxInt32` here; a metric that
/// mirrors `karpenter_nodepools_allowed_disruptions` should report
/// `min(allowed, i32::MAX)`.
pub const UNLIMITED: usize = usize::MAX;

/// Why a budget of a NodePool cannot be evaluated. Each names the field
/// (`spec.disruption.budgets[i].…`), the value, and how to fix it.
///
/// The caller must treat an error as zero allowed disruptions for the pool,
/// for every reason (Karpenter's `MustGetAllowedDisruptions`), and report it
/// (an event or log line naming the pool): a misconfigured budget blocks
/// disruption rather than being ignored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// `schedule` is not a cron schedule Karpenter's parser reads.
    #[error(
        "spec.disruption.budgets[{index}].schedule {schedule:?} is not a valid cron schedule ({reason}); write five fields in UTC (minute hour day-of-month month day-of-week, e.g. \"0 9 * * mon-fri\") or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
    )]
    Schedule {
        /// Position of the budget in `spec.disruption.budgets`.
        index: usize,
        /// The schedule as written.
        schedule: String,
        /// What the parser refused.
        reason: String,
    },
    /// `duration` is not a Go duration, or is longer than Go's (about 292
    /// years) so Karpenter could not have read it.
    #[error(
        "spec.disruption.budgets[{index}].duration {duration:?} is not a valid duration ({reason}); write hours and minutes, e.g. \"1h30m\" or \"45m\""
    )]
    Duration {
        /// Position of the budget in `spec.disruption.budgets`.
        index: usize,
        /// The duration as written.
        duration: String,
        /// What the parser refused.
        reason: String,
    },
    /// `nodes` is neither a whole number nor a whole percentage.
    #[error(
        "spec.disruption.budgets[{index}].nodes {nodes:?} is neither a node count nor a percentage; write a whole number (e.g. \"5\") or a percentage of the pool's nodes (e.g. \"10%\")"
    )]
    Nodes {
        /// Position of the budget in `spec.disruption.budgets`.
        index: usize,
        /// The value as written.
        nodes: String,
    },
    /// `schedule` without `duration` (the CRD refuses it; Karpenter would
    /// treat the budget as never active).
    #[error(
        "spec.disruption.budgets[{index}].schedule {schedule:?} is set without spec.disruption.budgets[{index}].duration; add a duration (e.g. \"1h\") for how long the budget holds after each hit, or remove the schedule to make the budget always active"
    )]
    ScheduleWithoutDuration {
        /// Position of the budget in `spec.disruption.budgets`.
        index: usize,
        /// The schedule as written.
        schedule: String,
    },
    /// `duration` without `schedule` (the CRD refuses it; Karpenter fails
    /// to parse the empty schedule).
    #[error(
        "spec.disruption.budgets[{index}].duration {duration:?} is set without spec.disruption.budgets[{index}].schedule; add a schedule (e.g. \"0 9 * * mon-fri\") for when the budget starts, or remove the duration to make the budget always active"
    )]
    DurationWithoutSchedule {
        /// Position of the budget in `spec.disruption.budgets`.
        index: usize,
        /// The duration as written.
        duration: String,
    },
}

impl BudgetError {
    /// Position in `spec.disruption.budgets` of the budget at fault.
    pub fn index(&self) -> usize {
        match self {
            BudgetError::Schedule { index, .. }
            | BudgetError::Duration { index, .. }
            | BudgetError::Nodes { index, .. }
            | BudgetError::ScheduleWithoutDuration { index, .. }
            | BudgetError::DurationWithoutSchedule { index, .. } => *index,
        }
    }
}

/// How many of `pool`'s nodes may be disrupting at once for `reason` at
/// `now`, before subtracting those already disrupting (see [`remaining`]).
/// `nodes` is the pool's node count as [`NodeCount`] counts it.
///
/// The minimum, over the budgets that apply to `reason` and are active at
/// `now`, of each budget's `nodes` ([`budget_allowed`]); [`UNLIMITED`] when
/// none is. A pool without `budgets` gets the default `[{nodes: "10%"}]`; an
/// empty list has no budget, so no limit (as in Karpenter, whose CRD default
/// only fills an absent list).
///
/// Every budget is evaluated, also those for other reasons, and the first
/// that cannot be is the error: as in Karpenter, one bad budget blocks the
/// pool for every reason. Treat `Err` as 0 and report it.
pub fn allowed_disruptions(
    pool: &NodePool,
    reason: DisruptionReason,
    now: Timestamp,
    nodes: usize,
) -> Result<usize, BudgetError> {
    let disruption = pool.spec.effective_disruption();
    let mut allowed = UNLIMITED;
    for (index, budget) in disruption.budgets.iter().flatten().enumerate() {
        let value = budget_allowed(budget, index, now, nodes)?;
        let applies = budget
            .reasons
            .as_ref()
            .is_none_or(|reasons| reasons.contains(&reason));
        if applies {
            allowed = allowed.min(value);
        }
    }
    Ok(allowed)
}

/// How many more nodes may be disrupted: `allowed` less the nodes already
/// disrupting, never below zero (Karpenter's
/// `max(allowedDisruptions - disrupting, 0)`).
///
/// The same `disrupting` count ([`NodeCount::disrupting`]) is subtracted
/// for every reason: a node drained for drift uses up the budget of
/// consolidation too.
pub fn remaining(allowed: usize, disrupting: usize) -> usize {
    allowed.saturating_sub(disrupting)
}

/// What one budget allows out of a pool of `nodes` at `now` (Karpenter's
/// `Budget.GetAllowedDisruptions`): [`UNLIMITED`] while the budget is
/// inactive, else its `nodes` as a count, or as a percentage of `nodes`
/// rounded up (so 10% of 19 nodes is 2, and a small pool with a small
/// percentage can still move one node, as a PodDisruptionBudget's
/// `maxUnavailable` does). `nodes` absent is the default `10%`. `index` is
/// the budget's position, for the error.
///
/// As in Karpenter, `nodes` is read only while the budget is active: a bad
/// value in an inactive budget is not (yet) an error.
pub fn budget_allowed(
    budget: &Budget,
    index: usize,
    now: Timestamp,
    nodes: usize,
) -> Result<usize, BudgetError> {
    if !is_active(budget, index, now)? {
        return Ok(UNLIMITED);
    }
    let value = budget.nodes.as_deref().unwrap_or(DEFAULT_BUDGET_NODES);
    scaled_nodes(value, nodes).ok_or_else(|| BudgetError::Nodes {
        index,
        nodes: value.to_string(),
    })
}

/// Whether `budget` is active at `now` (Karpenter's `Budget.IsActive`).
///
/// A budget without `schedule` and `duration` always is. A scheduled one is
/// active from each hit of the schedule (in UTC, whatever the caller's zone)
/// for `duration`: from the hit itself, inclusive, to the hit plus the
/// duration, exclusive. Karpenter finds this by walking back `duration`
/// from `now` and asking whether the schedule's next hit after that point
/// is at or before `now`: any hit in the last `duration` counts, so a
/// duration longer than the schedule's period keeps the budget active
/// throughout. A `duration` of zero is never active.
///
/// A schedule that never fires (e.g. `0 0 30 2 *`) counts as active, as in
/// Karpenter: robfig/cron returns the zero time when it finds no hit, and
/// the zero time is not after `now`.
pub fn is_active(budget: &Budget, index: usize, now: Timestamp) -> Result<bool, BudgetError> {
    let (schedule, duration) = match (&budget.schedule, &budget.duration) {
        (None, None) => return Ok(true),
        (Some(schedule), Some(duration)) => (schedule, duration),
        (Some(schedule), None) => {
            return Err(BudgetError::ScheduleWithoutDuration {
                index,
                schedule: schedule.clone(),
            });
        }
        (None, Some(duration)) => {
            return Err(BudgetError::DurationWithoutSchedule {
                index,
                duration: duration.clone(),
            });
        }
    };
    let cron = parse_schedule(schedule).map_err(|reason| BudgetError::Schedule {
        index,
        schedule: schedule.clone(),
        reason,
    })?;
    let duration_error = |reason: String| BudgetError::Duration {
        index,
        duration: duration.clone(),
        reason,
    };
    let window = parse_window(duration).map_err(duration_error)?;
    let checkpoint = now
        .checked_sub(window)
        .map_err(|_| duration_error("it reaches before the earliest representable time".into()))?
        .to_zoned(TimeZone::UTC);
    // The first hit strictly after the checkpoint, as robfig's `Next`.
    match cron.find_next_occurrence(&checkpoint, false) {
        Ok(next) => Ok(next.timestamp() <= now),
        Err(_) => Ok(true),
    }
}

/// Go's largest duration (`math.MaxInt64` nanoseconds, about 292 years).
const GO_MAX_DURATION: Duration = Duration::new(9_223_372_036, 854_775_807);

/// `duration` as the window a schedule hit opens.
fn parse_window(duration: &str) -> Result<SignedDuration, String> {
    let parsed = parse_go_duration(duration).map_err(|error| match error {
        // The messages of these name the input and a fix of their own;
        // ours has both, so only the fault is kept.
        DurationError::Empty => "it is empty".to_string(),
        DurationError::BadUnit { .. } => "missing or unknown unit".to_string(),
        DurationError::BadNumber { .. } => "malformed number".to_string(),
        DurationError::Overflow { .. } => "too large".to_string(),
        DurationError::Negative { .. } => "negative".to_string(),
    })?;
    if parsed > GO_MAX_DURATION {
        return Err("longer than 2562047h, the most a Go duration holds".to_string());
    }
    SignedDuration::try_from(parsed).map_err(|_| "too large".to_string())
}

/// Parses `schedule` as robfig/cron's `ParseStandard` would (see the module
/// doc for the differences from croner that are matched here).
fn parse_schedule(schedule: &str) -> Result<Cron, String> {
    let spec = schedule.trim();
    let spec = if let Some(word) = spec.strip_prefix('@') {
        match word {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "hourly" => spec,
            "midnight" => "@daily",
            _ => {
                return Err(format!(
                    "unknown descriptor {spec:?}; the descriptors are lower case"
                ));
            }
        }
    } else {
        refuse_croner_extensions(spec)?;
        spec
    };
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .dom_and_dow(false)
        .alternative_weekdays(false)
        .sloppy_ranges(true)
        .build()
        .parse(spec)
        .map_err(|error| error.to_string())
}

/// Refuses the day-field syntax croner reads but robfig/cron does not, so
/// that such a schedule fails here as it fails in Karpenter. No weekday name
/// has an `L`; `W` is left alone in the day of week, where `WED` has one and
/// croner gives it no meaning of its own.
fn refuse_croner_extensions(spec: &str) -> Result<(), String> {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    let &[_, _, day_of_month, _, day_of_week] = fields.as_slice() else {
        // croner reports the wrong field count.
        return Ok(());
    };
    if day_of_month.contains(['L', 'l', 'W', 'w']) {
        return Err(format!(
            "day of month {day_of_month:?} uses L or W, which Karpenter's cron parser does not read"
        ));
    }
    if day_of_week.contains(['L', 'l', '#']) || day_of_week.starts_with('+') {
        return Err(format!(
            "day of week {day_of_week:?} uses L, # or +, which Karpenter's cron parser does not read"
        ));
    }
    Ok(())
}

/// `value` (`"5"` or `"10%"`) out of `total` nodes, a percentage rounded up
/// (Kubernetes' `GetScaledValueFromIntOrPercent(..., roundUp=true)`); `None`
/// for anything else.
pub fn scaled_nodes(value: &str, total: usize) -> Option<usize> {
    if let Ok(count) = value.parse::<usize>() {
        return Some(count);
    }
    let percent = value.strip_suffix('%')?.parse::<usize>().ok()?;
    let scaled = (percent as u128 * total as u128).div_ceil(100);
    Some(usize::try_from(scaled).unwrap_or(UNLIMITED))
}

/// What the budget arithmetic needs to know about one node of a pool
/// (Karpenter's `BuildDisruptionBudgetMapping`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// Launched by this provisioner (has a NodeClaim of a NodePool).
    /// Nodes that are not count nowhere.
    pub managed: bool,
    /// The NodeClaim is `Initialized`. Uninitialized nodes (new ones, often
    /// the replacements of disrupted nodes) are left out of the total so
    /// they cannot raise a percentage budget before they take pods.
    pub initialized: bool,
    /// The NodeClaim's `InstanceTerminating` condition is true: drained and
    /// its instance deleted. Left out of the total and of the disrupting
    /// count; it no longer uses the budget.
    pub instance_terminating: bool,
    /// The Node's `Ready` condition is `True`. A node that is not counts as
    /// disrupting.
    pub ready: bool,
    /// Being deleted: marked by the disruption controller, or the NodeClaim
    /// (or, without one, the Node) has a deletion timestamp. Counts as
    /// disrupting, and still towards the total.
    pub marked_for_deletion: bool,
}

/// A pool's nodes as the budgets count them: pass `nodes` to
/// [`allowed_disruptions`] and `disrupting` to [`remaining`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeCount {
    /// Managed, initialized nodes whose instance is not terminating,
    /// including those being deleted or not ready.
    pub nodes: usize,
    /// Of those, the ones not ready or marked for deletion.
    pub disrupting: usize,
}

impl NodeCount {
    /// Counts `nodes`, the nodes of one pool.
    pub fn of(nodes: impl IntoIterator<Item = NodeState>) -> Self {
        let mut count = NodeCount::default();
        for node in nodes {
            count.add(node);
        }
        count
    }

    /// Counts one more node of the pool.
    pub fn add(&mut self, node: NodeState) {
        if !node.managed || !node.initialized || node.instance_terminating {
            return;
        }
        self.nodes += 1;
        if !node.ready || node.marked_for_deletion {
            self.disrupting += 1;
        }
    }
}

#[cfg(test)]
mod tests;
