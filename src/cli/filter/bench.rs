//! `nodewright filter bench`: what a component costs before it ships — the
//! first load (read, check, compile, and write the precompiled artifact),
//! the load of that artifact as a restarted controller does it, and the
//! call time over the embedded catalog's instance types or each NodePool's
//! types of a cluster snapshot, as p50 and p99 over many calls. The
//! candidate table is built once beforehand, as the controller builds it
//! once per catalog version.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nodewright_host::harness::Harness;
use nodewright_host::{
    Host, HostConfig, InstanceTypeSet, LoadedModule, ModuleRef, Role, sha256_hex,
};
use serde::Serialize;

use super::FilterCliError;
use super::workloads::{Candidates, Workload};
use crate::cli::CliError;

/// What `filter bench` measured (`--output json` prints it as is).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchReport {
    /// The component file or `builtin:NAME`.
    pub component: String,
    /// The role it was called as.
    pub role: String,
    /// SHA-256 of the file (none for a built-in).
    pub sha256: Option<String>,
    /// Reading, checking and compiling the file, and writing its
    /// precompiled artifact, in milliseconds (none for a built-in).
    pub first_load_millis: Option<f64>,
    /// Loading the precompiled artifact again, in milliseconds (none for a
    /// built-in).
    pub precompiled_load_millis: Option<f64>,
    /// One entry per candidate set: the catalog's, or each NodePool's.
    pub runs: Vec<BenchRun>,
}

/// Call times over one candidate set.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchRun {
    /// The NodePool whose types these are (`null`: the embedded catalog or
    /// the sample AMIs).
    pub node_pool: Option<String>,
    /// Candidates per call.
    pub candidates: usize,
    /// Calls timed (after three untimed warm-up calls).
    pub calls: usize,
    /// Median call time, in microseconds.
    pub p50_micros: f64,
    /// 99th percentile call time, in microseconds.
    pub p99_micros: f64,
}

/// Benchmarks `component` (a file or `builtin:NAME`) as `role`: `calls`
/// timed calls on each of `workloads`.
pub fn bench(
    component: &str,
    role: Role,
    workloads: Vec<Workload>,
    calls: usize,
) -> Result<BenchReport, CliError> {
    let (module, sha256, first, precompiled) = match ModuleRef::parse(component) {
        ModuleRef::Builtin(name) => (
            Harness::builtin(role, &name)?.module().clone(),
            None,
            None,
            None,
        ),
        _ => {
            let (module, sha256, first, precompiled) = load_twice(Path::new(component), role)?;
            (module, Some(sha256), Some(first), Some(precompiled))
        }
    };
    let mut runs = Vec::new();
    for workload in workloads {
        // The candidate table is built once, as the controller builds it
        // once per catalog version; only the calls are timed.
        let table = match &workload.candidates {
            Candidates::Types(types) => Some(InstanceTypeSet::new(types.clone())),
            Candidates::Amis(_) => None,
        };
        let ctx = &workload.context;
        let call = || -> Result<(), CliError> {
            match (&workload.candidates, &table) {
                (Candidates::Types(_), Some(table)) if role == Role::InstanceFilter => {
                    module.filter(ctx, table)?;
                }
                (Candidates::Types(_), Some(table)) => {
                    module.score(ctx, table)?;
                }
                (Candidates::Amis(amis), _) => {
                    module.select(ctx, amis)?;
                }
                (Candidates::Types(_), None) => {}
            }
            Ok(())
        };
        for _ in 0..3 {
            call()?;
        }
        let mut times: Vec<Duration> = Vec::with_capacity(calls);
        for _ in 0..calls.max(1) {
            let started = Instant::now();
            call()?;
            times.push(started.elapsed());
        }
        times.sort();
        runs.push(BenchRun {
            node_pool: workload.node_pool,
            candidates: match &workload.candidates {
                Candidates::Types(types) => types.len(),
                Candidates::Amis(amis) => amis.len(),
            },
            calls: times.len(),
            p50_micros: micros(percentile(&times, 50)),
            p99_micros: micros(percentile(&times, 99)),
        });
    }
    Ok(BenchReport {
        component: component.to_string(),
        role: role.to_string(),
        sha256,
        first_load_millis: first.map(|d| d.as_secs_f64() * 1000.0),
        precompiled_load_millis: precompiled.map(|d| d.as_secs_f64() * 1000.0),
        runs,
    })
}

/// Loads the component file at `path` through a host with a precompiled
/// artifact cache of its own (a fresh directory, removed after): once
/// compiling it, once from the artifact. The module, its digest and the
/// two load times.
fn load_twice(
    path: &Path,
    role: Role,
) -> Result<(LoadedModule, String, Duration, Duration), CliError> {
    let bytes = std::fs::read(path).map_err(|source| FilterCliError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let sha256 = sha256_hex(&bytes);
    let cache = CacheDir::new();
    let host = Host::new(HostConfig {
        cache_dir: Some(cache.0.clone()),
        ..HostConfig::default()
    })?;
    let source = ModuleRef::Path(path.to_path_buf());
    let started = Instant::now();
    host.load(role, &source, Some(&sha256))?;
    let first = started.elapsed();
    host.clear_memory_cache();
    let started = Instant::now();
    let module = host.load(role, &source, Some(&sha256))?;
    let precompiled = started.elapsed();
    Ok((module, sha256, first, precompiled))
}

/// A private directory for the bench's artifact cache, removed when dropped.
struct CacheDir(PathBuf);

impl CacheDir {
    fn new() -> CacheDir {
        CacheDir(std::env::temp_dir().join(format!(
            "nodewright-filter-bench-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        )))
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `p`th percentile of sorted `times` (nearest rank).
fn percentile(times: &[Duration], p: usize) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * times.len()).div_ceil(100).clamp(1, times.len());
    times[rank - 1]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The report as text: the loads, then one line per run.
pub fn render(report: &BenchReport) -> String {
    let mut out = format!("{} as {}\n", report.component, report.role);
    if let Some(sha) = &report.sha256 {
        out.push_str(&format!("sha256: {sha}\n"));
    }
    match (report.first_load_millis, report.precompiled_load_millis) {
        (Some(first), Some(precompiled)) => out.push_str(&format!(
            "first load (read, check, compile, write the artifact): {first:.1} ms\nprecompiled artifact load: {precompiled:.1} ms\n"
        )),
        _ => out.push_str("built in: nothing to load\n"),
    }
    for run in &report.runs {
        let what = run
            .node_pool
            .as_deref()
            .map_or_else(|| "catalog".to_string(), |p| format!("NodePool {p}"));
        out.push_str(&format!(
            "{what}: {} candidates, {} calls: p50 {:.0} µs, p99 {:.0} µs\n",
            run.candidates, run.calls, run.p50_micros, run.p99_micros
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let times: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile(&times, 50), Duration::from_micros(50));
        assert_eq!(percentile(&times, 99), Duration::from_micros(99));
        assert_eq!(percentile(&times[..1], 99), Duration::from_micros(1));
        assert_eq!(percentile(&[], 50), Duration::ZERO);
    }
}
