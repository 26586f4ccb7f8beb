//! Topology groups: the pod counts per domain behind topology spread, pod
//! affinity and pod anti-affinity (Karpenter's `TopologyGroup`), kept
//! incrementally so a placement never rescans placed pods.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::scheduling::index::{Ids, Reqs};
use crate::scheduling::pod::{LabelSelector, NamespaceScope};
use crate::scheduling::requirements::Operator;
use crate::scheduling::taints::{Taint, Toleration, first_untolerated};

/// What a group constrains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum GroupKind {
    Spread {
        max_skew: i32,
        min_domains: Option<i32>,
        honor: bool,
    },
    Affinity,
    AntiAffinity,
    /// Domains where owners of a required anti-affinity term live; pods the
    /// term selects must avoid them.
    InverseAntiAffinity,
}

/// Which namespaces a group counts pods in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NsMatch {
    All,
    Set(Vec<String>),
}

impl NsMatch {
    pub(crate) fn resolve(
        scope: &NamespaceScope,
        own: &str,
        namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> NsMatch {
        match scope {
            NamespaceScope::All => NsMatch::All,
            NamespaceScope::Listed(list) if list.is_empty() => NsMatch::Set(vec![own.to_string()]),
            NamespaceScope::Listed(list) => {
                let mut v = list.clone();
                v.sort();
                v.dedup();
                NsMatch::Set(v)
            }
            NamespaceScope::Selected(list, selector) => {
                let mut v = list.clone();
                for (ns, labels) in namespace_labels {
                    if selector.matches(labels) {
                        v.push(ns.clone());
                    }
                }
                v.sort();
                v.dedup();
                NsMatch::Set(v)
            }
        }
    }

    pub(crate) fn contains(&self, ns: &str) -> bool {
        match self {
            NsMatch::All => true,
            NsMatch::Set(v) => v.iter().any(|n| n == ns),
        }
    }
}

/// Which nodes a spread constraint counts, and which domains it spreads over
/// (`nodeAffinityPolicy` and `nodeTaintsPolicy` set to Honor; Karpenter's
/// `TopologyNodeFilter`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct NodeFilter {
    /// The pod's node selector joined with each required node affinity term:
    /// a node matches when it is compatible with any of them.
    pub terms: Option<Vec<Reqs>>,
    pub tolerations: Option<Vec<Toleration>>,
}

impl NodeFilter {
    pub(crate) fn is_empty(&self) -> bool {
        self.terms
            .as_ref()
            .is_none_or(|t| t.iter().all(|r| r.items.is_empty()))
            && self.tolerations.is_none()
    }

    pub(crate) fn admits_taints(&self, taints: &[Taint]) -> bool {
        self.tolerations
            .as_ref()
            .is_none_or(|tol| first_untolerated(taints, tol, false).is_none())
    }

    /// Whether a node (or NodePool, or claim) with these requirements is
    /// compatible with one of the terms. A key the node does not define
    /// fails a term that needs it, unless `undefined_ok` says its value is
    /// still open (a well-known label the instance type decides).
    pub(crate) fn admits_reqs(
        &self,
        reqs: &Reqs,
        values: &impl Ids,
        undefined_ok: impl Fn(u32) -> bool,
    ) -> bool {
        let Some(terms) = &self.terms else {
            return true;
        };
        let number = |v: &u32| values.number(*v);
        terms.iter().any(|term| {
            term.items.iter().all(|f| match reqs.get(f.key) {
                Some(r) => r.set.intersects(&f.set, &number),
                None => {
                    matches!(f.set.operator(), Operator::NotIn | Operator::DoesNotExist)
                        || undefined_ok(f.key)
                }
            })
        })
    }
}

/// Identity of a group: pods whose constraints are equal share one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GroupKey {
    pub kind: GroupKind,
    pub key: u32,
    pub namespaces: NsMatch,
    pub selector: Option<LabelSelector>,
    pub filter: NodeFilter,
}

/// A topology group with its counts.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub id: GroupKey,
    /// True when the key is `kubernetes.io/hostname`: counts live on each node/claim.
    pub hostname: bool,
    /// Pod counts per domain (non-hostname keys).
    pub counts: HashMap<u32, i32>,
    /// Sum over all domains.
    pub total: i64,
    /// For spreads that honor node affinity or taints: the domains of the
    /// nodes and NodePools the filter admits. Other domains neither count
    /// towards the skew nor take the pod.
    pub eligible_domains: Option<HashSet<u32>>,
}

impl Group {
    pub(crate) fn new(id: GroupKey, hostname: bool) -> Self {
        Group {
            id,
            hostname,
            counts: HashMap::new(),
            total: 0,
            eligible_domains: None,
        }
    }

    /// Whether the group counts a pod with these labels in this namespace.
    pub(crate) fn selects(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.id.namespaces.contains(namespace)
            && self.id.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    pub(crate) fn count(&self, domain: u32) -> i32 {
        self.counts.get(&domain).copied().unwrap_or(0)
    }
}

/// Per-node counts for hostname-keyed groups.
pub(crate) fn host_count(counts: &[(u32, i32)], group: u32) -> i32 {
    counts
        .iter()
        .find(|(g, _)| *g == group)
        .map(|(_, c)| *c)
        .unwrap_or(0)
}

pub(crate) fn bump_host_count(counts: &mut Vec<(u32, i32)>, group: u32, by: i32) {
    match counts.iter_mut().find(|(g, _)| *g == group) {
        Some((_, c)) => *c += by,
        None => counts.push((group, by)),
    }
}
