//! DaemonSet overhead of new nodes, per instance type (Karpenter's daemon
//! overhead groups): which DaemonSets would run on a node of a NodePool and
//! instance type, what they request and which host ports they bind. The
//! instance types of a pool are grouped by the DaemonSets they admit when
//! the model is compiled, so the per-pod loop only reads a type's
//! allocatable after its DaemonSets.
//!
//! Whether a DaemonSet runs on a new node is decided by the NodePool and the
//! instance type's own labels (architecture, family, size, …). Where it
//! depends on an offering — zone, capacity type, reservation — it is judged
//! against the NodePool alone, as Karpenter does: a node of the pool may get
//! any offering of its type, so a DaemonSet that the pool admits in one zone
//! counts on every type, whichever zones the type is offered in.

use std::collections::HashMap;

use crate::apis::labels::{NODE_INITIALIZED_LABEL_KEY, NODE_REGISTERED_LABEL_KEY};
use crate::scheduling::index::{Reqs, Res, add_into, intern_reqs};
use crate::scheduling::input::NodePoolSpec;
use crate::scheduling::labels;
use crate::scheduling::pod::{HostPort, Pod};
use crate::scheduling::requirements::{Requirement, Requirements};
use crate::scheduling::taints::{Taint, first_untolerated};

use super::Model;
use super::types::{TypeIdx, type_compatible};

/// A DaemonSet pod template compiled into the model.
pub(in crate::scheduling::solver) struct DaemonSetIdx {
    /// The template (its tolerations; a recompile).
    pub(in crate::scheduling::solver) pod: Pod,
    /// The node selector joined with each required node affinity term (the
    /// selector alone without terms): the DaemonSet runs where any holds.
    terms: Vec<Requirements>,
    /// `terms`, interned.
    interned: Vec<Reqs>,
    requests: Res,
    host_ports: Vec<HostPort>,
}

/// The DaemonSets that run on some instance types of a pool.
pub(in crate::scheduling::solver) struct DaemonGroup {
    /// Their summed requests (the pod slot included).
    pub(in crate::scheduling::solver) overhead: Res,
    /// The host ports they bind.
    pub(in crate::scheduling::solver) host_ports: Vec<HostPort>,
}

/// The requirements a DaemonSet may select on: the pool's template (labels
/// included) plus the labels every Karpenter node carries once it runs.
fn pool_requirements_for_daemons(public: &Requirements) -> Requirements {
    let mut reqs = public.clone();
    reqs.add(Requirement::single(NODE_REGISTERED_LABEL_KEY, "true"));
    reqs.add(Requirement::single(NODE_INITIALIZED_LABEL_KEY, "true"));
    reqs
}

fn terms_of(ds: &Pod) -> Vec<Requirements> {
    let selector = Requirements::from_labels(ds.node_selector.iter());
    if ds.required_node_affinity.is_empty() {
        return vec![selector];
    }
    ds.required_node_affinity
        .iter()
        .map(|term| {
            let mut reqs = selector.clone();
            reqs.add_all(term);
            reqs
        })
        .collect()
}

impl Model {
    pub(super) fn compile_daemonsets(&mut self, daemonsets: Vec<Pod>) {
        for ds in daemonsets {
            let terms = terms_of(&ds);
            let interned = terms
                .iter()
                .map(|t| intern_reqs(t, &mut self.keys, &mut self.values))
                .collect();
            let requests = self.pod_vector(&ds);
            self.daemonsets.push(DaemonSetIdx {
                terms,
                interned,
                requests,
                host_ports: ds.host_ports.clone(),
                pod: ds,
            });
        }
    }

    /// A pod's requests as a vector, with its pod slot.
    pub(in crate::scheduling::solver) fn pod_vector(&self, pod: &Pod) -> Res {
        let mut v = self.res.vector(&pod.requests);
        v[crate::scheduling::index::DIM_PODS] += 1;
        v
    }

    /// Groups the pool's instance types by the DaemonSets that would run on
    /// them (Karpenter's `isDaemonPodCompatible`: the pool's taints are
    /// tolerated, PreferNoSchedule aside, and some required term is
    /// compatible with the pool and intersects the instance type). Returns
    /// the groups and each type's group.
    pub(super) fn daemon_groups(
        &self,
        spec: &NodePoolSpec,
        public: &Requirements,
        types: &[TypeIdx],
    ) -> (Vec<DaemonGroup>, Vec<u32>) {
        let pool_reqs = pool_requirements_for_daemons(public);
        // Per DaemonSet, the terms this pool admits.
        let candidates: Vec<(usize, Vec<usize>)> = self
            .daemonsets
            .iter()
            .enumerate()
            .filter(|(_, d)| first_untolerated(&spec.taints, &d.pod.tolerations, false).is_none())
            .filter_map(|(i, d)| {
                let terms: Vec<usize> = (0..d.terms.len())
                    .filter(|t| {
                        pool_reqs
                            .compatible(&d.terms[*t], labels::is_well_known)
                            .is_ok()
                    })
                    .collect();
                (!terms.is_empty()).then_some((i, terms))
            })
            .collect();
        let number = self.number();
        let offering_keys = [self.k_zone, self.k_ct, self.k_reservation];
        let mut groups: Vec<DaemonGroup> = Vec::new();
        let mut index: HashMap<Vec<usize>, u32> = HashMap::new();
        let mut of_type = Vec::with_capacity(types.len());
        for ty in types {
            let running: Vec<usize> = candidates
                .iter()
                .filter(|(i, terms)| {
                    terms.iter().any(|t| {
                        let term = self.daemonsets[*i].interned[*t].items.iter();
                        let own = term.filter(|r| !offering_keys.contains(&r.key));
                        type_compatible(ty, own, &number)
                    })
                })
                .map(|(i, _)| *i)
                .collect();
            let next = groups.len() as u32;
            let group = *index.entry(running.clone()).or_insert_with(|| {
                let mut overhead = vec![0; self.res.dims()];
                let mut host_ports = Vec::new();
                for i in &running {
                    add_into(&mut overhead, &self.daemonsets[*i].requests);
                    host_ports.extend(self.daemonsets[*i].host_ports.iter().cloned());
                }
                groups.push(DaemonGroup {
                    overhead,
                    host_ports,
                });
                next
            });
            of_type.push(group);
        }
        (groups, of_type)
    }

    /// Requests of the DaemonSets that would run on an existing node with
    /// these labels and taints (Karpenter's `getCompatibleDaemonPods`).
    pub(super) fn node_daemon_overhead(&self, node_labels: &Requirements, taints: &[Taint]) -> Res {
        let mut total = vec![0; self.res.dims()];
        for d in &self.daemonsets {
            if first_untolerated(taints, &d.pod.tolerations, false).is_some() {
                continue;
            }
            if d.terms
                .iter()
                .any(|t| node_labels.compatible(t, |_| false).is_ok())
            {
                add_into(&mut total, &d.requests);
            }
        }
        total
    }
}
