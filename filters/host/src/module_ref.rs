//! Where a module comes from, and which role it plays.

use std::{fmt, path::PathBuf, str::FromStr, sync::Arc};

/// The three extension roles, one WIT world each. Serialized as the world
/// name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// `instance-filter`: keeps or drops instance types.
    InstanceFilter,
    /// `ami-selector`: orders the AMIs a node may boot.
    AmiSelector,
    /// `priority-scorer`: orders instance types.
    PriorityScorer,
}

impl Role {
    /// The WIT world name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::InstanceFilter => "instance-filter",
            Role::AmiSelector => "ami-selector",
            Role::PriorityScorer => "priority-scorer",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown role name.
#[derive(Debug, thiserror::Error)]
#[error("unknown role `{0}`; expected instance-filter, ami-selector or priority-scorer")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "instance-filter" => Ok(Role::InstanceFilter),
            "ami-selector" => Ok(Role::AmiSelector),
            "priority-scorer" => Ok(Role::PriorityScorer),
            other => Err(UnknownRole(other.to_string())),
        }
    }
}

/// Where to get a module. Every source except `Builtin` must come with a
/// `sha256` pin when loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleRef {
    /// A native built-in, by name (`builtin:NAME` in an EC2NodeClass).
    Builtin(String),
    /// A component file on the controller's disk (development, harness).
    Path(PathBuf),
    /// Component bytes the caller already holds (a ConfigMap's
    /// `binaryData`), with a label for messages.
    Bytes {
        /// For messages, e.g. `configmap/kube-system/filters#drop-t.wasm`.
        label: String,
        /// The component.
        bytes: Arc<[u8]>,
    },
    /// An HTTPS URL.
    Url(String),
    /// An OCI artifact reference.
    Oci(String),
}

impl ModuleRef {
    /// Parses `builtin:NAME`, `oci://REF`, `https://...` or a path.
    pub fn parse(s: &str) -> ModuleRef {
        if let Some(name) = s.strip_prefix("builtin:") {
            ModuleRef::Builtin(name.to_string())
        } else if let Some(r) = s.strip_prefix("oci://") {
            ModuleRef::Oci(r.to_string())
        } else if s.starts_with("https://") || s.starts_with("http://") {
            ModuleRef::Url(s.to_string())
        } else {
            ModuleRef::Path(PathBuf::from(s.strip_prefix("file://").unwrap_or(s)))
        }
    }

    /// Short human description for messages.
    pub fn describe(&self) -> String {
        match self {
            ModuleRef::Builtin(n) => format!("builtin:{n}"),
            ModuleRef::Path(p) => p.display().to_string(),
            ModuleRef::Bytes { label, .. } => label.clone(),
            ModuleRef::Url(u) => u.clone(),
            ModuleRef::Oci(r) => format!("oci://{r}"),
        }
    }
}
