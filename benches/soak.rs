//! The long soak: `scripts/soak [SECONDS] [PODS]` (default 600 s and
//! 5,000 pods) runs a simulated-cloud sandbox in process under bursts of
//! Deployments scaling up and down, with consolidation, drift and spot
//! interruptions mixed in, then scales everything to zero and checks that
//! nothing leaked: instances, NodeClaims, Nodes, API server watches, tokio
//! tasks, file descriptors, and memory (RSS at the end within 10 % of the
//! plateau). Prints the figures as a table; exits 1 on a failed check.
//! `tests/it/soak.rs` runs the same loop briefly in the test command.
//!
//! ```sh
//! scripts/soak              # 600 s, 5,000 pods
//! scripts/soak 120 1000
//! ```

#[path = "support/soak.rs"]
mod soak;

use std::time::Duration;

/// As the `nodewright` binary allocates, so the RSS figures are its own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let seconds: u64 = arg("NODEWRIGHT_SOAK_SECONDS", 600);
    let pods: usize = arg("NODEWRIGHT_SOAK_PODS", 5000);
    if std::env::var_os("NODEWRIGHT_SOAK_LOG").is_some() {
        nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
    }
    let options = soak::Options {
        duration: Duration::from_secs(seconds),
        pods,
        deployments: 20,
        burst_timeout: Duration::from_secs(300),
        hold: Duration::from_secs(30),
        drift_every: 5,
        interrupt_every: Duration::from_secs(15),
        settle_timeout: Duration::from_secs(300),
        check_rss: true,
        fd_slack: 0,
        seed: 25,
        progress: true,
        event_ttl: Duration::from_secs(arg("NODEWRIGHT_SOAK_EVENT_TTL", 120)),
    };
    println!(
        "soak: {seconds} s, up to {pods} pods, {} Deployments",
        options.deployments
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let report = runtime.block_on(soak::run(options));
    print!("{}", report.table());
    if report.failures.is_empty() {
        println!("soak: no leak, no stuck burst");
    } else {
        for failure in &report.failures {
            println!("soak FAILED: {failure}");
        }
        std::process::exit(1);
    }
}

/// A number from the environment (set by `scripts/soak`), or `default`.
fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
