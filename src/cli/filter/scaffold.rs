//! `nodewright filter new`: a ready-to-build filter crate with native unit
//! tests (plain Rust, no Wasm runtime) and harness tests behind the
//! `harness` feature (the built component in the production sandbox).

use std::path::{Path, PathBuf};

use nodewright_host::Role;

use super::{FilterCliError, vendor};
use crate::cli::CliError;

/// Where a new crate gets the SDK (`nodewright-filter`) and the harness
/// (`nodewright-host`) from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkSource {
    /// The sources this binary carries, written under the crate's
    /// `vendor/`: builds with nothing but this binary and crates.io.
    Vendored,
    /// The registry, at this version, once the crates are published there.
    Registry {
        /// The version requirement written for both crates.
        version: &'static str,
    },
    /// A source checkout's `filters/sdk` and `filters/host`, by absolute
    /// path: for working on nodewright and a filter together.
    Checkout(PathBuf),
}

impl SdkSource {
    /// The crates this nodewright was built with, from the registry. The SDK
    /// and the harness are released with nodewright, under its version.
    pub fn registry() -> SdkSource {
        SdkSource::Registry {
            version: nodewright_host::sdk::VERSION,
        }
    }

    /// The two dependency lines of the new crate's `[dependencies]`.
    fn dependencies(&self) -> String {
        match self {
            SdkSource::Vendored => format!(
                "nodewright-filter = {{ path = \"{dir}/sdk\" }}\nnodewright-host = {{ path = \"{dir}/host\", optional = true }}",
                dir = vendor::DIR
            ),
            SdkSource::Registry { version } => format!(
                "nodewright-filter = {v}\nnodewright-host = {{ version = {v}, optional = true }}",
                v = toml_string(version)
            ),
            SdkSource::Checkout(root) => format!(
                "nodewright-filter = {{ path = {} }}\nnodewright-host = {{ path = {}, optional = true }}",
                toml_string(&root.join("filters/sdk").display().to_string()),
                toml_string(&root.join("filters/host").display().to_string())
            ),
        }
    }

    /// Where the dependencies come from, for the message after `new`.
    fn describe(&self) -> String {
        match self {
            SdkSource::Vendored => format!(
                "with the SDK and harness of nodewright {} under {}/",
                nodewright_host::sdk::VERSION,
                vendor::DIR
            ),
            SdkSource::Registry { version } => format!(
                "depending on nodewright-filter and nodewright-host {version} from crates.io"
            ),
            SdkSource::Checkout(root) => format!("using the SDK in {}", root.display()),
        }
    }

    /// What the new crate's README says about where its SDK comes from.
    fn readme_note(&self) -> &'static str {
        match self {
            SdkSource::Vendored => VENDORED_README,
            SdkSource::Registry { .. } | SdkSource::Checkout(_) => "",
        }
    }

    /// The new crate's `[workspace]`: a standalone crate, whose vendored
    /// crates are path dependencies rather than members.
    fn workspace(&self) -> String {
        match self {
            SdkSource::Vendored => format!("[workspace]\nexclude = [\"{}\"]", vendor::DIR),
            SdkSource::Registry { .. } | SdkSource::Checkout(_) => "[workspace]".to_string(),
        }
    }
}

/// The dependency source for `new`: the vendored sources unless
/// `--from-registry` asks for crates.io or `--nodewright` names a checkout,
/// which must then hold the SDK and the harness.
pub fn sdk_source(
    checkout: Option<&Path>,
    from_registry: bool,
) -> Result<SdkSource, FilterCliError> {
    match (checkout, from_registry) {
        (Some(path), _) => source_tree(path).map(SdkSource::Checkout),
        (None, true) => Ok(SdkSource::registry()),
        (None, false) => Ok(SdkSource::Vendored),
    }
}

/// The nodewright checkout at `given`, resolved to an absolute path, once
/// it is known to hold the SDK and the harness.
fn source_tree(given: &Path) -> Result<PathBuf, FilterCliError> {
    let problem = |problem: String| FilterCliError::NotASourceTree {
        path: given.to_path_buf(),
        problem,
    };
    let resolved = given
        .canonicalize()
        .map_err(|e| problem(format!("cannot resolve it ({e})")))?;
    for crate_dir in ["filters/sdk", "filters/host"] {
        if !resolved.join(crate_dir).join("Cargo.toml").is_file() {
            return Err(problem(format!(
                "{} has no {crate_dir}/Cargo.toml",
                resolved.display()
            )));
        }
    }
    Ok(resolved)
}

/// Writes crate `name` for `role` into `./name`, depending on the SDK and
/// harness from `source`; returns what to tell the user.
pub fn create(name: &str, role: Role, source: &SdkSource) -> Result<String, CliError> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        return Err(FilterCliError::CrateName(name.to_string()).into());
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
    let (lib, harness) = match role {
        Role::InstanceFilter => (FILTER_LIB, FILTER_HARNESS),
        Role::PriorityScorer => (SCORER_LIB, SCORER_HARNESS),
        Role::AmiSelector => (SELECTOR_LIB, SELECTOR_HARNESS),
    };
    let fill = |template: &str| {
        template
            .replace("__TYPE__", &type_name)
            .replace("__NAME__", name)
            .replace("__LIB__", &lib_name)
            .replace("__ROLE__", role.as_str())
            .replace("__DEPENDENCIES__", &source.dependencies())
            .replace("__WORKSPACE__", &source.workspace())
            .replace("__DEV_PROFILE__", &vendor::dev_profile())
            .replace("__README_SOURCE__", source.readme_note())
    };
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::create_dir_all(dir.join("tests"))?;
    std::fs::write(dir.join("Cargo.toml"), fill(CARGO_TOML))?;
    std::fs::write(dir.join("src/lib.rs"), fill(lib))?;
    let variant = match role {
        Role::InstanceFilter => "InstanceFilter",
        Role::PriorityScorer => "PriorityScorer",
        Role::AmiSelector => "AmiSelector",
    };
    let harness = format!(
        "{harness}{}",
        FIXTURES_HARNESS.replace("__VARIANT__", variant)
    );
    std::fs::write(dir.join("tests/harness.rs"), fill(&harness))?;
    std::fs::write(dir.join("README.md"), fill(README))?;
    if *source == SdkSource::Vendored {
        vendor::write(&dir).map_err(FilterCliError::from)?;
    }
    Ok(format!(
        "created {name}/ ({role}), {}\nnext: cd {name} && cargo test && cargo build --target wasm32-wasip2 --release\n",
        source.describe()
    ))
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

const CARGO_TOML: &str = r#"[package]
name = "__NAME__"
version = "0.1.0"
edition = "2024"

# A standalone crate, not part of any enclosing workspace.
__WORKSPACE__

[lib]
crate-type = ["cdylib", "rlib"]

[features]
# `cargo test --features harness` also runs tests/harness.rs: the built
# component in nodewright's production sandbox (compiles the Wasm runtime
# once, which takes minutes). Plain `cargo test` runs the native unit tests
# only.
harness = ["dep:nodewright-host"]

[dependencies]
__DEPENDENCIES__
serde = { version = "1", features = ["derive"] }

[[test]]
name = "harness"
required-features = ["harness"]

[profile.release]
opt-level = "s"
lto = true
strip = true

# nodewright's own dev profile: the Wasm compiler optimised in debug builds,
# so that a harness test compiles a component in a fraction of a second.
__DEV_PROFILE__"#;

/// Appended to every role's harness test: the calls recorded on a cluster
/// (`filter test --snapshot … --record fixtures`) still get their answers.
const FIXTURES_HARNESS: &str = r#"
/// Calls recorded on a cluster (`nodewright filter test COMPONENT --role
/// __ROLE__ --snapshot FILE --record fixtures`) get the answers recorded;
/// none are replayed until some are recorded.
#[test]
fn recorded_calls_get_the_recorded_answers() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let replayed = Harness::load_file(Role::__VARIANT__, wasm)
        .unwrap()
        .assert_fixtures(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures"));
    println!("{replayed} recorded calls replayed");
}
"#;

const README: &str = r#"# __NAME__

A nodewright __ROLE__ component.

```sh
cargo test                                        # native unit tests (seconds)
cargo test --features harness                     # also the component in the sandbox
cargo build --target wasm32-wasip2 --release      # target/wasm32-wasip2/release/__LIB__.wasm
nodewright filter inspect target/wasm32-wasip2/release/__LIB__.wasm   # roles, imports, sha256
nodewright filter test target/wasm32-wasip2/release/__LIB__.wasm --role __ROLE__ \
    --snapshot cluster.yaml --record fixtures  # record calls on your cluster's NodePools
```

`kubectl get nodepools,ec2nodeclasses -o yaml > cluster.yaml` gives the
snapshot; `--record fixtures` writes one file per NodePool, and
`cargo test --features harness` replays them (tests/harness.rs).

See docs/authoring-filters.md in the nodewright repository for referencing
it from an EC2NodeClass.
__README_SOURCE__"#;

/// Appended to the README of a crate with the SDK under `vendor/`.
const VENDORED_README: &str = r#"
## The SDK under vendor/

`vendor/` holds the sources of the SDK (`nodewright-filter`), the harness
(`nodewright-host`) and the two built-ins the harness carries, as the
`nodewright` binary that wrote this crate was built with; Cargo.toml
depends on them by path and Cargo.lock starts from the versions nodewright
was tested with. Nothing in `vendor/` is meant to be edited. Once the crates
are on crates.io, switch to them by replacing the two `path` dependencies
with `nodewright-filter = "VERSION"` and `nodewright-host = { version =
"VERSION", optional = true }` (VERSION as `nodewright --version` prints it)
and deleting `vendor/`; `nodewright filter new --from-registry` writes a
crate that way.
"#;

const FILTER_LIB: &str = r##"//! A nodewright instance filter.

use nodewright_filter::{Context, InstanceFilter, InstanceType, Verdict};
use serde::Deserialize;

/// Settings from the EC2NodeClass's `config`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Largest vCPU count to allow.
    #[serde(default = "default_max_vcpu")]
    pub max_vcpu: u32,
}

fn default_max_vcpu() -> u32 {
    64
}

/// The filter.
#[derive(Debug, Default)]
pub struct __TYPE__;

impl InstanceFilter for __TYPE__ {
    fn filter(&self, ctx: &Context, candidates: &[InstanceType<'_>]) -> Result<Vec<Verdict>, String> {
        let config: Config = ctx.config()?;
        Ok(candidates
            .iter()
            .map(|it| {
                if it.vcpu() > config.max_vcpu {
                    Verdict::drop(format!("{} has {} vCPUs, more than {}", it.name(), it.vcpu(), config.max_vcpu))
                } else {
                    Verdict::Keep
                }
            })
            .collect())
    }
}

nodewright_filter::export_instance_filter!(__TYPE__);

/// Native unit tests: plain Rust over SDK fixtures, no Wasm runtime.
#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_filter::InstanceTypes;
    use nodewright_filter::fixtures::it;

    #[test]
    fn drops_types_above_the_vcpu_cap() {
        let table = InstanceTypes::from_infos(&[
            it("m7g.large").shape(2, 8).build(),
            it("m7g.4xlarge").shape(16, 64).build(),
        ]);
        let ctx = Context {
            config: r#"{"maxVcpu": 4}"#.to_string(),
            ..Context::default()
        };
        let verdicts = __TYPE__.filter(&ctx, &table.views()).unwrap();
        assert_eq!(verdicts[0], Verdict::Keep);
        assert_eq!(verdicts[1], Verdict::drop("m7g.4xlarge has 16 vCPUs, more than 4"));
    }
}
"##;

const FILTER_HARNESS: &str = r##"//! The built component in the production sandbox
//! (`cargo test --features harness`).

use nodewright_host::Role;
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
"##;

const SCORER_LIB: &str = r#"//! A nodewright priority scorer: higher scores are tried first, ties by price.

use nodewright_filter::{Context, InstanceType, PriorityScorer};

/// The scorer.
#[derive(Debug, Default)]
pub struct __TYPE__;

impl PriorityScorer for __TYPE__ {
    fn score(&self, _ctx: &Context, candidates: &[InstanceType<'_>]) -> Result<Vec<i32>, String> {
        // Newer generations first.
        Ok(candidates.iter().map(|it| i32::try_from(it.generation()).unwrap_or(0)).collect())
    }
}

nodewright_filter::export_priority_scorer!(__TYPE__);

/// Native unit tests: plain Rust over SDK fixtures, no Wasm runtime.
#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_filter::InstanceTypes;
    use nodewright_filter::fixtures::it;

    #[test]
    fn newer_generations_score_higher() {
        let table = InstanceTypes::from_infos(&[it("m5.large").build(), it("m7g.large").build()]);
        let scores = __TYPE__.score(&Context::default(), &table.views()).unwrap();
        assert_eq!(scores, vec![5, 7]);
    }
}
"#;

const SCORER_HARNESS: &str = r#"//! The built component in the production sandbox
//! (`cargo test --features harness`).

use nodewright_host::Role;
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
"#;

const SELECTOR_LIB: &str = r#"//! A nodewright AMI selector: indices of usable AMIs, best first.

use nodewright_filter::{Ami, AmiSelector, AmiState, Context};

/// The selector.
#[derive(Debug, Default)]
pub struct __TYPE__;

impl AmiSelector for __TYPE__ {
    fn select(&self, _ctx: &Context, candidates: &[Ami]) -> Result<Vec<u32>, String> {
        let mut usable: Vec<(u32, &Ami)> = (0u32..)
            .zip(candidates)
            .filter(|(_, a)| a.state == AmiState::Available)
            .collect();
        usable.sort_by(|(_, a), (_, b)| b.creation_time.cmp(&a.creation_time));
        Ok(usable.into_iter().map(|(i, _)| i).collect())
    }
}

nodewright_filter::export_ami_selector!(__TYPE__);

/// Native unit tests: plain Rust over SDK fixtures, no Wasm runtime.
#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_filter::fixtures::ami;

    #[test]
    fn newest_available_first() {
        let amis = [
            ami("ami-old", 1).build(),
            ami("ami-new", 2).build(),
            ami("ami-pending", 3).state(AmiState::Pending).build(),
        ];
        assert_eq!(__TYPE__.select(&Context::default(), &amis).unwrap(), vec![1, 0]);
    }
}
"#;

const SELECTOR_HARNESS: &str = r#"//! The built component in the production sandbox
//! (`cargo test --features harness`).

use nodewright_filter::AmiState;
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
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_tree_must_hold_the_sdk() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(
            sdk_source(Some(root), false).unwrap(),
            SdkSource::Checkout(root.canonicalize().unwrap())
        );
        assert_eq!(sdk_source(None, false).unwrap(), SdkSource::Vendored);
        assert_eq!(sdk_source(None, true).unwrap(), SdkSource::registry());
        let err = sdk_source(Some(&root.join("does-not-exist")), false).unwrap_err();
        assert!(err.to_string().contains("cannot resolve it"), "{err}");
        let err = sdk_source(Some(&root.join("src")), false).unwrap_err();
        assert!(
            err.to_string().contains("has no filters/sdk/Cargo.toml"),
            "{err}"
        );
    }

    /// The version written for both crates is the one each is published
    /// under, and the one the crates between them require.
    #[test]
    fn sdk_and_harness_share_the_version_new_crates_ask_for() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let manifest = |dir: &str| -> toml::Table {
            let text = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap();
            toml::from_str(&text).unwrap()
        };
        let SdkSource::Registry { version } = SdkSource::registry() else {
            panic!("the default source is the registry");
        };
        // Released together: `nodewright --version` names the crates' version.
        assert_eq!(version, env!("CARGO_PKG_VERSION"));
        let mut required = Vec::new();
        for dir in [
            "filters/sdk",
            "filters/host",
            "filters/available-amis",
            "filters/flex-first",
        ] {
            let m = manifest(dir);
            assert_eq!(m["package"]["version"].as_str(), Some(version), "{dir}");
            assert!(
                m["package"].get("publish").is_none(),
                "{dir} is not publishable"
            );
            let deps = m["dependencies"].as_table().unwrap();
            for (name, dep) in deps.iter().filter(|(n, _)| n.starts_with("nodewright-")) {
                required.push((dir, name.clone(), dep.get("version").cloned()));
            }
        }
        assert_eq!(required.len(), 5, "{required:?}");
        for (dir, name, req) in required {
            let req = req.and_then(|v| v.as_str().map(str::to_string));
            assert_eq!(req.as_deref(), Some(version), "{dir} → {name}");
        }
    }

    #[test]
    fn dependencies_by_version_or_by_path() {
        let registry = SdkSource::Registry { version: "1.2.3" }.dependencies();
        assert_eq!(
            registry,
            "nodewright-filter = \"1.2.3\"\nnodewright-host = { version = \"1.2.3\", optional = true }"
        );
        assert!(!registry.contains("path"));
        let checkout = SdkSource::Checkout(PathBuf::from("/src/nw")).dependencies();
        assert_eq!(
            checkout,
            "nodewright-filter = { path = \"/src/nw/filters/sdk\" }\nnodewright-host = { path = \"/src/nw/filters/host\", optional = true }"
        );
    }

    #[test]
    fn paths_are_toml_strings() {
        assert_eq!(toml_string(r#"C:\a "b""#), r#""C:\\a \"b\"""#);
    }
}
