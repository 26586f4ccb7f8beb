//! The real `cosign` and the CNCF distribution registry for signature
//! tests (both built by `scripts/oci-tools build`, found through
//! `NODEWRIGHT_OCI_TOOLS`; the test command sets it): a registry on
//! 127.0.0.1 stopped when dropped, cosign runs, and a signed push. Shared by
//! the host's tests and the controller's (`tests/it/signed_modules.rs`) by
//! path.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The directory holding `cosign` and `registry`.
pub fn tools() -> PathBuf {
    let dir = std::env::var_os("NODEWRIGHT_OCI_TOOLS").map(PathBuf::from).expect(
        "NODEWRIGHT_OCI_TOOLS is not set: run `scripts/oci-tools build` and set it to the directory it prints (scripts/test does)",
    );
    for tool in ["cosign", "registry"] {
        assert!(dir.join(tool).is_file(), "{} has no {tool}", dir.display());
    }
    dir
}

/// A registry on 127.0.0.1, stopped when dropped.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub authority: String,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a registry keeping its blobs in memory, its config and log in `dir`.
pub fn start_registry(tools: &Path, dir: &Path) -> Registry {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let authority = format!("127.0.0.1:{port}");
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!("version: 0.1\nlog: {{level: error}}\nstorage: {{inmemory: {{}}}}\nhttp: {{addr: {authority}}}\n"),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("registry.log")).unwrap();
    let child = Command::new(tools.join("registry"))
        .arg("serve")
        .arg(&config)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let registry = Registry { child, authority };
    let started = Instant::now();
    while TcpStream::connect(&registry.authority).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the registry did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    registry
}

/// Runs cosign in `dir` with an empty key password and no transparency
/// log; panics with its output when it fails.
pub fn cosign(tools: &Path, dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(tools.join("cosign"))
        .args(args)
        .current_dir(dir)
        .env("COSIGN_PASSWORD", "")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cosign {args:?}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The manifest digest of `reference`, as cosign resolves it.
pub fn digest(tools: &Path, dir: &Path, reference: &str) -> String {
    let out = cosign(
        tools,
        dir,
        &["triangulate", "--allow-http-registry", reference],
    );
    let tag = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let hex = tag
        .rsplit(':')
        .next()
        .and_then(|t| t.strip_prefix("sha256-"))
        .and_then(|t| t.strip_suffix(".sig"))
        .unwrap_or_else(|| panic!("unexpected triangulate output {tag}"));
    format!("sha256:{hex}")
}

/// Pushes `wasm` to `repo:tag` as a Wasm artifact and returns its manifest
/// digest (`sha256:HEX`).
pub fn upload(tools: &Path, dir: &Path, wasm: &Path, repo: &str, tag: &str) -> String {
    let target = format!("{repo}:{tag}");
    let wasm = wasm.to_str().expect("a UTF-8 path");
    cosign(
        tools,
        dir,
        &[
            "upload",
            "wasm",
            "-f",
            wasm,
            "--allow-http-registry",
            &target,
        ],
    );
    digest(tools, dir, &target)
}

/// Signs `repo@digest` with `key` (a `cosign.key` in `dir`), without the
/// transparency log.
pub fn sign(tools: &Path, dir: &Path, key: &str, repo: &str, digest: &str) {
    cosign(
        tools,
        dir,
        &[
            "sign",
            "--key",
            key,
            "--tlog-upload=false",
            "--allow-http-registry",
            "--yes",
            &format!("{repo}@{digest}"),
        ],
    );
}
