//! NodeOverlays in `nodewright sandbox --feature-gates NodeOverlay=true`
//! with the machine's `kubectl`, as Karpenter's overlay tests have it: a
//! pod pending before any overlay launches on the cheapest list-price type;
//! a NodeOverlay applied with `kubectl` is evaluated by the NodeOverlay
//! controller (its `ValidationSucceeded` and `Ready` conditions written),
//! and the next pod launches on the type the overlay made cheapest. An
//! overlay that conflicts with it is reported and left out. On the API
//! server double and on kube-apiserver.

use std::time::Duration;

use super::sandbox_disruption::Sandbox;
use super::sandbox_kubectl::{Backend, until_within};

/// Three on-demand types: m5.large and m6i.large list at $0.096/h,
/// m7i.large at $0.1008/h. No consolidation, so a node keeps the type it
/// was launched as.
const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: priced}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m6i.large, m7i.large]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidateAfter: Never
"#;

/// m7i.large for a cent an hour, and an overlay of the same weight setting
/// another price on it (and on the pool's other types): a conflict, which
/// Karpenter leaves out.
const OVERLAYS: &str = r#"
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: negotiated}
spec:
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m7i.large]}
  price: "0.01"
  weight: 20
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: also-negotiated}
spec:
  requirements:
    - {key: karpenter.sh/nodepool, operator: In, values: [priced]}
  price: "0.02"
  weight: 20
"#;

/// A pod that takes a large node of its own (1.5 of its 2 vCPUs).
fn pod(name: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: shop, labels: {{app: {name}}}}}
spec:
  nodeSelector: {{karpenter.sh/nodepool: priced}}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 1500m, memory: 1Gi}}}}}}]
"#
    )
}

#[test]
fn a_node_overlay_applied_with_kubectl_changes_what_the_sandbox_launches() {
    a_node_overlay_changes_what_is_launched_on(Backend::Double);
}

#[test]
fn a_node_overlay_applied_with_kubectl_changes_what_the_sandbox_launches_on_kube_apiserver() {
    a_node_overlay_changes_what_is_launched_on(Backend::KubeApiserver);
}

fn a_node_overlay_changes_what_is_launched_on(backend: Backend) {
    let sandbox = Sandbox::start_with("overlay", backend, &["--feature-gates", "NodeOverlay=true"]);
    sandbox.ok(&["create", "namespace", "shop"]);
    sandbox.ok(&["apply", "-f", "examples/quickstart/ec2nodeclass.yaml"]);
    sandbox.apply(POOL);
    let instance_type = |node: &str| {
        sandbox.ok(&[
            "get",
            "node",
            node,
            "-o",
            "jsonpath={.metadata.labels.node\\.kubernetes\\.io/instance-type}",
        ])
    };

    // Before any overlay: a list-price type.
    sandbox.apply(&pod("before"));
    let before = sandbox.running("before", 1);
    let listed = instance_type(&before[0]);
    assert!(
        listed == "m5.large" || listed == "m6i.large",
        "launched {listed} before the overlay"
    );

    // The overlays, evaluated by the controller.
    sandbox.apply(OVERLAYS);
    let condition = |overlay: &str, type_: &str, want: &str| {
        let path = format!(
            "jsonpath={{.status.conditions[?(@.type==\"{type_}\")].status}}/{{.status.conditions[?(@.type==\"{type_}\")].reason}}"
        );
        until_within(
            sandbox.kubeconfig(),
            &["get", "nodeoverlay", overlay, "-o", &path],
            Duration::from_secs(60),
            |out| out.starts_with(want),
        )
    };
    condition("negotiated", "ValidationSucceeded", "True/");
    condition("negotiated", "Ready", "True/");
    // Same weight, both pricing m7i.large: the one later in the alphabet
    // is taken first and wins; the other is a conflict, left out.
    let conflicted = condition("also-negotiated", "ValidationSucceeded", "False/");
    assert!(conflicted.ends_with("/Conflict"), "{conflicted}");
    condition("also-negotiated", "Ready", "False/");

    // After: the overlaid type, now the cheapest.
    sandbox.apply(&pod("after"));
    let after = sandbox.running("after", 1);
    assert_eq!(instance_type(&after[0]), "m7i.large");
    let claim_type = sandbox.ok(&[
        "get",
        "nodeclaims",
        "-l",
        "node.kubernetes.io/instance-type=m7i.large",
        "-o",
        "jsonpath={.items[*].metadata.labels.karpenter\\.sh/nodepool}",
    ]);
    assert_eq!(claim_type, "priced");
}
