//! The embedded EC2 catalog: instance types, their zonal offerings and on-demand
//! prices, so `catalog` and `simulate` work without AWS credentials.
//!
//! The data files under `data/` and their provenance are described in
//! `data/README.md`. The live AWS provider produces the same [`Catalog`] from the
//! EC2 API, so one resolver serves both.

pub mod describe;

use std::collections::{BTreeSet, HashMap};
use std::io::Read;

use flate2::read::GzDecoder;
use serde::Deserialize;

pub use describe::{InstanceTypeInfo, InstanceTypeOffering};

const INSTANCE_TYPES_GZ: &[u8] = include_bytes!("data/instance-types.json.gz");
const OFFERINGS_US_EAST_1_GZ: &[u8] = include_bytes!("data/offerings-us-east-1.json.gz");
const OFFERINGS_US_WEST_2_GZ: &[u8] = include_bytes!("data/offerings-us-west-2.json.gz");
const PRICES_US_EAST_1_GZ: &[u8] = include_bytes!("data/on-demand-prices-us-east-1.json.gz");

/// The region whose on-demand price snapshot is embedded.
pub const PRICED_REGION: &str = "us-east-1";

/// Regions with embedded offerings; their order is the order named in errors.
pub const EMBEDDED_REGIONS: [&str; 2] = ["us-east-1", "us-west-2"];

/// Why the embedded catalog could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The region has no embedded offerings.
    #[error(
        "unknown region {region:?}: the embedded catalog covers {known}; other regions need the live EC2 API"
    )]
    UnknownRegion {
        /// The region asked for.
        region: String,
        /// The regions that are embedded, comma-separated.
        known: String,
    },
    /// An embedded file failed to decompress or parse (a build defect, not user input).
    #[error("embedded catalog file {file} is unreadable")]
    Decode {
        /// Which embedded file.
        file: &'static str,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}

/// Where an offering's price comes from, so estimates are never shown as fact.
#[derive(Debug, Clone, PartialEq)]
pub enum PriceSource {
    /// The region's own on-demand price snapshot.
    Snapshot {
        /// When the snapshot was taken (RFC 3339).
        generated_at: String,
    },
    /// No price data for this region: another region's snapshot stands in, as
    /// Karpenter's static fallback does; every price is an estimate.
    Borrowed {
        /// The region whose prices are used.
        from_region: String,
        /// When that snapshot was taken (RFC 3339).
        generated_at: String,
    },
}

/// On-demand prices for one region, with their provenance.
#[derive(Debug, Clone)]
pub struct PriceBook {
    on_demand: HashMap<String, f64>,
    source: PriceSource,
}

impl PriceBook {
    /// Builds a price book from explicit prices (used by tests and the live provider).
    pub fn new(on_demand: HashMap<String, f64>, source: PriceSource) -> Self {
        Self { on_demand, source }
    }

    /// The Linux on-demand USD/hour price of an instance type, if known.
    pub fn on_demand(&self, instance_type: &str) -> Option<f64> {
        self.on_demand.get(instance_type).copied()
    }

    /// Where the prices come from.
    pub fn source(&self) -> &PriceSource {
        &self.source
    }

    /// Whether prices are estimates rather than the region's own figures.
    pub fn is_estimate(&self) -> bool {
        matches!(self.source, PriceSource::Borrowed { .. })
    }
}

/// Instance types, offerings and prices for one region.
#[derive(Debug, Clone)]
pub struct Catalog {
    region: String,
    instance_types: Vec<InstanceTypeInfo>,
    zones_by_type: HashMap<String, BTreeSet<String>>,
    prices: PriceBook,
    version: String,
}

#[derive(Deserialize)]
struct PriceFile {
    generated_at: String,
    regions: HashMap<String, HashMap<String, f64>>,
}

fn decode<T: for<'de> Deserialize<'de>>(file: &'static str, gz: &[u8]) -> Result<T, CatalogError> {
    let mut text = String::new();
    GzDecoder::new(gz)
        .read_to_string(&mut text)
        .map_err(|source| CatalogError::Decode { file, source })?;
    serde_json::from_str(&text).map_err(|e| CatalogError::Decode {
        file,
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

impl Catalog {
    /// Builds a catalog from API-shaped data; the live provider and tests use this.
    pub fn new(
        region: impl Into<String>,
        instance_types: Vec<InstanceTypeInfo>,
        offerings: Vec<InstanceTypeOffering>,
        prices: PriceBook,
        version: impl Into<String>,
    ) -> Self {
        let mut zones_by_type: HashMap<String, BTreeSet<String>> = HashMap::new();
        for offering in offerings {
            zones_by_type
                .entry(offering.instance_type)
                .or_default()
                .insert(offering.location);
        }
        let mut instance_types = instance_types;
        instance_types.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
        Self {
            region: region.into(),
            instance_types,
            zones_by_type,
            prices,
            version: version.into(),
        }
    }

    /// The catalog compiled into the binary for `region`.
    ///
    /// `us-east-1` carries its own price snapshot; `us-west-2` has real offerings
    /// but borrows us-east-1 prices, marked as estimates.
    pub fn embedded(region: &str) -> Result<Self, CatalogError> {
        let offerings_gz = match region {
            "us-east-1" => OFFERINGS_US_EAST_1_GZ,
            "us-west-2" => OFFERINGS_US_WEST_2_GZ,
            _ => {
                return Err(CatalogError::UnknownRegion {
                    region: region.to_string(),
                    known: EMBEDDED_REGIONS.join(", "),
                });
            }
        };
        let types: HashMap<String, InstanceTypeInfo> =
            decode("instance-types.json.gz", INSTANCE_TYPES_GZ)?;
        let offerings: Vec<InstanceTypeOffering> = decode("offerings.json.gz", offerings_gz)?;
        let mut price_file: PriceFile = decode("on-demand-prices.json.gz", PRICES_US_EAST_1_GZ)?;
        let on_demand = price_file.regions.remove(PRICED_REGION).unwrap_or_default();
        let source = if region == PRICED_REGION {
            PriceSource::Snapshot {
                generated_at: price_file.generated_at.clone(),
            }
        } else {
            PriceSource::Borrowed {
                from_region: PRICED_REGION.to_string(),
                generated_at: price_file.generated_at.clone(),
            }
        };
        let version = format!("embedded/{region}/{}", price_file.generated_at);
        Ok(Self::new(
            region,
            types.into_values().collect(),
            offerings,
            PriceBook::new(on_demand, source),
            version,
        ))
    }

    /// The region this catalog describes.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Every instance type, sorted by name.
    pub fn instance_types(&self) -> &[InstanceTypeInfo] {
        &self.instance_types
    }

    /// The zones where `instance_type` is offered, sorted.
    pub fn zones_of(&self, instance_type: &str) -> impl Iterator<Item = &str> {
        self.zones_by_type
            .get(instance_type)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Every zone that offers at least one instance type, sorted.
    pub fn zones(&self) -> Vec<&str> {
        let all: BTreeSet<&str> = self
            .zones_by_type
            .values()
            .flatten()
            .map(String::as_str)
            .collect();
        all.into_iter().collect()
    }

    /// On-demand prices and their provenance.
    pub fn prices(&self) -> &PriceBook {
        &self.prices
    }

    /// Identifies this exact data set, for caches keyed by catalog contents.
    pub fn version(&self) -> &str {
        &self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn us_east_1_has_its_own_prices_and_six_zones() {
        let catalog = Catalog::embedded("us-east-1").unwrap();
        assert_eq!(catalog.instance_types().len(), 1395);
        assert_eq!(catalog.zones().len(), 6);
        assert!(!catalog.prices().is_estimate());
        assert_eq!(catalog.prices().on_demand("c7i-flex.large"), Some(0.08479));
        let zones: Vec<&str> = catalog.zones_of("c7i-flex.large").collect();
        assert!(zones.contains(&"us-east-1a"));
    }

    #[test]
    fn us_west_2_prices_are_estimates() {
        let catalog = Catalog::embedded("us-west-2").unwrap();
        assert!(catalog.prices().is_estimate());
        assert_eq!(
            catalog.zones(),
            ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
        );
    }

    #[test]
    fn unknown_region_is_an_error_naming_the_embedded_ones() {
        let err = Catalog::embedded("mars-1").unwrap_err().to_string();
        assert!(err.contains("mars-1") && err.contains("us-east-1"), "{err}");
    }
}
