//! Drops instance types whose cheapest available offering costs more per
//! hour than a cap from the EC2NodeClass's `config`.
//!
//! Config: `{"maxHourlyPrice": 0.50, "capacityType": "spot"}` — the cap in
//! USD per hour (required) and, optionally, the capacity type whose
//! offerings count (`on-demand`, `spot`, `reserved`; default all).

use nodewright_filter::{CapacityType, Context, InstanceFilter, InstanceType, Verdict};
use serde::Deserialize;

/// The filter's settings.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// USD per hour.
    pub max_hourly_price: f64,
    /// Only offerings of this capacity type count.
    #[serde(default)]
    pub capacity_type: Option<CapacityType>,
}

/// The filter.
#[derive(Debug, Default)]
pub struct PriceCap;

impl InstanceFilter for PriceCap {
    fn filter(
        &self,
        ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String> {
        let config: Config = ctx.config()?;
        if !config.max_hourly_price.is_finite() || config.max_hourly_price <= 0.0 {
            return Err(format!(
                "config.maxHourlyPrice must be a positive number, got {}",
                config.max_hourly_price
            ));
        }
        Ok(candidates
            .iter()
            .map(|it| {
                let cheapest = it
                    .offerings()
                    .filter(|o| o.available)
                    .filter(|o| config.capacity_type.is_none_or(|ct| ct == o.capacity_type))
                    .map(|o| o.price)
                    .min_by(f64::total_cmp);
                match cheapest {
                    None => Verdict::drop(format!(
                        "{} has no available offering of the requested capacity type",
                        it.name()
                    )),
                    Some(p) if p > config.max_hourly_price => Verdict::drop(format!(
                        "{} costs at least ${p:.4}/h, above the cap of ${:.4}/h",
                        it.name(),
                        config.max_hourly_price
                    )),
                    Some(_) => Verdict::Keep,
                }
            })
            .collect())
    }
}

nodewright_filter::export_instance_filter!(PriceCap);
