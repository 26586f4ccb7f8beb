//! A drift rollout in `nodewright sandbox`, driven by `kubectl`, on the
//! API server double and on the real control plane: twenty nodes drift at
//! once and a budget of `nodes: "5"` replaces them as fast as replacements
//! come up — never more than five disrupting as the budget counts them, and
//! without a fixed wait per node. The test prints how long the fleet took to
//! come up and the rollout to finish, and the most nodes seen disrupting at
//! once (figures, not targets: timing belongs in benchmarks).
//!
//! The fleet's size and the budget come from `NODEWRIGHT_ROLLOUT_NODES`
//! (default 20) and `NODEWRIGHT_ROLLOUT_BUDGET` (default `5`; a count or a
//! percentage such as `10%`), so the same scenario measures larger rollouts
//! (benches/README.md, "A drift rollout in the sandbox");
//! `NODEWRIGHT_ROLLOUT_DRIFT=0` stops once the fleet is up (to time a large
//! fleet registering without replacing it).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nodewright::controllers::disruption::budgets::scaled_nodes;

use super::sandbox_disruption::{Sandbox, disrupting};
use super::sandbox_kubectl::{Backend, kubectl};

/// The fleet and the budget a run uses.
struct Rollout {
    nodes: usize,
    budget: String,
    drift: bool,
}

impl Rollout {
    fn from_env() -> Rollout {
        let nodes = match std::env::var("NODEWRIGHT_ROLLOUT_NODES") {
            Ok(text) => text.parse().unwrap_or_else(|_| {
                panic!("NODEWRIGHT_ROLLOUT_NODES={text:?}: write a whole number of nodes, e.g. 100")
            }),
            Err(_) => 20,
        };
        let budget = std::env::var("NODEWRIGHT_ROLLOUT_BUDGET").unwrap_or_else(|_| "5".into());
        let drift = match std::env::var("NODEWRIGHT_ROLLOUT_DRIFT").as_deref() {
            Ok("0") => false,
            Ok("1") | Err(_) => true,
            Ok(other) => panic!("NODEWRIGHT_ROLLOUT_DRIFT={other:?}: write 1 (default) or 0"),
        };
        let rollout = Rollout {
            nodes,
            budget,
            drift,
        };
        // Refuse a malformed budget before a sandbox starts.
        rollout.allowed(1);
        rollout
    }

    /// The most nodes the budget lets disrupt out of `total`: a count, or a
    /// percentage rounded up, as the controller's budget reads it.
    fn allowed(&self, total: usize) -> usize {
        scaled_nodes(&self.budget, total).unwrap_or_else(|| {
            panic!(
                "NODEWRIGHT_ROLLOUT_BUDGET={:?}: write a node count (\"5\") or a percentage (\"10%\")",
                self.budget
            )
        })
    }

    /// The fleet: one pod per node (required hostname anti-affinity).
    fn fleet(&self) -> String {
        format!(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: fleet, namespace: shop}}
spec:
  replicas: {}
  selector: {{matchLabels: {{app: fleet}}}}
  template:
    metadata: {{labels: {{app: fleet}}}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {{matchLabels: {{app: fleet}}}}
              topologyKey: kubernetes.io/hostname
      containers:
        - name: app
          image: public.ecr.aws/nginx/nginx:1.27
          resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}
"#,
            self.nodes
        )
    }
}

#[test]
fn twenty_drifted_nodes_are_replaced_five_at_a_time() {
    drifted_nodes_are_replaced_within_the_budget(Backend::Double);
}

#[test]
fn twenty_drifted_nodes_are_replaced_five_at_a_time_on_kube_apiserver() {
    drifted_nodes_are_replaced_within_the_budget(Backend::KubeApiserver);
}

fn drifted_nodes_are_replaced_within_the_budget(backend: Backend) {
    let rollout = Rollout::from_env();
    let (count, budget) = (rollout.nodes, rollout.budget.as_str());
    // Generous limits (600 s for the default twenty nodes, more for large
    // fleets): a run that passes them failed.
    let limit = Duration::from_secs(480 + count as u64 * 6);
    let sandbox = Sandbox::start_on("rollout", backend);
    sandbox.quickstart(&[]);
    // No CPU limit (the quickstart's 1,000 would stop a large fleet).
    sandbox.patch_pool(&format!(
        r#"{{"spec":{{"limits":null,"disruption":{{"consolidateAfter":"Never","budgets":[{{"nodes":"{budget}"}}]}}}}}}"#
    ));
    let applied = Instant::now();
    sandbox.apply(&rollout.fleet());
    let before = sandbox.running_within("fleet", count, limit);
    let up = applied.elapsed();
    assert_eq!(before.len(), count);
    let ready = ready_nodes(&sandbox);
    assert_eq!(ready, count, "every node of the fleet is Ready");
    if !rollout.drift {
        println!(
            "fleet ({backend:?}): {count} nodes Ready and their pods Running {:.1} s after the apply",
            up.as_secs_f64()
        );
        return;
    }

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
    let deadline = started + limit;
    let mut most = 0;
    loop {
        let nodes = sandbox.nodes();
        if let Some(now) = disrupting_managed(&sandbox) {
            most = most.max(now.len());
            let allowed = rollout.allowed(nodes.len());
            if now.len() > allowed {
                panic!(
                    "{} nodes disrupting, the budget {budget:?} allows {allowed} of {}: {now:?}\n{}",
                    now.len(),
                    nodes.len(),
                    describe(&sandbox)
                );
            }
        }
        let (ok, text) = kubectl(sandbox.kubeconfig(), &labelled);
        if ok && text.split_whitespace().count() == count && nodes.len() == count {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every node was replaced: {} of {count} labelled, {} nodes",
            text.split_whitespace().count(),
            nodes.len()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let took = started.elapsed();
    sandbox.running_within("fleet", count, limit);
    println!(
        "rollout ({backend:?}): {count} nodes Ready and their pods Running {:.1} s after the apply; \
         all {count} drifted nodes replaced in {:.1} s under nodes: {budget:?}; at most {most} disrupting at once",
        up.as_secs_f64(),
        took.as_secs_f64()
    );
}

/// How many Nodes report `Ready=True`.
fn ready_nodes(sandbox: &Sandbox) -> usize {
    let text = sandbox.ok(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
    ]);
    text.lines().filter(|l| l.trim() == "True").count()
}

/// The nodes and NodeClaims as the budget sees them, for a failure message.
fn describe(sandbox: &Sandbox) -> String {
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
    format!("nodes:\n{nodes}\nclaims:\n{claims}")
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
