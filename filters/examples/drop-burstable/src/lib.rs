//! Drops burstable (T family, CPU credits) and previous-generation instance
//! types, for workloads that need steady CPU on current hardware.

use nodewright_filter::{Context, InstanceFilter, InstanceType, Verdict};

/// The filter. No configuration.
#[derive(Debug, Default)]
pub struct DropBurstable;

impl InstanceFilter for DropBurstable {
    fn filter(
        &self,
        _ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String> {
        Ok(candidates
            .iter()
            .map(|it| {
                if it.burstable() {
                    Verdict::drop(format!("{} is burstable (CPU credits)", it.name()))
                } else if !it.current_generation() {
                    Verdict::drop(format!("{} is a previous-generation type", it.name()))
                } else {
                    Verdict::Keep
                }
            })
            .collect())
    }
}

nodewright_filter::export_instance_filter!(DropBurstable);
