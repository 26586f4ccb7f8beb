//! The deployment material as a cluster sees it: the chart's CRDs are the
//! checked-in ones, the chart's rendered manifests (rendered by the real Helm
//! library, see `deploy/tests/chart.py`) and every example directory
//! `kubectl apply` to a `nodewright sandbox` started empty, as to a new
//! cluster (which has only its system namespaces).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::control_plane::ControlPlane;
use crate::sandbox_kubectl::Backend;

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
    assert_eq!(checked_in.len(), 4, "crds/ holds the four CRDs");
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

/// A `nodewright sandbox` with no manifests, stopped (SIGTERM) when
/// dropped; on kube-apiserver, its control plane is stopped after it.
struct Sandbox {
    child: Child,
    dir: PathBuf,
    kubeconfig: PathBuf,
    _control_plane: Option<ControlPlane>,
}

impl Sandbox {
    fn start_on(label: &str, backend: Backend) -> Sandbox {
        let dir = std::env::temp_dir().join(format!(
            "nodewright-deploy-{label}-{backend:?}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_nodewright"));
        command.arg("sandbox");
        let (kubeconfig, control_plane) = match backend {
            Backend::Double => {
                let kubeconfig = dir.join("sandbox.kubeconfig");
                command
                    .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
                    .arg(&kubeconfig);
                (kubeconfig, None)
            }
            Backend::KubeApiserver => {
                let plane = ControlPlane::start(&format!("deploy-{label}"));
                command.arg("--cluster").arg(plane.nodewright_kubeconfig());
                (plane.kubeconfig().to_path_buf(), Some(plane))
            }
        };
        let mut child = command
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
            _control_plane: control_plane,
        };
        assert!(
            first.starts_with("export KUBECONFIG="),
            "the sandbox did not start: {first:?}"
        );
        sandbox
    }

    /// Runs kubectl with `stdin`; returns (success, stdout and stderr).
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        let mut child = crate::support::kubectl()
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

/// Cluster states `simulate` reads, not manifests to apply:
/// `examples/snapshot` (a cluster's `kubectl get -o yaml` output: bound
/// pods, uids, resource versions) and `examples/disruption` (Nodes and
/// launched NodeClaims with their status, for `simulate --disruption`).
const STATES: &[&str] = &["snapshot", "disruption"];

/// Every other example directory: manifests to apply.
const EXAMPLE_DIRS: &[&str] = &[
    "examples/quickstart",
    "examples/nodepools",
    "examples/ec2nodeclasses",
    "examples/nodeclaims",
    "examples/node-overlay",
    "examples/workloads/gpu-amd",
    "examples/workloads/placement-group",
];

#[test]
fn every_example_directory_applies_to_an_empty_sandbox() {
    every_example_directory_applies(Backend::Double);
}

#[test]
fn every_example_directory_applies_to_an_empty_sandbox_on_kube_apiserver() {
    every_example_directory_applies(Backend::KubeApiserver);
}

fn every_example_directory_applies(backend: Backend) {
    let listed: Vec<String> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for dir in &listed {
        assert!(
            STATES.contains(&dir.as_str())
                || EXAMPLE_DIRS
                    .iter()
                    .any(|d| d.starts_with(&format!("examples/{dir}"))),
            "examples/{dir} is not applied by this test: add it to EXAMPLE_DIRS"
        );
    }
    for dir in EXAMPLE_DIRS {
        let sandbox = Sandbox::start_on("examples", backend);
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
pub(crate) fn render_chart(namespace: &str, sets: &[&str]) -> String {
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
    the_rendered_chart_applies(Backend::Double);
}

#[test]
fn the_rendered_chart_applies_to_a_sandbox_on_kube_apiserver() {
    the_rendered_chart_applies(Backend::KubeApiserver);
}

fn the_rendered_chart_applies(backend: Backend) {
    let required = [
        "settings.clusterName=demo",
        "settings.clusterEndpoint=https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
        "controller.image.repository=111122223333.dkr.ecr.us-east-1.amazonaws.com/nodewright",
    ];
    let sandbox = Sandbox::start_on("chart", backend);
    // What `helm install` sends first: the chart's crds/, then the templates.
    // The sandbox serves the CRDs already, as a cluster upgraded from
    // Karpenter does: the chart's are accepted over them.
    let crds = sandbox.ok(&["apply", "-f", "deploy/helm/nodewright/crds"], None);
    let applied = crds
        .lines()
        .filter(|line| line.starts_with("customresourcedefinition.apiextensions.k8s.io/"))
        .count();
    assert_eq!(applied, 4, "{crds}");

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

/// Every `expr` in a Grafana dashboard, at any depth.
fn queries(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr", serde_json::Value::String(expr)) => out.push(expr.clone()),
                    _ => queries(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

/// The series names `/metrics` serves, from the registrations in
/// `src/metrics.rs` (the registry's text lists a family only once it has a
/// sample): gauges as they are, counters with `_total`, histograms with
/// `_bucket`, `_sum` and `_count`.
pub(crate) fn exported_series() -> std::collections::BTreeSet<String> {
    let source = std::fs::read_to_string(root().join("src/metrics.rs")).unwrap();
    let registration =
        regex::Regex::new(r#"\b(counters|gauges|histograms)\(\s*"([a-z_]+)""#).unwrap();
    let mut names = std::collections::BTreeSet::new();
    for c in registration.captures_iter(&source) {
        let name = &c[2];
        match &c[1] {
            "counters" => {
                names.insert(format!("{name}_total"));
            }
            "histograms" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    // What the registry serves agrees: every series it renders is one of these.
    let text = nodewright::metrics::metrics().render();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = line.split(['{', ' ']).next().unwrap();
        assert!(
            names.contains(series),
            "/metrics serves {series}, which the registrations in src/metrics.rs do not name"
        );
    }
    names
}

#[test]
fn dashboards_query_only_metrics_the_controller_exports() {
    let exported = exported_series();
    assert!(
        exported.contains("karpenter_nodepools_usage")
            && exported.contains("karpenter_nodeclaims_created_total"),
        "the registry's text lists no metric: {exported:?}"
    );
    // A metric name: the controller's prefix, or any name a selector follows.
    let named = regex::Regex::new(
        r"\b((?:karpenter|nodewright)_[a-z0-9_]+)\b|([a-zA-Z_:][a-zA-Z0-9_:]*)\{",
    )
    .unwrap();
    let dir = root().join("deploy/grafana");
    let mut dashboards = 0;
    let mut used = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let dashboard: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
        let panels = dashboard["panels"].as_array().map_or(0, Vec::len);
        assert!(panels > 0, "{}: no panels", path.display());
        let mut exprs = Vec::new();
        queries(&dashboard, &mut exprs);
        assert!(
            exprs.len() >= panels,
            "{}: a panel without a query",
            path.display()
        );
        for expr in &exprs {
            let names: Vec<String> = named
                .captures_iter(expr)
                .map(|c| c.get(1).or(c.get(2)).unwrap().as_str().to_string())
                .collect();
            assert!(
                !names.is_empty(),
                "{}: {expr:?} names no metric",
                path.display()
            );
            for name in names {
                assert!(
                    exported.contains(&name),
                    "{}: {expr:?} queries {name}, which nodewright does not export",
                    path.display()
                );
                used.insert(name);
            }
        }
        dashboards += 1;
    }
    assert!(
        dashboards >= 2,
        "deploy/grafana holds {dashboards} dashboards"
    );
    eprintln!(
        "{dashboards} dashboards query {} of {} exported series",
        used.len(),
        exported.len()
    );
}

/// The guides and READMEs that name chart values and controller flags.
const DOCS: &[&str] = &[
    "README.md",
    "docs/getting-started-eks.md",
    "docs/migrating-from-karpenter.md",
    "docs/controller.md",
    "docs/authoring-filters.md",
    "deploy/README.md",
    "deploy/helm/nodewright/README.md",
    "deploy/iam/README.md",
];

/// The node of `values.schema.json` at a dotted path (`a.b[0].c`), if the
/// schema knows it; free-form objects (no `properties`) hold any key.
fn schema_node<'a>(schema: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut node = schema;
    // Dots escaped as `\.` (annotation keys in `--set`) are not separators.
    let path = path.replace("\\.", "\u{0}");
    for segment in path.split('.') {
        let (name, indexed) = match segment.split_once('[') {
            Some((name, _)) => (name, true),
            None => (segment, false),
        };
        if name == "*" {
            return Some(node);
        }
        let Some(properties) = node.get("properties") else {
            return Some(node);
        };
        node = properties.get(name)?;
        if indexed {
            node = node.get("items").unwrap_or(node);
        }
    }
    Some(node)
}

/// The long flags `nodewright <subcommand…> --help` lists.
fn flags_of(subcommand: &str) -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(subcommand.split(' '))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    let flag = regex::Regex::new(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)").unwrap();
    flag.captures_iter(&help)
        .map(|c| c[1].to_string())
        .collect()
}

#[test]
fn every_flag_and_chart_value_the_docs_name_exists() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/helm/nodewright/values.schema.json")).unwrap(),
    )
    .unwrap();
    let top: Vec<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    // Karpenter's keys the chart's README says are refused outright.
    let readme = std::fs::read_to_string(root().join("deploy/helm/nodewright/README.md")).unwrap();
    let refused_row = regex::Regex::new(r"(?m)^\| `([A-Za-z.]+)` \| refused \|").unwrap();
    let refused: Vec<String> = refused_row
        .captures_iter(&readme)
        .map(|c| c[1].to_string())
        .collect();
    assert!(
        refused.len() >= 3,
        "the chart README's refused keys: {refused:?}"
    );
    for key in &refused {
        assert!(
            schema_node(&schema, key).is_none(),
            "deploy/helm/nodewright/README.md says {key} is refused, but values.schema.json accepts it"
        );
    }
    let subcommands = [
        "controller",
        "sandbox",
        "simulate",
        "catalog",
        "crds",
        "filter test",
        "filter new",
        "filter inspect",
        "filter bench",
    ];
    let all_flags: Vec<String> = subcommands.iter().flat_map(|s| flags_of(s)).collect();
    assert!(
        all_flags.iter().any(|f| f == "--interruption-queue"),
        "{all_flags:?}"
    );
    // Other tools' flags the docs use in prose.
    let others = [
        "--set",
        "--namespace",
        "--create-namespace",
        "--wait",
        "--reuse-values",
        "--service-account",
        // cargo's, in the filter guide's publishing section.
        "--workspace",
        "--target-dir",
    ];

    let set = regex::Regex::new(r"--set (?:\x22)?([A-Za-z0-9_.\\/\[\]-]+)=").unwrap();
    let backticked =
        regex::Regex::new(r"`([a-z][A-Za-z]*(?:\.[A-Za-z0-9*]+(?:\[\d+\])?)+)`").unwrap();
    let command = regex::Regex::new(
        r"nodewright (controller|sandbox|simulate|catalog|crds|filter [a-z]+)\b([^\n`]*)",
    )
    .unwrap();
    let flag_token = regex::Regex::new(r"(--[a-z][a-z0-9-]*)").unwrap();
    let prose_flag = regex::Regex::new(r"`(--[a-z][a-z0-9-]*)`").unwrap();
    let mut checked = 0;
    for doc in DOCS {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        for c in set.captures_iter(&text) {
            let key = &c[1];
            assert!(
                schema_node(&schema, key).is_some(),
                "{doc}: `--set {key}=…` names a value the chart does not have"
            );
            checked += 1;
        }
        for c in backticked.captures_iter(&text) {
            let key = &c[1];
            let first = key.split('.').next().unwrap();
            if !top.iter().any(|t| t == first) {
                continue; // not a chart value (a file name, a label, …)
            }
            assert!(
                schema_node(&schema, key).is_some() || refused.iter().any(|r| r == key),
                "{doc}: `{key}` is not a chart value (nor one the chart README lists as refused)"
            );
            checked += 1;
        }
        for c in command.captures_iter(&text) {
            let flags = flags_of(&c[1]);
            for f in flag_token.captures_iter(&c[2]) {
                assert!(
                    flags.iter().any(|known| *known == f[1]),
                    "{doc}: `nodewright {} … {}` — no such flag",
                    &c[1],
                    &f[1]
                );
                checked += 1;
            }
        }
        for f in prose_flag.captures_iter(&text) {
            let flag = &f[1];
            assert!(
                all_flags.iter().any(|known| known == flag) || others.contains(&flag),
                "{doc}: `{flag}` is not a flag of nodewright (or of helm or aws as the docs use them)"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 50,
        "only {checked} names checked: the patterns find nothing"
    );
    eprintln!("{checked} flags and chart values named in the docs exist");
}
