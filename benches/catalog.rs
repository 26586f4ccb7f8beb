//! The live catalog against moto: how long one instance-type refresh takes
//! (`DescribeInstanceTypes` + `DescribeInstanceTypeOfferings` + building the
//! catalog + resolving it for one EC2NodeClass), and how much memory the
//! catalog of one region holds.
//!
//! Memory is counted by a global allocator that tracks live heap bytes: the
//! bytes a structure holds are the live bytes after building it minus those
//! before (measured after a warm-up refresh, so connection pools and lazy
//! statics are already allocated). RSS from `/proc/self/statm` is printed
//! alongside.
//!
//! ```sh
//! export AWS_EC2_METADATA_DISABLED=true NODEWRIGHT_MOTO_SERVER=$PWD/.venv/moto/bin/moto_server
//! cargo bench --bench catalog                  # release profile
//! cargo bench --bench catalog --profile dev    # reuses the test build
//! ```
//!
//! The bench starts its own moto on 127.0.0.1 (as the integration tests do)
//! and stops it when it exits.

#[path = "../tests/it/moto.rs"]
#[allow(dead_code)]
mod moto;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::Criterion;
use nodewright::aws::catalog::live::{LIVE_LABEL, describe};
use nodewright::aws::catalog::refresh::CatalogRefresher;
use nodewright::aws::catalog::{Catalog, embedded_prices};
use nodewright::aws::clients::AwsClients;
use nodewright::aws::instance_types::{ResolverSettings, resolve_all};
use nodewright::aws::pricing::PricingProvider;

/// The system allocator, counting live and peak heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Resident set size in bytes, from `/proc/self/statm` (Linux).
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn refresher(clients: &AwsClients) -> CatalogRefresher {
    let pricing =
        PricingProvider::new("us-east-1", clients.pricing.clone(), clients.ec2.clone()).unwrap();
    CatalogRefresher::new(clients.ec2.clone(), pricing)
}

/// Prints what the catalog of us-east-1 read from moto holds.
fn memory(runtime: &tokio::runtime::Runtime, clients: &AwsClients) {
    // Warm-up: connections, credentials, endpoint resolution, lazy statics.
    drop(runtime.block_on(refresher(clients).refresh()).unwrap());

    let (live_before, rss_before) = (live(), rss());
    PEAK.store(live_before, Ordering::Relaxed);
    let refresher = refresher(clients);
    let report = runtime.block_on(refresher.refresh()).unwrap();
    let held = live() - live_before;
    let peak = PEAK.load(Ordering::Relaxed) - live_before;
    let rss_after = rss();

    let before_clone = live();
    let copy = (*report.catalog).clone();
    let catalog_bytes = live() - before_clone;
    let types = copy.instance_types().len();
    drop(copy);

    let before_resolve = live();
    let resolved = resolve_all(&report.catalog, &ResolverSettings::default()).unwrap();
    let resolved_bytes = live() - before_resolve;
    let resolved_count = resolved.len();
    drop(resolved);

    let before_embedded = live();
    let embedded = Catalog::embedded("us-east-1").unwrap();
    let embedded_bytes = live() - before_embedded;
    drop(embedded);

    let prices = report.catalog.prices();
    println!(
        "us-east-1 from moto: {types} instance types, {} zones, {} spot prices",
        report.catalog.zones().len(),
        prices.spot_count()
    );
    println!(
        "  catalog (types, offerings, prices):       {}",
        mib(catalog_bytes)
    );
    println!(
        "  refresher after one refresh (catalog + price book): {}",
        mib(held)
    );
    println!("  peak heap during the refresh:             {}", mib(peak));
    println!(
        "  RSS before / after the refresh:           {} / {}",
        mib(rss_before),
        mib(rss_after)
    );
    println!(
        "  resolved for one EC2NodeClass ({resolved_count} types): {}",
        mib(resolved_bytes)
    );
    println!(
        "  embedded us-east-1 catalog, for comparison: {}",
        mib(embedded_bytes)
    );
    drop(report);
    drop(refresher);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let clients = runtime.block_on(moto::moto_clients());
    memory(&runtime, &clients);

    let described = runtime
        .block_on(describe(&clients.ec2, "us-east-1"))
        .unwrap();
    let prices = embedded_prices("us-east-1").unwrap();
    let mut criterion = Criterion::default().sample_size(10).configure_from_args();
    criterion.bench_function("catalog/describe types and offerings (moto)", |b| {
        b.iter(|| {
            black_box(
                runtime
                    .block_on(describe(&clients.ec2, "us-east-1"))
                    .unwrap(),
            )
        })
    });
    criterion.bench_function("catalog/build and resolve", |b| {
        b.iter(|| {
            let (types, offerings) = described.clone();
            let catalog =
                Catalog::versioned(LIVE_LABEL, "us-east-1", types, offerings, prices.clone());
            black_box(resolve_all(&catalog, &ResolverSettings::default()).unwrap())
        })
    });
    criterion.bench_function("catalog/full refresh (describe, build, resolve)", |b| {
        b.iter(|| {
            let (types, offerings) = runtime
                .block_on(describe(&clients.ec2, "us-east-1"))
                .unwrap();
            let catalog =
                Catalog::versioned(LIVE_LABEL, "us-east-1", types, offerings, prices.clone());
            black_box(resolve_all(&catalog, &ResolverSettings::default()).unwrap())
        })
    });
    criterion.final_summary();
}
