//! `nodewright filter` as a user runs it: `test` (enforced and shadow, text
//! and JSON), `inspect`, and `new` by version or with `--nodewright`, and the
//! scaffolds' native tests.

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
    assert!(text.contains("would drop ("), "{text}");
    assert!(text.contains("  <type> has a long name\n"), "{text}");
    let out = filter_test(
        &wasm,
        r#"{"mode": "name-length"}"#,
        &["--mode", "shadow", "--output", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["mode"], "shadow");
    assert!(
        json["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "c7i-flex.xlarge"
                && d["reason"] == "c7i-flex.xlarge has a long name"),
        "{json}"
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
    let out = filter_test(
        &wasm,
        r#"{"mode": "panic"}"#,
        &["--mode", "shadow", "--output", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        json["error"].as_str().unwrap().contains("deliberate panic"),
        "{json}"
    );
    assert!(json.get("kept").is_none(), "{json}");

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

/// The names of every instance type `filter test` passes a filter when no
/// candidates file is given, worked out through the library.
fn embedded_catalog_names() -> Vec<String> {
    use nodewright::aws::catalog::Catalog;
    use nodewright::aws::instance_types::{ResolverSettings, filter_records, resolve_all};
    let catalog = Catalog::embedded("us-east-1").unwrap();
    let types = resolve_all(&catalog, &ResolverSettings::default()).unwrap();
    let set = filter_records(&catalog, &types);
    set.views().iter().map(|t| t.to_info().name).collect()
}

#[test]
fn filter_test_summarises_the_whole_catalog_in_a_few_short_lines() {
    let all = embedded_catalog_names();
    let long = all.iter().filter(|n| n.len() > 10).count();
    assert!(
        all.len() > 500 && long > 20,
        "{} types, {long} long",
        all.len()
    );
    let out = filter_test(
        &component("misbehaving-filter"),
        r#"{"mode": "name-length"}"#,
        &["--timeout-ms", "5000"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let summary = format!(
        "kept {}, dropped {long}, of {}\n",
        all.len() - long,
        all.len()
    );
    assert!(text.contains(&summary), "{summary} in {text}");
    assert!(
        text.contains(&format!(
            "dropped ({long}) by reason (1 reason):\n  {long}  <type> has a long name\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("kept ({}): ", all.len() - long)),
        "{text}"
    );
    assert!(text.contains("… and "), "{text}");
    assert!(
        text.contains("every type and reason: --output json"),
        "{text}"
    );
    assert!(text.lines().count() < 20, "{text}");
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest < 200, "a {widest}-character line in {text}");
}

#[test]
fn filter_test_json_lists_every_kept_and_dropped_type() {
    let out = filter_test(
        &component("misbehaving-filter"),
        r#"{"mode": "name-length"}"#,
        &["--timeout-ms", "5000", "--output", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    };
    let kept = names(&json["kept"]);
    let dropped: Vec<(String, String)> = json["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().to_string(),
                d["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut every: Vec<String> = kept
        .iter()
        .cloned()
        .chain(dropped.iter().map(|(n, _)| n.clone()))
        .collect();
    every.sort();
    let mut all = embedded_catalog_names();
    all.sort();
    assert_eq!(every, all);
    assert_eq!(json["candidates"], all.len());
    assert_eq!(json["role"], "instance-filter");
    assert_eq!(json["mode"], "enforce");
    assert!(json["callMs"].as_f64().is_some(), "{json}");
    assert!(kept.iter().all(|n| n.len() <= 10), "{kept:?}");
    for (name, reason) in &dropped {
        assert!(name.len() > 10, "{name}");
        assert_eq!(reason, &format!("{name} has a long name"));
    }
    // One reason group holding every dropped type, in candidate order.
    let groups = json["droppedByReason"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0]["reason"], "<type> has a long name");
    assert_eq!(groups[0]["count"], dropped.len());
    let grouped = names(&groups[0]["types"]);
    let in_order: Vec<String> = dropped.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(grouped, in_order);
}

/// Several reasons, each counted and shown with its types, largest first,
/// on a candidates file small enough to check every line.
#[test]
fn filter_test_groups_drops_by_reason() {
    use nodewright_filter::fixtures::it;
    let dir = tempdir("reasons");
    let mut candidates = vec![
        it("t3.large").burstable().build(),
        it("m7g.large").build(),
        it("c5.large").build(),
        it("c5.xlarge").build(),
    ];
    for size in ["nano", "micro", "small", "medium", "xlarge", "2xlarge"] {
        candidates.push(it(&format!("t3a.{size}")).burstable().build());
    }
    let file = dir.join("candidates.json");
    std::fs::write(&file, serde_json::to_vec(&candidates).unwrap()).unwrap();
    let wasm = nodewright_host::harness::build_component(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("filters/examples/no-burstable"),
    )
    .unwrap();
    let out = filter_test(
        &wasm,
        r#"{"families": ["c5"]}"#,
        &["--candidates", file.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let expected = "\
kept 1, dropped 9, of 10
dropped (9) by reason (2 reasons):
  7  <type> is burstable (CPU credits)
     t3.large, t3a.nano, t3a.micro, t3a.small, t3a.medium … and 2 more
  2  <type> is in family c5, excluded by config.families
     c5.large, c5.xlarge
kept (1): m7g.large
every type and reason: --output json
";
    assert!(text.contains(expected), "expected\n{expected}in\n{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn filter_new_from_registry_depends_on_the_sdk_by_version() {
    let dir = tempdir("new-version");
    let out = nodewright_in(&dir, &["filter", "new", "by-version", "--from-registry"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("from crates.io"), "{}", stdout(&out));
    let text = std::fs::read_to_string(dir.join("by-version/Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&text).unwrap();
    let deps = manifest["dependencies"].as_table().unwrap();
    let version = nodewright_filter::VERSION;
    assert_eq!(deps["nodewright-filter"].as_str(), Some(version), "{text}");
    let host = deps["nodewright-host"].as_table().unwrap();
    assert_eq!(host["version"].as_str(), Some(version), "{text}");
    assert_eq!(host["optional"].as_bool(), Some(true), "{text}");
    assert!(!text.contains("path ="), "{text}");
    // The harness stays behind its feature.
    assert_eq!(
        manifest["features"]["harness"].as_array().unwrap()[0].as_str(),
        Some("dep:nodewright-host")
    );
    assert!(!dir.join("by-version/vendor").exists());
    // Registry or checkout, not both.
    let out = nodewright_in(
        &dir,
        &[
            "filter",
            "new",
            "both",
            "--from-registry",
            "--nodewright",
            ".",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.join("both").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// By default the crate carries the SDK's sources under vendor/ and the
/// lockfile nodewright was built with, and names no path outside itself.
#[test]
fn filter_new_writes_the_sdk_under_vendor_by_default() {
    let dir = tempdir("new-vendored");
    let out = nodewright_in(&dir, &["filter", "new", "vendored"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("under vendor/"), "{}", stdout(&out));
    let crate_dir = dir.join("vendored");
    let text = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&text).unwrap();
    let deps = manifest["dependencies"].as_table().unwrap();
    assert_eq!(
        deps["nodewright-filter"]["path"].as_str(),
        Some("vendor/sdk")
    );
    assert_eq!(
        deps["nodewright-host"]["path"].as_str(),
        Some("vendor/host")
    );
    assert_eq!(deps["nodewright-host"]["optional"].as_bool(), Some(true));
    assert_eq!(
        manifest["workspace"]["exclude"].as_array().unwrap()[0].as_str(),
        Some("vendor")
    );
    for file in [
        "vendor/sdk/Cargo.toml",
        "vendor/sdk/build.rs",
        "vendor/sdk/wit/filters.wit",
        "vendor/host/src/harness.rs",
        "vendor/available-amis/src/lib.rs",
        "vendor/flex-first/src/lib.rs",
        "Cargo.lock",
    ] {
        assert!(crate_dir.join(file).is_file(), "{file}");
    }
    let readme = std::fs::read_to_string(crate_dir.join("README.md")).unwrap();
    assert!(readme.contains("--from-registry"), "{readme}");
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).display().to_string();
    for file in [
        "Cargo.toml",
        "vendor/sdk/Cargo.toml",
        "vendor/host/Cargo.toml",
    ] {
        let text = std::fs::read_to_string(crate_dir.join(file)).unwrap();
        assert!(
            !text.contains(&checkout),
            "{file} names the checkout: {text}"
        );
        assert!(!text.contains(".workspace"), "{file} inherits: {text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn filter_new_checks_and_resolves_the_source_tree() {
    let dir = tempdir("new-paths");
    // Nonexistent, and not a checkout: one line saying what to pass.
    for args in [
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
    // as an absolute path, for both crates, with no version.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .unwrap();
    let relative = pathdiff(&root, &dir.canonicalize().unwrap());
    let out = nodewright_in(
        &dir,
        &["filter", "new", "relative-path", "--nodewright", &relative],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(dir.join("relative-path/Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&text).unwrap();
    let deps = manifest["dependencies"].as_table().unwrap();
    for (name, dir) in [
        ("nodewright-filter", "filters/sdk"),
        ("nodewright-host", "filters/host"),
    ] {
        let dep = deps[name].as_table().unwrap();
        let path = root.join(dir).display().to_string();
        assert_eq!(dep["path"].as_str(), Some(path.as_str()), "{text}");
        assert!(dep.get("version").is_none(), "{text}");
    }
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

/// Every role's scaffold passes its own native unit tests, with the SDK
/// it carries under vendor/ — without the Wasm runtime (the harness is
/// behind a feature).
#[test]
fn scaffolded_crates_pass_their_native_unit_tests() {
    let dir = tempdir("new-units");
    // Shared between runs of this test: only the scaffolds rebuild.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/nodewright-scaffolds");
    for role in ["instance-filter", "priority-scorer", "ami-selector"] {
        let name = format!("unit-{role}");
        let out = nodewright_in(&dir, &["filter", "new", &name, "--role", role]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = nodewright_host::harness::cargo_command()
            .args(["test", "--quiet", "--target-dir"])
            .arg(&target)
            .current_dir(dir.join(&name))
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

#[test]
fn filter_bench_times_the_loads_and_the_calls_over_the_catalog_and_a_snapshot() {
    let wasm = nodewright_host::harness::build_component(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("filters/examples/no-burstable"),
    )
    .unwrap();
    let path = wasm.to_str().unwrap();
    let json = |out: &Output| -> serde_json::Value {
        assert!(out.status.success(), "{}", stderr(out));
        serde_json::from_str(&stdout(out)).unwrap()
    };
    // Over the embedded catalog: both loads timed, one run of every type.
    let report = json(&nodewright(&[
        "filter",
        "bench",
        path,
        "--role",
        "instance-filter",
        "--calls",
        "20",
        "--output",
        "json",
    ]));
    assert!(
        report["firstLoadMillis"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(
        report["precompiledLoadMillis"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert_eq!(
        report["sha256"],
        nodewright_host::sha256_hex(&std::fs::read(&wasm).unwrap())
    );
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert!(runs[0]["nodePool"].is_null());
    assert_eq!(
        runs[0]["candidates"].as_u64().unwrap() as usize,
        embedded_catalog_names().len()
    );
    assert_eq!(runs[0]["calls"], 20);
    let (p50, p99) = (
        runs[0]["p50Micros"].as_f64().unwrap(),
        runs[0]["p99Micros"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p50 <= p99, "{report}");
    // Over a snapshot: one run per NodePool, its class's types.
    let report = json(&nodewright(&[
        "filter",
        "bench",
        path,
        "--role",
        "instance-filter",
        "--snapshot",
        "examples/snapshot/cluster.yaml",
        "--calls",
        "5",
        "--output",
        "json",
    ]));
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{report}");
    assert_eq!(runs[0]["nodePool"], "general-purpose");
    assert!(runs[0]["candidates"].as_u64().unwrap() > 0);
    // A built-in has nothing to load; the text names the figures.
    let out = nodewright(&[
        "filter",
        "bench",
        "builtin:flex-first",
        "--role",
        "priority-scorer",
        "--calls",
        "5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("built in: nothing to load"), "{text}");
    assert!(text.contains("5 calls: p50"), "{text}");
    // A selector has no snapshot workload.
    let out = nodewright(&[
        "filter",
        "bench",
        "builtin:available-amis",
        "--role",
        "ami-selector",
        "--snapshot",
        "examples/snapshot/cluster.yaml",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("leave --snapshot out"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn filter_test_on_a_snapshot_records_fixtures_the_harness_replays() {
    use nodewright_host::fixtures::{Answer, Fixture};
    let wasm = nodewright_host::harness::build_component(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("filters/examples/no-burstable"),
    )
    .unwrap();
    let dir = tempdir("record");
    let fixtures = dir.join("fixtures");
    let out = nodewright(&[
        "filter",
        "test",
        wasm.to_str().unwrap(),
        "--role",
        "instance-filter",
        "--snapshot",
        "examples/snapshot/cluster.yaml",
        "--record",
        fixtures.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let reports: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0]["nodePool"], "general-purpose");
    // The fixture holds the NodePool's context, its class's types and the answer.
    let text = std::fs::read_to_string(fixtures.join("general-purpose.json")).unwrap();
    let fixture: Fixture = serde_json::from_str(&text).unwrap();
    assert_eq!(fixture.role, "instance-filter");
    assert_eq!(fixture.context.node_pool, "general-purpose");
    assert_eq!(fixture.context.node_class, "default");
    assert_eq!(
        fixture.instance_types.len() as u64,
        reports[0]["candidates"].as_u64().unwrap()
    );
    let Answer::Filter { kept, dropped } = &fixture.answer else {
        panic!("{:?}", fixture.answer)
    };
    assert_eq!(kept.len() + dropped.len(), fixture.instance_types.len());
    assert_eq!(
        kept.len() as u64,
        reports[0]["kept"].as_array().unwrap().len() as u64
    );
    // The harness replays it; an answer that differs is caught.
    let harness =
        nodewright_host::harness::Harness::load_file(nodewright_host::Role::InstanceFilter, &wasm)
            .unwrap();
    assert_eq!(harness.assert_fixtures(&fixtures), 1);
    let mut changed = fixture.clone();
    if let Answer::Filter { kept, .. } = &mut changed.answer {
        kept.push("x9.imaginary".to_string());
    }
    std::fs::write(
        fixtures.join("general-purpose.json"),
        serde_json::to_vec(&changed).unwrap(),
    )
    .unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        harness.assert_fixtures(&fixtures)
    }));
    let message = caught.unwrap_err();
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("the answer changed"), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}
