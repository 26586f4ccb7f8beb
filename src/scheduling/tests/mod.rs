//! Scheduler behaviour tests: each semantic with a case that must place a pod
//! and one where a pod must NOT land somewhere.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::*;

mod affinity_suite;
mod daemonsets;
mod existing_nodes;
mod in_flight_suite;
mod instance_types_suite;
mod new_claims;
mod requirements_suite;
mod spread_domains;
mod taints_suite;
mod topology;
mod topology_suite;
mod what_if;

const GIB: i64 = 1 << 30;

fn fake_type(i: usize) -> InstanceType {
    let cpu = (i + 1) as i64;
    let mem = 2 * cpu * GIB;
    let price = 0.1 * cpu as f64 + 0.1 * mem as f64 / 1e9;
    let mut offerings = Vec::new();
    for zone in ["test-zone-1", "test-zone-2"] {
        offerings.push(Offering::new(zone, CapacityType::Spot, price * 0.7));
    }
    for zone in ["test-zone-1", "test-zone-2", "test-zone-3"] {
        offerings.push(Offering::new(zone, CapacityType::OnDemand, price));
    }
    let reqs: Requirements = [Requirement::single(labels::ARCH, "amd64")]
        .into_iter()
        .collect();
    InstanceType::new(
        &format!("fake-it-{i}"),
        reqs,
        offerings,
        Resources::cpu_memory(cpu * 1000, mem).with_pods(10 * cpu),
        Overhead {
            kube_reserved: Resources::cpu_memory(100, 10 << 20),
            ..Overhead::default()
        },
    )
}

fn types(n: usize) -> Vec<InstanceType> {
    (0..n).map(fake_type).collect()
}

fn pool(name: &str, n: usize) -> NodePoolSpec {
    NodePoolSpec {
        name: name.to_string(),
        instance_types: Arc::new(types(n)),
        ..NodePoolSpec::default()
    }
}

fn pod(name: &str, cpu: i64, mem: i64) -> Pod {
    Pod::new("default", name, Resources::cpu_memory(cpu, mem))
}

fn solve(pools: Vec<NodePoolSpec>, pods: Vec<Pod>) -> SchedulingResult {
    Scheduler::new(SchedulerInput {
        node_pools: pools,
        pods,
        ..SchedulerInput::default()
    })
    .solve()
}

fn claim_of<'a>(result: &'a SchedulingResult, pod: &str) -> &'a NewNodeClaim {
    let reference = format!("default/{pod}");
    result
        .new_node_claims
        .iter()
        .find(|c| c.pods.iter().any(|k| *k == reference))
        .unwrap_or_else(|| panic!("{pod} not on a new claim: {:?}", result.errors))
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values).unwrap()
}

fn anti(app: &str, key: &str) -> PodAffinityTerm {
    PodAffinityTerm::new(LabelSelector::match_labels(&[("app", app)]), key)
}

fn spread(key: &str, app: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint::new(key, 1, LabelSelector::match_labels(&[("app", app)]))
}
