//! The EC2 catalog: instance types, their zonal offerings and prices for one
//! region. The embedded one (`data/`, provenance in `data/README.md`) lets
//! `catalog` and `simulate` work without AWS credentials; [`live`] reads the
//! same [`Catalog`] from the EC2 and Pricing APIs and [`refresh`] keeps it
//! current, so one resolver serves both.

pub mod convert;
pub mod describe;
pub mod live;
mod prices;
pub mod refresh;
pub mod retired;

use std::collections::{BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;

use flate2::read::GzDecoder;
use serde::Deserialize;

pub use describe::{InstanceTypeInfo, InstanceTypeOffering, PlacementGroupInfo};
pub use prices::{PriceBook, PriceSource};

const INSTANCE_TYPES_GZ: &[u8] = include_bytes!("data/instance-types.json.gz");
const OFFERINGS_US_EAST_1_GZ: &[u8] = include_bytes!("data/offerings-us-east-1.json.gz");
const OFFERINGS_US_WEST_2_GZ: &[u8] = include_bytes!("data/offerings-us-west-2.json.gz");
const PRICES_US_EAST_1_GZ: &[u8] = include_bytes!("data/on-demand-prices-us-east-1.json.gz");
/// Current types the moto-derived file lacks, with their offerings; provenance
/// per family in `data/README.md`.
const EXTRA_INSTANCE_TYPES_JSON: &str = include_str!("data/extra-instance-types.json");

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
    /// An instance type is defined twice in the embedded files (a build defect).
    #[error(
        "embedded catalog file {file} redefines instance type {instance_type}; remove it from one of the files"
    )]
    DuplicateType {
        /// The file whose entry repeats an existing one.
        file: &'static str,
        /// The repeated instance type.
        instance_type: String,
    },
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

/// `data/extra-instance-types.json`: `DescribeInstanceTypes` entries and, per
/// region, `DescribeInstanceTypeOfferings` entries.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ExtraFile {
    instance_types: Vec<InstanceTypeInfo>,
    instance_type_offerings: HashMap<String, Vec<InstanceTypeOffering>>,
}

fn decode<T: for<'de> Deserialize<'de>>(file: &'static str, gz: &[u8]) -> Result<T, CatalogError> {
    let mut text = String::new();
    GzDecoder::new(gz)
        .read_to_string(&mut text)
        .map_err(|source| CatalogError::Decode { file, source })?;
    parse(file, &text)
}

fn parse<T: for<'de> Deserialize<'de>>(file: &'static str, text: &str) -> Result<T, CatalogError> {
    serde_json::from_str(text).map_err(|e| CatalogError::Decode {
        file,
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// Adds the extra file's types to moto's. The extra file may only add types: a
/// name moto already has is an error, never a silent override.
fn merge_extra_types(
    types: &mut HashMap<String, InstanceTypeInfo>,
    extra: Vec<InstanceTypeInfo>,
) -> Result<(), CatalogError> {
    for info in extra {
        if types.contains_key(&info.instance_type) {
            return Err(CatalogError::DuplicateType {
                file: "extra-instance-types.json",
                instance_type: info.instance_type,
            });
        }
        types.insert(info.instance_type.clone(), info);
    }
    Ok(())
}

/// The embedded on-demand price snapshot as `region`'s price book: its own
/// for us-east-1; for any other region the us-east-1 snapshot stands in,
/// marked as estimates (Karpenter's static fallback does the same).
pub fn embedded_prices(region: &str) -> Result<PriceBook, CatalogError> {
    let mut price_file: PriceFile = decode("on-demand-prices.json.gz", PRICES_US_EAST_1_GZ)?;
    let on_demand = price_file.regions.remove(PRICED_REGION).unwrap_or_default();
    let source = if region == PRICED_REGION {
        PriceSource::Snapshot {
            generated_at: price_file.generated_at,
        }
    } else {
        PriceSource::Borrowed {
            from_region: PRICED_REGION.to_string(),
            generated_at: price_file.generated_at,
        }
    };
    Ok(PriceBook::new(on_demand, source))
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
    /// Instance types and offerings are moto's, plus the current types moto
    /// lacks from `data/extra-instance-types.json`. `us-east-1` carries its own
    /// price snapshot; `us-west-2` borrows us-east-1 prices, marked as estimates.
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
        let mut types: HashMap<String, InstanceTypeInfo> =
            decode("instance-types.json.gz", INSTANCE_TYPES_GZ)?;
        let mut extra: ExtraFile = parse("extra-instance-types.json", EXTRA_INSTANCE_TYPES_JSON)?;
        merge_extra_types(&mut types, extra.instance_types)?;
        let mut offerings: Vec<InstanceTypeOffering> = decode("offerings.json.gz", offerings_gz)?;
        offerings.extend(
            extra
                .instance_type_offerings
                .remove(region)
                .unwrap_or_default(),
        );
        let prices = embedded_prices(region)?;
        let generated_at = match prices.source() {
            PriceSource::Snapshot { generated_at } | PriceSource::Borrowed { generated_at, .. } => {
                generated_at.clone()
            }
        };
        let version = format!("embedded/{region}/{generated_at}");
        Ok(Self::new(
            region,
            types.into_values().collect(),
            offerings,
            prices,
            version,
        ))
    }

    /// Builds a catalog whose version is derived from its content:
    /// `<label>/<region>/<digest>`, where the digest covers every instance
    /// type, offering and price (not when prices were fetched). Two refreshes
    /// that return the same data yield the same version, so caches keyed on
    /// it survive; any change yields a new one.
    pub fn versioned(
        label: &str,
        region: impl Into<String>,
        instance_types: Vec<InstanceTypeInfo>,
        offerings: Vec<InstanceTypeOffering>,
        prices: PriceBook,
    ) -> Self {
        let mut catalog = Self::new(region, instance_types, offerings, prices, String::new());
        catalog.version = catalog.content_version(label);
        catalog
    }

    /// The same instance types and offerings with other prices, versioned
    /// by content under `label` (a price refresh without a new describe).
    pub fn with_prices(&self, label: &str, prices: PriceBook) -> Self {
        let mut catalog = Self {
            region: self.region.clone(),
            instance_types: self.instance_types.clone(),
            zones_by_type: self.zones_by_type.clone(),
            prices,
            version: String::new(),
        };
        catalog.version = catalog.content_version(label);
        catalog
    }

    fn content_version(&self, label: &str) -> String {
        /// Feeds written bytes into a hasher, so types are hashed through
        /// their serialized form without building it in memory.
        struct HashWriter<'a, H: Hasher>(&'a mut H);
        impl<H: Hasher> std::io::Write for HashWriter<'_, H> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.write(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut hasher = DefaultHasher::new();
        self.region.hash(&mut hasher);
        // Serializing plain structs of strings and numbers cannot fail; if it
        // ever did, the error text still distinguishes the content.
        if let Err(e) = serde_json::to_writer(HashWriter(&mut hasher), &self.instance_types) {
            e.to_string().hash(&mut hasher);
        }
        let zones: std::collections::BTreeMap<&String, &BTreeSet<String>> =
            self.zones_by_type.iter().collect();
        zones.hash(&mut hasher);
        self.prices.hash_content(&mut hasher);
        format!("{label}/{}/{:016x}", self.region, hasher.finish())
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
        assert_eq!(catalog.instance_types().len(), 1400);
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

    fn extra_file() -> ExtraFile {
        parse("extra-instance-types.json", EXTRA_INSTANCE_TYPES_JSON).unwrap()
    }

    #[test]
    fn extra_types_are_priced_and_offered_in_every_embedded_region() {
        let extra = extra_file();
        assert!(!extra.instance_types.is_empty());
        for region in EMBEDDED_REGIONS {
            let catalog = Catalog::embedded(region).unwrap();
            for info in &extra.instance_types {
                let name = info.instance_type.as_str();
                assert!(
                    catalog
                        .instance_types()
                        .iter()
                        .any(|i| i.instance_type == name),
                    "{name} missing in {region}"
                );
                assert!(
                    catalog.zones_of(name).next().is_some(),
                    "{name} in {region}"
                );
                assert!(catalog.prices().on_demand(name).is_some(), "{name}");
            }
        }
    }

    #[test]
    fn extra_offerings_name_only_extra_types_and_embedded_regions() {
        let extra = extra_file();
        let names: BTreeSet<&str> = extra
            .instance_types
            .iter()
            .map(|i| i.instance_type.as_str())
            .collect();
        for (region, offerings) in &extra.instance_type_offerings {
            assert!(EMBEDDED_REGIONS.contains(&region.as_str()), "{region}");
            for offering in offerings {
                assert!(
                    names.contains(offering.instance_type.as_str()),
                    "{} is not defined in the extra file",
                    offering.instance_type
                );
                assert!(offering.location.starts_with(region.as_str()));
            }
        }
    }

    /// No zone list for g4ad is public: data/README.md states that g4ad is
    /// offered wherever g4dn (the other G4 family) of the same size is.
    #[test]
    fn g4ad_zones_follow_the_documented_g4dn_assumption() {
        for region in EMBEDDED_REGIONS {
            let catalog = Catalog::embedded(region).unwrap();
            for size in ["xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"] {
                let g4ad: Vec<&str> = catalog.zones_of(&format!("g4ad.{size}")).collect();
                let g4dn: Vec<&str> = catalog.zones_of(&format!("g4dn.{size}")).collect();
                assert!(!g4ad.is_empty(), "g4ad.{size} in {region}");
                assert_eq!(g4ad, g4dn, "g4ad.{size} in {region}");
            }
        }
    }

    #[test]
    fn an_extra_type_may_not_redefine_a_moto_type() {
        let mut types = HashMap::from([(
            "m5.large".to_string(),
            InstanceTypeInfo {
                instance_type: "m5.large".to_string(),
                ..InstanceTypeInfo::default()
            },
        )]);
        let repeat = InstanceTypeInfo {
            instance_type: "m5.large".to_string(),
            ..InstanceTypeInfo::default()
        };
        let err = merge_extra_types(&mut types, vec![repeat])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("extra-instance-types.json") && err.contains("m5.large"),
            "{err}"
        );
        let new = InstanceTypeInfo {
            instance_type: "g4ad.xlarge".to_string(),
            ..InstanceTypeInfo::default()
        };
        merge_extra_types(&mut types, vec![new]).unwrap();
        assert!(types.contains_key("g4ad.xlarge"));
    }

    #[test]
    fn unknown_region_is_an_error_naming_the_embedded_ones() {
        let err = Catalog::embedded("mars-1").unwrap_err().to_string();
        assert!(err.contains("mars-1") && err.contains("us-east-1"), "{err}");
    }
}
