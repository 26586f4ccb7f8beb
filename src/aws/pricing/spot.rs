//! Spot prices from EC2's `DescribeSpotPriceHistory`: the latest Linux price
//! per (instance type, zone). Asked with a start time of now, EC2 returns the
//! price in effect for every (type, zone, product description); where several
//! records cover the same (type, zone) the newest one wins.

use std::collections::HashMap;

use aws_sdk_ec2::error::DisplayErrorContext;
use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::{RiProductDescription, SpotPrice};

use super::PricingError;

/// Records per page (the API's documented maximum).
const PAGE_SIZE: i32 = 1000;

/// Linux product descriptions: accounts that once had EC2-Classic see VPC
/// prices as `Linux/UNIX (Amazon VPC)`, all others as `Linux/UNIX`.
pub const PRODUCT_DESCRIPTIONS: [&str; 2] = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"];

/// Spot prices by instance type, then zone.
pub type SpotPrices = HashMap<String, HashMap<String, f64>>;

/// Folds spot price records into the newest price per (type, zone). Records
/// without a type, zone, timestamp or a positive price are skipped; of two
/// records with the same timestamp the first is kept.
#[derive(Debug, Default)]
pub struct LatestSpotPrices {
    latest: HashMap<(String, String), (DateTime, f64)>,
    skipped: usize,
}

impl LatestSpotPrices {
    /// Takes one record into account.
    pub fn add(&mut self, record: &SpotPrice) {
        let parsed = (|| {
            let instance_type = record.instance_type()?.as_str();
            let zone = record.availability_zone()?;
            let timestamp = *record.timestamp()?;
            let price: f64 = record.spot_price()?.trim().parse().ok()?;
            (!instance_type.is_empty() && !zone.is_empty() && price.is_finite() && price > 0.0)
                .then(|| {
                    (
                        (instance_type.to_string(), zone.to_string()),
                        timestamp,
                        price,
                    )
                })
        })();
        let Some((key, timestamp, price)) = parsed else {
            self.skipped += 1;
            return;
        };
        match self.latest.get_mut(&key) {
            Some(seen) if seen.0 >= timestamp => {}
            Some(seen) => *seen = (timestamp, price),
            None => {
                self.latest.insert(key, (timestamp, price));
            }
        }
    }

    /// Records that carried no usable price.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The newest price per instance type and zone.
    pub fn into_prices(self) -> SpotPrices {
        let mut out: SpotPrices = HashMap::new();
        for ((instance_type, zone), (_, price)) in self.latest {
            out.entry(instance_type).or_default().insert(zone, price);
        }
        out
    }
}

/// The latest Linux spot price of every instance type in every zone of the
/// client's region, all pages.
pub async fn fetch(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
    now: DateTime,
) -> Result<SpotPrices, PricingError> {
    let mut request = ec2
        .describe_spot_price_history()
        .start_time(now)
        .max_results(PAGE_SIZE);
    for description in PRODUCT_DESCRIPTIONS {
        request = request.product_descriptions(description);
    }
    let mut latest = LatestSpotPrices::default();
    let mut pages = request.into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| PricingError::SpotPriceHistory {
            region: region.to_string(),
            message: DisplayErrorContext(&e).to_string(),
        })?;
        for record in page.spot_price_history() {
            if record.product_description().is_some_and(|d| !is_linux(d)) {
                continue;
            }
            latest.add(record);
        }
    }
    if latest.skipped() > 0 {
        tracing::debug!(%region, skipped = latest.skipped(), "spot price records without a usable price were skipped");
    }
    Ok(latest.into_prices())
}

/// Whether a record's product description is one of [`PRODUCT_DESCRIPTIONS`].
fn is_linux(description: &RiProductDescription) -> bool {
    PRODUCT_DESCRIPTIONS.contains(&description.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::InstanceType;

    fn record(instance_type: &str, zone: &str, price: &str, at: i64) -> SpotPrice {
        SpotPrice::builder()
            .instance_type(InstanceType::from(instance_type))
            .availability_zone(zone)
            .spot_price(price)
            .timestamp(DateTime::from_secs(at))
            .product_description(RiProductDescription::LinuxUnix)
            .build()
    }

    #[test]
    fn the_newest_record_per_type_and_zone_wins_in_any_order() {
        let mut latest = LatestSpotPrices::default();
        latest.add(&record("m5.large", "a", "0.030", 200));
        latest.add(&record("m5.large", "a", "0.050", 100));
        latest.add(&record("m5.large", "b", "0.040", 100));
        latest.add(&record("m5.large", "b", "0.045", 300));
        latest.add(&record("c5.large", "a", "0.020", 100));
        let prices = latest.into_prices();
        assert_eq!(prices["m5.large"]["a"], 0.030);
        assert_eq!(prices["m5.large"]["b"], 0.045);
        assert_eq!(prices["c5.large"]["a"], 0.020);
    }

    #[test]
    fn records_without_a_usable_price_are_skipped() {
        let mut latest = LatestSpotPrices::default();
        latest.add(&record("m5.large", "a", "n/a", 100));
        latest.add(&record("m5.large", "a", "0", 100));
        latest.add(&SpotPrice::builder().spot_price("0.1").build());
        assert_eq!(latest.skipped(), 3);
        assert!(latest.into_prices().is_empty());
    }
}
