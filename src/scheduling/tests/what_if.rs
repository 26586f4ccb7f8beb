//! What-ifs on a shared model: for random clusters and random sets of
//! nodes taken away, `Model::solve` on the model of the whole cluster gives
//! exactly what a fresh solve of the reduced cluster gives.

use super::*;
use crate::scheduling::solver::Model;

/// SplitMix64, so every case can be reproduced from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const ZONES: &[&str] = &["test-zone-1", "test-zone-2", "test-zone-3"];
const APPS: &[&str] = &["web", "db", "cache"];

fn random_pod(rng: &mut Rng, name: &str) -> Pod {
    let cpu = [100, 250, 500, 1000, 2500][rng.below(5)];
    let mem = [64, 256, 1024, 4096][rng.below(4)] << 20;
    let app = rng.pick(APPS);
    let mut pod = Pod::new("default", name, Resources::cpu_memory(cpu, mem)).with_label("app", app);
    match rng.below(8) {
        0 => pod.topology_spread = vec![spread(labels::ZONE, app)],
        1 => pod.topology_spread = vec![spread(labels::HOSTNAME, app)],
        2 => pod.pod_anti_affinity = vec![anti(app, labels::HOSTNAME)],
        3 => pod.pod_affinity = vec![anti(app, labels::ZONE)],
        4 => {
            pod.node_selector
                .insert(labels::ZONE.to_string(), rng.pick(ZONES).to_string());
        }
        5 => pod.tolerations = vec![Toleration::exists("dedicated", None)],
        _ => {}
    }
    if rng.chance(10) {
        pod.host_ports = vec![HostPort {
            port: 8080,
            protocol: "TCP".to_string(),
            host_ip: String::new(),
        }];
    }
    pod
}

fn random_input(rng: &mut Rng) -> SchedulerInput {
    let mut general = pool("general", 12);
    general.weight = 10;
    if rng.chance(50) {
        general.limits.insert("cpu".to_string(), 40_000);
    }
    if rng.chance(30) {
        general.limits.insert("nodes".to_string(), 6);
    }
    let mut dedicated = pool("dedicated", 24);
    dedicated.taints = vec![Taint::new("dedicated", "true", TaintEffect::NoSchedule)];
    let pools = vec![general, dedicated];
    let mut input = SchedulerInput {
        node_pools: pools,
        ..SchedulerInput::default()
    };
    if rng.chance(50) {
        let mut ds = pod("agent", 100, 64 << 20);
        ds.owner_kind = Some("DaemonSet".to_string());
        if rng.chance(50) {
            ds.node_selector
                .insert(labels::ZONE.to_string(), rng.pick(ZONES).to_string());
        }
        input.daemonsets.push(ds);
    }
    for n in 0..rng.below(9) {
        let pool_name = if rng.chance(70) {
            "general"
        } else {
            "dedicated"
        };
        let it = fake_type(4 + rng.below(8));
        let name = format!("node-{n}");
        let mut node = ExistingNode {
            name: name.clone(),
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            initialized: rng.chance(80),
            marked_for_deletion: rng.chance(5),
            ..ExistingNode::default()
        };
        for (k, v) in [
            (labels::NODE_POOL, pool_name),
            (labels::ZONE, rng.pick(ZONES)),
            (labels::HOSTNAME, name.as_str()),
            (labels::ARCH, "amd64"),
            (labels::INSTANCE_TYPE, it.name.as_str()),
            (labels::CAPACITY_TYPE, "on-demand"),
        ] {
            node.labels.insert(k.to_string(), v.to_string());
        }
        if pool_name == "dedicated" {
            node.taints = vec![Taint::new("dedicated", "true", TaintEffect::NoSchedule)];
        }
        for p in 0..rng.below(5) {
            let mut running = random_pod(rng, &format!("{name}-pod-{p}"));
            running.tolerations = vec![Toleration::exists("dedicated", None)];
            node.pods.push(running);
        }
        if rng.chance(25) {
            input.in_flight.push(node);
        } else {
            input.existing_nodes.push(node);
        }
    }
    for p in 0..rng.below(7) {
        let pending = random_pod(rng, &format!("pending-{p}"));
        input.pods.push(pending);
    }
    input
}

#[test]
fn a_what_if_on_the_shared_model_equals_a_fresh_solve_of_the_reduced_cluster() {
    let mut compared = 0;
    for seed in 0..300 {
        let mut rng = Rng(seed);
        let input = random_input(&mut rng);
        let all: Vec<&ExistingNode> = input
            .existing_nodes
            .iter()
            .chain(&input.in_flight)
            .collect();
        let removed: Vec<String> = all
            .iter()
            .filter(|_| rng.chance(35))
            .map(|n| n.name.clone())
            .collect();
        let gone = |n: &ExistingNode| removed.contains(&n.name);
        let mut pods: Vec<Pod> = all
            .iter()
            .filter(|n| gone(n))
            .flat_map(|n| n.pods.iter().cloned())
            .collect();
        pods.extend(input.pods.iter().cloned());

        let mut reduced = input.clone();
        reduced.existing_nodes.retain(|n| !gone(n));
        reduced.in_flight.retain(|n| !gone(n));
        reduced.pods = pods.clone();
        let fresh = Scheduler::new(reduced).solve();

        let model = Model::compile(input);
        let what_if = model.solve(|n| !gone(n), &pods);
        assert_eq!(what_if, fresh, "seed {seed}, removed {removed:?}");
        // The model is unchanged by a what-if: the same question gives the
        // same answer again.
        assert_eq!(model.solve(|n| !gone(n), &pods), fresh, "seed {seed}");
        // The same question by node index.
        let without: Vec<usize> = removed.iter().filter_map(|n| model.node_index(n)).collect();
        assert_eq!(model.solve_without(&without, &pods), fresh, "seed {seed}");
        compared += fresh.new_node_claims.len() + fresh.existing_node_placements.len();
    }
    assert!(
        compared > 300,
        "the cases place pods ({compared} placements)"
    );
}

#[test]
fn a_what_if_with_a_resource_the_model_never_saw_equals_a_fresh_solve() {
    let mut rng = Rng(7);
    let input = random_input(&mut rng);
    let mut gpu = pod("gpu", 100, 0);
    gpu.requests
        .extended
        .insert("example.com/fpga".to_string(), 1);
    let pods = vec![gpu];
    let mut reduced = input.clone();
    reduced.pods = pods.clone();
    let fresh = Scheduler::new(reduced).solve();
    let model = Model::compile(input);
    let what_if = model.solve(|_| true, &pods);
    assert_eq!(what_if, fresh);
    assert_eq!(model.solve_without(&[], &pods), fresh);
    assert_eq!(what_if.errors.len(), 1, "{what_if:?}");
    assert!(what_if.errors[0].reason.contains("example.com/fpga"));
}
