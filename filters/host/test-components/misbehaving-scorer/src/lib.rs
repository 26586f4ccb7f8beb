//! A priority scorer whose answer is chosen by `config.mode`.

use nodewright_filter::{Context, InstanceType, PriorityScorer};

/// Behaves as `config.mode` says.
#[derive(Default)]
pub struct Misbehaving;

impl PriorityScorer for Misbehaving {
    fn score(&self, ctx: &Context, candidates: &[InstanceType<'_>]) -> Result<Vec<i32>, String> {
        let mode = ctx
            .config::<serde_json::Value>()
            .ok()
            .and_then(|v| v.get("mode").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_default();
        match mode.as_str() {
            "wrong-length" => Ok(vec![0; candidates.len().saturating_sub(1)]),
            _ => Ok(candidates
                .iter()
                .map(|c| i32::try_from(c.vcpu()).unwrap_or(i32::MAX))
                .collect()),
        }
    }
}

nodewright_filter::export_priority_scorer!(Misbehaving);
