//! Guest SDK for nodewright extension components.
//!
//! An author implements one plain Rust trait — [`InstanceFilter`],
//! [`AmiSelector`] or [`PriorityScorer`] — over the types in this crate and
//! invokes the matching export macro ([`export_instance_filter!`],
//! [`export_ami_selector!`], [`export_priority_scorer!`]). Built for
//! `wasm32-wasip2` the crate becomes a component speaking the
//! `nodewright:filters` WIT contract; built natively the same code runs
//! without Wasm, which is how the controller links built-ins and how authors
//! unit-test their logic.
//!
//! Instance types reach a filter or scorer as [`InstanceType`] views over one
//! shared column-wise [`InstanceTypes`] table, so a call over the whole catalog
//! copies a few dozen lists of plain numbers instead of thousands of records. Build fixtures as
//! [`InstanceTypeInfo`] (with the builders in [`fixtures`]) and turn them
//! into a table with [`InstanceTypes::from_infos`].

mod export;
pub mod fixtures;
mod labels;
mod table;
mod types;

include!(concat!(env!("OUT_DIR"), "/generate_macro.rs"));

/// This SDK's version: `nodewright filter new` writes it as the new crate's
/// dependency requirement, so a scaffold asks for the SDK its CLI was built with.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Compiles the README's example, so the crate's front page stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(target_family = "wasm")]
#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

#[cfg(target_family = "wasm")]
#[doc(hidden)]
pub mod wasm;

pub use labels::well_known;
pub use table::{
    AcceleratorColumns, AcceleratorRef, InstanceType, InstanceTypes, LabelColumns, OfferingColumns,
    OfferingRef, StrRef, TRAIT_BARE_METAL, TRAIT_BURSTABLE, TRAIT_CURRENT_GENERATION,
    TRAIT_ENCRYPTION_IN_TRANSIT, TableParts,
};
pub use types::{
    Accelerator, Ami, AmiState, Architecture, CapacityType, ConfigError, Context, InstanceTypeInfo,
    LogLevel, Offering, Verdict,
};

/// Keeps or drops instance types for a NodePool.
pub trait InstanceFilter {
    /// Returns one verdict per candidate, in candidate order. An `Err` fails
    /// the whole call; the host applies the EC2NodeClass's failure policy.
    fn filter(
        &self,
        ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String>;
}

/// Chooses which AMIs a node may boot, best first.
pub trait AmiSelector {
    /// Returns indices into `candidates`, best first, each at most once.
    /// Candidates left out are never launched.
    fn select(&self, ctx: &Context, candidates: &[Ami]) -> Result<Vec<u32>, String>;
}

/// Orders instance types: higher scores are tried first; the host breaks
/// ties by price.
pub trait PriorityScorer {
    /// Returns one score per candidate, in candidate order.
    fn score(&self, ctx: &Context, candidates: &[InstanceType<'_>]) -> Result<Vec<i32>, String>;
}

/// Writes a line to the host's log. In a component this goes through the
/// `log` import (size-capped by the host); natively it goes to stderr so
/// unit tests show it.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_family = "wasm")]
    wasm::log(level, message);
    #[cfg(not(target_family = "wasm"))]
    eprintln!("[{level:?}] {message}");
}
