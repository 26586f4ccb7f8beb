//! Conversion from Kubernetes API objects (`k8s_openapi`) into the
//! scheduler's plain data, with errors that name the object and field.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use thiserror::Error;

use super::input::ExistingNode;
use super::pod::{
    ContainerRequests, HostPort, LabelSelector, NamespaceScope, NodeInclusionPolicy, Pod,
    PodAffinityTerm, SelectorExpression, TopologySpreadConstraint, Weighted, WhenUnsatisfiable,
    effective_requests,
};
use super::requirements::{Operator, Requirement, RequirementError, Requirements};
use super::resources::{QuantityError, Resources};
use super::taints::{Taint, TaintEffect, Toleration};

/// Why a Kubernetes object could not be turned into scheduler input.
#[derive(Debug, Error)]
pub enum ConvertError {
    /// A resource quantity was malformed.
    #[error("{object}: {field}: {source}")]
    Quantity {
        /// `kind namespace/name`.
        object: String,
        /// Field path.
        field: String,
        /// The parse error.
        source: QuantityError,
    },
    /// A node-selector requirement was malformed.
    #[error("{object}: {field}: {source}")]
    Requirement {
        /// `kind namespace/name`.
        object: String,
        /// Field path.
        field: String,
        /// The error.
        source: RequirementError,
    },
    /// A field had a value outside its enum.
    #[error("{object}: {field}: {message}")]
    Invalid {
        /// `kind namespace/name`.
        object: String,
        /// Field path.
        field: String,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// A required part of the object is missing.
    #[error("{object}: {field} is missing")]
    Missing {
        /// `kind namespace/name`.
        object: String,
        /// Field path.
        field: String,
    },
}

/// A container's requests as Kubernetes defaults them: a resource with a
/// limit but no request is requested at its limit (how GPUs are usually asked for).
fn container_requests(
    object: &str,
    field: &str,
    given: Option<&core::ResourceRequirements>,
) -> Result<Resources, ConvertError> {
    let mut list = given.and_then(|r| r.limits.clone()).unwrap_or_default();
    list.extend(given.and_then(|r| r.requests.clone()).unwrap_or_default());
    resources(object, field, Some(&list))
}

fn resources(
    object: &str,
    field: &str,
    list: Option<&BTreeMap<String, Quantity>>,
) -> Result<Resources, ConvertError> {
    let Some(list) = list else {
        return Ok(Resources::zero());
    };
    Resources::parse(list.iter().map(|(k, v)| (k.as_str(), v.0.as_str()))).map_err(|source| {
        ConvertError::Quantity {
            object: object.to_string(),
            field: field.to_string(),
            source,
        }
    })
}

/// A Kubernetes label selector (of `object`, at `field`, for errors) in the
/// scheduler's terms.
pub fn label_selector(
    object: &str,
    field: &str,
    s: &meta::LabelSelector,
) -> Result<LabelSelector, ConvertError> {
    let mut out = LabelSelector::default();
    for (k, v) in s.match_labels.iter().flatten() {
        out.expressions.push(SelectorExpression {
            key: k.clone(),
            operator: Operator::In,
            values: vec![v.clone()],
        });
    }
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let operator = match e.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                return Err(ConvertError::Invalid {
                    object: object.to_string(),
                    field: format!("{field}.matchExpressions[{i}].operator"),
                    message: format!(
                        "{other:?} is not a label selector operator; use In, NotIn, Exists or DoesNotExist"
                    ),
                });
            }
        };
        out.expressions.push(SelectorExpression {
            key: e.key.clone(),
            operator,
            values: e.values.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

fn node_selector_term(
    object: &str,
    field: &str,
    exprs: Option<&Vec<core::NodeSelectorRequirement>>,
) -> Result<Requirements, ConvertError> {
    let mut out = Requirements::new();
    for (i, e) in exprs.into_iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        let err = |source| ConvertError::Requirement {
            object: object.to_string(),
            field: f.clone(),
            source,
        };
        let op = Operator::parse(&e.operator).map_err(err)?;
        out.add(
            Requirement::from_parts(&e.key, op, e.values.clone().unwrap_or_default())
                .map_err(err)?,
        );
    }
    Ok(out)
}

/// A term's `matchFields`. Kubernetes allows only `metadata.name` with `In`
/// or `NotIn`; anything else is an error here rather than a term that
/// silently matches nothing.
fn node_selector_fields(
    object: &str,
    field: &str,
    fields: Option<&Vec<core::NodeSelectorRequirement>>,
) -> Result<Requirements, ConvertError> {
    let mut out = Requirements::new();
    for (i, e) in fields.into_iter().flatten().enumerate() {
        let f = format!("{field}.matchFields[{i}]");
        let invalid = |message: String| ConvertError::Invalid {
            object: object.to_string(),
            field: f.clone(),
            message,
        };
        if e.key != "metadata.name" {
            return Err(invalid(format!(
                "key {:?} is not supported; matchFields only takes metadata.name",
                e.key
            )));
        }
        let op = Operator::parse(&e.operator).map_err(|source| ConvertError::Requirement {
            object: object.to_string(),
            field: f.clone(),
            source,
        })?;
        if !matches!(op, Operator::In | Operator::NotIn) {
            return Err(invalid(format!(
                "operator {op} is not supported; matchFields takes In or NotIn"
            )));
        }
        out.add(
            Requirement::from_parts(&e.key, op, e.values.clone().unwrap_or_default()).map_err(
                |source| ConvertError::Requirement {
                    object: object.to_string(),
                    field: f.clone(),
                    source,
                },
            )?,
        );
    }
    Ok(out)
}

fn affinity_term(
    object: &str,
    field: &str,
    t: &core::PodAffinityTerm,
    labels: &BTreeMap<String, String>,
) -> Result<PodAffinityTerm, ConvertError> {
    let mut sel = t
        .label_selector
        .as_ref()
        .map(|s| label_selector(object, &format!("{field}.labelSelector"), s))
        .transpose()?;
    if let Some(sel) = sel.as_mut() {
        for (keys, operator) in [
            (&t.match_label_keys, Operator::In),
            (&t.mismatch_label_keys, Operator::NotIn),
        ] {
            for key in keys.iter().flatten() {
                if let Some(v) = labels.get(key) {
                    sel.expressions.push(SelectorExpression {
                        key: key.clone(),
                        operator,
                        values: vec![v.clone()],
                    });
                }
            }
        }
    }
    let listed = t.namespaces.clone().unwrap_or_default();
    let namespaces = match &t.namespace_selector {
        None => NamespaceScope::Listed(listed),
        Some(ns)
            if ns.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && ns.match_expressions.as_ref().is_none_or(|m| m.is_empty()) =>
        {
            NamespaceScope::All
        }
        Some(ns) => NamespaceScope::Selected(
            listed,
            label_selector(object, &format!("{field}.namespaceSelector"), ns)?,
        ),
    };
    if t.topology_key.is_empty() {
        return Err(ConvertError::Missing {
            object: object.to_string(),
            field: format!("{field}.topologyKey"),
        });
    }
    Ok(PodAffinityTerm {
        selector: sel,
        namespaces,
        topology_key: t.topology_key.clone(),
    })
}

fn taint_effect(object: &str, field: &str, effect: &str) -> Result<TaintEffect, ConvertError> {
    TaintEffect::parse(effect).ok_or_else(|| ConvertError::Invalid {
        object: object.to_string(),
        field: field.to_string(),
        message: format!(
            "{effect:?} is not a taint effect; use NoSchedule, PreferNoSchedule or NoExecute"
        ),
    })
}

/// Converts a Kubernetes taint.
pub fn taint_from_k8s(object: &str, field: &str, t: &core::Taint) -> Result<Taint, ConvertError> {
    Ok(Taint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect: taint_effect(object, &format!("{field}.effect"), &t.effect)?,
    })
}

fn pod_spec(
    object: &str,
    meta: &meta::ObjectMeta,
    spec: &core::PodSpec,
) -> Result<Pod, ConvertError> {
    let labels = meta.labels.clone().unwrap_or_default();
    let mut containers = Vec::new();
    let mut host_ports = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let req = container_requests(
            object,
            &format!("spec.containers[{i}].resources"),
            c.resources.as_ref(),
        )?;
        containers.push(ContainerRequests {
            requests: req,
            restartable: false,
        });
    }
    let mut inits = Vec::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let req = container_requests(
            object,
            &format!("spec.initContainers[{i}].resources"),
            c.resources.as_ref(),
        )?;
        inits.push(ContainerRequests {
            requests: req,
            restartable: c.restart_policy.as_deref() == Some("Always"),
        });
    }
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        for p in c.ports.iter().flatten() {
            if let Some(port) = p.host_port.filter(|p| *p > 0) {
                host_ports.push(HostPort {
                    port,
                    protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                    host_ip: p.host_ip.clone().unwrap_or_default(),
                });
            }
        }
    }
    let overhead = resources(object, "spec.overhead", spec.overhead.as_ref())?;
    let mut requests = effective_requests(&containers, &inits, &Resources::zero());
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        let pod_level = resources(object, "spec.resources.requests", Some(pod_level))?;
        for name in ["cpu", "memory", "ephemeral-storage"] {
            let amount = pod_level.get(name);
            if amount > 0 {
                requests.set(name, amount);
            }
        }
    }
    requests.add(&overhead);

    let mut tolerations = Vec::new();
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let exists = match t.operator.as_deref() {
            None | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(ConvertError::Invalid {
                    object: object.to_string(),
                    field: format!("spec.tolerations[{i}].operator"),
                    message: format!("{other:?} is not a toleration operator; use Equal or Exists"),
                });
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(taint_effect(
                object,
                &format!("spec.tolerations[{i}].effect"),
                e,
            )?),
        };
        tolerations.push(Toleration {
            key: t.key.clone(),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
        });
    }

    let mut pod = Pod {
        namespace: meta
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string()),
        name: meta
            .name
            .clone()
            .or_else(|| meta.generate_name.clone())
            .unwrap_or_default(),
        labels: labels.clone(),
        requests,
        tolerations,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        host_ports,
        owner_kind: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.kind.clone()),
        ..Pod::default()
    };

    if let Some(aff) = &spec.affinity {
        if let Some(na) = &aff.node_affinity {
            if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
                for (i, term) in req.node_selector_terms.iter().enumerate() {
                    let field = format!(
                        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
                    );
                    pod.required_node_affinity.push(node_selector_term(
                        object,
                        &field,
                        term.match_expressions.as_ref(),
                    )?);
                    pod.required_node_fields.push(node_selector_fields(
                        object,
                        &field,
                        term.match_fields.as_ref(),
                    )?);
                }
                if pod.required_node_fields.iter().all(Requirements::is_empty) {
                    pod.required_node_fields.clear();
                }
            }
            for (i, p) in na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .enumerate()
            {
                let field = format!(
                    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"
                );
                let term =
                    node_selector_term(object, &field, p.preference.match_expressions.as_ref())?;
                pod.preferred_node_affinity.push(Weighted {
                    weight: p.weight,
                    term,
                });
            }
        }
        let sections = [
            (
                aff.pod_affinity.as_ref().map(|a| {
                    (
                        &a.required_during_scheduling_ignored_during_execution,
                        &a.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
                "podAffinity",
                false,
            ),
            (
                aff.pod_anti_affinity.as_ref().map(|a| {
                    (
                        &a.required_during_scheduling_ignored_during_execution,
                        &a.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
                "podAntiAffinity",
                true,
            ),
        ];
        for (section, name, is_anti) in sections {
            let Some((required, preferred)) = section else {
                continue;
            };
            for (i, t) in required.iter().flatten().enumerate() {
                let field = format!(
                    "spec.affinity.{name}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"
                );
                let term = affinity_term(object, &field, t, &labels)?;
                if is_anti {
                    pod.pod_anti_affinity.push(term)
                } else {
                    pod.pod_affinity.push(term)
                }
            }
            for (i, w) in preferred.iter().flatten().enumerate() {
                let field = format!(
                    "spec.affinity.{name}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm"
                );
                let term = Weighted {
                    weight: w.weight,
                    term: affinity_term(object, &field, &w.pod_affinity_term, &labels)?,
                };
                if is_anti {
                    pod.preferred_pod_anti_affinity.push(term)
                } else {
                    pod.preferred_pod_affinity.push(term)
                }
            }
        }
    }

    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        let field = format!("spec.topologySpreadConstraints[{i}]");
        let invalid = |f: &str, message: String| ConvertError::Invalid {
            object: object.to_string(),
            field: format!("{field}.{f}"),
            message,
        };
        let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                return Err(invalid(
                    "whenUnsatisfiable",
                    format!("{other:?} is not valid; use DoNotSchedule or ScheduleAnyway"),
                ));
            }
        };
        let policy = |f: &str, v: Option<&str>, default| match v {
            None => Ok(default),
            Some("Honor") => Ok(NodeInclusionPolicy::Honor),
            Some("Ignore") => Ok(NodeInclusionPolicy::Ignore),
            Some(other) => Err(invalid(
                f,
                format!("{other:?} is not valid; use Honor or Ignore"),
            )),
        };
        if c.max_skew < 1 {
            return Err(invalid(
                "maxSkew",
                format!("{} must be at least 1", c.max_skew),
            ));
        }
        pod.topology_spread.push(TopologySpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            when_unsatisfiable,
            selector: c
                .label_selector
                .as_ref()
                .map(|s| label_selector(object, &format!("{field}.labelSelector"), s))
                .transpose()?,
            min_domains: c.min_domains,
            node_affinity_policy: policy(
                "nodeAffinityPolicy",
                c.node_affinity_policy.as_deref(),
                NodeInclusionPolicy::Honor,
            )?,
            node_taints_policy: policy(
                "nodeTaintsPolicy",
                c.node_taints_policy.as_deref(),
                NodeInclusionPolicy::Ignore,
            )?,
            match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
        });
    }
    Ok(pod)
}

/// Converts a Kubernetes pod into the scheduler's pod: effective requests
/// (init containers, sidecars, overhead), tolerations, node selector and
/// affinity, pod (anti-)affinity, topology spread and host ports.
pub fn pod_from_k8s(pod: &core::Pod) -> Result<Pod, ConvertError> {
    let object = format!(
        "pod {}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    );
    let spec = pod.spec.as_ref().ok_or_else(|| ConvertError::Missing {
        object: object.clone(),
        field: "spec".into(),
    })?;
    pod_spec(&object, &pod.metadata, spec)
}

/// Converts a DaemonSet into the pod its template would create on each
/// node, for [`super::input::SchedulerInput::daemonsets`].
pub fn daemonset_pod_from_k8s(ds: &DaemonSet) -> Result<Pod, ConvertError> {
    let object = format!(
        "daemonset {}/{}",
        ds.metadata.namespace.as_deref().unwrap_or("default"),
        ds.metadata.name.as_deref().unwrap_or("")
    );
    let template = &ds.spec.template;
    let spec = template
        .spec
        .as_ref()
        .ok_or_else(|| ConvertError::Missing {
            object: object.clone(),
            field: "spec.template.spec".into(),
        })?;
    let mut meta = template.metadata.clone().unwrap_or_default();
    meta.namespace = ds.metadata.namespace.clone();
    meta.name = ds.metadata.name.clone();
    let mut pod = pod_spec(&object, &meta, spec)?;
    pod.owner_kind = Some("DaemonSet".to_string());
    Ok(pod)
}

/// Converts a Node and the pods bound to it.
///
/// A node labelled `karpenter.sh/initialized=true` is initialized for good,
/// as Karpenter's state node is once its NodeClaim is: if it later turns
/// NotReady, its `unreachable` taint keeps pods off it and the provisioner
/// launches for them. Any other node is initialized once it is `Ready` and
/// carries no known ephemeral taint (the node lifecycle controller removes
/// `node.kubernetes.io/not-ready` a few seconds after the node turns Ready);
/// until then its ephemeral taints are assumed gone.
pub fn node_from_k8s(node: &core::Node, pods: &[&core::Pod]) -> Result<ExistingNode, ConvertError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let object = format!("node {name}");
    let status = node.status.as_ref();
    let allocatable = resources(
        &object,
        "status.allocatable",
        status.and_then(|s| s.allocatable.as_ref()),
    )?;
    let capacity = resources(
        &object,
        "status.capacity",
        status.and_then(|s| s.capacity.as_ref()),
    )?;
    let mut taints = Vec::new();
    for (i, t) in node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        taints.push(taint_from_k8s(&object, &format!("spec.taints[{i}]"), t)?);
    }
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(crate::apis::labels::NODE_INITIALIZED_LABEL_KEY))
        .is_some_and(|v| v == "true");
    let initialized = labelled
        || (crate::apis::conditions::node_is_ready(node)
            && !taints
                .iter()
                .any(crate::scheduling::taints::is_known_ephemeral));
    Ok(ExistingNode {
        name,
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints,
        capacity,
        allocatable,
        pods: pods
            .iter()
            .map(|p| pod_from_k8s(p))
            .collect::<Result<_, _>>()?,
        initialized,
        marked_for_deletion: node.metadata.deletion_timestamp.is_some(),
    })
}

#[cfg(test)]
mod tests;
