//! NodeOverlays in `simulate`: with `--feature-gates NodeOverlay=true` the
//! scheduler minimises the overlaid price and pods fit the overlaid
//! capacity; without it the overlays are listed as not applied; the JSON
//! names (`pricePerHour`, `listPricePerHour`, `nodeOverlays[]`) are the
//! documented contract.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::extensions::Extensions;
use nodewright::sim::{Manifests, Plan};
use nodewright_host::HostConfig;

/// A pool of three on-demand types: m5.large and m6i.large list at
/// $0.096/h, m7i.large at $0.1008/h.
const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    metadata:
      labels: {team: web}
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m6i.large, m7i.large]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"#;

/// m7i.large for a cent an hour: a negotiated rate.
const CHEAP_M7I: &str = r#"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: negotiated}
spec:
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m7i.large]}
  price: "0.01"
"#;

fn plan(yaml: &str, gate: bool) -> Plan {
    let mut manifests = Manifests::default();
    manifests.add_yaml("test.yaml", yaml).unwrap();
    let catalog = Arc::new(Catalog::embedded("us-east-1").unwrap());
    let extensions = Arc::new(Extensions::new(HostConfig::default()).unwrap());
    let provider = InstanceTypeProvider::new(catalog, extensions, Arc::default());
    let gates = nodewright::sim::SimulateGates {
        node_overlay: gate,
        ..Default::default()
    };
    nodewright::sim::plan_gated(manifests, &provider, false, gates).unwrap()
}

#[test]
fn the_scheduler_minimises_the_overlaid_price() {
    let listed = plan(POOL, true);
    assert_eq!(listed.node_claims.len(), 1);
    assert_ne!(listed.node_claims[0].instance_type, "m7i.large");
    assert!(listed.node_overlays.is_empty());

    let overlaid = plan(&format!("{POOL}{CHEAP_M7I}"), true);
    let claim = &overlaid.node_claims[0];
    assert_eq!(claim.instance_type, "m7i.large");
    assert_eq!(claim.instance_type_options[0], "m7i.large");
    assert!((claim.price_per_hour - 0.01).abs() < 1e-9, "{claim:?}");
    assert!(claim.list_price_per_hour > 0.09, "{claim:?}");
    assert!((overlaid.total_price_per_hour - 0.01).abs() < 1e-9);
    let report = &overlaid.node_overlays[0];
    assert_eq!(report.name, "negotiated");
    assert!(report.applied && report.reason.is_none(), "{report:?}");
}

#[test]
fn without_the_gate_overlays_are_listed_as_not_applied() {
    let plan = plan(&format!("{POOL}{CHEAP_M7I}"), false);
    let claim = &plan.node_claims[0];
    assert_ne!(claim.instance_type, "m7i.large");
    assert_eq!(claim.price_per_hour, claim.list_price_per_hour);
    let report = &plan.node_overlays[0];
    assert!(!report.applied);
    assert_eq!(report.reason.as_deref(), Some("FeatureGateDisabled"));
    assert!(report.message.contains("--feature-gates NodeOverlay=true"));
}

#[test]
fn bad_and_conflicting_overlays_are_reported_and_the_others_apply() {
    let yaml = format!(
        r#"{POOL}{CHEAP_M7I}
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {{name: also-negotiated}}
spec:
  requirements:
    - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
  price: "0.02"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {{name: unsigned}}
spec:
  requirements:
    - {{key: team, operator: In, values: [web]}}
  priceAdjustment: "10%"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {{name: unparseable}}
spec:
  requirements:
    - {{key: team, operator: Near, values: [web]}}
"#
    );
    let plan = plan(&yaml, true);
    let report = |name: &str| {
        plan.node_overlays
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("{name}: {:?}", plan.node_overlays))
    };
    // Same weight, both set m7i.large's price: the one later in the
    // alphabet is taken first and wins.
    assert!(report("negotiated").applied);
    let conflict = report("also-negotiated");
    assert_eq!(conflict.reason.as_deref(), Some("Conflict"));
    assert!(!conflict.applied);
    let unsigned = report("unsigned");
    assert_eq!(unsigned.reason.as_deref(), Some("RuntimeValidation"));
    assert!(
        unsigned.message.contains("spec.priceAdjustment") && unsigned.message.contains("+10%"),
        "{unsigned:?}"
    );
    assert_eq!(
        report("unparseable").reason.as_deref(),
        Some("RuntimeValidation")
    );
    assert_eq!(plan.node_claims[0].instance_type, "m7i.large");
    assert!((plan.node_claims[0].price_per_hour - 0.01).abs() < 1e-9);
}

#[test]
fn an_overlays_capacity_lets_a_pod_requesting_an_extended_resource_fit() {
    let fuse = r#"
---
apiVersion: v1
kind: Pod
metadata: {name: builder, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", smarter-devices/fuse: "1"}, limits: {smarter-devices/fuse: "1"}}}]
"#;
    let without = plan(&format!("{POOL}{fuse}"), true);
    assert!(
        without
            .unschedulable
            .iter()
            .any(|u| u.pod == "default/builder"),
        "{:?}",
        without.unschedulable
    );
    let overlay = r#"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fuse}
spec:
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.large]}
    - {key: team, operator: In, values: [web]}
  capacity: {smarter-devices/fuse: "2"}
"#;
    let with = plan(&format!("{POOL}{fuse}{overlay}"), true);
    assert!(with.unschedulable.is_empty(), "{:?}", with.unschedulable);
    let claim = with
        .node_claims
        .iter()
        .find(|c| c.pods.iter().any(|p| p == "default/builder"))
        .unwrap();
    assert_eq!(claim.instance_type, "m6i.large");
}

#[test]
fn plan_json_has_the_documented_node_overlay_shape() {
    let plan = plan(&format!("{POOL}{CHEAP_M7I}"), true);
    let doc = serde_json::to_value(&plan).unwrap();
    let claim = &doc["nodeClaims"][0];
    for key in ["pricePerHour", "listPricePerHour"] {
        assert!(claim[key].is_f64(), "{key}: {claim}");
    }
    let overlays = doc["nodeOverlays"].as_array().expect("nodeOverlays");
    let overlay = &overlays[0];
    assert_eq!(overlay["name"], "negotiated");
    assert_eq!(overlay["applied"], true);
    assert!(overlay["reason"].is_null(), "{overlay}");
    assert!(overlay["message"].is_string(), "{overlay}");
    let mut keys: Vec<&String> = overlay.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["applied", "message", "name", "reason"]);
    // Documented beside the plan's other fields.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for name in ["listPricePerHour", "nodeOverlays", "FeatureGateDisabled"] {
        assert!(readme.contains(name), "README.md does not document {name}");
    }
}

#[test]
fn the_simulate_command_takes_the_gate_and_prints_the_overlays() {
    let run = |gates: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
            .args(["simulate", "-"])
            .args(gates)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{POOL}{CHEAP_M7I}").as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let on = run(&["--feature-gates", "NodeOverlay=true"]);
    assert!(on.contains("node overlays:"), "{on}");
    assert!(on.contains("negotiated: applied"), "{on}");
    assert!(on.contains("$0.0100/h with overlays"), "{on}");
    let off = run(&[]);
    assert!(
        off.contains("negotiated: not applied (FeatureGateDisabled)"),
        "{off}"
    );
}

#[test]
fn the_example_overlays_apply_to_the_quickstart() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let run = |gate: bool| {
        nodewright::sim::simulate(&nodewright::sim::SimulateOptions {
            paths: vec![
                root.join("examples/quickstart"),
                root.join("examples/node-overlay"),
            ],
            region: "us-east-1".to_string(),
            ignore_preferences: false,
            node_overlay: gate,
            static_capacity: false,
        })
        .unwrap()
    };
    let plan = run(true);
    assert_eq!(plan.node_overlays.len(), 4);
    for overlay in &plan.node_overlays {
        assert!(overlay.applied, "{overlay:?}");
    }
    let off = run(false);
    assert!(off.node_overlays.iter().all(|o| !o.applied));
    // The same pods are placed either way.
    let placed = |plan: &Plan| {
        let mut pods: Vec<String> = plan
            .node_claims
            .iter()
            .flat_map(|c| c.pods.clone())
            .collect();
        pods.sort();
        pods
    };
    assert_eq!(placed(&plan), placed(&off));
}

#[test]
fn disruption_with_the_overlay_gate_is_refused_with_the_fix() {
    let output = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "simulate",
            "examples/quickstart",
            "--disruption",
            "--feature-gates",
            "NodeOverlay=true",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("NodeOverlay=true") && err.contains("leave the gate off"),
        "{err}"
    );
}
