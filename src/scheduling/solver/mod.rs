//! The solve: places each pending pod on an existing node, an in-flight
//! NodeClaim, a NodeClaim created earlier in this solve, or a new NodeClaim
//! from the heaviest NodePool that can take it, relaxing preferences the way
//! Karpenter does when nothing fits.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::index::{Ids, Req, Reqs, Res, export_reqs};
use super::input::{ExistingPlacement, PodError, SchedulerInput, SchedulingResult};
use super::pod::{HostPort, Pod};
use super::requirements::Operator;
use topology::groups::Group;

pub use model::{Model, PoolSpend};

/// Entry point for one solve: `Scheduler::new(input).solve()`, the same as
/// [`Model::compile`] then [`Model::solve_pending`].
///
/// A solve is deterministic for a given input and never fails as a whole:
/// every pod ends up in a placement or in [`SchedulingResult::errors`] with a
/// reason a user can act on.
pub struct Scheduler {
    model: Model,
}

impl Scheduler {
    /// Compiles the plain-data input of one solve.
    pub fn new(input: SchedulerInput) -> Self {
        Scheduler {
            model: Model::compile(input),
        }
    }

    /// Places the input's pending pods.
    pub fn solve(&self) -> SchedulingResult {
        self.model.solve_pending()
    }

    /// See [`Model::price_limits`].
    pub fn price_limits(&self) -> Vec<PoolSpend> {
        self.model.price_limits()
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

mod existing_nodes;
mod finish;
mod model;
mod names;
mod new_claims;
mod offerings;
mod overlay;
mod pods;
mod preferences;
mod queue;
mod room;
mod topology;

use existing_nodes::NodeSlot;
use names::Names;
use new_claims::Claim;
use pods::PodP;
use room::Room;
use topology::record;

/// What is left of a NodePool's limits during a solve.
#[derive(Clone)]
struct PoolLeft {
    /// `limits.nodes` less the pool's nodes and NodeClaims, if limited.
    nodes: Option<i64>,
    /// The other limits less what its nodes and claims hold.
    res: Res,
    /// The price limit less what its nodes and claims cost, if limited.
    price: Option<f64>,
}

/// One solve over a [`Model`]: the nodes it may use, the claims it opens,
/// reservation holds, what is left of each pool's limits, the pods and
/// their topology groups, and what it decided. Cloning it copies the solve
/// so far; the model is shared.
#[derive(Clone)]
struct State<'m> {
    m: &'m Model,
    keys: Names<'m>,
    values: Names<'m>,
    /// Label keys the pods select on that new nodes may not be selected by.
    restricted: HashSet<u32>,
    pool_left: Vec<PoolLeft>,
    /// Claims holding each capacity reservation of the model.
    held: Vec<u32>,
    nodes: Vec<NodeSlot<'m>>,
    claims: Vec<Claim>,
    /// Each claim's room, to skip claims that cannot take a pod.
    room: Room,
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

impl<'m> State<'m> {
    /// [`State::prepare`], with the slots at `closed` taking none of the
    /// last `moving` pods.
    fn prepare_closed(
        m: &'m Model,
        nodes: &[&'m model::NodeBase],
        pods: &[&Pod],
        closed: &[usize],
        moving: usize,
    ) -> Self {
        let mut state = State::prepare(m, nodes, pods);
        for &slot in closed {
            if let Some(node) = state.nodes.get_mut(slot) {
                node.closed_to_moving = true;
            }
        }
        let first = state.pods.len().saturating_sub(moving);
        for pod in state.pods.iter_mut().skip(first) {
            pod.moving = true;
        }
        state
    }

    /// A solve of `pods` on `nodes` (in the model's order).
    fn prepare(m: &'m Model, nodes: &[&'m model::NodeBase], pods: &[&Pod]) -> Self {
        let mut pool_left: Vec<PoolLeft> = m
            .pools
            .iter()
            .map(|p| PoolLeft {
                nodes: p.nodes_limit,
                res: p.limits.clone(),
                price: p.price_limit,
            })
            .collect();
        let mut slots = Vec::with_capacity(nodes.len());
        for node in nodes {
            if let Some(left) = node.pool.and_then(|p| pool_left.get_mut(p)) {
                if let Some(n) = left.nodes.as_mut() {
                    *n -= 1;
                }
                if let Some(price) = left.price.as_mut() {
                    *price -= node.price;
                }
                for (r, c) in left.res.iter_mut().zip(&node.capacity) {
                    if *r != i64::MAX {
                        *r -= c;
                    }
                }
            }
            slots.push(NodeSlot::new(node));
        }
        let mut state = State {
            m,
            keys: Names::new(&m.keys),
            values: Names::new(&m.values),
            restricted: HashSet::new(),
            pool_left,
            held: vec![0; m.reservation_capacity.len()],
            nodes: slots,
            claims: Vec::new(),
            room: Room::new(m.res.dims()),
            pods: Vec::new(),
            groups: Vec::new(),
            universe: HashMap::new(),
            anti_free: HashMap::new(),
            placements: Vec::new(),
            errors: Vec::new(),
        };
        state.prepare_pods(pods);
        state.prepare_topology(pods);
        state
    }

    /// Whether reservation `r` has room for one more claim.
    fn reservation_room(&self, r: usize) -> bool {
        let capacity = self.m.reservation_capacity.get(r).copied().unwrap_or(0);
        self.held.get(r).is_some_and(|h| *h < capacity)
    }

    fn number(&self) -> impl Fn(&u32) -> Option<i64> + '_ {
        |v| self.values.number(*v)
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
                for (f, r) in slot.free.to_mut().iter_mut().zip(&p.requests) {
                    *f -= r;
                }
                if !p.host_ports.is_empty() {
                    slot.host_ports
                        .to_mut()
                        .extend(p.host_ports.iter().cloned());
                }
                record(
                    &mut self.groups,
                    &p.counted_by,
                    &p.inverse_owned,
                    &slot.base.reqs,
                    &slot.base.taints,
                    &mut slot.host_counts,
                    &self.values,
                    None,
                    1,
                );
                self.placements.push(ExistingPlacement {
                    pod: p.reference.clone(),
                    node: slot.base.source.name.clone(),
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
                let need = &self.pods[pi].requests;
                let mut from = 0;
                while let Some(ci) = self.room.next_fitting(from, need) {
                    if let Ok(commit) = self.eval_claim(false, pi, cur, &self.claims[ci], false) {
                        found = Some((ci, commit));
                        break;
                    }
                    from = ci + 1;
                }
            }
        }
        if let Some((ci, commit)) = found {
            self.apply(pi, ci, commit);
            return Ok(());
        }
        if self.m.pools.is_empty() {
            return Err("no NodePool is available to create a node".to_string());
        }
        let mut reasons = Vec::new();
        for pool in 0..self.m.pools.len() {
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
                    reasons.push(format!(
                        "nodepool {:?}: {reason}",
                        self.m.pools[pool].name()
                    ));
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
                        if let Some(held) = self.held.get_mut(*r) {
                            *held += 1;
                        }
                    }
                    self.apply(pi, ci, commit);
                    let pool_idx = &self.m.pools[pool];
                    let left = &mut self.pool_left[pool];
                    if let Some(n) = left.nodes.as_mut() {
                        *n -= 1;
                    }
                    if pool_idx.limited {
                        let claim = &self.claims[ci];
                        for (d, r) in left.res.iter_mut().enumerate() {
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
                Err(reason) => reasons.push(format!(
                    "nodepool {:?}: {reason}",
                    self.m.pools[pool].name()
                )),
            }
        }
        Err(reasons.join("; "))
    }
}
