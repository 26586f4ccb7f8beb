//! The solve: places each pending pod on an existing node, an in-flight
//! NodeClaim, a NodeClaim created earlier in this solve, or a new NodeClaim
//! from the heaviest NodePool that can take it, relaxing preferences the way
//! Karpenter does when nothing fits.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use super::index::{
    DIM_PODS, Interner, Req, Reqs, Res, ResourceNames, Set, add_into, export_reqs, fits_sum,
    intern_reqs, shortfall,
};
use super::input::{
    ExistingNode, ExistingPlacement, InstanceTypeOption, MinValuesPolicy, NewNodeClaim, PodError,
    SchedulerInput, SchedulingResult,
};
use super::instance_type::CapacityType;
use super::labels;
use super::pod::{
    HostPort, LabelSelector, NodeInclusionPolicy, Pod, SelectorExpression, WhenUnsatisfiable,
};
use super::requirements::{Operator, Requirement, Requirements, ValueSet};
use super::taints::{Taint, first_untolerated, is_known_ephemeral};
use super::topology::{
    Group, GroupKey, GroupKind, NodeFilter, NsMatch, bump_host_count, host_count,
};

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

struct Offer {
    zone: u32,
    capacity_type: CapacityType,
    capacity_type_value: u32,
    price: f64,
    available: bool,
    reservation: Option<usize>,
    reservation_value: Option<u32>,
}

struct TypeIdx {
    name: String,
    reqs: Reqs,
    alloc: Res,
    capacity: Res,
    offers: Vec<Offer>,
}

struct PoolIdx {
    name: String,
    /// Why the pool may not launch (see `NodePoolSpec::blocked`).
    blocked: Option<String>,
    reqs: Reqs,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    types: Vec<TypeIdx>,
    base_options: Vec<u32>,
    daemon: Res,
    remaining: Res,
    limited: bool,
    scores: Option<Vec<i32>>,
    /// Per-dimension maximum allocatable over `base_options`.
    base_max_alloc: Res,
    /// Whether any instance type has a reserved offering.
    has_reserved: bool,
}

struct Reservation {
    capacity: u32,
    held: u32,
}

struct NodeSlot {
    name: String,
    reqs: Reqs,
    taints: Vec<Taint>,
    free: Res,
    host_ports: Vec<HostPort>,
    host_counts: Vec<(u32, i32)>,
}

struct Claim {
    pool: usize,
    reqs: Reqs,
    options: Vec<u32>,
    requests: Res,
    max_alloc: Res,
    pods: Vec<u32>,
    host_ports: Vec<HostPort>,
    host_counts: Vec<(u32, i32)>,
    held: Vec<usize>,
}

struct PodP {
    input: usize,
    namespace: String,
    labels: BTreeMap<String, String>,
    requests: Res,
    base: Reqs,
    required_terms: Vec<Reqs>,
    /// `matchFields` per required term (see [`Pod::required_node_fields`]).
    required_fields: Vec<Requirements>,
    preferred_terms: Vec<Reqs>,
    req_aff: Vec<u32>,
    pref_aff: Vec<u32>,
    req_anti: Vec<u32>,
    pref_anti: Vec<u32>,
    spread_hard: Vec<u32>,
    spread_soft: Vec<u32>,
    inverse_owned: Vec<u32>,
    counted_by: Vec<u32>,
    blocked_by: Vec<u32>,
    /// Per pool: (tolerates all taints incl. PreferNoSchedule, tolerates NoSchedule/NoExecute ones).
    pool_taints: Vec<(bool, bool)>,
    host_ports: Vec<HostPort>,
}

#[derive(Default)]
struct PodState {
    required_term: usize,
    preferred_node: usize,
    preferred_affinity: usize,
    preferred_anti: usize,
    soft_spread: usize,
    tolerate_prefer: bool,
}

struct Current {
    /// Index of the required node affinity term in use.
    required_term: usize,
    reqs: Reqs,
    groups: Vec<u32>,
    tolerate_prefer: bool,
}

struct Commit {
    changes: Vec<Req>,
    options: Vec<u32>,
    max_alloc: Res,
    held: Vec<usize>,
}

/// Requirements of a node or claim with the changes one placement would make.
struct Overlay<'a> {
    base: &'a Reqs,
    changes: Vec<Req>,
}

impl<'a> Overlay<'a> {
    fn new(base: &'a Reqs) -> Self {
        Overlay {
            base,
            changes: Vec::new(),
        }
    }

    fn get(&self, key: u32) -> Option<&Req> {
        self.changes
            .iter()
            .find(|r| r.key == key)
            .or_else(|| self.base.get(key))
    }

    /// Intersects `set` into `key`; false when the two share no value.
    fn narrow(&mut self, key: u32, set: &Set, min_values: Option<u32>, values: &Interner) -> bool {
        let number = |v: &u32| values.number(*v);
        let next = match self.get(key) {
            Some(current) => {
                if !current.set.intersects(set, &number) {
                    return false;
                }
                let merged = Req {
                    key,
                    set: current.set.intersection(set, &number),
                    min_values: current.min_values.max(min_values),
                };
                if merged == *current {
                    return true;
                }
                merged
            }
            None => Req {
                key,
                set: set.clone(),
                min_values,
            },
        };
        match self.changes.iter_mut().find(|r| r.key == key) {
            Some(slot) => *slot = next,
            None => self.changes.push(next),
        }
        true
    }

    fn all(&self) -> impl Iterator<Item = &Req> {
        let changed: Vec<u32> = self.changes.iter().map(|r| r.key).collect();
        self.base
            .items
            .iter()
            .filter(move |r| !changed.contains(&r.key))
            .chain(self.changes.iter())
    }
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

fn merged_selector(
    selector: &Option<LabelSelector>,
    keys: &[String],
    pod: &Pod,
) -> Option<LabelSelector> {
    let mut selector = selector.clone()?;
    for key in keys {
        if let Some(value) = pod.labels.get(key) {
            selector.expressions.push(SelectorExpression {
                key: key.clone(),
                operator: Operator::In,
                values: vec![value.clone()],
            });
        }
    }
    Some(selector)
}

/// The offering-relevant requirements of a node or claim.
struct OfferView<'r> {
    zone: Option<&'r Set>,
    capacity_type: Option<&'r Set>,
    reservation: Option<&'r Set>,
}

impl<'r> OfferView<'r> {
    fn new(solver: &Solver, reqs: &'r Overlay) -> Self {
        OfferView {
            zone: reqs.get(solver.k_zone).map(|r| &r.set),
            capacity_type: reqs.get(solver.k_ct).map(|r| &r.set),
            reservation: reqs.get(solver.k_reservation).map(|r| &r.set),
        }
    }
}

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
            for it in &pool.instance_types {
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

    fn prepare_pools(&mut self) {
        let input = self.input;
        let mut order: Vec<usize> = (0..input.node_pools.len()).collect();
        order.sort_by(|a, b| {
            let (pa, pb) = (&input.node_pools[*a], &input.node_pools[*b]);
            pb.weight
                .cmp(&pa.weight)
                .then_with(|| pa.name.cmp(&pb.name))
        });
        let mut reservation_ids: HashMap<String, usize> = HashMap::new();
        for i in order {
            let spec = &input.node_pools[i];
            let mut public = spec.requirements.clone();
            public.add_all(&Requirements::from_labels(spec.labels.iter()));
            public.add(Requirement::single(labels::NODE_POOL, &spec.name));
            let reqs = intern_reqs(&public, &mut self.keys, &mut self.values);
            let mut types = Vec::new();
            for it in &spec.instance_types {
                let mut offers = Vec::new();
                for o in &it.offerings {
                    let reservation = o.reservation_id.as_ref().map(|id| {
                        let next = self.reservations.len();
                        let idx = *reservation_ids.entry(id.clone()).or_insert(next);
                        if idx == next {
                            self.reservations.push(Reservation {
                                capacity: o.reservation_capacity.unwrap_or(0),
                                held: 0,
                            });
                        }
                        idx
                    });
                    offers.push(Offer {
                        zone: self.values.id(&o.zone),
                        capacity_type: o.capacity_type,
                        capacity_type_value: self.values.id(o.capacity_type.label_value()),
                        price: o.price,
                        available: o.available,
                        reservation,
                        reservation_value: o.reservation_id.as_ref().map(|id| self.values.id(id)),
                    });
                }
                types.push(TypeIdx {
                    name: it.name.clone(),
                    reqs: intern_reqs(&it.requirements, &mut self.keys, &mut self.values),
                    alloc: self.res.vector(&it.allocatable()),
                    capacity: self.res.vector(&it.capacity),
                    offers,
                });
            }
            let dims = self.res.dims();
            let mut remaining = vec![i64::MAX; dims];
            let mut limited = false;
            for (name, amount) in &spec.limits {
                let mut probe = super::resources::Resources::zero();
                probe.set(name, 1);
                if let Some(d) = self.res.vector(&probe).iter().position(|v| *v == 1) {
                    remaining[d] = *amount;
                    limited = true;
                }
            }
            let daemon = self.daemon_overhead(spec, &public);
            let scores = spec.priority_scores.as_ref().map(|scores| {
                types
                    .iter()
                    .map(|t| scores.get(&t.name).copied().unwrap_or(0))
                    .collect()
            });
            let has_reserved = types
                .iter()
                .any(|t| t.offers.iter().any(|o| o.reservation.is_some()));
            let mut pool = PoolIdx {
                name: spec.name.clone(),
                blocked: spec.blocked.clone(),
                reqs,
                labels: spec.labels.clone(),
                taints: spec.taints.clone(),
                types,
                base_options: Vec::new(),
                daemon,
                remaining,
                limited,
                scores,
                base_max_alloc: Vec::new(),
                has_reserved,
            };
            pool.base_options = self.base_options(&pool);
            pool.base_max_alloc = self.max_alloc(&pool, &pool.base_options);
            self.pools.push(pool);
        }
    }

    /// Requests of the daemonsets that would run on every node of the pool.
    fn daemon_overhead(&self, spec: &super::input::NodePoolSpec, pool_reqs: &Requirements) -> Res {
        let mut total = vec![0; self.res.dims()];
        for ds in &self.input.daemonsets {
            if first_untolerated(&spec.taints, &ds.tolerations, false).is_some() {
                continue;
            }
            let mut ds_reqs = Requirements::from_labels(ds.node_selector.iter());
            if let Some(term) = ds.required_node_affinity.first() {
                ds_reqs.add_all(term);
            }
            if pool_reqs
                .compatible(&ds_reqs, labels::is_well_known)
                .is_err()
            {
                continue;
            }
            add_into(&mut total, &self.pod_vector(ds));
        }
        total
    }

    /// Instance types compatible with the pool's own requirements and with an
    /// available offering, cheapest first.
    fn base_options(&self, pool: &PoolIdx) -> Vec<u32> {
        let overlay = Overlay::new(&pool.reqs);
        let mut options: Vec<(f64, u32)> = Vec::new();
        for (i, ty) in pool.types.iter().enumerate() {
            if !self.type_compatible(ty, pool.reqs.items.iter()) {
                continue;
            }
            if let Some(price) = self.cheapest_offer(ty, &overlay, None).map(|o| o.price) {
                options.push((price, i as u32));
            }
        }
        options.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        options.into_iter().map(|(_, i)| i).collect()
    }

    fn type_compatible<'r>(&self, ty: &TypeIdx, reqs: impl Iterator<Item = &'r Req>) -> bool {
        let number = |v: &u32| self.values.number(*v);
        for r in reqs {
            if let Some(theirs) = ty.reqs.get(r.key)
                && !theirs.set.intersects(&r.set, &number)
            {
                return false;
            }
        }
        true
    }

    /// The cheapest available offering compatible with the requirements.
    /// Reserved offerings count when held by the claim (`held`), or, when
    /// `held` is `None`, while their reservation has room.
    fn cheapest_offer<'t>(
        &self,
        ty: &'t TypeIdx,
        reqs: &Overlay,
        held: Option<&[usize]>,
    ) -> Option<&'t Offer> {
        let view = OfferView::new(self, reqs);
        ty.offers
            .iter()
            .filter(|o| self.offer_usable(&view, o, held))
            .min_by(|a, b| a.price.total_cmp(&b.price))
    }

    /// Whether any offering of `ty` is usable under `reqs` (see [`Self::cheapest_offer`]).
    fn has_offer(&self, ty: &TypeIdx, reqs: &Overlay, held: Option<&[usize]>) -> bool {
        let view = OfferView::new(self, reqs);
        ty.offers.iter().any(|o| self.offer_usable(&view, o, held))
    }

    fn offer_usable(&self, view: &OfferView, o: &Offer, held: Option<&[usize]>) -> bool {
        let number = |v: &u32| self.values.number(*v);
        if !o.available {
            return false;
        }
        if view.zone.is_some_and(|z| !z.has(&o.zone, &number)) {
            return false;
        }
        if view
            .capacity_type
            .is_some_and(|c| !c.has(&o.capacity_type_value, &number))
        {
            return false;
        }
        match (o.reservation, o.reservation_value) {
            (Some(ri), Some(rv)) => {
                let usable = match held {
                    Some(h) => h.contains(&ri),
                    None => self
                        .reservations
                        .get(ri)
                        .is_some_and(|r| r.held < r.capacity),
                };
                usable && view.reservation.is_none_or(|r| r.has(&rv, &number))
            }
            _ => view.reservation.is_none_or(|r| !positive(r.operator())),
        }
    }

    fn prepare_nodes(&mut self) {
        let input = self.input;
        for (node, in_flight) in ordered_nodes(input) {
            let initialized = node.initialized && !in_flight;
            let pool = node
                .labels
                .get(labels::NODE_POOL)
                .and_then(|name| self.pools.iter().position(|p| &p.name == name));
            let mut labels = node.labels.clone();
            labels
                .entry(labels::HOSTNAME.to_string())
                .or_insert_with(|| node.name.clone());
            let reqs = intern_reqs(
                &Requirements::from_labels(labels.iter()),
                &mut self.keys,
                &mut self.values,
            );
            let startup: Vec<Taint> = pool
                .and_then(|p| {
                    input
                        .node_pools
                        .iter()
                        .find(|s| s.name == self.pools[p].name)
                })
                .map(|s| s.startup_taints.clone())
                .unwrap_or_default();
            let taints: Vec<Taint> = node
                .taints
                .iter()
                .filter(|t| initialized || !(is_known_ephemeral(t) || startup.contains(t)))
                .cloned()
                .collect();
            let mut used = vec![0; self.res.dims()];
            let mut daemon_used = vec![0; self.res.dims()];
            let mut host_ports = Vec::new();
            for pod in &node.pods {
                let v = self.pod_vector(pod);
                add_into(&mut used, &v);
                if pod.owner_kind.as_deref() == Some("DaemonSet") {
                    add_into(&mut daemon_used, &v);
                }
                host_ports.extend(pod.host_ports.iter().cloned());
            }
            if !initialized && let Some(p) = pool {
                for (d, pending) in self.pools[p].daemon.iter().enumerate() {
                    used[d] += (pending - daemon_used[d]).max(0);
                }
            }
            let alloc = self.res.vector(&node.allocatable);
            let free = alloc.iter().zip(&used).map(|(a, u)| a - u).collect();
            if let Some(p) = pool {
                let capacity = self.res.vector(&node.capacity);
                for (r, c) in self.pools[p].remaining.iter_mut().zip(capacity) {
                    if *r != i64::MAX {
                        *r -= c;
                    }
                }
            }
            self.nodes.push(NodeSlot {
                name: node.name.clone(),
                reqs,
                taints,
                free,
                host_ports,
                host_counts: Vec::new(),
            });
        }
    }

    fn prepare_pods(&mut self) {
        let input = self.input;
        for key in collect_pod_keys(input) {
            let id = self.keys.id(&key);
            if labels::is_restricted(&key) {
                self.restricted.insert(id);
            }
        }
        for (i, pod) in input.pods.iter().enumerate() {
            let base = intern_reqs(
                &Requirements::from_labels(pod.node_selector.iter()),
                &mut self.keys,
                &mut self.values,
            );
            let required_terms = pod
                .required_node_affinity
                .iter()
                .map(|t| intern_reqs(t, &mut self.keys, &mut self.values))
                .collect();
            let mut preferred: Vec<_> = pod.preferred_node_affinity.iter().collect();
            preferred.sort_by_key(|w| std::cmp::Reverse(w.weight));
            let preferred_terms = preferred
                .iter()
                .map(|t| intern_reqs(&t.term, &mut self.keys, &mut self.values))
                .collect();
            let pool_taints = self
                .pools
                .iter()
                .map(|p| {
                    (
                        first_untolerated(&p.taints, &pod.tolerations, true).is_none(),
                        first_untolerated(&p.taints, &pod.tolerations, false).is_none(),
                    )
                })
                .collect();
            self.pods.push(PodP {
                input: i,
                namespace: pod.namespace.clone(),
                labels: pod.labels.clone(),
                requests: self.pod_vector(pod),
                base,
                required_terms,
                required_fields: pod.required_node_fields.clone(),
                preferred_terms,
                req_aff: Vec::new(),
                pref_aff: Vec::new(),
                req_anti: Vec::new(),
                pref_anti: Vec::new(),
                spread_hard: Vec::new(),
                spread_soft: Vec::new(),
                inverse_owned: Vec::new(),
                counted_by: Vec::new(),
                blocked_by: Vec::new(),
                pool_taints,
                host_ports: pod.host_ports.clone(),
            });
        }
    }

    fn group_id(&mut self, index: &mut HashMap<GroupKey, u32>, key: GroupKey) -> u32 {
        if let Some(id) = index.get(&key) {
            return *id;
        }
        let id = self.groups.len() as u32;
        let hostname = key.key == self.k_host;
        index.insert(key.clone(), id);
        self.groups.push(Group::new(key, hostname));
        id
    }

    fn prepare_topology(&mut self) {
        let input = self.input;
        let ns_labels = &input.namespace_labels;
        let mut index: HashMap<GroupKey, u32> = HashMap::new();
        for pi in 0..self.pods.len() {
            let pod = &input.pods[self.pods[pi].input];
            let term_key =
                |solver: &mut Self, kind: GroupKind, term: &super::pod::PodAffinityTerm| GroupKey {
                    kind,
                    key: solver.keys.id(labels::normalize(&term.topology_key)),
                    namespaces: NsMatch::resolve(&term.namespaces, &pod.namespace, ns_labels),
                    selector: term.selector.clone(),
                    filter: NodeFilter::default(),
                };
            let mut req_aff = Vec::new();
            for term in &pod.pod_affinity {
                let k = term_key(self, GroupKind::Affinity, term);
                req_aff.push(self.group_id(&mut index, k));
            }
            let mut pref: Vec<_> = pod.preferred_pod_affinity.iter().collect();
            pref.sort_by_key(|w| std::cmp::Reverse(w.weight));
            let mut pref_aff = Vec::new();
            for w in pref {
                let k = term_key(self, GroupKind::Affinity, &w.term);
                pref_aff.push(self.group_id(&mut index, k));
            }
            let mut req_anti = Vec::new();
            let mut inverse_owned = Vec::new();
            for term in &pod.pod_anti_affinity {
                let k = term_key(self, GroupKind::AntiAffinity, term);
                req_anti.push(self.group_id(&mut index, k));
                let k = term_key(self, GroupKind::InverseAntiAffinity, term);
                inverse_owned.push(self.group_id(&mut index, k));
            }
            let mut pref: Vec<_> = pod.preferred_pod_anti_affinity.iter().collect();
            pref.sort_by_key(|w| std::cmp::Reverse(w.weight));
            let mut pref_anti = Vec::new();
            for w in pref {
                let k = term_key(self, GroupKind::AntiAffinity, &w.term);
                pref_anti.push(self.group_id(&mut index, k));
            }
            let (mut hard, mut soft) = (Vec::new(), Vec::new());
            for c in &pod.topology_spread {
                let honor = c.node_affinity_policy == NodeInclusionPolicy::Honor;
                let filter = NodeFilter {
                    reqs: honor.then(|| {
                        let mut r = self.pods[pi].base.clone();
                        if let Some(t) = self.pods[pi].required_terms.first() {
                            r.add_all(t, &self.values);
                        }
                        r
                    }),
                    tolerations: (c.node_taints_policy == NodeInclusionPolicy::Honor)
                        .then(|| pod.tolerations.clone()),
                };
                let filter = if filter.is_empty() {
                    NodeFilter::default()
                } else {
                    filter
                };
                let k = GroupKey {
                    kind: GroupKind::Spread {
                        max_skew: c.max_skew.max(1),
                        min_domains: c.min_domains,
                        honor,
                    },
                    key: self.keys.id(labels::normalize(&c.topology_key)),
                    namespaces: NsMatch::Set(vec![pod.namespace.clone()]),
                    selector: merged_selector(&c.selector, &c.match_label_keys, pod),
                    filter,
                };
                let id = self.group_id(&mut index, k);
                match c.when_unsatisfiable {
                    WhenUnsatisfiable::DoNotSchedule => hard.push(id),
                    WhenUnsatisfiable::ScheduleAnyway => soft.push(id),
                }
            }
            let p = &mut self.pods[pi];
            p.req_aff = req_aff;
            p.pref_aff = pref_aff;
            p.req_anti = req_anti;
            p.pref_anti = pref_anti;
            p.spread_hard = hard;
            p.spread_soft = soft;
            p.inverse_owned = inverse_owned;
        }
        // Required anti-affinity of pods already running.
        let mut existing_inverse: Vec<(usize, Vec<u32>)> = Vec::new();
        let nodes_input: Vec<&ExistingNode> =
            ordered_nodes(input).into_iter().map(|(n, _)| n).collect();
        for (ni, node) in nodes_input.iter().enumerate() {
            for pod in &node.pods {
                let mut owned = Vec::new();
                for term in &pod.pod_anti_affinity {
                    let k = GroupKey {
                        kind: GroupKind::InverseAntiAffinity,
                        key: self.keys.id(labels::normalize(&term.topology_key)),
                        namespaces: NsMatch::resolve(&term.namespaces, &pod.namespace, ns_labels),
                        selector: term.selector.clone(),
                        filter: NodeFilter::default(),
                    };
                    owned.push(self.group_id(&mut index, k));
                }
                existing_inverse.push((ni, owned));
            }
        }
        // Which groups count or block each pending pod.
        for p in &mut self.pods {
            for (gi, g) in self.groups.iter().enumerate() {
                if !g.selects(&p.namespace, &p.labels) {
                    continue;
                }
                if g.id.kind == GroupKind::InverseAntiAffinity {
                    p.blocked_by.push(gi as u32);
                } else {
                    p.counted_by.push(gi as u32);
                }
            }
        }
        // Count pods already running.
        let mut inverse_iter = existing_inverse.into_iter();
        for (ni, node) in nodes_input.iter().enumerate() {
            for pod in &node.pods {
                let counted: Vec<u32> = self
                    .groups
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| {
                        g.id.kind != GroupKind::InverseAntiAffinity
                            && g.selects(&pod.namespace, &pod.labels)
                    })
                    .map(|(i, _)| i as u32)
                    .collect();
                let owned = inverse_iter.next().map(|(_, o)| o).unwrap_or_default();
                let slot = &mut self.nodes[ni];
                record(
                    &mut self.groups,
                    &counted,
                    &owned,
                    &slot.reqs,
                    &slot.taints,
                    &mut slot.host_counts,
                    &self.values,
                );
            }
        }
        for (gi, g) in self.groups.iter().enumerate() {
            if g.hostname && g.id.kind == GroupKind::AntiAffinity {
                self.anti_free.insert(gi as u32, BTreeSet::new());
            }
        }
        // Domains per topology key.
        let keys: HashSet<u32> = self
            .groups
            .iter()
            .filter(|g| !g.hostname)
            .map(|g| g.id.key)
            .collect();
        for key in keys {
            // Each source of domains (a NodePool's possible nodes, an existing
            // node) with the taints its nodes carry, like Karpenter's
            // TopologyDomainGroup.
            let mut sources: Vec<(Vec<u32>, &[Taint])> = Vec::new();
            for pool in &self.pools {
                let mut domains = Vec::new();
                let pool_set = pool.reqs.get(key);
                for &t in &pool.base_options {
                    if let Some(r) = pool.types[t as usize].reqs.get(key)
                        && !r.set.is_complement()
                    {
                        for v in r.set.values() {
                            if pool_set
                                .is_none_or(|p| p.set.has(v, &|x: &u32| self.values.number(*x)))
                            {
                                domains.push(*v);
                            }
                        }
                    }
                }
                if let Some(p) = pool_set
                    && !p.set.is_complement()
                    && pool
                        .base_options
                        .iter()
                        .all(|t| pool.types[*t as usize].reqs.get(key).is_none())
                {
                    domains.extend(p.set.values().iter().copied());
                }
                sources.push((domains, &pool.taints));
            }
            for node in &self.nodes {
                if let Some(r) = node.reqs.get(key) {
                    sources.push((r.set.values().to_vec(), &node.taints));
                }
            }
            let domains: HashSet<u32> = sources.iter().flat_map(|(d, _)| d).copied().collect();
            // nodeTaintsPolicy: Honor: only domains some tolerated node can be in.
            for group in self.groups.iter_mut().filter(|g| {
                g.id.key == key
                    && matches!(g.id.kind, GroupKind::Spread { .. })
                    && g.id.filter.tolerations.is_some()
            }) {
                let eligible = sources
                    .iter()
                    .filter(|(_, taints)| group.id.filter.admits_taints(taints))
                    .flat_map(|(d, _)| d)
                    .copied()
                    .collect();
                group.taint_domains = Some(eligible);
            }
            let mut sorted: Vec<u32> = domains.into_iter().collect();
            sorted.sort_by(|a, b| self.values.name(*a).cmp(self.values.name(*b)));
            self.universe.insert(key, sorted);
        }
    }

    fn initial_state(&self, pi: usize) -> PodState {
        if !self.input.options.ignore_preferences {
            return PodState::default();
        }
        let p = &self.pods[pi];
        PodState {
            required_term: 0,
            preferred_node: p.preferred_terms.len(),
            preferred_affinity: p.pref_aff.len(),
            preferred_anti: p.pref_anti.len(),
            soft_spread: p.spread_soft.len(),
            tolerate_prefer: true,
        }
    }

    /// Karpenter's relaxation order; false when nothing is left to relax.
    fn relax(&self, pi: usize, st: &mut PodState) -> bool {
        let p = &self.pods[pi];
        if st.required_term + 1 < p.required_terms.len() {
            st.required_term += 1;
        } else if st.preferred_affinity < p.pref_aff.len() {
            st.preferred_affinity += 1;
        } else if st.preferred_anti < p.pref_anti.len() {
            st.preferred_anti += 1;
        } else if st.preferred_node < p.preferred_terms.len() {
            st.preferred_node += 1;
        } else if st.soft_spread < p.spread_soft.len() {
            st.soft_spread += 1;
        } else if !st.tolerate_prefer {
            st.tolerate_prefer = true;
        } else {
            return false;
        }
        true
    }

    fn current(&self, pi: usize, st: &PodState) -> Current {
        let p = &self.pods[pi];
        let mut reqs = p.base.clone();
        if let Some(term) = p.required_terms.get(st.required_term) {
            reqs.add_all(term, &self.values);
        }
        if let Some(term) = p.preferred_terms.get(st.preferred_node) {
            reqs.add_all(term, &self.values);
        }
        let mut groups = p.req_aff.clone();
        groups.extend(p.pref_aff.iter().skip(st.preferred_affinity));
        groups.extend(&p.req_anti);
        groups.extend(p.pref_anti.iter().skip(st.preferred_anti));
        groups.extend(&p.spread_hard);
        groups.extend(p.spread_soft.iter().skip(st.soft_spread));
        Current {
            required_term: st.required_term,
            reqs,
            groups,
            tolerate_prefer: st.tolerate_prefer,
        }
    }

    /// Karpenter's queue (`queue.go`, `Solve`): pods in CPU, then memory,
    /// descending order; a pod that cannot be placed even with every
    /// preference relaxed goes back to the end of the queue with its
    /// preferences restored, and the solve stops once a whole pass over the
    /// queue places nothing. A pod that needs another pod of the batch placed
    /// first (pod affinity, a spread that must alternate) thus gets another
    /// chance later in the same solve.
    fn run(mut self) -> SchedulingResult {
        let input = self.input;
        let mut order: Vec<usize> = (0..self.pods.len()).collect();
        order.sort_by(|a, b| {
            let (ra, rb) = (&self.pods[*a].requests, &self.pods[*b].requests);
            rb[0].cmp(&ra[0]).then(rb[1].cmp(&ra[1])).then(a.cmp(b))
        });
        let mut queue: VecDeque<usize> = order.iter().copied().collect();
        // Queue length right after each pod was last pushed back: popping it
        // at that same length means a full pass made no progress.
        let mut pushed_at: Vec<Option<usize>> = vec![None; self.pods.len()];
        let mut failures: Vec<Option<String>> = vec![None; self.pods.len()];
        while let Some(&pi) = queue.front() {
            if pushed_at[pi] == Some(queue.len()) {
                break;
            }
            queue.pop_front();
            match self.try_schedule(pi) {
                Ok(()) => failures[pi] = None,
                Err(reason) => {
                    failures[pi] = Some(reason);
                    queue.push_back(pi);
                    pushed_at[pi] = Some(queue.len());
                }
            }
        }
        for pi in order {
            if let Some(reason) = failures[pi].take() {
                self.errors.push(PodError {
                    pod: input.pods[self.pods[pi].input].reference(),
                    reason,
                });
            }
        }
        self.finish()
    }

    /// Places one pod, relaxing its preferences one step at a time until it
    /// fits or nothing is left to relax (Karpenter's `trySchedule`).
    fn try_schedule(&mut self, pi: usize) -> Result<(), String> {
        let mut st = self.initial_state(pi);
        loop {
            let cur = self.current(pi, &st);
            match self.place(pi, &cur) {
                Ok(()) => return Ok(()),
                Err(reason) => {
                    if !self.relax(pi, &mut st) {
                        return Err(reason);
                    }
                }
            }
        }
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

    /// An empty NodeClaim of the pool; with `respect_limits`, only instance
    /// types that fit in what is left of the pool's limits.
    fn new_claim(&self, pool_i: usize, respect_limits: bool) -> Result<Claim, String> {
        let pool = &self.pools[pool_i];
        if let Some(blocked) = &pool.blocked {
            return Err(format!("launches are blocked: {blocked}"));
        }
        let limited = pool.limited && respect_limits;
        let options: Vec<u32> = if limited {
            pool.base_options
                .iter()
                .copied()
                .filter(|t| {
                    pool.types[*t as usize]
                        .capacity
                        .iter()
                        .zip(&pool.remaining)
                        .all(|(c, r)| c <= r)
                })
                .collect()
        } else {
            pool.base_options.clone()
        };
        if pool.base_options.is_empty() {
            return Err(format!(
                "no instance type is compatible with the NodePool's requirements ({}) and has an available offering",
                self.describe(&pool.reqs)
            ));
        }
        if options.is_empty() {
            let dims: Vec<&str> = (0..pool.remaining.len())
                .filter(|d| pool.remaining[*d] != i64::MAX)
                .map(|d| self.res.name(d))
                .collect();
            return Err(format!(
                "all instance types exceed the NodePool's limits ({})",
                dims.join(", ")
            ));
        }
        let max_alloc = if limited {
            self.max_alloc(pool, &options)
        } else {
            pool.base_max_alloc.clone()
        };
        Ok(Claim {
            pool: pool_i,
            reqs: pool.reqs.clone(),
            options,
            requests: pool.daemon.clone(),
            max_alloc,
            pods: Vec::new(),
            host_ports: Vec::new(),
            host_counts: Vec::new(),
            held: Vec::new(),
        })
    }

    fn max_alloc(&self, pool: &PoolIdx, options: &[u32]) -> Res {
        let mut max = vec![0; self.res.dims()];
        for t in options {
            for (m, a) in max.iter_mut().zip(&pool.types[*t as usize].alloc) {
                *m = (*m).max(*a);
            }
        }
        max
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

    /// Hostname-keyed topology: counts live on the node or claim itself.
    fn check_hostname_groups(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        counts: &[(u32, i32)],
    ) -> Result<(), String> {
        let p = &self.pods[pi];
        for &g in &cur.groups {
            let group = &self.groups[g as usize];
            if !group.hostname {
                continue;
            }
            let count = host_count(counts, g);
            let selecting = i32::from(p.counted_by.contains(&g));
            match group.id.kind {
                GroupKind::Spread { max_skew, .. } => {
                    if count + selecting > max_skew {
                        return Err(why!(
                            explain,
                            "topology spread on {} (maxSkew {max_skew}) would be exceeded",
                            labels::HOSTNAME
                        ));
                    }
                }
                GroupKind::Affinity => {
                    if count == 0 && !(group.total == 0 && selecting == 1) {
                        return Err(why!(
                            explain,
                            "pod affinity on {} has no matching pod on this node",
                            labels::HOSTNAME
                        ));
                    }
                }
                GroupKind::AntiAffinity => {
                    if count > 0 {
                        return Err(why!(
                            explain,
                            "pod anti-affinity on {} rejects this node",
                            labels::HOSTNAME
                        ));
                    }
                }
                GroupKind::InverseAntiAffinity => {}
            }
        }
        for &g in &p.blocked_by {
            if self.groups[g as usize].hostname && host_count(counts, g) > 0 {
                return Err(why!(
                    explain,
                    "the anti-affinity of a pod on this node rejects the pod"
                ));
            }
        }
        Ok(())
    }

    /// Zone and other non-hostname topology: narrows the candidate's domain.
    fn topology_narrow(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        ov: &mut Overlay,
    ) -> Result<(), String> {
        let p = &self.pods[pi];
        let number = |v: &u32| self.values.number(*v);
        let empty = Vec::new();
        for &g in &cur.groups {
            let group = &self.groups[g as usize];
            if group.hostname {
                continue;
            }
            let key = group.id.key;
            let key_name = self.keys.name(key);
            let universe = self.universe.get(&key).unwrap_or(&empty);
            let node_set = ov.get(key).map(|r| r.set.clone());
            let node_has = |d: &u32| node_set.as_ref().is_none_or(|s| s.has(d, &number));
            let pod_set = cur.reqs.get(key).map(|r| &r.set);
            let pod_has = |d: &u32| pod_set.is_none_or(|s| s.has(d, &number));
            let selecting = i32::from(p.counted_by.contains(&g));
            let allowed: Set = match group.id.kind {
                GroupKind::Spread {
                    max_skew,
                    min_domains,
                    honor,
                } => {
                    let eligible = |d: &u32| {
                        (!honor || pod_has(d))
                            && group.taint_domains.as_ref().is_none_or(|t| t.contains(d))
                    };
                    let mut min = i32::MAX;
                    let mut n = 0;
                    for d in universe.iter().filter(|d| eligible(d)) {
                        n += 1;
                        min = min.min(group.count(*d));
                    }
                    if min_domains.is_some_and(|md| n < md) {
                        min = 0;
                    }
                    let mut best: Option<(i32, u32)> = None;
                    for d in universe.iter().filter(|d| eligible(d) && node_has(d)) {
                        let c = group.count(*d) + selecting;
                        if c - min <= max_skew && best.is_none_or(|(bc, _)| c < bc) {
                            best = Some((c, *d));
                        }
                    }
                    match best {
                        Some((_, d)) => ValueSet::of(vec![d]),
                        None => {
                            return Err(why!(
                                explain,
                                "topology spread on {key_name} (maxSkew {max_skew}) cannot be met in any allowed domain"
                            ));
                        }
                    }
                }
                GroupKind::Affinity => {
                    let mut options: Vec<u32> = universe
                        .iter()
                        .copied()
                        .filter(|d| group.count(*d) > 0 && pod_has(d))
                        .collect();
                    if options.is_empty() && selecting == 1 {
                        let first = universe
                            .iter()
                            .find(|d| pod_has(d) && node_has(d))
                            .or_else(|| universe.iter().find(|d| pod_has(d)));
                        options.extend(first.copied());
                    }
                    if options.is_empty() {
                        return Err(why!(
                            explain,
                            "pod affinity on {key_name} has no domain with a matching pod"
                        ));
                    }
                    ValueSet::of(options)
                }
                GroupKind::AntiAffinity => {
                    let options: Vec<u32> = universe
                        .iter()
                        .copied()
                        .filter(|d| group.count(*d) == 0 && pod_has(d))
                        .collect();
                    if options.is_empty() {
                        return Err(why!(
                            explain,
                            "pod anti-affinity on {key_name} leaves no domain without a matching pod"
                        ));
                    }
                    ValueSet::of(options)
                }
                GroupKind::InverseAntiAffinity => continue,
            };
            if !ov.narrow(key, &allowed, None, &self.values) {
                return Err(if !explain {
                    String::new()
                } else {
                    match group.id.kind {
                        GroupKind::AntiAffinity => {
                            format!("pod anti-affinity on {key_name} leaves no domain")
                        }
                        GroupKind::Affinity => {
                            format!(
                                "pod affinity on {key_name} needs a domain this node cannot be in"
                            )
                        }
                        _ => format!(
                            "topology spread on {key_name} needs a domain this node cannot be in"
                        ),
                    }
                });
            }
        }
        for &g in &p.blocked_by {
            let group = &self.groups[g as usize];
            if group.hostname {
                continue;
            }
            let blocked: Vec<u32> = group
                .counts
                .iter()
                .filter(|(_, c)| **c > 0)
                .map(|(d, _)| *d)
                .collect();
            if blocked.is_empty() {
                continue;
            }
            if !ov.narrow(group.id.key, &ValueSet::except(blocked), None, &self.values) {
                return Err(why!(
                    explain,
                    "the anti-affinity of a scheduled pod excludes every {} this node can be in",
                    self.keys.name(group.id.key)
                ));
            }
        }
        Ok(())
    }

    fn eval_node(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        node: &NodeSlot,
    ) -> Result<(), String> {
        let p = &self.pods[pi];
        if let Some(d) = shortfall(&p.requests, &vec![0; p.requests.len()], &node.free) {
            return Err(why!(explain, "not enough {}", self.res.name(d)));
        }
        if let Some(fields) = p.required_fields.get(cur.required_term)
            && !fields
                .iter()
                .all(|f| f.key == NODE_NAME_FIELD && f.has(&node.name))
        {
            return Err(why!(
                explain,
                "node name does not satisfy matchFields {fields}"
            ));
        }
        let tolerations = &self.input.pods[p.input].tolerations;
        if let Some(t) = first_untolerated(&node.taints, tolerations, !cur.tolerate_prefer) {
            return Err(why!(explain, "did not tolerate taint {t}"));
        }
        self.check_ports(explain, pi, &node.host_ports)?;
        self.check_hostname_groups(explain, pi, cur, &node.host_counts)?;
        let number = |v: &u32| self.values.number(*v);
        for r in &cur.reqs.items {
            match node.reqs.get(r.key) {
                Some(label) if label.set.intersects(&r.set, &number) => {}
                None if !positive(r.set.operator()) => {}
                _ => {
                    return Err(why!(
                        explain,
                        "node labels do not satisfy {}",
                        self.describe_req(r)
                    ));
                }
            }
        }
        for &g in &cur.groups {
            let group = &self.groups[g as usize];
            if !group.hostname && node.reqs.get(group.id.key).is_none() {
                return Err(why!(
                    explain,
                    "node has no {} label for the pod's topology constraint",
                    self.keys.name(group.id.key)
                ));
            }
        }
        let mut ov = Overlay::new(&node.reqs);
        self.topology_narrow(explain, pi, cur, &mut ov)
    }

    fn eval_claim(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        claim: &Claim,
        is_new: bool,
    ) -> Result<Commit, String> {
        let p = &self.pods[pi];
        let pool = &self.pools[claim.pool];
        if !fits_sum(&claim.requests, &p.requests, &claim.max_alloc) {
            let d = shortfall(&claim.requests, &p.requests, &claim.max_alloc).unwrap_or(0);
            return Err(why!(
                explain,
                "no instance type has enough {} for requests {} plus daemonset overhead {}",
                self.res.name(d),
                self.res.resources(&p.requests),
                self.res.resources(&pool.daemon)
            ));
        }
        let (all_ok, hard_ok) = p
            .pool_taints
            .get(claim.pool)
            .copied()
            .unwrap_or((false, false));
        if !(if cur.tolerate_prefer { hard_ok } else { all_ok }) {
            let tolerations = &self.input.pods[p.input].tolerations;
            let taint = first_untolerated(&pool.taints, tolerations, !cur.tolerate_prefer);
            return Err(why!(
                explain,
                "did not tolerate taint {}",
                taint.map(|t| t.to_string()).unwrap_or_default()
            ));
        }
        self.check_ports(explain, pi, &claim.host_ports)?;
        self.check_hostname_groups(explain, pi, cur, &claim.host_counts)?;
        let mut ov = Overlay::new(&claim.reqs);
        for r in &cur.reqs.items {
            if positive(r.set.operator()) && self.restricted.contains(&r.key) {
                return Err(why!(
                    explain,
                    "label {:?} is restricted; new nodes cannot be selected by it",
                    self.keys.name(r.key)
                ));
            }
            if ov.get(r.key).is_none()
                && positive(r.set.operator())
                && !self.well_known.contains(&r.key)
            {
                return Err(why!(
                    explain,
                    "label {:?} does not have known values; add it to the NodePool's labels or requirements",
                    self.keys.name(r.key)
                ));
            }
            if !ov.narrow(r.key, &r.set, r.min_values, &self.values) {
                let existing = ov
                    .get(r.key)
                    .map(|e| self.describe_req(e))
                    .unwrap_or_default();
                return Err(why!(
                    explain,
                    "{} is not compatible with {existing}",
                    self.describe_req(r)
                ));
            }
        }
        self.topology_narrow(explain, pi, cur, &mut ov)?;
        let offering_keys = [self.k_zone, self.k_ct, self.k_reservation];
        let offers_changed = ov.changes.iter().any(|r| offering_keys.contains(&r.key));
        let mut total = claim.requests.clone();
        add_into(&mut total, &p.requests);
        let held = if is_new {
            None
        } else {
            Some(claim.held.as_slice())
        };
        let (mut n_reqs, mut n_offers) = (0usize, 0usize);
        let mut options = Vec::with_capacity(claim.options.len());
        let mut max_alloc = vec![0; total.len()];
        for &t in &claim.options {
            let ty = &pool.types[t as usize];
            if !self.type_compatible(ty, ov.changes.iter()) {
                continue;
            }
            n_reqs += 1;
            if offers_changed && !self.has_offer(ty, &ov, held) {
                continue;
            }
            n_offers += 1;
            if total.iter().zip(&ty.alloc).all(|(need, have)| need <= have) {
                options.push(t);
                for (m, a) in max_alloc.iter_mut().zip(&ty.alloc) {
                    *m = (*m).max(*a);
                }
            }
        }
        if options.is_empty() {
            if !explain {
                return Err(String::new());
            }
            let all = Reqs {
                items: ov.all().cloned().collect(),
            };
            return Err(if n_reqs == 0 {
                format!(
                    "no instance type satisfies requirements {}",
                    self.describe(&all)
                )
            } else if n_offers == 0 {
                format!(
                    "no instance type has an available offering for requirements {}",
                    self.describe(&all)
                )
            } else {
                format!(
                    "no instance type satisfied resources {} (pod {} plus daemonset overhead {}) and requirements {}",
                    self.res.resources(&total),
                    self.res.resources(&p.requests),
                    self.res.resources(&pool.daemon),
                    self.describe(&all)
                )
            });
        }
        let mut commit = Commit {
            changes: ov.changes,
            options,
            max_alloc: Vec::new(),
            held: claim.held.clone(),
        };
        let options_before_pin = commit.options.len();
        if is_new {
            self.pin_reservations(claim, &mut commit)?;
        }
        let reqs_after = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        self.check_min_values(pool, &reqs_after, &commit.options)?;
        commit.max_alloc = if commit.options.len() == options_before_pin {
            max_alloc
        } else {
            self.max_alloc(pool, &commit.options)
        };
        Ok(commit)
    }

    /// Karpenter's reserved-capacity rule: a new NodeClaim that can use a
    /// reservation with room is pinned to reserved capacity and holds it;
    /// otherwise reserved capacity is excluded.
    fn pin_reservations(&self, claim: &Claim, commit: &mut Commit) -> Result<(), String> {
        let pool = &self.pools[claim.pool];
        if !pool.has_reserved {
            return Ok(());
        }
        let number = |v: &u32| self.values.number(*v);
        let ov = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        let allows_reserved = ov
            .get(self.k_ct)
            .is_none_or(|r| r.set.has(&self.v_reserved, &number));
        if !allows_reserved {
            return Ok(());
        }
        let reserved_only: Set = ValueSet::of(vec![self.v_reserved]);
        let mut pinned = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        pinned.narrow(self.k_ct, &reserved_only, None, &self.values);
        let mut held = Vec::new();
        let mut kept = Vec::new();
        let mut any_reserved = false;
        for &t in &commit.options {
            let ty = &pool.types[t as usize];
            any_reserved |= ty.offers.iter().any(|o| o.reservation.is_some());
            let mut usable = false;
            for o in &ty.offers {
                let Some(ri) = o.reservation else { continue };
                if self.cheapest_offer_single(ty, &pinned, o) {
                    usable = true;
                    if !held.contains(&ri) {
                        held.push(ri);
                    }
                }
            }
            if usable {
                kept.push(t);
            }
        }
        if !kept.is_empty() {
            commit.changes = pinned.changes;
            commit.options = kept;
            commit.held = held;
            return Ok(());
        }
        if !any_reserved {
            return Ok(());
        }
        let others: Set = ValueSet::except(vec![self.v_reserved]);
        let mut fallback = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        if !fallback.narrow(self.k_ct, &others, None, &self.values) {
            return Err("every compatible capacity reservation is already in use".to_string());
        }
        let kept: Vec<u32> = commit
            .options
            .iter()
            .copied()
            .filter(|t| {
                self.cheapest_offer(&pool.types[*t as usize], &fallback, Some(&[]))
                    .is_some()
            })
            .collect();
        if kept.is_empty() {
            return Err("every compatible capacity reservation is already in use".to_string());
        }
        commit.changes = fallback.changes;
        commit.options = kept;
        Ok(())
    }

    /// Whether `offer`'s reservation has room and one of its offerings for
    /// this type is compatible with the (reserved-pinned) requirements.
    fn cheapest_offer_single(&self, ty: &TypeIdx, reqs: &Overlay, offer: &Offer) -> bool {
        let Some(ri) = offer.reservation else {
            return false;
        };
        let room = self
            .reservations
            .get(ri)
            .is_some_and(|r| r.held < r.capacity);
        room && self.cheapest_offer(ty, reqs, Some(&[ri])).is_some()
    }

    fn check_min_values(
        &self,
        pool: &PoolIdx,
        reqs: &Overlay,
        options: &[u32],
    ) -> Result<(), String> {
        if self.input.options.min_values_policy == MinValuesPolicy::BestEffort {
            return Ok(());
        }
        let number = |v: &u32| self.values.number(*v);
        for r in reqs.all() {
            let Some(min) = r.min_values else { continue };
            let mut seen: HashSet<u32> = HashSet::new();
            for t in options {
                if let Some(tr) = pool.types[*t as usize].reqs.get(r.key) {
                    for v in tr.set.values() {
                        if !tr.set.is_complement() && r.set.has(v, &number) {
                            seen.insert(*v);
                        }
                    }
                }
            }
            if (seen.len() as u32) < min {
                return Err(format!(
                    "minValues {min} for {} cannot be met: only {} distinct value(s) remain among compatible instance types",
                    self.keys.name(r.key),
                    seen.len()
                ));
            }
        }
        Ok(())
    }

    fn apply(&mut self, pi: usize, ci: usize, commit: Commit) {
        let claim = &mut self.claims[ci];
        for change in commit.changes {
            match claim
                .reqs
                .items
                .binary_search_by_key(&change.key, |r| r.key)
            {
                Ok(i) => claim.reqs.items[i] = change,
                Err(i) => claim.reqs.items.insert(i, change),
            }
        }
        claim.options = commit.options;
        claim.max_alloc = commit.max_alloc;
        claim.held = commit.held;
        let p = &self.pods[pi];
        add_into(&mut claim.requests, &p.requests);
        claim.pods.push(pi as u32);
        claim.host_ports.extend(p.host_ports.iter().cloned());
        let taints = &self.pools[claim.pool].taints;
        record(
            &mut self.groups,
            &p.counted_by,
            &p.inverse_owned,
            &claim.reqs,
            taints,
            &mut claim.host_counts,
            &self.values,
        );
        for g in &self.pods[pi].counted_by {
            if let Some(list) = self.anti_free.get_mut(g) {
                list.remove(&(ci as u32));
            }
        }
        if !self.claims[ci].held.is_empty() {
            self.release_unused_reservations(ci);
        }
    }

    fn release_unused_reservations(&mut self, ci: usize) {
        let claim = &self.claims[ci];
        let pool = &self.pools[claim.pool];
        let ov = Overlay::new(&claim.reqs);
        let still: Vec<usize> = claim
            .held
            .iter()
            .copied()
            .filter(|ri| {
                claim.options.iter().any(|t| {
                    let ty = &pool.types[*t as usize];
                    ty.offers.iter().any(|o| o.reservation == Some(*ri))
                        && self
                            .cheapest_offer(ty, &ov, Some(&[*ri]))
                            .is_some_and(|o| o.reservation == Some(*ri))
                })
            })
            .collect();
        let released: Vec<usize> = claim
            .held
            .iter()
            .copied()
            .filter(|r| !still.contains(r))
            .collect();
        for r in released {
            if let Some(res) = self.reservations.get_mut(r) {
                res.held = res.held.saturating_sub(1);
            }
        }
        self.claims[ci].held = still;
    }

    fn finish(mut self) -> SchedulingResult {
        let claims = std::mem::take(&mut self.claims);
        let mut cache = OfferCache::new();
        let mut out = Vec::new();
        for claim in claims {
            match self.finalize(&claim, &mut cache) {
                Ok(nc) => out.push(nc),
                Err(reason) => {
                    for pi in &claim.pods {
                        let pod = &self.input.pods[self.pods[*pi as usize].input];
                        self.errors.push(PodError {
                            pod: pod.reference(),
                            reason: reason.clone(),
                        });
                    }
                }
            }
        }
        SchedulingResult {
            new_node_claims: out,
            existing_node_placements: self.placements,
            errors: self.errors,
        }
    }

    fn finalize(&self, claim: &Claim, cache: &mut OfferCache) -> Result<NewNodeClaim, String> {
        let pool = &self.pools[claim.pool];
        let ov = Overlay::new(&claim.reqs);
        let view = OfferView::new(self, &ov);
        let cache_key = claim.held.is_empty().then(|| {
            (
                claim.pool,
                view.zone.cloned(),
                view.capacity_type.cloned(),
                view.reservation.cloned(),
            )
        });
        let mut cached = cache_key
            .as_ref()
            .and_then(|k| cache.remove(k))
            .unwrap_or_default();
        if cached.is_empty() {
            cached = vec![None; pool.types.len()];
        }
        let mut ranked: Vec<(i32, f64, u32, &Offer)> = claim
            .options
            .iter()
            .filter_map(|t| {
                let ty = &pool.types[*t as usize];
                let slot = cached.get_mut(*t as usize)?;
                let index = match *slot {
                    Some(index) => index,
                    None => {
                        let found = ty
                            .offers
                            .iter()
                            .enumerate()
                            .filter(|(_, o)| self.offer_usable(&view, o, Some(&claim.held)))
                            .min_by(|a, b| a.1.price.total_cmp(&b.1.price))
                            .map(|(i, _)| i as u32)
                            .unwrap_or(u32::MAX);
                        *slot = Some(found);
                        found
                    }
                };
                let offer = ty.offers.get(index as usize)?;
                let score = pool
                    .scores
                    .as_ref()
                    .and_then(|s| s.get(*t as usize).copied())
                    .unwrap_or(0);
                Some((score, offer.price, *t, offer))
            })
            .collect();
        if let Some(key) = cache_key {
            cache.insert(key, cached);
        }
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
        ranked.truncate(self.input.options.max_instance_types.max(1));
        let truncated: Vec<u32> = ranked.iter().map(|r| r.2).collect();
        self.check_min_values(pool, &ov, &truncated).map_err(|e| {
            format!(
                "nodepool {:?}: after keeping the {} cheapest instance types, {e}",
                pool.name,
                truncated.len()
            )
        })?;
        let Some(&(_, price, chosen, offer)) = ranked.first() else {
            return Err(format!(
                "nodepool {:?}: no instance type option is left for the NodeClaim",
                pool.name
            ));
        };
        let mut requirements = export_reqs(&claim.reqs, &self.keys, &self.values);
        let mut labels = requirements.single_value_labels();
        labels.extend(pool.labels.clone());
        labels.insert(labels::NODE_POOL.to_string(), pool.name.clone());
        requirements = requirements
            .iter()
            .filter(|r| r.key != labels::HOSTNAME)
            .cloned()
            .collect();
        let reservation_id = offer
            .reservation_value
            .map(|v| self.values.name(v).to_string());
        Ok(NewNodeClaim {
            node_pool: pool.name.clone(),
            instance_type_options: ranked
                .iter()
                .map(|(score, price, t, _)| InstanceTypeOption {
                    name: pool.types[*t as usize].name.clone(),
                    price: *price,
                    score: pool.scores.as_ref().map(|_| *score),
                })
                .collect(),
            instance_type: pool.types[chosen as usize].name.clone(),
            zone: self.values.name(offer.zone).to_string(),
            capacity_type: offer.capacity_type,
            price,
            reservation_id,
            pods: claim
                .pods
                .iter()
                .map(|pi| self.input.pods[self.pods[*pi as usize].input].reference())
                .collect(),
            requests: self.res.resources(&claim.requests),
            requirements,
            labels,
            taints: pool.taints.clone(),
        })
    }
}

/// Cheapest usable offering index per instance type (`u32::MAX`: none), per
/// pool and offering-relevant requirements, shared by claims that hold no
/// reservation.
type OfferCache = HashMap<(usize, Option<Set>, Option<Set>, Option<Set>), Vec<Option<u32>>>;

/// Records a placed pod in every group that counts it and every inverse
/// anti-affinity group it owns.
fn record(
    groups: &mut [Group],
    counted_by: &[u32],
    inverse_owned: &[u32],
    reqs: &Reqs,
    taints: &[Taint],
    host_counts: &mut Vec<(u32, i32)>,
    values: &Interner,
) {
    let number = |v: &u32| values.number(*v);
    for (&g, all_values) in counted_by
        .iter()
        .map(|g| (g, false))
        .chain(inverse_owned.iter().map(|g| (g, true)))
    {
        let Some(group) = groups.get_mut(g as usize) else {
            continue;
        };
        if let Some(filter_reqs) = &group.id.filter.reqs {
            let ok = filter_reqs.items.iter().all(|f| {
                reqs.get(f.key)
                    .is_none_or(|r| r.set.intersects(&f.set, &number))
            });
            if !ok {
                continue;
            }
        }
        if !group.id.filter.admits_taints(taints) {
            continue;
        }
        if group.hostname {
            bump_host_count(host_counts, g);
            group.total += 1;
            continue;
        }
        let every = all_values || group.id.kind == GroupKind::AntiAffinity;
        let Some(r) = reqs.get(group.id.key) else {
            continue;
        };
        if r.set.is_complement() {
            continue;
        }
        if every || r.set.values().len() == 1 {
            for v in r.set.values() {
                *group.counts.entry(*v).or_insert(0) += 1;
                group.total += 1;
            }
        }
    }
}

/// Existing nodes and in-flight NodeClaims in the order Karpenter tries them
/// (`sortExistingNodes`): initialized nodes first, then by name. Nodes being
/// deleted take no pods and are left out. The flag marks in-flight NodeClaims.
fn ordered_nodes(input: &SchedulerInput) -> Vec<(&ExistingNode, bool)> {
    let mut nodes: Vec<(&ExistingNode, bool)> = input
        .existing_nodes
        .iter()
        .map(|n| (n, false))
        .chain(input.in_flight.iter().map(|n| (n, true)))
        .filter(|(n, _)| !n.marked_for_deletion)
        .collect();
    let initialized = |(n, in_flight): &(&ExistingNode, bool)| n.initialized && !in_flight;
    nodes.sort_by(|a, b| {
        initialized(b)
            .cmp(&initialized(a))
            .then_with(|| a.0.name.cmp(&b.0.name))
    });
    nodes
}

fn collect_pod_keys(input: &SchedulerInput) -> HashSet<String> {
    let mut keys = HashSet::new();
    for pod in &input.pods {
        keys.extend(
            pod.node_selector
                .keys()
                .map(|k| labels::normalize(k).to_string()),
        );
        for term in pod
            .required_node_affinity
            .iter()
            .chain(pod.preferred_node_affinity.iter().map(|w| &w.term))
        {
            keys.extend(term.iter().map(|r| r.key.clone()));
        }
    }
    keys
}
