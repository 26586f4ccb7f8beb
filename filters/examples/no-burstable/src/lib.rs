//! The instance filter `docs/authoring-filters.md` builds. Every Rust block
//! of the guide is in this crate verbatim (`tests/guide.rs` checks), so the
//! guide's code compiles and its tests run.

use nodewright_filter::{Context, InstanceFilter, InstanceType, Verdict};
use serde::Deserialize;

/// Settings from the EC2NodeClass's `config`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Config {
    /// Families to drop besides the burstable ones.
    #[serde(default)]
    families: Vec<String>,
}

/// Drops burstable instance types and every family in `config.families`.
#[derive(Default)]
pub struct NoBurstable;

impl InstanceFilter for NoBurstable {
    fn filter(
        &self,
        ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String> {
        let config: Config = ctx.config()?; // `config` JSON from the EC2NodeClass
        Ok(candidates
            .iter()
            .map(|it| {
                if it.burstable() {
                    Verdict::drop(format!("{} is burstable (CPU credits)", it.name()))
                } else if config.families.iter().any(|f| f == it.family()) {
                    Verdict::drop(format!(
                        "{} is in family {}, excluded by config.families",
                        it.name(),
                        it.family()
                    ))
                } else {
                    Verdict::Keep
                }
            })
            .collect())
    }
}

nodewright_filter::export_instance_filter!(NoBurstable);

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_filter::InstanceTypes;
    use nodewright_filter::fixtures::it;

    #[test]
    fn drops_burstable_types_and_listed_families() {
        let table = InstanceTypes::from_infos(&[
            it("t3.large").burstable().build(),
            it("c5.large").build(),
            it("m7g.large").build(),
        ]);
        let ctx = Context {
            config: r#"{"families": ["c5"]}"#.to_string(),
            ..Context::default()
        };
        let verdicts = NoBurstable.filter(&ctx, &table.views()).unwrap();
        assert_eq!(
            verdicts[0],
            Verdict::drop("t3.large is burstable (CPU credits)")
        );
        assert_eq!(
            verdicts[1],
            Verdict::drop("c5.large is in family c5, excluded by config.families")
        );
        assert_eq!(verdicts[2], Verdict::Keep);
    }
}
