//! The soak of `scripts/soak` (benches/support/soak.rs), briefly: a
//! simulated-cloud sandbox under bursts of up to 100 pods for 20 s, with
//! consolidation, drift and spot interruptions mixed in, then scaled to
//! zero. Nothing may leak: instances, NodeClaims, Nodes, API server
//! watches or tokio tasks. RSS is not checked here (other tests share the
//! process), and file descriptors only loosely for the same reason.

#[path = "../../benches/support/soak.rs"]
#[allow(dead_code)]
mod run;

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_with_drift_and_interruptions_leak_nothing() {
    // NODEWRIGHT_TEST_LOG=1 prints what the sandbox does (to stderr, uncaptured).
    if std::env::var_os("NODEWRIGHT_TEST_LOG").is_some() {
        nodewright::sim::sandbox::log::init(nodewright::sim::sandbox::log::LogFormat::Text);
    }
    let options = run::Options {
        duration: Duration::from_secs(20),
        pods: 100,
        deployments: 5,
        burst_timeout: Duration::from_secs(60),
        hold: Duration::from_secs(2),
        drift_every: 2,
        interrupt_every: Duration::from_secs(8),
        settle_timeout: Duration::from_secs(120),
        check_rss: false,
        // Other tests open and close sockets and pipes in this process.
        fd_slack: 256,
        seed: 7,
        progress: false,
        // Short enough that the recorder meets Events that expired.
        event_ttl: Duration::from_secs(10),
    };
    let report = run::run(options).await;
    eprintln!("{}", report.table());
    assert!(report.failures.is_empty(), "{:#?}", report.failures);
    assert!(report.bursts >= 2, "bursts: {}", report.bursts);
    assert!(
        report.drifts >= 1 && report.interruptions >= 1,
        "drifts {} interruptions {}",
        report.drifts,
        report.interruptions
    );
    assert!(
        report.pods_running >= 100,
        "pods Running: {}",
        report.pods_running
    );
}
