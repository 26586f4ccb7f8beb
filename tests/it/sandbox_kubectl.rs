//! `nodewright sandbox` as a user runs it: the binary prints
//! `export KUBECONFIG=…`; with the machine's `kubectl`, the quickstart's
//! NodePool, EC2NodeClass and web Deployment are applied, its pods go
//! Running on nodes nodewright launched (`kubectl wait`), `kubectl scale`
//! gets more nodes while a cordoned node takes no new pod, `kubectl delete
//! nodeclaims` drains nodes away and the pods come back on new ones, and
//! SIGTERM stops everything and removes the kubeconfig.
//!
//! Each scenario runs on both backends: the API server double, and the real
//! control plane of `scripts/control-plane` (the `_on_kube_apiserver`
//! tests, `nodewright sandbox --cluster`), where kube-scheduler binds and
//! kube-controller-manager runs the Deployments.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::control_plane::ControlPlane;

pub(crate) fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let output = crate::support::kubectl()
        .args(args)
        .arg("--request-timeout=30s")
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("running kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Runs `kubectl args` until its output satisfies `done`, for at most a minute.
pub(crate) fn until(kubeconfig: &Path, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    until_within(kubeconfig, args, Duration::from_secs(60), done)
}

/// Runs `kubectl args` until its output satisfies `done`, for at most `limit`.
pub(crate) fn until_within(
    kubeconfig: &Path,
    args: &[&str],
    limit: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let (ok, text) = kubectl(kubeconfig, args);
        if ok && done(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?}: last said\n{text}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Which API server a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// The API server double the sandbox serves.
    Double,
    /// A real control plane of its own (`scripts/control-plane`), with
    /// `nodewright sandbox --cluster`.
    KubeApiserver,
}

/// A child process that is killed when dropped if it still runs (a test
/// that panics leaves no sandbox behind).
pub(crate) struct Process(pub(crate) std::process::Child);

impl std::ops::Deref for Process {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Process {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A started `nodewright sandbox` process.
pub(crate) struct Started {
    pub(crate) child: Process,
    /// A directory of the test's own.
    pub(crate) dir: PathBuf,
    /// What kubectl uses: the sandbox's on the double, the control plane's
    /// admin kubeconfig on kube-apiserver.
    pub(crate) kubeconfig: PathBuf,
    /// The first line the sandbox printed.
    pub(crate) first: String,
    /// The control plane, on kube-apiserver; stopped when dropped (after
    /// the sandbox: keep it last).
    pub(crate) control_plane: Option<ControlPlane>,
}

/// `nodewright sandbox` started on `backend` as a user starts it, with a
/// directory of its own (named after `name`).
pub(crate) fn start_sandbox_on(name: &str, backend: Backend) -> Started {
    start_sandbox_with(name, backend, &[])
}

/// [`start_sandbox_on`] with more `args` to `nodewright sandbox`.
pub(crate) fn start_sandbox_with(name: &str, backend: Backend, args: &[&str]) -> Started {
    let dir = std::env::temp_dir().join(format!(
        "nodewright-{name}-{backend:?}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodewright"));
    command.arg("sandbox");
    let (kubeconfig, control_plane) = match backend {
        Backend::Double => {
            let kubeconfig = dir.join("sandbox.kubeconfig");
            command.arg("--kubeconfig").arg(&kubeconfig);
            (kubeconfig, None)
        }
        Backend::KubeApiserver => {
            let plane = ControlPlane::start(name);
            command.arg("--cluster").arg(plane.nodewright_kubeconfig());
            (plane.kubeconfig().to_path_buf(), Some(plane))
        }
    };
    let log = std::fs::File::create(dir.join("sandbox.log")).unwrap();
    let mut child = command
        .args(["--launch-delay", "0s", "--register-delay", "0s"])
        .args(args)
        .current_dir(&root)
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(
        first.starts_with("export KUBECONFIG="),
        "the sandbox started; its log:\n{}",
        std::fs::read_to_string(dir.join("sandbox.log")).unwrap_or_default()
    );
    Started {
        child: Process(child),
        dir,
        kubeconfig,
        first,
        control_plane,
    }
}

#[test]
fn the_quickstart_runs_in_the_sandbox_binary_under_kubectl() {
    the_quickstart_runs_under_kubectl(Backend::Double);
}

#[test]
fn the_quickstart_runs_in_the_sandbox_binary_under_kubectl_on_kube_apiserver() {
    the_quickstart_runs_under_kubectl(Backend::KubeApiserver);
}

fn the_quickstart_runs_under_kubectl(backend: Backend) {
    let Started {
        mut child,
        dir,
        kubeconfig,
        first,
        control_plane,
    } = start_sandbox_on("sandbox-bin", backend);
    let printed = match &control_plane {
        None => kubeconfig.clone(),
        Some(plane) => plane.nodewright_kubeconfig(),
    };
    assert_eq!(
        first.trim(),
        format!("export KUBECONFIG={}", printed.display())
    );

    let ok = |args: &[&str]| {
        let (ok, text) = kubectl(&kubeconfig, args);
        assert!(ok, "kubectl {args:?}: {text}");
        text
    };
    ok(&["create", "namespace", "shop"]);
    let applied = ok(&[
        "apply",
        "-f",
        "examples/quickstart/nodepool.yaml",
        "-f",
        "examples/quickstart/ec2nodeclass.yaml",
        "-f",
        "examples/quickstart/web.yaml",
    ]);
    assert!(applied.contains("deployment.apps/web created"), "{applied}");
    let running = |count: usize| {
        move |text: &str| {
            let phases: Vec<&str> = text.split_whitespace().collect();
            phases.len() == count && phases.iter().all(|p| *p == "Running")
        }
    };
    let jsonpath = ["-o", "jsonpath={range .items[*]}{.status.phase} {end}"];
    let web = ["get", "pods", "-n", "shop", "-l", "app=web"];
    until(&kubeconfig, &[&web[..], &jsonpath[..]].concat(), running(8));
    ok(&[
        "wait",
        "--for=condition=Ready",
        "pods",
        "-l",
        "app=web",
        "-n",
        "shop",
        "--timeout=60s",
    ]);
    let listing = ok(&["get", "nodes,nodeclaims,pods", "-A"]);
    assert!(listing.contains("nodeclaim.karpenter.sh/"), "{listing}");

    // A cordoned node takes no new pod: scaling up lands elsewhere.
    let first_node = ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let first_node = first_node.trim();
    let selector = format!("spec.nodeName={first_node}");
    let on_node = [
        "get",
        "pods",
        "-n",
        "shop",
        "-l",
        "app=web",
        "--field-selector",
        &selector,
        "-o",
        "name",
    ];
    let before: Vec<String> = ok(&on_node).lines().map(str::to_string).collect();
    ok(&["cordon", first_node]);
    ok(&["scale", "deployment", "web", "-n", "shop", "--replicas=12"]);
    until(
        &kubeconfig,
        &[&web[..], &jsonpath[..]].concat(),
        running(12),
    );
    let after = ok(&on_node);
    assert!(
        after.lines().all(|pod| before.iter().any(|b| b == pod)),
        "no new pod on the cordoned node {first_node}: before {before:?}, after {after}"
    );
    ok(&["uncordon", first_node]);
    let nodes = until(
        &kubeconfig,
        &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
        |t| !t.trim().is_empty(),
    );
    let claims = until(
        &kubeconfig,
        &[
            "get",
            "nodeclaims",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
        |t| !t.trim().is_empty(),
    );
    assert_eq!(
        nodes.split_whitespace().count(),
        claims.split_whitespace().count(),
        "one node per NodeClaim: {nodes} / {claims}"
    );

    // Deleting every NodeClaim drains every node; the pods come back on
    // new ones.
    let old: Vec<&str> = nodes.split_whitespace().collect();
    let (ok, text) = kubectl(
        &kubeconfig,
        &["delete", "nodeclaims", "--all", "--wait=false"],
    );
    assert!(ok, "{text}");
    until(
        &kubeconfig,
        &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
        |t| !t.split_whitespace().any(|n| old.contains(&n)) && !t.trim().is_empty(),
    );
    until(
        &kubeconfig,
        &[&web[..], &jsonpath[..]].concat(),
        running(12),
    );

    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "SIGTERM ends the sandbox cleanly: {status}"
    );
    if control_plane.is_none() {
        assert!(!kubeconfig.exists(), "the kubeconfig is removed");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn scaling_a_deployment_to_zero_removes_its_empty_nodes_after_consolidate_after() {
    empty_nodes_go(Backend::Double);
}

#[test]
fn scaling_a_deployment_to_zero_removes_its_empty_nodes_after_consolidate_after_on_kube_apiserver()
{
    empty_nodes_go(Backend::KubeApiserver);
}

fn empty_nodes_go(backend: Backend) {
    let Started {
        mut child,
        dir,
        kubeconfig,
        control_plane: _control_plane,
        ..
    } = start_sandbox_on("sandbox-empty", backend);
    let ok = |args: &[&str]| {
        let (ok, text) = kubectl(&kubeconfig, args);
        assert!(ok, "kubectl {args:?}: {text}");
        text
    };
    ok(&["create", "namespace", "shop"]);
    ok(&[
        "apply",
        "-f",
        "examples/quickstart/nodepool.yaml",
        "-f",
        "examples/quickstart/ec2nodeclass.yaml",
        "-f",
        "examples/quickstart/web.yaml",
    ]);
    ok(&[
        "patch",
        "nodepool",
        "general-purpose",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"disruption":{"consolidateAfter":"5s"}}}"#,
    ]);
    let phases = [
        "get",
        "pods",
        "-n",
        "shop",
        "-l",
        "app=web",
        "-o",
        "jsonpath={range .items[*]}{.status.phase} {end}",
    ];
    until(&kubeconfig, &phases, |t| {
        let p: Vec<&str> = t.split_whitespace().collect();
        p.len() == 8 && p.iter().all(|p| *p == "Running")
    });
    let names = ["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"];
    let nodes = ok(&names);
    assert!(!nodes.trim().is_empty());

    // Scaled to zero: every node is empty, and goes once consolidateAfter
    // (5 s), the pass (10 s) and the validation wait (15 s) have run.
    ok(&["scale", "deployment", "web", "-n", "shop", "--replicas=0"]);
    until_within(&kubeconfig, &names, Duration::from_secs(120), |t| {
        t.trim().is_empty()
    });
    let claims = ok(&["get", "nodeclaims", "-o", "name"]);
    assert!(claims.trim().is_empty(), "{claims}");

    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}
