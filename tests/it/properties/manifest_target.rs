//! The body of the `manifests` fuzz target, shared by the test run
//! (properties::manifests, on stable) and by cargo-fuzz
//! (fuzz/fuzz_targets/manifests.rs): whatever the YAML, reading it ends in
//! objects or in an error that says where, and never in a panic.

use nodewright::apis::validation::validate_node_pool;
use nodewright::scheduling::{daemonset_pod_from_k8s, pod_from_k8s};
use nodewright::sim::manifests::Manifests;
use nodewright::sim::workloads::PodSource;

/// Most pods the workloads of one input may expand to before the check
/// stops expanding: a Deployment of two billion replicas is a deliberate
/// (if silly) simulation, not a parsing fault.
const MAX_EXPANDED_PODS: i64 = 10_000;

pub fn check(text: &str) {
    let mut manifests = Manifests::default();
    if let Err(e) = manifests.add_yaml("input.yaml", text) {
        let message = e.to_string();
        assert!(
            message.starts_with("input.yaml (document "),
            "error without a location: {message}"
        );
        return;
    }
    for pool in &manifests.node_pools {
        if let Err(errors) = validate_node_pool(&pool.spec) {
            for e in errors {
                assert!(e.to_string().starts_with("spec."), "no field in {e}");
            }
        }
        let written = serde_json::to_value(pool).expect("a NodePool serializes");
        let again: nodewright::apis::NodePool =
            serde_json::from_value(written).expect("a written NodePool parses");
        assert_eq!(&again, pool);
    }
    for ds in &manifests.daemon_sets {
        let _ = daemonset_pod_from_k8s(ds);
    }
    let replicas: i64 = manifests.pod_sources.iter().map(replicas).sum();
    if replicas <= MAX_EXPANDED_PODS {
        for pod in manifests.pods() {
            let _ = pod_from_k8s(&pod);
        }
    }
}

/// The most pods a source can expand to, read from its spec.
fn replicas(source: &PodSource) -> i64 {
    let n = match source {
        PodSource::Pod(_) => Some(1),
        PodSource::Deployment(d) => d.spec.replicas,
        PodSource::ReplicaSet(r) => r.spec.replicas,
        PodSource::StatefulSet(s) => s.spec.replicas,
        PodSource::Job(j) => j.spec.as_ref().and_then(|s| s.parallelism),
    };
    i64::from(n.unwrap_or(1)).max(0)
}
