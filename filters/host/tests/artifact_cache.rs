//! The precompiled-artifact cache on disk: artifacts are reused across
//! hosts, and one that may not be what the host wrote — changed bytes,
//! another owner, writable by others, a directory others may write — is
//! never run. Each refused artifact is checked with its source gone, so
//! the load can only succeed from the artifact.

mod support {
    pub mod components;
}

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nodewright_host::{Host, HostConfig, HostError, LoadError, ModuleRef, Role, sha256_hex};
use support::components::{component, still_works};

/// A cache directory of its own for each test, removed when it ends.
struct CacheDir(PathBuf);

impl CacheDir {
    fn new(test: &str) -> CacheDir {
        let dir = std::env::temp_dir().join(format!(
            "nodewright-artifacts-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        CacheDir(dir)
    }

    fn config(&self) -> HostConfig {
        HostConfig {
            cache_dir: Some(self.0.clone()),
            ..HostConfig::default()
        }
    }

    /// The one artifact the cache holds.
    fn artifact(&self) -> PathBuf {
        let found: Vec<_> = walk(&self.0)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        found[0].clone()
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles the test filter into `cache` and returns its pin.
fn cache_filter(cache: &CacheDir) -> String {
    let path = component("misbehaving-filter");
    let pin = sha256_hex(&std::fs::read(&path).unwrap());
    let host = Host::new(cache.config()).unwrap();
    host.load(Role::InstanceFilter, &ModuleRef::Path(path), Some(&pin))
        .unwrap();
    pin
}

/// Loads `pin` in a new host with the source missing: only the artifact
/// can serve it.
fn load_from_artifact_only(cache: &CacheDir, pin: &str) -> Result<(), LoadError> {
    let host = Host::new(cache.config()).unwrap();
    let missing = ModuleRef::Path(cache.0.join("missing.wasm"));
    host.load(Role::InstanceFilter, &missing, Some(pin))
        .map(|module| still_works(&module))
}

fn assert_refused(cache: &CacheDir, pin: &str, artifact: &Path) {
    let err = load_from_artifact_only(cache, pin).unwrap_err();
    assert!(matches!(err, LoadError::Read { .. }), "{err:?}");
    assert!(!artifact.exists(), "the refused artifact is removed");
}

#[test]
fn precompiled_artifacts_are_reused_across_hosts() {
    let cache = CacheDir::new("reuse");
    let pin = cache_filter(&cache);
    let artifact = cache.artifact();
    assert!(
        artifact
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&pin)
    );
    let file_mode = std::fs::metadata(&artifact).unwrap().mode() & 0o777;
    assert_eq!(file_mode, 0o600, "{file_mode:o}");
    let dir_mode = std::fs::metadata(artifact.parent().unwrap())
        .unwrap()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700, "{dir_mode:o}");
    load_from_artifact_only(&cache, &pin).unwrap();
}

#[test]
fn an_artifact_whose_bytes_changed_is_not_run_but_compiled_again() {
    let cache = CacheDir::new("flipped");
    let pin = cache_filter(&cache);
    let artifact = cache.artifact();
    // One bit in the middle of the native code: wasmtime's own header
    // checks do not look there.
    let mut bytes = std::fs::read(&artifact).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&artifact, &bytes).unwrap();
    assert_refused(&cache, &pin, &artifact);

    // With its source at hand, the module compiles again and the cache
    // holds a good artifact once more.
    let again = cache_filter(&cache);
    assert_eq!(again, pin);
    load_from_artifact_only(&cache, &pin).unwrap();
}

#[test]
fn an_artifact_without_the_header_or_cut_short_is_not_run() {
    let cache = CacheDir::new("truncated");
    let pin = cache_filter(&cache);
    let artifact = cache.artifact();
    let bytes = std::fs::read(&artifact).unwrap();
    std::fs::write(&artifact, &bytes[..bytes.len() - 1]).unwrap();
    assert_refused(&cache, &pin, &artifact);

    // A bare wasmtime artifact, as an older host wrote it.
    cache_filter(&cache);
    let bytes = std::fs::read(&artifact).unwrap();
    let second_newline = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(1)
        .map(|(i, _)| i)
        .unwrap();
    std::fs::write(&artifact, &bytes[second_newline + 1..]).unwrap();
    assert_refused(&cache, &pin, &artifact);
}

#[test]
fn an_artifact_others_may_write_is_not_run() {
    let cache = CacheDir::new("mode");
    let pin = cache_filter(&cache);
    let artifact = cache.artifact();
    std::fs::set_permissions(&artifact, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_refused(&cache, &pin, &artifact);
}

#[test]
fn an_artifact_owned_by_another_user_is_not_run() {
    let cache = CacheDir::new("owner");
    let pin = cache_filter(&cache);
    let artifact = cache.artifact();
    // Giving a file away takes root; an unprivileged run cannot make the
    // case and says so.
    if std::os::unix::fs::chown(&artifact, Some(65534), Some(65534)).is_err() {
        eprintln!("not root: cannot give the artifact to another user; case skipped");
        return;
    }
    assert_refused(&cache, &pin, &artifact);
}

#[test]
fn a_cache_directory_others_may_write_stops_the_host_with_the_fix() {
    let cache = CacheDir::new("dir-mode");
    cache_filter(&cache);
    let dir = cache.artifact().parent().unwrap().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Host::new(cache.config())
        .err()
        .expect("the host refuses it");
    assert!(matches!(err, HostError::UnsafeCacheDir { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&dir.display().to_string()), "{text}");
    assert!(text.contains("writable by group or others"), "{text}");
    assert!(text.contains("0700"), "{text}");
    // The world-writable base (an emptyDir) is fine: only the directory the
    // host creates inside it must be private.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(&cache.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    Host::new(cache.config()).unwrap();
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p))
        } else {
            out.push(p)
        }
    }
    out
}
