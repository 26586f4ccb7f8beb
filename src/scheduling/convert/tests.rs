use super::*;

fn pod_json(spec: serde_json::Value) -> core::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
        "spec": spec
    }))
    .unwrap()
}

#[test]
fn converts_requests_affinity_and_spread() {
    let pod = pod_json(serde_json::json!({
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                        "ports": [{"containerPort": 80, "hostPort": 8080}]}],
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "init", "resources": {"requests": {"cpu": "2"}}}
        ],
        "overhead": {"cpu": "10m"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]}]}
            ]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]}
        },
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}}]
    }));
    let p = pod_from_k8s(&pod).unwrap();
    assert_eq!(p.key(), "ns/p");
    // max(500 + 100 sidecar, 2000 + 100) + 10 overhead
    assert_eq!(p.requests.cpu_millis, 2110);
    assert_eq!(p.requests.memory, 1 << 30);
    assert_eq!(p.host_ports[0].port, 8080);
    assert_eq!(p.tolerations[0].effect, Some(TaintEffect::NoSchedule));
    assert!(
        p.required_node_affinity[0]
            .get("karpenter.k8s.aws/instance-cpu")
            .unwrap()
            .has("4")
    );
    assert_eq!(p.pod_anti_affinity.len(), 1);
    assert_eq!(
        p.topology_spread[0].when_unsatisfiable,
        WhenUnsatisfiable::ScheduleAnyway
    );
}

#[test]
fn bad_fields_are_named() {
    let pod = pod_json(serde_json::json!({
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]
    }));
    let err = pod_from_k8s(&pod).unwrap_err().to_string();
    assert!(
        err.contains("pod ns/p") && err.contains("spec.containers[0].resources"),
        "{err}"
    );
    let pod = pod_json(serde_json::json!({
        "containers": [{"name": "a"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}]}}}
    }));
    let err = pod_from_k8s(&pod).unwrap_err().to_string();
    assert!(
        err.contains("nodeSelectorTerms[0].matchExpressions[0]"),
        "{err}"
    );
    let no_spec: core::Pod =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "x"}})).unwrap();
    assert!(
        pod_from_k8s(&no_spec)
            .unwrap_err()
            .to_string()
            .contains("spec is missing")
    );
}

#[test]
fn match_fields_are_read_and_only_metadata_name_is_accepted() {
    let with_fields = |key: &str, operator: &str| {
        pod_json(serde_json::json!({
            "containers": [{"name": "a"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
                {"matchFields": [{"key": key, "operator": operator, "values": ["node-1"]}]}
            ]}}}
        }))
    };
    let p = pod_from_k8s(&with_fields("metadata.name", "In")).unwrap();
    assert_eq!(p.required_node_affinity.len(), 2);
    assert_eq!(p.required_node_fields.len(), 2);
    assert!(p.required_node_fields[0].is_empty());
    let name = p.required_node_fields[1].get("metadata.name").unwrap();
    assert!(name.has("node-1") && !name.has("node-2"));
    let err = pod_from_k8s(&with_fields("metadata.uid", "In"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nodeSelectorTerms[1].matchFields[0]") && err.contains("metadata.name"),
        "{err}"
    );
    let err = pod_from_k8s(&with_fields("metadata.name", "Exists"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("In or NotIn"), "{err}");
    // Without matchFields, no per-term list is kept.
    let plain = pod_json(serde_json::json!({"containers": [{"name": "a"}]}));
    assert!(
        pod_from_k8s(&plain)
            .unwrap()
            .required_node_fields
            .is_empty()
    );
}

#[test]
fn converts_nodes_and_daemonsets() {
    let node: core::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"},
                   "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap();
    let n = node_from_k8s(&node, &[]).unwrap();
    assert!(n.initialized);
    assert_eq!(n.allocatable.cpu_millis, 3920);
    assert_eq!(n.taints[0].effect, TaintEffect::NoSchedule);
    // Ready, but the node lifecycle controller has not yet removed its
    // not-ready taint: still initializing, as Karpenter's initialization
    // would have it.
    let tainted: core::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n2"},
        "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "4"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap();
    assert!(!node_from_k8s(&tainted, &[]).unwrap().initialized);
    // Initialized once, then unreachable: still initialized, so its
    // taint keeps pods off it.
    let lost: core::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n3", "labels": {"karpenter.sh/initialized": "true"}},
        "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "4"},
                   "conditions": [{"type": "Ready", "status": "Unknown"}]}
    }))
    .unwrap();
    assert!(node_from_k8s(&lost, &[]).unwrap().initialized);
    let ds: DaemonSet = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "logs", "namespace": "kube-system"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}
    }))
    .unwrap();
    let p = daemonset_pod_from_k8s(&ds).unwrap();
    assert_eq!(p.owner_kind.as_deref(), Some("DaemonSet"));
    assert_eq!(p.requests.cpu_millis, 100);
}
