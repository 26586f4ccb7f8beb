//! `nodewright simulate --disruption`: the disruption controller's passes
//! over manifests or a cluster snapshot at a given time, reported as the
//! commands it would start (the JSON shape is documented in the README).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::plan::{ClusterSummary, PlannedNodeClaim};
use super::{CatalogKind, Manifests, Plan, SimulateError, SimulateOptions};
use crate::aws::catalog::Catalog;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::{ConvertedPods, scheduler_input};
use crate::controllers::disruption::sim::{
    Decision, DisruptionPlan, MarkSource, PlanOptions, plan,
};
use crate::controllers::disruption::types::{Candidate, Destination, Kept, Method};
use crate::extensions::Extensions;
use crate::scheduling::{PodKey, SchedulerOptions, SchedulingResult};
use nodewright_host::HostConfig;

/// The output of `simulate --disruption`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionOutput {
    /// Region of the catalog used.
    pub region: String,
    /// Which catalog was used.
    pub catalog: CatalogKind,
    /// What the cluster held.
    pub cluster: ClusterSummary,
    /// The decisions.
    pub disruption: DisruptionReport,
}

/// What the disruption controller would start at `at`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionReport {
    /// The time judged at (RFC 3339).
    pub at: String,
    /// Commands in the order they would start.
    pub decisions: Vec<DecisionReport>,
    /// Every NodeClaim's marks at `at`.
    pub marked: Vec<MarkedReport>,
    /// Every node in no decision, with the first reason that kept it.
    pub kept: Vec<KeptReport>,
    /// What the managed nodes cost per hour before.
    pub price_per_hour_before: f64,
    /// And after every decision.
    pub price_per_hour_after: f64,
    /// Time spent compiling models and in what-ifs.
    pub solve_millis: f64,
    /// Objects that could not be used: a NodePool among them is left out
    /// (its nodes are kept, `not-managed`) and the others are planned.
    pub problems: Vec<String>,
}

/// One command.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionReport {
    /// The pass it came from (1-based).
    pub pass: usize,
    /// `emptiness`, `drift`, `multi-node-consolidation`,
    /// `single-node-consolidation` or `expiration`.
    pub method: String,
    /// `Empty`, `Drifted`, `Underutilized` or `Expired`.
    pub reason: String,
    /// `delete` or `replace`.
    pub decision: String,
    /// The nodes that go.
    pub candidates: Vec<CandidateReport>,
    /// NodeClaims launched first, as a provisioning plan's `nodeClaims[]`.
    pub replacements: Vec<PlannedNodeClaim>,
    /// Where each displaced pod goes.
    pub pods: Vec<PodMove>,
    /// What the candidates cost per hour.
    pub price_per_hour_before: f64,
    /// What the replacements cost per hour.
    pub price_per_hour_after: f64,
}

/// A node a command takes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateReport {
    /// Its NodeClaim.
    pub node_claim: String,
    /// Its Node.
    pub node: String,
    /// Its NodePool.
    pub node_pool: String,
    /// Its instance type.
    pub instance_type: String,
    /// Its capacity type.
    pub capacity_type: String,
    /// Its zone.
    pub zone: String,
    /// Its hourly price.
    pub price_per_hour: f64,
    /// Its reschedulable pods.
    pub pods: Vec<String>,
    /// Karpenter's drift reason (drift only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_reason: Option<String>,
}

/// A displaced pod and where it goes.
#[derive(Debug, Clone, Serialize)]
pub struct PodMove {
    /// `namespace/name`.
    pub pod: String,
    /// The node it leaves.
    pub from: String,
    /// The node or replacement it goes to (`null`: nothing takes it).
    pub to: Option<String>,
}

/// A NodeClaim's marks.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkedReport {
    /// The NodeClaim.
    pub node_claim: String,
    /// `Consolidatable`.
    pub consolidatable: bool,
    /// `Drifted`'s reason, or `null`.
    pub drifted: Option<String>,
    /// `expireAfter` has passed.
    pub expired: bool,
}

/// A node no command takes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptReport {
    /// The Node (the NodeClaim when it has no Node).
    pub node: String,
    /// Its NodeClaim.
    pub node_claim: Option<String>,
    /// Its NodePool.
    pub node_pool: Option<String>,
    /// The first reason that kept it.
    pub reason: String,
    /// What a user would change.
    pub message: String,
}

/// Settings of `simulate --disruption`.
#[derive(Debug, Clone)]
pub struct DisruptionOptions {
    /// The time to judge at.
    pub at: Timestamp,
    /// `SpotToSpotConsolidation`.
    pub spot_to_spot: bool,
}

/// Runs the disruption passes over the manifests of `options` on the
/// embedded catalog of its region.
pub fn simulate_disruption(
    options: &SimulateOptions,
    disruption: &DisruptionOptions,
) -> Result<DisruptionOutput, SimulateError> {
    let catalog = Catalog::embedded(&options.region)?;
    simulate_disruption_with(options, disruption, catalog, CatalogKind::Embedded)
}

/// [`simulate_disruption`] on `catalog`.
pub fn simulate_disruption_with(
    options: &SimulateOptions,
    disruption: &DisruptionOptions,
    catalog: Catalog,
    kind: CatalogKind,
) -> Result<DisruptionOutput, SimulateError> {
    let manifests = Manifests::load(&options.paths)?;
    let extensions = Arc::new(Extensions::new(HostConfig::default())?);
    let provider = InstanceTypeProvider::new(Arc::new(catalog), extensions, Arc::default());
    let mut output = disruption_of(manifests, &provider, disruption, options.ignore_preferences)?;
    output.catalog = kind;
    Ok(output)
}

/// The disruption passes over manifests already read, with instance types
/// from `provider` (reported as the embedded catalog).
pub fn disruption_of(
    manifests: Manifests,
    provider: &InstanceTypeProvider,
    disruption: &DisruptionOptions,
    ignore_preferences: bool,
) -> Result<DisruptionOutput, SimulateError> {
    if manifests.node_pools.is_empty() {
        return Err(SimulateError::NoNodePool);
    }
    let region = provider.catalog().region().to_string();
    let snapshot = manifests.snapshot();
    let scheduler = SchedulerOptions {
        ignore_preferences,
        ..SchedulerOptions::default()
    };
    let found = plan(
        &snapshot,
        provider,
        &PlanOptions {
            at: disruption.at,
            spot_to_spot: disruption.spot_to_spot,
            scheduler,
            marks: MarkSource::Recompute,
            max_passes: None,
            exhaustive: false,
        },
    );
    // `cluster` as the provisioning plan counts it.
    let input = scheduler_input(
        &snapshot,
        provider,
        SchedulerOptions::default(),
        &ConvertedPods::default(),
    )
    .input;
    let cluster = super::cluster_summary(&manifests, &snapshot, &input);
    Ok(DisruptionOutput {
        region: region.clone(),
        catalog: CatalogKind::Embedded,
        cluster,
        disruption: report(&region, disruption.at, &found),
    })
}

fn report(region: &str, at: Timestamp, found: &DisruptionPlan) -> DisruptionReport {
    DisruptionReport {
        at: at.to_string(),
        decisions: found
            .decisions
            .iter()
            .map(|d| decision(region, d, found))
            .collect(),
        marked: found
            .marked
            .iter()
            .map(|m| MarkedReport {
                node_claim: m.node_claim.clone(),
                consolidatable: m.marks.consolidatable,
                drifted: m.marks.drifted.clone(),
                expired: m.marks.expired,
            })
            .collect(),
        kept: found.kept.iter().map(kept).collect(),
        price_per_hour_before: found.price_before,
        price_per_hour_after: found.price_after,
        solve_millis: found.solve_millis,
        problems: found.problems.iter().map(ToString::to_string).collect(),
    }
}

fn decision(region: &str, d: &Decision, found: &DisruptionPlan) -> DecisionReport {
    let command = &d.command;
    let result = SchedulingResult {
        new_node_claims: command.replacements.clone(),
        ..SchedulingResult::default()
    };
    let mut replacements = Plan::new(
        region,
        &result,
        &found.instance_types,
        &BTreeSet::new(),
        0.0,
    )
    .node_claims;
    for (planned, name) in replacements.iter_mut().zip(&d.replacement_names) {
        planned.name = name.clone();
    }
    let from: BTreeMap<&PodKey, &str> = command
        .candidates
        .iter()
        .flat_map(|c| c.pods.iter().map(move |p| (p, c.name.as_str())))
        .collect();
    let pods = command
        .moves
        .iter()
        .map(|(pod, to)| PodMove {
            pod: pod.to_string(),
            from: from.get(pod).copied().unwrap_or_default().to_string(),
            to: match to {
                Destination::Node(name) => Some(name.clone()),
                Destination::Replacement(i) => d.replacement_names.get(*i).cloned(),
                Destination::Pending => None,
            },
        })
        .collect();
    DecisionReport {
        pass: d.pass,
        method: command.method.as_str().to_string(),
        reason: command.method.reason().to_string(),
        decision: command.decision().to_string(),
        candidates: command
            .candidates
            .iter()
            .map(|c| candidate(c, command.method))
            .collect(),
        replacements,
        pods,
        price_per_hour_before: command.price_before(),
        price_per_hour_after: command.price_after(),
    }
}

fn candidate(c: &Candidate, method: Method) -> CandidateReport {
    use kube::ResourceExt;
    CandidateReport {
        node_claim: c.node_claim.name_any(),
        node: c.name.clone(),
        node_pool: c.pool.clone(),
        instance_type: c.instance_type.clone().unwrap_or_default(),
        capacity_type: c
            .capacity_type
            .map(|ct| ct.label_value().to_string())
            .unwrap_or_default(),
        zone: c.zone.clone().unwrap_or_default(),
        price_per_hour: c.price,
        pods: c.pods.iter().map(ToString::to_string).collect(),
        drift_reason: (method == Method::Drift)
            .then(|| c.marks.drifted.clone())
            .flatten(),
    }
}

fn kept(k: &Kept) -> KeptReport {
    KeptReport {
        node: k.node.clone(),
        node_claim: k.node_claim.clone(),
        node_pool: k.node_pool.clone(),
        reason: k.reason.as_str().to_string(),
        message: k.message.clone(),
    }
}
