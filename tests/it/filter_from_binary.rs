//! The path of docs/authoring-filters.md from an empty directory, with
//! nothing but the nodewright binary, cargo and crates.io: `filter new`
//! (the SDK written under vendor/), `cargo test`, `cargo test --features
//! harness`, the component build, `filter test` and `filter inspect`, then a
//! fixture recorded on a snapshot and replayed by the crate's own tests.
//!
//! The nested cargo runs share this build's target directory: the new
//! crate's dev profile is nodewright's, so the Wasm runtime built for the
//! suite is reused rather than built again.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The target directory this test binary was built into
/// (`<target>/<profile>/deps/<binary>`).
fn suite_target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .expect("the test binary lives in <target>/<profile>/deps")
}

/// One step of the sequence, timed, that must succeed.
fn step(what: &str, command: &mut Command) -> Output {
    let started = Instant::now();
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    println!("{what}: {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    out
}

fn cargo(dir: &Path, target_dir: &Path, args: &[&str]) -> Command {
    let mut command = nodewright_host::harness::cargo_command();
    command
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir);
    command
}

fn nodewright(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodewright"));
    command.args(args).current_dir(dir);
    command
}

#[test]
fn a_filter_crate_written_by_the_binary_alone_tests_builds_and_runs() {
    let empty = std::env::temp_dir().join(format!("nodewright-from-binary-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&empty);
    std::fs::create_dir_all(&empty).unwrap();
    let target = suite_target_dir();
    let components = target.join("nodewright-components");
    // A name no crate of the workspace has: its files land in the shared
    // target directory.
    let name = "from-binary-filter";
    step(
        "nodewright filter new",
        &mut nodewright(&empty, &["filter", "new", name]),
    );
    let dir = empty.join(name);

    let out = step("cargo test", &mut cargo(&dir, &target, &["test"]));
    assert!(stdout(&out).contains("1 passed"), "{}", stdout(&out));

    let out = step(
        "cargo test --features harness",
        &mut cargo(&dir, &target, &["test", "--features", "harness"]),
    );
    let text = stdout(&out);
    assert!(
        text.contains("test drops_types_above_the_vcpu_cap ... ok"),
        "{text}"
    );
    assert!(
        text.contains("test recorded_calls_get_the_recorded_answers ... ok"),
        "{text}"
    );

    step(
        "cargo build --target wasm32-wasip2 --release",
        &mut cargo(
            &dir,
            &components,
            &["build", "--target", "wasm32-wasip2", "--release"],
        ),
    );
    let wasm = components.join("wasm32-wasip2/release/from_binary_filter.wasm");
    let wasm = wasm.to_str().unwrap();

    let out = step(
        "nodewright filter test",
        &mut nodewright(
            &dir,
            &[
                "filter",
                "test",
                wasm,
                "--role",
                "instance-filter",
                "--config",
                r#"{"maxVcpu": 8}"#,
                "--output",
                "json",
            ],
        ),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["reason"] == "m5.24xlarge has 96 vCPUs, more than 8"),
        "{report}"
    );

    let out = step(
        "nodewright filter inspect",
        &mut nodewright(&dir, &["filter", "inspect", wasm, "--output", "json"]),
    );
    let inspection: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(inspection["roles"][0], "instance-filter", "{inspection}");

    // Calls recorded on a cluster's snapshot replay in the crate's tests.
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/snapshot/cluster.yaml"),
        dir.join("cluster.yaml"),
    )
    .unwrap();
    step(
        "nodewright filter test --snapshot --record",
        &mut nodewright(
            &dir,
            &[
                "filter",
                "test",
                wasm,
                "--role",
                "instance-filter",
                "--snapshot",
                "cluster.yaml",
                "--record",
                "fixtures",
            ],
        ),
    );
    let out = step(
        "cargo test --features harness (replay)",
        &mut cargo(
            &dir,
            &target,
            &[
                "test",
                "--features",
                "harness",
                "--test",
                "harness",
                "recorded_calls",
                "--",
                "--nocapture",
            ],
        ),
    );
    assert!(
        stdout(&out).contains("1 recorded calls replayed"),
        "{}",
        stdout(&out)
    );
    std::fs::remove_dir_all(&empty).unwrap();
}
