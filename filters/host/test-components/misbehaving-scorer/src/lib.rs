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
            // Scores computed in floating point from NaN and the infinities:
            // the contract's scores are `s32`, so they reach the host as
            // Rust's saturating casts make them (0, i32::MAX, i32::MIN).
            "nan-inf" => Ok([f64::NAN, f64::INFINITY, f64::NEG_INFINITY]
                .into_iter()
                .cycle()
                .take(candidates.len())
                .map(|f| f as i32)
                .collect()),
            "extremes" => Ok([i32::MAX, i32::MIN, -1]
                .into_iter()
                .cycle()
                .take(candidates.len())
                .collect()),
            // Millions of scores for a handful of candidates.
            "many-scores" => Ok(vec![7; 4_000_000]),
            _ => Ok(candidates
                .iter()
                .map(|c| i32::try_from(c.vcpu()).unwrap_or(i32::MAX))
                .collect()),
        }
    }
}

nodewright_filter::export_priority_scorer!(Misbehaving);
