//! The result of a simulation as users read it: a table, or stable JSON.
//!
//! The JSON shape is documented in the README and kept stable for scripts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::extensions::{Outcome, Reorder, drops_by_reason};
use crate::scheduling::overlay::OverlayStatus;
use crate::scheduling::{InstanceType, SchedulingResult};

/// One NodeClaim the round would create.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedNodeClaim {
    /// `<nodepool>-<n>`, numbered per NodePool in creation order.
    pub name: String,
    /// The NodePool it belongs to.
    pub node_pool: String,
    /// The type the launch is expected to get (the first option).
    pub instance_type: String,
    /// Every option in launch order.
    pub instance_type_options: Vec<String>,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
    /// Zone of the expected offering.
    pub zone: String,
    /// Hourly price of the expected offering that the scheduler minimised
    /// (NodeOverlays applied).
    pub price_per_hour: f64,
    /// The catalog's hourly price of that offering (equal to
    /// `price_per_hour` unless an overlay changed it).
    pub list_price_per_hour: f64,
    /// Whether that price is an estimate (spot without a price source, or a
    /// region without its own price data).
    pub price_is_estimate: bool,
    /// Pods (`namespace/name`) planned onto it.
    pub pods: Vec<String>,
    /// Total requests (Kubernetes quantities), DaemonSet overhead included.
    pub requests: BTreeMap<String, String>,
    /// Labels the node will carry.
    pub labels: BTreeMap<String, String>,
    /// CPU requests as a fraction of the expected type's allocatable CPU.
    #[serde(skip)]
    pub cpu_fill: Option<f64>,
    /// Memory requests as a fraction of the expected type's allocatable memory.
    #[serde(skip)]
    pub memory_fill: Option<f64>,
}

/// Pods placed on a node that already exists, or on a NodeClaim that
/// launched and has no Node yet.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistingNodePlan {
    /// Node name, or the NodeClaim's name when in flight.
    pub name: String,
    /// Whether it is an in-flight NodeClaim rather than a Node.
    pub in_flight: bool,
    /// Pods (`namespace/name`) planned onto it.
    pub pods: Vec<String>,
}

/// What the round started from, so a user can check the snapshot was read
/// as meant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummary {
    /// Nodes.
    pub nodes: usize,
    /// NodeClaims without a Node yet (in-flight capacity).
    pub in_flight_node_claims: usize,
    /// Pods running on, or bound to, a Node.
    pub bound_pods: usize,
    /// Pods to place: pending ones and those expanded from workloads.
    pub pending_pods: usize,
    /// Of the pods to place, those expanded from workloads without pods.
    pub expanded_pods: usize,
    /// Pods left out: finished, being deleted, or a DaemonSet's pending pod.
    pub ignored_pods: usize,
}

/// A pod the round cannot place.
#[derive(Debug, Clone, Serialize)]
pub struct Unschedulable {
    /// `namespace/name`.
    pub pod: String,
    /// Why, in terms of NodePools, requirements and resources.
    pub reason: String,
}

/// What one extension module did for one NodePool.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionRun {
    /// The EC2NodeClass whose `spec.extensions` names the module.
    pub node_class: String,
    /// The NodePool it ran for.
    pub node_pool: String,
    /// The entry's `name`.
    pub module: String,
    /// `instance-filter` or `priority-scorer`.
    pub role: String,
    /// Where the module came from.
    pub source: String,
    /// `Enforce`, or `Shadow`: reported only, decides nothing.
    pub mode: String,
    /// Instance types dropped (in shadow mode: that would have been),
    /// grouped by the filter's reason.
    pub dropped: Vec<DroppedGroup>,
    /// A shadow scorer: the first options as enforced and had it been
    /// enforced, and how many would move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder: Option<Reorder>,
    /// Why the module failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the module's answer changed nothing although it ran (another
    /// module blocked the class).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_effect: Option<String>,
    /// `Fail` stopped launches for the NodeClass; `Ignore` skipped the module.
    pub failure_policy: String,
}

/// Instance types one filter dropped for one reason.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DroppedGroup {
    /// The filter's reason.
    pub reason: String,
    /// The instance types, sorted.
    pub instance_types: Vec<String>,
}

impl ExtensionRun {
    /// One entry per module report of an evaluation.
    pub fn from_outcome(node_class: &str, node_pool: &str, outcome: &Outcome) -> Vec<Self> {
        outcome
            .reports
            .iter()
            .map(|report| ExtensionRun {
                node_class: node_class.to_string(),
                node_pool: node_pool.to_string(),
                module: report.name.clone(),
                role: report.role.as_str().to_string(),
                source: report.source.clone(),
                mode: format!("{:?}", report.mode),
                dropped: drops_by_reason(&report.dropped)
                    .into_iter()
                    .map(|(reason, mut instance_types)| {
                        instance_types.sort();
                        DroppedGroup {
                            reason,
                            instance_types,
                        }
                    })
                    .collect(),
                reorder: report.reorder.clone(),
                error: report.error.clone(),
                no_effect: report.no_effect.clone(),
                failure_policy: format!("{:?}", report.failure_policy),
            })
            .collect()
    }
}

/// Where a simulation's instance types, offerings and prices came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogKind {
    /// The catalog compiled into the binary.
    Embedded,
    /// The EC2 and Pricing APIs (`--aws`).
    Live,
}

/// The outcome of one simulated provisioning round.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Region of the catalog used.
    pub region: String,
    /// Which catalog was used.
    pub catalog: CatalogKind,
    /// What the catalog lacks: price refreshes that failed, with what stands in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catalog_warnings: Vec<String>,
    /// NodeClaims to create.
    pub node_claims: Vec<PlannedNodeClaim>,
    /// What the round started from.
    pub cluster: ClusterSummary,
    /// Existing nodes and in-flight NodeClaims that receive pods.
    pub existing_nodes: Vec<ExistingNodePlan>,
    /// Pods that cannot be placed.
    pub unschedulable: Vec<Unschedulable>,
    /// Sum of the NodeClaims' hourly prices.
    pub total_price_per_hour: f64,
    /// Wall time of the scheduling solve.
    pub solve_millis: f64,
    /// What each extension module did, per NodePool.
    pub extensions: Vec<ExtensionRun>,
    /// Every NodeOverlay read, whether it applied and why not.
    pub node_overlays: Vec<OverlayReport>,
    /// What each static NodePool (`spec.replicas`) would open or delete;
    /// left out of the JSON when there is none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub static_node_pools: Vec<super::static_pools::StaticPoolPlan>,
    /// Each NodePool with `nodewright.io/price-limit-per-hour`: what its
    /// nodes and this plan's NodeClaims cost against the limit; left out of
    /// the JSON when no pool sets one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub price_limits: Vec<PriceLimitReport>,
}

/// A NodePool's price limit in a plan (the `priceLimits[]` of the JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriceLimitReport {
    /// The NodePool.
    pub node_pool: String,
    /// `nodewright.io/price-limit-per-hour`.
    pub limit_per_hour: f64,
    /// Its nodes and in-flight NodeClaims, at their offering prices.
    pub nodes_per_hour: f64,
    /// This plan's new NodeClaims of the pool (their `pricePerHour`).
    pub planned_per_hour: f64,
    /// The limit less both.
    pub left_per_hour: f64,
}

impl PriceLimitReport {
    /// The report of `spend`, with the plan's `node_claims`.
    pub fn of(spend: &crate::scheduling::PoolSpend, node_claims: &[PlannedNodeClaim]) -> Self {
        let planned_per_hour = node_claims
            .iter()
            .filter(|c| c.node_pool == spend.node_pool)
            .fold(0.0, |total, c| total + c.price_per_hour);
        PriceLimitReport {
            node_pool: spend.node_pool.clone(),
            limit_per_hour: spend.limit_per_hour,
            nodes_per_hour: spend.nodes_per_hour,
            planned_per_hour,
            left_per_hour: spend.limit_per_hour - spend.nodes_per_hour - planned_per_hour,
        }
    }
}

/// What became of one NodeOverlay in a simulation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverlayReport {
    /// The overlay's name.
    pub name: String,
    /// Whether its prices and capacity are in the offerings the plan used.
    pub applied: bool,
    /// Why not: `RuntimeValidation`, `Conflict` (Karpenter's
    /// `ValidationSucceeded` reasons) or `FeatureGateDisabled`; `null`
    /// when applied.
    pub reason: Option<String>,
    /// The problem and its fix, or what the overlay matched.
    pub message: String,
}

impl From<&OverlayStatus> for OverlayReport {
    fn from(status: &OverlayStatus) -> Self {
        OverlayReport {
            name: status.name.clone(),
            applied: status.applied,
            reason: status.reason.map(str::to_string),
            message: status.message.clone(),
        }
    }
}

fn quantity_cpu(millis: i64) -> String {
    if millis % 1000 == 0 {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

fn quantity_bytes(bytes: i64) -> String {
    const MI: i64 = 1024 * 1024;
    if bytes % (1024 * MI) == 0 {
        format!("{}Gi", bytes / (1024 * MI))
    } else if bytes % MI == 0 {
        format!("{}Mi", bytes / MI)
    } else {
        bytes.to_string()
    }
}

impl Plan {
    /// Builds the plan from a solve; `pools` maps NodePool names to the
    /// instance types they were offered, for fill figures; `in_flight` names
    /// the NodeClaims that had no Node.
    pub fn new(
        region: &str,
        result: &SchedulingResult,
        pools: &BTreeMap<String, Arc<Vec<InstanceType>>>,
        in_flight: &BTreeSet<String>,
        solve_millis: f64,
    ) -> Self {
        let mut counters: BTreeMap<&str, usize> = BTreeMap::new();
        let node_claims: Vec<PlannedNodeClaim> = result
            .new_node_claims
            .iter()
            .map(|claim| {
                let n = counters.entry(claim.node_pool.as_str()).or_insert(0);
                *n += 1;
                let chosen = pools
                    .get(&claim.node_pool)
                    .and_then(|types| types.iter().find(|t| t.name == claim.instance_type));
                let allocatable = chosen.map(InstanceType::allocatable);
                let offering = chosen.and_then(|t| {
                    t.offerings.iter().find(|o| {
                        o.zone == claim.zone
                            && o.capacity_type == claim.capacity_type
                            && o.reservation_id == claim.reservation_id
                    })
                });
                let price_is_estimate = offering.is_some_and(|o| o.price_is_estimate);
                let list_price_per_hour = offering.map_or(claim.price, |o| o.list_price);
                let fill = |used: i64, total: i64| (total > 0).then(|| used as f64 / total as f64);
                let mut requests = BTreeMap::from([
                    ("cpu".to_string(), quantity_cpu(claim.requests.cpu_millis)),
                    ("memory".to_string(), quantity_bytes(claim.requests.memory)),
                ]);
                for (name, amount) in &claim.requests.extended {
                    requests.insert(name.clone(), amount.to_string());
                }
                PlannedNodeClaim {
                    name: format!("{}-{n}", claim.node_pool),
                    node_pool: claim.node_pool.clone(),
                    instance_type: claim.instance_type.clone(),
                    instance_type_options: claim
                        .instance_type_options
                        .iter()
                        .map(|o| o.name.clone())
                        .collect(),
                    capacity_type: claim.capacity_type.label_value().to_string(),
                    zone: claim.zone.clone(),
                    price_per_hour: claim.price,
                    list_price_per_hour,
                    price_is_estimate,
                    pods: claim.pods.iter().map(ToString::to_string).collect(),
                    requests,
                    labels: claim.labels.clone(),
                    cpu_fill: allocatable
                        .as_ref()
                        .and_then(|a| fill(claim.requests.cpu_millis, a.cpu_millis)),
                    memory_fill: allocatable
                        .as_ref()
                        .and_then(|a| fill(claim.requests.memory, a.memory)),
                }
            })
            .collect();
        let mut existing: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for placement in &result.existing_node_placements {
            existing
                .entry(placement.node.clone())
                .or_default()
                .push(placement.pod.to_string());
        }
        // Folded from +0.0: the sum of no f64s is -0.0, printed `$-0.0000`.
        let total_price_per_hour = node_claims
            .iter()
            .map(|c| c.price_per_hour)
            .fold(0.0, |total, price| total + price);
        Plan {
            region: region.to_string(),
            catalog: CatalogKind::Embedded,
            catalog_warnings: Vec::new(),
            cluster: ClusterSummary::default(),
            node_claims,
            existing_nodes: existing
                .into_iter()
                .map(|(name, pods)| ExistingNodePlan {
                    in_flight: in_flight.contains(&name),
                    name,
                    pods,
                })
                .collect(),
            unschedulable: result
                .errors
                .iter()
                .map(|e| Unschedulable {
                    pod: e.pod.to_string(),
                    reason: e.reason.clone(),
                })
                .collect(),
            total_price_per_hour,
            solve_millis,
            extensions: Vec::new(),
            node_overlays: Vec::new(),
            static_node_pools: Vec::new(),
            price_limits: Vec::new(),
        }
    }
}
