//! The purpose-built components of `filters/host/test-components/` (built
//! for `wasm32-wasip2` on first use) and the checks every hostile call
//! shares: it ends within its deadline, and what it leaves is bounded.

#![allow(dead_code)] // each test file uses a different part

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use nodewright_filter::{Context, Verdict};
use nodewright_host::harness::{self, it};
use nodewright_host::{
    CallReport, Host, InstanceTypeSet, Limits, LoadError, LoadedModule, ModuleRef, Role, sha256_hex,
};

/// Deadline of the test modules: generous enough for a busy machine; the
/// tests about deadlines set their own.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// Added to a deadline before a call counts as having overrun it: the
/// machine is shared, and a test must not fail because another build ran.
/// A call that ignored its deadline would overrun by far more (or hang).
pub const SLACK: Duration = Duration::from_secs(10);

/// Most bytes of stdout/stderr a call report keeps (16 KiB) plus the line
/// that counts what was dropped.
pub const REPORT_OUTPUT_BOUND: usize = 17 * 1024;

/// Most bytes of the text of any error.
pub const ERROR_TEXT_BOUND: usize = 2048;

/// Builds a test component and returns its path.
pub fn component(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test-components")
        .join(name);
    harness::build_component(&dir).unwrap()
}

/// Loads a test component pinned to its current digest.
pub fn try_load(host: &Host, role: Role, name: &str) -> Result<LoadedModule, LoadError> {
    let path = component(name);
    let pin = sha256_hex(&std::fs::read(&path).unwrap());
    host.load(role, &ModuleRef::Path(path), Some(&pin))
}

/// Loads a test component under [`DEADLINE`] and the default memory cap.
pub fn load(host: &Host, role: Role, name: &str) -> LoadedModule {
    try_load(host, role, name).unwrap().with_limits(Limits {
        timeout: DEADLINE,
        ..Limits::default()
    })
}

/// The same module with another deadline.
pub fn with_deadline(module: LoadedModule, timeout: Duration) -> LoadedModule {
    let limits = module.limits();
    module.with_limits(Limits { timeout, ..limits })
}

/// The same module with another memory cap.
pub fn with_memory(module: LoadedModule, memory_bytes: usize) -> LoadedModule {
    let limits = module.limits();
    module.with_limits(Limits {
        memory_bytes,
        ..limits
    })
}

/// A context whose config is `{"mode": MODE}`.
pub fn ctx(mode: &str) -> Context {
    ctx_with(mode, "")
}

/// A context whose config is `{"mode": MODE, EXTRA}`; `extra` is JSON
/// members without braces, such as `"bytes": 5`.
pub fn ctx_with(mode: &str, extra: &str) -> Context {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(",{extra}")
    };
    Context {
        config: format!(r#"{{"mode":"{mode}"{extra}}}"#),
        ..Context::default()
    }
}

/// Three instance types.
pub fn candidates() -> InstanceTypeSet {
    InstanceTypeSet::new(vec![
        it("m7g.large").build(),
        it("t3.micro").burstable().build(),
        it("c7i-flex.xlarge").build(),
    ])
}

/// After any failure, the same module keeps answering correctly.
pub fn still_works(module: &LoadedModule) {
    let verdicts = module.filter(&ctx("name-length"), &candidates()).unwrap();
    assert_eq!(verdicts[0], Verdict::Keep);
    assert_eq!(
        verdicts[2],
        Verdict::drop("c7i-flex.xlarge has a long name")
    );
}

/// Runs one call and asserts that it ended within the module's deadline
/// (plus [`SLACK`]) and that its report and its error text are bounded.
pub fn bounded<T: std::fmt::Debug, E: std::fmt::Display>(
    module: &LoadedModule,
    call: impl FnOnce(&LoadedModule) -> (Result<T, E>, CallReport),
) -> Result<T, E> {
    let start = Instant::now();
    let (result, report) = call(module);
    let elapsed = start.elapsed();
    let limit = module.limits().timeout.saturating_add(SLACK);
    assert!(
        elapsed <= limit,
        "the call took {elapsed:?}, past its deadline of {:?}",
        module.limits().timeout
    );
    assert!(
        report.guest_output.len() <= REPORT_OUTPUT_BOUND,
        "{} bytes of output kept",
        report.guest_output.len()
    );
    let log_bytes: usize = report.logs.iter().map(|(_, l)| l.len()).sum();
    assert!(log_bytes <= 16 * 1024, "{log_bytes} bytes of log kept");
    if let Err(e) = &result {
        let text = e.to_string();
        assert!(
            text.len() <= ERROR_TEXT_BOUND,
            "an error of {} bytes: {}…",
            text.len(),
            text.chars().take(200).collect::<String>()
        );
    }
    result
}
