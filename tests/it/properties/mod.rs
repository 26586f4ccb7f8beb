//! Property tests over the scheduler's inputs and the CRD types: each
//! property states what must hold for every input a generator can build,
//! and proptest shrinks a failure to a small case. Case counts are modest so
//! the test run stays short; `PROPTEST_CASES` raises them (scripts/fuzz).

mod crds;
mod manifest_target;
mod manifests;
mod mutate;
mod quantities;
mod requirements;
mod scheduler;

use proptest::test_runner::Config;

/// `cases` by default, or `PROPTEST_CASES` when set (long runs).
pub(crate) fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        // Shrinking a failure to its smallest form is worth a little time,
        // not minutes.
        max_shrink_iters: 2_000,
        failure_persistence: None,
        ..Config::default()
    }
}
