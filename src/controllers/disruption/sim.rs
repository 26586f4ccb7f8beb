//! The disruption commands a cluster would get now, pass after pass
//! (what `simulate --disruption` prints): marks recomputed at a given time
//! (or read from the NodeClaims' conditions), then [passes](super::pass)
//! one after another, each pass's command applied to the records of the
//! next — its nodes marked for deletion, replacements added as NodeClaims
//! still launching, pods moved — and counted against the budgets of later
//! passes, until a pass finds nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::balanced::ScoredMove;
use super::methods::Verdicts;
use super::pass::{Budgets, PassOptions, kept_nodes, pass};
use super::record::{NodeRecord, PoolTypes, marks_from_conditions};
use super::types::{Command, Destination, Kept, Marked, Marks, Method};
use crate::apis::conditions::{
    NODE_CLAIM_DRIFTED, NODE_CLAIM_LAUNCHED, find_condition, is_condition_true,
};
use crate::apis::labels::NODE_POOL_LABEL_KEY;
use crate::apis::nodepool::DisruptionReason;
use crate::apis::{EC2NodeClass, NodeClaim, NodePool};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cloudprovider::{DriftReason, node_class_hash_drifted, restamped_class_annotations};
use crate::cluster::pool_specs;
use crate::cluster::{ClusterSnapshot, InputError, pod_key};
use crate::controllers::nodeclaim::marks::{
    Consolidatable, INSTANCE_TYPE_CHECK_AGE, consolidatable, expires_at, instance_type_drift,
    node_pool_drift, requirements_drift,
};
use crate::controllers::nodepool::{node_pool_hash, restamped_annotations};
use crate::controllers::provisioning::node_claim_object;
use crate::scheduling::{InstanceType, PodKey, SchedulerOptions};

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
    /// controller's.
    Conditions,
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
#[derive(Debug, Default)]
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
    pub instance_types: PoolTypes,
    /// Candidates of the first pass per budget reason.
    pub eligible: BTreeMap<DisruptionReason, usize>,
    /// What each NodePool's budgets allowed in the first pass.
    pub budgets: Budgets,
    /// Each method evaluated, and how long it took.
    pub evaluations: Vec<(Method, Duration)>,
    /// The consolidation moves scored, in the order they were.
    pub moves: Vec<ScoredMove>,
    /// Objects that could not be used (of the first pass): their NodePools'
    /// nodes are kept, the others planned.
    pub problems: Vec<InputError>,
}

/// Plans the disruptions of `snapshot` at `options.at`.
pub fn plan(
    snapshot: &ClusterSnapshot,
    provider: &InstanceTypeProvider,
    options: &PlanOptions,
) -> DisruptionPlan {
    let at = options.at;
    let (mut cluster, marks) = match options.marks {
        MarkSource::Recompute => {
            let cluster = restamped(snapshot);
            let types = pool_specs(&cluster, provider)
                .node_pools
                .into_iter()
                .map(|p| (p.name, p.instance_types))
                .collect();
            let marks = compute_marks(&cluster, &types, at);
            (cluster, marks)
        }
        MarkSource::Conditions => (snapshot.clone(), marks_of_conditions(snapshot)),
    };
    let mut out = DisruptionPlan {
        marked: marks
            .iter()
            .map(|(name, marks)| Marked {
                node_claim: name.clone(),
                marks: marks.clone(),
            })
            .collect(),
        ..DisruptionPlan::default()
    };
    let mark_of = |claim: &NodeClaim| marks.get(&claim.name_any()).cloned().unwrap_or_default();
    let pass_options = PassOptions {
        at,
        spot_to_spot: options.spot_to_spot,
        scheduler: options.scheduler.clone(),
        exhaustive: options.exhaustive,
    };
    let mut marked: BTreeSet<String> = BTreeSet::new();
    let mut names = 0usize;
    let mut first: Option<(Vec<Kept>, f64)> = None;
    let (last_candidates, last_verdicts) = loop {
        if options
            .max_passes
            .is_some_and(|max| out.decisions.len() >= max)
        {
            break (Vec::new(), Verdicts::new());
        }
        let found = pass(&cluster, provider, &pass_options, &mark_of, &marked);
        out.solve_millis += found.solve_millis;
        out.evaluations.extend(found.evaluations);
        out.moves.extend(found.moves);
        if first.is_none() {
            first = Some((found.kept, managed_price(&found.records)));
            out.instance_types = found.types;
            out.eligible = found.eligible;
            out.budgets = found.budgets;
            out.problems = found.problems;
        }
        let Some(command) = found.command else {
            break (found.candidates, found.verdicts);
        };
        let replacement_names: Vec<String> = command
            .replacements
            .iter()
            .map(|r| {
                names += 1;
                format!("{}-replacement-{names}", r.node_pool)
            })
            .collect();
        apply(&mut cluster, &mut marked, &command, &replacement_names);
        out.decisions.push(Decision {
            pass: out.decisions.len() + 1,
            command,
            replacement_names,
        });
    };
    let (first_kept, price_before) = first.unwrap_or_default();
    out.kept = kept_nodes(first_kept, &marked, &last_verdicts, &last_candidates);
    out.price_before = price_before;
    let removed: f64 = out.decisions.iter().map(|d| d.command.price_before()).sum();
    let added: f64 = out.decisions.iter().map(|d| d.command.price_after()).sum();
    out.price_after = out.price_before - removed + added;
    out
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

/// Each NodeClaim's marks as its conditions hold them.
fn marks_of_conditions(cluster: &ClusterSnapshot) -> BTreeMap<String, Marks> {
    cluster
        .node_claims
        .iter()
        .map(|claim| (claim.name_any(), marks_from_conditions(claim)))
        .collect()
}

/// Each NodeClaim's marks at `at`, computed from what the snapshot holds,
/// as the NodeClaim disruption and expiration controllers would (`types`:
/// each NodePool's instance types); a claim of another provisioner's node
/// class gets none.
fn compute_marks(
    cluster: &ClusterSnapshot,
    types: &PoolTypes,
    at: Timestamp,
) -> BTreeMap<String, Marks> {
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
        if !claim.spec.node_class_ref.is_ec2_node_class() {
            out.insert(claim.name_any(), Marks::default());
            continue;
        }
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
            let types = types.get(&pool.name_any()).map(|t| t.as_slice());
            drift_offline(pool, class.map(|c| c.as_ref()), types, claim, at)
        });
        let expired = expires_at(claim).ok().flatten().is_some_and(|e| e <= at);
        out.insert(
            claim.name_any(),
            Marks {
                consolidatable,
                drifted,
                expired,
            },
        );
    }
    out
}

/// The drift a NodeClaim shows offline, in the controller's order: the
/// NodePool hash, requirements, the instance type (for claims older than
/// an hour), the EC2NodeClass hash, an image no longer in the class's
/// status. A `Drifted=True` condition whose cause cannot be seen offline
/// (subnet, security groups, reservation) is kept; any other is what the
/// objects say now. A claim not launched never drifts.
fn drift_offline(
    pool: &NodePool,
    class: Option<&EC2NodeClass>,
    types: Option<&[InstanceType]>,
    claim: &NodeClaim,
    at: Timestamp,
) -> Option<String> {
    let conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    if !is_condition_true(conditions, NODE_CLAIM_LAUNCHED) {
        return None;
    }
    let old_enough = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .is_some_and(|t| at.duration_since(t.0) > INSTANCE_TYPE_CHECK_AGE);
    let reason = node_pool_drift(pool, claim)
        .or_else(|| requirements_drift(pool, claim).ok().flatten())
        .or_else(|| {
            let types = types.filter(|_| old_enough)?;
            instance_type_drift(types, claim)
        })
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
    let unseen = [
        DriftReason::SubnetDrift,
        DriftReason::SecurityGroupDrift,
        DriftReason::CapacityReservationDrift,
        DriftReason::PlacementGroupDrift,
    ];
    match reason {
        Some(reason) => Some(reason.as_str().to_string()),
        None => find_condition(conditions, NODE_CLAIM_DRIFTED)
            .filter(|c| c.is_true())
            .and_then(|c| c.reason.clone())
            .filter(|r| unseen.iter().any(|u| u.as_str() == r)),
    }
}

/// Applies `command` to the simulated cluster: its nodes are marked (they
/// count as disrupting for the budgets and take no pods), their pods moved
/// — to another node, nominated to a replacement added as a NodeClaim
/// still launching, or left pending.
fn apply(
    cluster: &mut ClusterSnapshot,
    marked: &mut BTreeSet<String>,
    command: &Command,
    replacement_names: &[String],
) {
    let out: BTreeSet<&str> = command.candidates.iter().map(|c| c.name.as_str()).collect();
    marked.extend(out.iter().map(|n| n.to_string()));
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

/// What the managed, registered nodes cost per hour.
fn managed_price(records: &[NodeRecord]) -> f64 {
    records
        .iter()
        .filter(|r| r.node.is_some() && r.claim.is_some())
        .map(|r| r.price)
        .sum()
}
