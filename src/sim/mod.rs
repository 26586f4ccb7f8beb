//! `nodewright simulate`: one provisioning round on manifests read from disk
//! or standard input — hand-written, or a cluster as `kubectl get -o yaml`
//! prints it — with the embedded EC2 catalog standing in for the EC2 API, or
//! a catalog read from it (`--aws`).
//!
//! The pipeline is the controller's: the manifests become a cluster snapshot,
//! which `crate::cluster` turns into the scheduler's input (each NodePool's
//! instance types from the instance-type provider, through its class's
//! extensions); the resulting NodeClaims are reported instead of launched.
//!
//! [`sandbox`]: `nodewright sandbox`, a whole cluster on one machine.

pub mod disruption;
pub mod double;
pub mod manifests;
pub mod plan;
pub mod sandbox;
pub mod static_pools;
pub mod workloads;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::aws::catalog::{Catalog, CatalogError};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::{InputError, evaluate_overlays, scheduler_input};
use crate::extensions::Extensions;
use crate::scheduling::overlay;
use crate::scheduling::{InstanceType, Scheduler, SchedulerOptions};
use nodewright_host::{HostConfig, HostError};

pub use manifests::{ManifestError, Manifests};
pub use plan::{CatalogKind, Plan};

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The manifests could not be read.
    #[error(transparent)]
    Manifests(#[from] ManifestError),
    /// The region has no embedded catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// No NodePool was given, so nothing can be provisioned.
    #[error("no NodePool in the given manifests; add a karpenter.sh/v1 NodePool")]
    NoNodePool,
    /// The extension sandbox could not start.
    #[error(transparent)]
    Host(#[from] HostError),
    /// An object in the manifests cannot be used as it is: a NodePool naming
    /// a missing EC2NodeClass, a pod bound to a missing node, a malformed
    /// field, …
    #[error(transparent)]
    Input(#[from] InputError),
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    /// Files or directories of YAML manifests; `-` is standard input.
    pub paths: Vec<PathBuf>,
    /// Region of the embedded catalog.
    pub region: String,
    /// Schedule without preferred affinities and spreads.
    pub ignore_preferences: bool,
    /// The `NodeOverlay` feature gate: apply the NodeOverlays read
    /// (otherwise they are listed as not applied).
    pub node_overlay: bool,
    /// The `StaticCapacity` feature gate: report what static NodePools
    /// would open or delete (otherwise they are listed as held).
    pub static_capacity: bool,
}

/// The controller's feature gates a simulated round follows.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimulateGates {
    /// `NodeOverlay`: apply the NodeOverlays read.
    pub node_overlay: bool,
    /// `StaticCapacity`: static NodePools open and delete NodeClaims.
    pub static_capacity: bool,
}

/// Runs one provisioning round on the embedded catalog and returns the plan.
pub fn simulate(options: &SimulateOptions) -> Result<Plan, SimulateError> {
    let catalog = Catalog::embedded(&options.region)?;
    simulate_with(options, catalog, CatalogKind::Embedded)
}

/// Runs one provisioning round on `catalog` (of `kind`, reported in the
/// plan) and returns the plan; `options.region` is not read.
pub fn simulate_with(
    options: &SimulateOptions,
    catalog: Catalog,
    kind: CatalogKind,
) -> Result<Plan, SimulateError> {
    let manifests = Manifests::load(&options.paths)?;
    let extensions = Arc::new(Extensions::new(HostConfig::default())?);
    let provider = InstanceTypeProvider::new(Arc::new(catalog), extensions, Arc::default());
    let gates = SimulateGates {
        node_overlay: options.node_overlay,
        static_capacity: options.static_capacity,
    };
    let mut plan = plan_gated(manifests, &provider, options.ignore_preferences, gates)?;
    plan.catalog = kind;
    Ok(plan)
}

/// What the manifests hold, in the scheduler's terms (the plan's `cluster`).
fn cluster_summary(
    manifests: &Manifests,
    snapshot: &crate::cluster::ClusterSnapshot,
    input: &crate::scheduling::SchedulerInput,
) -> plan::ClusterSummary {
    let given_pods = manifests
        .pod_sources
        .iter()
        .filter(|s| matches!(s, workloads::PodSource::Pod(_)))
        .count();
    let bound_pods = input
        .existing_nodes
        .iter()
        .chain(&input.in_flight)
        .map(|n| n.pods.len())
        .sum::<usize>();
    plan::ClusterSummary {
        nodes: input.existing_nodes.len(),
        in_flight_node_claims: input.in_flight.len(),
        bound_pods,
        pending_pods: input.pods.len(),
        expanded_pods: snapshot.pods.len().saturating_sub(given_pods),
        ignored_pods: snapshot
            .pods
            .len()
            .saturating_sub(input.pods.len() + bound_pods),
    }
}

/// Plans one provisioning round for manifests already read, with instance
/// types from `instance_types`, the `NodeOverlay` gate off. The manifests
/// are let go before the solve: once converted, thousands of pods need not
/// be held twice.
pub fn plan(
    manifests: Manifests,
    instance_types: &InstanceTypeProvider,
    ignore_preferences: bool,
) -> Result<Plan, SimulateError> {
    plan_gated(
        manifests,
        instance_types,
        ignore_preferences,
        SimulateGates::default(),
    )
}

/// What became of the manifests' NodeOverlays: with the gate on, evaluated
/// against the pools and set on `instance_types` (so the solve sees them);
/// with it off, each listed as not applied.
fn apply_overlays(
    manifests: &Manifests,
    snapshot: &crate::cluster::ClusterSnapshot,
    instance_types: &InstanceTypeProvider,
    node_overlay: bool,
) -> Vec<plan::OverlayReport> {
    let read: Vec<&crate::apis::NodeOverlay> = manifests.node_overlays.iter().collect();
    let mut statuses = if node_overlay {
        let overlays = evaluate_overlays(snapshot, &read, instance_types);
        let statuses = overlays.statuses().to_vec();
        instance_types.set_overlays(Arc::new(overlays));
        statuses
    } else {
        overlay::gate_off(&read)
    };
    statuses.extend(manifests.unreadable_overlays.iter().map(|(name, message)| {
        overlay::OverlayStatus {
            name: name.clone(),
            applied: false,
            reason: Some(crate::apis::nodeoverlay::REASON_RUNTIME_VALIDATION),
            message: message.clone(),
        }
    }));
    statuses.iter().map(plan::OverlayReport::from).collect()
}

/// [`plan`] with the feature gates as given.
pub fn plan_gated(
    manifests: Manifests,
    instance_types: &InstanceTypeProvider,
    ignore_preferences: bool,
    gates: SimulateGates,
) -> Result<Plan, SimulateError> {
    if manifests.node_pools.is_empty() {
        return Err(SimulateError::NoNodePool);
    }
    let options = SchedulerOptions {
        ignore_preferences,
        ..SchedulerOptions::default()
    };
    let snapshot = manifests.snapshot();
    let node_overlays = apply_overlays(&manifests, &snapshot, instance_types, gates.node_overlay);
    let prepared = scheduler_input(
        &snapshot,
        instance_types,
        options,
        &crate::cluster::ConvertedPods::default(),
    );
    if let Some(problem) = prepared.problems.into_iter().next() {
        return Err(problem.into());
    }
    let input = &prepared.input;
    let pools: BTreeMap<String, Arc<Vec<InstanceType>>> = input
        .node_pools
        .iter()
        .map(|p| (p.name.clone(), p.instance_types.clone()))
        .collect();
    let in_flight: BTreeSet<String> = input.in_flight.iter().map(|n| n.name.clone()).collect();
    let cluster = cluster_summary(&manifests, &snapshot, input);
    let static_node_pools = static_pools::static_pools(
        &snapshot,
        &input.node_pools,
        &input.options,
        gates.static_capacity,
        k8s_openapi::jiff::Timestamp::now(),
    );
    drop(snapshot);
    drop(manifests);
    let started = Instant::now();
    let scheduler = Scheduler::new(prepared.input);
    let result = scheduler.solve();
    let spend = scheduler.price_limits();
    let solve_millis = started.elapsed().as_secs_f64() * 1000.0;
    // Freeing the compiled model and its pods is not part of the solve.
    drop(scheduler);
    let region = instance_types.catalog().region().to_string();
    let mut plan = Plan::new(&region, &result, &pools, &in_flight, solve_millis);
    plan.cluster = cluster;
    plan.node_overlays = node_overlays;
    plan.static_node_pools = static_node_pools;
    plan.price_limits = spend
        .iter()
        .map(|s| plan::PriceLimitReport::of(s, &plan.node_claims))
        .collect();
    plan.extensions = prepared
        .extensions
        .iter()
        .flat_map(|run| {
            plan::ExtensionRun::from_outcome(&run.node_class, &run.node_pool, &run.outcome)
        })
        .collect();
    Ok(plan)
}
