//! Static NodePools in `nodewright sandbox --feature-gates
//! StaticCapacity=true` with the machine's `kubectl`: the example static
//! pool gets its three nodes with no pod asking, `kubectl scale nodepool`
//! grows it within `limits.nodes` and shrinks it, `status.nodes` follows,
//! a pod for the pool runs on its nodes without a NodeClaim opened for it,
//! and a static pool no instance type fits gets a `StaticCapacityBlocked`
//! event. On the API server double and on kube-apiserver (the scale
//! subresource is each one's own).

use std::time::Duration;

use super::sandbox_disruption::Sandbox;
use super::sandbox_kubectl::{Backend, until_within};

const POOL: &str = "examples/nodepools/static.yaml";
const CLASS: &str = "examples/quickstart/ec2nodeclass.yaml";

#[test]
fn a_static_node_pool_keeps_its_replicas_and_follows_kubectl_scale() {
    a_static_node_pool_keeps_its_replicas_on(Backend::Double);
}

#[test]
fn a_static_node_pool_keeps_its_replicas_and_follows_kubectl_scale_on_kube_apiserver() {
    a_static_node_pool_keeps_its_replicas_on(Backend::KubeApiserver);
}

fn a_static_node_pool_keeps_its_replicas_on(backend: Backend) {
    let sandbox = Sandbox::start_with(
        "static",
        backend,
        &["--feature-gates", "StaticCapacity=true"],
    );
    let kubeconfig = sandbox.kubeconfig();
    sandbox.ok(&["apply", "-f", CLASS, "-f", POOL]);
    let ready_nodes = |count: usize| {
        until_within(
            kubeconfig,
            &[
                "get",
                "nodes",
                "-l",
                "karpenter.sh/nodepool=static-ingress",
                "-o",
                "jsonpath={range .items[*]}{.metadata.labels.node\\.kubernetes\\.io/instance-type}{\"\\n\"}{end}",
            ],
            Duration::from_secs(120),
            |out| out.lines().count() == count,
        )
    };
    let live_claims = |count: usize| {
        until_within(
            kubeconfig,
            &[
                "get",
                "nodeclaims",
                "-l",
                "karpenter.sh/nodepool=static-ingress",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}={.metadata.deletionTimestamp}{\"\\n\"}{end}",
            ],
            Duration::from_secs(120),
            // Deleted ones gone, not only being deleted.
            |out| out.lines().count() == count && out.lines().all(|l| l.ends_with('=')),
        )
    };
    // Three nodes with no pod asking for them, of the template's type.
    let types = ready_nodes(3);
    assert!(types.lines().all(|t| t == "m7i.large"), "{types}");
    until_within(
        kubeconfig,
        &[
            "get",
            "nodepool",
            "static-ingress",
            "-o",
            "jsonpath={.status.nodes}",
        ],
        Duration::from_secs(60),
        |out| out == "3",
    );
    // `kubectl scale` through the scale subresource: up within limits.nodes (5) …
    sandbox.ok(&["scale", "nodepool", "static-ingress", "--replicas", "5"]);
    ready_nodes(5);
    let scale = sandbox.ok(&[
        "get",
        "--raw",
        "/apis/karpenter.sh/v1/nodepools/static-ingress/scale",
    ]);
    assert!(scale.contains("\"replicas\":5"), "{scale}");
    // … and down: the surplus NodeClaims are deleted.
    sandbox.ok(&["scale", "nodepool", "static-ingress", "--replicas", "1"]);
    live_claims(1);
    ready_nodes(1);
    // A pod for the pool runs on its node; nothing is provisioned for it.
    sandbox.apply(
        r#"apiVersion: v1
kind: Pod
metadata: {name: ingress, namespace: default}
spec:
  nodeSelector: {karpenter.sh/nodepool: static-ingress}
  containers:
  - name: ingress
    image: nginx
    resources: {requests: {cpu: 100m, memory: 128Mi}}
"#,
    );
    until_within(
        kubeconfig,
        &["get", "pod", "ingress", "-o", "jsonpath={.status.phase}"],
        Duration::from_secs(120),
        |out| out == "Running",
    );
    live_claims(1);
    // A static pool no instance type satisfies opens nothing and says why.
    sandbox.apply(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: static-none}
spec:
  replicas: 1
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [x9.nothing]}
"#,
    );
    let note = until_within(
        kubeconfig,
        &[
            "get",
            "events",
            "-A",
            "--field-selector",
            "reason=StaticCapacityBlocked,involvedObject.name=static-none",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        Duration::from_secs(60),
        |out| !out.is_empty(),
    );
    assert!(note.contains("no instance type"), "{note}");
    let none = sandbox.ok(&[
        "get",
        "nodeclaims",
        "-l",
        "karpenter.sh/nodepool=static-none",
        "-o",
        "name",
    ]);
    assert!(none.trim().is_empty(), "{none}");
}
