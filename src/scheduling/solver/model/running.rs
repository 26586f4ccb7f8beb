//! The pods already running on the model's nodes, indexed so a solve finds
//! the ones a topology group selects without walking every pod.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::scheduling::index::Ids;
use crate::scheduling::labels;
use crate::scheduling::pod::{LabelSelector, Pod};
use crate::scheduling::requirements::Operator;
use crate::scheduling::solver::topology::groups::{GroupKey, GroupKind, NodeFilter, NsMatch};

use super::Model;
use super::nodes::NodeBase;

/// A running pod: its node's index in the model and its place on the node.
pub(in crate::scheduling::solver) type PodAt = (u32, u32);

/// Per node (its index in the model, ascending), how many of its running
/// pods a topology group selects.
pub(in crate::scheduling::solver) type NodeCounts = Arc<Vec<(u32, u32)>>;

/// Running pods by label, and those whose required anti-affinity repels
/// others.
#[derive(Default)]
pub(in crate::scheduling::solver) struct RunningPods {
    by_label: HashMap<String, HashMap<String, Vec<PodAt>>>,
    all: Vec<PodAt>,
    /// Pods with a required anti-affinity term.
    repelling: Vec<PodAt>,
    /// The inverse anti-affinity groups those terms make, in the order the
    /// pods come, each with the pods owning it (once per term).
    pub(in crate::scheduling::solver) inverse: Vec<(GroupKey, Vec<PodAt>)>,
    /// [`Model::selected_counts`] already worked out, by namespaces and
    /// selector: what-ifs ask for the same groups again and again.
    selected: Mutex<HashMap<(NsMatch, LabelSelector), NodeCounts>>,
}

impl RunningPods {
    pub(super) fn index(nodes: &[NodeBase]) -> Self {
        let mut running = RunningPods::default();
        for (ni, node) in nodes.iter().enumerate() {
            for (pi, pod) in node.source.pods.iter().enumerate() {
                let at = (ni as u32, pi as u32);
                for (key, value) in &pod.labels {
                    running
                        .by_label
                        .entry(key.clone())
                        .or_default()
                        .entry(value.clone())
                        .or_default()
                        .push(at);
                }
                running.all.push(at);
                if !pod.pod_anti_affinity.is_empty() {
                    running.repelling.push(at);
                }
            }
        }
        running
    }

    /// The running pods that may match `selector`: those carrying one of the
    /// values of its narrowest `In` expression, or every pod when it has
    /// none. The caller still checks the selector.
    pub(in crate::scheduling::solver) fn candidates(&self, selector: &LabelSelector) -> Vec<PodAt> {
        let narrowest = selector
            .expressions
            .iter()
            .filter(|e| e.operator == Operator::In)
            .map(|e| {
                let lists: Vec<&Vec<PodAt>> = e
                    .values
                    .iter()
                    .filter_map(|v| self.by_label.get(&e.key).and_then(|m| m.get(v)))
                    .collect();
                (lists.iter().map(|l| l.len()).sum::<usize>(), lists)
            })
            .min_by_key(|(n, _)| *n);
        match narrowest {
            Some((_, lists)) => {
                let mut out: Vec<PodAt> = lists.into_iter().flatten().copied().collect();
                out.sort_unstable();
                out.dedup();
                out
            }
            None => self.all.clone(),
        }
    }
}

impl Model {
    /// Compiles the inverse anti-affinity groups of the running pods' required
    /// anti-affinity terms once, so a solve only counts their owners.
    pub(super) fn compile_inverse_groups(&mut self) {
        let mut inverse: Vec<(GroupKey, Vec<PodAt>)> = Vec::new();
        let mut index: HashMap<GroupKey, usize> = HashMap::new();
        for &at in &self.running.repelling {
            let Some(pod) = pod_at(&self.nodes, at) else {
                continue;
            };
            for term in &pod.pod_anti_affinity {
                let key = GroupKey {
                    kind: GroupKind::InverseAntiAffinity,
                    key: self.keys.id(labels::normalize(&term.topology_key)),
                    namespaces: NsMatch::resolve(
                        &term.namespaces,
                        &pod.namespace,
                        &self.namespace_labels,
                    ),
                    selector: term.selector.clone(),
                    filter: NodeFilter::default(),
                };
                let next = inverse.len();
                let i = *index.entry(key.clone()).or_insert(next);
                if i == next {
                    inverse.push((key, Vec::new()));
                }
                inverse[i].1.push(at);
            }
        }
        self.running.inverse = inverse;
    }
}

impl Model {
    /// How many running pods in `namespaces` that `selector` matches each
    /// node holds; worked out once per pair and kept, as the model never
    /// changes.
    pub(in crate::scheduling::solver) fn selected_counts(
        &self,
        namespaces: &NsMatch,
        selector: &LabelSelector,
    ) -> NodeCounts {
        let key = (namespaces.clone(), selector.clone());
        if let Some(hit) = self
            .running
            .selected
            .lock()
            .ok()
            .and_then(|memo| memo.get(&key).cloned())
        {
            return hit;
        }
        let mut counts: Vec<(u32, u32)> = Vec::new();
        for at in self.running.candidates(selector) {
            let Some(pod) = self.pod_at(at) else {
                continue;
            };
            if !namespaces.contains(&pod.namespace) || !selector.matches(&pod.labels) {
                continue;
            }
            match counts.last_mut() {
                Some((node, count)) if *node == at.0 => *count += 1,
                _ => counts.push((at.0, 1)),
            }
        }
        let counts = Arc::new(counts);
        if let Ok(mut memo) = self.running.selected.lock() {
            memo.insert(key, counts.clone());
        }
        counts
    }
}

/// The pod at `at`.
pub(in crate::scheduling::solver) fn pod_at(nodes: &[NodeBase], at: PodAt) -> Option<&Pod> {
    nodes
        .get(at.0 as usize)
        .and_then(|n| n.source.pods.get(at.1 as usize))
}
