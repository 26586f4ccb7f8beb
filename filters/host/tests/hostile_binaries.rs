//! Hostile components at load time: capability imports (filesystem, HTTP,
//! sockets), and truncated and bit-flipped binaries pinned by their own
//! digest, so that the digest check lets them through to the compiler.

mod support {
    pub mod components;
}

use std::{sync::Arc, time::Instant};

use nodewright_host::{CallError, Host, HostConfig, LoadError, ModuleRef, Role, sha256_hex};
use support::components::{
    DEADLINE, ERROR_TEXT_BOUND, SLACK, bounded, candidates, component, ctx, load, still_works,
    try_load,
};

fn refused_imports(name: &str) -> Vec<String> {
    let host = Host::new(HostConfig::default()).unwrap();
    let err = try_load(&host, Role::InstanceFilter, name).unwrap_err();
    assert!(err.to_string().len() <= ERROR_TEXT_BOUND, "{err}");
    match err {
        LoadError::ForbiddenImport { imports, .. } => imports,
        other => panic!("{name}: expected a forbidden import, got {other:?}"),
    }
}

/// A refusal of pinned bytes is remembered: loading them again from the
/// same source answers the same error without reading and compiling them
/// again (the source is gone by then), while another source of the same
/// bytes is read for itself.
#[test]
fn a_refused_component_is_not_compiled_again_on_every_load() {
    let host = Host::new(HostConfig::default()).unwrap();
    let bytes = std::fs::read(component("socket-filter")).unwrap();
    let pin = sha256_hex(&bytes);
    let dir = std::env::temp_dir().join(format!("nodewright-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("socket-filter.wasm");
    std::fs::write(&path, &bytes).unwrap();
    let source = ModuleRef::Path(path.clone());

    let first = host
        .load(Role::InstanceFilter, &source, Some(&pin))
        .unwrap_err();
    assert!(
        matches!(first, LoadError::ForbiddenImport { .. }),
        "{first:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let again = host
        .load(Role::InstanceFilter, &source, Some(&pin))
        .unwrap_err();
    assert_eq!(again.to_string(), first.to_string());

    let elsewhere = ModuleRef::Path(dir.join("other.wasm"));
    let err = host
        .load(Role::InstanceFilter, &elsewhere, Some(&pin))
        .unwrap_err();
    assert!(matches!(err, LoadError::Read { .. }), "{err:?}");
}

#[test]
fn filesystem_http_and_socket_imports_are_refused_at_load() {
    for (name, prefix) in [
        ("fs-filter", "wasi:filesystem/"),
        ("http-filter", "wasi:http/"),
        ("socket-filter", "wasi:sockets/"),
    ] {
        let imports = refused_imports(name);
        assert!(
            imports.iter().any(|i| i.starts_with(prefix)),
            "{name}: {imports:?}"
        );
        // Nothing the sandbox grants is reported as refused.
        assert!(
            imports.iter().all(|i| !i.starts_with("wasi:cli/")
                && !i.starts_with("wasi:io/")
                && !i.starts_with("nodewright:")),
            "{name}: {imports:?}"
        );
        // `inspect` says the same without loading.
        let host = Host::new(HostConfig::default()).unwrap();
        let bytes = std::fs::read(component(name)).unwrap();
        let found = host.inspect(&bytes, name).unwrap();
        assert!(!found.loadable(), "{name}");
    }
}

/// Loads `bytes` pinned to their own digest.
fn load_bytes(host: &Host, bytes: Vec<u8>) -> Result<nodewright_host::LoadedModule, LoadError> {
    let pin = sha256_hex(&bytes);
    let source = ModuleRef::Bytes {
        label: "hostile.wasm".to_string(),
        bytes: Arc::from(bytes),
    };
    host.load(Role::InstanceFilter, &source, Some(&pin))
}

#[test]
fn truncated_binaries_are_refused() {
    let host = Host::new(HostConfig::default()).unwrap();
    let whole = std::fs::read(component("misbehaving-filter")).unwrap();
    let len = whole.len();
    for cut in [
        0,
        1,
        4,
        7,
        9,
        64,
        1000,
        len / 3,
        len / 2,
        len - 100,
        len - 1,
    ] {
        let start = Instant::now();
        let err = load_bytes(&host, whole[..cut].to_vec()).unwrap_err();
        assert!(
            matches!(err, LoadError::Compile { .. }),
            "cut at {cut} of {len}: {err:?}"
        );
        assert!(
            err.to_string().len() <= ERROR_TEXT_BOUND,
            "cut at {cut}: {err}"
        );
        assert!(start.elapsed() <= DEADLINE + SLACK, "cut at {cut}");
    }
    // The 8-byte header alone is an empty component: valid, but it exports
    // nothing.
    let err = load_bytes(&host, whole[..8].to_vec()).unwrap_err();
    assert!(matches!(err, LoadError::WrongWorld { .. }), "{err:?}");
    still_works(&load(&host, Role::InstanceFilter, "misbehaving-filter"));
}

/// What became of one bit flip.
#[derive(Debug, Default)]
struct Outcomes {
    refused: usize,
    loaded_and_answered: usize,
    loaded_and_failed: usize,
}

#[test]
fn bit_flipped_binaries_are_refused_or_stay_sandboxed() {
    let host = Host::new(HostConfig::default()).unwrap();
    let whole = std::fs::read(component("misbehaving-filter")).unwrap();
    // Every bit of the header, then one bit at 20 offsets spread over the
    // file (a different bit each time).
    let mut flips: Vec<(usize, u8)> = (0..8).flat_map(|i| (0..8).map(move |b| (i, b))).collect();
    flips.extend((0..20u8).map(|k| (8 + usize::from(k) * (whole.len() - 9) / 20, k % 8)));
    let mut outcomes = Outcomes::default();
    for (offset, bit) in flips {
        let mut bytes = whole.clone();
        bytes[offset] ^= 1 << bit;
        let start = Instant::now();
        match load_bytes(&host, bytes) {
            Err(err) => {
                // The magic and the version/layer word say what the bytes
                // are; a flip there never yields a component.
                if offset < 8 {
                    assert!(
                        matches!(
                            err,
                            LoadError::Compile { .. } | LoadError::CoreModule { .. }
                        ),
                        "flip {offset}:{bit}: {err:?}"
                    );
                }
                assert!(
                    err.to_string().len() <= ERROR_TEXT_BOUND,
                    "flip {offset}:{bit}: {err}"
                );
                outcomes.refused += 1;
            }
            Ok(module) => {
                assert!(offset >= 8, "a flip in the header loaded: {offset}:{bit}");
                let module = module.with_limits(load_limits());
                match bounded(&module, |m| {
                    m.filter_reported(&ctx("name-length"), &candidates())
                }) {
                    Ok(_) => outcomes.loaded_and_answered += 1,
                    Err(
                        CallError::Trap { .. }
                        | CallError::MalformedOutput(_)
                        | CallError::Rejected(_)
                        | CallError::Timeout { .. }
                        | CallError::MemoryExhausted { .. },
                    ) => outcomes.loaded_and_failed += 1,
                    Err(other) => panic!("flip {offset}:{bit}: {other:?}"),
                }
            }
        }
        assert!(
            start.elapsed() <= DEADLINE + DEADLINE + SLACK,
            "flip {offset}:{bit} took {:?}",
            start.elapsed()
        );
    }
    eprintln!("{outcomes:?}");
    assert!(outcomes.refused >= 64, "{outcomes:?}");
    still_works(&load(&host, Role::InstanceFilter, "misbehaving-filter"));
}

fn load_limits() -> nodewright_host::Limits {
    nodewright_host::Limits {
        timeout: DEADLINE,
        ..nodewright_host::Limits::default()
    }
}

/// Top-level sections of a component: (id, content).
fn sections(bytes: &[u8]) -> Vec<(u8, &[u8])> {
    fn leb(bytes: &[u8], i: &mut usize) -> usize {
        let (mut value, mut shift) = (0usize, 0);
        loop {
            let byte = bytes[*i];
            *i += 1;
            value |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte < 0x80 {
                return value;
            }
        }
    }
    let mut out = Vec::new();
    let mut i = 8;
    while i < bytes.len() {
        let id = bytes[i];
        i += 1;
        let len = leb(bytes, &mut i);
        out.push((id, &bytes[i..i + len]));
        i += len;
    }
    out
}

#[test]
fn the_memory_cap_covers_all_memories_of_a_component() {
    // The misbehaving filter with two more core modules appended, each
    // declaring a 40 MiB memory: each is under the 64 MiB cap, together
    // they are over it.
    let mut bytes = std::fs::read(component("misbehaving-filter")).unwrap();
    let existing = sections(&bytes);
    let modules = existing.iter().filter(|(id, _)| *id == 1).count();
    // Module indices follow the order of module sections (a wrong index
    // would fail validation, and the load below with it).
    // A core module whose only content is a memory of 640 pages (40 MiB).
    let big_memory: &[u8] = b"\0asm\x01\0\0\0\x05\x04\x01\x00\x80\x05";
    for _ in 0..2 {
        bytes.push(1);
        bytes.push(u8::try_from(big_memory.len()).unwrap());
        bytes.extend_from_slice(big_memory);
    }
    let first = u8::try_from(modules).unwrap();
    bytes.extend_from_slice(&[2, 7, 2, 0, first, 0, 0, first + 1, 0]);

    let host = Host::new(HostConfig::default()).unwrap();
    let module = load_bytes(&host, bytes).unwrap().with_limits(load_limits());
    let err = bounded(&module, |m| {
        m.filter_reported(&ctx("name-length"), &candidates())
    })
    .unwrap_err();
    assert!(
        matches!(err, CallError::MemoryExhausted { limit_bytes } if limit_bytes == 64 << 20),
        "{err:?}"
    );
    // With a cap above the total the same component answers.
    let module = module.with_limits(nodewright_host::Limits {
        memory_bytes: 128 << 20,
        ..load_limits()
    });
    still_works(&module);
}

#[test]
fn inspect_sees_the_role_of_a_component_importing_the_hosts_wasi_version() {
    // Built with the `wasip2` crate, the misbehaving filter imports WASI
    // `@0.2.12`, the very version the host defines. The host loads it, but
    // `inspect` once reported it as implementing no role (so not loadable):
    // it stubbed unknown imports first, and the stub of `pollable` inside
    // `wasi:clocks/monotonic-clock` broke the type check.
    let host = Host::new(HostConfig::default()).unwrap();
    let bytes = std::fs::read(component("misbehaving-filter")).unwrap();
    let found = host.inspect(&bytes, "misbehaving-filter.wasm").unwrap();
    assert!(
        found
            .imports
            .iter()
            .any(|i| i.name == "wasi:clocks/monotonic-clock@0.2.12"),
        "{:?}",
        found.imports
    );
    assert_eq!(found.roles, vec![Role::InstanceFilter]);
    assert!(found.loadable(), "{found:?}");
    assert!(try_load(&host, Role::InstanceFilter, "misbehaving-filter").is_ok());
}
