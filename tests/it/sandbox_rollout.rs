//! A drift rollout in `nodewright sandbox`, driven by `kubectl`: twenty
//! nodes drift at once and a budget of `nodes: "5"` replaces them five at
//! a time, as fast as replacements come up — never more than five
//! disrupting, and without a fixed wait per node. The test prints the time
//! the whole rollout took and the most nodes seen disrupting at once.

use std::time::{Duration, Instant};

use super::sandbox_disruption::{Sandbox, disrupting};
use super::sandbox_kubectl::kubectl;

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
    let Some(sandbox) = Sandbox::start("rollout") else {
        return;
    };
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
        if let Some(now) = disrupting(sandbox.kubeconfig()) {
            most = most.max(now.len());
            assert!(now.len() <= 5, "more than five nodes disrupting: {now:?}");
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
    assert!(most >= 2, "replacements ran side by side (most {most})");
}
