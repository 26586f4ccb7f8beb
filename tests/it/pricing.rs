//! Prices for the live catalog, with SDK mocks: moto serves no Pricing API
//! and only a placeholder spot price history. On-demand prices from
//! `GetProducts` price-list documents, spot prices from
//! `DescribeSpotPriceHistory`, every page of both, and the rule that a
//! partial or failed refresh never erases or overwrites good prices.

use std::collections::HashMap;

use aws_sdk_ec2::error::ErrorMetadata;
use aws_sdk_ec2::operation::describe_spot_price_history::{
    DescribeSpotPriceHistoryError, DescribeSpotPriceHistoryOutput,
};
use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::{InstanceType, RiProductDescription, SpotPrice};
use aws_sdk_pricing::operation::get_products::{
    GetProductsError, GetProductsInput, GetProductsOutput,
};
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use nodewright::aws::catalog::{PriceBook, PriceSource};
use nodewright::aws::pricing::{PricingError, PricingProvider};

/// A `GetProducts` price-list document as the Pricing API returns it for a
/// Linux on-demand product: product attributes, the on-demand term and a
/// reserved term (which must not be read as the on-demand price).
pub fn price_document(instance_type: &str, usd: f64) -> String {
    let sku = format!("SKU{}", instance_type.replace('.', "").to_uppercase());
    serde_json::json!({
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "enhancedNetworkingSupported": "Yes",
                "intelTurboAvailable": "Yes",
                "memory": "8 GiB",
                "dedicatedEbsThroughput": "Up to 4750 Mbps",
                "vcpu": "2",
                "capacitystatus": "Used",
                "locationType": "AWS Region",
                "storage": "EBS only",
                "instanceFamily": "General purpose",
                "operatingSystem": "Linux",
                "regionCode": "us-east-1",
                "physicalProcessor": "Intel Xeon Platinum 8175",
                "networkPerformance": "Up to 10 Gigabit",
                "servicename": "Amazon Elastic Compute Cloud",
                "instanceType": instance_type,
                "tenancy": "Shared",
                "usagetype": format!("BoxUsage:{instance_type}"),
                "normalizationSizeFactor": "4",
                "preInstalledSw": "NA",
                "processorArchitecture": "64-bit",
                "servicecode": "AmazonEC2",
                "licenseModel": "No License required",
                "currentGeneration": "Yes",
                "location": "US East (N. Virginia)",
                "operation": "RunInstances",
                "marketoption": "OnDemand",
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                format!("{sku}.JRTCKXETXF"): {
                    "priceDimensions": {
                        format!("{sku}.JRTCKXETXF.6YS6EN2CT7"): {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": format!("${usd} per On Demand Linux {instance_type} Instance Hour"),
                            "appliesTo": [],
                            "rateCode": format!("{sku}.JRTCKXETXF.6YS6EN2CT7"),
                            "beginRange": "0",
                            "pricePerUnit": {"USD": format!("{usd:.10}")},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2026-11-01T00:00:00Z",
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            },
            "Reserved": {
                format!("{sku}.4NA7Y494T4"): {
                    "priceDimensions": {
                        format!("{sku}.4NA7Y494T4.6YS6EN2CT7"): {
                            "unit": "Hrs",
                            "pricePerUnit": {"USD": format!("{:.10}", usd * 0.6)},
                        }
                    },
                    "termAttributes": {"LeaseContractLength": "1yr", "PurchaseOption": "No Upfront"},
                }
            },
        },
        "version": "20261101000000",
        "publicationDate": "2026-11-01T00:00:00Z",
    })
    .to_string()
}

/// The filter `field` of a `GetProducts` request, if present.
fn filter<'a>(input: &'a GetProductsInput, field: &str) -> Option<&'a str> {
    input
        .filters()
        .iter()
        .find(|f| f.field() == field)
        .map(|f| f.value())
}

/// Whether the request carries Karpenter's common filters for us-east-1.
fn karpenters_filters(input: &GetProductsInput) -> bool {
    input.service_code() == Some("AmazonEC2")
        && filter(input, "regionCode") == Some("us-east-1")
        && filter(input, "operatingSystem") == Some("Linux")
        && filter(input, "preInstalledSw") == Some("NA")
        && filter(input, "capacitystatus") == Some("Used")
        && filter(input, "marketoption") == Some("OnDemand")
}

fn is_shared(input: &GetProductsInput) -> bool {
    karpenters_filters(input)
        && filter(input, "tenancy") == Some("Shared")
        && filter(input, "productFamily") == Some("Compute Instance")
}

fn is_metal(input: &GetProductsInput) -> bool {
    karpenters_filters(input)
        && filter(input, "tenancy") == Some("Dedicated")
        && filter(input, "productFamily") == Some("Compute Instance (bare metal)")
}

fn products(prices: &[(&str, f64)], next_token: Option<&str>) -> GetProductsOutput {
    GetProductsOutput::builder()
        .format_version("aws_v1")
        .set_price_list(Some(
            prices.iter().map(|(t, p)| price_document(t, *p)).collect(),
        ))
        .set_next_token(next_token.map(str::to_string))
        .build()
}

/// A metal query answering m5.metal at 4.608 every time.
fn metal_rule() -> Rule {
    mock!(aws_sdk_pricing::Client::get_products)
        .match_requests(is_metal)
        .sequence()
        .output(|| products(&[("m5.metal", 4.608)], None))
        .repeatedly()
        .build()
}

fn spot_record(instance_type: &str, zone: &str, price: &str, at: i64) -> SpotPrice {
    SpotPrice::builder()
        .instance_type(InstanceType::from(instance_type))
        .availability_zone(zone)
        .spot_price(price)
        .timestamp(DateTime::from_secs(at))
        .product_description(RiProductDescription::LinuxUnix)
        .build()
}

fn history(records: Vec<SpotPrice>, next_token: Option<&str>) -> DescribeSpotPriceHistoryOutput {
    DescribeSpotPriceHistoryOutput::builder()
        .set_spot_price_history(Some(records))
        .set_next_token(next_token.map(str::to_string))
        .build()
}

fn pricing_client(rules: &[&Rule]) -> aws_sdk_pricing::Client {
    mock_client!(aws_sdk_pricing, RuleMode::MatchAny, rules)
}

fn ec2_client(rules: &[&Rule]) -> aws_sdk_ec2::Client {
    mock_client!(aws_sdk_ec2, RuleMode::MatchAny, rules)
}

/// A provider for us-east-1 starting from a one-price snapshot.
fn provider(pricing: aws_sdk_pricing::Client, ec2: aws_sdk_ec2::Client) -> PricingProvider {
    let snapshot = PriceBook::new(
        HashMap::from([("t3.micro".to_string(), 0.0104)]),
        PriceSource::Snapshot {
            generated_at: "2026-07-20T00:00:00Z".into(),
        },
    );
    PricingProvider::with_prices("us-east-1", pricing, ec2, snapshot)
}

#[tokio::test]
async fn get_products_prices_every_type_from_its_price_list_document() {
    let shared = mock!(aws_sdk_pricing::Client::get_products)
        .match_requests(is_shared)
        .then_output(|| products(&[("m5.large", 0.096), ("c7i-flex.large", 0.08479)], None));
    let metal = metal_rule();
    let provider = provider(pricing_client(&[&shared, &metal]), ec2_client(&[]));

    assert_eq!(provider.update_on_demand().await.unwrap(), 3);
    let prices = provider.prices();
    assert_eq!(prices.on_demand("m5.large"), Some(0.096));
    assert_eq!(prices.on_demand("c7i-flex.large"), Some(0.08479));
    assert_eq!(prices.on_demand("m5.metal"), Some(4.608));
    assert_eq!(
        prices.on_demand("t3.micro"),
        Some(0.0104),
        "the snapshot stays"
    );
    assert!(!prices.on_demand_is_estimate("m5.large"));
    assert!(prices.on_demand_fetched_at().is_some());
    assert_eq!(shared.num_calls(), 1);
    assert_eq!(metal.num_calls(), 1);
}

#[tokio::test]
async fn get_products_reads_every_page() {
    let pages = mock!(aws_sdk_pricing::Client::get_products)
        .match_requests(is_shared)
        .then_compute_output(|input| match input.next_token() {
            None => products(&[("c94.large", 1.1), ("c95.large", 1.2)], Some("page-2")),
            Some("page-2") => products(&[("c96.large", 1.3), ("c97.large", 1.4)], Some("page-3")),
            _ => products(&[("c98.large", 1.5), ("c99.large", 1.6)], None),
        });
    let metal = metal_rule();
    let provider = provider(pricing_client(&[&pages, &metal]), ec2_client(&[]));

    assert_eq!(provider.update_on_demand().await.unwrap(), 7);
    assert_eq!(pages.num_calls(), 3);
    let prices = provider.prices();
    for (name, price) in [
        ("c94.large", 1.1),
        ("c95.large", 1.2),
        ("c96.large", 1.3),
        ("c97.large", 1.4),
        ("c98.large", 1.5),
        ("c99.large", 1.6),
    ] {
        assert_eq!(prices.on_demand(name), Some(price), "{name}");
    }
}

#[tokio::test]
async fn spot_price_history_keeps_the_latest_linux_price_per_zone_and_type() {
    let rule = mock!(aws_sdk_ec2::Client::describe_spot_price_history)
        .match_requests(|input| {
            input.start_time().is_some()
                && input
                    .product_descriptions()
                    .contains(&"Linux/UNIX".to_string())
                && input
                    .product_descriptions()
                    .contains(&"Linux/UNIX (Amazon VPC)".to_string())
        })
        .then_output(|| {
            let mut vpc = spot_record("m5.large", "us-east-1a", "0.0351", 2_000);
            vpc.product_description = Some(RiProductDescription::LinuxUnixAmazonVpc);
            let mut windows = spot_record("m5.large", "us-east-1a", "0.1900", 3_000);
            windows.product_description = Some(RiProductDescription::Windows);
            history(
                vec![
                    spot_record("m5.large", "us-east-1a", "0.0400", 1_000),
                    vpc,
                    windows,
                    spot_record("m5.large", "us-east-1b", "0.0500", 1_000),
                    spot_record("m5.large", "us-east-1b", "0.0450", 500),
                    spot_record("c5.large", "us-east-1a", "0.0300", 1_000),
                ],
                None,
            )
        });
    let provider = provider(pricing_client(&[]), ec2_client(&[&rule]));

    assert_eq!(provider.update_spot().await.unwrap(), 3);
    let prices = provider.prices();
    assert_eq!(prices.spot("m5.large", "us-east-1a"), Some(0.0351));
    assert_eq!(prices.spot("m5.large", "us-east-1b"), Some(0.05));
    assert_eq!(prices.spot("c5.large", "us-east-1a"), Some(0.03));
    assert_eq!(prices.spot("c5.large", "us-east-1b"), None);
    assert!(prices.spot_fetched_at().is_some());
}

#[tokio::test]
async fn spot_price_history_reads_every_page() {
    let rule =
        mock!(aws_sdk_ec2::Client::describe_spot_price_history).then_compute_output(|input| {
            match input.next_token() {
                None => history(
                    vec![
                        spot_record("c99.large", "test-zone-1a", "1.20", 1_000),
                        spot_record("c98.large", "test-zone-1b", "1.30", 1_000),
                    ],
                    Some("page-2"),
                ),
                Some("page-2") => history(
                    vec![
                        spot_record("c99.large", "test-zone-1b", "1.30", 1_000),
                        spot_record("c98.large", "test-zone-1c", "1.40", 1_000),
                    ],
                    Some("page-3"),
                ),
                _ => history(
                    vec![
                        spot_record("c99.large", "test-zone-1c", "1.40", 1_000),
                        spot_record("c98.large", "test-zone-1a", "1.20", 1_000),
                    ],
                    None,
                ),
            }
        });
    let provider = provider(pricing_client(&[]), ec2_client(&[&rule]));

    assert_eq!(provider.update_spot().await.unwrap(), 6);
    assert_eq!(rule.num_calls(), 3);
    let prices = provider.prices();
    for name in ["c98.large", "c99.large"] {
        for (zone, price) in [
            ("test-zone-1a", 1.2),
            ("test-zone-1b", 1.3),
            ("test-zone-1c", 1.4),
        ] {
            assert_eq!(prices.spot(name, zone), Some(price), "{name} {zone}");
        }
    }
}

#[tokio::test]
async fn a_partial_pricing_response_keeps_the_other_prices() {
    let shared = mock!(aws_sdk_pricing::Client::get_products)
        .match_requests(is_shared)
        .sequence()
        .output(|| products(&[("c98.large", 1.10), ("c99.large", 1.20)], None))
        .output(|| products(&[("c98.large", 1.15)], None))
        .build();
    let metal = metal_rule();
    let spot = mock!(aws_sdk_ec2::Client::describe_spot_price_history)
        .sequence()
        .output(|| {
            history(
                vec![
                    spot_record("c98.large", "test-zone-1a", "0.40", 1_000),
                    spot_record("c98.large", "test-zone-1b", "0.41", 1_000),
                    spot_record("c99.large", "test-zone-1a", "0.50", 1_000),
                ],
                None,
            )
        })
        .output(|| {
            history(
                vec![spot_record("c98.large", "test-zone-1a", "0.45", 2_000)],
                None,
            )
        })
        .build();
    let provider = provider(pricing_client(&[&shared, &metal]), ec2_client(&[&spot]));

    provider.update_on_demand().await.unwrap();
    provider.update_spot().await.unwrap();
    // The second answers hold one type (on-demand) and one zone (spot).
    assert_eq!(provider.update_on_demand().await.unwrap(), 2);
    assert_eq!(provider.update_spot().await.unwrap(), 1);

    let prices = provider.prices();
    assert_eq!(prices.on_demand("c98.large"), Some(1.15), "updated");
    assert_eq!(prices.on_demand("c99.large"), Some(1.20), "kept");
    assert_eq!(prices.on_demand("m5.metal"), Some(4.608));
    assert_eq!(
        prices.spot("c98.large", "test-zone-1a"),
        Some(0.45),
        "updated"
    );
    assert_eq!(prices.spot("c98.large", "test-zone-1b"), Some(0.41), "kept");
    assert_eq!(prices.spot("c99.large", "test-zone-1a"), Some(0.50), "kept");
    assert_eq!(shared.num_calls(), 2);
    assert_eq!(spot.num_calls(), 2);
}

#[tokio::test]
async fn a_failed_price_refresh_changes_nothing_and_leaves_the_other_capacity_type_alone() {
    let denied = || {
        ErrorMetadata::builder()
            .code("AccessDeniedException")
            .message("not authorized to perform pricing:GetProducts")
            .build()
    };
    let shared = mock!(aws_sdk_pricing::Client::get_products)
        .match_requests(is_shared)
        .sequence()
        .output(|| products(&[("c98.large", 1.10)], None))
        // A later refresh: the shared query answers with new prices, but
        // the bare-metal query fails, so nothing of it may be merged.
        .output(|| products(&[("c98.large", 9.99)], None))
        .error(move || GetProductsError::generic(denied()))
        .build();
    let metal = mock!(aws_sdk_pricing::Client::get_products)
        .match_requests(is_metal)
        .sequence()
        .output(|| products(&[("m5.metal", 4.608)], None))
        .error(move || GetProductsError::generic(denied()))
        .output(|| products(&[("m5.metal", 9.99)], None))
        .build();
    let spot = mock!(aws_sdk_ec2::Client::describe_spot_price_history)
        .sequence()
        .output(|| {
            history(
                vec![spot_record("c98.large", "test-zone-1a", "0.40", 1_000)],
                None,
            )
        })
        .error(|| {
            DescribeSpotPriceHistoryError::generic(
                ErrorMetadata::builder()
                    .code("UnauthorizedOperation")
                    .message("You are not authorized to perform this operation.")
                    .build(),
            )
        })
        .output(|| history(Vec::new(), None))
        .build();
    let provider = provider(pricing_client(&[&shared, &metal]), ec2_client(&[&spot]));
    provider.update_on_demand().await.unwrap();
    provider.update_spot().await.unwrap();

    // Bare metal fails while shared succeeds: nothing is merged.
    let err = provider.update_on_demand().await.unwrap_err();
    assert!(matches!(err, PricingError::GetProducts { .. }), "{err}");
    assert!(err.to_string().contains("bare metal"), "{err}");
    // Shared fails: nothing is merged.
    let err = provider.update_on_demand().await.unwrap_err();
    assert!(err.to_string().contains("AccessDeniedException"), "{err}");
    // Spot fails, then answers with nothing: both keep the spot prices.
    let err = provider.update_spot().await.unwrap_err();
    assert!(err.to_string().contains("UnauthorizedOperation"), "{err}");
    let err = provider.update_spot().await.unwrap_err();
    assert!(matches!(err, PricingError::NoSpotPrices { .. }), "{err}");

    let prices = provider.prices();
    assert_eq!(prices.on_demand("c98.large"), Some(1.10));
    assert_eq!(prices.on_demand("m5.metal"), Some(4.608));
    assert_eq!(prices.spot("c98.large", "test-zone-1a"), Some(0.40));
    assert_eq!(prices.on_demand("t3.micro"), Some(0.0104));
}

#[tokio::test]
async fn govcloud_keeps_the_snapshot_without_calling_the_pricing_api() {
    let any = mock!(aws_sdk_pricing::Client::get_products)
        .then_output(|| products(&[("m5.large", 1.0)], None));
    let provider =
        PricingProvider::new("us-gov-west-1", pricing_client(&[&any]), ec2_client(&[])).unwrap();
    let err = provider.update_on_demand().await.unwrap_err();
    assert!(matches!(err, PricingError::NotServed { .. }), "{err}");
    assert_eq!(any.num_calls(), 0);
    let prices = provider.prices();
    assert!(prices.on_demand("m5.large").is_some_and(|p| p != 1.0));
    assert!(prices.on_demand_is_estimate("m5.large"));
}
