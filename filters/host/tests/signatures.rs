//! Cosign-signed `oci:` modules, against the real `cosign` and the CNCF
//! distribution registry (both built by `scripts/oci-tools build`, found
//! through `NODEWRIGHT_OCI_TOOLS`; the test command sets it). A host that
//! requires signatures loads a module signed by a trusted key, and refuses
//! one signed by another key, one not signed, and one carrying the
//! signature of another manifest.

#[path = "support/oci_tools.rs"]
mod oci_tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nodewright_host::harness;
use nodewright_host::{Host, HostConfig, LoadError, ModuleRef, Role, SigningKeys, sha256_hex};
use oci_tools::{Registry, cosign, sign, start_registry, tools, upload};

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
    let signed_digest = upload(&tools, &dir, &signed_path, &repo, "signed");
    let unsigned_digest = upload(&tools, &dir, &unsigned_path, &repo, "unsigned");
    sign(&tools, &dir, "cosign.key", &repo, &signed_digest);

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

    // An entry's own key set: checked on a host without a policy, and
    // beside the host's (an entry narrows it, never widens it).
    let entry = |key: &str| {
        let pem = std::fs::read_to_string(dir.join(key)).unwrap();
        SigningKeys::from_pems("configmap/nodewright/keys", &[(key.to_string(), pem)]).unwrap()
    };
    let load_with = |host: &Host, keys: &SigningKeys| {
        host.load_signed(
            Role::InstanceFilter,
            &ModuleRef::parse(&format!("oci://{repo}:signed")),
            Some(&signed_pin),
            Some(keys),
        )
    };
    let open_host = Host::new(HostConfig {
        plain_http_hosts: vec![registry.authority.clone()],
        ..HostConfig::default()
    })
    .unwrap();
    load_with(&open_host, &entry("cosign.pub")).unwrap();
    let err = refusal(load_with(&open_host, &entry("other.pub")));
    assert!(
        err.contains("made by a key of configmap/nodewright/keys (other.pub)"),
        "{err}"
    );
    load_with(&host, &entry("cosign.pub")).unwrap();
    let err = refusal(load_with(&host, &entry("other.pub")));
    assert!(
        err.contains("configmap/nodewright/keys (other.pub)"),
        "{err}"
    );
    let host_other = host_trusting(&registry, &dir, &["other.pub"]);
    let err = refusal(load_with(&host_other, &entry("cosign.pub")));
    assert!(
        err.contains("configmap/module-signature-keys (other.pub)"),
        "the controller's keys still apply: {err}"
    );
    // Keys on a source that carries no signature are refused.
    let err = refusal(open_host.load_signed(
        Role::InstanceFilter,
        &ModuleRef::Path(signed_path.clone()),
        Some(&signed_pin),
        Some(&entry("cosign.pub")),
    ));
    assert!(
        err.contains("only an oci: module carries a cosign signature"),
        "{err}"
    );

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
    assert!(
        err.contains(&format!("cosign sign --key KEY {repo}@{unsigned_digest}")),
        "{err}"
    );

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
