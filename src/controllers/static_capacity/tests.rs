//! Karpenter's static provisioning and deprovisioning cases
//! (`pkg/controllers/static/{provisioning,deprovisioning}/suite_test.go`),
//! by their `It` text, on the plan both the controller and `simulate` act on.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;

use super::plan::{StaticCounts, StaticPlan, plan_static_pool};
use crate::sim::Manifests;

const NOW: &str = "2026-12-01T12:00:00Z";

/// A static NodePool `static` with `replicas` and extra spec/metadata.
fn pool(replicas: i64, extra_spec: &str, extra_meta: &str) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: static
{extra_meta}
spec:
  replicas: {replicas}
{extra_spec}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: []
"#
    )
}

/// A NodeClaim of the static pool; launched ones have a Node `<name>-node`.
fn claim(name: &str, launched: bool, deleting: bool) -> String {
    let deletion = if deleting {
        "  deletionTimestamp: \"2026-12-01T11:00:00Z\"\n  finalizers: [karpenter.sh/termination]\n"
    } else {
        ""
    };
    let mut out = format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {name}
  creationTimestamp: "2026-12-01T10:00:00Z"
  labels: {{karpenter.sh/nodepool: static}}
{deletion}spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements: []
"#
    );
    if launched {
        out.push_str(&format!(
            r#"status:
  providerID: aws:///us-east-1a/i-{name}
  nodeName: {name}-node
---
apiVersion: v1
kind: Node
metadata:
  name: {name}-node
  labels: {{karpenter.sh/nodepool: static}}
spec:
  providerID: aws:///us-east-1a/i-{name}
"#
        ));
    }
    out
}

/// A running pod on `node`; a DaemonSet's when `daemon`, with `annotations`.
fn pod(name: &str, node: &str, daemon: bool, annotations: &str) -> String {
    let owner = if daemon {
        "  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: ds-uid, controller: true}]\n"
    } else {
        ""
    };
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  annotations: {{{annotations}}}
{owner}spec:
  nodeName: {node}
  containers: [{{name: c, image: x}}]
status:
  phase: Running
"#
    )
}

fn plan(documents: &[String]) -> StaticPlan {
    plan_marked(documents, &BTreeSet::new())
}

fn plan_marked(documents: &[String], marked: &BTreeSet<String>) -> StaticPlan {
    let mut manifests = Manifests::default();
    manifests
        .add_yaml("test.yaml", &documents.join("---\n"))
        .unwrap();
    let snapshot = manifests.snapshot();
    let pool = snapshot
        .node_pools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("static"))
        .unwrap();
    plan_static_pool(&snapshot, pool, marked, NOW.parse::<Timestamp>().unwrap()).unwrap()
}

// --- provisioning ---

#[test]
fn should_return_early_if_nodepool_replicas_is_nil() {
    let mut manifests = Manifests::default();
    manifests
        .add_yaml("p.yaml", &pool(1, "", "").replace("  replicas: 1\n", ""))
        .unwrap();
    let snapshot = manifests.snapshot();
    let now = NOW.parse::<Timestamp>().unwrap();
    assert!(plan_static_pool(&snapshot, &snapshot.node_pools[0], &BTreeSet::new(), now).is_none());
}

#[test]
fn should_return_early_if_nodepool_is_being_deleted() {
    let meta = "  deletionTimestamp: \"2026-12-01T11:00:00Z\"\n  finalizers: [x]";
    let plan = plan(&[pool(3, "", meta)]);
    assert_eq!((plan.open, plan.remove.len()), (0, 0));
    assert!(plan.held.unwrap().contains("being deleted"));
}

#[test]
fn should_return_early_if_nodepool_root_condition_is_not_true() {
    let not_ready = "status:\n  conditions:\n  - {type: Ready, status: \"False\", reason: NodeClassNotReady, message: class not ready, lastTransitionTime: \"2026-12-01T10:00:00Z\"}\n";
    let plan = plan(&[format!("{}{not_ready}", pool(3, "", ""))]);
    assert_eq!(plan.open, 0);
    assert!(plan.held.unwrap().contains("not ready"));
}

#[test]
fn should_return_early_if_current_node_count_exceeds_desired_replicas() {
    let plan = plan(&[
        pool(1, "", ""),
        claim("a", true, false),
        claim("b", true, false),
    ]);
    assert_eq!(plan.open, 0);
    assert_eq!(plan.remove.len(), 1);
}

#[test]
fn should_create_nodeclaims_when_current_node_count_is_less_than_desired_replicas() {
    let plan = plan(&[pool(3, "", "")]);
    assert_eq!(plan.open, 3);
    assert!(plan.held.is_none());
}

#[test]
fn should_create_additional_nodeclaims_to_reach_desired_replicas() {
    let plan = plan(&[
        pool(5, "", ""),
        claim("a", true, false),
        claim("b", false, false),
    ]);
    assert_eq!(plan.counts.active, 2);
    assert_eq!(plan.open, 3);
}

#[test]
fn should_not_create_additional_nodeclaims() {
    // Two active and one taken by a disruption command (its replacement is
    // among the active): the replicas are there.
    let marked = BTreeSet::from(["c-node".to_string()]);
    let plan = plan_marked(
        &[
            pool(3, "", ""),
            claim("a", true, false),
            claim("b", true, false),
            claim("c", true, false),
        ],
        &marked,
    );
    assert_eq!(
        plan.counts,
        StaticCounts {
            active: 2,
            pending_disruption: 1,
            deleting: 0
        }
    );
    assert_eq!((plan.open, plan.remove.len()), (0, 0));
}

#[test]
fn should_not_create_additional_nodeclaims_when_node_limits_are_reached() {
    let limits = "  limits: {nodes: \"3\"}";
    let plan = plan(&[
        pool(5, limits, ""),
        claim("a", true, false),
        claim("b", true, true),
    ]);
    // One active and one being deleted leave room for one more under 3.
    assert_eq!(plan.open, 1);
    assert!(plan.held.unwrap().contains("limits.nodes"));
}

#[test]
fn should_handle_zero_replicas() {
    let plan = plan(&[pool(0, "", "")]);
    assert_eq!((plan.open, plan.remove.len()), (0, 0));
}

#[test]
fn should_handle_large_replica_counts() {
    let plan = plan(&[pool(1000, "", "")]);
    assert_eq!(plan.open, 1000);
}

// --- deprovisioning ---

#[test]
fn should_return_early_if_current_node_count_is_less_than_or_equal_to_desired_replicas() {
    let plan = plan(&[
        pool(2, "", ""),
        claim("a", true, false),
        claim("b", true, false),
    ]);
    assert!(plan.remove.is_empty());
    assert_eq!(plan.open, 0);
}

#[test]
fn should_only_consider_running_nodeclaims_and_not_deleting_nodeclaims() {
    let plan = plan(&[
        pool(2, "", ""),
        claim("a", true, false),
        claim("b", true, false),
        claim("c", true, true),
    ]);
    assert!(plan.remove.is_empty());
    assert_eq!(plan.counts.deleting, 1);
}

#[test]
fn should_terminate_excess_nodeclaims_when_current_count_exceeds_desired_replicas() {
    let plan = plan(&[
        pool(1, "", ""),
        claim("a", true, false),
        claim("b", true, false),
        claim("c", true, false),
    ]);
    assert_eq!(plan.remove.len(), 2);
}

#[test]
fn should_handle_zero_replicas_by_terminating_all_nodeclaims() {
    let plan = plan(&[
        pool(0, "", ""),
        claim("a", true, false),
        claim("b", false, false),
    ]);
    let removed: BTreeSet<&str> = plan.remove.iter().map(String::as_str).collect();
    assert_eq!(removed, BTreeSet::from(["a", "b"]));
}

#[test]
fn should_prioritize_nodeclaims_that_have_unresolved_provider_id() {
    let plan = plan(&[
        pool(2, "", ""),
        claim("launched-1", true, false),
        claim("launched-2", true, false),
        claim("unlaunched", false, false),
    ]);
    assert_eq!(plan.remove, ["unlaunched"]);
}

#[test]
fn should_prioritize_empty_nodes_with_only_daemonset_pods_for_termination() {
    let plan = plan(&[
        pool(2, "", ""),
        claim("busy", true, false),
        pod("app", "busy-node", false, ""),
        claim("daemons", true, false),
        pod("agent", "daemons-node", true, ""),
        claim("busy-too", true, false),
        pod("app-2", "busy-too-node", false, ""),
    ]);
    assert_eq!(plan.remove, ["daemons"]);
}

#[test]
fn should_terminate_non_empty_nodes_when_empty_nodes_are_insufficient() {
    let plan = plan(&[
        pool(0, "", ""),
        claim("busy", true, false),
        pod("app", "busy-node", false, ""),
        claim("empty", true, false),
    ]);
    assert_eq!(plan.remove, ["empty", "busy"]);
}

#[test]
fn a_daemonset_pod_with_do_not_disrupt_keeps_a_node_from_counting_as_empty() {
    let plan = plan(&[
        pool(1, "", ""),
        claim("held", true, false),
        pod(
            "agent",
            "held-node",
            true,
            "karpenter.sh/do-not-disrupt: \"true\"",
        ),
        claim("busy", true, false),
        pod("app", "busy-node", false, ""),
    ]);
    assert_eq!(plan.remove, ["busy"]);
}

#[test]
fn disruption_cost_ordering_puts_do_not_disrupt_last_and_cheaper_nodes_first() {
    let plan = plan(&[
        pool(0, "", ""),
        claim("guarded", true, false),
        pod(
            "db",
            "guarded-node",
            false,
            "karpenter.sh/do-not-disrupt: \"true\"",
        ),
        claim("two-pods", true, false),
        pod("a", "two-pods-node", false, ""),
        pod("b", "two-pods-node", false, ""),
        claim("one-pod", true, false),
        pod("c", "one-pod-node", false, ""),
        claim("costly", true, false),
        pod(
            "d",
            "costly-node",
            false,
            "controller.kubernetes.io/pod-deletion-cost: \"1000000000\"",
        ),
    ]);
    assert_eq!(plan.remove, ["one-pod", "two-pods", "costly", "guarded"]);
}
