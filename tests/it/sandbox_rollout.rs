//! A drift rollout in `nodewright sandbox`, driven by `kubectl`: twenty
//! nodes drift at once and a budget of `nodes: "5"` replaces them as fast
//! as replacements come up — never more than five disrupting as the budget
//! counts them, and without a fixed wait per node. The test prints the
//! time the whole rollout took and the most nodes seen disrupting at once
//! (a figure, not a target: timing belongs in benchmarks).

use std::time::{Duration, Instant};

use super::sandbox_disruption::{Sandbox, disrupting};
use super::sandbox_kubectl::kubectl;
use std::collections::BTreeSet;

const NODES: usize = 20;

const SPREAD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: fleet, namespace: shop}
spec:
  replicas: 20
  selector: {matchLabels: {app: fleet}}
  template:
    metadata: {labels: {app: fleet}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: fleet}}
              topologyKey: kubernetes.io/hostname
      containers:
        - name: app
          image: public.ecr.aws/nginx/nginx:1.27
          resources: {requests: {cpu: 500m, memory: 512Mi}}
"#;

#[test]
fn twenty_drifted_nodes_are_replaced_five_at_a_time() {
    let sandbox = Sandbox::start("rollout");
    sandbox.quickstart(&[]);
    sandbox.patch_pool(
        r#"{"spec":{"disruption":{"consolidateAfter":"Never","budgets":[{"nodes":"5"}]}}}"#,
    );
    sandbox.apply(SPREAD);
    let before = sandbox.running("fleet", NODES);
    assert_eq!(before.len(), NODES);

    // A new template label drifts every node (NodePoolDrifted).
    sandbox.patch_pool(r#"{"spec":{"template":{"metadata":{"labels":{"rollout":"2"}}}}}"#);
    let started = Instant::now();
    let labelled = [
        "get",
        "nodes",
        "-l",
        "rollout=2",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ];
    let deadline = started + Duration::from_secs(600);
    let mut most = 0;
    loop {
        if let Some(now) = disrupting_managed(&sandbox) {
            most = most.max(now.len());
            if now.len() > 5 {
                let (_, nodes) = kubectl(
                    sandbox.kubeconfig(),
                    &[
                        "get",
                        "nodes",
                        "-o",
                        "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable} {.spec.taints[*].key} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
                    ],
                );
                let (_, claims) = kubectl(
                    sandbox.kubeconfig(),
                    &[
                        "get",
                        "nodeclaims",
                        "-o",
                        "jsonpath={range .items[*]}{.metadata.name} {.status.nodeName} {.metadata.deletionTimestamp} {.status.conditions[?(@.type==\"InstanceTerminating\")].status}{\"\\n\"}{end}",
                    ],
                );
                panic!(
                    "more than five nodes disrupting: {now:?}\nnodes:\n{nodes}\nclaims:\n{claims}"
                );
            }
        }
        let (ok, text) = kubectl(sandbox.kubeconfig(), &labelled);
        let nodes = sandbox.nodes();
        if ok && text.split_whitespace().count() == NODES && nodes.len() == NODES {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every node was replaced: {} of {NODES} labelled, {} nodes",
            text.split_whitespace().count(),
            nodes.len()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let took = started.elapsed();
    sandbox.running("fleet", NODES);
    println!(
        "rollout: {NODES} drifted nodes replaced in {:.1} s under nodes: \"5\"; at most {most} disrupting at once",
        took.as_secs_f64()
    );
}

/// The Nodes being disrupted (see [`disrupting`]) that the budget counts,
/// as Karpenter's does: those a NodeClaim still stands for whose instance
/// is not yet terminating. A node drained and whose instance is going (or
/// gone, its Node not yet removed) no longer uses the budget.
fn disrupting_managed(sandbox: &Sandbox) -> Option<Vec<String>> {
    let now = disrupting(sandbox.kubeconfig())?;
    let (ok, claims) = kubectl(
        sandbox.kubeconfig(),
        &[
            "get",
            "nodeclaims",
            "-o",
            "jsonpath={range .items[*]}{.status.nodeName} {.status.conditions[?(@.type==\"InstanceTerminating\")].status}{\"\\n\"}{end}",
        ],
    );
    let counted: BTreeSet<&str> = claims
        .lines()
        .filter(|l| !l.contains("True"))
        .map(str::trim)
        .collect();
    ok.then(|| {
        now.into_iter()
            .filter(|n| counted.contains(n.as_str()))
            .collect()
    })
}
