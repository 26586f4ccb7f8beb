//! NodePools compiled into the model: interned requirements, the instance
//! types each may launch, DaemonSet overhead and its limits.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::scheduling::index::{Ids, Reqs, Res, intern_reqs};
use crate::scheduling::input::NodePoolSpec;
use crate::scheduling::labels;
use crate::scheduling::requirements::{Requirement, Requirements};
use crate::scheduling::resources::Resources;
use crate::scheduling::taints::Taint;

use super::daemonsets::DaemonGroup;
use super::types::{Offer, OfferView, TypeIdx, type_compatible};
use super::{Model, ReservationIds};
use crate::scheduling::solver::overlay::Overlay;

/// The NodePool limit on its number of nodes (Karpenter's `resources.Node`).
pub(in crate::scheduling::solver) const NODES_LIMIT: &str = "nodes";

pub(in crate::scheduling::solver) struct PoolIdx {
    /// The NodePool as given (for its name, labels, taints, startup taints,
    /// limits and a recompile).
    pub(in crate::scheduling::solver) spec: NodePoolSpec,
    pub(in crate::scheduling::solver) reqs: Reqs,
    pub(in crate::scheduling::solver) types: Vec<TypeIdx>,
    /// Allocatable left for pods on each type once the DaemonSets that run
    /// on it in this pool are placed: `dims` values per type, in one array
    /// because the claim loop reads it for every option.
    allocs: Vec<i64>,
    dims: usize,
    pub(in crate::scheduling::solver) base_options: Vec<u32>,
    /// DaemonSets per group of instance types (see [`TypeIdx::daemon_group`]).
    pub(in crate::scheduling::solver) daemon_groups: Vec<DaemonGroup>,
    /// `limits.nodes`, if set.
    pub(in crate::scheduling::solver) nodes_limit: Option<i64>,
    /// The other limits per dimension (`i64::MAX`: none).
    pub(in crate::scheduling::solver) limits: Res,
    pub(in crate::scheduling::solver) limited: bool,
    /// `nodewright.io/price-limit-per-hour`, if set.
    pub(in crate::scheduling::solver) price_limit: Option<f64>,
    /// Per type: the price of its cheapest offering the pool may use
    /// (infinite when it has none), what a new NodeClaim of the type is
    /// counted at against `price_limit`.
    pub(in crate::scheduling::solver) cheapest: Vec<f64>,
    pub(in crate::scheduling::solver) scores: Option<Vec<i32>>,
    /// Per-dimension maximum allocatable over `base_options`.
    pub(in crate::scheduling::solver) base_max_alloc: Res,
    /// Whether any instance type has a reserved offering.
    pub(in crate::scheduling::solver) has_reserved: bool,
}

impl PoolIdx {
    /// Allocatable left for pods on type `t` (see `allocs`).
    pub(in crate::scheduling::solver) fn alloc(&self, t: u32) -> &[i64] {
        let start = t as usize * self.dims;
        &self.allocs[start..start + self.dims]
    }

    pub(in crate::scheduling::solver) fn name(&self) -> &str {
        &self.spec.name
    }

    pub(in crate::scheduling::solver) fn taints(&self) -> &[Taint] {
        &self.spec.taints
    }

    pub(in crate::scheduling::solver) fn labels(&self) -> &BTreeMap<String, String> {
        &self.spec.labels
    }
}

impl Model {
    pub(super) fn compile_pools(&mut self, node_pools: &[NodePoolSpec]) {
        let mut order: Vec<usize> = (0..node_pools.len()).collect();
        order.sort_by(|a, b| {
            let (pa, pb) = (&node_pools[*a], &node_pools[*b]);
            pb.weight
                .cmp(&pa.weight)
                .then_with(|| pa.name.cmp(&pb.name))
        });
        let mut reservation_ids = ReservationIds::new();
        for i in order {
            let spec = &node_pools[i];
            let mut public = spec.requirements.clone();
            public.add_all(&Requirements::from_labels(spec.labels.iter()));
            public.add(Requirement::single(labels::NODE_POOL, &spec.name));
            let reqs = intern_reqs(&public, &mut self.keys, &mut self.values);
            let dims = self.res.dims();
            let mut types = Vec::new();
            let mut allocs = Vec::with_capacity(spec.instance_types.len() * dims);
            for it in spec.instance_types.iter() {
                let mut offers = Vec::new();
                for o in &it.offerings {
                    let reservation = o.reservation_id.as_ref().map(|id| {
                        let next = self.reservation_capacity.len();
                        let idx = *reservation_ids.entry(id.clone()).or_insert(next);
                        if idx == next {
                            self.reservation_capacity
                                .push(o.reservation_capacity.unwrap_or(0));
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
                allocs.extend(self.res.vector(&it.allocatable()));
                types.push(TypeIdx {
                    name: it.name.clone(),
                    reqs: intern_reqs(&it.requirements, &mut self.keys, &mut self.values),
                    daemon_group: 0,
                    capacity: self.res.vector(&it.capacity),
                    offers,
                });
            }
            let mut limits = vec![i64::MAX; dims];
            let mut limited = false;
            for (name, amount) in &spec.limits {
                if name == NODES_LIMIT {
                    continue;
                }
                let mut probe = Resources::zero();
                probe.set(name, 1);
                if let Some(d) = self.res.vector(&probe).iter().position(|v| *v == 1) {
                    limits[d] = *amount;
                    limited = true;
                }
            }
            let (daemon_groups, of_type) = self.daemon_groups(spec, &public, &types);
            for ((ty, group), alloc) in types
                .iter_mut()
                .zip(of_type)
                .zip(allocs.chunks_mut(dims.max(1)))
            {
                ty.daemon_group = group;
                if let Some(g) = daemon_groups.get(group as usize) {
                    for (a, o) in alloc.iter_mut().zip(&g.overhead) {
                        *a -= o;
                    }
                }
            }
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
                spec: spec.clone(),
                reqs,
                types,
                allocs,
                dims,
                base_options: Vec::new(),
                daemon_groups,
                nodes_limit: spec.limits.get(NODES_LIMIT).copied(),
                limits,
                limited,
                price_limit: spec.price_limit,
                cheapest: Vec::new(),
                scores,
                base_max_alloc: Vec::new(),
                has_reserved,
            };
            pool.cheapest = self.cheapest_prices(&pool);
            pool.base_options = base_options(&pool.cheapest);
            pool.base_max_alloc = max_alloc(&pool, &pool.base_options, dims);
            self.pools.push(pool);
        }
    }

    /// Per type, the price of its cheapest offering the pool may use:
    /// infinite for a type incompatible with the pool's own requirements or
    /// without an available offering. A reserved offering counts while its
    /// reservation has any capacity.
    fn cheapest_prices(&self, pool: &PoolIdx) -> Vec<f64> {
        let overlay = Overlay::new(&pool.reqs);
        let number = self.number();
        let view = OfferView::new(self, &overlay);
        let room = |r: usize| self.reservation_capacity.get(r).is_some_and(|c| *c > 0);
        pool.types
            .iter()
            .map(|ty| {
                if !type_compatible(ty, pool.reqs.items.iter(), &number) {
                    return f64::INFINITY;
                }
                ty.offers
                    .iter()
                    .filter(|o| view.usable(o, None, &room, &number))
                    .map(|o| o.price)
                    .min_by(f64::total_cmp)
                    .unwrap_or(f64::INFINITY)
            })
            .collect()
    }
}

/// The types a pool may launch, cheapest first (ties by index): those with
/// a finite price in `cheapest`.
fn base_options(cheapest: &[f64]) -> Vec<u32> {
    let mut options: Vec<(f64, u32)> = cheapest
        .iter()
        .enumerate()
        .filter(|(_, price)| price.is_finite())
        .map(|(i, price)| (*price, i as u32))
        .collect();
    options.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    options.into_iter().map(|(_, i)| i).collect()
}

/// Per-dimension maximum allocatable over `options`.
pub(in crate::scheduling::solver) fn max_alloc(
    pool: &PoolIdx,
    options: &[u32],
    dims: usize,
) -> Res {
    let mut max = vec![0; dims];
    for t in options {
        for (m, a) in max.iter_mut().zip(pool.alloc(*t)) {
            *m = (*m).max(*a);
        }
    }
    max
}

/// The values each NodePool's possible nodes can take for one label key,
/// per pool in the model's order.
pub(in crate::scheduling::solver) type PoolDomains = Arc<Vec<Vec<u32>>>;

impl Model {
    /// The domains of label `key` each NodePool can create nodes in: the
    /// values its instance types offer that the pool admits, or the pool's
    /// own values when no type names the key (Karpenter's
    /// `TopologyDomainGroup` of a NodePool). Worked out once per key and
    /// kept: pools never change, and what-ifs ask for the same keys.
    pub(in crate::scheduling::solver) fn pool_domains(&self, key: u32) -> PoolDomains {
        // The memo holds finished entries only, so a panicked holder left
        // it consistent.
        let memo = || self.pool_domains.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hit) = memo().get(&key) {
            return hit.clone();
        }
        let number = self.number();
        let domains: Vec<Vec<u32>> = self
            .pools
            .iter()
            .map(|pool| {
                let mut domains = Vec::new();
                let pool_set = pool.reqs.get(key);
                for &t in &pool.base_options {
                    if let Some(r) = pool.types[t as usize].reqs.get(key)
                        && !r.set.is_complement()
                    {
                        for v in r.set.values() {
                            if pool_set.is_none_or(|p| p.set.has(v, &number)) {
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
                domains
            })
            .collect();
        let domains = Arc::new(domains);
        memo().insert(key, domains.clone());
        domains
    }
}
