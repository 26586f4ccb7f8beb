//! Cost of the extension path over every us-east-1 instance type:
//! warm calls of a filter and a scorer as components and natively, cold load
//! from the precompiled artifact cache, and first compile.
//!
//! Run: `cargo bench -p nodewright-host --bench extensions`

#[path = "../tests/support/catalog.rs"]
mod catalog;

use std::{path::PathBuf, time::Duration};

use criterion::{Criterion, criterion_group, criterion_main};
use nodewright_filter::{Context, InstanceFilter, PriorityScorer};
use nodewright_host::harness::build_component;
use nodewright_host::{Host, HostConfig, InstanceTypeSet, Limits, ModuleRef, Role, sha256_hex};

fn component(crate_dir: &str) -> (ModuleRef, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir);
    let path = build_component(&dir).unwrap();
    let pin = sha256_hex(&std::fs::read(&path).unwrap());
    (ModuleRef::Path(path), pin)
}

fn bench(c: &mut Criterion) {
    let types = catalog::us_east_1();
    let set = InstanceTypeSet::new(types.clone());
    eprintln!(
        "catalog: {} instance types, {} distinct strings in the table",
        set.len(),
        set.string_table_len()
    );
    let ctx = Context {
        region: "us-east-1".to_string(),
        config: "{}".to_string(),
        ..Context::default()
    };
    let cache_dir = std::env::temp_dir().join(format!("nodewright-bench-{}", std::process::id()));
    let host = Host::new(HostConfig {
        cache_dir: Some(cache_dir.clone()),
        ..HostConfig::default()
    })
    .unwrap();

    let (filter_src, filter_pin) = component("examples/drop-burstable");
    let (scorer_src, scorer_pin) = component("flex-first");
    // Speed is measured here, not the deadline: on a busy machine a call can
    // be descheduled past the 100 ms default.
    let relaxed = Limits {
        timeout: Duration::from_secs(10),
        ..Limits::default()
    };
    let filter = host
        .load(Role::InstanceFilter, &filter_src, Some(&filter_pin))
        .unwrap()
        .with_limits(relaxed);
    let scorer = host
        .load(Role::PriorityScorer, &scorer_src, Some(&scorer_pin))
        .unwrap()
        .with_limits(relaxed);
    assert_eq!(
        filter.filter(&ctx, &set).unwrap(),
        nodewright_example_drop_burstable::DropBurstable
            .filter(&ctx, &set.views())
            .unwrap()
    );

    let mut g = c.benchmark_group("warm");
    g.bench_function("filter/wasm", |b| {
        b.iter(|| filter.filter(&ctx, &set).unwrap())
    });
    g.bench_function("filter/native", |b| {
        b.iter(|| {
            nodewright_example_drop_burstable::DropBurstable
                .filter(&ctx, &set.views())
                .unwrap()
        })
    });
    g.bench_function("score/wasm", |b| {
        b.iter(|| scorer.score(&ctx, &set).unwrap())
    });
    g.bench_function("score/native", |b| {
        b.iter(|| {
            nodewright_flex_first::FlexFirst
                .score(&ctx, &set.views())
                .unwrap()
        })
    });
    g.bench_function("filter+score/wasm", |b| {
        b.iter(|| {
            filter.filter(&ctx, &set).unwrap();
            scorer.score(&ctx, &set).unwrap()
        })
    });
    g.bench_function("prepare-instance-type-set", |b| {
        b.iter(|| InstanceTypeSet::new(types.clone()))
    });
    g.finish();

    let mut g = c.benchmark_group("load");
    g.bench_function("cold-from-artifact-cache", |b| {
        b.iter(|| {
            host.clear_memory_cache();
            host.load(Role::InstanceFilter, &filter_src, Some(&filter_pin))
                .unwrap()
        })
    });
    let no_disk = Host::new(HostConfig::default()).unwrap();
    g.sample_size(10);
    g.bench_function("first-compile", |b| {
        b.iter(|| {
            no_disk.clear_memory_cache();
            no_disk
                .load(Role::InstanceFilter, &filter_src, Some(&filter_pin))
                .unwrap()
        })
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&cache_dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
