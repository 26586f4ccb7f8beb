//! The live catalog: instance types and zonal offerings from EC2
//! (`DescribeInstanceTypes`, `DescribeInstanceTypeOfferings`, every page),
//! priced by the [`PricingProvider`], as a [`Catalog`] whose version is
//! derived from its content.

use aws_sdk_ec2::error::DisplayErrorContext;
use aws_sdk_ec2::types::{Filter, LocationType};

use super::{Catalog, CatalogError, InstanceTypeInfo, InstanceTypeOffering, convert};
use crate::aws::pricing::{PricingError, PricingProvider};

/// Version label of catalogs built from the EC2 API.
pub const LIVE_LABEL: &str = "live";

/// Instance types per `DescribeInstanceTypes` page (the API's maximum).
const TYPES_PAGE_SIZE: i32 = 100;
/// Offerings per `DescribeInstanceTypeOfferings` page (the API's maximum).
const OFFERINGS_PAGE_SIZE: i32 = 1000;

/// Why the live instance types could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LiveCatalogError {
    /// A `DescribeInstanceTypes` call failed.
    #[error("EC2 DescribeInstanceTypes in {region}: {message}")]
    DescribeInstanceTypes {
        /// The region.
        region: String,
        /// The SDK's error, with its causes.
        message: String,
    },
    /// A `DescribeInstanceTypeOfferings` call failed.
    #[error("EC2 DescribeInstanceTypeOfferings in {region}: {message}")]
    DescribeOfferings {
        /// The region.
        region: String,
        /// The SDK's error, with its causes.
        message: String,
    },
    /// EC2 answered, but with nothing to launch: treated as a failure so an
    /// empty answer never replaces a good catalog.
    #[error(
        "EC2 returned {instance_types} instance types and {offerings} zonal offerings in {region}; a catalog needs both"
    )]
    Empty {
        /// The region.
        region: String,
        /// Instance types returned.
        instance_types: usize,
        /// Offerings returned.
        offerings: usize,
    },
    /// The embedded catalog that stands in could not be read.
    #[error(transparent)]
    Embedded(#[from] CatalogError),
}

/// Every HVM x86_64/arm64 instance type EC2 describes in the client's region
/// (the types Karpenter lists; the resolver skips the others anyway).
pub async fn describe_instance_types(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
) -> Result<Vec<InstanceTypeInfo>, LiveCatalogError> {
    let mut pages = ec2
        .describe_instance_types()
        .filters(
            Filter::builder()
                .name("supported-virtualization-type")
                .values("hvm")
                .build(),
        )
        .filters(
            Filter::builder()
                .name("processor-info.supported-architecture")
                .values("x86_64")
                .values("arm64")
                .build(),
        )
        .max_results(TYPES_PAGE_SIZE)
        .into_paginator()
        .send();
    let mut out = Vec::new();
    let mut nameless = 0usize;
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| LiveCatalogError::DescribeInstanceTypes {
            region: region.to_string(),
            message: DisplayErrorContext(&e).to_string(),
        })?;
        for info in page.instance_types() {
            match convert::instance_type_info(info) {
                Some(info) => out.push(info),
                None => nameless += 1,
            }
        }
    }
    if nameless > 0 {
        tracing::debug!(%region, nameless, "instance types without a name were skipped");
    }
    Ok(out)
}

/// Every (instance type, availability zone) offering in the client's region.
pub async fn describe_offerings(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
) -> Result<Vec<InstanceTypeOffering>, LiveCatalogError> {
    let mut pages = ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .max_results(OFFERINGS_PAGE_SIZE)
        .into_paginator()
        .send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| LiveCatalogError::DescribeOfferings {
            region: region.to_string(),
            message: DisplayErrorContext(&e).to_string(),
        })?;
        out.extend(
            page.instance_type_offerings()
                .iter()
                .filter_map(convert::offering),
        );
    }
    Ok(out)
}

/// Instance types and offerings, fetched concurrently; an error if either
/// call fails or either answer is empty.
pub async fn describe(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
) -> Result<(Vec<InstanceTypeInfo>, Vec<InstanceTypeOffering>), LiveCatalogError> {
    let (types, offerings) = futures::try_join!(
        describe_instance_types(ec2, region),
        describe_offerings(ec2, region)
    )?;
    if types.is_empty() || offerings.is_empty() {
        return Err(LiveCatalogError::Empty {
            region: region.to_string(),
            instance_types: types.len(),
            offerings: offerings.len(),
        });
    }
    Ok((types, offerings))
}

/// A live catalog and what went wrong with its prices.
#[derive(Debug)]
pub struct LiveCatalog {
    /// The catalog, versioned by content under [`LIVE_LABEL`].
    pub catalog: Catalog,
    /// Price refreshes that failed; those prices are the embedded snapshot's
    /// (on-demand) or the on-demand stand-in (spot).
    pub price_errors: Vec<PricingError>,
}

/// Fetches instance types, offerings and prices once (what `simulate --aws`
/// uses). Instance types and offerings must be read; prices that cannot be
/// fetched fall back to what `pricing` already holds.
pub async fn fetch_catalog(
    ec2: &aws_sdk_ec2::Client,
    pricing: &PricingProvider,
) -> Result<LiveCatalog, LiveCatalogError> {
    let region = pricing.region().to_string();
    let (described, on_demand, spot) = futures::join!(
        describe(ec2, &region),
        pricing.update_on_demand(),
        pricing.update_spot()
    );
    let (types, offerings) = described?;
    let price_errors = [on_demand.err(), spot.err()]
        .into_iter()
        .flatten()
        .collect();
    Ok(LiveCatalog {
        catalog: Catalog::versioned(LIVE_LABEL, region, types, offerings, pricing.prices()),
        price_errors,
    })
}
