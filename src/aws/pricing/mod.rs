//! Prices for the live catalog: on-demand from the AWS Pricing API, spot per
//! zone from EC2's spot price history, over the embedded snapshot.
//!
//! The provider holds one [`PriceBook`], starting as the embedded snapshot for
//! its region. Each update merges what AWS returned into it (Karpenter v1.4's
//! rule): a refresh that fails changes nothing, and one that returns part of
//! the data updates only those prices — prices of other types, other zones
//! and the other capacity type are never erased or overwritten.

pub mod on_demand;
pub mod spot;

use std::sync::RwLock;
use std::time::SystemTime;

use aws_sdk_ec2::primitives::{DateTime, DateTimeFormat};

use crate::aws::catalog::{CatalogError, PriceBook, embedded_prices};

/// Why a price refresh changed nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PricingError {
    /// A `GetProducts` call failed; the on-demand prices are kept as they were.
    #[error("Pricing API GetProducts ({query}) for {region}: {message}")]
    GetProducts {
        /// The region whose prices were asked for.
        region: String,
        /// Which of the queries failed.
        query: &'static str,
        /// The SDK's error, with its causes.
        message: String,
    },
    /// The Pricing API answered without a single price.
    #[error(
        "Pricing API GetProducts returned no on-demand prices for {region}; check that the region is right"
    )]
    NoOnDemandPrices {
        /// The region whose prices were asked for.
        region: String,
    },
    /// The Pricing API does not serve the region's partition.
    #[error(
        "the Pricing API does not serve {region}; on-demand prices stay at the embedded snapshot"
    )]
    NotServed {
        /// The region.
        region: String,
    },
    /// A `DescribeSpotPriceHistory` call failed; spot prices are kept.
    #[error("EC2 DescribeSpotPriceHistory in {region}: {message}")]
    SpotPriceHistory {
        /// The region.
        region: String,
        /// The SDK's error, with its causes.
        message: String,
    },
    /// The spot price history answered without a single usable price.
    #[error("EC2 DescribeSpotPriceHistory returned no spot prices in {region}")]
    NoSpotPrices {
        /// The region.
        region: String,
    },
}

/// Keeps a region's prices current.
pub struct PricingProvider {
    region: String,
    pricing: aws_sdk_pricing::Client,
    ec2: aws_sdk_ec2::Client,
    prices: RwLock<PriceBook>,
}

/// Now, as RFC 3339.
fn now_rfc3339() -> String {
    DateTime::from(SystemTime::now())
        .fmt(DateTimeFormat::DateTime)
        .unwrap_or_default()
}

impl PricingProvider {
    /// A provider for `region` starting from the embedded snapshot (the
    /// region's own, or us-east-1's marked as estimates). `pricing` must be a
    /// client for the Pricing API's region (see `clients::pricing_region`).
    pub fn new(
        region: impl Into<String>,
        pricing: aws_sdk_pricing::Client,
        ec2: aws_sdk_ec2::Client,
    ) -> Result<Self, CatalogError> {
        let region = region.into();
        let prices = embedded_prices(&region)?;
        Ok(Self::with_prices(region, pricing, ec2, prices))
    }

    /// A provider starting from `prices`.
    pub fn with_prices(
        region: impl Into<String>,
        pricing: aws_sdk_pricing::Client,
        ec2: aws_sdk_ec2::Client,
        prices: PriceBook,
    ) -> Self {
        PricingProvider {
            region: region.into(),
            pricing,
            ec2,
            prices: RwLock::new(prices),
        }
    }

    /// The region priced.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The current prices.
    pub fn prices(&self) -> PriceBook {
        match self.prices.read() {
            Ok(book) => book.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn update(&self, change: impl FnOnce(&mut PriceBook)) {
        match self.prices.write() {
            Ok(mut book) => change(&mut book),
            Err(poisoned) => change(&mut poisoned.into_inner()),
        }
    }

    /// Fetches on-demand prices from the Pricing API and merges them in;
    /// returns how many instance types were priced. Both queries (shared and
    /// bare metal) must succeed, or nothing is merged. GovCloud is not served
    /// by the Pricing API and keeps the snapshot.
    pub async fn update_on_demand(&self) -> Result<usize, PricingError> {
        if self.region.starts_with("us-gov-") {
            return Err(PricingError::NotServed {
                region: self.region.clone(),
            });
        }
        let [shared, metal] = on_demand::QUERIES;
        let (shared, metal) = futures::join!(
            on_demand::fetch(&self.pricing, &self.region, &shared),
            on_demand::fetch(&self.pricing, &self.region, &metal),
        );
        let mut prices = shared?;
        prices.extend(metal?);
        if prices.is_empty() {
            return Err(PricingError::NoOnDemandPrices {
                region: self.region.clone(),
            });
        }
        let count = prices.len();
        self.update(|book| book.merge_on_demand(prices, now_rfc3339()));
        Ok(count)
    }

    /// Fetches the latest spot prices and merges them in; returns how many
    /// (instance type, zone) prices were fetched.
    pub async fn update_spot(&self) -> Result<usize, PricingError> {
        let prices =
            spot::fetch(&self.ec2, &self.region, DateTime::from(SystemTime::now())).await?;
        let count: usize = prices.values().map(|zones| zones.len()).sum();
        if count == 0 {
            return Err(PricingError::NoSpotPrices {
                region: self.region.clone(),
            });
        }
        self.update(|book| book.merge_spot(prices, now_rfc3339()));
        Ok(count)
    }
}
