//! `simulate` on a cluster as `kubectl get … -A -o yaml` prints it
//! (`examples/snapshot/cluster.yaml`): the pods that exist are taken as they
//! are, only the pending ones are placed, existing nodes and in-flight
//! NodeClaims are capacity, and the NodePool's limits count them.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::extensions::Extensions;
use nodewright::sim::plan::ClusterSummary;
use nodewright::sim::{Manifests, Plan, SimulateOptions, simulate};
use nodewright_host::HostConfig;

const SNAPSHOT: &str = "examples/snapshot/cluster.yaml";
const PENDING_WEB: [&str; 2] = ["shop/web-6d8f7b9c5d-lp9rv", "shop/web-6d8f7b9c5d-zc8mk"];
const IN_FLIGHT: &str = "general-purpose-t2mfn";

fn snapshot_text() -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT)).unwrap()
}

/// Plans YAML streams as `simulate` would, each named by its origin.
fn plan(streams: &[(&str, &str)]) -> Plan {
    let mut manifests = Manifests::default();
    for (origin, text) in streams {
        manifests.add_yaml(origin, text).unwrap();
    }
    let catalog = Arc::new(Catalog::embedded("us-east-1").unwrap());
    let extensions = Arc::new(Extensions::new(HostConfig::default()).unwrap());
    let provider = InstanceTypeProvider::new(catalog, extensions, Arc::default());
    nodewright::sim::plan(manifests, &provider, false).unwrap()
}

/// Every pod the plan mentions: placed on a new NodeClaim, on an existing
/// node or in-flight NodeClaim, or unschedulable.
fn planned_pods(plan: &Plan) -> BTreeSet<String> {
    plan.node_claims
        .iter()
        .flat_map(|c| c.pods.iter().cloned())
        .chain(
            plan.existing_nodes
                .iter()
                .flat_map(|n| n.pods.iter().cloned()),
        )
        .chain(plan.unschedulable.iter().map(|u| u.pod.clone()))
        .collect()
}

fn vcpus(catalog: &Catalog, instance_type: &str) -> u32 {
    catalog
        .instance_types()
        .iter()
        .find(|t| t.instance_type == instance_type)
        .unwrap_or_else(|| panic!("{instance_type} not in the catalog"))
        .v_cpu_info
        .default_v_cpus
}

#[test]
fn a_kubectl_snapshot_places_only_its_pending_pods() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let plan = simulate(&SimulateOptions {
        paths: vec![root.join(SNAPSHOT)],
        region: "us-east-1".to_string(),
        ignore_preferences: false,
        node_overlay: false,
        static_capacity: false,
    })
    .unwrap();

    // Only the pending pods are placed: the running ones are not placed
    // again, the finished Job pod is ignored, and no workload (coredns, web,
    // its ReplicaSets, db, the Job) is expanded into pods of its own.
    let expected: BTreeSet<String> = PENDING_WEB
        .iter()
        .chain(&["shop/db-1"])
        .map(|p| p.to_string())
        .collect();
    assert_eq!(planned_pods(&plan), expected, "{plan:#?}");
    assert_eq!(
        plan.cluster,
        ClusterSummary {
            nodes: 3,
            in_flight_node_claims: 1,
            // 3 aws-node, 3 kube-proxy, 2 coredns, db-0 and 3 web pods.
            bound_pods: 12,
            pending_pods: 3,
            expanded_pods: 0,
            // The Succeeded pod of Job migrate-schema.
            ignored_pods: 1,
        }
    );

    // The NodeClaim that launched and has no Node yet takes a web pod (its
    // 3920m hold one 3-CPU pod beside the DaemonSets) before a new NodeClaim
    // is opened; the registered NodeClaims are their Nodes, not in flight.
    assert_eq!(plan.existing_nodes.len(), 1, "{:?}", plan.existing_nodes);
    let in_flight = &plan.existing_nodes[0];
    assert_eq!(in_flight.name, IN_FLIGHT);
    assert!(in_flight.in_flight);
    assert_eq!(in_flight.pods.len(), 1);
    assert!(PENDING_WEB.contains(&in_flight.pods[0].as_str()));

    // The limit is 24 CPUs; the two Nodes (8 each) and the in-flight
    // NodeClaim (4) leave 4: the new NodeClaim for the other web pod may
    // only be a 4-CPU type, and db-1, which needs 8, cannot be placed.
    assert_eq!(plan.node_claims.len(), 1, "{:?}", plan.node_claims);
    let claim = &plan.node_claims[0];
    assert_eq!(claim.node_pool, "general-purpose");
    assert_eq!(claim.pods.len(), 1);
    assert_ne!(claim.pods[0], in_flight.pods[0]);
    let catalog = Catalog::embedded("us-east-1").unwrap();
    for option in &claim.instance_type_options {
        assert_eq!(vcpus(&catalog, option), 4, "{option}");
    }
    assert_eq!(plan.unschedulable.len(), 1);
    assert_eq!(plan.unschedulable[0].pod, "shop/db-1");
    assert!(
        plan.unschedulable[0].reason.contains("limits"),
        "{}",
        plan.unschedulable[0].reason
    );
}

/// The control for the limit above: with room for an 8-CPU node, db-1 is
/// placed, so it was the existing nodes' share of the limit that held it.
#[test]
fn a_higher_limit_leaves_room_for_the_database() {
    let text = snapshot_text();
    let raised = text.replacen(
        "    limits:\n      cpu: \"24\"",
        "    limits:\n      cpu: \"32\"",
        1,
    );
    assert_ne!(
        raised, text,
        "the NodePool's limit is where the test expects"
    );
    let plan = plan(&[("snapshot", &raised)]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let db = plan
        .node_claims
        .iter()
        .find(|c| c.pods.contains(&"shop/db-1".to_string()))
        .unwrap();
    let catalog = Catalog::embedded("us-east-1").unwrap();
    assert!(vcpus(&catalog, &db.instance_type) >= 8);
}

/// A snapshot plus a workload that is not deployed yet answers "what if I
/// deploy this too?": the new Deployment has no pods in the cluster, so it is
/// expanded, and its pods are placed next to the pending ones.
#[test]
fn a_new_workload_beside_a_snapshot_is_expanded() {
    let new_app = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: search, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: search}}
  template:
    metadata: {labels: {app: search}}
    spec:
      containers:
        - name: search
          image: search:1
          resources: {requests: {cpu: 250m, memory: 512Mi}}
"#;
    let plan = plan(&[("snapshot", &snapshot_text()), ("search.yaml", new_app)]);
    assert_eq!(plan.cluster.expanded_pods, 2);
    assert_eq!(plan.cluster.pending_pods, 5);
    let pods = planned_pods(&plan);
    assert!(pods.contains("shop/search-0") && pods.contains("shop/search-1"));
    assert!(!pods.iter().any(|p| p.starts_with("shop/web-0")));
}
