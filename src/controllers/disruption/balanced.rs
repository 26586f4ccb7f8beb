//! `consolidationPolicy: Balanced` (Karpenter v1.14's `balanced.go`): a
//! consolidation move is made only when what it saves, as a share of its
//! NodePool's cost, is at least half what it disrupts, as a share of the
//! NodePool's disruption cost:
//!
//! ```text
//! (savings / pool cost) / (move disruption / pool disruption) >= 1 / k,  k = 2
//! ```
//!
//! A node's disruption cost is 1 (draining it at all) plus the positive
//! eviction costs of its reschedulable pods (1 each by default; pod
//! deletion cost and priority move it). Both totals run over every node of
//! the pool, candidates or not, so the score does not depend on how many
//! nodes a pass may take. Emptiness and drift are not scored. Pure
//! functions: the methods call them.

use std::collections::BTreeMap;

use super::types::Command;
use crate::apis::nodepool::ConsolidationPolicy;

/// Karpenter's `BalancedK`: a move must save at least `1/K` of what it
/// disrupts, each as a share of its pool.
pub const BALANCED_K: f64 = 2.0;

/// A NodePool's totals, the denominators of the score.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoolTotals {
    /// Hourly price of every node in the pool.
    pub cost: f64,
    /// Disruption cost of every node in the pool.
    pub disruption_cost: f64,
}

/// A move's score against its pool.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    /// Savings as a share of the pool's cost.
    pub savings_fraction: f64,
    /// Disruption as a share of the pool's disruption cost.
    pub disruption_fraction: f64,
}

impl Score {
    /// Savings share over disruption share: 0 without savings, infinite
    /// without disruption.
    pub fn value(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction == 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    /// Whether the move is worth making at `k`.
    pub fn approved_at(&self, k: f64) -> bool {
        self.value() >= 1.0 / k
    }

    /// Whether the move is worth making under `Balanced`.
    pub fn approved(&self) -> bool {
        self.approved_at(BALANCED_K)
    }
}

/// Scores a move saving `savings` per hour and disrupting `disruption` in a
/// pool with `totals`. Zero totals give a score of 0.
pub fn score_move(savings: f64, disruption: f64, totals: PoolTotals) -> Score {
    if totals.cost <= 0.0 || totals.disruption_cost <= 0.0 {
        return Score {
            savings_fraction: 0.0,
            disruption_fraction: 0.0,
        };
    }
    Score {
        savings_fraction: savings / totals.cost,
        disruption_fraction: disruption / totals.disruption_cost,
    }
}

/// One NodePool's part in a consolidation move: its policy, and for a
/// `Balanced` pool the move's score and the savings it was given.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolScore {
    /// The NodePool.
    pub pool: String,
    /// Its `consolidationPolicy`, as written (the metrics' `policy` label).
    pub policy: &'static str,
    /// The move's score in the pool, for `Balanced` pools only.
    pub score: Option<Score>,
    /// The share of the move's savings counted for the pool, $/h.
    pub savings: f64,
}

impl PoolScore {
    /// Whether the pool lets the move go (pools that are not `Balanced`
    /// always do).
    pub fn approved(&self) -> bool {
        self.score.is_none_or(|s| s.approved())
    }

    /// Karpenter's score text: `score S >= threshold T (k: K, savings X%,
    /// disruption Y%)`.
    pub fn message(&self) -> Option<String> {
        let score = self.score?;
        Some(format!(
            "score {:.2} >= threshold {:.2} (k: {}, savings {:.1}%, disruption {:.1}%)",
            score.value(),
            1.0 / BALANCED_K,
            BALANCED_K,
            score.savings_fraction * 100.0,
            score.disruption_fraction * 100.0
        ))
    }
}

/// A consolidation move scored in a pass: what Karpenter's
/// `karpenter_consolidation_moves_total` and `karpenter_consolidation_score`
/// count and its `ConsolidationApproved` events report.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoredMove {
    /// Several candidates (multi-node consolidation) or one.
    pub multi_node: bool,
    /// The candidates: (Node name, or NodeClaim name without a Node;
    /// NodeClaim name).
    pub candidates: Vec<(String, String)>,
    /// Each NodePool's part.
    pub pools: Vec<PoolScore>,
    /// Whether the move passed every pool.
    pub approved: bool,
}

/// The name of a `consolidationPolicy` as the API writes it.
pub fn policy_name(policy: ConsolidationPolicy) -> &'static str {
    match policy {
        ConsolidationPolicy::WhenEmpty => "WhenEmpty",
        ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
        ConsolidationPolicy::Balanced => "Balanced",
    }
}

/// Each NodePool's part in `command`, in pool order. Savings are shared
/// among the pools by their candidates' price; only `Balanced` pools are
/// scored.
pub fn evaluate(command: &Command, totals: &BTreeMap<String, PoolTotals>) -> Vec<PoolScore> {
    let savings = command.price_before() - command.price_after();
    let source: f64 = command.candidates.iter().map(|c| c.price).sum();
    // Per pool: its policy, its candidates' price and reschedule cost.
    let mut pools: BTreeMap<String, (ConsolidationPolicy, f64, f64)> = BTreeMap::new();
    for c in &command.candidates {
        let policy = c
            .node_pool
            .spec
            .effective_disruption()
            .consolidation_policy
            .unwrap_or(ConsolidationPolicy::WhenEmptyOrUnderutilized);
        let entry = pools.entry(c.pool.clone()).or_insert((policy, 0.0, 0.0));
        entry.1 += c.price;
        entry.2 += c.reschedule_cost;
    }
    let several = pools.len() > 1;
    pools
        .into_iter()
        .map(|(pool, (policy, price, disruption))| {
            let share = if several && source > 0.0 {
                savings * price / source
            } else {
                savings
            };
            let score = (policy == ConsolidationPolicy::Balanced).then(|| {
                let pool_totals = totals.get(&pool).copied().unwrap_or_default();
                score_move(share, disruption, pool_totals)
            });
            PoolScore {
                pool,
                policy: policy_name(policy),
                score,
                savings: share,
            }
        })
        .collect()
}

/// Whether every `Balanced` pool among the command's parts approves it;
/// when one does not, why, for the message.
pub fn approve(parts: &[PoolScore]) -> Result<(), String> {
    let Some(refused) = parts.iter().find(|p| !p.approved()) else {
        return Ok(());
    };
    let Some(score) = refused.score else {
        return Ok(());
    };
    Err(format!(
        "NodePool {:?} is Balanced: saving ${:.4}/h ({:.1}% of the pool's cost) for {:.1}% of its disruption cost scores {:.2}, under the {:.2} threshold",
        refused.pool,
        refused.savings,
        score.savings_fraction * 100.0,
        score.disruption_fraction * 100.0,
        score.value(),
        1.0 / BALANCED_K
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Karpenter's balanced_test.go example pool: eight m7i.xlarge
    // ($4.84/day) and two m7i.2xlarge ($9.68/day), 80 pods.
    const POOL: PoolTotals = PoolTotals {
        cost: 58.08,
        disruption_cost: 90.0,
    };

    fn close(a: f64, b: f64, within: f64) -> bool {
        (a - b).abs() <= within
    }

    #[test]
    fn clear_savings_are_approved() {
        // "should approve an oversized node consolidation".
        let oversized = score_move(7.26, 4.0, POOL);
        assert!(oversized.approved(), "{}", oversized.value());
        assert!(close(
            oversized.value(),
            (7.26 / 58.08) / (4.0 / 90.0),
            0.02
        ));
        assert!(close(oversized.savings_fraction, 7.26 / 58.08, 0.001));
        // "should approve a spare capacity delete".
        assert!(score_move(4.84, 5.0, POOL).approved());
    }

    #[test]
    fn marginal_and_zero_savings_moves_are_rejected() {
        // "should reject a marginal move".
        let marginal = score_move(2.42, 9.0, POOL);
        assert!(!marginal.approved(), "{}", marginal.value());
        // "should reject a well-packed node with zero savings".
        let packed = score_move(0.0, 11.0, POOL);
        assert!(!packed.approved());
        assert_eq!(packed.value(), 0.0);
    }

    #[test]
    fn a_uniform_pool_approves_the_same_replace() {
        // "should approve a replace in a uniform pool".
        let uniform = PoolTotals {
            cost: 48.40,
            disruption_cost: 90.0,
        };
        assert!(score_move(2.42, 9.0, uniform).approved());
    }

    #[test]
    fn low_disruption_nodes_pass_and_high_disruption_ones_do_not() {
        let heterogeneous = PoolTotals {
            cost: 58.08,
            disruption_cost: 117.0,
        };
        assert!(score_move(4.84, 5.0, heterogeneous).approved());
        assert!(!score_move(4.84, 32.0, heterogeneous).approved());
    }

    #[test]
    fn the_score_does_not_depend_on_the_pool_size() {
        let ten = score_move(7.26, 4.0, POOL);
        let hundred = score_move(
            7.26,
            4.0,
            PoolTotals {
                cost: 580.80,
                disruption_cost: 900.0,
            },
        );
        assert!(close(ten.value(), hundred.value(), 0.01));
    }

    #[test]
    fn zero_values_are_guarded() {
        let free = score_move(4.84, 0.0, POOL);
        assert!(free.approved() && free.value().is_infinite());
        assert!(!score_move(0.0, 0.0, POOL).approved());
        let no_cost = PoolTotals {
            cost: 0.0,
            disruption_cost: 90.0,
        };
        assert!(!score_move(4.84, 5.0, no_cost).approved());
    }

    #[test]
    fn the_threshold_moves_with_k() {
        let marginal = score_move(2.42, 9.0, POOL);
        assert!(!marginal.approved_at(2.0));
        assert!(marginal.approved_at(3.0));
        assert!(!marginal.approved_at(1.0));
    }

    #[test]
    fn proportionally_equal_moves_score_alike_across_pools() {
        let on_demand = PoolTotals {
            cost: 48.40,
            disruption_cost: 90.0,
        };
        let spot = PoolTotals {
            cost: 14.50,
            disruption_cost: 90.0,
        };
        let a = score_move(4.84, 4.0, on_demand);
        let b = score_move(1.45, 4.0, spot);
        assert!(close(a.value(), b.value(), 0.01));
        assert!(a.approved() && b.approved());
    }
}
