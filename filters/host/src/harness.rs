//! Test harness for filter authors: build a component, load it under the
//! production sandbox, feed it fixture instance types or AMIs made with the
//! SDK's builders (re-exported here: [`it`], [`ami`]), and assert on what it
//! kept, dropped or ordered, with readable failure messages.
//!
//! ```no_run
//! use nodewright_host::harness::{self, Harness, it};
//! use nodewright_host::Role;
//! let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
//! let h = Harness::load_file(Role::InstanceFilter, &wasm).unwrap();
//! let out = h.filter(&[it("t3.large").burstable().build(), it("m7g.large").build()]).unwrap();
//! out.assert_kept(&["m7g.large"]);
//! ```

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex, OnceLock},
};

use nodewright_filter::{Ami, Context, InstanceType, InstanceTypeInfo, Verdict};

pub use nodewright_filter::fixtures::{AmiBuilder, InstanceTypeBuilder, ami, it};

use crate::{
    CallError, CallReport, Host, HostConfig, InstanceTypeSet, LoadError, LoadedModule, ModuleRef,
    Role,
};

/// Why the harness could not set up.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The host could not start.
    #[error(transparent)]
    Host(#[from] crate::HostError),
    /// The module could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The component file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `cargo build --target wasm32-wasip2` failed.
    #[error("building the component in {dir} failed: {message}")]
    Build {
        /// The crate directory.
        dir: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// One module under test, with the context its calls get.
pub struct Harness {
    module: LoadedModule,
    ctx: Context,
}

impl Harness {
    /// Loads a component file for `role`, pinned to the digest of the file
    /// as it is now.
    pub fn load_file(role: Role, path: impl AsRef<Path>) -> Result<Harness, HarnessError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| HarnessError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let pin = crate::sha256_hex(&bytes);
        let module = shared_host()?.load(role, &ModuleRef::Path(path.to_path_buf()), Some(&pin))?;
        Ok(Harness::from_module(module))
    }

    /// Loads component bytes for `role`.
    pub fn load_bytes(role: Role, bytes: &[u8]) -> Result<Harness, HarnessError> {
        let pin = crate::sha256_hex(bytes);
        let source = ModuleRef::Bytes {
            label: "harness bytes".to_string(),
            bytes: Arc::from(bytes),
        };
        let module = shared_host()?.load(role, &source, Some(&pin))?;
        Ok(Harness::from_module(module))
    }

    /// Loads a native built-in (`flex-first`, `available-amis`).
    pub fn builtin(role: Role, name: &str) -> Result<Harness, HarnessError> {
        let module = shared_host()?.load(role, &ModuleRef::Builtin(name.to_string()), None)?;
        Ok(Harness::from_module(module))
    }

    /// Wraps an already loaded module.
    pub fn from_module(module: LoadedModule) -> Harness {
        Harness {
            module,
            ctx: Context {
                node_pool: "default".to_string(),
                node_class: "default".to_string(),
                region: "us-east-1".to_string(),
                config: "{}".to_string(),
                now: 1_767_225_600, // 2026-01-01T00:00:00Z
            },
        }
    }

    /// Sets the `config` JSON calls receive.
    pub fn with_config(mut self, json: &str) -> Harness {
        self.ctx.config = json.to_string();
        self
    }

    /// Replaces the whole context.
    pub fn with_context(mut self, ctx: Context) -> Harness {
        self.ctx = ctx;
        self
    }

    /// The module under test.
    pub fn module(&self) -> &LoadedModule {
        &self.module
    }

    /// Runs the instance filter.
    pub fn filter(&self, types: &[InstanceTypeInfo]) -> Result<FilterOutcome, CallError> {
        let set = InstanceTypeSet::new(types.to_vec());
        let (result, report) = self.module.filter_reported(&self.ctx, &set);
        let verdicts = result?;
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for (it, v) in types.iter().zip(verdicts) {
            match v {
                Verdict::Keep => kept.push(it.name.clone()),
                Verdict::Drop(reason) => dropped.push((it.name.clone(), reason)),
            }
        }
        Ok(FilterOutcome {
            kept,
            dropped,
            report,
        })
    }

    /// Runs the priority scorer.
    pub fn score(&self, types: &[InstanceTypeInfo]) -> Result<ScoreOutcome, CallError> {
        let set = InstanceTypeSet::new(types.to_vec());
        let (result, report) = self.module.score_reported(&self.ctx, &set);
        let scores = result?;
        let views = set.views();
        let mut ranked: Vec<(&InstanceType<'_>, i32)> =
            views.iter().zip(scores.iter().copied()).collect();
        ranked.sort_by(|(a, sa), (b, sb)| {
            sb.cmp(sa).then_with(|| {
                let pa = a.cheapest_available_price().unwrap_or(f64::INFINITY);
                let pb = b.cheapest_available_price().unwrap_or(f64::INFINITY);
                pa.total_cmp(&pb)
            })
        });
        Ok(ScoreOutcome {
            scores: types.iter().map(|t| t.name.clone()).zip(scores).collect(),
            order: ranked
                .into_iter()
                .map(|(t, _)| t.name().to_string())
                .collect(),
            report,
        })
    }

    /// Runs the AMI selector.
    pub fn select(&self, amis: &[Ami]) -> Result<SelectOutcome, CallError> {
        let (result, report) = self.module.select_reported(&self.ctx, amis);
        let order = result?;
        Ok(SelectOutcome {
            order: order
                .iter()
                .filter_map(|&i| usize::try_from(i).ok().and_then(|i| amis.get(i)))
                .map(|a| a.id.clone())
                .collect(),
            report,
        })
    }
}

/// What an instance filter kept and dropped.
#[derive(Debug)]
pub struct FilterOutcome {
    /// Kept instance type names, in candidate order.
    pub kept: Vec<String>,
    /// Dropped names with their reasons, in candidate order.
    pub dropped: Vec<(String, String)>,
    /// Logs and timing.
    pub report: CallReport,
}

impl FilterOutcome {
    /// Asserts exactly these names were kept (order-insensitive).
    #[track_caller]
    pub fn assert_kept(&self, expected: &[&str]) {
        assert_same_set("kept", &self.kept, expected, &self.explain());
    }

    /// Asserts exactly these names were dropped (order-insensitive).
    #[track_caller]
    pub fn assert_dropped(&self, expected: &[&str]) {
        let names: Vec<String> = self.dropped.iter().map(|(n, _)| n.clone()).collect();
        assert_same_set("dropped", &names, expected, &self.explain());
    }

    /// Asserts `name` was dropped with a reason containing `needle`.
    #[track_caller]
    pub fn assert_dropped_because(&self, name: &str, needle: &str) {
        match self.dropped.iter().find(|(n, _)| n == name) {
            Some((_, reason)) if reason.contains(needle) => {}
            Some((_, reason)) => {
                panic!("{name} was dropped, but its reason {reason:?} does not contain {needle:?}")
            }
            None => panic!("{name} was not dropped\n{}", self.explain()),
        }
    }

    fn explain(&self) -> String {
        let mut s = format!("kept: {:?}\ndropped:\n", self.kept);
        for (n, r) in &self.dropped {
            s.push_str(&format!("  {n}: {r}\n"));
        }
        s
    }
}

/// What a priority scorer returned.
#[derive(Debug)]
pub struct ScoreOutcome {
    /// Name and score, in candidate order.
    pub scores: Vec<(String, i32)>,
    /// Names in the order the controller would try them (score descending,
    /// then cheapest available price).
    pub order: Vec<String>,
    /// Logs and timing.
    pub report: CallReport,
}

impl ScoreOutcome {
    /// Asserts the try-order starts with `expected`.
    #[track_caller]
    pub fn assert_order_starts_with(&self, expected: &[&str]) {
        let head: Vec<&str> = self
            .order
            .iter()
            .take(expected.len())
            .map(String::as_str)
            .collect();
        assert!(
            head == expected,
            "try-order starts with {head:?}, expected {expected:?}\nscores: {:?}",
            self.scores
        );
    }

    /// Asserts the whole try-order.
    #[track_caller]
    pub fn assert_order(&self, expected: &[&str]) {
        let order: Vec<&str> = self.order.iter().map(String::as_str).collect();
        assert!(
            order == expected,
            "try-order is {order:?}, expected {expected:?}\nscores: {:?}",
            self.scores
        );
    }

    /// The score given to `name`.
    pub fn score_of(&self, name: &str) -> Option<i32> {
        self.scores.iter().find(|(n, _)| n == name).map(|(_, s)| *s)
    }
}

/// What an AMI selector chose.
#[derive(Debug)]
pub struct SelectOutcome {
    /// Chosen AMI ids, best first.
    pub order: Vec<String>,
    /// Logs and timing.
    pub report: CallReport,
}

impl SelectOutcome {
    /// Asserts exactly this order of AMI ids.
    #[track_caller]
    pub fn assert_order(&self, expected: &[&str]) {
        let order: Vec<&str> = self.order.iter().map(String::as_str).collect();
        assert!(
            order == expected,
            "selected {order:?}, expected {expected:?}"
        );
    }
}

#[track_caller]
fn assert_same_set(what: &str, actual: &[String], expected: &[&str], context: &str) {
    let mut a: Vec<&str> = actual.iter().map(String::as_str).collect();
    let mut e: Vec<&str> = expected.to_vec();
    a.sort_unstable();
    e.sort_unstable();
    if a != e {
        let missing: Vec<&&str> = e.iter().filter(|x| !a.contains(x)).collect();
        let unexpected: Vec<&&str> = a.iter().filter(|x| !e.contains(x)).collect();
        panic!(
            "{what} set differs\n  missing:    {missing:?}\n  unexpected: {unexpected:?}\n{context}"
        );
    }
}

fn shared_host() -> Result<Host, crate::HostError> {
    static HOST: OnceLock<Host> = OnceLock::new();
    if let Some(h) = HOST.get() {
        return Ok(h.clone());
    }
    let host = Host::new(HostConfig::default())?;
    Ok(HOST.get_or_init(|| host).clone())
}

/// A `cargo` command (the one running the tests, else the PATH's) with the
/// environment a shell would give it: none of the variables cargo sets for
/// the test that runs it (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, `OUT_DIR`, …), which
/// would make build scripts that watch them look changed to the next build
/// sharing the target directory, and no `RUSTFLAGS`.
pub fn cargo_command() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        let set_for_a_test = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
            "OUT_DIR",
        ]
        .iter()
        .any(|prefix| name_text.starts_with(prefix));
        if set_for_a_test {
            command.env_remove(&name);
        }
    }
    command
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    command
}

/// Builds the crate at `crate_dir` with `cargo build --target wasm32-wasip2
/// --release` (into `<target>/nodewright-components`, next to the test
/// binary's target directory) and returns the path of its `.wasm`. Repeated
/// calls in one process build once.
pub fn build_component(crate_dir: impl AsRef<Path>) -> Result<PathBuf, HarnessError> {
    static BUILT: OnceLock<Mutex<HashMap<PathBuf, PathBuf>>> = OnceLock::new();
    let dir = crate_dir.as_ref().to_path_buf();
    let built = BUILT.get_or_init(|| Mutex::new(HashMap::new()));
    let mut built = built
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(p) = built.get(&dir) {
        return Ok(p.clone());
    }
    let fail = |message: String| HarnessError::Build {
        dir: dir.clone(),
        message,
    };
    let target_dir = component_target_dir();
    let output = cargo_command()
        .current_dir(&dir)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--message-format=json-render-diagnostics",
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .map_err(|e| fail(format!("cannot run cargo: {e}")))?;
    if !output.status.success() {
        return Err(fail(String::from_utf8_lossy(&output.stderr).into_owned()));
    }
    let manifest = dir.join("Cargo.toml");
    let manifest = manifest.canonicalize().unwrap_or(manifest);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let wasm = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact")
        .filter(|msg| msg["manifest_path"].as_str().map(Path::new) == Some(manifest.as_path()))
        .flat_map(|msg| {
            msg["filenames"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(PathBuf::from))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .find(|f| f.extension().is_some_and(|e| e == "wasm"))
        .ok_or_else(|| {
            fail(
                "cargo produced no .wasm; is the crate's crate-type [\"cdylib\", \"rlib\"]?"
                    .to_string(),
            )
        })?;
    built.insert(dir, wasm.clone());
    Ok(wasm)
}

/// `<target>/nodewright-components`, where `<target>` is the directory the
/// running test binary was built in (falls back to `target/`).
fn component_target_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    // <target>/<profile>/deps/<test binary>
    let target = exe
        .as_deref()
        .and_then(|p| p.parent())
        .and_then(|p| p.parent())
        .and_then(|p| p.parent());
    match target {
        Some(t) => t.join("nodewright-components"),
        None => PathBuf::from("target").join("nodewright-components"),
    }
}
