//! On-demand prices from the AWS Pricing API (`GetProducts`), queried the way
//! Karpenter queries it: Linux, no pre-installed software, capacity status
//! `Used`, on-demand, in one region — once for shared-tenancy instances and
//! once for bare metal (listed as dedicated, product family `Compute Instance
//! (bare metal)`).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_pricing::error::DisplayErrorContext;
use aws_sdk_pricing::types::{Filter, FilterType};
use serde::Deserialize;

use super::PricingError;

/// Products per `GetProducts` page (the API's maximum).
const PAGE_SIZE: i32 = 100;

/// One `GetProducts` query: the filters beyond the common ones.
#[derive(Debug, Clone, Copy)]
pub struct ProductQuery {
    /// What the query covers, for errors and logs.
    pub name: &'static str,
    /// The `tenancy` attribute.
    pub tenancy: &'static str,
    /// The `productFamily` attribute.
    pub product_family: &'static str,
}

/// The two queries whose results together price every instance type.
pub const QUERIES: [ProductQuery; 2] = [
    ProductQuery {
        name: "shared instances",
        tenancy: "Shared",
        product_family: "Compute Instance",
    },
    ProductQuery {
        name: "bare metal",
        tenancy: "Dedicated",
        product_family: "Compute Instance (bare metal)",
    },
];

/// The currency prices are read in: CNY in the China regions, else USD.
pub fn currency(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "CNY"
    } else {
        "USD"
    }
}

/// The `TERM_MATCH` filters of `query` for `region`.
pub fn filters(region: &str, query: &ProductQuery) -> Vec<(&'static str, String)> {
    vec![
        ("regionCode", region.to_string()),
        ("serviceCode", "AmazonEC2".to_string()),
        ("preInstalledSw", "NA".to_string()),
        ("operatingSystem", "Linux".to_string()),
        ("capacitystatus", "Used".to_string()),
        ("marketoption", "OnDemand".to_string()),
        ("tenancy", query.tenancy.to_string()),
        ("productFamily", query.product_family.to_string()),
    ]
}

/// The parts of one price-list document (a `GetProducts` `PriceList` entry)
/// that carry the instance type and its on-demand price.
#[derive(Deserialize)]
struct PriceItem {
    product: Product,
    #[serde(default)]
    terms: Terms,
}

#[derive(Deserialize)]
struct Product {
    #[serde(default)]
    attributes: Attributes,
}

#[derive(Deserialize, Default)]
struct Attributes {
    #[serde(rename = "instanceType")]
    instance_type: Option<String>,
}

#[derive(Deserialize, Default)]
struct Terms {
    #[serde(rename = "OnDemand", default)]
    on_demand: BTreeMap<String, Term>,
}

#[derive(Deserialize)]
struct Term {
    #[serde(rename = "priceDimensions", default)]
    price_dimensions: BTreeMap<String, PriceDimension>,
}

#[derive(Deserialize)]
struct PriceDimension {
    #[serde(rename = "pricePerUnit", default)]
    price_per_unit: HashMap<String, String>,
}

/// The instance type and hourly on-demand price in `currency` of one
/// price-list document; `None` when it names no instance type or carries no
/// positive price in that currency (e.g. a reservation-only product).
pub fn parse_price_item(
    document: &str,
    currency: &str,
) -> Result<Option<(String, f64)>, serde_json::Error> {
    let item: PriceItem = serde_json::from_str(document)?;
    let Some(instance_type) = item
        .product
        .attributes
        .instance_type
        .filter(|t| !t.is_empty())
    else {
        return Ok(None);
    };
    let price = item
        .terms
        .on_demand
        .values()
        .flat_map(|term| term.price_dimensions.values())
        .filter_map(|dimension| dimension.price_per_unit.get(currency))
        .filter_map(|text| text.trim().parse::<f64>().ok())
        .find(|price| price.is_finite() && *price > 0.0);
    Ok(price.map(|price| (instance_type, price)))
}

/// Every on-demand price `query` returns for `region`, all pages. A
/// document that does not parse is skipped (and logged), as Karpenter does.
pub async fn fetch(
    client: &aws_sdk_pricing::Client,
    region: &str,
    query: &ProductQuery,
) -> Result<HashMap<String, f64>, PricingError> {
    let mut filters_out = Vec::new();
    for (field, value) in filters(region, query) {
        let filter = Filter::builder()
            .r#type(FilterType::TermMatch)
            .field(field)
            .value(value)
            .build()
            .map_err(|e| PricingError::GetProducts {
                region: region.to_string(),
                query: query.name,
                message: e.to_string(),
            })?;
        filters_out.push(filter);
    }
    let currency = currency(region);
    let mut prices = HashMap::new();
    let mut pages = client
        .get_products()
        .service_code("AmazonEC2")
        .format_version("aws_v1")
        .set_filters(Some(filters_out))
        .max_results(PAGE_SIZE)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| PricingError::GetProducts {
            region: region.to_string(),
            query: query.name,
            message: DisplayErrorContext(&e).to_string(),
        })?;
        for document in page.price_list() {
            match parse_price_item(document, currency) {
                Ok(Some((instance_type, price))) => {
                    prices.insert(instance_type, price);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(%region, query = query.name, error = %e, "skipped a price-list document that does not parse");
                }
            }
        }
    }
    Ok(prices)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A price-list document as `GetProducts` returns it (trimmed attributes).
    fn document(instance_type: &str, usd: &str) -> String {
        serde_json::json!({
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": "us-east-1",
                    "operatingSystem": "Linux",
                    "tenancy": "Shared",
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                },
                "sku": "ABCDEF",
            },
            "serviceCode": "AmazonEC2",
            "terms": {"OnDemand": {"ABCDEF.JRTCKXETXF": {
                "priceDimensions": {"ABCDEF.JRTCKXETXF.6YS6EN2CT7": {
                    "unit": "Hrs",
                    "pricePerUnit": {"USD": usd},
                }},
                "sku": "ABCDEF",
                "offerTermCode": "JRTCKXETXF",
            }}},
        })
        .to_string()
    }

    #[test]
    fn a_document_yields_its_type_and_hourly_price() {
        assert_eq!(
            parse_price_item(&document("m5.large", "0.0960000000"), "USD").unwrap(),
            Some(("m5.large".to_string(), 0.096))
        );
    }

    #[test]
    fn zero_missing_or_foreign_currency_prices_are_no_price() {
        assert_eq!(
            parse_price_item(&document("m5.large", "0.0000000000"), "USD").unwrap(),
            None
        );
        assert_eq!(
            parse_price_item(&document("m5.large", "0.096"), "CNY").unwrap(),
            None
        );
        let no_terms = r#"{"product": {"attributes": {"instanceType": "m5.large"}}}"#;
        assert_eq!(parse_price_item(no_terms, "USD").unwrap(), None);
        let no_type = r#"{"product": {"attributes": {}}, "terms": {}}"#;
        assert_eq!(parse_price_item(no_type, "USD").unwrap(), None);
        assert!(parse_price_item("not json", "USD").is_err());
    }

    #[test]
    fn china_regions_are_priced_in_yuan() {
        assert_eq!(currency("cn-north-1"), "CNY");
        assert_eq!(currency("eu-west-1"), "USD");
    }

    #[test]
    fn filters_are_karpenters() {
        let names: Vec<(&str, String)> = filters("eu-west-1", &QUERIES[0]);
        for expected in [
            ("regionCode", "eu-west-1"),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
            ("marketoption", "OnDemand"),
        ] {
            assert!(
                names
                    .iter()
                    .any(|(f, v)| *f == expected.0 && v == expected.1),
                "{expected:?}"
            );
        }
    }
}
