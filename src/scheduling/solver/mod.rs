//! The solve: places each pending pod on an existing node, an in-flight
//! NodeClaim, a NodeClaim created earlier in this solve, or a new NodeClaim
//! from the heaviest NodePool that can take it, relaxing preferences the way
//! Karpenter does when nothing fits.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::index::{DIM_PODS, Interner, Req, Reqs, Res, ResourceNames, export_reqs};
use super::input::{ExistingPlacement, PodError, SchedulerInput, SchedulingResult};
use super::instance_type::CapacityType;
use super::labels;
use super::pod::{HostPort, Pod};
use super::requirements::Operator;
use topology::groups::Group;

/// Entry point: `Scheduler::new(input).solve()`.
///
/// A solve is deterministic for a given input and never fails as a whole:
/// every pod ends up in a placement or in [`SchedulingResult::errors`] with a
/// reason a user can act on.
pub struct Scheduler {
    input: SchedulerInput,
}

impl Scheduler {
    /// Takes the plain-data input of one solve.
    pub fn new(input: SchedulerInput) -> Self {
        Scheduler { input }
    }

    /// Runs the solve.
    pub fn solve(&self) -> SchedulingResult {
        Solver::prepare(&self.input).run()
    }
}

/// What a pod asks for at its current relaxation step.
struct Current {
    /// Index of the required node affinity term in use.
    required_term: usize,
    /// Node selector, the required term in use and the preferred term in use.
    reqs: Reqs,
    /// The same without the preference: the domains topology counts over
    /// (Karpenter's `StrictRequirements`).
    strict: Reqs,
    groups: Vec<u32>,
    tolerate_prefer: bool,
}

struct Commit {
    changes: Vec<Req>,
    options: Vec<u32>,
    max_alloc: Res,
    held: Vec<usize>,
}

/// The one field `matchFields` may name (Kubernetes validation).
const NODE_NAME_FIELD: &str = "metadata.name";

/// Formats a rejection reason only when it will be shown: most rejections
/// are of candidates the pod simply skips, and formatting them dominated the
/// hot loop.
macro_rules! why {
    ($explain:expr, $($arg:tt)*) => {
        if $explain { format!($($arg)*) } else { String::new() }
    };
}

fn positive(op: Operator) -> bool {
    !matches!(op, Operator::NotIn | Operator::DoesNotExist)
}

mod daemonsets;
mod existing_nodes;
mod finish;
mod new_claims;
mod node_pools;
mod offerings;
mod overlay;
mod pods;
mod preferences;
mod queue;
mod topology;

use daemonsets::DaemonSetIdx;
use existing_nodes::NodeSlot;
use new_claims::Claim;
use node_pools::PoolIdx;
use offerings::Reservation;
use pods::PodP;
use topology::record;

struct Solver<'a> {
    input: &'a SchedulerInput,
    keys: Interner,
    values: Interner,
    res: ResourceNames,
    k_zone: u32,
    k_ct: u32,
    k_host: u32,
    k_reservation: u32,
    v_reserved: u32,
    well_known: HashSet<u32>,
    restricted: HashSet<u32>,
    daemonsets: Vec<DaemonSetIdx>,
    pools: Vec<PoolIdx>,
    reservations: Vec<Reservation>,
    nodes: Vec<NodeSlot>,
    claims: Vec<Claim>,
    pods: Vec<PodP>,
    groups: Vec<Group>,
    universe: HashMap<u32, Vec<u32>>,
    /// For each hostname anti-affinity group: the claims (by creation
    /// order) holding no pod it selects, so pods repelling each other skip
    /// full claims quickly.
    anti_free: HashMap<u32, BTreeSet<u32>>,
    placements: Vec<ExistingPlacement>,
    errors: Vec<PodError>,
}
impl<'a> Solver<'a> {
    fn prepare(input: &'a SchedulerInput) -> Self {
        let mut keys = Interner::default();
        let mut values = Interner::default();
        let k_zone = keys.id(labels::ZONE);
        let k_ct = keys.id(labels::CAPACITY_TYPE);
        let k_host = keys.id(labels::HOSTNAME);
        let k_reservation = keys.id(labels::CAPACITY_RESERVATION_ID);
        let v_reserved = values.id(CapacityType::Reserved.label_value());
        let well_known = labels::WELL_KNOWN_LABELS
            .iter()
            .map(|k| keys.id(k))
            .collect();

        let mut res = ResourceNames::default();
        for pool in &input.node_pools {
            for it in pool.instance_types.iter() {
                res.register(&it.capacity);
            }
        }
        for pod in input.pods.iter().chain(&input.daemonsets) {
            res.register(&pod.requests);
        }
        for node in input.existing_nodes.iter().chain(&input.in_flight) {
            res.register(&node.allocatable);
            for pod in &node.pods {
                res.register(&pod.requests);
            }
        }
        let mut solver = Solver {
            input,
            keys,
            values,
            res,
            k_zone,
            k_ct,
            k_host,
            k_reservation,
            v_reserved,
            well_known,
            restricted: HashSet::new(),
            daemonsets: Vec::new(),
            pools: Vec::new(),
            reservations: Vec::new(),
            nodes: Vec::new(),
            claims: Vec::new(),
            pods: Vec::new(),
            groups: Vec::new(),
            universe: HashMap::new(),
            anti_free: HashMap::new(),
            placements: Vec::new(),
            errors: Vec::new(),
        };
        solver.prepare_daemonsets();
        solver.prepare_pools();
        solver.prepare_nodes();
        solver.prepare_pods();
        solver.prepare_topology();
        solver
    }

    fn pod_vector(&self, pod: &Pod) -> Res {
        let mut v = self.res.vector(&pod.requests);
        v[DIM_PODS] += 1;
        v
    }

    fn describe(&self, reqs: &Reqs) -> String {
        export_reqs(reqs, &self.keys, &self.values).to_string()
    }

    fn describe_req(&self, r: &Req) -> String {
        super::index::export_req(r, &self.keys, &self.values).to_string()
    }

    fn check_ports(&self, explain: bool, pi: usize, used: &[HostPort]) -> Result<(), String> {
        for port in &self.pods[pi].host_ports {
            if used.iter().any(|u| u.conflicts(port)) {
                return Err(why!(
                    explain,
                    "host port {}/{} is already in use",
                    port.port,
                    port.protocol
                ));
            }
        }
        Ok(())
    }

    fn place(&mut self, pi: usize, cur: &Current) -> Result<(), String> {
        for ni in 0..self.nodes.len() {
            if self.eval_node(false, pi, cur, &self.nodes[ni]).is_ok() {
                let slot = &mut self.nodes[ni];
                let p = &self.pods[pi];
                for (f, r) in slot.free.iter_mut().zip(&p.requests) {
                    *f -= r;
                }
                slot.host_ports.extend(p.host_ports.iter().cloned());
                record(
                    &mut self.groups,
                    &p.counted_by,
                    &p.inverse_owned,
                    &slot.reqs,
                    &slot.taints,
                    &mut slot.host_counts,
                    &self.values,
                    None,
                );
                let pod = &self.input.pods[p.input];
                self.placements.push(ExistingPlacement {
                    pod: pod.reference(),
                    node: slot.name.clone(),
                });
                return Ok(());
            }
        }
        let p = &self.pods[pi];
        if p.required_fields.iter().any(|f| !f.is_empty()) {
            // Karpenter rejects such pods before scheduling
            // ("node selector term with matchFields is not supported").
            let fields = p
                .required_fields
                .get(cur.required_term)
                .filter(|f| !f.is_empty())
                .map_or_else(|| "none".to_string(), |f| f.to_string());
            return Err(format!(
                "no existing node can take the pod under its required node affinity (matchFields {fields}); \
                 no new node is created for a pod whose required node affinity uses matchFields, as a new node has no name yet"
            ));
        }
        let mut found = None;
        let free_list = cur
            .groups
            .iter()
            .filter_map(|g| self.anti_free.get(g))
            .min_by_key(|l| l.len());
        match free_list {
            Some(list) => {
                for &ci in list {
                    if let Ok(commit) =
                        self.eval_claim(false, pi, cur, &self.claims[ci as usize], false)
                    {
                        found = Some((ci as usize, commit));
                        break;
                    }
                }
            }
            None => {
                // Creation order. Karpenter re-sorts its new NodeClaims by
                // ascending pod count before each pod; doing so here sends
                // spread and affinity pods through every near-empty claim
                // first and made the 20,000-pod benchmark solve 4.7x slower
                // (371 ms -> 1.74 s), so this solve keeps first-fit order.
                for ci in 0..self.claims.len() {
                    if let Ok(commit) = self.eval_claim(false, pi, cur, &self.claims[ci], false) {
                        found = Some((ci, commit));
                        break;
                    }
                }
            }
        }
        if let Some((ci, commit)) = found {
            self.apply(pi, ci, commit);
            return Ok(());
        }
        if self.pools.is_empty() {
            return Err("no NodePool is available to create a node".to_string());
        }
        let mut reasons = Vec::new();
        for pool in 0..self.pools.len() {
            let claim = match self.new_claim(pool, true) {
                Ok(c) => c,
                Err(reason) => {
                    // A pool at its limits: if the pod could not use the pool
                    // anyway, that is the reason to act on.
                    let reason = match self.new_claim(pool, false) {
                        Ok(unlimited) => self
                            .eval_claim(true, pi, cur, &unlimited, true)
                            .err()
                            .unwrap_or(reason),
                        Err(_) => reason,
                    };
                    reasons.push(format!("nodepool {:?}: {reason}", self.pools[pool].name));
                    continue;
                }
            };
            match self.eval_claim(true, pi, cur, &claim, true) {
                Ok(commit) => {
                    self.claims.push(claim);
                    let ci = self.claims.len() - 1;
                    for list in self.anti_free.values_mut() {
                        list.insert(ci as u32);
                    }
                    for r in &commit.held {
                        if let Some(res) = self.reservations.get_mut(*r) {
                            res.held += 1;
                        }
                    }
                    self.apply(pi, ci, commit);
                    let pool_idx = &mut self.pools[pool];
                    if let Some(n) = pool_idx.nodes_remaining.as_mut() {
                        *n -= 1;
                    }
                    if pool_idx.limited {
                        let claim = &self.claims[ci];
                        for (d, r) in pool_idx.remaining.iter_mut().enumerate() {
                            if *r == i64::MAX {
                                continue;
                            }
                            let max = claim
                                .options
                                .iter()
                                .map(|t| pool_idx.types[*t as usize].capacity[d])
                                .max()
                                .unwrap_or(0);
                            *r -= max;
                        }
                    }
                    return Ok(());
                }
                Err(reason) => {
                    reasons.push(format!("nodepool {:?}: {reason}", self.pools[pool].name))
                }
            }
        }
        Err(reasons.join("; "))
    }
}
