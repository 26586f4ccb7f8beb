//! `nodewright filter`: try a filter component against candidates under the
//! production sandbox (`test`), or scaffold a new filter crate (`new`).

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use clap::{Args, Subcommand, ValueEnum};
use nodewright_host::harness::{Harness, ami};
use nodewright_host::sdk::{Ami, AmiState, Architecture, Context, InstanceTypeInfo};
use nodewright_host::{ModuleRef, Role};

use super::{CliError, emit};
use crate::aws::catalog::Catalog;
use crate::aws::instance_types::{ResolverSettings, resolve_all};
use crate::extensions::filter_records;

/// Arguments of `nodewright filter`.
#[derive(Debug, Args)]
pub struct FilterArgs {
    #[command(subcommand)]
    command: FilterCommand,
}

#[derive(Debug, Subcommand)]
enum FilterCommand {
    /// Run a component (or `builtin:NAME`) once on candidates and print what
    /// it kept, dropped or ordered, and how long the call took.
    Test(TestArgs),
    /// Create a ready-to-build filter crate in directory NAME.
    New(NewArgs),
}

/// Arguments of `nodewright filter test`.
#[derive(Debug, Args)]
struct TestArgs {
    /// The component file (`.wasm`) or `builtin:NAME`.
    component: String,
    /// Which world the component implements.
    #[arg(long, value_enum)]
    role: RoleArg,
    /// The `config` JSON the component receives.
    #[arg(long, default_value = "{}")]
    config: String,
    /// JSON file with the candidates: an array of instance types (filters,
    /// scorers) or AMIs (selectors) in the SDK's serde shape. Without it,
    /// filters and scorers get every instance type of the embedded catalog
    /// and selectors a sample set of AMIs (pending, failed, deprecated, both
    /// architectures).
    #[arg(long, value_name = "FILE")]
    candidates: Option<PathBuf>,
    /// Region of the embedded catalog used when no candidates file is given.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// Per-call deadline in milliseconds.
    #[arg(long, default_value_t = 100)]
    timeout_ms: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RoleArg {
    InstanceFilter,
    AmiSelector,
    PriorityScorer,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Role {
        match r {
            RoleArg::InstanceFilter => Role::InstanceFilter,
            RoleArg::AmiSelector => Role::AmiSelector,
            RoleArg::PriorityScorer => Role::PriorityScorer,
        }
    }
}

/// Arguments of `nodewright filter new`.
#[derive(Debug, Args)]
struct NewArgs {
    /// Crate name and directory (a lowercase identifier with dashes).
    name: String,
    /// Which world the new crate implements.
    #[arg(long, value_enum, default_value = "instance-filter")]
    role: RoleArg,
    /// Path of the nodewright source tree the crate depends on (its
    /// `filters/sdk` and `filters/host`).
    #[arg(long, default_value = env!("CARGO_MANIFEST_DIR"))]
    nodewright: PathBuf,
}

/// Why `nodewright filter` failed.
#[derive(Debug, thiserror::Error)]
pub enum FilterCliError {
    /// The candidates file could not be read or parsed.
    #[error("--candidates {path}: {message}")]
    Candidates {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// `new NAME` got an unusable name.
    #[error(
        "crate name {0:?} must be lowercase letters, digits and dashes, starting with a letter"
    )]
    CrateName(String),
    /// `new NAME` would overwrite something.
    #[error("{0} already exists; choose another name or remove it")]
    Exists(PathBuf),
}

/// Runs `nodewright filter`.
pub fn run(args: FilterArgs) -> Result<(), CliError> {
    match args.command {
        FilterCommand::Test(a) => test(&a),
        FilterCommand::New(a) => new(&a),
    }
}

fn test(args: &TestArgs) -> Result<(), CliError> {
    let role = Role::from(args.role);
    let loaded = Instant::now();
    let harness = match ModuleRef::parse(&args.component) {
        ModuleRef::Builtin(name) => Harness::builtin(role, &name)?,
        _ => Harness::load_file(role, &args.component)?,
    };
    let load_time = loaded.elapsed();
    let module = harness
        .module()
        .clone()
        .with_limits(nodewright_host::Limits {
            timeout: std::time::Duration::from_millis(args.timeout_ms),
            ..harness.module().limits()
        });
    let harness = Harness::from_module(module).with_context(Context {
        node_pool: "default".to_string(),
        node_class: "default".to_string(),
        region: "us-east-1".to_string(),
        config: args.config.clone(),
        now: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0),
    });
    let mut out = format!(
        "{} as {role}: loaded in {load_time:.2?}\n",
        harness.module().name()
    );
    match role {
        Role::InstanceFilter => {
            let types = instance_types(args.candidates.as_deref(), &args.region)?;
            let r = harness.filter(&types)?;
            out.push_str(&format!(
                "call: {:.2?} for {} candidates\n",
                r.report.elapsed,
                types.len()
            ));
            out.push_str(&format!("kept ({}): {}\n", r.kept.len(), r.kept.join(", ")));
            out.push_str(&format!("dropped ({}):\n", r.dropped.len()));
            for (name, reason) in &r.dropped {
                out.push_str(&format!("  {name}: {reason}\n"));
            }
            push_logs(&mut out, &r.report);
        }
        Role::PriorityScorer => {
            let types = instance_types(args.candidates.as_deref(), &args.region)?;
            let r = harness.score(&types)?;
            out.push_str(&format!(
                "call: {:.2?} for {} candidates\n",
                r.report.elapsed,
                types.len()
            ));
            out.push_str("try order (score, then price):\n");
            for (i, name) in r.order.iter().enumerate() {
                let score = r.score_of(name).unwrap_or_default();
                out.push_str(&format!("  {:>3}. {name} (score {score})\n", i + 1));
            }
            push_logs(&mut out, &r.report);
        }
        Role::AmiSelector => {
            let amis = amis(args.candidates.as_deref())?;
            let r = harness.select(&amis)?;
            out.push_str(&format!(
                "call: {:.2?} for {} candidates\n",
                r.report.elapsed,
                amis.len()
            ));
            out.push_str("selected, best first:\n");
            for id in &r.order {
                out.push_str(&format!("  {id}\n"));
            }
            let left_out: Vec<&str> = amis
                .iter()
                .map(|a| a.id.as_str())
                .filter(|id| !r.order.iter().any(|o| o == id))
                .collect();
            out.push_str(&format!("left out: {}\n", left_out.join(", ")));
            push_logs(&mut out, &r.report);
        }
    }
    emit(&out)
}

fn push_logs(out: &mut String, report: &nodewright_host::CallReport) {
    for (level, line) in &report.logs {
        out.push_str(&format!("log {level:?}: {line}\n"));
    }
    if !report.guest_output.trim().is_empty() {
        out.push_str(&format!("stdout/stderr: {}\n", report.guest_output.trim()));
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, FilterCliError> {
    let fail = |message: String| FilterCliError::Candidates {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| fail(e.to_string()))
}

/// The candidates: the given JSON file, else every launchable instance type
/// of the embedded catalog for `region`, as the controller would pass them.
fn instance_types(path: Option<&Path>, region: &str) -> Result<Vec<InstanceTypeInfo>, CliError> {
    if let Some(path) = path {
        return Ok(read_json(path)?);
    }
    let catalog = Catalog::embedded(region)?;
    let types = resolve_all(&catalog, &ResolverSettings::default())?;
    let set = filter_records(&catalog, &types);
    Ok(set.views().iter().map(|t| t.to_info()).collect())
}

fn amis(path: Option<&Path>) -> Result<Vec<Ami>, FilterCliError> {
    if let Some(path) = path {
        return read_json(path);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let day = 86_400;
    Ok(vec![
        ami("ami-0al2023-amd64-new", now - 3 * day).build(),
        ami("ami-0al2023-amd64-old", now - 40 * day).build(),
        ami("ami-0al2023-amd64-pending", now - day)
            .state(AmiState::Pending)
            .build(),
        ami("ami-0al2023-amd64-deprecated", now - 90 * day)
            .deprecated_at(now - day)
            .build(),
        ami("ami-0al2023-arm64-new", now - 3 * day)
            .arch(Architecture::Arm64)
            .build(),
        ami("ami-0al2023-nvidia-new", now - 5 * day)
            .variant("nvidia")
            .build(),
    ])
}

fn new(args: &NewArgs) -> Result<(), CliError> {
    let name = &args.name;
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        return Err(FilterCliError::CrateName(name.clone()).into());
    }
    let dir = PathBuf::from(name);
    if dir.exists() {
        return Err(FilterCliError::Exists(dir).into());
    }
    let lib_name = name.replace('-', "_");
    let type_name: String = name
        .split('-')
        .map(|part| {
            let mut c = part.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    let sdk = args.nodewright.join("filters/sdk");
    let host = args.nodewright.join("filters/host");
    let role = Role::from(args.role);
    let (lib, test) = scaffold_sources(role, &type_name);
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::create_dir_all(dir.join("tests"))?;
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

# A standalone crate, not part of any enclosing workspace.
[workspace]

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
nodewright-filter = {{ path = "{sdk}" }}
serde = {{ version = "1", features = ["derive"] }}

[dev-dependencies]
nodewright-host = {{ path = "{host}" }}

[profile.release]
opt-level = "s"
lto = true
strip = true
"#,
            sdk = sdk.display(),
            host = host.display(),
        ),
    )?;
    std::fs::write(dir.join("src/lib.rs"), lib)?;
    std::fs::write(dir.join("tests/harness.rs"), test)?;
    std::fs::write(
        dir.join("README.md"),
        format!(
            "# {name}\n\nA nodewright {role} component.\n\n```sh\ncargo test                                        # native and harness tests\ncargo build --target wasm32-wasip2 --release      # target/wasm32-wasip2/release/{lib_name}.wasm\nsha256sum target/wasm32-wasip2/release/{lib_name}.wasm\n```\n\nSee docs/authoring-filters.md in the nodewright repository for referencing\nit from an EC2NodeClass.\n"
        ),
    )?;
    emit(&format!(
        "created {name}/ ({role})\nnext: cd {name} && cargo test && cargo build --target wasm32-wasip2 --release\n"
    ))
}

fn scaffold_sources(role: Role, type_name: &str) -> (String, String) {
    match role {
        Role::InstanceFilter => (
            format!(
                r#"//! A nodewright instance filter.

use nodewright_filter::{{Context, InstanceFilter, InstanceType, Verdict}};
use serde::Deserialize;

/// Settings from the EC2NodeClass's `config`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {{
    /// Largest vCPU count to allow.
    #[serde(default = "default_max_vcpu")]
    pub max_vcpu: u32,
}}

fn default_max_vcpu() -> u32 {{
    64
}}

/// The filter.
#[derive(Debug, Default)]
pub struct {type_name};

impl InstanceFilter for {type_name} {{
    fn filter(&self, ctx: &Context, candidates: &[InstanceType<'_>]) -> Result<Vec<Verdict>, String> {{
        let config: Config = ctx.config()?;
        Ok(candidates
            .iter()
            .map(|it| {{
                if it.vcpu() > config.max_vcpu {{
                    Verdict::drop(format!("{{}} has {{}} vCPUs, more than {{}}", it.name(), it.vcpu(), config.max_vcpu))
                }} else {{
                    Verdict::Keep
                }}
            }})
            .collect())
    }}
}}

nodewright_filter::export_instance_filter!({type_name});
"#
            ),
            r##"use nodewright_host::Role;
use nodewright_host::harness::{self, Harness, it};

#[test]
fn drops_types_above_the_vcpu_cap() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let out = Harness::load_file(Role::InstanceFilter, wasm)
        .unwrap()
        .with_config(r#"{"maxVcpu": 4}"#)
        .filter(&[it("m7g.large").shape(2, 8).build(), it("m7g.4xlarge").shape(16, 64).build()])
        .unwrap();
    out.assert_kept(&["m7g.large"]);
    out.assert_dropped_because("m7g.4xlarge", "16 vCPUs");
}
"##
            .to_string(),
        ),
        Role::PriorityScorer => (
            format!(
                r#"//! A nodewright priority scorer: higher scores are tried first, ties by price.

use nodewright_filter::{{Context, InstanceType, PriorityScorer}};

/// The scorer.
#[derive(Debug, Default)]
pub struct {type_name};

impl PriorityScorer for {type_name} {{
    fn score(&self, _ctx: &Context, candidates: &[InstanceType<'_>]) -> Result<Vec<i32>, String> {{
        // Newer generations first.
        Ok(candidates.iter().map(|it| i32::try_from(it.generation()).unwrap_or(0)).collect())
    }}
}}

nodewright_filter::export_priority_scorer!({type_name});
"#
            ),
            r#"use nodewright_host::Role;
use nodewright_host::harness::{self, Harness, it};

#[test]
fn newer_generations_first() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let out = Harness::load_file(Role::PriorityScorer, wasm)
        .unwrap()
        .score(&[it("m5.large").build(), it("m7g.large").build()])
        .unwrap();
    out.assert_order(&["m7g.large", "m5.large"]);
}
"#
            .to_string(),
        ),
        Role::AmiSelector => (
            format!(
                r#"//! A nodewright AMI selector: indices of usable AMIs, best first.

use nodewright_filter::{{Ami, AmiSelector, AmiState, Context}};

/// The selector.
#[derive(Debug, Default)]
pub struct {type_name};

impl AmiSelector for {type_name} {{
    fn select(&self, _ctx: &Context, candidates: &[Ami]) -> Result<Vec<u32>, String> {{
        let mut usable: Vec<(u32, &Ami)> = (0u32..)
            .zip(candidates)
            .filter(|(_, a)| a.state == AmiState::Available)
            .collect();
        usable.sort_by(|(_, a), (_, b)| b.creation_time.cmp(&a.creation_time));
        Ok(usable.into_iter().map(|(i, _)| i).collect())
    }}
}}

nodewright_filter::export_ami_selector!({type_name});
"#
            ),
            r#"use nodewright_filter::AmiState;
use nodewright_host::Role;
use nodewright_host::harness::{self, Harness, ami};

#[test]
fn newest_available_first() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let out = Harness::load_file(Role::AmiSelector, wasm)
        .unwrap()
        .select(&[ami("ami-old", 1).build(), ami("ami-new", 2).build(), ami("ami-pending", 3).state(AmiState::Pending).build()])
        .unwrap();
    out.assert_order(&["ami-new", "ami-old"]);
}
"#
            .to_string(),
        ),
    }
}
