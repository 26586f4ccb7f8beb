//! An AMI selector whose answer is chosen by `config.mode`.

use nodewright_filter::{Ami, AmiSelector, Context};

/// Behaves as `config.mode` says.
#[derive(Default)]
pub struct Misbehaving;

impl AmiSelector for Misbehaving {
    fn select(&self, ctx: &Context, candidates: &[Ami]) -> Result<Vec<u32>, String> {
        let mode = ctx
            .config::<serde_json::Value>()
            .ok()
            .and_then(|v| v.get("mode").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_default();
        let n = u32::try_from(candidates.len()).map_err(|e| e.to_string())?;
        match mode.as_str() {
            "out-of-range" => Ok(vec![n]),
            "duplicate" => Ok(vec![0, 0]),
            "duplicate-late" => Ok((0..n).chain([n.saturating_sub(1)]).collect()),
            "max-index" => Ok(vec![u32::MAX]),
            // Millions of indices for a handful of candidates.
            "many-indices" => Ok((0..4_000_000).map(|i| i % n.max(1)).collect()),
            _ => Ok((0..n).rev().collect()),
        }
    }
}

nodewright_filter::export_ami_selector!(Misbehaving);
