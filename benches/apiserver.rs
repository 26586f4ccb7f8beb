//! Throughput of the API server double (the test double that `nodewright
//! sandbox` runs on): 10,000 pods created through `kube::Client` over the
//! in-process transport, listed, and watched by three `kube::runtime`
//! watchers that must each see every pod.
//!
//! `cargo bench --bench apiserver` runs the criterion benchmark.
//! `NODEWRIGHT_BENCH_ONCE=10000 cargo bench --bench apiserver` runs one
//! round of that many pods and prints the time of each phase (also usable
//! from a debug build: `cargo test --bench apiserver` builds the bench in
//! the test profile, see benches/README.md).

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

const PODS: usize = 10_000;
const WATCHERS: usize = 3;
/// Creates in flight at once, as a busy controller would send them.
const CONCURRENCY: usize = 16;

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i:05}"), "labels": {"app": "bench", "shard": (i % 10).to_string()}},
        "spec": {"containers": [{"name": "app", "image": "app:1",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
    }))
    .expect("a valid pod")
}

/// Time spent in each phase of one round.
#[derive(Debug, Default)]
struct Phases {
    create: Duration,
    list: Duration,
    watch_tail: Duration,
    total: Duration,
}

/// Creates `count` pods while three watchers follow, lists them, and waits
/// until every watcher has seen every pod.
async fn round(count: usize) -> Phases {
    let server = nodewright::sim::double::builder()
        .history(count * 2 + 1000)
        .build();
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    let mut watchers = Vec::new();
    let mut ready = Vec::new();
    for _ in 0..WATCHERS {
        let (listed_tx, listed_rx) = tokio::sync::oneshot::channel::<()>();
        let stream = watcher(pods.clone(), watcher::Config::default());
        watchers.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut listed = Some(listed_tx);
            let mut seen = 0;
            while let Some(event) = stream.try_next().await.expect("the watch works") {
                match event {
                    watcher::Event::InitDone => {
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                    }
                    watcher::Event::Apply(_) | watcher::Event::InitApply(_) => seen += 1,
                    _ => {}
                }
                if seen >= count {
                    return;
                }
            }
        }));
        ready.push(listed_rx);
    }
    for listed in ready {
        listed.await.expect("the watcher listed");
    }
    let create_start = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let pods = pods.clone();
            async move { pods.create(&PostParams::default(), &pod(i)).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await
        .expect("pods are created");
    let create = create_start.elapsed();
    let list_start = Instant::now();
    let listed = pods
        .list(&ListParams::default())
        .await
        .expect("pods are listed");
    assert_eq!(listed.items.len(), count);
    let list = list_start.elapsed();
    let tail_start = Instant::now();
    for watcher in watchers {
        watcher.await.expect("the watcher finished");
    }
    Phases {
        create,
        list,
        watch_tail: tail_start.elapsed(),
        total: start.elapsed(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn bench_pods(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("apiserver");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(60));
    group.throughput(Throughput::Elements(PODS as u64));
    group.bench_function("create-list-watch-10000-pods", |b| {
        b.iter(|| runtime.block_on(round(PODS)));
    });
    group.finish();
}

criterion_group!(benches, bench_pods);

fn main() {
    if let Ok(count) = std::env::var("NODEWRIGHT_BENCH_ONCE") {
        let count: usize = count.parse().expect("NODEWRIGHT_BENCH_ONCE is a pod count");
        let phases = runtime().block_on(round(count));
        let rate = |d: Duration| count as f64 / d.as_secs_f64();
        println!(
            "{count} pods, {WATCHERS} watchers: create {:?} ({:.0} pods/s), list {:?}, watchers done {:?} after the list, total {:?} ({:.0} pods/s)",
            phases.create,
            rate(phases.create),
            phases.list,
            phases.watch_tail,
            phases.total,
            rate(phases.total),
        );
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
