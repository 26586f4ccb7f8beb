//! The scheduler on random clusters: every placement fits the node's (or
//! every instance-type option's) allocatable, satisfies the pod's node
//! selector, required node affinity and taints, keeps zone spread within
//! its skew and hostname anti-affinity apart, and every pod is accounted
//! for exactly once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use nodewright::scheduling::labels;
use nodewright::scheduling::{
    CapacityType, ExistingNode, InstanceType, LabelSelector, NodePoolSpec, Offering, Operator,
    Overhead, Pod, PodAffinityTerm, Requirement, Requirements, Resources, Scheduler,
    SchedulerInput, SchedulingResult, Taint, TaintEffect, Toleration, TopologySpreadConstraint,
};
use proptest::prelude::*;

const GIB: i64 = 1 << 30;
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const APPS: [&str; 3] = ["web", "db", "cache"];

/// SplitMix64: every case is reproduced from the seed proptest reports.
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
}

fn instance_type(i: usize) -> InstanceType {
    let cpu = (i + 1) as i64;
    let arch = if i.is_multiple_of(2) {
        "amd64"
    } else {
        "arm64"
    };
    let mut offerings: Vec<Offering> = ZONES
        .iter()
        .map(|z| Offering::new(z, CapacityType::OnDemand, 0.05 * cpu as f64))
        .collect();
    offerings.push(Offering::new(
        ZONES[0],
        CapacityType::Spot,
        0.02 * cpu as f64,
    ));
    InstanceType::new(
        &format!("type-{i}"),
        [Requirement::single(labels::ARCH, arch)]
            .into_iter()
            .collect(),
        offerings,
        Resources::cpu_memory(cpu * 1000, 2 * cpu * GIB).with_pods(4 * cpu),
        Overhead {
            kube_reserved: Resources::cpu_memory(100, 100 << 20),
            ..Overhead::default()
        },
    )
}

fn random_pod(rng: &mut Rng, name: &str) -> Pod {
    let app = APPS[rng.below(APPS.len())];
    let cpu = [50, 250, 500, 1000, 1900][rng.below(5)];
    let memory = [0, 128 << 20, GIB, 3 * GIB][rng.below(4)];
    let mut pod =
        Pod::new("default", name, Resources::cpu_memory(cpu, memory)).with_label("app", app);
    // Spread and anti-affinity are per app, so every pod of an app agrees.
    match app {
        "web" => {
            pod.topology_spread = vec![TopologySpreadConstraint::new(
                labels::ZONE,
                1,
                LabelSelector::match_labels(&[("app", "web")]),
            )]
        }
        "db" => {
            pod.pod_anti_affinity = vec![PodAffinityTerm::new(
                LabelSelector::match_labels(&[("app", "db")]),
                labels::HOSTNAME,
            )];
            if rng.chance(50) {
                pod.node_selector
                    .insert(labels::ARCH.into(), "arm64".into());
            }
        }
        _ => {
            if rng.chance(40) {
                pod.node_selector
                    .insert(labels::ZONE.into(), ZONES[rng.below(3)].into());
            }
            if rng.chance(40) {
                let zones = vec![ZONES[rng.below(3)], ZONES[rng.below(3)]];
                let term: Requirements =
                    [Requirement::new(labels::ZONE, Operator::In, &zones).expect("zones")]
                        .into_iter()
                        .collect();
                pod.required_node_affinity = vec![term];
            }
        }
    }
    if rng.chance(30) {
        pod.tolerations = vec![Toleration::exists("dedicated", None)];
    }
    pod
}

fn random_input(seed: u64) -> SchedulerInput {
    let mut rng = Rng(seed);
    let types = Arc::new((0..6).map(instance_type).collect::<Vec<_>>());
    let mut general = NodePoolSpec {
        name: "general".into(),
        weight: 10,
        instance_types: types.clone(),
        ..NodePoolSpec::default()
    };
    if rng.chance(30) {
        general.limits.insert("cpu".into(), 8_000);
    }
    let dedicated = NodePoolSpec {
        name: "dedicated".into(),
        taints: vec![Taint::new("dedicated", "true", TaintEffect::NoSchedule)],
        instance_types: types.clone(),
        ..NodePoolSpec::default()
    };
    let mut input = SchedulerInput {
        node_pools: vec![general, dedicated],
        ..SchedulerInput::default()
    };
    if rng.chance(40) {
        let mut agent = Pod::new("kube-system", "agent", Resources::cpu_memory(100, 64 << 20));
        agent.owner_kind = Some("DaemonSet".into());
        input.daemonsets.push(agent);
    }
    for n in 0..rng.below(5) {
        let it = &types[rng.below(types.len())];
        let pool = if rng.chance(70) {
            "general"
        } else {
            "dedicated"
        };
        let name = format!("node-{n}");
        let mut node = ExistingNode {
            name: name.clone(),
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            initialized: true,
            ..ExistingNode::default()
        };
        let arch = it
            .requirements
            .get(labels::ARCH)
            .map(|r| r.values.values()[0].clone());
        for (k, v) in [
            (labels::NODE_POOL, pool.to_string()),
            (labels::ZONE, ZONES[rng.below(3)].to_string()),
            (labels::HOSTNAME, name.clone()),
            (labels::ARCH, arch.unwrap_or_default()),
            (labels::INSTANCE_TYPE, it.name.clone()),
            (labels::CAPACITY_TYPE, "on-demand".to_string()),
        ] {
            node.labels.insert(k.to_string(), v);
        }
        if pool == "dedicated" {
            node.taints = vec![Taint::new("dedicated", "true", TaintEffect::NoSchedule)];
        }
        // Running pods that fit: the solver is not asked to repair a node.
        let mut used = Resources::zero();
        for p in 0..rng.below(4) {
            let mut running = random_pod(&mut rng, &format!("{name}-running-{p}"));
            running.tolerations = vec![Toleration::exists("dedicated", None)];
            let after = used
                .plus(&running.requests)
                .plus(&Resources::zero().with_pods(1));
            if after.fits(&node.allocatable) {
                used = after;
                node.pods.push(running);
            }
        }
        input.existing_nodes.push(node);
    }
    for p in 0..1 + rng.below(10) {
        input
            .pods
            .push(random_pod(&mut rng, &format!("pending-{p}")));
    }
    input
}

/// Where each placed pod went: an existing node's labels, or a new claim.
enum Place<'a> {
    Node(&'a ExistingNode),
    Claim(usize),
}

fn tolerated(pod: &Pod, taints: &[Taint]) -> bool {
    taints
        .iter()
        .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
        .all(|t| pod.tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// The pod's node selector and required node affinity hold for `labels`.
fn selects(pod: &Pod, labels: &BTreeMap<String, String>) -> bool {
    let selector = pod
        .node_selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v));
    let affinity = pod.required_node_affinity.is_empty()
        || pod.required_node_affinity.iter().any(|term| {
            term.iter()
                .all(|r| labels.get(&r.key).is_some_and(|v| r.has(v)))
        });
    selector && affinity
}

fn check(input: &SchedulerInput, result: &SchedulingResult) -> Result<(), TestCaseError> {
    let pods: HashMap<String, &Pod> = input
        .pods
        .iter()
        .map(|p| (p.key().to_string(), p))
        .collect();
    let nodes: HashMap<&str, &ExistingNode> = input
        .existing_nodes
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let mut places: BTreeMap<String, Place> = BTreeMap::new();
    let mut placed: Vec<(String, Place)> = Vec::new();
    for p in &result.existing_node_placements {
        let node = nodes.get(p.node.as_str()).copied();
        prop_assert!(
            node.is_some(),
            "{} placed on unknown node {}",
            p.pod,
            p.node
        );
        placed.push((p.pod.to_string(), Place::Node(node.expect("checked"))));
    }
    for (i, claim) in result.new_node_claims.iter().enumerate() {
        placed.extend(
            claim
                .pods
                .iter()
                .map(|key| (key.to_string(), Place::Claim(i))),
        );
    }
    for (key, place) in placed {
        prop_assert!(pods.contains_key(&key), "{} placed but never pending", key);
        prop_assert!(!places.contains_key(&key), "{} placed twice", key);
        places.insert(key, place);
    }
    for e in &result.errors {
        prop_assert!(
            !places.contains_key(&e.pod.to_string()),
            "{} placed and failed",
            e.pod
        );
    }
    let failed = result.errors.len();
    prop_assert_eq!(
        places.len() + failed,
        pods.len(),
        "every pod placed or failed once"
    );

    // Existing nodes: what runs there plus what was placed fits allocatable.
    for node in &input.existing_nodes {
        let mut used = Resources::zero();
        for pod in &node.pods {
            used.add(&pod.requests.plus(&Resources::zero().with_pods(1)));
        }
        for (key, place) in &places {
            if let Place::Node(n) = place
                && n.name == node.name
            {
                let pod = pods[key];
                used.add(&pod.requests.plus(&Resources::zero().with_pods(1)));
                prop_assert!(
                    tolerated(pod, &node.taints),
                    "{} on tainted {}",
                    key,
                    node.name
                );
                prop_assert!(
                    selects(pod, &node.labels),
                    "{} on unselected {}",
                    key,
                    node.name
                );
            }
        }
        prop_assert!(
            used.fits(&node.allocatable),
            "{} over-full: {} of {}",
            node.name,
            used,
            node.allocatable
        );
    }

    // New claims: every option holds every pod, and satisfies each pod.
    for (i, claim) in result.new_node_claims.iter().enumerate() {
        let pool = input
            .node_pools
            .iter()
            .find(|p| p.name == claim.node_pool)
            .expect("pool");
        let mut requests = Resources::zero();
        for key in &claim.pods {
            requests.add(
                &pods[&key.to_string()]
                    .requests
                    .plus(&Resources::zero().with_pods(1)),
            );
        }
        prop_assert!(!claim.instance_type_options.is_empty());
        for option in &claim.instance_type_options {
            let it = pool
                .instance_types
                .iter()
                .find(|t| t.name == option.name)
                .expect("type");
            let allocatable = it.allocatable();
            prop_assert!(
                requests.fits(&allocatable),
                "claim {} pods {} exceed {} {}",
                i,
                requests,
                it.name,
                allocatable
            );
            prop_assert!(
                claim.requests.fits(&allocatable),
                "claim {} requests {} exceed {} {}",
                i,
                claim.requests,
                it.name,
                allocatable
            );
            let mut node_labels = claim.labels.clone();
            node_labels.insert(labels::ZONE.into(), claim.zone.clone());
            node_labels.insert(
                labels::CAPACITY_TYPE.into(),
                claim.capacity_type.label_value().into(),
            );
            for r in it.requirements.iter() {
                if let [one] = r.values.values() {
                    node_labels.insert(r.key.clone(), one.clone());
                }
            }
            for key in &claim.pods {
                let pod = pods[&key.to_string()];
                prop_assert!(
                    selects(pod, &node_labels),
                    "{} on claim {} as {} {:?}",
                    key,
                    i,
                    it.name,
                    node_labels
                );
                prop_assert!(
                    tolerated(pod, &claim.taints),
                    "{} on tainted claim {}",
                    key,
                    i
                );
            }
        }
    }

    // Zone spread of `web` (maxSkew 1): a zone that gained pods holds at
    // most the final minimum plus the skew.
    let mut before = [0i64; 3];
    let mut after = [0i64; 3];
    let zone_of = |labels: &BTreeMap<String, String>| {
        labels
            .get(labels::ZONE)
            .and_then(|z| ZONES.iter().position(|x| x == z))
    };
    for node in &input.existing_nodes {
        let web = node
            .pods
            .iter()
            .filter(|p| p.labels.get("app").is_some_and(|a| a == "web"))
            .count() as i64;
        if let Some(z) = zone_of(&node.labels) {
            before[z] += web;
            after[z] += web;
        }
    }
    let mut hosts: BTreeMap<String, usize> = BTreeMap::new();
    for node in &input.existing_nodes {
        let db = node
            .pods
            .iter()
            .filter(|p| p.labels.get("app").is_some_and(|a| a == "db"))
            .count();
        hosts.insert(format!("node/{}", node.name), db);
    }
    for (key, place) in &places {
        let app = pods[key].labels.get("app").map(String::as_str);
        let (zone, host) = match place {
            Place::Node(n) => (zone_of(&n.labels), format!("node/{}", n.name)),
            Place::Claim(i) => (
                ZONES
                    .iter()
                    .position(|z| *z == result.new_node_claims[*i].zone),
                format!("claim/{i}"),
            ),
        };
        if app == Some("web")
            && let Some(z) = zone
        {
            after[z] += 1;
        }
        if app == Some("db") {
            *hosts.entry(host).or_default() += 1;
        }
    }
    let min = *after.iter().min().expect("three zones");
    for z in 0..3 {
        if after[z] > before[z] {
            prop_assert!(
                after[z] <= min + 1,
                "web spread: before {:?}, after {:?}",
                before,
                after
            );
        }
    }
    for (host, db) in &hosts {
        let placed_here = places
            .iter()
            .filter(|(k, p)| {
                pods[*k].labels.get("app").is_some_and(|a| a == "db")
                    && match p {
                        Place::Node(n) => *host == format!("node/{}", n.name),
                        Place::Claim(i) => *host == format!("claim/{i}"),
                    }
            })
            .count();
        prop_assert!(
            placed_here == 0 || *db <= 1,
            "db anti-affinity broken on {}: {} pods",
            host,
            db
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(super::config(96))]

    #[test]
    fn placements_fit_and_satisfy_every_pod(seed in any::<u64>()) {
        let input = random_input(seed);
        let result = Scheduler::new(input.clone()).solve();
        check(&input, &result)?;
    }
}
