//! Embeds the sources of the SDK crates (`filters/sdk`, `filters/host` and
//! the two built-ins the host depends on), the workspace manifest and the
//! lockfile, so that `nodewright filter new` can write a crate that builds
//! with nothing but this binary and crates.io (src/cli/filter/vendor.rs).
//!
//! A crate's files are the ones it publishes: its manifest, README, build
//! script, `src/**/*.rs` and the WIT contract.

use std::{
    env, fs,
    path::{Path, PathBuf},
};

/// The crates `filter new` vendors, by their directory under `filters/`.
const CRATES: [&str; 4] = ["sdk", "host", "available-amis", "flex-first"];

fn main() {
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for name in CRATES {
        let dir = root.join("filters").join(name);
        for top in [
            "Cargo.toml",
            "README.md",
            "build.rs",
            "wit/filters.wit",
            "wit/README.md",
        ] {
            let path = dir.join(top);
            if path.is_file() {
                files.push((format!("{name}/{top}"), path));
            }
        }
        let mut sources = Vec::new();
        rust_files(&dir.join("src"), &mut sources);
        sources.sort();
        for path in sources {
            let Ok(relative) = path.strip_prefix(&dir) else {
                continue;
            };
            let relative = relative.to_string_lossy().replace('\\', "/");
            files.push((format!("{name}/{relative}"), path));
        }
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    for top in ["Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(top).display());
    }
    let mut text = String::from(
        "/// The SDK crates' files, by path under `vendor/`.\n\
         pub static SDK_FILES: &[(&str, &[u8])] = &[\n",
    );
    for (name, path) in &files {
        text.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    text.push_str("];\n");
    for (constant, file, doc) in [
        (
            "WORKSPACE_MANIFEST",
            "Cargo.toml",
            "The workspace manifest (its `[workspace.package]` fills the crates' inherited keys).",
        ),
        (
            "WORKSPACE_LOCK",
            "Cargo.lock",
            "The lockfile the crates were built with.",
        ),
    ] {
        text.push_str(&format!(
            "/// {doc}\npub static {constant}: &str = include_str!({:?});\n",
            root.join(file).display().to_string()
        ));
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default()).join("sdk_files.rs");
    if let Err(e) = fs::write(&out, text) {
        panic!("cannot write {}: {e}", out.display());
    }
}

/// Every `.rs` file under `dir`, following links.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
