//! The deployment material as a cluster sees it: the chart's CRDs are the
//! checked-in ones, the chart's rendered manifests (rendered by the real Helm
//! library, see `deploy/tests/chart.py`) and every example directory
//! `kubectl apply` to a `nodewright sandbox` started empty, as to a new
//! cluster (which has only its system namespaces).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `crds/*.yaml`, by file name and content.
fn yaml_files(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn the_charts_crds_are_the_checked_in_crds() {
    let checked_in = yaml_files(&root().join("crds"));
    let chart = yaml_files(&root().join("deploy/helm/nodewright/crds"));
    assert_eq!(checked_in.len(), 3, "crds/ holds the three CRDs");
    let names = |files: &[(String, String)]| files.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&chart),
        names(&checked_in),
        "the chart's crds/ lists other files"
    );
    for ((name, want), (_, got)) in checked_in.iter().zip(&chart) {
        assert!(
            want == got,
            "deploy/helm/nodewright/crds/{name} differs from crds/{name}: cp crds/*.yaml deploy/helm/nodewright/crds/"
        );
    }
}

/// A `nodewright sandbox` with no manifests, stopped (SIGTERM) when dropped.
struct Sandbox {
    child: Child,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Sandbox {
    fn start(label: &str) -> Sandbox {
        let dir =
            std::env::temp_dir().join(format!("nodewright-deploy-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("sandbox.kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
            .args(["sandbox", "--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nodewright sandbox");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let sandbox = Sandbox {
            child,
            dir,
            kubeconfig,
        };
        assert!(
            first.starts_with("export KUBECONFIG="),
            "the sandbox did not start: {first:?}"
        );
        sandbox
    }

    /// Runs kubectl with `stdin`; returns (success, stdout and stderr).
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        let mut child = Command::new("kubectl")
            .args(args)
            .arg("--request-timeout=30s")
            .env("KUBECONFIG", &self.kubeconfig)
            .current_dir(root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running kubectl");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        let output = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, text) = self.kubectl(args, stdin);
        assert!(ok, "kubectl {args:?} failed:\n{text}");
        text
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok()
}

/// Every example directory that holds manifests to apply. `examples/snapshot`
/// is left out: it is a cluster's `kubectl get -o yaml` output (bound pods,
/// uids, resource versions) for `simulate`, not manifests to apply.
const EXAMPLE_DIRS: &[&str] = &[
    "examples/quickstart",
    "examples/nodepools",
    "examples/ec2nodeclasses",
    "examples/nodeclaims",
    "examples/workloads/gpu-amd",
];

#[test]
fn every_example_directory_applies_to_an_empty_sandbox() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not on PATH; install kubectl 1.32 to run this test");
        return;
    }
    let listed: Vec<String> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for dir in &listed {
        assert!(
            dir == "snapshot"
                || EXAMPLE_DIRS
                    .iter()
                    .any(|d| d.starts_with(&format!("examples/{dir}"))),
            "examples/{dir} is not applied by this test: add it to EXAMPLE_DIRS"
        );
    }
    for dir in EXAMPLE_DIRS {
        let sandbox = Sandbox::start("examples");
        let applied = sandbox.ok(&["apply", "-f", dir], None);
        // Every object is accepted: created, or configured where a second
        // file of the directory names the same object (a variant with its
        // status). Controllers change objects afterwards (a NodePool's hash
        // annotation), so applying again is not compared.
        assert!(
            !applied.trim().is_empty()
                && applied
                    .lines()
                    .all(|line| line.ends_with(" created") || line.ends_with(" configured")),
            "{dir}:\n{applied}"
        );
    }
}

/// The Python that `scripts/check-deploy` installs the chart's tools into.
fn deploy_python() -> PathBuf {
    let python = std::env::var_os("NODEWRIGHT_DEPLOY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/deploy/bin/python"));
    assert!(
        python.exists(),
        "{} not found: run scripts/check-deploy (scripts/test does), which installs Helm's library into .venv/deploy, or set NODEWRIGHT_DEPLOY_PYTHON",
        python.display()
    );
    python
}

/// The chart rendered by Helm with `--set` expressions, as one YAML stream.
fn render_chart(namespace: &str, sets: &[&str]) -> String {
    let mut command = Command::new(deploy_python());
    command
        .arg(root().join("deploy/tests/chart.py"))
        .args(["--namespace", namespace]);
    for set in sets {
        command.args(["--set", set]);
    }
    let output = command.output().expect("run deploy/tests/chart.py");
    assert!(
        output.status.success(),
        "rendering the chart failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_rendered_chart_applies_to_a_sandbox() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not on PATH; install kubectl 1.32 to run this test");
        return;
    }
    let required = [
        "settings.clusterName=demo",
        "settings.clusterEndpoint=https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
        "controller.image.repository=111122223333.dkr.ecr.us-east-1.amazonaws.com/nodewright",
    ];
    let sandbox = Sandbox::start("chart");
    // What `helm install` sends first: the chart's crds/, then the templates.
    // The sandbox serves the CRDs already, as a cluster upgraded from
    // Karpenter does: the chart's are accepted over them.
    let crds = sandbox.ok(&["apply", "-f", "deploy/helm/nodewright/crds"], None);
    let applied = crds
        .lines()
        .filter(|line| line.starts_with("customresourcedefinition.apiextensions.k8s.io/"))
        .count();
    assert_eq!(applied, 3, "{crds}");

    // Into kube-system, as Karpenter's getting-started installs, and into a
    // namespace of its own (`helm install --create-namespace`).
    for namespace in ["kube-system", "nodewright"] {
        if namespace != "kube-system" {
            sandbox.ok(&["create", "namespace", namespace], None);
        }
        let manifests = render_chart(namespace, &required);
        let applied = sandbox.ok(&["apply", "-f", "-"], Some(&manifests));
        // Objects in the release's namespace are new each time; the
        // cluster-scoped ones and those in kube-system only the first time.
        let first = namespace == "kube-system";
        for (object, created) in [
            ("serviceaccount/nodewright", true),
            ("role.rbac.authorization.k8s.io/nodewright", true),
            ("rolebinding.rbac.authorization.k8s.io/nodewright", true),
            ("service/nodewright", true),
            ("deployment.apps/nodewright", true),
            ("poddisruptionbudget.policy/nodewright", true),
            ("clusterrole.rbac.authorization.k8s.io/nodewright", first),
            (
                "clusterrolebinding.rbac.authorization.k8s.io/nodewright",
                first,
            ),
            ("role.rbac.authorization.k8s.io/nodewright-dns", first),
            (
                "rolebinding.rbac.authorization.k8s.io/nodewright-dns",
                first,
            ),
        ] {
            let line = format!("{object} created");
            assert_eq!(
                applied.lines().any(|l| l == line),
                created,
                "{namespace}: {line:?} in\n{applied}"
            );
        }
        let again = sandbox.ok(&["apply", "-f", "-"], Some(&manifests));
        assert!(
            again
                .lines()
                .all(|line| line.ends_with(" unchanged") || line.ends_with(" configured")),
            "{again}"
        );
        let deployment = sandbox.ok(
            &[
                "get",
                "deployment",
                "nodewright",
                "-n",
                namespace,
                "-o",
                "jsonpath={.spec.replicas} {.spec.template.spec.serviceAccountName}",
            ],
            None,
        );
        assert_eq!(deployment, "2 nodewright");
    }
}
