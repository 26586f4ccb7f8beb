//! DaemonSet → one pod per eligible Node.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{create_pod, delete_pod, is_active, live, owned, pods, record, storage, write_status};
use crate::State;
use crate::meta;

const MANAGER: &str = "daemonset-controller";

/// Tolerations the real controller adds to every daemon pod.
fn default_tolerations() -> Vec<Value> {
    let toleration =
        |key: &str, effect: &str| json!({"key": key, "operator": "Exists", "effect": effect});
    vec![
        toleration("node.kubernetes.io/not-ready", "NoExecute"),
        toleration("node.kubernetes.io/unreachable", "NoExecute"),
        toleration("node.kubernetes.io/disk-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/memory-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/pid-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
}

fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = meta::text(toleration, "/effect");
    if !effect.is_empty() && effect != meta::text(taint, "/effect") {
        return false;
    }
    let key = meta::text(toleration, "/key");
    match meta::text(toleration, "/operator") {
        "Exists" => key.is_empty() || key == meta::text(taint, "/key"),
        _ => {
            key == meta::text(taint, "/key")
                && meta::text(toleration, "/value") == meta::text(taint, "/value")
        }
    }
}

/// One `nodeSelectorTerm` against a node's labels and name.
fn term_matches(term: &Value, node: &Value) -> bool {
    let requirement_matches = |r: &Value, actual: Option<&str>| {
        let values: Vec<&str> = r
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let number = |s: &str| s.parse::<i64>().ok();
        match meta::text(r, "/operator") {
            "In" => actual.is_some_and(|a| values.contains(&a)),
            "NotIn" => !actual.is_some_and(|a| values.contains(&a)),
            "Exists" => actual.is_some(),
            "DoesNotExist" => actual.is_none(),
            "Gt" => actual
                .and_then(number)
                .zip(values.first().and_then(|v| number(v)))
                .is_some_and(|(a, v)| a > v),
            "Lt" => actual
                .and_then(number)
                .zip(values.first().and_then(|v| number(v)))
                .is_some_and(|(a, v)| a < v),
            _ => false,
        }
    };
    let list = |key: &str| {
        term.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    list("matchExpressions").iter().all(|r| {
        let key = meta::text(r, "/key");
        requirement_matches(
            r,
            node.pointer("/metadata/labels")
                .and_then(|l| l.get(key))
                .and_then(Value::as_str),
        )
    }) && list("matchFields").iter().all(|r| {
        let actual = (meta::text(r, "/key") == "metadata.name").then(|| meta::name(node));
        requirement_matches(r, actual)
    })
}

/// Whether a daemon pod of `template` should run on `node`.
fn should_run(template: &Value, node: &Value) -> bool {
    if meta::is_being_deleted(node) {
        return false;
    }
    let selector = template
        .pointer("/spec/nodeSelector")
        .and_then(Value::as_object);
    let labels = node.pointer("/metadata/labels").and_then(Value::as_object);
    if let Some(selector) = selector
        && !selector
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    {
        return false;
    }
    if let Some(terms) = template
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
        && !terms.iter().any(|t| term_matches(t, node))
    {
        return false;
    }
    let mut tolerations = template
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    tolerations.extend(default_tolerations());
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|t| matches!(meta::text(t, "/effect"), "NoSchedule" | "NoExecute"))
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}

/// The node a daemon pod is for: its binding, or its `metadata.name` affinity.
fn target_node(pod: &Value) -> String {
    let bound = meta::text(pod, "/spec/nodeName");
    if !bound.is_empty() {
        return bound.to_string();
    }
    pod.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

pub fn reconcile(state: &mut State, namespace: &str, name: &str) {
    let sets = storage("apps", "daemonsets");
    let Some(set) = live(state, &sets, namespace, name) else {
        return;
    };
    let template = set
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let nodes: Vec<Arc<Value>> = state
        .store
        .list(&storage("", "nodes"), None)
        .cloned()
        .collect();
    let eligible: Vec<String> = nodes
        .iter()
        .filter(|n| should_run(&template, n))
        .map(|n| meta::name(n).to_string())
        .collect();
    let mut by_node: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
    for pod in owned(state, &set, &pods())
        .into_iter()
        .filter(|p| is_active(p))
    {
        by_node.entry(target_node(&pod)).or_default().push(pod);
    }
    let generation = meta::int(&set, "/metadata/generation", 1).to_string();
    for node in &eligible {
        if by_node.contains_key(node) {
            continue;
        }
        let mut pod_template = template.clone();
        if let Some(spec) = pod_template.get_mut("spec").filter(|s| s.is_object()) {
            let mut tolerations = spec
                .get("tolerations")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for toleration in default_tolerations() {
                if !tolerations.contains(&toleration) {
                    tolerations.push(toleration);
                }
            }
            spec["tolerations"] = Value::Array(tolerations);
            if !spec.get("affinity").is_some_and(Value::is_object) {
                spec["affinity"] = json!({});
            }
            spec["affinity"]["nodeAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}],
            }});
        }
        if let Some(pod) = create_pod(
            state,
            &set,
            &pod_template,
            None,
            &[("pod-template-generation", generation.clone())],
            MANAGER,
        ) {
            record(
                state,
                &set,
                "Normal",
                "SuccessfulCreate",
                &format!("Created pod: {pod}"),
                MANAGER,
            );
        }
    }
    for (node, node_pods) in &by_node {
        let keep = usize::from(eligible.contains(node));
        for pod in node_pods.iter().skip(keep) {
            delete_pod(state, &set, meta::name(pod), MANAGER);
        }
    }
    let active: Vec<Arc<Value>> = owned(state, &set, &pods())
        .into_iter()
        .filter(|p| is_active(p))
        .collect();
    let scheduled = active
        .iter()
        .filter(|p| eligible.contains(&target_node(p)))
        .count() as i64;
    let ready = active.iter().filter(|p| meta::is_pod_ready(p)).count() as i64;
    let desired = eligible.len() as i64;
    let misscheduled = active.len() as i64 - scheduled;
    let mut status = json!({
        "observedGeneration": meta::int(&set, "/metadata/generation", 1),
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": scheduled,
        "numberMisscheduled": misscheduled,
        "numberReady": ready,
        "updatedNumberScheduled": scheduled,
        "numberAvailable": ready,
    });
    if desired - ready > 0 {
        status["numberUnavailable"] = json!(desired - ready);
    }
    let Some(set) = live(state, &sets, namespace, name) else {
        return;
    };
    write_status(state, &sets, &set, status, MANAGER);
}
