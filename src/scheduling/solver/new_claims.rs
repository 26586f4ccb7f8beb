//! NodeClaims created during the solve: a new empty claim of a pool, whether
//! a pod fits on one, and adding a pod to it (Karpenter's `nodeclaim.go`).

use std::collections::HashSet;

use crate::apis::labels::PRICE_LIMIT_ANNOTATION_KEY;
use crate::scheduling::index::{Ids, Reqs, Res, add_into, fits_sum, shortfall};
use crate::scheduling::input::MinValuesPolicy;
use crate::scheduling::pod::HostPort;
use crate::scheduling::taints::first_untolerated;

use super::model::PoolIdx;
use super::model::pools::max_alloc as max_alloc_of;
use super::model::types::type_compatible;
use super::overlay::Overlay;
use super::topology::record;
use super::{Commit, Current, State, positive};

/// Whether an hourly `price` fits in what is left of a price limit (always
/// without one). A thousandth of a cent of slack keeps a limit set to a
/// sum of prices from refusing its last node to rounding.
fn within_price(price: f64, left: Option<f64>) -> bool {
    left.is_none_or(|left| price <= left + 1e-5)
}

#[derive(Clone)]
pub(super) struct Claim {
    pub(super) pool: usize,
    pub(super) reqs: Reqs,
    pub(super) options: Vec<u32>,
    /// Requests of the pods on the claim (DaemonSets are counted per
    /// instance type, in its `alloc`).
    pub(super) requests: Res,
    /// Per-dimension maximum over `options` of the allocatable left for pods.
    pub(super) max_alloc: Res,
    pub(super) pods: Vec<u32>,
    pub(super) host_ports: Vec<HostPort>,
    pub(super) host_counts: Vec<(u32, i32)>,
    pub(super) held: Vec<usize>,
    /// Whether it counts against its pool's price limit (false only for
    /// the unlimited probe that words why a pod cannot use a full pool).
    pub(super) price_limited: bool,
    /// What it is counted at against that limit: the price it is planned
    /// at, its cheapest option's cheapest offering. Rises as pods narrow
    /// its options.
    pub(super) counted: f64,
}

impl State<'_> {
    /// An empty NodeClaim of the pool; with `respect_limits`, only instance
    /// types that fit in what is left of the pool's limits.
    pub(super) fn new_claim(&self, pool_i: usize, respect_limits: bool) -> Result<Claim, String> {
        let pool = &self.m.pools[pool_i];
        let left = &self.pool_left[pool_i];
        if let Some(blocked) = &pool.spec.blocked {
            return Err(format!("launches are blocked: {blocked}"));
        }
        if respect_limits
            && let Some(remaining) = left.nodes
            && remaining <= 0
        {
            let limit = pool.nodes_limit.unwrap_or(0);
            return Err(format!("the NodePool's nodes limit ({limit}) is reached"));
        }
        let price_left = left.price.filter(|_| respect_limits);
        let limited = (pool.limited || price_left.is_some()) && respect_limits;
        let options: Vec<u32> = if limited {
            pool.base_options
                .iter()
                .copied()
                .filter(|t| {
                    pool.types[*t as usize]
                        .capacity
                        .iter()
                        .zip(&left.res)
                        .all(|(c, r)| c <= r)
                })
                .filter(|t| within_price(pool.cheapest[*t as usize], price_left))
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
        if options.is_empty()
            && let (Some(limit), Some(left)) = (pool.price_limit, price_left)
            && !pool
                .base_options
                .iter()
                .any(|t| within_price(pool.cheapest[*t as usize], Some(left)))
        {
            return Err(format!(
                "every instance type costs more than is left of the NodePool's price limit (${limit:.4}/h set by {PRICE_LIMIT_ANNOTATION_KEY}, ${:.4}/h left)",
                left.max(0.0)
            ));
        }
        if options.is_empty() {
            let dims: Vec<&str> = (0..left.res.len())
                .filter(|d| left.res[*d] != i64::MAX)
                .map(|d| self.m.res.name(d))
                .collect();
            return Err(format!(
                "all instance types exceed the NodePool's limits ({})",
                dims.join(", ")
            ));
        }
        let max_alloc = if limited {
            max_alloc_of(pool, &options, self.m.res.dims())
        } else {
            pool.base_max_alloc.clone()
        };
        Ok(Claim {
            pool: pool_i,
            reqs: pool.reqs.clone(),
            options,
            requests: vec![0; self.m.res.dims()],
            max_alloc,
            pods: Vec::new(),
            host_ports: Vec::new(),
            host_counts: Vec::new(),
            held: Vec::new(),
            price_limited: price_left.is_some(),
            counted: 0.0,
        })
    }

    pub(super) fn eval_claim(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        claim: &Claim,
        is_new: bool,
    ) -> Result<Commit, String> {
        let p = &self.pods[pi];
        let pool = &self.m.pools[claim.pool];
        if !fits_sum(&claim.requests, &p.requests, &claim.max_alloc) {
            let d = shortfall(&claim.requests, &p.requests, &claim.max_alloc).unwrap_or(0);
            return Err(why!(
                explain,
                "no instance type has enough {} for requests {} plus the daemonsets that would run on it",
                self.m.res.name(d),
                self.m.res.resources(&p.requests)
            ));
        }
        let (all_ok, hard_ok) = p
            .pool_taints
            .get(claim.pool)
            .copied()
            .unwrap_or((false, false));
        if !(if cur.tolerate_prefer { hard_ok } else { all_ok }) {
            let taint = first_untolerated(pool.taints(), &p.tolerations, !cur.tolerate_prefer);
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
                && !self.m.well_known.contains(&r.key)
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
        let offering_keys = [self.m.k_zone, self.m.k_ct, self.m.k_reservation];
        let number = self.number();
        let offers_changed = ov.changes.iter().any(|r| offering_keys.contains(&r.key));
        let mut total = claim.requests.clone();
        add_into(&mut total, &p.requests);
        let held = if is_new {
            None
        } else {
            Some(claim.held.as_slice())
        };
        let (mut n_reqs, mut n_offers, mut n_ports) = (0usize, 0usize, 0usize);
        let mut options = Vec::with_capacity(claim.options.len());
        let mut max_alloc = vec![0; total.len()];
        for &t in &claim.options {
            let alloc = pool.alloc(t);
            let fits = total.iter().zip(alloc).all(|(need, have)| need <= have);
            // The cheap check first; the counts below only word the reason
            // shown when explaining, so they are kept exact only then.
            if !fits && !explain {
                continue;
            }
            let ty = &pool.types[t as usize];
            if !type_compatible(ty, ov.changes.iter(), &number) {
                continue;
            }
            n_reqs += 1;
            if offers_changed && !self.has_offer(ty, &ov, held) {
                continue;
            }
            n_offers += 1;
            if !p.host_ports.is_empty()
                && let Some(group) = pool.daemon_groups.get(ty.daemon_group as usize)
                && self.check_ports(false, pi, &group.host_ports).is_err()
            {
                continue;
            }
            n_ports += 1;
            if fits {
                options.push(t);
                for (m, a) in max_alloc.iter_mut().zip(alloc) {
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
            } else if n_ports == 0 {
                let ports: Vec<String> = p
                    .host_ports
                    .iter()
                    .map(|hp| format!("{}/{}", hp.port, hp.protocol))
                    .collect();
                format!(
                    "host port {} is bound by a daemonset on every instance type that satisfies requirements {}",
                    ports.join(", "),
                    self.describe(&all)
                )
            } else {
                format!(
                    "no instance type satisfied resources {} (pod {}) plus the daemonsets that would run on it, and requirements {}",
                    self.m.res.resources(&total),
                    self.m.res.resources(&p.requests),
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
        self.keep_within_price(explain, claim, &mut commit.options)?;
        let reqs_after = Overlay {
            base: &claim.reqs,
            changes: commit.changes.clone(),
        };
        self.check_min_values(pool, &reqs_after, &commit.options)?;
        commit.max_alloc = if commit.options.len() == options_before_pin {
            max_alloc
        } else {
            max_alloc_of(pool, &commit.options, self.m.res.dims())
        };
        Ok(commit)
    }

    /// Keeps the options a price-limited claim can still pay for: those
    /// whose cheapest offering fits in what is left of its pool's price
    /// limit plus what the claim is already counted at.
    fn keep_within_price(
        &self,
        explain: bool,
        claim: &Claim,
        options: &mut Vec<u32>,
    ) -> Result<(), String> {
        let pool = &self.m.pools[claim.pool];
        let (true, Some(left), Some(limit)) = (
            claim.price_limited,
            self.pool_left[claim.pool].price,
            pool.price_limit,
        ) else {
            return Ok(());
        };
        let budget = left + claim.counted;
        options.retain(|t| within_price(pool.cheapest[*t as usize], Some(budget)));
        if options.is_empty() {
            return Err(why!(
                explain,
                "every instance type that fits costs more than is left of the NodePool's price limit (${limit:.4}/h set by {PRICE_LIMIT_ANNOTATION_KEY}, ${:.4}/h left)",
                budget.max(0.0)
            ));
        }
        Ok(())
    }

    pub(super) fn check_min_values(
        &self,
        pool: &PoolIdx,
        reqs: &Overlay,
        options: &[u32],
    ) -> Result<(), String> {
        if self.m.options.min_values_policy == MinValuesPolicy::BestEffort {
            return Ok(());
        }
        let number = self.number();
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

    pub(super) fn apply(&mut self, pi: usize, ci: usize, commit: Commit) {
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
        if claim.price_limited
            && let Some(left) = self.pool_left[claim.pool].price.as_mut()
        {
            let cheapest = &self.m.pools[claim.pool].cheapest;
            let planned = claim
                .options
                .iter()
                .map(|t| cheapest[*t as usize])
                .fold(f64::INFINITY, f64::min);
            if planned.is_finite() {
                *left -= planned - claim.counted;
                claim.counted = planned;
            }
        }
        let p = &self.pods[pi];
        add_into(&mut claim.requests, &p.requests);
        self.room.set(ci, &claim.requests, &claim.max_alloc);
        claim.pods.push(pi as u32);
        claim.host_ports.extend(p.host_ports.iter().cloned());
        let taints = self.m.pools[claim.pool].taints();
        record(
            &mut self.groups,
            &p.counted_by,
            &p.inverse_owned,
            &claim.reqs,
            taints,
            &mut claim.host_counts,
            &self.values,
            Some(&self.m.well_known),
            1,
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
}
