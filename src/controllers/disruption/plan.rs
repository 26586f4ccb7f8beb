//! The disruption commands a cluster would get now: marks recomputed at a
//! given time, then expiration and the methods pass after pass, each
//! pass's command applied to the cluster (candidates out, replacements in
//! as NodeClaims still launching, pods moved) and counted against the
//! budgets of later passes, until a pass finds nothing. What
//! `simulate --disruption` prints; the controller starts the first command.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::balanced::{ScoredMove, pool_totals};
use super::budgets::{NodeCount, NodeState, allowed_disruptions, remaining};
use super::candidates::{Candidate, Kept, KeptReason, Marks, candidates, offering_price};
use super::marking::{
    Consolidatable, consolidatable, expires_at, node_pool_drift, requirements_drift,
};
use super::methods::{
    Allowed, Command, Destination, DisruptionReasonKey, Method, PassContext, Verdict, drift,
    emptiness, every_candidate, expiration, multi_node, reason_key, single_node,
};
use crate::apis::conditions::{
    NODE_CLAIM_CONSOLIDATABLE, NODE_CLAIM_DRIFTED, NODE_CLAIM_INITIALIZED, NODE_CLAIM_LAUNCHED,
    find_condition, is_condition_true,
};
use crate::apis::labels::NODE_POOL_LABEL_KEY;
use crate::apis::nodepool::DisruptionReason;
use crate::apis::{EC2NodeClass, NodeClaim, NodePool};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cloudprovider::{DriftReason, node_class_hash_drifted, restamped_class_annotations};
use crate::cluster::pods::is_reschedulable;
use crate::cluster::{
    ClusterSnapshot, ConvertedPods, InputError, cluster_input, pod_key, pool_specs,
};
use crate::controllers::nodepool::{node_pool_hash, restamped_annotations};
use crate::controllers::provisioning::node_claim_object;
use crate::scheduling::{
    InstanceType, MinValuesPolicy, Model, Pod, PodKey, SchedulerInput, SchedulerOptions,
};

/// Settings of a disruption plan.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// The time marks, budgets and expiry are judged at.
    pub at: Timestamp,
    /// `SpotToSpotConsolidation`.
    pub spot_to_spot: bool,
    /// The scheduler's options, as provisioning's.
    pub scheduler: SchedulerOptions,
    /// Where the marks come from.
    pub marks: MarkSource,
    /// Stop after this many passes (`None`: until a pass finds nothing).
    pub max_passes: Option<usize>,
    /// Every method runs in every pass over every candidate, even after an
    /// earlier one found the pass's command (which is still the first
    /// found): the most a pass can cost, for the disruption benchmark.
    pub exhaustive: bool,
}

/// Where a plan's marks come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkSource {
    /// Recomputed from the objects at the plan's time, NodeClaims re-stamped
    /// first, expiration included (`simulate --disruption`).
    Recompute,
    /// Read from the NodeClaims' `Consolidatable` and `Drifted` conditions,
    /// which the marking controller keeps; expiration is the expiration
    /// controller's (the disruption controller).
    Conditions,
}

/// A NodeClaim's marks at the plan's time.
#[derive(Clone, Debug, PartialEq)]
pub struct Marked {
    /// The NodeClaim.
    pub node_claim: String,
    /// `Consolidatable`.
    pub consolidatable: bool,
    /// `Drifted`, with the reason.
    pub drifted: Option<String>,
    /// `expireAfter` has passed.
    pub expired: bool,
}

/// A command and the pass it came from (1-based).
#[derive(Clone, Debug)]
pub struct Decision {
    /// The pass.
    pub pass: usize,
    /// The command.
    pub command: Command,
    /// The replacements' names, as the plan calls them.
    pub replacement_names: Vec<String>,
}

/// Everything a plan found.
#[derive(Clone, Debug, Default)]
pub struct DisruptionPlan {
    /// Commands in the order the controller would start them.
    pub decisions: Vec<Decision>,
    /// Every NodeClaim's marks.
    pub marked: Vec<Marked>,
    /// Every node in no decision, with the first reason that kept it.
    pub kept: Vec<Kept>,
    /// What the managed nodes cost per hour before.
    pub price_before: f64,
    /// And after every decision.
    pub price_after: f64,
    /// Time spent compiling models and in what-ifs.
    pub solve_millis: f64,
    /// Each NodePool's instance types (for reporting replacements).
    pub instance_types: BTreeMap<String, Arc<Vec<InstanceType>>>,
    /// Candidates of the first pass per budget reason (`Empty`: consolidatable
    /// and without pods; `Underutilized`: consolidatable; `Drifted`).
    pub eligible: BTreeMap<DisruptionReasonKey, usize>,
    /// What each NodePool's budgets allowed in the first pass.
    pub allowed: Allowed,
    /// Each method evaluated, and how long it took.
    pub evaluations: Vec<(Method, Duration)>,
    /// The consolidation moves scored, in the order they were.
    pub moves: Vec<ScoredMove>,
}

/// Plans the disruptions of `snapshot` at `options.at`. Objects that
/// cannot be used are returned as problems, as a provisioning round's.
pub fn plan(
    snapshot: &ClusterSnapshot,
    provider: &InstanceTypeProvider,
    options: &PlanOptions,
) -> Result<DisruptionPlan, InputError> {
    let at = options.at;
    let (mut cluster, marks) = match options.marks {
        MarkSource::Recompute => {
            let cluster = restamped(snapshot);
            let marks = compute_marks(&cluster, at);
            (cluster, marks)
        }
        MarkSource::Conditions => (snapshot.clone(), marks_of_conditions(snapshot)),
    };
    let mut out = DisruptionPlan {
        marked: marks.values().cloned().collect(),
        ..DisruptionPlan::default()
    };
    let mut solve_millis = 0.0;
    let mut pass = 0;
    let mut names = 0usize;
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut verdicts: BTreeMap<String, Verdict> = BTreeMap::new();
    let mut first_kept: Option<Vec<Kept>> = None;
    let last_found: Vec<Candidate>;
    let mut price_before = None;
    loop {
        if options.max_passes.is_some_and(|max| pass >= max) {
            last_found = Vec::new();
            break;
        }
        let started = Instant::now();
        let specs = pool_specs(&cluster, provider);
        let input = cluster_input(&cluster, &ConvertedPods::default(), &HashSet::new());
        let prepared = specs.prepare(input, options.scheduler.clone());
        // Offline, an unusable object stops the plan with its error; in the
        // controller the provisioner reports them, and the rest is planned.
        if options.marks == MarkSource::Recompute
            && let Some(problem) = prepared.problems.into_iter().next()
        {
            return Err(problem);
        }
        let types: BTreeMap<String, Arc<Vec<InstanceType>>> = prepared
            .input
            .node_pools
            .iter()
            .map(|p| (p.name.clone(), p.instance_types.clone()))
            .collect();
        let deleting = deleting_pods(&cluster, &prepared.input);
        let scores: BTreeMap<String, Arc<HashMap<String, i32>>> = prepared
            .input
            .node_pools
            .iter()
            .filter_map(|p| Some((p.name.clone(), p.priority_scores.clone()?)))
            .collect();
        let model = Model::compile(prepared.input);
        solve_millis += started.elapsed().as_secs_f64() * 1000.0;
        let mark_of = |claim: &NodeClaim, _: &NodePool| -> Marks {
            let m = marks.get(&claim.name_any());
            Marks {
                consolidatable: m.is_some_and(|m| m.consolidatable),
                drifted: m.and_then(|m| m.drifted.clone()),
            }
        };
        let (found, kept) = candidates(&cluster, &types, mark_of, at);
        // What kept a node is what the last pass (the one that found
        // nothing more) saw.
        verdicts.clear();
        if price_before.is_none() {
            price_before = Some(managed_price(&found, &kept, &types, &cluster));
            out.instance_types = types.clone();
        }
        let (allowed, budget_errors) = allowed_per_pool(&cluster, at);
        if first_kept.is_none() {
            out.eligible = eligible(&found);
            out.allowed = allowed.clone();
        }
        first_kept.get_or_insert(kept);
        let totals = pool_totals(&cluster, &types);
        let moves = RefCell::new(Vec::new());
        let ctx = PassContext {
            model: &model,
            deleting: &deleting,
            allowed: &allowed,
            budget_errors: &budget_errors,
            spot_to_spot: options.spot_to_spot,
            types: &types,
            min_values_strict: options.scheduler.min_values_policy == MinValuesPolicy::Strict,
            scores: &scores,
            totals: &totals,
            moves: &moves,
        };
        let started = Instant::now();
        let expired: Vec<&Candidate> = found
            .iter()
            .filter(|c| {
                marks
                    .get(&c.node_claim.name_any())
                    .is_some_and(|m| m.expired)
            })
            .collect();
        let mut timed = |method: Method, run: &mut dyn FnMut() -> Option<Command>| {
            let started = Instant::now();
            let found = run();
            out.evaluations.push((method, started.elapsed()));
            found
        };
        let command = if let Some(c) = expired.first() {
            Some(expiration(&ctx, c))
        } else if options.exhaustive {
            let pool: Vec<&Candidate> = found.iter().collect();
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
            let every = [empty, drifted, multi, single];
            every.into_iter().flatten().next()
        } else {
            let pool: Vec<&Candidate> = found.iter().collect();
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
        out.moves.extend(moves.take());
        let Some(command) = command else {
            last_found = found;
            break;
        };
        pass += 1;
        let replacement_names: Vec<String> = command
            .replacements
            .iter()
            .map(|r| {
                names += 1;
                format!("{}-replacement-{names}", r.node_pool)
            })
            .collect();
        for c in &command.candidates {
            taken.insert(c.name.clone());
            verdicts.remove(&c.name);
        }
        apply(&mut cluster, &command, &replacement_names);
        out.decisions.push(Decision {
            pass,
            command,
            replacement_names,
        });
    }
    out.kept = kept_nodes(
        first_kept.unwrap_or_default(),
        &taken,
        verdicts,
        &last_found,
    );
    out.price_before = price_before.unwrap_or(0.0);
    let removed: f64 = out.decisions.iter().map(|d| d.command.price_before()).sum();
    let added: f64 = out.decisions.iter().map(|d| d.command.price_after()).sum();
    out.price_after = out.price_before - removed + added;
    out.solve_millis = solve_millis;
    Ok(out)
}

/// The snapshot with NodeClaims of another NodePool or EC2NodeClass hash
/// version re-stamped as the NodePool and EC2NodeClass hash controllers
/// would (a `Drifted` claim keeps its old hash), and each NodePool carrying
/// its current template hash.
fn restamped(snapshot: &ClusterSnapshot) -> ClusterSnapshot {
    let mut cluster = snapshot.clone();
    let mut hashes = BTreeMap::new();
    cluster.node_pools = cluster
        .node_pools
        .iter()
        .map(|pool| {
            let hash = node_pool_hash(pool);
            let mut pool = NodePool::clone(pool);
            let annotations = pool.metadata.annotations.get_or_insert_default();
            for (key, value) in pool_hash_annotations(&hash) {
                annotations.insert(key.to_string(), value);
            }
            hashes.insert(pool.name_any(), hash);
            Arc::new(pool)
        })
        .collect();
    let classes: BTreeMap<String, Arc<EC2NodeClass>> = cluster
        .node_classes
        .iter()
        .map(|c| (c.name_any(), c.clone()))
        .collect();
    cluster.node_claims = cluster
        .node_claims
        .iter()
        .map(|claim| {
            let Some(hash) = claim
                .labels()
                .get(NODE_POOL_LABEL_KEY)
                .and_then(|p| hashes.get(p))
            else {
                return claim.clone();
            };
            let mut stamp = restamped_annotations(claim, hash);
            if let Some(class) = classes.get(claim.spec.node_class_ref.name.as_str()) {
                stamp.extend(restamped_class_annotations(claim, class));
            }
            if stamp.is_empty() {
                return claim.clone();
            }
            let mut claim = NodeClaim::clone(claim);
            let annotations = claim.metadata.annotations.get_or_insert_default();
            for (key, value) in stamp {
                annotations.insert(key.to_string(), value);
            }
            Arc::new(claim)
        })
        .collect();
    cluster
}

fn pool_hash_annotations(hash: &str) -> [(&'static str, String); 2] {
    [
        (
            crate::apis::labels::NODE_POOL_HASH_ANNOTATION_KEY,
            hash.to_string(),
        ),
        (
            crate::apis::labels::NODE_POOL_HASH_VERSION_ANNOTATION_KEY,
            crate::controllers::nodepool::NODE_POOL_HASH_VERSION.to_string(),
        ),
    ]
}

/// The pods of nodes already being deleted that will need room elsewhere
/// (Karpenter reschedules them in every what-if): the reschedulable pods
/// bound to Nodes or NodeClaims the input marks for deletion.
fn deleting_pods(cluster: &ClusterSnapshot, input: &SchedulerInput) -> Vec<Pod> {
    let deleting: BTreeSet<&str> = input
        .existing_nodes
        .iter()
        .chain(&input.in_flight)
        .filter(|n| n.marked_for_deletion)
        .map(|n| n.name.as_str())
        .collect();
    if deleting.is_empty() {
        return Vec::new();
    }
    let reschedulable: HashSet<PodKey> = cluster
        .pods
        .iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| deleting.contains(n))
                && is_reschedulable(p)
        })
        .map(|p| pod_key(p))
        .collect();
    input
        .existing_nodes
        .iter()
        .chain(&input.in_flight)
        .filter(|n| n.marked_for_deletion)
        .flat_map(|n| &n.pods)
        .filter(|p| reschedulable.contains(&p.key()))
        .cloned()
        .collect()
}

/// The first pass's candidates per budget reason, for the eligible-nodes
/// gauge.
fn eligible(found: &[Candidate]) -> BTreeMap<DisruptionReasonKey, usize> {
    let count = |keep: &dyn Fn(&Candidate) -> bool| found.iter().filter(|c| keep(c)).count();
    BTreeMap::from([
        (
            reason_key(DisruptionReason::Empty),
            count(&|c| c.marks.consolidatable && c.pods.is_empty()),
        ),
        (
            reason_key(DisruptionReason::Drifted),
            count(&|c| c.marks.drifted.is_some()),
        ),
        (
            reason_key(DisruptionReason::Underutilized),
            count(&|c| c.marks.consolidatable),
        ),
    ])
}

/// Each NodeClaim's marks as its conditions hold them.
fn marks_of_conditions(cluster: &ClusterSnapshot) -> BTreeMap<String, Marked> {
    cluster
        .node_claims
        .iter()
        .map(|claim| {
            let conditions = claim
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or_default();
            let marked = Marked {
                node_claim: claim.name_any(),
                consolidatable: is_condition_true(conditions, NODE_CLAIM_CONSOLIDATABLE),
                drifted: find_condition(conditions, NODE_CLAIM_DRIFTED)
                    .filter(|c| c.is_true())
                    .map(|c| c.reason.clone().unwrap_or_else(|| "Drifted".to_string())),
                expired: false,
            };
            (claim.name_any(), marked)
        })
        .collect()
}

/// Each NodeClaim's marks at `at`, computed from what the snapshot holds.
fn compute_marks(cluster: &ClusterSnapshot, at: Timestamp) -> BTreeMap<String, Marked> {
    let pools: BTreeMap<String, &Arc<NodePool>> = cluster
        .node_pools
        .iter()
        .map(|p| (p.name_any(), p))
        .collect();
    let classes: BTreeMap<String, &Arc<EC2NodeClass>> = cluster
        .node_classes
        .iter()
        .map(|c| (c.name_any(), c))
        .collect();
    let mut out = BTreeMap::new();
    for claim in &cluster.node_claims {
        let pool = claim
            .labels()
            .get(NODE_POOL_LABEL_KEY)
            .and_then(|p| pools.get(p));
        let consolidatable = pool.is_some_and(|pool| {
            pool.spec.replicas.is_none()
                && consolidatable(pool, claim, at) == Ok(Consolidatable::Yes)
        });
        let drifted = pool.and_then(|pool| {
            let class = classes.get(&pool.spec.template.spec.node_class_ref.name);
            drift_offline(pool, class.map(|c| c.as_ref()), claim)
        });
        let expired = expires_at(claim).ok().flatten().is_some_and(|e| e <= at);
        out.insert(
            claim.name_any(),
            Marked {
                node_claim: claim.name_any(),
                consolidatable,
                drifted,
                expired,
            },
        );
    }
    out
}

/// The drift a NodeClaim shows offline: the NodePool hash, requirements,
/// the EC2NodeClass hash, an image no longer in the class's status; a
/// `Drifted=True` condition whose cause cannot be seen offline (subnet,
/// security groups, reservation) is kept. A claim not launched never drifts.
fn drift_offline(
    pool: &NodePool,
    class: Option<&EC2NodeClass>,
    claim: &NodeClaim,
) -> Option<String> {
    let conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    if !is_condition_true(conditions, NODE_CLAIM_LAUNCHED) {
        return None;
    }
    let reason = node_pool_drift(pool, claim)
        .or_else(|| requirements_drift(pool, claim).ok().flatten())
        .or_else(|| {
            let class = class?;
            if node_class_hash_drifted(claim, class) {
                return Some(DriftReason::NodeClassDrift);
            }
            let image = claim.status.as_ref()?.image_id.as_deref()?;
            let amis = class.status.as_ref()?.amis.as_ref()?;
            (!amis.is_empty() && !amis.iter().any(|a| a.id == image))
                .then_some(DriftReason::AmiDrift)
        });
    match reason {
        Some(reason) => Some(reason.as_str().to_string()),
        None => find_condition(conditions, NODE_CLAIM_DRIFTED)
            .filter(|c| c.is_true())
            .map(|c| c.reason.clone().unwrap_or_else(|| "Drifted".to_string())),
    }
}

/// How many more nodes each NodePool may disrupt per reason, from its
/// budgets and the nodes already disrupting (being deleted or not ready).
/// A budget that cannot be evaluated allows none.
fn allowed_per_pool(
    cluster: &ClusterSnapshot,
    at: Timestamp,
) -> (Allowed, BTreeMap<String, String>) {
    let mut counts: BTreeMap<String, NodeCount> = BTreeMap::new();
    for (node, claim) in cluster.nodes_with_claims() {
        let Some(claim) = claim else {
            continue;
        };
        let Some(pool) = claim.labels().get(NODE_POOL_LABEL_KEY) else {
            continue;
        };
        let conditions = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        counts.entry(pool.clone()).or_default().add(NodeState {
            managed: true,
            initialized: is_condition_true(conditions, NODE_CLAIM_INITIALIZED),
            instance_terminating: false,
            ready,
            marked_for_deletion: node.metadata.deletion_timestamp.is_some()
                || claim.metadata.deletion_timestamp.is_some(),
        });
    }
    let mut out = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for pool in &cluster.node_pools {
        let name = pool.name_any();
        let count = counts.get(&name).copied().unwrap_or_default();
        for reason in [
            DisruptionReason::Empty,
            DisruptionReason::Drifted,
            DisruptionReason::Underutilized,
        ] {
            let allowed = match allowed_disruptions(pool, reason, at, count.nodes) {
                Ok(allowed) => allowed,
                Err(error) => {
                    errors.insert(name.clone(), error.to_string());
                    0
                }
            };
            out.insert(
                (name.clone(), reason_key(reason)),
                remaining(allowed, count.disrupting),
            );
        }
    }
    (out, errors)
}

/// Applies `command` to the simulated cluster: the candidates' Nodes and
/// NodeClaims are deleted (kept, with a deletion time, so they count as
/// disrupting for the budgets), their pods moved — to another node, or
/// nominated to a replacement added as a NodeClaim still launching.
fn apply(cluster: &mut ClusterSnapshot, command: &Command, replacement_names: &[String]) {
    let out: BTreeSet<&str> = command.candidates.iter().map(|c| c.name.as_str()).collect();
    let deleted = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::now(),
    ));
    let claims: BTreeSet<String> = command
        .candidates
        .iter()
        .map(|c| c.node_claim.name_any())
        .collect();
    for node in cluster.nodes.iter_mut() {
        if out.contains(node.name_any().as_str()) {
            let mut n = k8s_openapi::api::core::v1::Node::clone(node);
            n.metadata.deletion_timestamp = deleted.clone();
            n.spec.get_or_insert_default().unschedulable = Some(true);
            *node = Arc::new(n);
        }
    }
    for claim in cluster.node_claims.iter_mut() {
        if claims.contains(&claim.name_any()) {
            let mut c = NodeClaim::clone(claim);
            c.metadata.deletion_timestamp = deleted.clone();
            *claim = Arc::new(c);
        }
    }
    let moves: BTreeMap<&PodKey, &Destination> =
        command.moves.iter().map(|(p, d)| (p, d)).collect();
    let mut pods = Vec::with_capacity(cluster.pods.len());
    for pod in std::mem::take(&mut cluster.pods) {
        let on = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if !on.is_some_and(|n| out.contains(n)) {
            pods.push(pod);
            continue;
        }
        let key = pod_key(&pod);
        match moves.get(&key) {
            Some(Destination::Node(to)) => pods.push(rebound(&pod, Some(to))),
            Some(Destination::Replacement(i)) => {
                if let Some(name) = replacement_names.get(*i) {
                    cluster.nominated.insert(key, name.clone());
                }
                pods.push(rebound(&pod, None));
            }
            Some(Destination::Pending) => pods.push(rebound(&pod, None)),
            // DaemonSet and static pods go with their node.
            None => {}
        }
    }
    cluster.pods = pods;
    for (replacement, name) in command.replacements.iter().zip(replacement_names) {
        if let Some(pool) = cluster
            .node_pools
            .iter()
            .find(|p| p.name_any() == replacement.node_pool)
        {
            let claim = node_claim_object(pool, replacement, name.clone());
            cluster.node_claims.push(Arc::new(claim));
        }
    }
    cluster.state_nodes = None;
}

fn rebound(pod: &K8sPod, node: Option<&str>) -> Arc<K8sPod> {
    let mut pod = pod.clone();
    pod.spec.get_or_insert_default().node_name = node.map(str::to_string);
    Arc::new(pod)
}

/// The price of every managed node with a Node.
fn managed_price(
    found: &[Candidate],
    kept: &[Kept],
    types: &BTreeMap<String, Arc<Vec<InstanceType>>>,
    cluster: &ClusterSnapshot,
) -> f64 {
    let mut total: f64 = found.iter().map(|c| c.price).sum();
    let kept_nodes: BTreeSet<&str> = kept
        .iter()
        .filter(|k| k.reason != KeptReason::NotManaged && k.node_claim.as_deref() != Some(&k.node))
        .map(|k| k.node.as_str())
        .collect();
    for node in &cluster.nodes {
        if !kept_nodes.contains(node.name_any().as_str()) {
            continue;
        }
        let label = |k: &str| node.labels().get(k).map_or("", String::as_str);
        total += offering_price(
            types,
            label(NODE_POOL_LABEL_KEY),
            label(crate::apis::labels::INSTANCE_TYPE_LABEL_KEY),
            label(crate::apis::labels::ZONE_LABEL_KEY),
            label(crate::apis::labels::CAPACITY_TYPE_LABEL_KEY),
        );
    }
    total
}

/// Every node in no decision, once, with the first reason that kept it:
/// the candidate filters' reason, or what a method found.
fn kept_nodes(
    filtered: Vec<Kept>,
    taken: &BTreeSet<String>,
    verdicts: BTreeMap<String, Verdict>,
    last: &[Candidate],
) -> Vec<Kept> {
    let mut out: Vec<Kept> = filtered
        .into_iter()
        .filter(|k| !taken.contains(&k.node))
        .collect();
    let listed: BTreeSet<String> = out.iter().map(|k| k.node.clone()).collect();
    for c in last {
        if taken.contains(&c.name) || listed.contains(&c.name) {
            continue;
        }
        let (reason, message) = verdicts.get(&c.name).cloned().unwrap_or((
            KeptReason::NotConsolidatable,
            "no method found a command for it".to_string(),
        ));
        out.push(Kept {
            node: c.name.clone(),
            node_claim: Some(c.node_claim.name_any()),
            node_pool: c.node_pool.metadata.name.clone(),
            reason,
            message,
        });
    }
    out.sort_by(|a, b| a.reason.cmp(&b.reason).then_with(|| a.node.cmp(&b.node)));
    out
}
