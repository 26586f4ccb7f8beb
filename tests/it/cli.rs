//! The `nodewright` binary as a user runs it: output on success, one clear
//! line and a non-zero exit on bad input, never a panic.

use std::process::{Command, Output};

fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the nodewright binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts a failure: exit code 1, exactly one `error:` line, no panic.
fn assert_one_line_error(output: &Output, expected: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ") && err.contains(expected),
        "{err}"
    );
}

#[test]
fn catalog_lists_the_seven_c7i_flex_sizes_cheapest_first() {
    let out = nodewright(&[
        "catalog",
        "--region",
        "us-east-1",
        "--requirement",
        "karpenter.k8s.aws/instance-family=In:c7i-flex",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("c7i-flex."))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let expected = [
        ("c7i-flex.large", "2", "4096Mi", "0.0848"),
        ("c7i-flex.xlarge", "4", "8192Mi", "0.1696"),
        ("c7i-flex.2xlarge", "8", "16384Mi", "0.3392"),
        ("c7i-flex.4xlarge", "16", "32768Mi", "0.6783"),
        ("c7i-flex.8xlarge", "32", "65536Mi", "1.3566"),
        ("c7i-flex.12xlarge", "48", "98304Mi", "2.0349"),
        ("c7i-flex.16xlarge", "64", "131072Mi", "2.7132"),
    ];
    assert_eq!(rows.len(), expected.len(), "{text}");
    for (row, (name, cpu, memory, price)) in rows.iter().zip(expected) {
        assert_eq!(row[0], name);
        assert_eq!(row[1], "amd64");
        assert_eq!(row[2], cpu);
        assert_eq!(row[3], memory);
        assert_eq!(row[5], price);
    }
    assert!(text.contains("7 instance types in us-east-1"), "{text}");
}

#[test]
fn catalog_json_carries_karpenters_labels() {
    let out = nodewright(&[
        "catalog",
        "-r",
        "node.kubernetes.io/instance-type=In:c7i-flex.large",
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let labels = &doc["instanceTypes"][0]["labels"];
    assert_eq!(labels["karpenter.k8s.aws/instance-family"], "c7i-flex");
    assert_eq!(labels["karpenter.k8s.aws/instance-category"], "c");
    assert_eq!(labels["karpenter.k8s.aws/instance-generation"], "7");
    assert_eq!(labels["karpenter.k8s.aws/instance-size"], "large");
    assert_eq!(labels["karpenter.k8s.aws/instance-cpu"], "2");
    assert_eq!(labels["karpenter.k8s.aws/instance-memory"], "4096");
    assert_eq!(doc["instanceTypes"][0]["onDemandPricePerHour"], 0.08479);
}

#[test]
fn catalog_bad_input_is_one_line() {
    assert_one_line_error(
        &nodewright(&["catalog", "--region", "mars-1"]),
        "unknown region \"mars-1\"",
    );
    assert_one_line_error(
        &nodewright(&["catalog", "--requirement", "kubernetes.io/arch"]),
        "expected KEY=OPERATOR:VALUES",
    );
    assert_one_line_error(
        &nodewright(&["catalog", "--requirement", "kubernetes.io/arch=Like:arm64"]),
        "unknown operator",
    );
}

#[test]
fn simulate_quickstart_prints_a_plan() {
    let out = nodewright(&["simulate", "examples/quickstart"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("NODECLAIM"), "{text}");
    assert!(text.contains("unschedulable pods:"), "{text}");
    assert!(text.contains("ml/train-0"), "{text}");
    assert!(text.contains("new NodeClaims, total $"), "{text}");
}

#[test]
fn simulate_with_nothing_to_launch_costs_a_positive_zero() {
    let out = nodewright(&[
        "simulate",
        "examples/quickstart/nodepool.yaml",
        "examples/quickstart/ec2nodeclass.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("0 new NodeClaims, total $0.0000/h"), "{text}");
    assert!(!text.contains("$-"), "{text}");
}

/// A cluster snapshot piped through standard input, as
/// `kubectl get … -A -o yaml | nodewright simulate -` does.
#[test]
fn simulate_reads_a_kubectl_snapshot_from_stdin() {
    use std::io::Write;
    use std::process::Stdio;

    let snapshot = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/snapshot/cluster.yaml"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["simulate", "-", "--output", "json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&snapshot));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["cluster"]["pendingPods"], 3, "{plan}");
    assert_eq!(plan["cluster"]["boundPods"], 12, "{plan}");
    assert_eq!(plan["existingNodes"][0]["name"], "general-purpose-t2mfn");
    assert_eq!(plan["existingNodes"][0]["inFlight"], true);
    assert_eq!(plan["nodeClaims"].as_array().unwrap().len(), 1, "{plan}");
    assert_eq!(plan["unschedulable"][0]["pod"], "shop/db-1");

    // A bad document on stdin is named by its place in the stream.
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["simulate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec: {containers: 7}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_one_line_error(&out, "stdin (document 1, items[0]): spec.containers");
}

#[test]
fn simulate_help_names_stdin() {
    let out = nodewright(&["simulate", "--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("FILE_OR_DIR|-"), "{text}");
    assert!(text.contains("- for standard input"), "{text}");
    assert!(text.contains("| nodewright simulate -"), "{text}");
}

#[test]
fn simulate_bad_input_is_one_line() {
    let dir = tempdir();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let broken = write("broken.yaml", "apiVersion: v1\nkind: Pod\n  metadata: [\n");
    assert_one_line_error(
        &nodewright(&["simulate", &broken]),
        "broken.yaml (document 1)",
    );
    let widget = write(
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
    );
    assert_one_line_error(
        &nodewright(&["simulate", &widget]),
        "unsupported kind example.com/v1/Widget",
    );
    let orphan = write(
        "orphan.yaml",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}\n",
    );
    assert_one_line_error(
        &nodewright(&["simulate", &orphan]),
        "EC2NodeClass \"missing\"",
    );
    assert_one_line_error(
        &nodewright(&["simulate", "does/not/exist.yaml"]),
        "does/not/exist.yaml",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "nodewright-cli-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn filter_test_runs_a_builtin_over_the_catalog() {
    let out = nodewright(&[
        "filter",
        "test",
        "builtin:flex-first",
        "--role",
        "priority-scorer",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let first = text
        .lines()
        .find(|l| l.trim_start().starts_with("1. "))
        .unwrap_or_default();
    assert!(first.contains("-flex."), "{text}");
    let candidates: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("call: "))
        .and_then(|l| l.split(" for ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(candidates > 1300, "{text}");
}

/// The steps of docs/authoring-filters.md on a scaffolded crate: `filter new`,
/// build the component, run it with `filter test`.
#[test]
fn a_scaffolded_filter_builds_and_runs_in_the_sandbox() {
    let dir = tempdir();
    let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "filter",
            "new",
            "max-vcpu",
            "--nodewright",
            env!("CARGO_MANIFEST_DIR"),
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let crate_dir = dir.join("max-vcpu");
    let wasm = nodewright_host::harness::build_component(&crate_dir).unwrap();
    let out = nodewright(&[
        "filter",
        "test",
        wasm.to_str().unwrap(),
        "--role",
        "instance-filter",
        "--config",
        r#"{"maxVcpu": 8}"#,
        "--timeout-ms",
        "5000",
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        json["kept"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "m5.large"),
        "{json}"
    );
    assert!(
        json["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "m5.24xlarge"
                && d["reason"] == "m5.24xlarge has 96 vCPUs, more than 8"),
        "{json}"
    );
    // A config the component rejects is reported, not a crash.
    let out = nodewright(&[
        "filter",
        "test",
        wasm.to_str().unwrap(),
        "--role",
        "instance-filter",
        "--config",
        r#"{"maxVcpus": 8}"#,
        "--timeout-ms",
        "5000",
    ]);
    assert_one_line_error(&out, "maxVcpus");
    std::fs::remove_dir_all(&dir).unwrap();
}
