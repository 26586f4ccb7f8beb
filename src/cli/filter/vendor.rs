//! The SDK crates this binary carries (build.rs embeds them): `filter new`
//! writes them under the new crate's `vendor/` so that it builds with
//! nothing but this binary and crates.io, at the versions nodewright was
//! built and tested with.

use std::path::Path;

use toml::{Table, Value};

include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));

/// The directory, inside a new crate, that holds the vendored crates.
pub const DIR: &str = "vendor";

/// Why the embedded sources could not be written.
#[derive(Debug, thiserror::Error)]
pub enum VendorError {
    /// An embedded manifest could not be made standalone.
    #[error("the embedded {file} is not a usable manifest: {message}")]
    Manifest {
        /// Its path under `vendor/`.
        file: String,
        /// What was wrong.
        message: String,
    },
    /// Writing a file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Writes the SDK crates into `crate_dir/vendor/` (each manifest made
/// standalone) and the lockfile they were built with into
/// `crate_dir/Cargo.lock`, so the first build resolves the same versions.
pub fn write(crate_dir: &Path) -> Result<(), VendorError> {
    let inherited = workspace_package()?;
    for (file, bytes) in SDK_FILES {
        let path = crate_dir.join(DIR).join(file);
        let normalised;
        let bytes: &[u8] = if file.ends_with("/Cargo.toml") {
            normalised = standalone_manifest(file, bytes, &inherited)?;
            normalised.as_bytes()
        } else {
            bytes
        };
        write_file(&path, bytes)?;
    }
    write_file(&crate_dir.join("Cargo.lock"), WORKSPACE_LOCK.as_bytes())
}

/// The `[profile.dev]` the workspace builds the harness with (the Wasm
/// compiler optimised in debug builds, so that a harness test compiles a
/// component in a fraction of a second), as TOML for the new crate's
/// manifest. Being the same profile, a build directory shared with
/// nodewright's own reuses its Wasm runtime.
pub fn dev_profile() -> String {
    let dev = toml::from_str::<Table>(WORKSPACE_MANIFEST)
        .ok()
        .and_then(|m| m.get("profile")?.get("dev")?.as_table().cloned())
        .unwrap_or_default();
    let mut profile = Table::new();
    profile.insert("dev".to_string(), Value::Table(dev));
    let mut root = Table::new();
    root.insert("profile".to_string(), Value::Table(profile));
    toml::to_string(&root).unwrap_or_default()
}

/// The workspace's `[workspace.package]`: what the crates inherit.
fn workspace_package() -> Result<Table, VendorError> {
    let fault = |message: String| VendorError::Manifest {
        file: "workspace Cargo.toml".to_string(),
        message,
    };
    let manifest: Table = toml::from_str(WORKSPACE_MANIFEST).map_err(|e| fault(e.to_string()))?;
    manifest
        .get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(Value::as_table)
        .cloned()
        .ok_or_else(|| fault("no [workspace.package]".to_string()))
}

/// A crate's manifest as it builds outside the workspace: inherited
/// `[package]` keys filled in, what needs the rest of the source tree
/// (dev-dependencies, tests, benches, examples) left out, and libraries
/// built as libraries only. The built-ins are also `cdylib`s in the
/// workspace (their component builds), and a `cdylib`'s files carry no
/// hash in their names: two copies built into one target directory would
/// replace each other's.
fn standalone_manifest(file: &str, bytes: &[u8], inherited: &Table) -> Result<String, VendorError> {
    let fault = |message: String| VendorError::Manifest {
        file: file.to_string(),
        message,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| fault(e.to_string()))?;
    let mut manifest: Table = toml::from_str(text).map_err(|e| fault(e.to_string()))?;
    let package = manifest
        .get_mut("package")
        .and_then(Value::as_table_mut)
        .ok_or_else(|| fault("no [package]".to_string()))?;
    for (key, value) in package.iter_mut() {
        let from_workspace = value
            .as_table()
            .and_then(|t| t.get("workspace"))
            .and_then(Value::as_bool)
            == Some(true);
        if from_workspace {
            *value = inherited.get(key.as_str()).cloned().ok_or_else(|| {
                fault(format!(
                    "package.{key} is inherited but the workspace has none"
                ))
            })?;
        }
    }
    for section in ["dev-dependencies", "bench", "test", "example"] {
        manifest.remove(section);
    }
    if let Some(lib) = manifest.get_mut("lib").and_then(Value::as_table_mut) {
        lib.remove("crate-type");
        if lib.is_empty() {
            manifest.remove("lib");
        }
    }
    if let Some(targets) = manifest.get_mut("target").and_then(Value::as_table_mut) {
        for (_, target) in targets.iter_mut() {
            if let Some(target) = target.as_table_mut() {
                target.remove("dev-dependencies");
            }
        }
    }
    // `[package]` first, as a manifest is read.
    let mut head = Table::new();
    if let Some(package) = manifest.remove("package") {
        head.insert("package".to_string(), package);
    }
    let render = |table: &Table| toml::to_string(table).map_err(|e| fault(e.to_string()));
    Ok(format!(
        "# Written by `nodewright filter new` from nodewright {}'s sources.\n\n{}\n{}",
        env!("CARGO_PKG_VERSION"),
        render(&head)?,
        render(&manifest)?
    ))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), VendorError> {
    let failed = |source| VendorError::Write {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    std::fs::write(path, bytes).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each of the four crates is carried whole: manifest, README, sources
    /// and (for the SDK and the host) the WIT contract.
    #[test]
    fn the_four_crates_are_embedded() {
        for name in ["sdk", "host", "available-amis", "flex-first"] {
            for file in ["Cargo.toml", "README.md", "src/lib.rs"] {
                let path = format!("{name}/{file}");
                assert!(SDK_FILES.iter().any(|(f, _)| *f == path), "{path}");
            }
        }
        for path in [
            "sdk/build.rs",
            "sdk/wit/filters.wit",
            "host/wit/filters.wit",
            "host/src/harness.rs",
        ] {
            assert!(SDK_FILES.iter().any(|(f, _)| *f == path), "{path}");
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for (file, bytes) in SDK_FILES {
            let on_disk = std::fs::read(root.join("filters").join(file)).unwrap();
            assert_eq!(&on_disk, bytes, "{file} differs from the source tree");
        }
    }

    #[test]
    fn manifests_are_made_standalone() {
        let inherited = workspace_package().unwrap();
        let (file, bytes) = SDK_FILES
            .iter()
            .find(|(f, _)| *f == "host/Cargo.toml")
            .unwrap();
        let text = standalone_manifest(file, bytes, &inherited).unwrap();
        let manifest: Table = toml::from_str(&text).unwrap();
        let package = manifest["package"].as_table().unwrap();
        assert_eq!(package["edition"], inherited["edition"]);
        assert_eq!(package["license"], inherited["license"]);
        assert_eq!(package["rust-version"], inherited["rust-version"]);
        assert!(manifest.get("dev-dependencies").is_none(), "{text}");
        assert!(manifest.get("bench").is_none(), "{text}");
        // The path dependencies between the crates still point at their
        // siblings under vendor/.
        assert_eq!(
            manifest["dependencies"]["nodewright-filter"]["path"].as_str(),
            Some("../sdk")
        );
        let err = standalone_manifest(file, bytes, &Table::new()).unwrap_err();
        // The built-ins are libraries only (no unhashed cdylib files).
        let (file, bytes) = SDK_FILES
            .iter()
            .find(|(f, _)| *f == "flex-first/Cargo.toml")
            .unwrap();
        let text = standalone_manifest(file, bytes, &inherited).unwrap();
        assert!(!text.contains("cdylib"), "{text}");
        assert!(
            err.to_string().contains("package.edition is inherited"),
            "{err}"
        );
    }

    /// The new crate's dev profile is the workspace's, whole.
    #[test]
    fn the_dev_profile_is_the_workspaces() {
        let profile: Table = toml::from_str(&dev_profile()).unwrap();
        let workspace: Table = toml::from_str(WORKSPACE_MANIFEST).unwrap();
        assert_eq!(profile["profile"]["dev"], workspace["profile"]["dev"]);
        assert_eq!(
            profile["profile"]["dev"]["package"]["cranelift-codegen"]["opt-level"].as_integer(),
            Some(2)
        );
    }
}
