//! Scheduler benchmark: a port of Karpenter's scheduling benchmark workload
//! (`scheduling_benchmark_test.go`, see shared/bench/SCHEDULING.md): 400 fake
//! instance types, `makeDiversePods` with a fixed seed, and 4,000
//! "preference" pods solved respecting and ignoring preferences.
//!
//! `cargo bench --bench scheduling` runs the criterion benchmarks and prints
//! the nodes created per size. `NODEWRIGHT_BENCH_ONCE=20000 cargo bench
//! --bench scheduling` runs a single solve of that many diverse pods and exits
//! (for peak-memory measurement with `/usr/bin/time -v`);
//! `NODEWRIGHT_BENCH_ONCE=preferences-respect` (or `preferences-ignore`) does
//! the same for the 4,000 preference pods.
//!
//! `what-if` (criterion) and `NODEWRIGHT_BENCH_ONCE=what-if` measure what
//! disruption asks of the scheduler: a model compiled once for 1,000 nodes
//! running 10 diverse pods each, then one what-if per node ("without this
//! node, where do its pods go?") on the shared model.
//!
//! To benchmark another catalog (e.g. the real us-east-1 one), pass its
//! instance types to [`diverse_input`] instead of [`fake_instance_types`].

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::{ResolverSettings, resolve_all};
use nodewright::scheduling::{
    CapacityType, ExistingNode, InstanceType, LabelSelector, Model, NodePoolSpec, Offering,
    Operator, Overhead, Pod, PodAffinityTerm, Requirement, Requirements, Resources, Scheduler,
    SchedulerInput, SchedulerOptions, SchedulingResult, TopologySpreadConstraint, Weighted, labels,
};

const SIZES: &[usize] = &[1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000];
const SEED: u64 = 42;
const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// SplitMix64: a small deterministic generator so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const LABEL_VALUES: &[&str] = &["a", "b", "c", "d", "e", "f", "g"];
const CPUS: &[i64] = &[100, 250, 500, 1000, 1500];
const MEMORIES: &[i64] = &[100 * MIB, 256 * MIB, 512 * MIB, GIB, 2 * GIB, 4 * GIB];

/// The 400 fake instance types of the Karpenter benchmark.
fn fake_instance_types(count: usize) -> Vec<InstanceType> {
    (0..count)
        .map(|i| {
            let cpu = (i + 1) as i64;
            let memory = 2 * cpu * GIB;
            let price = 0.1 * cpu as f64 + 0.1 * memory as f64 / 1e9;
            let mut offerings = Vec::new();
            for zone in ["test-zone-1", "test-zone-2"] {
                offerings.push(Offering::new(zone, CapacityType::Spot, price));
            }
            for zone in ["test-zone-1", "test-zone-2", "test-zone-3"] {
                offerings.push(Offering::new(zone, CapacityType::OnDemand, price));
            }
            let requirements: Requirements = [
                Requirement::single(labels::ARCH, "amd64"),
                Requirement::single(labels::OS, "linux"),
            ]
            .into_iter()
            .collect();
            InstanceType::new(
                &format!("fake-it-{i}"),
                requirements,
                offerings,
                Resources::cpu_memory(cpu * 1000, memory).with_pods(10 * cpu),
                Overhead {
                    kube_reserved: Resources::cpu_memory(100, 10 * MIB),
                    ..Overhead::default()
                },
            )
        })
        .collect()
}

fn random_pod(rng: &mut Rng, name: String) -> Pod {
    let requests = Resources::cpu_memory(rng.pick(CPUS), rng.pick(MEMORIES));
    Pod::new("default", &name, requests)
}

fn generic(rng: &mut Rng, n: usize, tag: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let label = rng.pick(LABEL_VALUES);
            random_pod(rng, format!("{tag}-{i}")).with_label("my-label", label)
        })
        .collect()
}

fn spread(rng: &mut Rng, n: usize, key: &str, tag: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let selector_value = rng.pick(LABEL_VALUES);
            let own_value = rng.pick(LABEL_VALUES);
            let mut pod = random_pod(rng, format!("{tag}-{i}")).with_label("my-label", own_value);
            pod.topology_spread = vec![TopologySpreadConstraint::new(
                key,
                1,
                LabelSelector::match_labels(&[("my-label", selector_value)]),
            )];
            pod
        })
        .collect()
}

fn affinity(rng: &mut Rng, n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let value = rng.pick(LABEL_VALUES);
            let mut pod =
                random_pod(rng, format!("affinity-{i}")).with_label("my-affininity", value);
            pod.pod_affinity = vec![PodAffinityTerm::new(
                LabelSelector::match_labels(&[("my-affininity", value)]),
                labels::ZONE,
            )];
            pod
        })
        .collect()
}

fn anti_affinity(rng: &mut Rng, n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut pod = random_pod(rng, format!("anti-{i}")).with_label("app", "nginx");
            pod.pod_anti_affinity = vec![PodAffinityTerm::new(
                LabelSelector::match_labels(&[("app", "nginx")]),
                labels::HOSTNAME,
            )];
            pod
        })
        .collect()
}

/// Karpenter's `makeDiversePods`: n/5 of each kind, the remainder generic.
fn make_diverse_pods(n: usize) -> Vec<Pod> {
    let mut rng = Rng(SEED);
    let fifth = n / 5;
    let mut pods = generic(&mut rng, fifth, "generic");
    pods.extend(spread(&mut rng, fifth, labels::ZONE, "zone-spread"));
    pods.extend(spread(&mut rng, fifth, labels::HOSTNAME, "host-spread"));
    pods.extend(affinity(&mut rng, fifth));
    pods.extend(anti_affinity(&mut rng, fifth));
    let remaining = n - pods.len();
    pods.extend(generic(&mut rng, remaining, "filler"));
    pods
}

/// The preference pods: preferred zone affinity, preferred anti-affinity on
/// zone (weight 10) and hostname (weight 1).
fn make_preference_pods(n: usize) -> Vec<Pod> {
    let mut rng = Rng(SEED);
    (0..n)
        .map(|i| {
            let mut pod = random_pod(&mut rng, format!("pref-{i}")).with_label("app", "nginx");
            let zone1 = Requirement::new(labels::ZONE, Operator::In, &["test-zone-1"])
                .map(|r| [r].into_iter().collect::<Requirements>())
                .unwrap_or_default();
            pod.preferred_node_affinity = vec![Weighted {
                weight: 1,
                term: zone1,
            }];
            let nginx = LabelSelector::match_labels(&[("app", "nginx")]);
            pod.preferred_pod_anti_affinity = vec![
                Weighted {
                    weight: 10,
                    term: PodAffinityTerm::new(nginx.clone(), labels::ZONE),
                },
                Weighted {
                    weight: 1,
                    term: PodAffinityTerm::new(nginx, labels::HOSTNAME),
                },
            ];
            pod
        })
        .collect()
}

/// One NodePool over `instance_types` with no limits, taints or extra
/// requirements, and the given pods.
fn diverse_input(instance_types: Vec<InstanceType>, pods: Vec<Pod>) -> SchedulerInput {
    SchedulerInput {
        node_pools: vec![NodePoolSpec {
            name: "default".to_string(),
            instance_types: instance_types.into(),
            ..NodePoolSpec::default()
        }],
        pods,
        ..SchedulerInput::default()
    }
}

fn check(result: &SchedulingResult, what: &str) {
    if let Some(first) = result.errors.first() {
        eprintln!(
            "{what}: {} pods failed to schedule, first: {} ({})",
            result.errors.len(),
            first.pod,
            first.reason
        );
    }
}

fn bench_diverse(c: &mut Criterion) {
    let types = fake_instance_types(400);
    let mut group = c.benchmark_group("diverse");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for &n in SIZES {
        let input = diverse_input(types.clone(), make_diverse_pods(n));
        let start = Instant::now();
        let result = Scheduler::new(input.clone()).solve();
        check(&result, &format!("diverse/{n}"));
        println!(
            "diverse/{n}: {} nodes created, {} errors, first solve {:.1} ms",
            result.new_node_claims.len(),
            result.errors.len(),
            start.elapsed().as_secs_f64() * 1e3
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || input.clone(),
                |input| black_box(Scheduler::new(input).solve()),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn bench_preferences(c: &mut Criterion) {
    let types = fake_instance_types(400);
    let mut group = c.benchmark_group("preferences");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for ignore in [false, true] {
        let mut input = diverse_input(types.clone(), make_preference_pods(4000));
        input.options = SchedulerOptions {
            ignore_preferences: ignore,
            ..SchedulerOptions::default()
        };
        let name = if ignore { "ignore" } else { "respect" };
        let result = Scheduler::new(input.clone()).solve();
        check(&result, &format!("preferences/{name}"));
        println!(
            "preferences/{name} (4000 pods): {} nodes created, {} errors",
            result.new_node_claims.len(),
            result.errors.len()
        );
        group.throughput(Throughput::Elements(4000));
        group.bench_function(name, |b| {
            b.iter_batched(
                || input.clone(),
                |input| black_box(Scheduler::new(input).solve()),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// The instance types of the embedded us-east-1 catalog, resolved for an
/// EC2NodeClass with default settings.
fn us_east_1_instance_types() -> Vec<InstanceType> {
    let catalog = Catalog::embedded("us-east-1").expect("the embedded catalog decodes");
    resolve_all(&catalog, &ResolverSettings::default()).expect("default settings resolve")
}

/// The diverse workload against the real us-east-1 catalog (~1,400 types,
/// six zones, on-demand and spot) instead of the 400 fake types.
fn bench_catalog(c: &mut Criterion) {
    let types = us_east_1_instance_types();
    let mut group = c.benchmark_group("diverse-us-east-1");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for &n in &[100, 2000, 20000] {
        let input = diverse_input(types.clone(), make_diverse_pods(n));
        let result = Scheduler::new(input.clone()).solve();
        check(&result, &format!("diverse-us-east-1/{n}"));
        println!(
            "diverse-us-east-1/{n}: {} nodes created, {} errors",
            result.new_node_claims.len(),
            result.errors.len()
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || input.clone(),
                |input| black_box(Scheduler::new(input).solve()),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// 1,000 initialized nodes of a 32-CPU fake type in three zones, each
/// running 10 of `make_diverse_pods(10_000)` (round robin), and no pending
/// pods.
fn what_if_cluster(nodes: usize) -> SchedulerInput {
    let types = fake_instance_types(400);
    let node_type = types[31].clone();
    let pods = make_diverse_pods(nodes * 10);
    let mut existing: Vec<ExistingNode> = (0..nodes)
        .map(|i| {
            let name = format!("node-{i:04}");
            let zone = format!("test-zone-{}", i % 3 + 1);
            let mut node = ExistingNode {
                name: name.clone(),
                capacity: node_type.capacity.clone(),
                allocatable: node_type.allocatable(),
                initialized: true,
                ..ExistingNode::default()
            };
            for (k, v) in [
                (labels::NODE_POOL, "default"),
                (labels::ZONE, zone.as_str()),
                (labels::HOSTNAME, name.as_str()),
                (labels::ARCH, "amd64"),
                (labels::OS, "linux"),
                (labels::INSTANCE_TYPE, node_type.name.as_str()),
                (labels::CAPACITY_TYPE, "on-demand"),
            ] {
                node.labels.insert(k.to_string(), v.to_string());
            }
            node
        })
        .collect();
    for (i, pod) in pods.into_iter().enumerate() {
        existing[i % nodes].pods.push(pod);
    }
    let mut input = diverse_input(types, Vec::new());
    input.existing_nodes = existing;
    input
}

/// One what-if per node of the model, in turn: the node taken away, its
/// pods rescheduled. Returns the pods placed on existing nodes, for a check.
fn what_ifs(model: &Model, count: usize) -> usize {
    let names: Vec<&ExistingNode> = model.nodes().collect();
    let mut placed = 0;
    for i in 0..count {
        let candidate = names[i % names.len()];
        let result = model.solve(|n| n.name != candidate.name, &candidate.pods);
        placed += result.existing_node_placements.len();
    }
    placed
}

fn bench_what_if(c: &mut Criterion) {
    let model = Model::compile(what_if_cluster(1000));
    let mut group = c.benchmark_group("what-if");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(1000));
    group.bench_function("1000-of-1000-nodes", |b| {
        b.iter(|| black_box(what_ifs(&model, 1000)))
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_diverse,
    bench_preferences,
    bench_catalog,
    bench_what_if
);

fn main() {
    if let Ok(what) = std::env::var("NODEWRIGHT_BENCH_ONCE") {
        if what == "what-if" {
            let start = Instant::now();
            let model = Model::compile(what_if_cluster(1000));
            let compiled = start.elapsed();
            let start = Instant::now();
            let placed = what_ifs(&model, 1000);
            let elapsed = start.elapsed();
            println!(
                "what-if: model of 1,000 nodes and 10,000 pods compiled in {:.1} ms; \
                 1,000 what-ifs (one node away, its 10 pods rescheduled) in {:.1} ms, \
                 {:.3} ms each; {placed} pods placed on existing nodes",
                compiled.as_secs_f64() * 1e3,
                elapsed.as_secs_f64() * 1e3,
                elapsed.as_secs_f64() * 1e3 / 1000.0
            );
            return;
        }
        let (n, input) = match what.as_str() {
            "preferences-respect" | "preferences-ignore" => {
                let mut input = diverse_input(fake_instance_types(400), make_preference_pods(4000));
                input.options.ignore_preferences = what == "preferences-ignore";
                (4000, input)
            }
            other if other.starts_with("us-east-1:") => {
                let n = other["us-east-1:".len()..]
                    .parse::<usize>()
                    .unwrap_or(20000);
                (
                    n,
                    diverse_input(us_east_1_instance_types(), make_diverse_pods(n)),
                )
            }
            other => {
                let n = other.parse::<usize>().unwrap_or(20000);
                (
                    n,
                    diverse_input(fake_instance_types(400), make_diverse_pods(n)),
                )
            }
        };
        let start = Instant::now();
        let result = Scheduler::new(input).solve();
        let elapsed = start.elapsed();
        check(&result, "once");
        println!(
            "{what} ({n} pods): {:.1} ms, {} nodes created, {} errors",
            elapsed.as_secs_f64() * 1e3,
            result.new_node_claims.len(),
            result.errors.len()
        );
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
