//! Keeps only GPU instance types whose GPUs each have at least N GiB of
//! memory — what a model that must fit on one GPU needs.
//!
//! Config: `{"minGpuMemoryGiB": 24}`.

use nodewright_filter::{Context, InstanceFilter, InstanceType, Verdict};
use serde::Deserialize;

/// The filter's settings.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Memory each GPU must have, GiB.
    #[serde(rename = "minGpuMemoryGiB")]
    pub min_gpu_memory_gib: u64,
}

/// The filter.
#[derive(Debug, Default)]
pub struct GpuMemory;

impl InstanceFilter for GpuMemory {
    fn filter(
        &self,
        ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String> {
        let config: Config = ctx.config()?;
        let min_mib = config.min_gpu_memory_gib.saturating_mul(1024);
        Ok(candidates
            .iter()
            .map(|it| {
                let smallest = it
                    .gpus()
                    .filter(|g| g.count > 0)
                    .map(|g| g.memory_mib)
                    .min();
                match smallest {
                    None => Verdict::drop(format!("{} has no GPU", it.name())),
                    Some(m) if m < min_mib => Verdict::drop(format!(
                        "{} has {} GiB per GPU, needs {} GiB",
                        it.name(),
                        m / 1024,
                        config.min_gpu_memory_gib
                    )),
                    Some(_) => Verdict::Keep,
                }
            })
            .collect())
    }
}

nodewright_filter::export_instance_filter!(GpuMemory);
