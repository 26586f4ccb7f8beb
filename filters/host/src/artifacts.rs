//! The on-disk cache of precompiled components. An artifact is native code
//! that the host maps and runs outside the Wasm sandbox, so it is used only
//! from a directory no other user may write, only from a file this user owns
//! and no other user may write, and only if its bytes still have the SHA-256
//! recorded when they were written. Anything else is discarded and the
//! module compiled again from its pinned source.

use std::{
    fs,
    hash::Hash,
    io::{Read, Write},
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::digest::{Sha256Hasher, hex};
use crate::host::HostError;

/// First line of an artifact file; the second is the hex SHA-256 of what
/// follows it. A file written by an older host has no such header and is
/// compiled again.
const HEADER: &[u8] = b"nodewright-artifact-v1\n";
/// Length of the digest line: 64 hex digits and a newline.
const DIGEST_LINE: usize = 65;
/// Largest artifact read back; a bigger file is not one this host wrote
/// (components are at most tens of MiB compiled).
const MAX_ARTIFACT_BYTES: u64 = 512 * 1024 * 1024;

/// The cache directory of one engine configuration:
/// `BASE/wasmtime-<version>-<engine fingerprint>`, mode 0700.
#[derive(Debug)]
pub(crate) struct ArtifactDir {
    dir: PathBuf,
}

impl ArtifactDir {
    /// Creates the engine's directory under `base` (mode 0700), or checks the
    /// one that is there: it must be a directory owned by this process's user
    /// that no one else may write, or the host refuses to start.
    pub(crate) fn open(base: &Path, engine: &Engine) -> Result<Self, HostError> {
        let dir = base.join(engine_fingerprint(engine));
        create_private_dir(&dir).map_err(|source| HostError::CacheDir {
            path: dir.clone(),
            source,
        })?;
        let meta = fs::metadata(&dir).map_err(|source| HostError::CacheDir {
            path: dir.clone(),
            source,
        })?;
        if let Some(reason) = unsafe_owner_or_mode(&meta) {
            return Err(HostError::UnsafeCacheDir { path: dir, reason });
        }
        Ok(ArtifactDir { dir })
    }

    /// The compiled component of `pin`, if its artifact passes every check.
    /// A file that fails one is logged, removed and `None` returned, so the
    /// caller compiles from source.
    pub(crate) fn load(&self, engine: &Engine, pin: &str) -> Option<Component> {
        let path = self.path(pin);
        let file = match fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot open precompiled component; compiling from source");
                return None;
            }
        };
        let body = match read_checked(file) {
            Ok(body) => body,
            Err(reason) => {
                discard(&path, &reason);
                return None;
            }
        };
        // SAFETY: `body` is native code for this exact engine configuration
        // (the directory name is its fingerprint), written by `store` from
        // a component compiled from bytes that matched their pin, in a file
        // only this user can write, and unchanged since (its SHA-256 matches
        // the one written with it).
        match unsafe { Component::deserialize(engine, &body) } {
            Ok(component) => Some(component),
            Err(e) => {
                discard(&path, &format!("{e:#}"));
                None
            }
        }
    }

    /// Writes the artifact of `component` for `pin` (mode 0600, through a
    /// temporary file renamed into place). A failure only costs the next
    /// host a compile, so it is logged, not returned.
    pub(crate) fn store(&self, component: &Component, pin: &str) {
        let path = self.path(pin);
        if let Err(e) = write_artifact(component, &path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot write precompiled component; continuing without disk cache");
        }
    }

    fn path(&self, pin: &str) -> PathBuf {
        self.dir.join(format!("{pin}.cwasm"))
    }
}

fn discard(path: &Path, reason: &str) {
    tracing::warn!(path = %path.display(), reason, "discarding unusable precompiled component; compiling from source");
    let _ = fs::remove_file(path);
}

/// The artifact's body after its checks: owner and mode of the open file,
/// size, header, and the digest of the body.
fn read_checked(mut file: fs::File) -> Result<Vec<u8>, String> {
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    if let Some(reason) = unsafe_owner_or_mode(&meta) {
        return Err(reason);
    }
    if meta.len() > MAX_ARTIFACT_BYTES {
        return Err(format!(
            "{} bytes, more than the {MAX_ARTIFACT_BYTES} an artifact may have",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    let rest = bytes
        .strip_prefix(HEADER)
        .ok_or("no artifact header (written by another version)")?;
    if rest.len() < DIGEST_LINE || rest[DIGEST_LINE - 1] != b'\n' {
        return Err("truncated artifact header".to_string());
    }
    let (digest_line, body) = rest.split_at(DIGEST_LINE);
    let recorded = &digest_line[..DIGEST_LINE - 1];
    let actual = hex(&Sha256::digest(body));
    if recorded != actual.as_bytes() {
        return Err("content does not match the digest written with it".to_string());
    }
    Ok(body.to_vec())
}

fn write_artifact(component: &Component, path: &Path) -> Result<(), String> {
    let body = component.serialize().map_err(|e| format!("{e:#}"))?;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let mut file = create_private_file(&tmp).map_err(|e| e.to_string())?;
    let written = file
        .write_all(HEADER)
        .and_then(|()| file.write_all(hex(&Sha256::digest(&body)).as_bytes()))
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.write_all(&body))
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e.to_string());
    }
    fs::rename(&tmp, path).map_err(|e| e.to_string())
}

/// Directory name that changes whenever precompiled artifacts stop being
/// loadable: the wasmtime version and the engine's compilation settings.
fn engine_fingerprint(engine: &Engine) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let digest = hasher.0.finalize();
    format!("wasmtime-{}-{}", wasmtime_version(), &hex(&digest)[..16])
}

fn wasmtime_version() -> &'static str {
    // Kept in step with the `=` pin in Cargo.toml.
    "48.0.8"
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

#[cfg(unix)]
fn create_private_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private_file(path: &Path) -> std::io::Result<fs::File> {
    fs::File::create(path)
}

/// Why a cache entry (directory or file) with this metadata may have been
/// written by someone else: another owner, or writable by group or others.
#[cfg(unix)]
fn unsafe_owner_or_mode(meta: &fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Some(format!(
            "owned by uid {}, not by this process's uid {me}",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "writable by group or others (mode {:o}); only its owner may write it",
            meta.mode() & 0o7777
        ));
    }
    None
}

/// Ownership and modes are not checked where they do not exist.
#[cfg(not(unix))]
fn unsafe_owner_or_mode(_meta: &fs::Metadata) -> Option<String> {
    None
}
