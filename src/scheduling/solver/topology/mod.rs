//! Topology groups of one solve (Karpenter's `topology.go`): which groups
//! each pod belongs to, the domains each topology key can take, and the
//! counts a placed pod adds.

mod checks;
pub(super) mod groups;

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::scheduling::index::{Ids, Reqs};
use crate::scheduling::labels;
use crate::scheduling::pod::{NodeInclusionPolicy, Pod, WhenUnsatisfiable};
use crate::scheduling::taints::Taint;

use super::State;
use super::pods::merged_selector;
use groups::{Group, GroupKey, GroupKind, NodeFilter, NsMatch, bump_host_count};

/// Records `pods` placed pods alike in every group that counts them and
/// every inverse anti-affinity group they own. `open_keys` are the keys a
/// node may leave undefined and still match a spread's node filter: the
/// well-known labels of a new claim, whose instance type is not chosen yet;
/// none for a node.
#[allow(clippy::too_many_arguments)]
pub(in crate::scheduling::solver) fn record(
    groups: &mut [Group],
    counted_by: &[u32],
    inverse_owned: &[u32],
    reqs: &Reqs,
    taints: &[Taint],
    host_counts: &mut Vec<(u32, i32)>,
    values: &impl Ids,
    open_keys: Option<&HashSet<u32>>,
    pods: i32,
) {
    for (&g, all_values) in counted_by
        .iter()
        .map(|g| (g, false))
        .chain(inverse_owned.iter().map(|g| (g, true)))
    {
        let Some(group) = groups.get_mut(g as usize) else {
            continue;
        };
        let open = |k: u32| open_keys.is_some_and(|o| o.contains(&k));
        if !group.id.filter.admits_reqs(reqs, values, open) {
            continue;
        }
        if !group.id.filter.admits_taints(taints) {
            continue;
        }
        if group.hostname {
            bump_host_count(host_counts, g, pods);
            group.total += i64::from(pods);
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
                *group.counts.entry(*v).or_insert(0) += pods;
                group.total += i64::from(pods);
            }
        }
    }
}

impl State<'_> {
    pub(in crate::scheduling::solver) fn group_id(
        &mut self,
        index: &mut HashMap<GroupKey, u32>,
        key: GroupKey,
    ) -> u32 {
        if let Some(id) = index.get(&key) {
            return *id;
        }
        let id = self.groups.len() as u32;
        let hostname = key.key == self.m.k_host;
        index.insert(key.clone(), id);
        self.groups.push(Group::new(key, hostname));
        id
    }

    pub(in crate::scheduling::solver) fn prepare_topology(&mut self, pods: &[&Pod]) {
        let ns_labels = &self.m.namespace_labels;
        let mut index: HashMap<GroupKey, u32> = HashMap::new();
        for (pi, pod) in pods.iter().enumerate() {
            let term_key =
                |solver: &mut Self,
                 kind: GroupKind,
                 term: &crate::scheduling::pod::PodAffinityTerm| GroupKey {
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
                    terms: honor.then(|| {
                        let p = &self.pods[pi];
                        if p.required_terms.is_empty() {
                            return vec![p.base.clone()];
                        }
                        p.required_terms
                            .iter()
                            .map(|t| {
                                let mut r = p.base.clone();
                                r.add_all(t, &self.values);
                                r
                            })
                            .collect()
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
        let mut slot_of: Vec<Option<u32>> = vec![None; self.m.nodes.len()];
        for (si, slot) in self.nodes.iter().enumerate() {
            if let Some(s) = slot_of.get_mut(slot.base.index as usize) {
                *s = Some(si as u32);
            }
        }
        // (slot, group, owners on the slot): owners come in node order.
        let mut existing_inverse: Vec<(usize, u32, i32)> = Vec::new();
        for (key, owners) in &self.m.running.inverse {
            let mut live: Vec<(usize, i32)> = Vec::new();
            for si in owners
                .iter()
                .filter_map(|at| slot_of.get(at.0 as usize).copied().flatten())
            {
                match live.last_mut() {
                    Some((last, n)) if *last == si as usize => *n += 1,
                    _ => live.push((si as usize, 1)),
                }
            }
            if live.is_empty() {
                continue;
            }
            let g = self.group_id(&mut index, key.clone());
            existing_inverse.extend(live.into_iter().map(|(si, n)| (si, g, n)));
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
        // Count pods already running: for each group, how many running pods
        // it selects on each of this solve's nodes (worked out by the model).
        for (si, owned, owners) in existing_inverse {
            let slot = &mut self.nodes[si];
            record(
                &mut self.groups,
                &[],
                &[owned],
                &slot.base.reqs,
                &slot.base.taints,
                &mut slot.host_counts,
                &self.values,
                None,
                owners,
            );
        }
        for gi in 0..self.groups.len() {
            let group = &self.groups[gi];
            if group.id.kind == GroupKind::InverseAntiAffinity {
                continue;
            }
            let Some(selector) = &group.id.selector else {
                continue;
            };
            let counts = self.m.selected_counts(&group.id.namespaces, selector);
            for &(ni, n) in counts.iter() {
                let Some(si) = slot_of.get(ni as usize).copied().flatten() else {
                    continue;
                };
                let slot = &mut self.nodes[si as usize];
                record(
                    &mut self.groups,
                    &[gi as u32],
                    &[],
                    &slot.base.reqs,
                    &slot.base.taints,
                    &mut slot.host_counts,
                    &self.values,
                    None,
                    n as i32,
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
            // node) with the taints and labels its nodes carry, like
            // Karpenter's TopologyDomainGroup.
            let pool_domains = self.m.pool_domains(key);
            let mut sources: Vec<DomainSource> = self
                .m
                .pools
                .iter()
                .zip(pool_domains.iter())
                .map(|(pool, domains)| DomainSource {
                    domains,
                    taints: pool.taints(),
                    reqs: &pool.reqs,
                    pool: true,
                })
                .collect();
            for node in &self.nodes {
                if let Some(r) = node.base.reqs.get(key) {
                    sources.push(DomainSource {
                        domains: r.set.values(),
                        taints: &node.base.taints,
                        reqs: &node.base.reqs,
                        pool: false,
                    });
                }
            }
            let domains: HashSet<u32> = sources.iter().flat_map(|s| s.domains).copied().collect();
            // A spread honouring node affinity or taints spreads over the
            // domains of the NodePools and nodes its filter admits only. A
            // NodePool leaves well-known labels to its instance types.
            let well_known = &self.m.well_known;
            let values = &self.values;
            for group in self.groups.iter_mut().filter(|g| {
                g.id.key == key
                    && matches!(g.id.kind, GroupKind::Spread { .. })
                    && !g.id.filter.is_empty()
            }) {
                let filter = &group.id.filter;
                let eligible = sources
                    .iter()
                    .filter(|s| {
                        filter.admits_taints(s.taints)
                            && filter
                                .admits_reqs(s.reqs, values, |k| s.pool && well_known.contains(&k))
                    })
                    .flat_map(|s| s.domains)
                    .copied()
                    .collect();
                group.eligible_domains = Some(eligible);
            }
            let mut sorted: Vec<u32> = domains.into_iter().collect();
            sorted.sort_by(|a, b| self.values.name(*a).cmp(self.values.name(*b)));
            self.universe.insert(key, sorted);
        }
    }
}

/// Where topology domains come from: a NodePool's possible nodes or an
/// existing node, with what a spread's node filter looks at.
struct DomainSource<'s> {
    domains: &'s [u32],
    taints: &'s [Taint],
    reqs: &'s Reqs,
    /// A NodePool (its well-known labels are decided by the instance type).
    pool: bool,
}
