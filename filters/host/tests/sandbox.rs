//! Sandbox behaviour of the host against purpose-built misbehaving
//! components (built from `filters/host/test-components/` on first use).
//! `hostile.rs` and `hostile_binaries.rs` hold the rest of the hostile cases.

mod support {
    pub mod components;
}

use std::{sync::Arc, time::Duration};

use nodewright_filter::{Context, Verdict};
use nodewright_host::harness::ami;
use nodewright_host::{
    CallError, Host, HostConfig, Limits, LoadError, ModuleRef, Role, sha256_hex,
};
use support::components::{candidates, component, ctx, load, still_works, with_deadline};

#[test]
fn well_behaved_filter_round_trips_candidates() {
    let host = Host::new(HostConfig::default()).unwrap();
    still_works(&load(&host, Role::InstanceFilter, "misbehaving-filter"));
}

#[test]
fn endless_loop_times_out() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter").with_limits(Limits {
        timeout: Duration::from_millis(50),
        ..Limits::default()
    });
    let start = std::time::Instant::now();
    let err = module.filter(&ctx("loop"), &candidates()).unwrap_err();
    assert!(matches!(err, CallError::Timeout { .. }), "{err:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "interrupt took {:?}",
        start.elapsed()
    );
    still_works(&module);
}

#[test]
fn one_gib_allocation_hits_the_memory_cap() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let err = module.filter(&ctx("alloc"), &candidates()).unwrap_err();
    assert!(
        matches!(err, CallError::MemoryExhausted { limit_bytes } if limit_bytes == 64 * 1024 * 1024),
        "{err:?}"
    );
    still_works(&module);
}

#[test]
fn panic_is_a_trap_with_the_message() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let err = module.filter(&ctx("panic"), &candidates()).unwrap_err();
    match &err {
        CallError::Trap { guest_output, .. } => {
            assert!(
                guest_output.contains("deliberate panic for the sandbox test"),
                "{guest_output}"
            )
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(err.to_string().contains("deliberate panic"));
    still_works(&module);
}

#[test]
fn component_error_is_rejected() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let err = module.filter(&ctx("error"), &candidates()).unwrap_err();
    assert!(
        matches!(&err, CallError::Rejected(m) if m == "the filter refuses this input"),
        "{err:?}"
    );
}

#[test]
fn wrong_length_and_oversized_reasons_are_malformed() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let err = module
        .filter(&ctx("wrong-length"), &candidates())
        .unwrap_err();
    assert!(
        matches!(&err, CallError::MalformedOutput(m) if m.contains("4 verdicts for 3 candidates")),
        "{err:?}"
    );
    let err = module
        .filter(&ctx("long-reason"), &candidates())
        .unwrap_err();
    assert!(
        matches!(&err, CallError::MalformedOutput(m) if m.contains("drop reason")),
        "{err:?}"
    );

    let scorer = load(&host, Role::PriorityScorer, "misbehaving-scorer");
    let err = scorer
        .score(&ctx("wrong-length"), &candidates())
        .unwrap_err();
    assert!(
        matches!(&err, CallError::MalformedOutput(m) if m.contains("2 scores for 3 candidates")),
        "{err:?}"
    );
    assert_eq!(
        scorer.score(&ctx("ok"), &candidates()).unwrap(),
        vec![2, 2, 2]
    );
    still_works(&load(&host, Role::InstanceFilter, "misbehaving-filter"));
}

#[test]
fn selector_indices_are_validated() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::AmiSelector, "misbehaving-selector");
    let amis = [ami("ami-1", 1).build(), ami("ami-2", 2).build()];
    let err = module.select(&ctx("out-of-range"), &amis).unwrap_err();
    assert!(
        matches!(&err, CallError::MalformedOutput(m) if m.contains("out of range")),
        "{err:?}"
    );
    let err = module.select(&ctx("duplicate"), &amis).unwrap_err();
    assert!(
        matches!(&err, CallError::MalformedOutput(m) if m.contains("more than once")),
        "{err:?}"
    );
    assert_eq!(module.select(&ctx("ok"), &amis).unwrap(), vec![1, 0]);
}

#[test]
fn tampered_bytes_fail_the_digest_check() {
    let host = Host::new(HostConfig::default()).unwrap();
    let mut bytes = std::fs::read(component("misbehaving-filter")).unwrap();
    let pin = sha256_hex(&bytes);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let source = ModuleRef::Bytes {
        label: "configmap/test#filter.wasm".to_string(),
        bytes: Arc::from(bytes),
    };
    let err = host
        .load(Role::InstanceFilter, &source, Some(&pin))
        .unwrap_err();
    assert!(
        matches!(&err, LoadError::DigestMismatch { expected, .. } if *expected == pin),
        "{err:?}"
    );
    let err = host.load(Role::InstanceFilter, &source, None).unwrap_err();
    assert!(matches!(err, LoadError::MissingDigest { .. }), "{err:?}");
    still_works(&load(&host, Role::InstanceFilter, "misbehaving-filter"));
}

#[test]
fn socket_import_is_refused_at_load_naming_the_import() {
    let host = Host::new(HostConfig::default()).unwrap();
    let path = component("socket-filter");
    let pin = sha256_hex(&std::fs::read(&path).unwrap());
    let err = host
        .load(Role::InstanceFilter, &ModuleRef::Path(path), Some(&pin))
        .unwrap_err();
    match &err {
        LoadError::ForbiddenImport { imports, .. } => {
            assert!(
                imports.iter().any(|i| i.starts_with("wasi:sockets/")),
                "{imports:?}"
            )
        }
        other => panic!("expected a forbidden import, got {other:?}"),
    }
    assert!(err.to_string().contains("wasi:sockets/"));
    still_works(&load(&host, Role::InstanceFilter, "misbehaving-filter"));
}

#[test]
fn clocks_and_randomness_are_deterministic() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let first = module.filter(&ctx("clocks"), &candidates()).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let second = module.filter(&ctx("clocks"), &candidates()).unwrap();
    assert_eq!(first, second);
    let Verdict::Drop(reason) = &first[0] else {
        panic!("{first:?}")
    };
    assert!(reason.starts_with("wall=1735689600000000000 "), "{reason}");
}

#[test]
fn log_lines_reach_the_call_report() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let (result, report) = module.filter_reported(&ctx("log"), &candidates());
    assert_eq!(result.unwrap().len(), 3);
    assert_eq!(
        report.logs,
        vec![(
            nodewright_filter::LogLevel::Info,
            "looked at 3 candidates".to_string()
        )]
    );
}

#[test]
fn wrong_world_and_wrong_role_are_errors() {
    let host = Host::new(HostConfig::default()).unwrap();
    let path = component("misbehaving-selector");
    let pin = sha256_hex(&std::fs::read(&path).unwrap());
    let err = host
        .load(Role::InstanceFilter, &ModuleRef::Path(path), Some(&pin))
        .unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::WrongWorld {
                role: Role::InstanceFilter,
                ..
            }
        ),
        "{err:?}"
    );

    let flex = host
        .load(
            Role::PriorityScorer,
            &ModuleRef::parse("builtin:flex-first"),
            None,
        )
        .unwrap();
    let err = flex.filter(&Context::default(), &candidates()).unwrap_err();
    assert!(matches!(err, CallError::WrongRole { .. }), "{err:?}");
    let err = host
        .load(
            Role::InstanceFilter,
            &ModuleRef::parse("builtin:flex-first"),
            None,
        )
        .unwrap_err();
    assert!(matches!(err, LoadError::UnknownBuiltin { .. }), "{err:?}");
}

fn sleep_ctx(seconds: u64) -> Context {
    Context {
        config: format!(r#"{{"mode":"sleep","seconds":{seconds}}}"#),
        ..Context::default()
    }
}

#[test]
fn sleeping_past_the_deadline_ends_the_call_at_once() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let module = with_deadline(module, Duration::from_millis(100));
    // An hour-long sleep: before time was virtual this held the thread for
    // the whole hour. The bound below only guards against a hang.
    for seconds in [5, 3600] {
        let start = std::time::Instant::now();
        let err = module
            .filter(&sleep_ctx(seconds), &candidates())
            .unwrap_err();
        assert!(
            matches!(err, CallError::Timeout { deadline } if deadline == Duration::from_millis(100)),
            "{err:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "a {seconds} s sleep held the host thread for {:?}",
            start.elapsed()
        );
    }
    // Many short sleeps add up the same way.
    let err = module
        .filter(&ctx("sleep-loop"), &candidates())
        .unwrap_err();
    assert!(matches!(err, CallError::Timeout { .. }), "{err:?}");
    still_works(&module);
}

#[test]
fn a_sleep_within_the_deadline_moves_virtual_time_only() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let verdicts = module.filter(&ctx("virtual-time"), &candidates()).unwrap();
    // The component measured exactly the 20 ms it slept, every time.
    assert_eq!(verdicts[0], Verdict::drop("slept 20 ms"));
    assert_eq!(
        module.filter(&ctx("virtual-time"), &candidates()).unwrap(),
        verdicts
    );
}

#[test]
fn printing_past_the_output_cap_succeeds_and_notes_the_drop() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let (result, report) = module.filter_reported(&ctx("print"), &candidates());
    assert_eq!(result.unwrap(), vec![Verdict::Keep; 3]);
    assert!(report.output_dropped > 0, "{report:?}");
    let output = &report.guest_output;
    assert!(
        output.contains(&format!("… {} bytes dropped", report.output_dropped)),
        "{output}"
    );
    assert!(output.starts_with("debug line 0:"), "{output}");
    assert!(output.contains("debug line 999:"), "{output}");
    assert!(output.len() < 17 * 1024, "{} bytes kept", output.len());
}

#[test]
fn a_panic_after_a_flood_of_output_keeps_its_message() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let err = module
        .filter(&ctx("print-then-panic"), &candidates())
        .unwrap_err();
    let CallError::Trap { guest_output, .. } = &err else {
        panic!("expected a trap, got {err:?}")
    };
    assert!(
        guest_output.contains("deliberate panic after a lot of output"),
        "{guest_output}"
    );
    assert!(guest_output.len() <= 1100, "{} bytes", guest_output.len());
    assert!(!guest_output.contains('\n'), "{guest_output}");
}

#[test]
fn a_40_mib_error_is_bounded_and_escaped() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let err = module
        .filter(&ctx("huge-error"), &candidates())
        .unwrap_err();
    let CallError::Rejected(message) = &err else {
        panic!("expected the component's error, got {err:?}")
    };
    assert!(
        message.starts_with("\\u{1b}[31mbad\\nconfig\\r"),
        "{}",
        &message[..80]
    );
    assert!(
        message.ends_with(" more bytes)"),
        "{}",
        &message[message.len() - 80..]
    );
    assert!(message.len() <= 1100, "{} bytes", message.len());
    assert!(!message.chars().any(char::is_control), "{message}");
    assert!(err.to_string().len() <= 1200);
    still_works(&module);
}

#[test]
fn drop_reasons_and_log_lines_are_escaped() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let verdicts = module
        .filter(&ctx("control-reason"), &candidates())
        .unwrap();
    assert_eq!(verdicts[0], Verdict::drop("line one\\nline two\\u{1b}[0m"));
}

#[test]
fn a_stack_overflow_reads_without_a_backtrace() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    let err = module
        .filter(&ctx("stack-overflow"), &candidates())
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, CallError::Trap { .. }), "{err:?}");
    assert!(text.contains("stack overflow"), "{text}");
    assert!(!text.contains("wasm function"), "{text}");
    assert!(!text.contains("backtrace"), "{text}");
    assert!(text.len() < 600, "{text}");
    still_works(&module);
}

#[test]
fn an_absurd_timeout_saturates() {
    let host = Host::new(HostConfig::default()).unwrap();
    let module = load(&host, Role::InstanceFilter, "misbehaving-filter");
    for timeout in [
        Duration::from_secs(100_000_000_000_000 * 3600),
        Duration::MAX,
    ] {
        still_works(&with_deadline(module.clone(), timeout));
    }
}

#[test]
fn a_core_module_is_refused_with_the_target_to_build_for() {
    let host = Host::new(HostConfig::default()).unwrap();
    // The smallest core module: magic and version 1, no sections.
    let bytes: &[u8] = b"\0asm\x01\0\0\0";
    let source = ModuleRef::Bytes {
        label: "filter.wasm".to_string(),
        bytes: Arc::from(bytes),
    };
    let err = host
        .load(Role::InstanceFilter, &source, Some(&sha256_hex(bytes)))
        .unwrap_err();
    assert!(matches!(err, LoadError::CoreModule { .. }), "{err:?}");
    assert!(err.to_string().contains("wasm32-wasip2"), "{err}");
    let err = host.inspect(bytes, "filter.wasm").unwrap_err();
    assert!(matches!(err, LoadError::CoreModule { .. }), "{err:?}");
}

#[test]
fn inspect_reports_roles_contract_imports_and_digest() {
    let host = Host::new(HostConfig::default()).unwrap();
    let bytes = std::fs::read(component("misbehaving-filter")).unwrap();
    let found = host.inspect(&bytes, "misbehaving-filter.wasm").unwrap();
    assert_eq!(found.roles, vec![Role::InstanceFilter]);
    assert_eq!(found.sha256, sha256_hex(&bytes));
    assert_eq!(found.size_bytes, bytes.len());
    assert_eq!(
        found.contract.as_deref(),
        Some(found.host_contract.as_str())
    );
    assert_eq!(found.host_contract, nodewright_host::host_contract());
    assert!(found.host_contract.starts_with("nodewright:filters@"));
    assert!(
        found.imports.iter().all(|i| i.allowed),
        "{:?}",
        found.imports
    );
    assert!(
        found.exports.iter().any(|e| e == "filter"),
        "{:?}",
        found.exports
    );
    assert!(found.loadable());

    let scorer = std::fs::read(component("misbehaving-scorer")).unwrap();
    let found = host.inspect(&scorer, "scorer.wasm").unwrap();
    assert_eq!(found.roles, vec![Role::PriorityScorer]);

    let sockets = std::fs::read(component("socket-filter")).unwrap();
    let found = host.inspect(&sockets, "socket-filter.wasm").unwrap();
    assert_eq!(found.roles, vec![Role::InstanceFilter]);
    let refused: Vec<&str> = found
        .imports
        .iter()
        .filter(|i| !i.allowed)
        .map(|i| i.name.as_str())
        .collect();
    assert!(
        refused.iter().any(|i| i.starts_with("wasi:sockets/")),
        "{refused:?}"
    );
    assert!(!found.loadable());
}
