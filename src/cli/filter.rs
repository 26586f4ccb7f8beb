//! `nodewright filter`: try a filter component against candidates under the
//! production sandbox (`test`, optionally as a shadow module), report what a
//! component is before pinning it (`inspect`), or scaffold a new filter
//! crate (`new`).

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use clap::{Args, Subcommand, ValueEnum};
use nodewright_host::harness::{Harness, ami};
use nodewright_host::sdk::{Ami, AmiState, Architecture, Context, InstanceTypeInfo};
use nodewright_host::{Host, HostConfig, Inspection, ModuleRef, Role};

mod bench;
mod report;
mod scaffold;
mod vendor;
mod workloads;

use report::TestReport;

use super::{CliError, emit};
use crate::aws::catalog::Catalog;
use crate::aws::instance_types::{ResolverSettings, filter_records, resolve_all};

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
    /// Show what a component is before pinning it: the roles it implements,
    /// its contract version, its imports (and whether the sandbox refuses
    /// them), size and sha256. Nothing is run.
    Inspect(InspectArgs),
    /// Time a component: its first load (compile and precompiled artifact
    /// written), the artifact's load, and p50/p99 call times over the
    /// embedded catalog or each NodePool's types of a cluster snapshot.
    Bench(BenchArgs),
    /// Create a ready-to-build filter crate in directory NAME, with the SDK
    /// and harness this nodewright was built with written under its
    /// `vendor/` (or from crates.io with --from-registry, or a source
    /// checkout's with --nodewright).
    New(NewArgs),
}

/// Arguments of `nodewright filter inspect`.
#[derive(Debug, Args)]
struct InspectArgs {
    /// The component file (`.wasm`).
    component: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

/// How `filter test` treats the module's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    /// Print what the module decided; a failure is an error.
    Enforce,
    /// As `mode: Shadow` in an EC2NodeClass: print what the module would
    /// have dropped, reordered or selected against the default decision;
    /// a failure is reported, not an error.
    Shadow,
}

/// What `filter test` and `filter bench` call: the component, its role,
/// its config, and where its candidates come from.
#[derive(Debug, Args)]
struct CallArgs {
    /// The component file (`.wasm`) or `builtin:NAME`.
    component: String,
    /// Which world the component implements.
    #[arg(long, value_enum)]
    role: RoleArg,
    /// The `config` JSON the component receives.
    #[arg(long, default_value = "{}")]
    config: String,
    /// Region of the embedded catalog, used when neither a candidates file
    /// nor a snapshot is given.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// A cluster snapshot or manifests (`kubectl get
    /// nodepools,ec2nodeclasses -o yaml`, `-` for standard input): the
    /// component runs on each NodePool's instance types, resolved from its
    /// EC2NodeClass, with the NodePool and class as context. Not for
    /// ami-selector.
    #[arg(long, value_name = "FILE")]
    snapshot: Option<PathBuf>,
}

impl CallArgs {
    /// The calls to make: one per NodePool of `--snapshot`, else one over
    /// `candidates` (a file), or the embedded catalog's types (filters,
    /// scorers) or the sample AMIs (selectors).
    fn workloads(&self, candidates: Option<&Path>) -> Result<Vec<workloads::Workload>, CliError> {
        let role = Role::from(self.role);
        let now = crate::extensions::unix_now();
        if let Some(path) = &self.snapshot {
            if role == Role::AmiSelector {
                return Err("--snapshot gives instance types; an ami-selector runs on --candidates or the sample AMIs: leave --snapshot out".into());
            }
            return workloads::snapshot_workloads(path, &self.region, &self.config, now);
        }
        let candidates = if role == Role::AmiSelector {
            workloads::Candidates::Amis(amis(candidates)?)
        } else {
            workloads::Candidates::Types(instance_types(candidates, &self.region)?)
        };
        Ok(vec![workloads::Workload {
            node_pool: None,
            context: Context {
                node_pool: "default".to_string(),
                node_class: "default".to_string(),
                region: self.region.clone(),
                config: self.config.clone(),
                now,
            },
            candidates,
        }])
    }
}

/// Arguments of `nodewright filter test`.
#[derive(Debug, Args)]
struct TestArgs {
    #[command(flatten)]
    call: CallArgs,
    /// JSON file with the candidates: an array of instance types (filters,
    /// scorers) or AMIs (selectors) in the SDK's serde shape. Without it,
    /// filters and scorers get every instance type of the embedded catalog
    /// and selectors a sample set of AMIs (pending, failed, deprecated, both
    /// architectures).
    #[arg(long, value_name = "FILE", conflicts_with = "snapshot")]
    candidates: Option<PathBuf>,
    /// Write each call's context, candidates and answer as a fixture file
    /// in DIR (`<nodepool>.json`, or `catalog.json` / `amis.json`), which
    /// `Harness::assert_fixtures` replays in a filter crate's tests.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Per-call deadline in milliseconds.
    #[arg(long, default_value_t = 100)]
    timeout_ms: u64,
    /// `enforce`, or `shadow` to see what the module would change and have a
    /// failure reported rather than fail the command.
    #[arg(long, value_enum, default_value_t = ModeArg::Enforce)]
    mode: ModeArg,
    /// Output format: `text` summarises (counts, drop reasons with a few
    /// names each); `json` lists every kept and dropped type with its reason.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
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

/// Arguments of `nodewright filter bench`.
#[derive(Debug, Args)]
struct BenchArgs {
    #[command(flatten)]
    call: CallArgs,
    /// Timed calls per run (after three warm-up calls).
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// Arguments of `nodewright filter new`.
#[derive(Debug, Args)]
struct NewArgs {
    /// Crate name and directory (a lowercase identifier with dashes).
    name: String,
    /// Which world the new crate implements.
    #[arg(long, value_enum, default_value = "instance-filter")]
    role: RoleArg,
    /// A nodewright source checkout (the directory holding `filters/sdk`
    /// and `filters/host`): the new crate depends on its SDK and harness by
    /// absolute path instead of on the sources under `vendor/`.
    #[arg(long, value_name = "PATH", conflicts_with = "from_registry")]
    nodewright: Option<PathBuf>,
    /// Depend on `nodewright-filter` and `nodewright-host` from crates.io at
    /// this nodewright's version instead of writing their sources under
    /// `vendor/` (for when they are published there).
    #[arg(long)]
    from_registry: bool,
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
    /// `--nodewright` does not point at a source tree with the SDK.
    #[error(
        "--nodewright {path}: {problem}; pass the directory of a nodewright source checkout (the one holding filters/sdk and filters/host)"
    )]
    NotASourceTree {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The SDK sources could not be written into the new crate.
    #[error(transparent)]
    Vendor(#[from] vendor::VendorError),
    /// The component to inspect could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Runs `nodewright filter`.
pub fn run(args: FilterArgs) -> Result<(), CliError> {
    match args.command {
        FilterCommand::Test(a) => test(&a),
        FilterCommand::Inspect(a) => inspect(&a),
        FilterCommand::Bench(a) => bench(&a),
        FilterCommand::New(a) => {
            let source = scaffold::sdk_source(a.nodewright.as_deref(), a.from_registry)?;
            let text = scaffold::create(&a.name, Role::from(a.role), &source)?;
            emit(&text)
        }
    }
}

fn test(args: &TestArgs) -> Result<(), CliError> {
    let role = Role::from(args.call.role);
    let loaded = Instant::now();
    let harness = match ModuleRef::parse(&args.call.component) {
        ModuleRef::Builtin(name) => Harness::builtin(role, &name)?,
        _ => Harness::load_file(role, &args.call.component)?,
    };
    let load_time = loaded.elapsed();
    let module = harness
        .module()
        .clone()
        .with_limits(nodewright_host::Limits {
            timeout: std::time::Duration::from_millis(args.timeout_ms),
            ..harness.module().limits()
        });
    let runs = args.call.workloads(args.candidates.as_deref())?;
    let shadow = args.mode == ModeArg::Shadow;
    let mut reports = Vec::new();
    for run in runs {
        let harness = Harness::from_module(module.clone()).with_context(run.context.clone());
        let name = harness.module().name().to_string();
        let (mut report, result) = match &run.candidates {
            workloads::Candidates::Types(types) => {
                let mut report = TestReport::new(name, role, shadow, types.len(), load_time);
                let result = if role == Role::InstanceFilter {
                    report.run_filter(&harness, types)
                } else {
                    report.run_scorer(&harness, types)
                };
                (report, result)
            }
            workloads::Candidates::Amis(amis) => {
                let mut report = TestReport::new(name, role, shadow, amis.len(), load_time);
                let result = report.run_selector(&harness, amis);
                (report, result)
            }
        };
        report.node_pool = run.node_pool.clone();
        match result {
            Ok(()) => {}
            // A shadow module's failure is reported on the class, not enforced.
            Err(e) if shadow => report.error = Some(e.to_string()),
            Err(e) => return Err(e.into()),
        }
        if let Some(dir) = &args.record {
            record(dir, &harness, &run)?;
        }
        reports.push(report);
    }
    let header = |report: &TestReport| {
        format!(
            "{}{} as {role}{}: loaded in {load_time:.2?}\n",
            report
                .node_pool
                .as_ref()
                .map_or_else(String::new, |p| format!("NodePool {p}: ")),
            report.component,
            if shadow { " in shadow mode" } else { "" },
        )
    };
    match (args.output, args.call.snapshot.is_some()) {
        (Output::Json, false) => emit(&format!("{}\n", serde_json::to_string_pretty(&reports[0])?)),
        (Output::Json, true) => emit(&format!("{}\n", serde_json::to_string_pretty(&reports)?)),
        (Output::Text, _) => emit(
            &reports
                .iter()
                .map(|r| format!("{}{}", header(r), r.text()))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    }
}

/// Writes `run`'s call as a fixture file in `dir`.
fn record(dir: &Path, harness: &Harness, run: &workloads::Workload) -> Result<(), CliError> {
    use nodewright_host::fixtures::{Fixture, Given};
    let given = match &run.candidates {
        workloads::Candidates::Types(types) => Given::InstanceTypes(types),
        workloads::Candidates::Amis(amis) => Given::Amis(amis),
    };
    let fixture = Fixture::record(harness, &run.context, given)?;
    let name = match (&run.node_pool, &run.candidates) {
        (Some(pool), _) => pool.clone(),
        (None, workloads::Candidates::Types(_)) => "catalog".to_string(),
        (None, workloads::Candidates::Amis(_)) => "amis".to_string(),
    };
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&fixture)?)?;
    Ok(())
}

fn bench(args: &BenchArgs) -> Result<(), CliError> {
    let role = Role::from(args.call.role);
    let workloads = args.call.workloads(None)?;
    let report = bench::bench(&args.call.component, role, workloads, args.calls)?;
    match args.output {
        Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&report)?)),
        Output::Text => emit(&bench::render(&report)),
    }
}

fn inspect(args: &InspectArgs) -> Result<(), CliError> {
    let bytes = std::fs::read(&args.component).map_err(|source| FilterCliError::Read {
        path: args.component.clone(),
        source,
    })?;
    let host = Host::new(HostConfig::default())?;
    let found = host.inspect(&bytes, &args.component.display().to_string())?;
    match args.output {
        Output::Json => {
            let mut value = serde_json::to_value(&found)?;
            value["loadable"] = serde_json::Value::Bool(found.loadable());
            emit(&format!("{}\n", serde_json::to_string_pretty(&value)?))
        }
        Output::Text => emit(&render_inspection(&args.component, &found)),
    }
}

fn render_inspection(path: &Path, found: &Inspection) -> String {
    let roles: Vec<&str> = found.roles.iter().map(|r| r.as_str()).collect();
    let mut out = format!(
        "component: {}\nsize: {} bytes\nsha256: {}\nroles: {}\ncontract: {} (this nodewright speaks {})\nimports:\n",
        path.display(),
        found.size_bytes,
        found.sha256,
        if roles.is_empty() {
            "none".to_string()
        } else {
            roles.join(", ")
        },
        found.contract.as_deref().unwrap_or("none"),
        found.host_contract
    );
    for import in &found.imports {
        let verdict = if import.allowed { "allowed" } else { "REFUSED" };
        out.push_str(&format!("  {verdict:<8} {}\n", import.name));
    }
    out.push_str(&format!("exports: {}\n", found.exports.join(", ")));
    let refused: Vec<&str> = found
        .imports
        .iter()
        .filter(|i| !i.allowed)
        .map(|i| i.name.as_str())
        .collect();
    let mut problems = Vec::new();
    if !refused.is_empty() {
        problems.push(format!("it imports {}", refused.join(", ")));
    }
    if found.roles.is_empty() {
        problems.push("it implements none of the three roles".to_string());
    }
    if found.contract.as_deref() != Some(found.host_contract.as_str()) {
        problems.push(format!(
            "it was built against {} instead of {}",
            found
                .contract
                .as_deref()
                .unwrap_or("no nodewright contract"),
            found.host_contract
        ));
    }
    if problems.is_empty() {
        out.push_str(&format!(
            "the sandbox would load it as {}; pin it with sha256: {}\n",
            roles.join(" or "),
            found.sha256
        ));
    } else {
        out.push_str(&format!(
            "the sandbox would refuse it: {}\n",
            problems.join("; ")
        ));
    }
    out
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
    let now = crate::extensions::unix_now();
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
