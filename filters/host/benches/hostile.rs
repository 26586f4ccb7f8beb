//! The host's resident memory over 10,000 hostile calls: endless loops,
//! blocking host calls, memory bombs, huge answers, traps, and loads of
//! refused binaries, round-robin on one host. Prints the resident set at the
//! start, every 1,000 calls and at the end, and each case's slowest call;
//! exits non-zero if a call ends in the wrong error or past its deadline, or
//! if the resident set at the end is more than 10% above the plateau.
//!
//! Run: `cargo bench -p nodewright-host --bench hostile`
//! (`NODEWRIGHT_HOSTILE_CALLS=N` for another number of calls.)

#[path = "../tests/support/components.rs"]
mod components;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use components::{DEADLINE, SLACK, candidates, component, ctx, load, with_deadline};
use nodewright_host::harness::ami;
use nodewright_host::{
    CallError, Host, HostConfig, InstanceTypeSet, LoadError, LoadedModule, ModuleRef, Role,
    sha256_hex,
};

/// This process's resident set (`VmRSS`), MiB.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

fn call_kind(e: &CallError) -> &'static str {
    match e {
        CallError::Timeout { .. } => "timeout",
        CallError::MemoryExhausted { .. } => "memory",
        CallError::Trap { .. } => "trap",
        CallError::Rejected(_) => "rejected",
        CallError::MalformedOutput(_) => "malformed",
        CallError::WrongRole { .. } => "wrong-role",
        CallError::Setup(_) => "setup",
    }
}

fn load_kind(e: &LoadError) -> &'static str {
    match e {
        LoadError::Compile { .. } => "compile",
        LoadError::ForbiddenImport { .. } => "forbidden-import",
        LoadError::CoreModule { .. } => "core-module",
        LoadError::WrongWorld { .. } => "wrong-world",
        _ => "other-load-error",
    }
}

/// One hostile case: its name, the outcome it must end in, its deadline
/// and how to run it.
struct Case {
    name: &'static str,
    expected: &'static str,
    deadline: Duration,
    run: Box<dyn Fn() -> &'static str>,
    slowest: Duration,
}

fn filter_case(
    module: &LoadedModule,
    set: &Arc<InstanceTypeSet>,
    mode: &'static str,
    expected: &'static str,
) -> Case {
    let module = module.clone();
    let set = Arc::clone(set);
    Case {
        name: mode,
        expected,
        deadline: module.limits().timeout,
        run: Box::new(move || match module.filter(&ctx(mode), &set) {
            Ok(_) => "ok",
            Err(e) => call_kind(&e),
        }),
        slowest: Duration::ZERO,
    }
}

fn load_case(host: &Host, name: &'static str, bytes: Vec<u8>, expected: &'static str) -> Case {
    let host = host.clone();
    let pin = sha256_hex(&bytes);
    let source = ModuleRef::Bytes {
        label: name.to_string(),
        bytes: Arc::from(bytes),
    };
    Case {
        name,
        expected,
        deadline: DEADLINE,
        run: Box::new(
            move || match host.load(Role::InstanceFilter, &source, Some(&pin)) {
                Ok(_) => "ok",
                Err(e) => load_kind(&e),
            },
        ),
        slowest: Duration::ZERO,
    }
}

fn cases(host: &Host) -> Vec<Case> {
    let set = Arc::new(candidates());
    let filter = load(host, Role::InstanceFilter, "misbehaving-filter");
    let short = with_deadline(filter.clone(), Duration::from_millis(20));
    let mut cases = vec![
        filter_case(&short, &set, "loop", "timeout"),
        filter_case(&short, &set, "sleep-loop", "timeout"),
        filter_case(&short, &set, "wait-forever", "timeout"),
        filter_case(&short, &set, "read-stdin-forever", "timeout"),
        filter_case(&short, &set, "write-stdout-forever", "timeout"),
        filter_case(&filter, &set, "alloc", "memory"),
        filter_case(&filter, &set, "grow", "memory"),
        filter_case(&filter, &set, "panic", "trap"),
        filter_case(&filter, &set, "stack-overflow", "trap"),
        filter_case(&filter, &set, "huge-panic", "trap"),
        filter_case(&filter, &set, "print-then-panic", "trap"),
        filter_case(&filter, &set, "poll-nothing", "trap"),
        filter_case(&filter, &set, "huge-error", "rejected"),
        filter_case(&filter, &set, "many-verdicts", "malformed"),
        filter_case(&filter, &set, "many-drops", "malformed"),
        filter_case(&filter, &set, "giant-reason", "malformed"),
        filter_case(&filter, &set, "environment", "ok"),
        filter_case(&filter, &set, "count-calls", "ok"),
    ];

    let scorer = load(host, Role::PriorityScorer, "misbehaving-scorer");
    let scores_set = Arc::clone(&set);
    cases.push(Case {
        name: "many-scores",
        expected: "malformed",
        deadline: scorer.limits().timeout,
        run: Box::new(
            move || match scorer.score(&ctx("many-scores"), &scores_set) {
                Ok(_) => "ok",
                Err(e) => call_kind(&e),
            },
        ),
        slowest: Duration::ZERO,
    });
    let selector = load(host, Role::AmiSelector, "misbehaving-selector");
    let amis = vec![ami("ami-1", 1).build(), ami("ami-2", 2).build()];
    cases.push(Case {
        name: "many-indices",
        expected: "malformed",
        deadline: selector.limits().timeout,
        run: Box::new(move || match selector.select(&ctx("many-indices"), &amis) {
            Ok(_) => "ok",
            Err(e) => call_kind(&e),
        }),
        slowest: Duration::ZERO,
    });

    let whole = std::fs::read(component("misbehaving-filter")).unwrap_or_default();
    let mut flipped = whole.clone();
    if let Some(b) = flipped.get_mut(5) {
        *b ^= 0x10;
    }
    cases.push(load_case(
        host,
        "truncated",
        whole[..whole.len() / 2].to_vec(),
        "compile",
    ));
    cases.push(load_case(host, "header-flipped", flipped, "compile"));
    let fs = std::fs::read(component("fs-filter")).unwrap_or_default();
    cases.push(load_case(host, "filesystem-import", fs, "forbidden-import"));
    cases
}

fn main() {
    let calls: usize = std::env::var("NODEWRIGHT_HOSTILE_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let host = Host::new(HostConfig::default()).expect("host");
    let mut cases = cases(&host);
    // One warm-up round: pooled slots, caches and the allocator's arenas.
    for case in &cases {
        (case.run)();
    }
    let start_rss = rss_mib();
    println!(
        "{calls} hostile calls over {} cases; RSS after one warm-up round: {start_rss:.1} MiB",
        cases.len()
    );
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut failures = Vec::new();
    for i in 0..calls {
        let n = cases.len();
        let case = &mut cases[i % n];
        let t = Instant::now();
        let outcome = (case.run)();
        let elapsed = t.elapsed();
        case.slowest = case.slowest.max(elapsed);
        if outcome != case.expected {
            failures.push(format!(
                "call {i} ({}): {outcome}, expected {}",
                case.name, case.expected
            ));
        }
        if elapsed > case.deadline + SLACK {
            failures.push(format!("call {i} ({}) took {elapsed:?}", case.name));
        }
        if (i + 1) % 1000 == 0 {
            let rss = rss_mib();
            samples.push(rss);
            println!(
                "after {:>6} calls ({:>5.1} s): RSS {rss:.1} MiB",
                i + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let end = rss_mib();
    // The plateau: the resident set once every case has run many times.
    let plateau = samples.get(1).copied().unwrap_or(end);
    let peak = samples.iter().copied().fold(start_rss, f64::max);
    println!(
        "RSS: start {start_rss:.1} MiB, plateau (after 2,000 calls) {plateau:.1} MiB, peak sample {peak:.1} MiB, end {end:.1} MiB ({:+.1}% from the plateau)",
        (end - plateau) / plateau * 100.0
    );
    println!("slowest call of each case (deadline):");
    for case in &cases {
        println!(
            "  {:<22} {:>10.1?} ({:?}) -> {}",
            case.name, case.slowest, case.deadline, case.expected
        );
    }
    if end > plateau * 1.10 {
        failures.push(format!(
            "RSS grew from {plateau:.1} MiB to {end:.1} MiB after the plateau"
        ));
    }
    if !failures.is_empty() {
        for f in failures.iter().take(20) {
            eprintln!("FAIL {f}");
        }
        std::process::exit(1);
    }
}
