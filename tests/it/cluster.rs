//! Which NodePools, pods, nodes and NodeClaims a provisioning round takes
//! from a cluster snapshot (`nodewright::cluster`), seen through `simulate`.

use crate::support::plan_yaml;

const CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"#;

fn pool(name: &str, weight: u32, extra_metadata: &str, status: &str) -> String {
    format!(
        r#"---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}{extra_metadata}}}
spec:
  weight: {weight}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}}
{status}"#
    )
}

fn pod(name: &str, extra: &str) -> String {
    format!(
        r#"---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default{extra}}}
spec:
  containers: [{{name: app, image: app, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
"#
    )
}

const NOT_READY: &str = r#"status:
  conditions:
  - {type: Ready, status: "False", reason: NodeClassNotReady, message: EC2NodeClass default is not ready, lastTransitionTime: "2026-01-01T00:00:00Z"}
"#;

#[test]
fn a_nodepool_that_is_not_ready_is_skipped_and_named_in_the_reason() {
    let yaml = format!(
        "{CLASS}{}{}",
        pool("preferred", 50, "", NOT_READY),
        pod("a", "")
    );
    let plan = plan_yaml(&yaml);
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    let reason = &plan.unschedulable[0].reason;
    assert!(
        reason.contains("preferred")
            && reason.contains("not ready")
            && reason.contains("NodeClassNotReady"),
        "{reason}"
    );

    // A lower-weight pool that is ready takes the pod instead.
    let yaml = format!(
        "{CLASS}{}{}{}",
        pool("preferred", 50, "", NOT_READY),
        pool("fallback", 10, "", ""),
        pod("a", "")
    );
    let plan = plan_yaml(&yaml);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims[0].node_pool, "fallback");
}

#[test]
fn a_nodepool_being_deleted_is_skipped() {
    let deleting =
        r#", deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: [karpenter.sh/termination]"#;
    let yaml = format!(
        "{CLASS}{}{}{}",
        pool("old", 50, deleting, ""),
        pool("new", 10, "", ""),
        pod("a", "")
    );
    let plan = plan_yaml(&yaml);
    assert_eq!(plan.node_claims.len(), 1);
    assert_eq!(plan.node_claims[0].node_pool, "new");

    let yaml = format!("{CLASS}{}{}", pool("old", 50, deleting, ""), pod("a", ""));
    let plan = plan_yaml(&yaml);
    assert!(
        plan.unschedulable[0].reason.contains("being deleted"),
        "{}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn finished_deleting_and_daemonset_pods_are_not_provisioned_for() {
    let owned = r#", ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u1, controller: true}]"#;
    let yaml = format!(
        "{CLASS}{}{}{}{}{}",
        pool("general", 10, "", ""),
        pod("done", "") + "status: {phase: Succeeded}\n",
        pod("failed", "") + "status: {phase: Failed}\n",
        pod("leaving", r#", deletionTimestamp: "2026-01-01T00:00:00Z""#),
        pod("agent-x", owned),
    );
    let plan = plan_yaml(&yaml);
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);

    let yaml = format!("{yaml}{}", pod("pending", ""));
    let plan = plan_yaml(&yaml);
    let placed: Vec<&String> = plan.node_claims.iter().flat_map(|c| &c.pods).collect();
    assert_eq!(placed, [&"default/pending".to_string()]);
}
