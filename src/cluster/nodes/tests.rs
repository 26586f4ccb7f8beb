use super::*;
use serde_json::json;

fn pod(name: &str, node: Option<&str>, version: &str, cpu: &str) -> Arc<K8sPod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": version},
            "spec": {"nodeName": node,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running"},
        }))
        .unwrap(),
    )
}

fn node(name: &str, provider_id: &str, version: &str) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "resourceVersion": version,
                         "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"providerID": provider_id},
            "status": {"allocatable": {"cpu": "4"}, "capacity": {"cpu": "4"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap(),
    )
}

fn claim(name: &str, provider_id: Option<&str>) -> Arc<NodeClaim> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "resourceVersion": "1",
                         "labels": {"karpenter.sh/nodepool": "claimed"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
                     "requirements": []},
            "status": {"providerID": provider_id},
        }))
        .unwrap(),
    )
}

fn keys(records: &NodeRecords, name: &str) -> Vec<String> {
    records
        .get(name)
        .map(|r| r.pod_keys().map(ToString::to_string).collect())
        .unwrap_or_default()
}

/// Records `a` and `b` with one pod each.
fn two_nodes() -> NodeRecords {
    let mut records = NodeRecords::default();
    records.apply_node(node("a", "aws:///z/i-a", "1"));
    records.apply_node(node("b", "aws:///z/i-b", "1"));
    records.apply_pod(pod("on-a", Some("a"), "1", "1"));
    records.apply_pod(pod("on-b", Some("b"), "1", "1"));
    records
}

#[test]
fn a_pod_bound_joins_exactly_its_nodes_record() {
    let mut records = two_nodes();
    let before_b = records.get("b").unwrap().pods.clone();
    records.apply_pod(pod("new", None, "1", "1"));
    assert_eq!(keys(&records, "a"), ["ns/on-a"]);
    records.apply_pod(pod("new", Some("a"), "2", "1"));
    assert_eq!(keys(&records, "a"), ["ns/new", "ns/on-a"]);
    assert!(
        Arc::ptr_eq(&before_b, &records.get("b").unwrap().pods),
        "b untouched"
    );
}

#[test]
fn a_pod_deleted_or_finished_leaves_exactly_its_nodes_record() {
    let mut records = two_nodes();
    let before_b = records.get("b").unwrap().pods.clone();
    records.delete_pod(&pod("on-a", Some("a"), "1", "1"));
    assert!(keys(&records, "a").is_empty());
    assert!(records.get("a").is_some(), "the Node keeps its record");
    assert!(Arc::ptr_eq(&before_b, &records.get("b").unwrap().pods));

    let mut records = two_nodes();
    let mut finished = K8sPod::clone(&pod("on-a", Some("a"), "2", "1"));
    finished.status.as_mut().unwrap().phase = Some("Succeeded".into());
    records.apply_pod(Arc::new(finished));
    assert!(keys(&records, "a").is_empty());
    assert_eq!(keys(&records, "b"), ["ns/on-b"]);
}

#[test]
fn a_pod_moved_leaves_one_record_and_joins_the_other() {
    let mut records = two_nodes();
    records.apply_pod(pod("on-a", Some("b"), "2", "1"));
    assert!(keys(&records, "a").is_empty());
    assert_eq!(keys(&records, "b"), ["ns/on-a", "ns/on-b"]);
}

#[test]
fn a_pod_is_converted_once_per_version() {
    let mut records = two_nodes();
    let first = records
        .get("a")
        .unwrap()
        .converted_pods(&HashSet::new())
        .unwrap();
    assert_eq!(first[0].requests.cpu_millis, 1000);
    let cell =
        records.get("a").unwrap().pods[&crate::scheduling::PodKey::new("ns", "on-a")].clone();
    // The same version again keeps the conversion.
    records.apply_pod(pod("on-a", Some("a"), "1", "1"));
    assert!(Arc::ptr_eq(
        &cell,
        &records.get("a").unwrap().pods[&crate::scheduling::PodKey::new("ns", "on-a")]
    ));
    records.apply_pod(pod("on-a", Some("a"), "2", "2"));
    let again = records
        .get("a")
        .unwrap()
        .converted_pods(&HashSet::new())
        .unwrap();
    assert_eq!(again[0].requests.cpu_millis, 2000);
}

#[test]
fn pods_bound_before_their_node_is_seen_wait_in_its_record() {
    let mut records = NodeRecords::default();
    records.apply_pod(pod("early", Some("late"), "1", "1"));
    assert!(records.get("late").unwrap().node().is_none());
    records.apply_node(node("late", "aws:///z/i-l", "1"));
    assert_eq!(keys(&records, "late"), ["ns/early"]);
    records.delete_pod(&pod("early", Some("late"), "1", "1"));
    records.delete_node(&node("late", "aws:///z/i-l", "1"));
    assert!(records.get("late").is_none(), "nothing left to record");
}

#[test]
fn a_node_is_linked_to_its_claim_and_pool_whichever_comes_first() {
    let mut records = NodeRecords::default();
    records.apply_claim(claim("c1", Some("aws:///z/i-a")));
    records.apply_node(node("a", "aws:///z/i-a", "1"));
    let record = records.get("a").unwrap();
    assert_eq!(record.node_claim().unwrap().name_any(), "c1");
    assert_eq!(record.node_pool(), Some("default"));

    let mut records = NodeRecords::default();
    records.apply_node(node("a", "aws:///z/i-a", "1"));
    records.apply_claim(claim("c1", None));
    assert!(records.get("a").unwrap().node_claim().is_none());
    records.apply_claim(claim("c1", Some("aws:///z/i-a")));
    assert_eq!(
        records.get("a").unwrap().node_claim().unwrap().name_any(),
        "c1"
    );
    records.delete_claim(&claim("c1", Some("aws:///z/i-a")));
    assert!(records.get("a").unwrap().node_claim().is_none());
}

#[test]
fn a_relist_drops_what_is_gone_and_keeps_what_is_not() {
    let mut records = two_nodes();
    records.relist_pods([pod("on-b", Some("b"), "1", "1")]);
    assert!(keys(&records, "a").is_empty());
    assert_eq!(keys(&records, "b"), ["ns/on-b"]);
    records.relist_nodes([node("b", "aws:///z/i-b", "1")]);
    assert!(records.get("a").is_none());
    assert!(records.get("b").is_some());
}

#[test]
fn the_existing_node_carries_the_snapshots_deletion_and_the_records_pods() {
    let records = two_nodes();
    let record = records.get("a").unwrap();
    let mut flagged = Node::clone(record.node().unwrap());
    let converted = record.existing_node(&flagged, &HashSet::new()).unwrap();
    assert!(!converted.marked_for_deletion);
    assert_eq!(converted.pods.len(), 1);
    assert_eq!(converted.allocatable.cpu_millis, 4000);
    flagged.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
    assert!(
        record
            .existing_node(&flagged, &HashSet::new())
            .unwrap()
            .marked_for_deletion
    );
}

#[test]
fn claims_are_found_by_provider_id_with_their_node() {
    let mut records = two_nodes();
    records.apply_claim(claim("claim-a", Some("aws:///z/i-a")));
    records.apply_claim(claim("launching", Some("aws:///z/i-c")));
    records.apply_claim(claim("unlaunched", None));
    let found = records.claims_with_provider_id(|id| id != "aws:///z/i-b");
    let mut found: Vec<(String, Option<String>)> = found
        .iter()
        .map(|(c, n)| (c.name_any(), n.as_ref().map(|n| n.name_any())))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("claim-a".to_string(), Some("a".to_string())),
            ("launching".to_string(), None)
        ]
    );
    records.delete_claim(&claim("claim-a", Some("aws:///z/i-a")));
    assert!(
        records
            .claims_with_provider_id(|id| id.ends_with("i-a"))
            .is_empty()
    );
}

#[test]
fn claims_are_found_by_instance_until_they_go() {
    let mut records = two_nodes();
    records.apply_claim(claim("claim-a", Some("aws:///z/i-a")));
    records.apply_claim(claim("launching", Some("aws:///z/i-c")));
    let found = records.claims_of_instance("i-a");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0.name_any(), "claim-a");
    assert_eq!(
        found[0].1.as_ref().map(|n| n.name_any()),
        Some("a".to_string())
    );
    let launching = records.claims_of_instance("i-c");
    assert_eq!(launching.len(), 1);
    assert!(launching[0].1.is_none());
    assert!(records.claims_of_instance("i-b").is_empty());
    // A claim whose providerID changes moves in the index.
    records.apply_claim(claim("launching", Some("aws:///z/i-d")));
    assert!(records.claims_of_instance("i-c").is_empty());
    assert_eq!(records.claims_of_instance("i-d").len(), 1);
    records.delete_claim(&claim("claim-a", Some("aws:///z/i-a")));
    assert!(records.claims_of_instance("i-a").is_empty());
}
