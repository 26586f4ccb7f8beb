//! Interruption in `nodewright sandbox`, driven by `kubectl` as a user
//! would: a message injected with the `sandbox.nodewright.io/interruption`
//! annotation goes through the controller's interruption handler — a spot
//! interruption takes the node away and its pods run again elsewhere; a
//! scheduled change on a NodePool that asks to cordon leaves the pods
//! running on a cordoned node; a kind that does not exist is refused with
//! a Warning naming the kinds.

use std::time::Duration;

use super::sandbox_disruption::Sandbox;
use super::sandbox_kubectl::{Backend, until_within};

#[test]
fn injected_interruptions_follow_the_node_pools_policy() {
    injected_interruptions_follow_the_node_pools_policy_on(Backend::Double);
}

#[test]
fn injected_interruptions_follow_the_node_pools_policy_on_kube_apiserver() {
    injected_interruptions_follow_the_node_pools_policy_on(Backend::KubeApiserver);
}

fn injected_interruptions_follow_the_node_pools_policy_on(backend: Backend) {
    let sandbox = Sandbox::start_on("interruption", backend);
    sandbox.quickstart(&["examples/quickstart/web.yaml"]);
    let first = sandbox.running("web", 8);
    let annotate = |node: &str, kind: &str| {
        sandbox.ok(&[
            "annotate",
            "node",
            node,
            &format!("sandbox.nodewright.io/interruption={kind}"),
        ]);
    };

    // Spot interruption: forceful, the pods run again on another node.
    annotate(&first[0], "spot_interrupted");
    until_within(
        sandbox.kubeconfig(),
        &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
        Duration::from_secs(120),
        |t| !t.split_whitespace().any(|n| n == first[0]),
    );
    let second = sandbox.running("web", 8);
    assert!(second.iter().all(|n| *n != first[0]), "{second:?}");

    // A NodePool that cordons on scheduled changes keeps the pods where they are.
    sandbox.ok(&[
        "annotate",
        "nodepool",
        "general-purpose",
        "nodewright.io/interruption-scheduled-change=Cordon",
    ]);
    annotate(&second[0], "scheduled_change");
    until_within(
        sandbox.kubeconfig(),
        &[
            "get",
            "node",
            &second[0],
            "-o",
            "jsonpath={.spec.unschedulable}",
        ],
        Duration::from_secs(60),
        |t| t.trim() == "true",
    );
    let still = sandbox.running("web", 8);
    assert_eq!(still, second, "the pods stay on the cordoned node");
    let selector = format!(
        "reason=InstanceUnhealthy,involvedObject.kind=Node,involvedObject.name={}",
        second[0]
    );
    until_within(
        sandbox.kubeconfig(),
        &[
            "get",
            "events",
            "-A",
            "--field-selector",
            &selector,
            "-o",
            "name",
        ],
        Duration::from_secs(30),
        |t| !t.trim().is_empty(),
    );

    // A kind that does not exist says which do.
    annotate(&second[0], "meteor_strike");
    let selector = format!(
        "reason=InterruptionNotInjected,involvedObject.name={}",
        second[0]
    );
    until_within(
        sandbox.kubeconfig(),
        &[
            "get",
            "events",
            "-A",
            "--field-selector",
            &selector,
            "-o",
            "jsonpath={.items[*].message}",
        ],
        Duration::from_secs(30),
        |t| t.contains("spot_interrupted"),
    );
}
