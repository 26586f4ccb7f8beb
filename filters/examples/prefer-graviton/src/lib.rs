//! Orders instance types by CPU: Graviton (AWS) first, then Intel, then AMD,
//! then anything else. Within a score the host orders by price.

use nodewright_filter::{Context, InstanceType, PriorityScorer};

/// The scorer. No configuration.
#[derive(Debug, Default)]
pub struct PreferGraviton;

/// Score of a CPU manufacturer.
pub fn score_of(cpu_manufacturer: &str) -> i32 {
    match cpu_manufacturer {
        "aws" => 30,
        "intel" => 20,
        "amd" => 10,
        _ => 0,
    }
}

impl PriorityScorer for PreferGraviton {
    fn score(&self, _ctx: &Context, candidates: &[InstanceType<'_>]) -> Result<Vec<i32>, String> {
        Ok(candidates
            .iter()
            .map(|it| score_of(it.cpu_manufacturer()))
            .collect())
    }
}

nodewright_filter::export_priority_scorer!(PreferGraviton);
