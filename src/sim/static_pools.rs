//! What `simulate` says of static NodePools (`spec.replicas`): how many
//! NodeClaims each would open, from which template claim, or which it
//! would delete — the static capacity controller's own decision
//! ([`static_capacity::static_pools`]) on the manifests. Static pools never take
//! pending pods, so the round's solve leaves them out; their plans are
//! reported beside it under `staticNodePools`.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::cluster::ClusterSnapshot;
use crate::controllers::static_capacity::{self, StaticPool};
use crate::scheduling::{NodePoolSpec, SchedulerOptions};

/// One static NodePool in a plan (the `staticNodePools[]` of the JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StaticPoolPlan {
    /// The NodePool.
    pub node_pool: String,
    /// `spec.replicas`.
    pub replicas: i64,
    /// Its NodeClaims neither being deleted nor taken by a disruption.
    pub active: i64,
    /// NodeClaims it would open.
    pub open: i64,
    /// NodeClaims it would delete, in the order chosen.
    pub remove: Vec<String>,
    /// The NodeClaim it opens for each replica, when it opens any.
    pub node_claim: Option<StaticClaimPlan>,
    /// What the opened NodeClaims cost together per hour.
    pub price_per_hour: f64,
    /// Why it opens fewer than it lacks, or nothing: the gate is off, the
    /// pool is not ready, `limits.nodes`, or no instance type fits.
    pub held: Option<String>,
}

/// The NodeClaim a static pool opens per replica.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StaticClaimPlan {
    /// The type the launch is expected to get.
    pub instance_type: String,
    /// Every option in launch order.
    pub instance_type_options: Vec<String>,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
    /// Zone of the expected offering.
    pub zone: String,
    /// Hourly price of the expected offering.
    pub price_per_hour: f64,
}

/// The plan of every static pool of `snapshot`, whose specs are `pools`,
/// at `now`; with `gate` off (`StaticCapacity`), each opens and deletes
/// nothing and says so.
pub fn static_pools(
    snapshot: &ClusterSnapshot,
    pools: &[NodePoolSpec],
    options: &SchedulerOptions,
    gate: bool,
    now: Timestamp,
) -> Vec<StaticPoolPlan> {
    let mut found = static_capacity::static_pools(
        snapshot,
        pools,
        &BTreeSet::new(),
        now,
        options.max_instance_types,
    );
    // In the snapshot's order.
    snapshot
        .node_pools
        .iter()
        .filter_map(|pool| found.remove(pool.metadata.name.as_deref()?))
        .map(|StaticPool { plan, template }| {
            let mut out = StaticPoolPlan {
                node_pool: plan.node_pool.clone(),
                replicas: plan.replicas,
                active: plan.counts.active,
                open: plan.open,
                remove: plan.remove,
                node_claim: None,
                price_per_hour: 0.0,
                held: plan.held,
            };
            if !gate {
                out.open = 0;
                out.remove.clear();
                out.held = Some(
                    "the StaticCapacity feature gate is off (--feature-gates StaticCapacity=true)"
                        .to_string(),
                );
                return out;
            }
            if out.open == 0 {
                return out;
            }
            match template {
                Ok(claim) => {
                    out.price_per_hour = claim.price * out.open as f64;
                    out.node_claim = Some(StaticClaimPlan {
                        instance_type: claim.instance_type,
                        instance_type_options: claim
                            .instance_type_options
                            .into_iter()
                            .map(|o| o.name)
                            .collect(),
                        capacity_type: claim.capacity_type.label_value().to_string(),
                        zone: claim.zone,
                        price_per_hour: claim.price,
                    });
                }
                Err(why) => {
                    out.open = 0;
                    out.held = Some(why);
                }
            }
            out
        })
        .collect()
}
