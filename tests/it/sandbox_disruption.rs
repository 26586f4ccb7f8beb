//! Disruption in `nodewright sandbox`, driven by the machine's `kubectl` as
//! a user would: an underutilized node is replaced by a cheaper one before
//! it goes; `do-not-disrupt`, a PodDisruptionBudget and a budget outside
//! its window each keep a node (the controller says so in a
//! `DisruptionBlocked` event) until they are lifted; a NodePool template
//! change drifts every node and replaces them one budget at a time; a node
//! past `expireAfter` is replaced.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::control_plane::ControlPlane;
use super::sandbox_kubectl::{
    Backend, Process, Started, kubectl, start_sandbox_with, until, until_within,
};

/// A running sandbox, stopped (SIGTERM) and cleaned up when dropped, also
/// when a test fails half-way; on kube-apiserver, its control plane is
/// stopped after it.
pub(crate) struct Sandbox {
    child: Process,
    pub(crate) dir: PathBuf,
    kubeconfig: PathBuf,
    /// Dropped after the sandbox stopped (see `Drop`).
    _control_plane: Option<ControlPlane>,
}

impl Sandbox {
    /// The sandbox on `backend`.
    pub(crate) fn start_on(name: &str, backend: Backend) -> Sandbox {
        Sandbox::start_with(name, backend, &[])
    }

    /// The sandbox on `backend`, started with more `args`.
    pub(crate) fn start_with(name: &str, backend: Backend, args: &[&str]) -> Sandbox {
        let Started {
            child,
            dir,
            kubeconfig,
            control_plane,
            ..
        } = start_sandbox_with(name, backend, args);
        Sandbox {
            child,
            dir,
            kubeconfig,
            _control_plane: control_plane,
        }
    }

    /// `kubectl args`, which must succeed; its output.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let (ok, text) = kubectl(&self.kubeconfig, args);
        assert!(ok, "kubectl {args:?}: {text}");
        text
    }

    /// `kubectl apply -f -` of `yaml`.
    pub(crate) fn apply(&self, yaml: &str) {
        let path = self.dir.join(format!("apply-{}.yaml", self.dir_entries()));
        std::fs::write(&path, yaml).unwrap();
        self.ok(&["apply", "-f", path.to_str().unwrap()]);
    }

    fn dir_entries(&self) -> usize {
        std::fs::read_dir(&self.dir).map_or(0, |d| d.count())
    }

    pub(crate) fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The quickstart's NodePool and EC2NodeClass in namespace `shop`,
    /// consolidating after 5 s, and `more` applied with them.
    pub(crate) fn quickstart(&self, more: &[&str]) {
        self.ok(&["create", "namespace", "shop"]);
        let mut args = vec![
            "apply",
            "-f",
            "examples/quickstart/nodepool.yaml",
            "-f",
            "examples/quickstart/ec2nodeclass.yaml",
        ];
        for file in more {
            args.extend(["-f", file]);
        }
        self.ok(&args);
        self.patch_pool(r#"{"spec":{"disruption":{"consolidateAfter":"5s"}}}"#);
    }

    pub(crate) fn patch_pool(&self, patch: &str) {
        self.ok(&[
            "patch",
            "nodepool",
            "general-purpose",
            "--type",
            "merge",
            "-p",
            patch,
        ]);
    }

    /// Waits until `count` pods labelled `app` run; their nodes.
    pub(crate) fn running(&self, app: &str, count: usize) -> Vec<String> {
        self.running_within(app, count, Duration::from_secs(120))
    }

    /// [`Sandbox::running`] with a limit of `limit` (large fleets).
    pub(crate) fn running_within(&self, app: &str, count: usize, limit: Duration) -> Vec<String> {
        let selector = format!("app={app}");
        let text = until_within(
            self.kubeconfig(),
            &[
                "get",
                "pods",
                "-n",
                "shop",
                "-l",
                &selector,
                "-o",
                "jsonpath={range .items[*]}{.status.phase} {.spec.nodeName}{\"\\n\"}{end}",
            ],
            limit,
            |t| {
                let lines: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
                lines.len() == count && lines.iter().all(|l| l.starts_with("Running "))
            },
        );
        text.lines()
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
            .collect()
    }

    /// Waits for a `DisruptionBlocked` event on Node `node` whose message
    /// contains `needle`.
    pub(crate) fn blocked(&self, node: &str, needle: &str) {
        let selector =
            format!("reason=DisruptionBlocked,involvedObject.kind=Node,involvedObject.name={node}");
        until_within(
            self.kubeconfig(),
            &[
                "get",
                "events",
                "-A",
                "--field-selector",
                &selector,
                "-o",
                "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
            ],
            Duration::from_secs(90),
            |t| t.contains(needle),
        );
    }

    pub(crate) fn nodes(&self) -> Vec<String> {
        self.ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"])
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let stopped = self.child.wait();
        if std::thread::panicking() {
            eprintln!("the sandbox's log stays in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
            assert!(stopped.unwrap().success(), "the sandbox stops cleanly");
        }
    }
}

#[test]
fn an_underutilized_node_is_replaced_by_a_cheaper_one_before_it_goes() {
    an_underutilized_node_is_replaced_by_a_cheaper_one_before_it_goes_on(Backend::Double);
}

#[test]
fn an_underutilized_node_is_replaced_by_a_cheaper_one_before_it_goes_on_kube_apiserver() {
    an_underutilized_node_is_replaced_by_a_cheaper_one_before_it_goes_on(Backend::KubeApiserver);
}

fn an_underutilized_node_is_replaced_by_a_cheaper_one_before_it_goes_on(backend: Backend) {
    let sandbox = Sandbox::start_on("disruption-replace", backend);
    sandbox.quickstart(&["examples/quickstart/web.yaml"]);
    let first = sandbox.running("web", 8);
    let original = first[0].clone();
    let cpu_of = |node: &str| -> u64 {
        let cpu = sandbox.ok(&[
            "get",
            "node",
            node,
            "-o",
            "jsonpath={.status.allocatable.cpu}",
        ]);
        let cpu = cpu.trim();
        match cpu.strip_suffix('m') {
            Some(milli) => milli.parse().unwrap(),
            None => cpu.parse::<u64>().unwrap() * 1000,
        }
    };
    let original_cpu = cpu_of(&original);

    // One pod of 500m left on a node sized for eight: consolidation
    // launches a smaller node, and only once it is initialized is the old
    // one drained. Observed throughout: the cluster never has no node.
    sandbox.ok(&["scale", "deployment", "web", "-n", "shop", "--replicas=1"]);
    let deadline = Instant::now() + Duration::from_secs(180);
    let replacement = loop {
        let nodes = sandbox.nodes();
        assert!(!nodes.is_empty(), "a node is always there for the pod");
        if !nodes.contains(&original) && nodes.len() == 1 {
            break nodes[0].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the node was not replaced: {nodes:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let now_on = sandbox.running("web", 1);
    assert!(
        sandbox.nodes().contains(&now_on[0]),
        "the pod runs on a node of the cluster: {now_on:?}"
    );
    assert!(
        cpu_of(&replacement) < original_cpu,
        "the replacement is smaller than the node it replaced"
    );
}

/// A budget blocking all disruption from an hour ago for 23 hours: the
/// hour a user would leave open for maintenance is not now.
fn closed_window_budget() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (hour, minute) = ((secs / 3600 + 23) % 24, (secs / 60) % 60);
    format!(
        r#"{{"spec":{{"disruption":{{"budgets":[{{"nodes":"0","schedule":"{minute} {hour} * * *","duration":"23h"}}]}}}}}}"#
    )
}

const HELD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: held, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: held}}
  template:
    metadata:
      labels: {app: held}
      annotations: {karpenter.sh/do-not-disrupt: "true"}
    spec:
      containers:
        - name: held
          image: public.ecr.aws/nginx/nginx:1.27
          resources: {requests: {cpu: 100m, memory: 128Mi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: held, namespace: shop}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: held}}
"#;

#[test]
fn do_not_disrupt_a_pdb_and_a_closed_budget_window_each_keep_a_node() {
    do_not_disrupt_a_pdb_and_a_closed_budget_window_each_keep_a_node_on(Backend::Double);
}

#[test]
fn do_not_disrupt_a_pdb_and_a_closed_budget_window_each_keep_a_node_on_kube_apiserver() {
    do_not_disrupt_a_pdb_and_a_closed_budget_window_each_keep_a_node_on(Backend::KubeApiserver);
}

fn do_not_disrupt_a_pdb_and_a_closed_budget_window_each_keep_a_node_on(backend: Backend) {
    let sandbox = Sandbox::start_on("disruption-held", backend);
    sandbox.quickstart(&["examples/quickstart/web.yaml"]);
    sandbox.running("web", 8);
    // Added to the web's node, the only one.
    sandbox.apply(HELD);
    let node = sandbox.running("held", 1).remove(0);

    // Without web, the node would be replaced by a smaller one; each hold
    // in turn keeps it, and says so.
    sandbox.ok(&["scale", "deployment", "web", "-n", "shop", "--replicas=0"]);
    sandbox.blocked(&node, "do-not-disrupt");
    let pod = sandbox.ok(&["get", "pods", "-n", "shop", "-l", "app=held", "-o", "name"]);
    sandbox.ok(&[
        "annotate",
        "-n",
        "shop",
        pod.trim(),
        "karpenter.sh/do-not-disrupt-",
    ]);
    sandbox.blocked(&node, "PodDisruptionBudget shop/held allows no disruption");
    sandbox.patch_pool(&closed_window_budget());
    sandbox.ok(&["delete", "pdb", "-n", "shop", "held"]);
    sandbox.blocked(&node, "budget");
    assert!(sandbox.nodes().contains(&node), "every hold kept the node");

    // Lifted: the node goes, and its pod runs on the replacement.
    sandbox.patch_pool(r#"{"spec":{"disruption":{"budgets":[{"nodes":"1"}]}}}"#);
    until_within(
        sandbox.kubeconfig(),
        &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
        Duration::from_secs(120),
        |t| !t.split_whitespace().any(|n| n == node),
    );
    sandbox.running("held", 1);
}

const SPREAD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: spread, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: spread}}
  template:
    metadata: {labels: {app: spread}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: spread}}
              topologyKey: kubernetes.io/hostname
      containers:
        - name: spread
          image: public.ecr.aws/nginx/nginx:1.27
          resources: {requests: {cpu: 500m, memory: 512Mi}}
"#;

/// The Nodes that are being disrupted now: cordoned, tainted
/// `karpenter.sh/disrupted` or being deleted.
pub(crate) fn disrupting(kubeconfig: &Path) -> Option<Vec<String>> {
    let (ok, text) = kubectl(
        kubeconfig,
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.unschedulable} {.spec.taints[*].key} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
        ],
    );
    ok.then(|| {
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(_, rest)| {
                // `true`, the taint's key, or a deletion timestamp (the only
                // field with a capital letter).
                rest.contains("true")
                    || rest.contains("karpenter.sh/disrupted")
                    || rest.contains('T')
            })
            .map(|(name, _)| name.to_string())
            .collect()
    })
}

#[test]
fn a_template_change_drifts_every_node_and_replaces_them_one_budget_at_a_time() {
    a_template_change_drifts_every_node_and_replaces_them_one_budget_at_a_time_on(Backend::Double);
}

#[test]
fn a_template_change_drifts_every_node_and_replaces_them_one_budget_at_a_time_on_kube_apiserver() {
    a_template_change_drifts_every_node_and_replaces_them_one_budget_at_a_time_on(
        Backend::KubeApiserver,
    );
}

fn a_template_change_drifts_every_node_and_replaces_them_one_budget_at_a_time_on(backend: Backend) {
    let sandbox = Sandbox::start_on("disruption-drift", backend);
    sandbox.quickstart(&[]);
    sandbox.patch_pool(r#"{"spec":{"disruption":{"budgets":[{"nodes":"1"}]}}}"#);
    sandbox.apply(SPREAD);
    let before = sandbox.running("spread", 3);

    // A new template label: every node drifts (NodePoolDrifted) and is
    // replaced, never two at once with a budget of one node.
    sandbox.patch_pool(r#"{"spec":{"template":{"metadata":{"labels":{"team":"web"}}}}}"#);
    let labelled = [
        "get",
        "nodes",
        "-l",
        "team=web",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ];
    let deadline = Instant::now() + Duration::from_secs(360);
    let mut most = 0;
    loop {
        if let Some(now) = disrupting(sandbox.kubeconfig()) {
            most = most.max(now.len());
            assert!(now.len() <= 1, "two nodes disrupting at once: {now:?}");
        }
        let (ok, text) = kubectl(sandbox.kubeconfig(), &labelled);
        let nodes = sandbox.nodes();
        if ok && text.split_whitespace().count() == 3 && nodes.len() == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every node was replaced: {nodes:?}, labelled {text}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(most, 1, "disruption was seen under way");
    let after = sandbox.running("spread", 3);
    // Only replacements carry the new label. (A replacement may reuse a
    // gone node's address, and so its name: names alone do not tell.)
    let (_, replacements) = kubectl(sandbox.kubeconfig(), &labelled);
    let replacements: Vec<&str> = replacements.split_whitespace().collect();
    assert!(
        after.iter().all(|n| replacements.contains(&n.as_str())),
        "the pods moved to new nodes: {before:?} -> {after:?}, new: {replacements:?}"
    );
    until(
        sandbox.kubeconfig(),
        &["get", "nodeclaims", "-o", "name"],
        |t| t.lines().count() == 3,
    );
}

#[test]
fn a_node_past_expire_after_is_replaced() {
    a_node_past_expire_after_is_replaced_on(Backend::Double);
}

#[test]
fn a_node_past_expire_after_is_replaced_on_kube_apiserver() {
    a_node_past_expire_after_is_replaced_on(Backend::KubeApiserver);
}

fn a_node_past_expire_after_is_replaced_on(backend: Backend) {
    let sandbox = Sandbox::start_on("disruption-expire", backend);
    sandbox.quickstart(&[]);
    sandbox.patch_pool(r#"{"spec":{"template":{"spec":{"expireAfter":"30s"}}}}"#);
    sandbox.ok(&["apply", "-f", "examples/quickstart/web.yaml"]);
    let first = sandbox.running("web", 8);

    // 30 s after launch the NodeClaim is deleted (not budgeted), its node
    // drained, and the pods run again on a node launched for them.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let nodes = sandbox.nodes();
        if first.iter().all(|n| !nodes.contains(n)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{first:?} still there: {nodes:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let now = sandbox.running("web", 8);
    assert!(
        now.iter().all(|n| !first.contains(n)),
        "{first:?} -> {now:?}"
    );
}

#[test]
fn simulate_disruption_on_a_snapshot_decides_what_the_controller_then_does() {
    simulate_disruption_on_a_snapshot_decides_what_the_controller_then_does_on(Backend::Double);
}

#[test]
fn simulate_disruption_on_a_snapshot_decides_what_the_controller_then_does_on_kube_apiserver() {
    simulate_disruption_on_a_snapshot_decides_what_the_controller_then_does_on(
        Backend::KubeApiserver,
    );
}

fn simulate_disruption_on_a_snapshot_decides_what_the_controller_then_does_on(backend: Backend) {
    let sandbox = Sandbox::start_on("disruption-snapshot", backend);
    sandbox.quickstart(&["examples/quickstart/web.yaml"]);
    // Long enough that the controller does nothing before the snapshot.
    sandbox.patch_pool(r#"{"spec":{"disruption":{"consolidateAfter":"1h"}}}"#);
    let first = sandbox.running("web", 8);
    sandbox.ok(&["scale", "deployment", "web", "-n", "shop", "--replicas=1"]);
    sandbox.running("web", 1);

    // The snapshot a user takes, and simulate's decision two hours on.
    let snapshot = sandbox.ok(&[
        "get",
        "nodepools,ec2nodeclasses,nodeclaims,nodes,namespaces,pods,deployments,replicasets,daemonsets,pdb",
        "-A",
        "-o",
        "yaml",
    ]);
    let path = sandbox.dir.join("snapshot.yaml");
    std::fs::write(&path, snapshot).unwrap();
    let at = (k8s_openapi::jiff::Timestamp::now()
        + k8s_openapi::jiff::SignedDuration::from_hours(2))
    .to_string();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["simulate"])
        .arg(&path)
        .args(["--disruption", "--at", &at, "--output", "json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let decisions = json["disruption"]["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    let decision = &decisions[0];
    assert_eq!(decision["method"], "single-node-consolidation");
    assert_eq!(decision["decision"], "replace");
    assert_eq!(decision["candidates"][0]["node"], first[0].as_str());
    let planned = decision["replacements"][0]["instanceType"]
        .as_str()
        .unwrap()
        .to_string();

    // The controller, once consolidateAfter allows, does the same.
    sandbox.patch_pool(r#"{"spec":{"disruption":{"consolidateAfter":"5s"}}}"#);
    let types = until_within(
        sandbox.kubeconfig(),
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.node\\.kubernetes\\.io/instance-type} {end}",
        ],
        Duration::from_secs(150),
        |t| {
            let nodes: Vec<&str> = t.split_whitespace().collect();
            nodes.len() == 1 && !nodes[0].starts_with(&format!("{}=", first[0]))
        },
    );
    let launched = types.trim().split('=').nth(1).unwrap_or_default();
    assert_eq!(
        launched, planned,
        "simulate planned {planned}, the controller launched {launched}"
    );
    sandbox.running("web", 1);
}
