//! The default priority scorer: `*-flex` families (`m7i-flex`, `c7i-flex`,
//! ...) are tried first, everything else after them as fallback. Within a
//! score the host orders by price.

use nodewright_filter::{Context, InstanceType, PriorityScorer};

/// Score given to `*-flex` families.
pub const FLEX_SCORE: i32 = 1;
/// Score given to every other family.
pub const FALLBACK_SCORE: i32 = 0;

/// The `builtin:flex-first` scorer.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlexFirst;

impl PriorityScorer for FlexFirst {
    fn score(&self, _ctx: &Context, candidates: &[InstanceType<'_>]) -> Result<Vec<i32>, String> {
        Ok(candidates
            .iter()
            .map(|it| {
                if it.is_flex() {
                    FLEX_SCORE
                } else {
                    FALLBACK_SCORE
                }
            })
            .collect())
    }
}

nodewright_filter::export_priority_scorer!(FlexFirst);
