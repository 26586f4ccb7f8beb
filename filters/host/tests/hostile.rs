//! Hostile components at call time: memory growth just past the cap, huge
//! answers, out-of-contract scores and indices, reads of the environment,
//! blocking host calls and state kept across calls. Every call ends in its
//! typed error within its deadline, with bounded output, and the module
//! keeps answering afterwards.

mod support {
    pub mod components;
}

use std::time::Duration;

use nodewright_filter::Verdict;
use nodewright_host::harness::ami;
use nodewright_host::{CallError, Host, HostConfig, MAX_REASON_BYTES, Role};
use support::components::{
    bounded, candidates, ctx, ctx_with, load, still_works, with_deadline, with_memory,
};

const MIB: usize = 1024 * 1024;

fn filter_module(host: &Host) -> nodewright_host::LoadedModule {
    load(host, Role::InstanceFilter, "misbehaving-filter")
}

#[test]
fn slow_growth_just_past_the_cap_is_memory_exhausted() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = with_memory(filter_module(&host), 8 * MIB);
    // 64 KiB at a time up to 4 MiB fits (the stack, data and the
    // candidates take the rest)...
    let fits = bounded(&module, |m| {
        m.filter_reported(&ctx_with("grow", r#""bytes":4194304"#), &candidates())
    })
    .unwrap();
    assert_eq!(fits[0], Verdict::drop("held 64 chunks"));
    // ...one chunk past the cap does not, however slowly it gets there.
    for bytes in [8 * MIB + 64 * 1024, 8 * MIB] {
        let err = bounded(&module, |m| {
            m.filter_reported(
                &ctx_with("grow", &format!(r#""bytes":{bytes}"#)),
                &candidates(),
            )
        })
        .unwrap_err();
        assert!(
            matches!(err, CallError::MemoryExhausted { limit_bytes } if limit_bytes == 8 * MIB),
            "{err:?}"
        );
    }
    // The default cap holds the same way against an unbounded grower.
    let module = filter_module(&host);
    let err = bounded(&module, |m| m.filter_reported(&ctx("grow"), &candidates())).unwrap_err();
    assert!(
        matches!(err, CallError::MemoryExhausted { limit_bytes } if limit_bytes == 64 * MIB),
        "{err:?}"
    );
    still_works(&module);
}

#[test]
fn millions_of_verdicts_are_malformed_output() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = filter_module(&host);
    for mode in ["many-verdicts", "many-drops"] {
        let err = bounded(&module, |m| m.filter_reported(&ctx(mode), &candidates())).unwrap_err();
        assert!(
            matches!(&err, CallError::MalformedOutput(m) if m.starts_with("1000000 verdicts for 3 candidates")),
            "{mode}: {err:?}"
        );
    }
    // Four million do not even fit in the component's memory.
    let err = bounded(&module, |m| {
        m.filter_reported(
            &ctx_with("many-verdicts", r#""count":4000000"#),
            &candidates(),
        )
    })
    .unwrap_err();
    assert!(matches!(err, CallError::MemoryExhausted { .. }), "{err:?}");
    still_works(&module);
}

#[test]
fn a_32_mib_drop_reason_is_malformed_output() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = filter_module(&host);
    let err = bounded(&module, |m| {
        m.filter_reported(&ctx("giant-reason"), &candidates())
    })
    .unwrap_err();
    let CallError::MalformedOutput(message) = &err else {
        panic!("expected malformed output, got {err:?}")
    };
    assert_eq!(
        message,
        &format!("drop reason for candidate 0 is 33554432 bytes; the limit is {MAX_REASON_BYTES}")
    );
    still_works(&module);
}

#[test]
fn a_10_mb_panic_message_is_a_bounded_trap() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = filter_module(&host);
    let mut dropped = 0;
    let err = bounded(&module, |m| {
        let (result, report) = m.filter_reported(&ctx("huge-panic"), &candidates());
        dropped = report.output_dropped;
        (result, report)
    })
    .unwrap_err();
    let CallError::Trap { guest_output, .. } = &err else {
        panic!("expected a trap, got {err:?}")
    };
    assert!(guest_output.contains("ppppp"), "{guest_output}");
    assert!(guest_output.len() <= 1100, "{} bytes", guest_output.len());
    assert!(dropped >= 10_000_000 - 16 * 1024, "{dropped} bytes dropped");
    still_works(&module);
}

#[test]
fn nan_and_infinite_scores_arrive_as_saturated_integers() {
    let host = Host::new(HostConfig::default()).unwrap();
    let scorer = load(&host, Role::PriorityScorer, "misbehaving-scorer");
    // The contract's scores are `s32`: a component cannot hand back a NaN
    // or an infinity, only what its own float-to-integer cast made of them.
    let scores = bounded(&scorer, |m| {
        m.score_reported(&ctx("nan-inf"), &candidates())
    })
    .unwrap();
    assert_eq!(scores, vec![0, i32::MAX, i32::MIN]);
    let scores = bounded(&scorer, |m| {
        m.score_reported(&ctx("extremes"), &candidates())
    })
    .unwrap();
    assert_eq!(scores, vec![i32::MAX, i32::MIN, -1]);
    let err = bounded(&scorer, |m| {
        m.score_reported(&ctx("many-scores"), &candidates())
    })
    .unwrap_err();
    assert!(
        matches!(&err, CallError::MalformedOutput(m) if m.starts_with("4000000 scores for 3 candidates")),
        "{err:?}"
    );
    assert_eq!(
        scorer.score(&ctx("ok"), &candidates()).unwrap(),
        vec![2, 2, 2]
    );
}

#[test]
fn out_of_range_duplicate_and_millions_of_indices_are_malformed() {
    let host = Host::new(HostConfig::default()).unwrap();
    let selector = load(&host, Role::AmiSelector, "misbehaving-selector");
    let amis = [
        ami("ami-1", 1).build(),
        ami("ami-2", 2).build(),
        ami("ami-3", 3).build(),
    ];
    for (mode, expected) in [
        (
            "max-index",
            "index 4294967295 is out of range for 3 candidates",
        ),
        ("duplicate-late", "index 2 appears more than once"),
        ("many-indices", "index 0 appears more than once"),
    ] {
        let err = bounded(&selector, |m| m.select_reported(&ctx(mode), &amis)).unwrap_err();
        assert!(
            matches!(&err, CallError::MalformedOutput(m) if m == expected),
            "{mode}: {err:?}"
        );
    }
    assert_eq!(selector.select(&ctx("ok"), &amis).unwrap(), vec![2, 1, 0]);
}

#[test]
fn the_environment_arguments_and_stdin_are_empty() {
    let expected = Verdict::drop("vars=[] args=0 home=None stdin=0 read=true");
    for _ in 0..2 {
        // A fresh host each time: nothing of the process leaks in.
        let host = Host::new(HostConfig::default()).unwrap();
        let module = filter_module(&host);
        let verdicts = bounded(&module, |m| {
            m.filter_reported(&ctx("environment"), &candidates())
        })
        .unwrap();
        assert_eq!(verdicts, vec![expected.clone(); 3]);
    }
}

#[test]
fn blocking_host_calls_end_at_the_deadline() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = with_deadline(filter_module(&host), Duration::from_millis(200));
    for mode in [
        "wait-forever",
        "poll-forever",
        "read-stdin-forever",
        "write-stdout-forever",
    ] {
        let err = bounded(&module, |m| m.filter_reported(&ctx(mode), &candidates())).unwrap_err();
        assert!(
            matches!(err, CallError::Timeout { deadline } if deadline == Duration::from_millis(200)),
            "{mode}: {err:?}"
        );
    }
    // Polling an empty list is the component's bug, reported as a trap.
    let err = bounded(&module, |m| {
        m.filter_reported(&ctx("poll-nothing"), &candidates())
    })
    .unwrap_err();
    assert!(matches!(err, CallError::Trap { .. }), "{err:?}");
    still_works(&with_deadline(module, support::components::DEADLINE));
}

/// One pooled slot, so every call reuses the same instance memory.
fn one_slot_host() -> Host {
    Host::new(HostConfig {
        concurrent_calls: 1,
        ..HostConfig::default()
    })
    .unwrap()
}

#[test]
fn every_call_starts_from_a_fresh_instance() {
    // The component traps once it has counted more than 1,000 calls. The
    // host instantiates it for every call, so each call is its first: call
    // 1,001 answers like call 1.
    let host = one_slot_host();
    let module = filter_module(&host);
    for call in 1..=1001 {
        match module.filter(&ctx("count-calls"), &candidates()) {
            Ok(verdicts) => assert_eq!(verdicts[0], Verdict::drop("call 1"), "call {call}"),
            Err(e) => panic!("call {call}: {e}"),
        }
    }
}

#[test]
fn recycled_memory_comes_back_zeroed() {
    // One call fills 32 MiB of fresh pages with 0xA5; the next call, in the
    // same pooled slot, finds its fresh pages all zero.
    let host = one_slot_host();
    let module = filter_module(&host);
    for _ in 0..3 {
        let dirty = bounded(&module, |m| {
            m.filter_reported(&ctx("grow-pages"), &candidates())
        })
        .unwrap();
        assert!(matches!(&dirty[0], Verdict::Drop(r) if r.starts_with("0 non-zero")));
        let check = bounded(&module, |m| {
            m.filter_reported(&ctx("check-pages"), &candidates())
        })
        .unwrap();
        assert_eq!(
            check[0],
            Verdict::drop("0 non-zero bytes in 512 fresh pages")
        );
    }
}

#[test]
fn every_known_failure_ends_in_its_error_within_the_deadline() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = filter_module(&host);
    let short = with_deadline(module.clone(), Duration::from_millis(100));
    type Check = fn(&CallError) -> bool;
    let cases: [(&str, &nodewright_host::LoadedModule, Check); 9] = [
        ("loop", &short, |e| matches!(e, CallError::Timeout { .. })),
        ("sleep-loop", &short, |e| {
            matches!(e, CallError::Timeout { .. })
        }),
        ("sleep", &short, |e| matches!(e, CallError::Timeout { .. })),
        ("alloc", &module, |e| {
            matches!(e, CallError::MemoryExhausted { .. })
        }),
        ("panic", &module, |e| matches!(e, CallError::Trap { .. })),
        ("stack-overflow", &module, |e| {
            matches!(e, CallError::Trap { .. })
        }),
        ("print-then-panic", &module, |e| {
            matches!(e, CallError::Trap { .. })
        }),
        ("huge-error", &module, |e| {
            matches!(e, CallError::Rejected(_))
        }),
        ("wrong-length", &module, |e| {
            matches!(e, CallError::MalformedOutput(_))
        }),
    ];
    for (mode, module, check) in cases {
        let err = bounded(module, |m| m.filter_reported(&ctx(mode), &candidates())).unwrap_err();
        assert!(check(&err), "{mode}: {err:?}");
    }
    still_works(&module);
}
