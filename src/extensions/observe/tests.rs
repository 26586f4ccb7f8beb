//! Each way an extension call or load ends moves its own series, against
//! the purpose-built components of `filters/host/test-components/`. Every
//! test counts into families of its own, so the counts are exact.

use std::path::Path;
use std::sync::Arc;

use nodewright_filter::Ami;
use nodewright_host::harness::{self, ami, it};
use nodewright_host::{HostConfig, InstanceTypeSet, sha256_hex};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use serde_json::json;

use crate::apis::EC2NodeClass;
use crate::extensions::{CandidateSource, Extensions};
use crate::metrics::{ExtensionMetrics, Histograms, labels};
use crate::scheduling::{CapacityType, InstanceType, Offering, Overhead, Requirements, Resources};

/// Candidate records made from the names alone.
struct Names;

impl CandidateSource for Names {
    fn version(&self) -> &str {
        "v1"
    }

    fn region(&self) -> &str {
        "us-east-1"
    }

    fn records(&self, instance_types: &[InstanceType]) -> InstanceTypeSet {
        InstanceTypeSet::new(instance_types.iter().map(|t| it(&t.name).build()).collect())
    }
}

fn types() -> Arc<Vec<InstanceType>> {
    let one = |name: &str| {
        InstanceType::new(
            name,
            Requirements::default(),
            vec![Offering::new("zone-a", CapacityType::OnDemand, 0.1)],
            Resources::default(),
            Overhead::default(),
        )
    };
    Arc::new(vec![one("m7g.large"), one("c7i-flex.xlarge")])
}

/// A test component's path and digest.
fn component(name: &str) -> (String, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("filters/host/test-components")
        .join(name);
    let wasm = harness::build_component(&dir).unwrap();
    let digest = sha256_hex(&std::fs::read(&wasm).unwrap());
    (wasm.display().to_string(), digest)
}

/// An entry of the misbehaving filter that behaves as `mode`.
fn misbehaving(name: &str, mode: &str, timeout: &str) -> serde_json::Value {
    let (path, sha256) = component("misbehaving-filter");
    json!({"name": name, "path": path, "sha256": sha256, "timeout": timeout,
        "failurePolicy": "Ignore", "config": {"mode": mode}})
}

fn node_class(name: &str, extensions: serde_json::Value) -> EC2NodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name, "generation": 1},
        "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": "s"}], "securityGroupSelectorTerms": [{"id": "g"}],
            "extensions": extensions},
    }))
    .unwrap()
}

fn extensions() -> (Extensions, ExtensionMetrics) {
    let metrics = ExtensionMetrics::detached();
    let extensions = Extensions::new(HostConfig::default())
        .unwrap()
        .with_metrics(metrics.clone());
    (extensions, metrics)
}

/// `nodewright_extension_calls_total` for one series (0 when absent).
fn calls(metrics: &ExtensionMetrics, role: &str, module: &str, result: &str) -> u64 {
    let series = labels(&[
        ("nodeclass", "metered"),
        ("role", role),
        ("module", module),
        ("result", result),
    ]);
    metrics.calls.get(&series).map_or(0, |c| c.get())
}

/// Observations of one series of `family` (0 when absent), read from its
/// text: the crate shows a histogram's count only there.
fn observations(family: &Histograms, series: &str) -> u64 {
    let mut registry = Registry::default();
    registry.register("h", "", family.clone());
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    let prefix = format!("h_count{series} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |n| n.parse().unwrap())
}

fn durations(metrics: &ExtensionMetrics, role: &str) -> u64 {
    observations(&metrics.call_duration, &format!("{{role=\"{role}\"}}"))
}

fn lookups(metrics: &ExtensionMetrics, result: &str) -> u64 {
    let series = labels(&[("nodeclass", "metered"), ("result", result)]);
    metrics.cache_lookups.get(&series).map_or(0, |c| c.get())
}

fn waits(metrics: &ExtensionMetrics) -> u64 {
    observations(&metrics.concurrency_wait, "{}")
}

#[test]
fn each_way_a_call_ends_is_its_own_result() {
    let (extensions, metrics) = extensions();
    let class = node_class(
        "metered",
        json!({"instanceFilters": [
            misbehaving("fine", "name-length", "5s"),
            misbehaving("looping", "loop", "50ms"),
            misbehaving("greedy", "alloc", "5s"),
            misbehaving("panicking", "panic", "5s"),
            misbehaving("refusing", "error", "5s"),
            misbehaving("miscounting", "wrong-length", "5s"),
        ]}),
    );
    let outcome = extensions.apply(&class, "general", &Names, types(), &Vec::new());
    let failed = outcome.reports.iter().filter(|r| r.error.is_some()).count();
    assert_eq!(failed, 5, "{:?}", outcome.reports);

    let filter = "instance-filter";
    for (module, result) in [
        ("fine", "ok"),
        ("looping", "timeout"),
        ("greedy", "memory"),
        ("panicking", "trap"),
        ("refusing", "rejected"),
        ("miscounting", "malformed"),
    ] {
        assert_eq!(calls(&metrics, filter, module, result), 1, "{module}");
        assert_eq!(
            calls(&metrics, filter, "fine", result),
            u64::from(result == "ok")
        );
    }
    // The default scorer ran too, once.
    assert_eq!(calls(&metrics, "priority-scorer", "flex-first", "ok"), 1);
    assert_eq!(durations(&metrics, filter), 6);
    assert_eq!(durations(&metrics, "priority-scorer"), 1);
    assert_eq!(
        (lookups(&metrics, "miss"), lookups(&metrics, "hit")),
        (1, 0)
    );
    assert_eq!(waits(&metrics), 1);

    // A failed outcome is not kept: the next evaluation runs every module again.
    extensions.apply(&class, "general", &Names, types(), &Vec::new());
    assert_eq!(calls(&metrics, filter, "looping", "timeout"), 2);
    assert_eq!(
        (lookups(&metrics, "miss"), lookups(&metrics, "hit")),
        (2, 0)
    );
}

#[test]
fn a_module_that_cannot_be_loaded_is_a_load_failure_and_no_call() {
    let (extensions, metrics) = extensions();
    let (path, _) = component("misbehaving-filter");
    let ignore = |entry: serde_json::Value| {
        let mut entry = entry;
        entry["failurePolicy"] = json!("Ignore");
        entry
    };
    let class = node_class(
        "metered",
        json!({"instanceFilters": [
            ignore(json!({"name": "absent", "path": "/nonexistent/filter.wasm", "sha256": "0".repeat(64)})),
            ignore(json!({"name": "repinned", "path": path, "sha256": "0".repeat(64)})),
            ignore(json!({"name": "from-cm", "sha256": "0".repeat(64),
                "configMap": {"name": "filters", "namespace": "kube-system", "key": "f.wasm"}})),
            ignore(json!({"name": "unknown", "builtin": "no-such-builtin"})),
        ]}),
    );
    let outcome = extensions.apply(&class, "general", &Names, types(), &Vec::new());
    assert!(outcome.blocked.is_none(), "{:?}", outcome.blocked);
    for (module, reason) in [
        ("absent", "read"),
        ("repinned", "digest_mismatch"),
        ("from-cm", "configmap_not_found"),
        ("unknown", "unknown_builtin"),
    ] {
        let series = labels(&[
            ("nodeclass", "metered"),
            ("role", "instance-filter"),
            ("module", module),
            ("reason", reason),
        ]);
        let failures = metrics.load_failures.get(&series).map_or(0, |c| c.get());
        assert_eq!(failures, 1, "{module}");
    }
    // Nothing was called but the default scorer.
    assert_eq!(durations(&metrics, "instance-filter"), 0);
    assert_eq!(durations(&metrics, "priority-scorer"), 1);
}

#[test]
fn a_clean_outcome_is_a_cache_hit_and_calls_nothing() {
    let (extensions, metrics) = extensions();
    let class = node_class("metered", json!({}));
    let list = types();
    let first = extensions.apply(&class, "general", &Names, list.clone(), &Vec::new());
    let second = extensions.apply(&class, "general", &Names, list, &Vec::new());
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(
        (lookups(&metrics, "miss"), lookups(&metrics, "hit")),
        (1, 1)
    );
    assert_eq!(calls(&metrics, "priority-scorer", "flex-first", "ok"), 1);
    // A hit takes no turn.
    assert_eq!(waits(&metrics), 1);
}

#[test]
fn a_failed_selector_and_the_default_in_its_place_are_both_counted() {
    let (extensions, metrics) = extensions();
    let (path, sha256) = component("misbehaving-selector");
    let class = node_class(
        "metered",
        json!({"amiSelector": {"name": "picky", "path": path, "sha256": sha256,
            "timeout": "5s", "failurePolicy": "Ignore", "config": {"mode": "out-of-range"}}}),
    );
    let amis: Vec<Ami> = vec![ami("ami-1", 1).build(), ami("ami-2", 2).build()];
    let selection = extensions.select_amis(&class, "us-east-1", amis, &Vec::new(), 10);
    assert!(selection.blocked.is_none());
    assert_eq!(selection.amis.len(), 2, "the default kept both images");
    assert_eq!(calls(&metrics, "ami-selector", "picky", "malformed"), 1);
    assert_eq!(calls(&metrics, "ami-selector", "available-amis", "ok"), 1);
    assert_eq!(durations(&metrics, "ami-selector"), 2);
    assert_eq!(waits(&metrics), 1);
}

#[test]
fn the_controller_counts_into_the_process_registry() {
    // A class of its own: other tests count into the same registry.
    let class = node_class("counted-by-the-process", json!({}));
    let extensions = Extensions::new(HostConfig::default()).unwrap();
    extensions.apply(&class, "general", &Names, types(), &Vec::new());
    let registry = &crate::metrics::metrics().extensions;
    let series = |pairs: &[(&str, &str)]| {
        let mut all = vec![("nodeclass", "counted-by-the-process")];
        all.extend_from_slice(pairs);
        labels(&all)
    };
    let miss = series(&[("result", "miss")]);
    assert_eq!(registry.cache_lookups.get(&miss).map(|c| c.get()), Some(1));
    let call = series(&[
        ("role", "priority-scorer"),
        ("module", "flex-first"),
        ("result", "ok"),
    ]);
    assert_eq!(registry.calls.get(&call).map(|c| c.get()), Some(1));
    let text = crate::metrics::metrics().render();
    assert!(
        text.contains("nodewright_extension_call_duration_seconds_count{role=\"priority-scorer\"}"),
        "{text}"
    );
}
