//! Pending pods compiled for one solve: interned node requirements,
//! requests, tolerations and per-pool toleration results.

use std::collections::{BTreeMap, HashSet};

use crate::scheduling::index::{Ids, Reqs, Res, intern_reqs};
use crate::scheduling::labels;
use crate::scheduling::pod::{HostPort, LabelSelector, Pod, SelectorExpression};
use crate::scheduling::pod_key::PodKey;
use crate::scheduling::requirements::{Operator, Requirements};
use crate::scheduling::taints::{Toleration, first_untolerated};

use super::State;

#[derive(Clone)]
pub(super) struct PodP {
    /// `namespace/name`.
    pub(super) reference: PodKey,
    pub(super) tolerations: Vec<Toleration>,
    pub(super) namespace: String,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) requests: Res,
    pub(super) base: Reqs,
    pub(super) required_terms: Vec<Reqs>,
    /// `matchFields` per required term (see [`Pod::required_node_fields`]).
    pub(super) required_fields: Vec<Requirements>,
    pub(super) preferred_terms: Vec<Reqs>,
    pub(super) req_aff: Vec<u32>,
    pub(super) pref_aff: Vec<u32>,
    pub(super) req_anti: Vec<u32>,
    pub(super) pref_anti: Vec<u32>,
    pub(super) spread_hard: Vec<u32>,
    pub(super) spread_soft: Vec<u32>,
    pub(super) inverse_owned: Vec<u32>,
    pub(super) counted_by: Vec<u32>,
    pub(super) blocked_by: Vec<u32>,
    /// Per pool: (tolerates all taints incl. PreferNoSchedule, tolerates NoSchedule/NoExecute ones).
    pub(super) pool_taints: Vec<(bool, bool)>,
    pub(super) host_ports: Vec<HostPort>,
    /// Moved off another node by a what-if (not pending): kept off the
    /// nodes closed to such pods.
    pub(super) moving: bool,
}

pub(super) fn merged_selector(
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

pub(super) fn collect_pod_keys(pods: &[&Pod]) -> HashSet<String> {
    let mut keys = HashSet::new();
    for pod in pods {
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

impl State<'_> {
    pub(super) fn prepare_pods(&mut self, pods: &[&Pod]) {
        for key in collect_pod_keys(pods) {
            let id = self.keys.id(&key);
            if labels::is_restricted(&key) {
                self.restricted.insert(id);
            }
        }
        for pod in pods {
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
                .m
                .pools
                .iter()
                .map(|p| {
                    (
                        first_untolerated(p.taints(), &pod.tolerations, true).is_none(),
                        first_untolerated(p.taints(), &pod.tolerations, false).is_none(),
                    )
                })
                .collect();
            self.pods.push(PodP {
                reference: pod.key(),
                tolerations: pod.tolerations.clone(),
                namespace: pod.namespace.clone(),
                labels: pod.labels.clone(),
                requests: self.m.pod_vector(pod),
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
                moving: false,
            });
        }
    }
}
