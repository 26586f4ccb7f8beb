//! NodePools compiled for one solve: interned requirements, the instance
//! types each may launch, daemonset overhead and what is left of its limits.

use std::collections::{BTreeMap, HashMap};

use crate::scheduling::index::{Req, Reqs, Res, intern_reqs};
use crate::scheduling::labels;
use crate::scheduling::requirements::{Requirement, Requirements};
use crate::scheduling::taints::Taint;

use super::Solver;
use super::daemonsets::DaemonGroup;
use super::offerings::{Offer, Reservation, TypeIdx};
use super::overlay::Overlay;

/// The NodePool limit on its number of nodes (Karpenter's `resources.Node`).
pub(super) const NODES_LIMIT: &str = "nodes";

pub(super) struct PoolIdx {
    pub(super) name: String,
    /// Why the pool may not launch (see `NodePoolSpec::blocked`).
    pub(super) blocked: Option<String>,
    pub(super) reqs: Reqs,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) taints: Vec<Taint>,
    pub(super) types: Vec<TypeIdx>,
    pub(super) base_options: Vec<u32>,
    /// DaemonSets per group of instance types (see [`TypeIdx::daemon_group`]).
    pub(super) daemon_groups: Vec<DaemonGroup>,
    /// `limits.nodes` less the pool's nodes and NodeClaims, if limited.
    pub(super) nodes_remaining: Option<i64>,
    pub(super) remaining: Res,
    pub(super) limited: bool,
    pub(super) scores: Option<Vec<i32>>,
    /// Per-dimension maximum allocatable over `base_options`.
    pub(super) base_max_alloc: Res,
    /// Whether any instance type has a reserved offering.
    pub(super) has_reserved: bool,
}

impl Solver<'_> {
    pub(super) fn prepare_pools(&mut self) {
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
            for it in spec.instance_types.iter() {
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
                    daemon_group: 0,
                    capacity: self.res.vector(&it.capacity),
                    offers,
                });
            }
            let dims = self.res.dims();
            let mut remaining = vec![i64::MAX; dims];
            let mut limited = false;
            for (name, amount) in &spec.limits {
                if name == NODES_LIMIT {
                    continue;
                }
                let mut probe = crate::scheduling::resources::Resources::zero();
                probe.set(name, 1);
                if let Some(d) = self.res.vector(&probe).iter().position(|v| *v == 1) {
                    remaining[d] = *amount;
                    limited = true;
                }
            }
            let (daemon_groups, of_type) = self.daemon_groups(spec, &public, &types);
            for (ty, group) in types.iter_mut().zip(of_type) {
                ty.daemon_group = group;
                if let Some(g) = daemon_groups.get(group as usize) {
                    for (a, o) in ty.alloc.iter_mut().zip(&g.overhead) {
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
                name: spec.name.clone(),
                blocked: spec.blocked.clone(),
                reqs,
                labels: spec.labels.clone(),
                taints: spec.taints.clone(),
                types,
                base_options: Vec::new(),
                daemon_groups,
                nodes_remaining: spec.limits.get(NODES_LIMIT).copied(),
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

    /// Instance types compatible with the pool's own requirements and with an
    /// available offering, cheapest first.
    pub(super) fn base_options(&self, pool: &PoolIdx) -> Vec<u32> {
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

    pub(super) fn type_compatible<'r>(
        &self,
        ty: &TypeIdx,
        reqs: impl Iterator<Item = &'r Req>,
    ) -> bool {
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

    pub(super) fn max_alloc(&self, pool: &PoolIdx, options: &[u32]) -> Res {
        let mut max = vec![0; self.res.dims()];
        for t in options {
            for (m, a) in max.iter_mut().zip(&pool.types[*t as usize].alloc) {
                *m = (*m).max(*a);
            }
        }
        max
    }
}
