//! Ports of Karpenter's `pkg/apis/v1/nodepool_budgets_test.go` (same inputs
//! and numbers) and of the arithmetic of the `BuildDisruptionBudgetMapping`
//! cases in `pkg/controllers/disruption/suite_test.go`, plus the edges of
//! rounding, schedules and errors.

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::apis::nodepool::{Disruption, NodePoolSpec};

use DisruptionReason::{Drifted, Empty, Underutilized};

const ALL_REASONS: [DisruptionReason; 3] = [Empty, Underutilized, Drifted];

fn at(time: &str) -> Timestamp {
    time.parse().unwrap()
}

/// Karpenter's test clock: the middle of the year 2000.
fn june_2000() -> Timestamp {
    at("2000-06-15T12:30:30Z")
}

fn budget(nodes: &str) -> Budget {
    Budget {
        reasons: None,
        nodes: Some(nodes.to_string()),
        schedule: None,
        duration: None,
    }
}

fn scheduled(nodes: &str, schedule: &str, duration: &str) -> Budget {
    Budget {
        schedule: Some(schedule.to_string()),
        duration: Some(duration.to_string()),
        ..budget(nodes)
    }
}

fn for_reasons(mut budget: Budget, reasons: &[DisruptionReason]) -> Budget {
    budget.reasons = Some(reasons.to_vec());
    budget
}

fn pool(budgets: Option<Vec<Budget>>) -> NodePool {
    let mut spec: NodePoolSpec = serde_json::from_value(serde_json::json!({
        "template": {"spec": {
            "requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        }},
    }))
    .unwrap();
    spec.disruption = Some(Disruption {
        consolidate_after: "0s".into(),
        consolidation_policy: None,
        budgets,
    });
    NodePool::new("default", spec)
}

/// The budgets of Karpenter's `BeforeEach`: all active every minute for an
/// hour, except the last (`@weekly`, inactive in mid-June 2000).
fn karpenter_budgets() -> Vec<Budget> {
    vec![
        scheduled("10", "* * * * *", "1h"),
        scheduled("100", "* * * * *", "1h"),
        scheduled("100%", "* * * * *", "1h"),
        for_reasons(
            scheduled("15", "* * * * *", "1h"),
            &[Drifted, Underutilized],
        ),
        for_reasons(scheduled("5", "* * * * *", "1h"), &[Drifted]),
        for_reasons(
            scheduled("0", "@weekly", "1h"),
            &[Underutilized, Drifted, Empty],
        ),
    ]
}

fn allowed(budgets: Vec<Budget>, reason: DisruptionReason) -> Result<usize, BudgetError> {
    allowed_disruptions(&pool(Some(budgets)), reason, june_2000(), 100)
}

fn active(budget: &Budget, now: Timestamp) -> bool {
    is_active(budget, 0, now).unwrap()
}

// GetAllowedDisruptionsByReason

#[test]
fn zero_for_every_reason_while_a_zero_budget_for_every_reason_is_active() {
    let mut budgets = karpenter_budgets();
    budgets[5].schedule = Some("* * * * *".into());
    for reason in ALL_REASONS {
        assert_eq!(allowed(budgets.clone(), reason), Ok(0));
    }
}

#[test]
fn unlimited_for_every_reason_when_no_budget_is_active() {
    let mut budgets = karpenter_budgets();
    for budget in &mut budgets {
        budget.schedule = Some("@yearly".into());
        budget.duration = Some("1h".into());
    }
    for reason in ALL_REASONS {
        assert_eq!(allowed(budgets.clone(), reason), Ok(UNLIMITED));
    }
}

#[test]
fn inactive_budgets_for_some_reasons_are_ignored() {
    let mut budgets = karpenter_budgets();
    budgets[3].schedule = Some("@yearly".into());
    budgets[4].schedule = Some("@yearly".into());
    for reason in ALL_REASONS {
        assert_eq!(allowed(budgets.clone(), reason), Ok(10));
    }
}

#[test]
fn a_budget_without_reasons_applies_to_every_reason() {
    let budgets = karpenter_budgets()[..1].to_vec();
    assert!(budgets[0].reasons.is_none());
    for reason in ALL_REASONS {
        assert_eq!(allowed(budgets.clone(), reason), Ok(10));
    }
}

#[test]
fn each_reason_gets_the_minimum_of_the_budgets_for_it() {
    let mut budgets = karpenter_budgets();
    budgets.push(for_reasons(scheduled("4", "* * * * *", "1h"), &[Empty]));
    assert_eq!(allowed(budgets.clone(), Empty), Ok(4));
    assert_eq!(allowed(budgets.clone(), Drifted), Ok(5));
    // The budget without reasons (10) is below the Underutilized one (15).
    assert_eq!(allowed(budgets, Underutilized), Ok(10));
}

// Budget.GetAllowedDisruptions

#[test]
fn an_invalid_schedule_is_an_error_naming_the_field_and_value() {
    let mut budget = karpenter_budgets().remove(0);
    budget.schedule = Some("@wrongly".into());
    let error = budget_allowed(&budget, 0, june_2000(), 100).unwrap_err();
    assert!(matches!(error, BudgetError::Schedule { index: 0, .. }));
    let message = error.to_string();
    assert!(message.contains("spec.disruption.budgets[0].schedule"));
    assert!(message.contains("@wrongly"));
    assert!(message.contains("@daily"), "{message}");
}

#[test]
fn an_invalid_nodes_value_is_an_error_naming_the_field_and_value() {
    let mut budget = karpenter_budgets().remove(0);
    budget.nodes = Some("1000a%".into());
    let error = budget_allowed(&budget, 0, june_2000(), 100).unwrap_err();
    assert_eq!(
        error,
        BudgetError::Nodes {
            index: 0,
            nodes: "1000a%".into()
        }
    );
    let message = error.to_string();
    assert!(message.contains("spec.disruption.budgets[0].nodes \"1000a%\""));
    assert!(message.contains("\"10%\""), "{message}");
}

#[test]
fn an_inactive_budget_allows_unlimited() {
    let budget = scheduled("10", "@yearly", "1h");
    assert_eq!(budget_allowed(&budget, 0, june_2000(), 100), Ok(UNLIMITED));
}

#[test]
fn an_active_count_budget_allows_its_count() {
    let budget = scheduled("10", "* * * * *", "1h");
    assert_eq!(budget_allowed(&budget, 0, june_2000(), 100), Ok(10));
}

#[test]
fn an_active_percentage_budget_allows_its_share() {
    let budget = scheduled("100%", "* * * * *", "1h");
    assert_eq!(budget_allowed(&budget, 0, june_2000(), 100), Ok(100));
}

// Budget.IsActive

#[test]
fn schedules_are_read_in_utc() {
    // Karpenter's clock: midnight of 31 May 2000 at UTC+1, which is 23:00
    // UTC on the 30th. In UTC+1 `@daily` would have just hit; in UTC its
    // last hit was 23 hours ago.
    let now = at("2000-05-31T00:00:00+01:00");
    assert!(!active(&scheduled("10", "@daily", "30m"), now));
}

#[test]
fn a_budget_without_schedule_and_duration_is_always_active() {
    assert!(active(&budget("10"), june_2000()));
}

#[test]
fn a_budget_is_active_within_an_hour_of_a_hit_every_minute() {
    assert!(active(&scheduled("10", "* * * * *", "1h"), june_2000()));
}

#[test]
fn a_yearly_budget_is_inactive_in_june() {
    assert!(!active(&scheduled("10", "@yearly", "1h"), june_2000()));
}

#[test]
fn a_budget_is_active_in_the_middle_of_its_duration() {
    let now = at("1000-01-01T12:00:00Z");
    assert!(active(&scheduled("10", "@yearly", "24h"), now));
}

#[test]
fn a_budget_is_active_when_its_duration_is_longer_than_the_recurrence() {
    let now = at("2024-01-07T00:00:00Z");
    assert!(active(&scheduled("10", "@daily", "48h"), now));
}

#[test]
fn a_budget_is_inactive_after_its_duration() {
    // A Sunday at midnight: last Sunday's 06:30 window closed at 12:30 and
    // today's opens at 06:30.
    let now = at("2024-01-07T00:00:00Z");
    assert!(!active(&scheduled("10", "30 6 * * SUN", "6h"), now));
}

#[test]
fn a_reversed_weekday_range_is_an_error_naming_the_field() {
    let budget = scheduled("10", "0 0 * * tue-mon", "6h");
    let error = is_active(&budget, 0, at("2024-01-07T00:00:00Z")).unwrap_err();
    assert!(matches!(error, BudgetError::Schedule { index: 0, .. }));
    let message = error.to_string();
    assert!(message.contains("spec.disruption.budgets[0].schedule \"0 0 * * tue-mon\""));
    assert!(message.contains("Range out of bounds"), "{message}");
}

// Rounding and defaults

#[test]
fn percentages_round_up() {
    let budgets = vec![budget("10%")];
    let pool = pool(Some(budgets));
    let allowed = |nodes| allowed_disruptions(&pool, Drifted, june_2000(), nodes);
    assert_eq!(allowed(19), Ok(2));
    assert_eq!(allowed(20), Ok(2));
    assert_eq!(allowed(21), Ok(3));
    assert_eq!(allowed(1), Ok(1));
    assert_eq!(allowed(0), Ok(0));
    let five_percent = pool_with("5%");
    assert_eq!(
        allowed_disruptions(&five_percent, Empty, june_2000(), 10),
        Ok(1)
    );
}

fn pool_with(nodes: &str) -> NodePool {
    pool(Some(vec![budget(nodes)]))
}

#[test]
fn zero_and_zero_percent_allow_nothing_and_a_hundred_percent_allows_all() {
    for (nodes, expected) in [("0", 0), ("0%", 0), ("100%", 19), ("19", 19), ("50", 50)] {
        assert_eq!(
            allowed_disruptions(&pool_with(nodes), Underutilized, june_2000(), 19),
            Ok(expected),
            "{nodes}"
        );
    }
}

#[test]
fn a_pool_without_budgets_gets_ten_percent() {
    let pool = pool(None);
    for reason in ALL_REASONS {
        assert_eq!(allowed_disruptions(&pool, reason, june_2000(), 19), Ok(2));
        assert_eq!(allowed_disruptions(&pool, reason, june_2000(), 100), Ok(10));
    }
    let mut no_disruption = pool.clone();
    no_disruption.spec.disruption = None;
    assert_eq!(
        allowed_disruptions(&no_disruption, Drifted, june_2000(), 19),
        Ok(2)
    );
}

#[test]
fn a_budget_without_nodes_gets_ten_percent() {
    let mut without_nodes = budget("1");
    without_nodes.nodes = None;
    assert_eq!(budget_allowed(&without_nodes, 0, june_2000(), 19), Ok(2));
}

#[test]
fn an_empty_budget_list_allows_unlimited() {
    let pool = pool(Some(Vec::new()));
    assert_eq!(
        allowed_disruptions(&pool, Empty, june_2000(), 19),
        Ok(UNLIMITED)
    );
}

#[test]
fn a_budget_for_other_reasons_does_not_limit_this_one() {
    let budgets = vec![for_reasons(budget("0"), &[Drifted]), budget("3")];
    assert_eq!(allowed(budgets.clone(), Drifted), Ok(0));
    assert_eq!(allowed(budgets.clone(), Empty), Ok(3));
    assert_eq!(allowed(budgets, Underutilized), Ok(3));
}

// Schedule windows

#[test]
fn a_window_opens_at_the_hit_and_closes_at_the_hit_plus_duration() {
    let budget = scheduled("0", "0 9 * * *", "1h");
    assert!(!active(&budget, at("2024-03-05T08:59:59.999Z")));
    assert!(active(&budget, at("2024-03-05T09:00:00Z")));
    assert!(active(&budget, at("2024-03-05T09:59:59.999999999Z")));
    assert!(!active(&budget, at("2024-03-05T10:00:00Z")));
}

#[test]
fn the_pool_is_limited_only_inside_the_window() {
    let budgets = vec![budget("10"), scheduled("0", "0 9 * * mon-fri", "8h")];
    let pool = pool(Some(budgets));
    // Tuesday 5 March 2024.
    let at_nine = allowed_disruptions(&pool, Drifted, at("2024-03-05T09:00:00Z"), 100);
    assert_eq!(at_nine, Ok(0));
    let at_five = allowed_disruptions(&pool, Drifted, at("2024-03-05T17:00:00Z"), 100);
    assert_eq!(at_five, Ok(10));
    // Saturday: no hit since Friday 17:00.
    let saturday = allowed_disruptions(&pool, Drifted, at("2024-03-09T10:00:00Z"), 100);
    assert_eq!(saturday, Ok(10));
}

#[test]
fn a_zero_duration_is_never_active() {
    let budget = scheduled("0", "* * * * *", "0m");
    assert!(!active(&budget, at("2024-03-05T09:00:00Z")));
    assert!(!active(&budget, at("2024-03-05T09:00:30Z")));
}

#[test]
fn daily_and_midnight_hit_at_midnight_utc() {
    for schedule in ["@daily", "@midnight", "0 0 * * *"] {
        let budget = scheduled("0", schedule, "1h");
        assert!(active(&budget, at("2024-03-05T00:00:00Z")), "{schedule}");
        assert!(active(&budget, at("2024-03-05T00:59:00Z")), "{schedule}");
        assert!(!active(&budget, at("2024-03-05T01:00:00Z")), "{schedule}");
        assert!(!active(&budget, at("2024-03-04T23:59:59Z")), "{schedule}");
    }
}

#[test]
fn the_other_descriptors_hit_as_robfig_cron_has_them() {
    let cases = [
        ("@yearly", "2024-01-01T00:30:00Z", "2024-02-01T00:30:00Z"),
        ("@annually", "2024-01-01T00:30:00Z", "2024-02-01T00:30:00Z"),
        ("@monthly", "2024-03-01T00:30:00Z", "2024-03-02T00:30:00Z"),
        // 3 March 2024 is a Sunday.
        ("@weekly", "2024-03-03T00:30:00Z", "2024-03-04T00:30:00Z"),
        ("@hourly", "2024-03-05T07:00:00Z", "2024-03-05T07:59:00Z"),
    ];
    for (schedule, inside, outside) in cases {
        let budget = scheduled("0", schedule, "59m");
        assert!(active(&budget, at(inside)), "{schedule} at {inside}");
        assert!(!active(&budget, at(outside)), "{schedule} at {outside}");
    }
}

#[test]
fn names_steps_and_single_number_steps_read_as_robfig_cron_reads_them() {
    // Names of months and weekdays, in any case.
    let budget = scheduled("0", "0 12 * JAN,jul Mon-Fri", "1h");
    assert!(active(&budget, at("2024-07-02T12:30:00Z")));
    assert!(!active(&budget, at("2024-06-04T12:30:00Z")));
    assert!(!active(&budget, at("2024-07-06T12:30:00Z")));
    // `5/15` is `5-59/15`: minutes 5, 20, 35 and 50.
    let budget = scheduled("0", "5/15 * * * *", "1m");
    assert!(active(&budget, at("2024-03-05T09:20:30Z")));
    assert!(!active(&budget, at("2024-03-05T09:15:30Z")));
}

#[test]
fn day_of_month_and_day_of_week_are_either_when_both_are_set() {
    // The 1st of the month or any Monday, as in Vixie cron and robfig.
    let budget = scheduled("0", "0 0 1 * mon", "1h");
    // Friday 1 March 2024.
    assert!(active(&budget, at("2024-03-01T00:10:00Z")));
    // Monday 4 March 2024.
    assert!(active(&budget, at("2024-03-04T00:10:00Z")));
    // Tuesday 5 March 2024.
    assert!(!active(&budget, at("2024-03-05T00:10:00Z")));
}

#[test]
fn a_schedule_that_never_fires_counts_as_active() {
    let budget = scheduled("1", "0 0 30 2 *", "1h");
    assert!(active(&budget, june_2000()));
}

// Errors

#[test]
fn croner_extensions_that_karpenter_refuses_are_errors() {
    for schedule in [
        "0 0 L * *",
        "0 0 15W * *",
        "0 0 * * 5L",
        "0 0 * * 1#2",
        "0 0 1 * +mon",
    ] {
        let budget = scheduled("0", schedule, "1h");
        let error = is_active(&budget, 2, june_2000()).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("Karpenter's cron parser does not read"),
            "{schedule}: {message}"
        );
    }
}

#[test]
fn other_descriptors_and_field_counts_are_errors() {
    for schedule in ["@DAILY", "@every 1h", "0 0 * * * *", "0 0 * *"] {
        let budget = scheduled("0", schedule, "1h");
        let error = is_active(&budget, 2, june_2000()).unwrap_err();
        assert!(
            matches!(error, BudgetError::Schedule { index: 2, .. }),
            "{schedule}: {error:?}"
        );
    }
}

#[test]
fn a_schedule_without_duration_is_an_error_naming_both_fields() {
    let mut budget = scheduled("0", "@daily", "1h");
    budget.duration = None;
    let error = is_active(&budget, 1, june_2000()).unwrap_err();
    assert_eq!(
        error,
        BudgetError::ScheduleWithoutDuration {
            index: 1,
            schedule: "@daily".into()
        }
    );
    let message = error.to_string();
    assert!(message.contains("spec.disruption.budgets[1].schedule \"@daily\""));
    assert!(message.contains("spec.disruption.budgets[1].duration"));
}

#[test]
fn a_duration_without_schedule_is_an_error_naming_both_fields() {
    let mut budget = scheduled("0", "@daily", "1h");
    budget.schedule = None;
    let error = is_active(&budget, 0, june_2000()).unwrap_err();
    assert_eq!(
        error,
        BudgetError::DurationWithoutSchedule {
            index: 0,
            duration: "1h".into()
        }
    );
    assert!(
        error
            .to_string()
            .contains("spec.disruption.budgets[0].schedule")
    );
}

#[test]
fn an_invalid_duration_is_an_error_naming_the_field_and_value() {
    for duration in ["1d", "", "-1h", "h", "2562048h"] {
        let budget = scheduled("0", "@daily", duration);
        let error = is_active(&budget, 0, june_2000()).unwrap_err();
        assert!(
            matches!(error, BudgetError::Duration { index: 0, .. }),
            "{duration}: {error:?}"
        );
        let message = error.to_string();
        let field = format!("spec.disruption.budgets[0].duration {duration:?}");
        assert!(message.contains(&field), "{message}");
    }
}

#[test]
fn nodes_values_that_are_not_counts_or_percentages_are_errors() {
    for nodes in ["", "%", "ten", "10 %", "1.5", "-1", "10%%"] {
        assert_eq!(
            budget_allowed(&budget(nodes), 4, june_2000(), 10),
            Err(BudgetError::Nodes {
                index: 4,
                nodes: nodes.into()
            }),
            "{nodes:?}"
        );
    }
}

#[test]
fn bad_nodes_in_an_inactive_budget_are_not_read() {
    let budget = scheduled("ten", "@yearly", "1h");
    assert_eq!(budget_allowed(&budget, 0, june_2000(), 10), Ok(UNLIMITED));
}

#[test]
fn a_bad_budget_for_another_reason_still_fails_the_pool() {
    let budgets = vec![
        budget("10"),
        for_reasons(scheduled("1", "not a cron", "1h"), &[Drifted]),
    ];
    let error = allowed(budgets, Empty).unwrap_err();
    assert_eq!(error.index(), 1);
    assert!(
        error
            .to_string()
            .contains("spec.disruption.budgets[1].schedule \"not a cron\"")
    );
}

// BuildDisruptionBudgetMapping

fn healthy() -> NodeState {
    NodeState {
        managed: true,
        initialized: true,
        instance_terminating: false,
        ready: true,
        marked_for_deletion: false,
    }
}

/// Karpenter's `BuildDisruptionBudgetMapping` for one pool: what is left
/// for each reason.
fn mapping(pool: &NodePool, nodes: &[NodeState]) -> Vec<usize> {
    let count = NodeCount::of(nodes.iter().copied());
    ALL_REASONS
        .iter()
        .map(|&reason| {
            let allowed = allowed_disruptions(pool, reason, june_2000(), count.nodes).unwrap_or(0);
            remaining(allowed, count.disrupting)
        })
        .collect()
}

#[test]
fn unmanaged_nodes_are_not_counted() {
    let mut nodes = vec![healthy(); 10];
    nodes.push(NodeState {
        managed: false,
        ..healthy()
    });
    assert_eq!(mapping(&pool_with("100%"), &nodes), vec![10; 3]);
}

#[test]
fn uninitialized_nodes_are_not_counted() {
    let mut nodes = vec![healthy(); 10];
    nodes.push(NodeState {
        initialized: false,
        ..healthy()
    });
    assert_eq!(mapping(&pool_with("100%"), &nodes), vec![10; 3]);
}

#[test]
fn nodes_whose_instance_is_terminating_are_not_counted() {
    let mut nodes = vec![healthy(); 10];
    nodes.push(NodeState {
        instance_terminating: true,
        marked_for_deletion: true,
        ..healthy()
    });
    assert_eq!(mapping(&pool_with("100%"), &nodes), vec![10; 3]);
}

#[test]
fn the_remaining_budget_is_never_negative() {
    let deleting = NodeState {
        marked_for_deletion: true,
        ..healthy()
    };
    // 10% of 10 is 1; all 10 are being deleted.
    assert_eq!(mapping(&pool_with("10%"), &[deleting; 10]), vec![0; 3]);
    assert_eq!(remaining(1, 10), 0);
    assert_eq!(remaining(UNLIMITED, 3), UNLIMITED - 3);
}

#[test]
fn nodes_being_deleted_use_the_budget_and_stay_in_the_total() {
    let mut nodes = vec![healthy(); 10];
    // One deleted, one marked by the disruption controller.
    nodes[0].marked_for_deletion = true;
    nodes[1].marked_for_deletion = true;
    assert_eq!(
        NodeCount::of(nodes.iter().copied()),
        NodeCount {
            nodes: 10,
            disrupting: 2
        }
    );
    assert_eq!(mapping(&pool_with("100%"), &nodes), vec![8; 3]);
}

#[test]
fn not_ready_nodes_use_the_budget() {
    let mut nodes = vec![healthy(); 10];
    nodes[0].ready = false;
    nodes[1].ready = false;
    assert_eq!(mapping(&pool_with("100%"), &nodes), vec![8; 3]);
}

#[test]
fn a_pool_with_a_bad_budget_allows_nothing() {
    let pool = pool(Some(vec![scheduled("10", "@wrongly", "1h")]));
    assert_eq!(mapping(&pool, &[healthy(); 10]), vec![0; 3]);
}
