//! `nodewright filter` as a user runs it: `test` (enforced and shadow),
//! `inspect`, and `new` with its `--nodewright` checks and native tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nodewright_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the nodewright binary runs")
}

fn nodewright(args: &[&str]) -> Output {
    nodewright_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn component(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("filters/host/test-components")
        .join(name);
    nodewright_host::harness::build_component(&dir).unwrap()
}

fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "nodewright-filter-cli-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn filter_test(component: &Path, config: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "filter",
        "test",
        component.to_str().unwrap(),
        "--role",
        "instance-filter",
        "--config",
        config,
    ];
    args.extend_from_slice(extra);
    nodewright(&args)
}

#[test]
fn filter_test_prints_a_40_mib_error_as_one_bounded_line() {
    let out = filter_test(
        &component("misbehaving-filter"),
        r#"{"mode": "huge-error"}"#,
        &["--timeout-ms", "5000"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err:.300}");
    assert_eq!(err.lines().count(), 1, "{err:.300}");
    assert!(err.len() < 1500, "{} bytes", err.len());
    assert!(err.contains("more bytes)"), "{err}");
    assert!(!err.trim_end().chars().any(char::is_control), "{err}");
}

#[test]
fn filter_test_ends_a_sleeping_component_at_its_deadline() {
    let out = filter_test(
        &component("misbehaving-filter"),
        r#"{"mode": "sleep", "seconds": 3600}"#,
        &["--timeout-ms", "100"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("exceeded its deadline of 100ms"), "{err}");
}

#[test]
fn filter_test_accepts_an_absurd_timeout() {
    let out = filter_test(
        &component("misbehaving-filter"),
        r#"{"mode": "name-length"}"#,
        &["--timeout-ms", &u64::MAX.to_string()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn filter_test_in_shadow_mode_reports_and_never_fails() {
    let wasm = component("misbehaving-filter");
    let out = filter_test(
        &wasm,
        r#"{"mode": "name-length"}"#,
        &["--mode", "shadow", "--timeout-ms", "5000"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("in shadow mode"), "{text}");
    assert!(text.contains("nothing is dropped in shadow mode"), "{text}");
    assert!(
        text.contains("c7i-flex.xlarge: c7i-flex.xlarge has a long name"),
        "{text}"
    );

    // A failure is reported, and the command succeeds.
    let out = filter_test(
        &wasm,
        r#"{"mode": "panic"}"#,
        &["--mode", "shadow", "--timeout-ms", "5000"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("shadow module failed"), "{text}");
    assert!(text.contains("deliberate panic"), "{text}");

    // A shadow scorer is compared with the price order.
    let out = nodewright(&[
        "filter",
        "test",
        "builtin:flex-first",
        "--role",
        "priority-scorer",
        "--mode",
        "shadow",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("against price order"), "{text}");
    assert!(text.contains("with this scorer:"), "{text}");

    // A shadow selector is compared with available-amis.
    let out = nodewright(&[
        "filter",
        "test",
        "builtin:available-amis",
        "--role",
        "ami-selector",
        "--mode",
        "shadow",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("would move 0 of"), "{}", stdout(&out));
}

#[test]
fn filter_inspect_shows_what_to_check_before_pinning() {
    let wasm = component("misbehaving-filter");
    let out = nodewright(&["filter", "inspect", wasm.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let digest = nodewright_host::sha256_hex(&std::fs::read(&wasm).unwrap());
    assert!(text.contains(&format!("sha256: {digest}")), "{text}");
    assert!(text.contains("roles: instance-filter"), "{text}");
    assert!(text.contains("contract: nodewright:filters@"), "{text}");
    assert!(text.contains("allowed  wasi:cli/"), "{text}");
    assert!(
        text.contains("the sandbox would load it as instance-filter"),
        "{text}"
    );

    let sockets = component("socket-filter");
    let out = nodewright(&[
        "filter",
        "inspect",
        sockets.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["loadable"], false);
    assert_eq!(json["roles"], serde_json::json!(["instance-filter"]));
    assert!(
        json["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["allowed"] == false
                && i["name"].as_str().unwrap().starts_with("wasi:sockets/")),
        "{json}"
    );

    // A core module is named as one, with the target to build for.
    let dir = tempdir("core");
    let core = dir.join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let out = nodewright(&["filter", "inspect", core.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("wasm32-wasip2"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn filter_new_checks_and_resolves_the_source_tree() {
    let dir = tempdir("new-paths");
    // Not given, nonexistent, and not a checkout: one line saying what to pass.
    for args in [
        vec!["filter", "new", "a"],
        vec!["filter", "new", "a", "--nodewright", "no/such/dir"],
        vec!["filter", "new", "a", "--nodewright", "."],
    ] {
        let out = nodewright_in(&dir, &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("nodewright source checkout"), "{err}");
        assert!(!dir.join("a").exists());
    }
    // A relative path is resolved from where the command runs and written
    // as an absolute path.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .unwrap();
    let relative = pathdiff(&root, &dir.canonicalize().unwrap());
    let out = nodewright_in(
        &dir,
        &["filter", "new", "relative-path", "--nodewright", &relative],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let manifest = std::fs::read_to_string(dir.join("relative-path/Cargo.toml")).unwrap();
    let sdk = root.join("filters/sdk");
    assert!(
        manifest.contains(&format!("path = \"{}\"", sdk.display())),
        "{manifest}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `target` relative to `from` (both absolute), as `../../x`.
fn pathdiff(target: &Path, from: &Path) -> String {
    let target: Vec<_> = target.components().collect();
    let from: Vec<_> = from.components().collect();
    let common = target.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(
        target[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// Every role's scaffold passes its own native unit tests — without the
/// Wasm runtime (the harness is behind a feature).
#[test]
fn scaffolded_crates_pass_their_native_unit_tests() {
    let dir = tempdir("new-units");
    // Shared between runs of this test: only the scaffolds rebuild.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/nodewright-scaffolds");
    for role in ["instance-filter", "priority-scorer", "ami-selector"] {
        let name = format!("unit-{role}");
        let out = nodewright_in(
            &dir,
            &[
                "filter",
                "new",
                &name,
                "--role",
                role,
                "--nodewright",
                env!("CARGO_MANIFEST_DIR"),
            ],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args(["test", "--quiet", "--target-dir"])
            .arg(&target)
            .current_dir(dir.join(&name))
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{role}: {}\n{}",
            stdout(&out),
            stderr(&out)
        );
        let text = stdout(&out);
        assert!(text.contains("1 passed"), "{role}: {text}");
    }
    // The native runs never built the Wasm runtime.
    let built: Vec<String> = std::fs::read_dir(target.join("debug/deps"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !built.iter().any(|f| f.starts_with("libwasmtime")),
        "wasmtime was built for native unit tests"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
