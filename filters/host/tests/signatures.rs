//! Cosign-signed `oci:` modules, against the real `cosign` and the CNCF
//! distribution registry (both built by `scripts/oci-tools build`, found
//! through `NODEWRIGHT_OCI_TOOLS`; the test command sets it). A host that
//! requires signatures loads a module signed by a trusted key, and refuses
//! one signed by another key, one not signed, and one carrying the
//! signature of another manifest.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodewright_host::harness;
use nodewright_host::{Host, HostConfig, LoadError, ModuleRef, Role, SigningKeys, sha256_hex};

/// The directory holding `cosign` and `registry`.
fn tools() -> PathBuf {
    let dir = std::env::var_os("NODEWRIGHT_OCI_TOOLS").map(PathBuf::from).expect(
        "NODEWRIGHT_OCI_TOOLS is not set: run `scripts/oci-tools build` and set it to the directory it prints (scripts/test does)",
    );
    for tool in ["cosign", "registry"] {
        assert!(dir.join(tool).is_file(), "{} has no {tool}", dir.display());
    }
    dir
}

/// A registry on 127.0.0.1, stopped when dropped.
struct Registry {
    child: Child,
    authority: String,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_registry(tools: &Path, dir: &Path) -> Registry {
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
fn cosign(tools: &Path, dir: &Path, args: &[&str]) -> Output {
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
fn digest(tools: &Path, dir: &Path, reference: &str) -> String {
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

fn test_component(name: &str) -> (PathBuf, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test-components")
        .join(name);
    let path = harness::build_component(&dir).unwrap();
    let pin = sha256_hex(&std::fs::read(&path).unwrap());
    (path, pin)
}

fn host_trusting(registry: &Registry, dir: &Path, keys: &[&str]) -> Host {
    let pems: Vec<(String, String)> = keys
        .iter()
        .map(|k| (k.to_string(), std::fs::read_to_string(dir.join(k)).unwrap()))
        .collect();
    Host::new(HostConfig {
        plain_http_hosts: vec![registry.authority.clone()],
        module_signature_keys: Some(Arc::new(
            SigningKeys::from_pems("configmap/module-signature-keys", &pems).unwrap(),
        )),
        ..HostConfig::default()
    })
    .unwrap()
}

fn refusal(result: Result<nodewright_host::LoadedModule, LoadError>) -> String {
    match result {
        Err(e @ LoadError::Signature { .. }) => e.to_string(),
        Err(other) => panic!("not a signature refusal: {other}"),
        Ok(_) => panic!("loaded"),
    }
}

#[test]
fn signed_modules_load_and_others_are_refused_naming_the_reference_and_keys() {
    let tools = tools();
    let dir = std::env::temp_dir().join(format!("nodewright-signatures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("other")).unwrap();
    let registry = start_registry(&tools, &dir);
    let repo = format!("{}/filters/drop", registry.authority);

    // Two key pairs, as users make them.
    cosign(&tools, &dir, &["generate-key-pair"]);
    cosign(&tools, &dir.join("other"), &["generate-key-pair"]);
    std::fs::copy(dir.join("other/cosign.pub"), dir.join("other.pub")).unwrap();

    // Two modules pushed as Wasm artifacts; the first signed.
    let (signed_path, signed_pin) = test_component("misbehaving-filter");
    let (unsigned_path, unsigned_pin) = test_component("fs-filter");
    for (path, tag) in [(&signed_path, "signed"), (&unsigned_path, "unsigned")] {
        let target = format!("{repo}:{tag}");
        cosign(
            &tools,
            &dir,
            &[
                "upload",
                "wasm",
                "-f",
                path.to_str().unwrap(),
                "--allow-http-registry",
                &target,
            ],
        );
    }
    let signed_digest = digest(&tools, &dir, &format!("{repo}:signed"));
    cosign(
        &tools,
        &dir,
        &[
            "sign",
            "--key",
            "cosign.key",
            "--tlog-upload=false",
            "--allow-http-registry",
            "--yes",
            &format!("{repo}@{signed_digest}"),
        ],
    );

    let load = |host: &Host, tag: &str, pin: &str| {
        host.load(
            Role::InstanceFilter,
            &ModuleRef::parse(&format!("oci://{repo}:{tag}")),
            Some(pin),
        )
    };

    // Signed by a trusted key: loads.
    let host = host_trusting(&registry, &dir, &["cosign.pub"]);
    load(&host, "signed", &signed_pin).unwrap();

    // Trusting only another key: refused, naming the reference and the set.
    let host = host_trusting(&registry, &dir, &["other.pub"]);
    let err = refusal(load(&host, "signed", &signed_pin));
    assert!(err.contains(&format!("oci://{repo}:signed")), "{err}");
    assert!(
        err.contains("made by a key of configmap/module-signature-keys (other.pub)"),
        "{err}"
    );

    // Not signed at all.
    let host = host_trusting(&registry, &dir, &["cosign.pub", "other.pub"]);
    let err = refusal(load(&host, "unsigned", &unsigned_pin));
    assert!(err.contains("has no cosign signature"), "{err}");
    assert!(err.contains("cosign sign --key"), "{err}");

    // The first module's signature attached to the second: another digest.
    let payload = cosign(
        &tools,
        &dir,
        &[
            "generate",
            "--allow-http-registry",
            &format!("{repo}@{signed_digest}"),
        ],
    );
    std::fs::write(dir.join("payload.json"), &payload.stdout).unwrap();
    let signature = cosign(
        &tools,
        &dir,
        &[
            "sign-blob",
            "--key",
            "cosign.key",
            "--tlog-upload=false",
            "--yes",
            "payload.json",
        ],
    );
    std::fs::write(dir.join("payload.sig"), &signature.stdout).unwrap();
    let unsigned_digest = digest(&tools, &dir, &format!("{repo}:unsigned"));
    cosign(
        &tools,
        &dir,
        &[
            "attach",
            "signature",
            "--payload",
            "payload.json",
            "--signature",
            "payload.sig",
            "--allow-http-registry",
            &format!("{repo}@{unsigned_digest}"),
        ],
    );
    let err = refusal(load(&host, "unsigned", &unsigned_pin));
    assert!(
        err.contains(&format!(
            "is for another manifest ({signed_digest}), not {unsigned_digest}"
        )),
        "{err}"
    );

    // A pin that is not the signed manifest's layer.
    let host = host_trusting(&registry, &dir, &["cosign.pub"]);
    let err = refusal(load(&host, "signed", &unsigned_pin));
    assert!(err.contains("not the pinned module"), "{err}");

    drop(registry);
    std::fs::remove_dir_all(&dir).unwrap();
}
