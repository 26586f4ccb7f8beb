//! One disruption pass over a cluster (Karpenter's disruption `Reconcile`):
//! the cluster compiled into a scheduling model, one record per node,
//! candidates, budgets and `Balanced` totals from those records, then the
//! methods in order until one finds a command. The controller runs one
//! pass at a time; `simulate --disruption` runs passes one after another
//! ([`sim`](super::sim)).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use super::balanced::{PoolTotals, ScoredMove};
use super::budgets::{NodeCount, NodeState, allowed_disruptions, remaining};
use super::candidates::{candidates, expired};
use super::context::{PassContext, UnsafeDestination};
use super::methods::static_drift::static_pools;
use super::methods::{
    Verdicts, drift, emptiness, every_candidate, expiration, multi_node, single_node,
};
use super::record::{NodeRecord, PoolTypes, RecordInputs, records};
use super::types::{Allowed, Candidate, Command, Kept, KeptReason, Marks, Method};
use crate::apis::NodeClaim;
use crate::apis::nodepool::DisruptionReason;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::pods::is_reschedulable;
use crate::cluster::{
    ClusterSnapshot, ConvertedPods, InputError, cluster_input, pod_key, pool_specs,
};
use crate::controllers::nodeclaim::marks::{Consolidatable, consolidatable};
use crate::scheduling::{MinValuesPolicy, Model, Pod, PodKey, SchedulerInput, SchedulerOptions};

/// Settings of a pass.
#[derive(Clone, Debug)]
pub struct PassOptions {
    /// The time marks, budgets and expiry are judged at.
    pub at: Timestamp,
    /// `SpotToSpotConsolidation`.
    pub spot_to_spot: bool,
    /// The scheduler's options, as provisioning's.
    pub scheduler: SchedulerOptions,
    /// Every method runs over every candidate, even after an earlier one
    /// found the pass's command (which is still the first found): the most
    /// a pass can cost, for the disruption benchmark.
    pub exhaustive: bool,
}

/// What each NodePool's budgets allow in a pass.
#[derive(Clone, Debug, Default)]
pub struct Budgets {
    /// Nodes each pool may still disrupt, per reason (allowed less those
    /// disrupting).
    pub remaining: Allowed,
    /// What each pool's budgets allow before those disrupting
    /// (`karpenter_nodepools_allowed_disruptions`).
    pub allowed: Allowed,
    /// Nodes of each pool disrupting now (deleting, marked or not ready).
    pub disrupting: BTreeMap<String, usize>,
    /// Why a pool's budgets cannot be evaluated (it then allows none).
    pub errors: BTreeMap<String, String>,
}

/// What one pass found.
#[derive(Debug, Default)]
pub struct Pass {
    /// The command, if a method found one.
    pub command: Option<Command>,
    /// The nodes the candidate checks kept.
    pub kept: Vec<Kept>,
    /// The candidates, and what the methods said of those they left.
    pub candidates: Vec<Candidate>,
    /// The methods' verdicts on candidates they left.
    pub verdicts: Verdicts,
    /// The pass's records.
    pub records: Vec<NodeRecord>,
    /// Each NodePool's instance types.
    pub types: PoolTypes,
    /// The budgets.
    pub budgets: Budgets,
    /// Candidates per budget reason (`Empty`: consolidatable and without
    /// pods; `Drifted`; `Underutilized`: consolidatable).
    pub eligible: BTreeMap<DisruptionReason, usize>,
    /// Each method evaluated, and how long it took.
    pub evaluations: Vec<(Method, Duration)>,
    /// The consolidation moves scored, in order.
    pub moves: Vec<ScoredMove>,
    /// Objects that could not be used (their NodePools' nodes are kept).
    pub problems: Vec<InputError>,
    /// Time spent compiling the model and in what-ifs.
    pub solve_millis: f64,
}

/// Runs one pass over `cluster`: `marks` gives each NodeClaim's marks,
/// `marked` the nodes earlier offline passes took.
pub fn pass(
    cluster: &ClusterSnapshot,
    provider: &InstanceTypeProvider,
    options: &PassOptions,
    marks: &dyn Fn(&NodeClaim) -> Marks,
    marked: &BTreeSet<String>,
) -> Pass {
    let at = options.at;
    let started = Instant::now();
    let specs = pool_specs(cluster, provider);
    let input = cluster_input(cluster, &ConvertedPods::default(), &HashSet::new());
    let mut prepared = specs.prepare(input, options.scheduler.clone());
    // Nodes taken by earlier offline passes stay in the model, marked for
    // deletion: they take no pods, and theirs keep their room.
    for node in prepared
        .input
        .existing_nodes
        .iter_mut()
        .chain(prepared.input.in_flight.iter_mut())
    {
        node.marked_for_deletion |= marked.contains(&node.name);
    }
    let types: PoolTypes = prepared
        .input
        .node_pools
        .iter()
        .map(|p| (p.name.clone(), p.instance_types.clone()))
        .collect();
    let scores: BTreeMap<String, Arc<HashMap<String, i32>>> = prepared
        .input
        .node_pools
        .iter()
        .filter_map(|p| Some((p.name.clone(), p.priority_scores.clone()?)))
        .collect();
    let records = records(
        cluster,
        &RecordInputs {
            types: &types,
            marks,
            marked,
            now: at,
        },
    );
    let deleting = deleting_pods(&records, &prepared.input);
    let statics = static_pools(
        cluster,
        &prepared.input.node_pools,
        marked,
        at,
        options.scheduler.max_instance_types,
    );
    let model = Model::compile(prepared.input);
    let mut solve_millis = started.elapsed().as_secs_f64() * 1000.0;

    let (found, mut kept) = candidates(&records, &cluster.pdbs, at);
    let (found, unpriced): (Vec<Candidate>, Vec<Candidate>) =
        found.into_iter().partition(|c| types.contains_key(&c.pool));
    kept.extend(unpriced.into_iter().map(|c| Kept {
        message: format!(
            "NodePool {:?} has no instance types (see the problems listed); its nodes are left alone",
            c.pool
        ),
        node: c.name,
        node_claim: Some(kube::ResourceExt::name_any(&*c.node_claim)),
        node_pool: Some(c.pool),
        reason: KeptReason::NotManaged,
    }));
    let budgets = budgets(cluster, &records, at);
    let totals = pool_totals(&records);
    let unsafe_destinations = unsafe_destinations(&records, at);
    let moves = RefCell::new(Vec::new());
    let ctx = PassContext {
        model: &model,
        deleting: &deleting,
        allowed: &budgets.remaining,
        budget_errors: &budgets.errors,
        unsafe_destinations: &unsafe_destinations,
        spot_to_spot: options.spot_to_spot,
        types: &types,
        min_values_strict: options.scheduler.min_values_policy == MinValuesPolicy::Strict,
        scores: &scores,
        totals: &totals,
        moves: &moves,
        statics: &statics,
    };
    let started = Instant::now();
    let mut verdicts = Verdicts::new();
    let mut evaluations = Vec::new();
    let mut timed = |method: Method, run: &mut dyn FnMut() -> Option<Command>| {
        let started = Instant::now();
        let found = run();
        evaluations.push((method, started.elapsed()));
        found
    };
    let pool: Vec<&Candidate> = found.iter().collect();
    let command = if let Some(c) = expired(&records) {
        Some(expiration(&ctx, &c))
    } else if options.exhaustive {
        let empty = timed(Method::Emptiness, &mut || {
            emptiness(&ctx, &pool, &mut verdicts)
        });
        let drifted = timed(Method::Drift, &mut || {
            every_candidate(&pool, |c| drift(&ctx, c, &mut verdicts))
        });
        let multi = timed(Method::MultiNodeConsolidation, &mut || {
            multi_node(&ctx, &pool)
        });
        let single = timed(Method::SingleNodeConsolidation, &mut || {
            every_candidate(&pool, |c| single_node(&ctx, c, &mut verdicts))
        });
        [empty, drifted, multi, single].into_iter().flatten().next()
    } else {
        timed(Method::Emptiness, &mut || {
            emptiness(&ctx, &pool, &mut verdicts)
        })
        .or_else(|| timed(Method::Drift, &mut || drift(&ctx, &pool, &mut verdicts)))
        .or_else(|| {
            timed(Method::MultiNodeConsolidation, &mut || {
                multi_node(&ctx, &pool)
            })
        })
        .or_else(|| {
            timed(Method::SingleNodeConsolidation, &mut || {
                single_node(&ctx, &pool, &mut verdicts)
            })
        })
    };
    solve_millis += started.elapsed().as_secs_f64() * 1000.0;
    Pass {
        command,
        kept,
        eligible: eligible(&found),
        candidates: found,
        verdicts,
        records,
        types,
        budgets,
        evaluations,
        moves: moves.take(),
        problems: prepared.problems,
        solve_millis,
    }
}

/// The pods of nodes already being deleted or marked that will need room
/// elsewhere (Karpenter reschedules them in every what-if).
fn deleting_pods(records: &[NodeRecord], input: &SchedulerInput) -> Vec<Pod> {
    let deleting: BTreeSet<&str> = records
        .iter()
        .filter(|r| r.is_disrupting())
        .map(|r| r.name.as_str())
        .collect();
    if deleting.is_empty() {
        return Vec::new();
    }
    let reschedulable: HashSet<PodKey> = records
        .iter()
        .filter(|r| deleting.contains(r.name.as_str()))
        .flat_map(|r| {
            r.pods
                .iter()
                .filter(|p| is_reschedulable(p))
                .map(|p| pod_key(p))
        })
        .collect();
    input
        .existing_nodes
        .iter()
        .chain(&input.in_flight)
        .filter(|n| deleting.contains(n.name.as_str()))
        .flat_map(|n| &n.pods)
        .filter(|p| reschedulable.contains(&p.key()))
        .cloned()
        .collect()
}

/// What each NodePool's budgets allow, from the records (Karpenter's
/// `BuildDisruptionBudgetMapping`): managed, initialized nodes whose
/// instance is not terminating count; those not ready or disrupting use
/// the budget up. A budget that cannot be evaluated allows none.
fn budgets(cluster: &ClusterSnapshot, records: &[NodeRecord], at: Timestamp) -> Budgets {
    let mut counts: BTreeMap<&str, NodeCount> = BTreeMap::new();
    for record in records {
        let (Some(_), Some(pool)) = (&record.claim, &record.pool_name) else {
            continue;
        };
        counts.entry(pool).or_default().add(NodeState {
            managed: true,
            initialized: record.initialized && record.node.is_some(),
            instance_terminating: record.instance_terminating,
            ready: record.ready,
            marked_for_deletion: record.is_disrupting(),
        });
    }
    let mut out = Budgets::default();
    for pool in &cluster.node_pools {
        let name = kube::ResourceExt::name_any(&**pool);
        let count = counts.get(name.as_str()).copied().unwrap_or_default();
        out.disrupting.insert(name.clone(), count.disrupting);
        for reason in DisruptionReason::ALL {
            let allowed = match allowed_disruptions(pool, reason, at, count.nodes) {
                Ok(allowed) => allowed,
                Err(error) => {
                    out.errors.insert(name.clone(), error.to_string());
                    0
                }
            };
            out.allowed.insert((name.clone(), reason), allowed);
            out.remaining
                .insert((name.clone(), reason), remaining(allowed, count.disrupting));
        }
    }
    out
}

/// Every NodePool's `Balanced` totals over its registered nodes.
fn pool_totals(records: &[NodeRecord]) -> BTreeMap<String, PoolTotals> {
    let mut out: BTreeMap<String, PoolTotals> = BTreeMap::new();
    for record in records.iter().filter(|r| r.node.is_some()) {
        let Some(pool) = &record.pool_name else {
            continue;
        };
        let totals = out.entry(pool.clone()).or_default();
        totals.cost += record.price;
        totals.disruption_cost += record.reschedule_cost;
    }
    out
}

/// The nodes and NodeClaims displaced pods may not be planned onto, and
/// why (Karpenter's `UninitializedNodeError`, and from v1.14 consolidation
/// destinations under their `consolidateAfter` window).
fn unsafe_destinations(
    records: &[NodeRecord],
    at: Timestamp,
) -> HashMap<String, UnsafeDestination> {
    let mut out = HashMap::new();
    for record in records {
        let why = if record.node.is_none() {
            Some(UnsafeDestination::Launching)
        } else if !record.is_safe_destination() {
            Some(UnsafeDestination::NotInitialized)
        } else if under_consolidate_after(record, at) {
            Some(UnsafeDestination::UnderConsolidateAfter)
        } else {
            None
        };
        if let Some(why) = why {
            out.insert(record.name.clone(), why);
        }
    }
    out
}

/// Whether `record`'s NodeClaim is within `consolidateAfter` of its last
/// pod event (Karpenter's `IsUnderConsolidateAfter`); `Never` is not.
fn under_consolidate_after(record: &NodeRecord, at: Timestamp) -> bool {
    let (Some(pool), Some(claim)) = (&record.pool, &record.claim) else {
        return false;
    };
    matches!(
        consolidatable(pool, claim, at),
        Ok(Consolidatable::Waiting { .. })
    )
}

/// Candidates per budget reason, for the eligible-nodes gauge.
fn eligible(found: &[Candidate]) -> BTreeMap<DisruptionReason, usize> {
    let count = |keep: &dyn Fn(&Candidate) -> bool| found.iter().filter(|c| keep(c)).count();
    BTreeMap::from([
        (
            DisruptionReason::Empty,
            count(&|c| c.marks.consolidatable && c.pods.is_empty()),
        ),
        (
            DisruptionReason::Drifted,
            count(&|c| c.marks.drifted.is_some()),
        ),
        (
            DisruptionReason::Underutilized,
            count(&|c| c.marks.consolidatable && !c.pods.is_empty()),
        ),
    ])
}

impl Pass {
    /// Every node the pass's command does not take, once, with the first
    /// reason that kept it.
    pub fn kept_nodes(&self) -> Vec<Kept> {
        let taken: BTreeSet<String> = self
            .command
            .iter()
            .flat_map(|c| &c.candidates)
            .map(|c| c.name.clone())
            .collect();
        kept_nodes(self.kept.clone(), &taken, &self.verdicts, &self.candidates)
    }
}

/// Every node not in `taken`, once, with the first reason that kept it:
/// the candidate checks' (`filtered`), or what a method found (`verdicts`
/// on the `candidates` of the last pass).
pub fn kept_nodes(
    filtered: Vec<Kept>,
    taken: &BTreeSet<String>,
    verdicts: &Verdicts,
    candidates: &[Candidate],
) -> Vec<Kept> {
    let mut out: Vec<Kept> = filtered
        .into_iter()
        .filter(|k| !taken.contains(&k.node))
        .collect();
    let listed: BTreeSet<String> = out.iter().map(|k| k.node.clone()).collect();
    for c in candidates {
        if taken.contains(&c.name) || listed.contains(&c.name) {
            continue;
        }
        let (reason, message) = verdicts.get(&c.name).cloned().unwrap_or((
            KeptReason::NotConsolidatable,
            "no method found a command for it".to_string(),
        ));
        out.push(Kept {
            node: c.name.clone(),
            node_claim: Some(kube::ResourceExt::name_any(&*c.node_claim)),
            node_pool: Some(c.pool.clone()),
            reason,
            message,
        });
    }
    out.sort_by(|a, b| a.reason.cmp(&b.reason).then_with(|| a.node.cmp(&b.node)));
    out
}
