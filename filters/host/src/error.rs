//! Errors of loading and calling extension modules. Every way a component
//! can fail is its own variant so the controller can report it precisely on
//! the EC2NodeClass status; none of them stops the host.

use std::{path::PathBuf, time::Duration};

use crate::Role;

/// A module could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `builtin:NAME` names no built-in of this role.
    #[error("unknown built-in `{name}` for role {role}; known built-ins: {known}")]
    UnknownBuiltin {
        /// The name given.
        name: String,
        /// The role it was asked for.
        role: Role,
        /// Built-ins that exist for that role.
        known: String,
    },
    /// A non-built-in module was given without a `sha256`.
    #[error(
        "module {source_desc} has no sha256: every non-built-in module must be pinned by digest (set `sha256` to the module's hex SHA-256)"
    )]
    MissingDigest {
        /// Where the module came from.
        source_desc: String,
    },
    /// The `sha256` is not 64 hex digits.
    #[error("sha256 `{given}` is not 64 hexadecimal digits")]
    InvalidDigest {
        /// What was given.
        given: String,
    },
    /// The bytes do not hash to the pinned digest.
    #[error(
        "digest mismatch for {source_desc}: expected sha256 {expected}, got {actual}; the module changed or the pin is wrong"
    )]
    DigestMismatch {
        /// Where the module came from.
        source_desc: String,
        /// The pinned digest.
        expected: String,
        /// The digest of the bytes received.
        actual: String,
    },
    /// The module file could not be read.
    #[error("cannot read module file {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// This kind of module source is not supported by this build.
    #[error("module source `{scheme}` is not supported yet: {hint}")]
    UnsupportedSource {
        /// `url`, `oci`, ...
        scheme: &'static str,
        /// What to use instead.
        hint: &'static str,
    },
    /// A `url` or `oci` source could not be downloaded (unreachable, HTTP
    /// error status, timeout, invalid reference...). Distinct from
    /// [`LoadError::DigestMismatch`]: nothing was received to check.
    #[error("cannot download module {source_desc}: {message}")]
    Download {
        /// The URL or `oci://` reference.
        source_desc: String,
        /// What went wrong and what to check.
        message: String,
    },
    /// An `oci:` module without a signature by a trusted key, where the
    /// host requires one.
    #[error(
        "module {source_desc} is refused: signatures by a key of {keys} are required and {reason}"
    )]
    Signature {
        /// The `oci://` reference.
        source_desc: String,
        /// The trusted key set, described.
        keys: String,
        /// Why the signature does not do.
        reason: String,
    },
    /// A `url` source uses plain HTTP to a host not listed for it.
    #[error(
        "refusing to download module {source_desc} over plain HTTP: `url` must start with https:// (plain HTTP is allowed only for hosts in the host's plain-HTTP list, meant for local registries and tests; `{host}` is not in it)"
    )]
    InsecureSource {
        /// The URL.
        source_desc: String,
        /// The host that would have been contacted.
        host: String,
    },
    /// The download is larger than the host accepts.
    #[error(
        "module {source_desc} is larger than the download limit of {limit_bytes} bytes; a filter component is normally well under 1 MiB (build it with --release), or raise the host's download limit"
    )]
    DownloadTooLarge {
        /// The URL or `oci://` reference.
        source_desc: String,
        /// The limit.
        limit_bytes: usize,
    },
    /// The OCI artifact is not a single Wasm component layer.
    #[error(
        "OCI artifact {source_desc} is not a single Wasm component: expected exactly one layer of media type {}, found {}; push the component .wasm alone as an OCI artifact",
        crate::fetch::WASM_LAYER_MEDIA_TYPES.join(" or "),
        describe_layers(.media_types)
    )]
    NotAComponentArtifact {
        /// The `oci://` reference.
        source_desc: String,
        /// The media type of each layer of the manifest, in order.
        media_types: Vec<String>,
    },
    /// The bytes are a core WebAssembly module (a `wasm32-wasip1` or
    /// `wasm32-unknown-unknown` build), not a component.
    #[error(
        "{source_desc} is a core WebAssembly module, not a component: build it with `cargo build --target wasm32-wasip2 --release` (wasm32-wasip1 and wasm32-unknown-unknown produce core modules)"
    )]
    CoreModule {
        /// Where the module came from.
        source_desc: String,
    },
    /// The bytes are not a valid component, or compiling it failed.
    #[error("cannot compile component {source_desc}: {message}")]
    Compile {
        /// Where the module came from.
        source_desc: String,
        /// The compiler's message.
        message: String,
    },
    /// The component imports a capability the sandbox does not grant.
    #[error("component {source_desc} imports {}, which the sandbox does not allow (components get no filesystem, network, HTTP or other host capabilities)", .imports.join(", "))]
    ForbiddenImport {
        /// Where the module came from.
        source_desc: String,
        /// The refused imports.
        imports: Vec<String>,
    },
    /// The component does not export what the role needs.
    #[error("component {source_desc} does not implement the {role} world: {message}")]
    WrongWorld {
        /// Where the module came from.
        source_desc: String,
        /// The role asked for.
        role: Role,
        /// Details from the linker.
        message: String,
    },
}

impl LoadError {
    /// A copy of this error if it is a refusal of the module's bytes
    /// themselves — not a component, does not compile, forbidden imports,
    /// wrong world — which pinned bytes always meet again; `None` for
    /// failures that may pass on a retry (reading, downloading).
    pub(crate) fn copy_refusal(&self) -> Option<LoadError> {
        Some(match self {
            LoadError::CoreModule { source_desc } => LoadError::CoreModule {
                source_desc: source_desc.clone(),
            },
            LoadError::Compile {
                source_desc,
                message,
            } => LoadError::Compile {
                source_desc: source_desc.clone(),
                message: message.clone(),
            },
            LoadError::ForbiddenImport {
                source_desc,
                imports,
            } => LoadError::ForbiddenImport {
                source_desc: source_desc.clone(),
                imports: imports.clone(),
            },
            LoadError::WrongWorld {
                source_desc,
                role,
                message,
            } => LoadError::WrongWorld {
                source_desc: source_desc.clone(),
                role: *role,
                message: message.clone(),
            },
            _ => return None,
        })
    }
}

/// A call into a loaded module failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call ran past its deadline and was interrupted.
    #[error("call exceeded its deadline of {deadline:?}")]
    Timeout {
        /// The deadline.
        deadline: Duration,
    },
    /// The component tried to grow its memory past the cap.
    #[error("component exceeded its memory limit of {limit_bytes} bytes")]
    MemoryExhausted {
        /// The cap.
        limit_bytes: usize,
    },
    /// The component trapped (panic, unreachable, out-of-bounds access...).
    #[error("component trapped: {message}{}", guest_output_suffix(.guest_output))]
    Trap {
        /// The trap description.
        message: String,
        /// What the component wrote to stdout/stderr (a panic message lands
        /// here), size-capped.
        guest_output: String,
    },
    /// The component returned an error of its own.
    #[error("component returned an error: {0}")]
    Rejected(String),
    /// The component's answer broke the contract.
    #[error("malformed output: {0}")]
    MalformedOutput(String),
    /// The module was called through a role it was not loaded for.
    #[error("module was loaded as {loaded}, not {called}")]
    WrongRole {
        /// Role it was loaded for.
        loaded: Role,
        /// Role of the call.
        called: Role,
    },
    /// Setting up the call failed inside the host.
    #[error("cannot prepare the call: {0}")]
    Setup(String),
}

fn describe_layers(media_types: &[String]) -> String {
    match media_types {
        [] => "no layers".to_string(),
        [one] => format!("one layer of media type {one}"),
        many => format!("{} layers ({})", many.len(), many.join(", ")),
    }
}

fn guest_output_suffix(output: &str) -> String {
    if output.trim().is_empty() {
        String::new()
    } else {
        format!(" (component output: {})", output.trim())
    }
}
