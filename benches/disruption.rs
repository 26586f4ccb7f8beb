//! One full disruption pass over a large cluster: emptiness, drift,
//! multi-node and single-node consolidation, each run over every candidate
//! (drift and single-node consolidation try each candidate alone instead of
//! stopping at the first command), on the embedded us-east-1 catalog.
//!
//! The cluster comes from `benches/disruption-cluster.py N --drifted 10`:
//! N initialized nodes of mixed sizes with ~10 pods each, ~30 % of the
//! capacity idle and spread unevenly, every tenth NodeClaim drifted, one
//! NodePool with a 10 % budget. The pass is `simulate --disruption`'s first
//! pass with `PlanOptions::exhaustive`.
//!
//! ```sh
//! cargo bench --bench disruption                               # 1,000 and 5,000 nodes
//! NODEWRIGHT_BENCH_NODES=1000 cargo bench --bench disruption   # peak RSS of 1,000 alone
//! ```
//!
//! A second table runs the passes until one finds nothing (what
//! `simulate --disruption` plans) on the same cluster without drift, at
//! its 10 % budget and at 100 %, and compares the saving with repacking
//! every pod from scratch (`disruption-cluster.py N --repack`).
//!
//! Peak RSS is the process's (`VmHWM`), so a size's figure includes every
//! smaller size run before it: measure one size per run for memory.

#[path = "support/rss.rs"]
mod rss;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::controllers::disruption::sim::{MarkSource, PlanOptions, plan};
use nodewright::extensions::Extensions;
use nodewright::scheduling::SchedulerOptions;
use nodewright::sim::Manifests;
use nodewright_host::HostConfig;

/// The share of NodeClaims with a stale NodePool hash, in percent.
const DRIFTED_PERCENT: u32 = 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<usize> = std::env::var("NODEWRIGHT_BENCH_NODES")
        .unwrap_or_else(|_| "1000,5000".to_string())
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()?;
    let catalog = Arc::new(Catalog::embedded("us-east-1")?);
    let extensions = Arc::new(Extensions::new(HostConfig::default())?);
    let provider = InstanceTypeProvider::new(catalog, extensions, Arc::default());
    let at: Timestamp = "2026-11-26T12:00:00Z".parse()?;
    println!(
        "| nodes | pods | candidates | emptiness | drift | multi-node | single-node | pass | command | $/h before → after | peak RSS |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|");
    for &nodes in &sizes {
        let drifted = DRIFTED_PERCENT.to_string();
        let path = cluster(nodes, &["--drifted", &drifted])?;
        let manifests = Manifests::load(std::slice::from_ref(&path))?;
        let pods = manifests.pods().len();
        let snapshot = manifests.snapshot();
        let options = PlanOptions {
            at,
            spot_to_spot: false,
            scheduler: SchedulerOptions::default(),
            marks: MarkSource::Recompute,
            max_passes: Some(1),
            exhaustive: true,
        };
        let started = Instant::now();
        let found = plan(&snapshot, &provider, &options);
        let wall = started.elapsed();
        let millis = |method: &str| -> String {
            found
                .evaluations
                .iter()
                .filter(|(m, _)| m.as_str() == method)
                .map(|(_, d)| format!("{:.0} ms", d.as_secs_f64() * 1000.0))
                .next()
                .unwrap_or_else(|| "—".to_string())
        };
        let command = found.decisions.first().map_or("none".to_string(), |d| {
            format!(
                "{} of {} nodes",
                d.command.method.as_str(),
                d.command.candidates.len()
            )
        });
        let candidates: usize = found.eligible.values().copied().max().unwrap_or(0);
        println!(
            "| {nodes} | {pods} | {candidates} | {} | {} | {} | {} | {:.0} ms ({:.0} ms wall) | {command} | {:.2} → {:.2} | {} MiB |",
            millis("emptiness"),
            millis("drift"),
            millis("multi-node-consolidation"),
            millis("single-node-consolidation"),
            found.solve_millis,
            wall.as_secs_f64() * 1000.0,
            found.price_before,
            found.price_after,
            rss::peak_rss_mib(),
        );
    }
    println!();
    println!(
        "| nodes | budget | passes | decisions | wall | $/h before → after | repack $/h | share of the repack saving |"
    );
    println!("|---:|---:|---:|---:|---:|---|---:|---:|");
    for nodes in sizes {
        savings(nodes, &provider, at)?;
    }
    Ok(())
}

/// The passes until one finds nothing, on the cluster without drift at a
/// 10 % and a 100 % budget, against the repack of every pod from scratch
/// (`simulate` on the same pods, pending, with no nodes): how much of the
/// repack's saving consolidation reaches.
fn savings(
    nodes: usize,
    provider: &InstanceTypeProvider,
    at: Timestamp,
) -> Result<(), Box<dyn std::error::Error>> {
    let repack = Manifests::load(&[cluster(nodes, &["--repack"])?])?;
    let repack = nodewright::sim::plan(repack, provider, false)?.total_price_per_hour;
    for budget in ["10", "100"] {
        let path = cluster(nodes, &["--budget", budget])?;
        let snapshot = Manifests::load(std::slice::from_ref(&path))?.snapshot();
        let options = PlanOptions {
            at,
            spot_to_spot: false,
            scheduler: SchedulerOptions::default(),
            marks: MarkSource::Recompute,
            max_passes: None,
            exhaustive: false,
        };
        let started = Instant::now();
        let found = plan(&snapshot, provider, &options);
        let wall = started.elapsed();
        let decided: usize = found
            .decisions
            .iter()
            .map(|d| d.command.candidates.len())
            .sum();
        let share = (found.price_before - found.price_after) / (found.price_before - repack);
        println!(
            "| {nodes} | {budget} % | {} | {} commands, {decided} nodes | {:.1} s | {:.2} → {:.2} | {repack:.2} | {:.0} % |",
            found.decisions.len(),
            found.decisions.len(),
            wall.as_secs_f64(),
            found.price_before,
            found.price_after,
            share * 100.0,
        );
    }
    Ok(())
}

/// Writes the cluster of `nodes` nodes made with `args` under `target/`
/// and returns its path.
fn cluster(nodes: usize, args: &[&str]) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = root.join(format!(
        "target/bench-disruption-{nodes}{}.yaml",
        args.join("").replace("--", "-")
    ));
    let output = Command::new("python3")
        .arg(root.join("benches/disruption-cluster.py"))
        .arg(nodes.to_string())
        .args(args)
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "benches/disruption-cluster.py failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    std::fs::write(&path, output.stdout)?;
    Ok(path)
}
