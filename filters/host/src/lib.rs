//! Sandboxed host for nodewright extension components, the native
//! built-ins behind the same interface, and a test harness for filter
//! authors.
//!
//! ```no_run
//! use nodewright_host::{Host, HostConfig, ModuleRef, Role, InstanceTypeSet};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let host = Host::new(HostConfig::default())?;
//! let scorer = host.load(Role::PriorityScorer, &ModuleRef::parse("builtin:flex-first"), None)?;
//! let types = InstanceTypeSet::new(Vec::new()); // once per catalog version
//! let scores = scorer.score(&nodewright_filter::Context::default(), &types)?;
//! # Ok(()) }
//! ```

mod artifacts;
mod bindings;
mod candidates;
mod clock;
mod digest;
mod docker_config;
mod error;
mod fetch;
pub mod fixtures;
pub mod harness;
mod host;
mod inspect;
mod module;
mod module_ref;
mod output;
mod sandbox;
pub mod signature;
pub mod text;

pub use candidates::InstanceTypeSet;
pub use digest::sha256_hex;
pub use docker_config::{DockerConfigError, credentials_from_docker_config};
pub use error::{CallError, LoadError};
pub use fetch::RegistryCredentials;
pub use host::{Host, HostConfig, HostError, Limits};
pub use inspect::{Import, Inspection, host_contract};
pub use module::{CallReport, LoadedModule, MAX_REASON_BYTES};
pub use module_ref::{ModuleRef, Role, UnknownRole};
pub use nodewright_filter as sdk;
pub use signature::{KeyError, SigningKeys};
