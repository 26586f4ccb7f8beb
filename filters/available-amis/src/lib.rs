//! The default AMI selector. It never offers an image that is not
//! `available` (a `pending` image must never be launched), prefers images
//! that are not deprecated, and within that the newest creation time. The
//! order holds within every architecture/variant, so taking the first
//! candidate that matches a node's architecture and variant gives the right
//! image.
//!
//! Config: `{"allowDeprecated": false}` leaves deprecated images out
//! entirely (default `true`: they are kept, after every non-deprecated one).

use nodewright_filter::{Ami, AmiSelector, AmiState, Context};
use serde::Deserialize;

/// The selector's settings.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Keep deprecated images as a last resort.
    #[serde(default = "allow_deprecated_default")]
    pub allow_deprecated: bool,
}

fn allow_deprecated_default() -> bool {
    true
}

/// The `builtin:available-amis` selector.
#[derive(Debug, Default, Clone, Copy)]
pub struct AvailableAmis;

impl AmiSelector for AvailableAmis {
    fn select(&self, ctx: &Context, candidates: &[Ami]) -> Result<Vec<u32>, String> {
        let config: Config = ctx.config()?;
        let mut chosen: Vec<(usize, &Ami)> = candidates
            .iter()
            .enumerate()
            .filter(|(_, ami)| ami.state == AmiState::Available)
            .filter(|(_, ami)| config.allow_deprecated || !ami.is_deprecated(ctx.now))
            .collect();
        chosen.sort_by(|(ia, a), (ib, b)| {
            a.is_deprecated(ctx.now)
                .cmp(&b.is_deprecated(ctx.now))
                .then(b.creation_time.cmp(&a.creation_time))
                .then(a.id.cmp(&b.id))
                .then(ia.cmp(ib))
        });
        chosen
            .into_iter()
            .map(|(i, _)| u32::try_from(i).map_err(|_| format!("candidate index {i} exceeds u32")))
            .collect()
    }
}

nodewright_filter::export_ami_selector!(AvailableAmis);

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_filter::Architecture;

    fn ami(id: &str, state: AmiState, created: i64, deprecated: Option<i64>) -> Ami {
        Ami {
            id: id.to_string(),
            name: id.to_string(),
            owner: "amazon".to_string(),
            state,
            creation_time: created,
            deprecation_time: deprecated,
            architecture: Architecture::Amd64,
            variant: "standard".to_string(),
            tags: Default::default(),
            source: "alias:al2023@latest".to_string(),
        }
    }

    #[test]
    fn drops_non_available_and_orders_newest_non_deprecated_first() {
        let ctx = Context {
            now: 1_000,
            ..Context::default()
        };
        let amis = [
            ami("ami-old", AmiState::Available, 100, None),
            ami("ami-pending", AmiState::Pending, 900, None),
            ami("ami-new", AmiState::Available, 500, None),
            ami("ami-deprecated", AmiState::Available, 800, Some(999)),
            ami(
                "ami-later-deprecated",
                AmiState::Available,
                300,
                Some(2_000),
            ),
            ami("ami-disabled", AmiState::Disabled, 950, None),
        ];
        let order = AvailableAmis.select(&ctx, &amis).unwrap();
        let ids: Vec<&str> = order
            .iter()
            .map(|&i| amis[i as usize].id.as_str())
            .collect();
        assert_eq!(
            ids,
            [
                "ami-new",
                "ami-later-deprecated",
                "ami-old",
                "ami-deprecated"
            ]
        );
    }

    #[test]
    fn deprecated_images_can_be_excluded() {
        let ctx = Context {
            now: 1_000,
            config: r#"{"allowDeprecated": false}"#.to_string(),
            ..Context::default()
        };
        let amis = [
            ami("ami-deprecated", AmiState::Available, 800, Some(999)),
            ami("ami-old", AmiState::Available, 100, None),
        ];
        assert_eq!(AvailableAmis.select(&ctx, &amis).unwrap(), vec![1]);
        let bad = Context {
            config: r#"{"allowDeprecate": false}"#.to_string(),
            ..ctx
        };
        let err = AvailableAmis.select(&bad, &amis).unwrap_err();
        assert!(err.contains("allowDeprecate"), "{err}");
    }

    #[test]
    fn nothing_available_selects_nothing() {
        let amis = [ami("ami-pending", AmiState::Pending, 1, None)];
        assert!(
            AvailableAmis
                .select(&Context::default(), &amis)
                .unwrap()
                .is_empty()
        );
    }
}
