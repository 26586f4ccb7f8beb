use super::*;
use serde_json::json;

fn node(name: &str) -> Arc<k8s_openapi::api::core::v1::Node> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "resourceVersion": "1"},
            "status": {"allocatable": {"cpu": "4"}, "capacity": {"cpu": "4"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap(),
    )
}

fn pod(name: &str, node: Option<&str>) -> Arc<K8sPod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": {"phase": if node.is_some() { "Running" } else { "Pending" }},
        }))
        .unwrap(),
    )
}

fn snapshot() -> ClusterSnapshot {
    ClusterSnapshot {
        nodes: vec![node("a"), node("b")],
        pods: vec![
            pod("on-a", Some("a")),
            pod("on-b", Some("b")),
            pod("lost", Some("gone")),
            pod("new", None),
        ],
        ..ClusterSnapshot::default()
    }
}

fn pods_of(input: &ClusterInput, node: &str) -> Vec<String> {
    let node = input
        .existing_nodes
        .iter()
        .find(|n| n.name == node)
        .unwrap();
    node.pods.iter().map(|p| p.name.clone()).collect()
}

#[test]
fn nodes_take_their_bound_pods_and_a_node_name_naming_no_node_is_a_problem() {
    let input = cluster_input(&snapshot(), &ConvertedPods::default(), &HashSet::new());
    assert_eq!(pods_of(&input, "a"), ["on-a"]);
    assert_eq!(pods_of(&input, "b"), ["on-b"]);
    assert_eq!(input.pods.len(), 1, "the unbound pod is to be placed");
    assert!(matches!(
        input.problems.as_slice(),
        [InputError::UnknownNode { pod, node }] if pod == "lost" && node == "gone"
    ));
}

#[test]
fn excluded_nodes_are_left_out_with_their_pods() {
    let exclude = HashSet::from(["a".to_string(), "gone".to_string()]);
    let input = cluster_input(&snapshot(), &ConvertedPods::default(), &exclude);
    let names: Vec<&str> = input
        .existing_nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["b"]);
    assert!(input.problems.is_empty(), "{:?}", input.problems);
}

#[test]
fn records_from_the_state_and_a_newer_snapshot_agree() {
    let mut snapshot = snapshot();
    let records = NodeRecords::of(&snapshot.nodes, &snapshot.node_claims, &snapshot.pods);
    snapshot.state_nodes = Some(records.all());
    // Bound in the snapshot, not yet in the records: counted once, on its node.
    snapshot.pods.push(pod("late", Some("a")));
    let input = cluster_input(&snapshot, &ConvertedPods::default(), &HashSet::new());
    assert_eq!(pods_of(&input, "a"), ["on-a", "late"]);
    assert_eq!(pods_of(&input, "b"), ["on-b"]);
}

#[test]
fn a_pod_nominated_to_a_registered_node_claim_counts_on_its_node() {
    let mut snapshot = snapshot();
    let claim: NodeClaim = serde_json::from_value(json!({
        "metadata": {"name": "claim-a"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []},
        "status": {"nodeName": "a"},
    }))
    .unwrap();
    snapshot.node_claims.push(Arc::new(claim));
    let waiting = pod("waiting", None);
    snapshot
        .nominated
        .insert(pod_key(&waiting), "claim-a".to_string());
    snapshot.pods.push(waiting);
    let input = cluster_input(&snapshot, &ConvertedPods::default(), &HashSet::new());
    assert_eq!(pods_of(&input, "a"), ["on-a", "waiting"]);
    assert!(
        input.in_flight.is_empty(),
        "claim-a is represented by node a"
    );
    let pending: Vec<&str> = input.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pending, ["new"], "the nominated pod is not placed again");
}
