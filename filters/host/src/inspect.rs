//! What a reviewer checks before pinning a component: which roles it
//! implements, which contract version it speaks, what it imports (and
//! whether the sandbox would refuse it), its size and digest. Nothing is
//! run.

use serde::Serialize;
use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, InstancePre, Linker};

use crate::bindings::{filter, host_iface, scorer, selector};
use crate::host::is_core_module;
use crate::sandbox::{CallState, forbidden_imports};
use crate::{LoadError, Role, sha256_hex};

/// Interfaces of the contract start with this.
const CONTRACT_PACKAGE: &str = "nodewright:filters";

/// One import of a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Import {
    /// The interface, as the component names it (`wasi:cli/stderr@0.2.6`).
    pub name: String,
    /// Whether the sandbox grants it; a component with any refused import
    /// is not loaded.
    pub allowed: bool,
}

/// The facts [`crate::Host::inspect`] reports about a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// Size of the file, bytes.
    pub size_bytes: usize,
    /// SHA-256 of the bytes, lowercase hex: the value to pin as `sha256`.
    pub sha256: String,
    /// Roles whose world the component implements (exports with the right
    /// types).
    pub roles: Vec<Role>,
    /// The contract it was built against (`nodewright:filters@0.2.0`), from
    /// its imports of the contract's interfaces.
    pub contract: Option<String>,
    /// The contract version this host speaks.
    pub host_contract: String,
    /// Everything it imports.
    pub imports: Vec<Import>,
    /// Names it exports.
    pub exports: Vec<String>,
}

impl Inspection {
    /// The sandbox would load it: no refused import, at least one role,
    /// and the contract this host speaks.
    pub fn loadable(&self) -> bool {
        !self.roles.is_empty()
            && self.imports.iter().all(|i| i.allowed)
            && self.contract.as_deref() == Some(self.host_contract.as_str())
    }
}

/// The contract this host speaks (`nodewright:filters@X.Y.Z`).
pub fn host_contract() -> String {
    let version = nodewright_filter::WIT
        .lines()
        .find_map(|line| line.trim().strip_prefix("package nodewright:filters@"))
        .map(|rest| rest.trim_end_matches(';').trim())
        .unwrap_or("unknown");
    format!("{CONTRACT_PACKAGE}@{version}")
}

pub(crate) fn inspect(engine: &Engine, bytes: &[u8], label: &str) -> Result<Inspection, LoadError> {
    if is_core_module(bytes) {
        return Err(LoadError::CoreModule {
            source_desc: label.to_string(),
        });
    }
    let component = Component::new(engine, bytes).map_err(|e| LoadError::Compile {
        source_desc: label.to_string(),
        message: format!("{e:#}"),
    })?;
    let ty = component.component_type();
    let import_names: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let refused = forbidden_imports(import_names.iter().map(String::as_str));
    let imports = import_names
        .iter()
        .map(|name| Import {
            name: name.clone(),
            allowed: !refused.contains(name),
        })
        .collect();
    let contract = import_names
        .iter()
        .find(|name| name.starts_with(&format!("{CONTRACT_PACKAGE}/")))
        .and_then(|name| name.split_once('@'))
        .map(|(_, version)| format!("{CONTRACT_PACKAGE}@{version}"));
    let exports = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    Ok(Inspection {
        size_bytes: bytes.len(),
        sha256: sha256_hex(bytes),
        roles: roles(engine, &component),
        contract,
        host_contract: host_contract(),
        imports,
        exports,
    })
}

/// Roles whose world type-checks against the component's exports. The
/// linker has every WASI interface, so imports of filesystem and sockets
/// resolve; other imports the sandbox would refuse (HTTP, anything unknown)
/// are stubbed, so they do not hide the roles. Stubs are a fallback only:
/// wasmtime stubs every item of an imported interface that the linker's
/// instance lacks, including a resource type the interface `use`s from
/// another (`pollable` in `wasi:clocks/monotonic-clock`), and the fresh
/// stub no longer matches the real one — so a component importing WASI at
/// the exact version this host defines would show no role at all.
fn roles(engine: &Engine, component: &Component) -> Vec<Role> {
    let Some(pre) = instantiate_pre(engine, component, false)
        .or_else(|| instantiate_pre(engine, component, true))
    else {
        return Vec::new();
    };
    let mut roles = Vec::new();
    if filter::InstanceFilterPre::new(pre.clone()).is_ok() {
        roles.push(Role::InstanceFilter);
    }
    if selector::AmiSelectorPre::new(pre.clone()).is_ok() {
        roles.push(Role::AmiSelector);
    }
    if scorer::PriorityScorerPre::new(pre).is_ok() {
        roles.push(Role::PriorityScorer);
    }
    roles
}

/// The component type-checked against the sandbox's linker, with unknown
/// imports stubbed as traps when `stub_unknown`.
fn instantiate_pre(
    engine: &Engine,
    component: &Component,
    stub_unknown: bool,
) -> Option<InstancePre<CallState>> {
    let mut linker: Linker<CallState> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).ok()?;
    host_iface::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s).ok()?;
    if stub_unknown {
        linker.define_unknown_imports_as_traps(component).ok()?;
    }
    linker.instantiate_pre(component).ok()
}
