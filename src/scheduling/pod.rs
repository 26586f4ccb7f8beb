//! The scheduler's compact pod: only what placement depends on.

use std::collections::BTreeMap;

use super::pod_key::PodKey;
use super::requirements::{Operator, Requirements};
use super::resources::Resources;
use super::taints::Toleration;

/// One expression of a label selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SelectorExpression {
    /// Label key.
    pub key: String,
    /// In, NotIn, Exists or DoesNotExist.
    pub operator: Operator,
    /// Values for In/NotIn.
    pub values: Vec<String>,
}

/// A Kubernetes label selector (`matchLabels` folded into `In` expressions).
/// The empty selector matches every pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// All must hold.
    pub expressions: Vec<SelectorExpression>,
}

impl LabelSelector {
    /// Selects pods carrying every one of `labels`.
    pub fn match_labels(labels: &[(&str, &str)]) -> Self {
        LabelSelector {
            expressions: labels
                .iter()
                .map(|(k, v)| SelectorExpression {
                    key: k.to_string(),
                    operator: Operator::In,
                    values: vec![v.to_string()],
                })
                .collect(),
        }
    }

    /// Whether `labels` satisfy the selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.expressions.iter().all(|e| {
            let value = labels.get(&e.key);
            match e.operator {
                Operator::In => value.is_some_and(|v| e.values.contains(v)),
                Operator::NotIn => value.is_none_or(|v| !e.values.contains(v)),
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
                // Label selectors have no numeric operators; never matches.
                _ => false,
            }
        })
    }
}

/// Which namespaces an affinity term looks at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NamespaceScope {
    /// The listed namespaces (empty list and no selector means the pod's own).
    Listed(Vec<String>),
    /// Every namespace (an empty `namespaceSelector`).
    All,
    /// The listed namespaces plus those whose labels match the selector.
    Selected(Vec<String>, LabelSelector),
}

/// A pod affinity or anti-affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// Pods the term is about; `None` selects no pod.
    pub selector: Option<LabelSelector>,
    /// Namespaces to look in.
    pub namespaces: NamespaceScope,
    /// Node label defining the topology domain (zone, hostname, ...).
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// A term over the pod's own namespace.
    pub fn new(selector: LabelSelector, topology_key: &str) -> Self {
        PodAffinityTerm {
            selector: Some(selector),
            namespaces: NamespaceScope::Listed(Vec::new()),
            topology_key: topology_key.to_string(),
        }
    }
}

/// A preferred term with its weight (1–100).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Weighted<T> {
    /// Higher weights are honoured longer.
    pub weight: i32,
    /// The term.
    pub term: T,
}

/// `whenUnsatisfiable` of a topology spread constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenUnsatisfiable {
    /// Hard constraint.
    DoNotSchedule,
    /// Preference: relaxed if it cannot be met.
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeInclusionPolicy {
    /// Only nodes the pod could use count.
    Honor,
    /// All nodes count.
    Ignore,
}

/// A topology spread constraint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TopologySpreadConstraint {
    /// Maximum allowed difference between domains.
    pub max_skew: i32,
    /// Node label defining the domains.
    pub topology_key: String,
    /// Hard or soft.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Pods counted; `None` counts none.
    pub selector: Option<LabelSelector>,
    /// Minimum number of eligible domains.
    pub min_domains: Option<i32>,
    /// Default Honor.
    pub node_affinity_policy: NodeInclusionPolicy,
    /// Default Ignore.
    pub node_taints_policy: NodeInclusionPolicy,
    /// Pod label keys whose values are added to the selector.
    pub match_label_keys: Vec<String>,
}

impl TopologySpreadConstraint {
    /// A hard constraint with Kubernetes' default policies.
    pub fn new(topology_key: &str, max_skew: i32, selector: LabelSelector) -> Self {
        TopologySpreadConstraint {
            max_skew,
            topology_key: topology_key.to_string(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            selector: Some(selector),
            min_domains: None,
            node_affinity_policy: NodeInclusionPolicy::Honor,
            node_taints_policy: NodeInclusionPolicy::Ignore,
            match_label_keys: Vec::new(),
        }
    }
}

/// A host port a container binds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// Port number.
    pub port: i32,
    /// TCP, UDP or SCTP.
    pub protocol: String,
    /// Host IP; empty or `0.0.0.0` means all addresses.
    pub host_ip: String,
}

impl HostPort {
    /// Whether two bindings would collide on one node.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (wildcard(&self.host_ip)
                || wildcard(&other.host_ip)
                || self.host_ip == other.host_ip)
    }
}

/// A pod as the scheduler needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels (for affinity and spread selectors).
    pub labels: BTreeMap<String, String>,
    /// Effective requests (see [`effective_requests`]); the pod slot is added by the scheduler.
    pub requests: Resources,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: OR of terms, each an AND of requirements.
    pub required_node_affinity: Vec<Requirements>,
    /// `matchFields` of each required node affinity term, index for index
    /// with `required_node_affinity` (empty when no term has any). The only
    /// field is `metadata.name`: it picks existing nodes by name, and since a
    /// new node has no name yet, Karpenter does not provision for such pods.
    pub required_node_fields: Vec<Requirements>,
    /// Preferred node affinity terms.
    pub preferred_node_affinity: Vec<Weighted<Requirements>>,
    /// Required pod affinity.
    pub pod_affinity: Vec<PodAffinityTerm>,
    /// Preferred pod affinity.
    pub preferred_pod_affinity: Vec<Weighted<PodAffinityTerm>>,
    /// Required pod anti-affinity.
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    /// Preferred pod anti-affinity.
    pub preferred_pod_anti_affinity: Vec<Weighted<PodAffinityTerm>>,
    /// Topology spread constraints.
    pub topology_spread: Vec<TopologySpreadConstraint>,
    /// Host ports bound.
    pub host_ports: Vec<HostPort>,
    /// Kind of the controlling owner (`ReplicaSet`, `DaemonSet`, ...).
    pub owner_kind: Option<String>,
}

impl Pod {
    /// A pod with a name and requests and nothing else.
    pub fn new(namespace: &str, name: &str, requests: Resources) -> Self {
        Pod {
            namespace: namespace.to_string(),
            name: name.to_string(),
            requests,
            ..Pod::default()
        }
    }

    /// Builder: adds a label.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Whether a DaemonSet controls the pod: its requests are the
    /// DaemonSet's overhead on its node, kept there whether or not the pod
    /// has been created yet (the converted form of
    /// `crate::cluster::pods::owned_by_daemon_set`).
    pub fn owned_by_daemon_set(&self) -> bool {
        self.owner_kind.as_deref() == Some("DaemonSet")
    }

    /// The pod's key: how errors and placements refer to the pod.
    pub fn key(&self) -> PodKey {
        PodKey::new(self.namespace.as_str(), self.name.as_str())
    }
}

/// One container's requests, for [`effective_requests`].
#[derive(Clone, Debug, Default)]
pub struct ContainerRequests {
    /// The container's requests.
    pub requests: Resources,
    /// For init containers: `restartPolicy: Always` (a sidecar).
    pub restartable: bool,
}

/// Kubernetes' pod request formula: the larger of (app containers + sidecars)
/// and the peak during init (each ordinary init container plus the sidecars
/// started before it), plus the pod overhead.
pub fn effective_requests(
    containers: &[ContainerRequests],
    init_containers: &[ContainerRequests],
    overhead: &Resources,
) -> Resources {
    let mut running = Resources::zero();
    for c in containers {
        running.add(&c.requests);
    }
    let mut sidecars = Resources::zero();
    let mut init_peak = Resources::zero();
    for c in init_containers {
        if c.restartable {
            sidecars.add(&c.requests);
            running.add(&c.requests);
            init_peak.max_with(&sidecars);
        } else {
            init_peak.max_with(&c.requests.plus(&sidecars));
        }
    }
    running.max_with(&init_peak);
    running.add(overhead);
    running
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(cpu: i64, mem: i64, restartable: bool) -> ContainerRequests {
        ContainerRequests {
            requests: Resources::cpu_memory(cpu, mem),
            restartable,
        }
    }

    #[test]
    fn init_containers_take_the_max_and_sidecars_add() {
        // Plain init larger than the app: the init peak wins.
        let r = effective_requests(
            &[c(500, 100, false)],
            &[c(2000, 50, false)],
            &Resources::zero(),
        );
        assert_eq!(r, Resources::cpu_memory(2000, 100));
        // Sidecar runs alongside the app and the later init container.
        let r = effective_requests(
            &[c(500, 100, false)],
            &[c(100, 10, true), c(1000, 10, false)],
            &Resources::cpu_memory(50, 0),
        );
        // app+sidecar = 600; init peak = 1000 + 100 = 1100; + overhead 50.
        assert_eq!(r.cpu_millis, 1150);
        assert_eq!(r.memory, 110);
        // Sum of inits is NOT used (sequential).
        let r = effective_requests(
            &[c(100, 0, false)],
            &[c(300, 0, false), c(300, 0, false)],
            &Resources::zero(),
        );
        assert_eq!(r.cpu_millis, 300);
    }

    #[test]
    fn selectors_and_host_ports() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        assert!(LabelSelector::match_labels(&[("app", "web")]).matches(&labels));
        assert!(!LabelSelector::match_labels(&[("app", "db")]).matches(&labels));
        assert!(LabelSelector::default().matches(&labels));
        let a = HostPort {
            port: 80,
            protocol: "TCP".into(),
            host_ip: String::new(),
        };
        let b = HostPort {
            port: 80,
            protocol: "TCP".into(),
            host_ip: "10.0.0.1".into(),
        };
        let udp = HostPort {
            port: 80,
            protocol: "UDP".into(),
            host_ip: String::new(),
        };
        assert!(a.conflicts(&b));
        assert!(!a.conflicts(&udp));
    }
}
