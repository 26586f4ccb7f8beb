//! The live catalog: moto's `DescribeInstanceTypes` / `DescribeInstanceTypeOfferings`
//! over the wire into a catalog the resolver serves, the refresher against
//! moto and `simulate --aws` against moto; pagination, failed and empty
//! refreshes and the embedded fallback with SDK mocks (moto answers in one
//! page and never fails).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aws_sdk_ec2::error::ErrorMetadata;
use aws_sdk_ec2::operation::describe_instance_type_offerings::DescribeInstanceTypeOfferingsOutput;
use aws_sdk_ec2::operation::describe_instance_types::{
    DescribeInstanceTypesError, DescribeInstanceTypesOutput,
};
use aws_sdk_ec2::operation::describe_spot_price_history::DescribeSpotPriceHistoryOutput;
use aws_sdk_ec2::types as sdk;
use aws_sdk_pricing::operation::get_products::GetProductsOutput;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use nodewright::aws::catalog::live::{LIVE_LABEL, describe};
use nodewright::aws::catalog::refresh::{CatalogRefresher, InstanceTypesOutcome, serve};
use nodewright::aws::catalog::{Catalog, InstanceTypeInfo, InstanceTypeOffering, embedded_prices};
use nodewright::aws::instance_types::{InstanceTypeProvider, ResolverSettings, resolve_all};
use nodewright::aws::pricing::PricingProvider;
use nodewright::extensions::Extensions;
use nodewright::scheduling::{CapacityType, InstanceType};
use nodewright_host::HostConfig;
use tokio::sync::OnceCell;

use crate::moto::{moto, moto_clients};

/// moto's instance types and us-east-1 offerings, described once per test
/// run (one call takes about 3 s).
async fn moto_described() -> &'static (Vec<InstanceTypeInfo>, Vec<InstanceTypeOffering>) {
    static DESCRIBED: OnceCell<(Vec<InstanceTypeInfo>, Vec<InstanceTypeOffering>)> =
        OnceCell::const_new();
    DESCRIBED
        .get_or_init(|| async {
            let clients = moto_clients().await;
            describe(&clients.ec2, "us-east-1").await.unwrap()
        })
        .await
}

fn by_name(types: &[InstanceType]) -> BTreeMap<&str, &InstanceType> {
    types.iter().map(|t| (t.name.as_str(), t)).collect()
}

#[tokio::test]
async fn motos_instance_types_and_offerings_become_a_catalog_the_resolver_serves() {
    let (types, offerings) = moto_described().await;
    assert!(types.len() > 1000, "{}", types.len());
    assert!(
        offerings
            .iter()
            .all(|o| o.location.starts_with("us-east-1"))
    );
    let catalog = Catalog::versioned(
        LIVE_LABEL,
        "us-east-1",
        types.clone(),
        offerings.clone(),
        embedded_prices("us-east-1").unwrap(),
    );
    assert!(catalog.version().starts_with("live/us-east-1/"));
    assert_eq!(catalog.zones().len(), 6);

    // The embedded catalog is moto's data read from its files: every type
    // read over the wire resolves to the same labels, capacity, overhead and
    // offerings, so nothing is lost converting the SDK's types.
    let settings = ResolverSettings::default();
    let live = resolve_all(&catalog, &settings).unwrap();
    let embedded = resolve_all(&Catalog::embedded("us-east-1").unwrap(), &settings).unwrap();
    assert!(live.len() > 1300, "{}", live.len());
    let embedded = by_name(&embedded);
    for it in &live {
        let Some(same) = embedded.get(it.name.as_str()) else {
            panic!("{} is served by moto but not embedded", it.name);
        };
        assert_eq!(
            it.requirements.single_value_labels(),
            same.requirements.single_value_labels(),
            "{}",
            it.name
        );
        assert_eq!(it.capacity, same.capacity, "{}", it.name);
        assert_eq!(it.overhead, same.overhead, "{}", it.name);
        assert_eq!(it.offerings, same.offerings, "{}", it.name);
    }

    // The version follows the content, and only the content.
    let again = Catalog::versioned(
        LIVE_LABEL,
        "us-east-1",
        types.clone(),
        offerings.clone(),
        embedded_prices("us-east-1").unwrap(),
    );
    assert_eq!(again.version(), catalog.version());
    let fewer = Catalog::versioned(
        LIVE_LABEL,
        "us-east-1",
        types.clone(),
        offerings[1..].to_vec(),
        embedded_prices("us-east-1").unwrap(),
    );
    assert_ne!(fewer.version(), catalog.version());
    let mut changed = types.clone();
    changed[0].memory_info.size_in_mi_b += 1;
    let changed = Catalog::versioned(
        LIVE_LABEL,
        "us-east-1",
        changed,
        offerings.clone(),
        embedded_prices("us-east-1").unwrap(),
    );
    assert_ne!(changed.version(), catalog.version());
}

#[tokio::test]
async fn the_refresher_serves_motos_catalog_with_motos_spot_prices_and_the_on_demand_snapshot() {
    let clients = moto_clients().await;
    let pricing =
        PricingProvider::new("us-east-1", clients.pricing.clone(), clients.ec2.clone()).unwrap();
    let refresher = CatalogRefresher::new(clients.ec2.clone(), pricing);
    let provider = InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").unwrap()),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        Arc::default(),
    );

    let first = refresher.refresh().await.unwrap();
    let (types, offerings) = moto_described().await;
    assert!(
        matches!(first.instance_types, InstanceTypesOutcome::Fetched { instance_types, offerings: o }
            if instance_types == types.len() && o == offerings.len()),
        "{:?}",
        first.instance_types
    );
    // moto serves no Pricing API: on-demand prices stay the snapshot's.
    assert!(
        matches!(first.on_demand, Some(Err(_))),
        "{:?}",
        first.on_demand
    );
    // moto's spot price history quotes 0.00001 for every offering.
    let spot = first.spot.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(*spot, offerings.len());
    let prices = first.catalog.prices();
    assert_eq!(prices.on_demand("c7i-flex.large"), Some(0.08479));
    assert_eq!(prices.spot("m5.large", "us-east-1a"), Some(0.00001));

    serve(&provider, first.catalog.clone());
    assert_eq!(provider.catalog().version(), first.catalog.version());
    let resolved = provider.resolve(&node_class()).unwrap();
    let m5 = resolved.iter().find(|t| t.name == "m5.large").unwrap();
    let spot_a = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type == CapacityType::Spot && o.zone == "us-east-1a")
        .unwrap();
    assert_eq!(spot_a.price, 0.00001);
    assert!(!spot_a.price_is_estimate);

    // The same answers again: the same version, so the provider keeps its
    // catalog and the caches keyed on it.
    let second = refresher.refresh().await.unwrap();
    assert!(second.spot.is_none(), "spot prices are not due for 12 h");
    assert!(
        second.on_demand.is_some(),
        "a failed price refresh is retried"
    );
    assert!(Arc::ptr_eq(&second.catalog, &first.catalog));
    serve(&provider, second.catalog);
    assert!(Arc::ptr_eq(&provider.catalog(), &first.catalog));
}

fn node_class() -> nodewright::apis::EC2NodeClass {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "node",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        },
    }))
    .unwrap()
}

// ---- SDK mocks ----

fn sdk_type(name: &str, vcpus: i32, mib: i64) -> sdk::InstanceTypeInfo {
    sdk::InstanceTypeInfo::builder()
        .instance_type(sdk::InstanceType::from(name))
        .current_generation(true)
        .hypervisor(sdk::InstanceTypeHypervisor::Nitro)
        .supported_usage_classes(sdk::UsageClassType::OnDemand)
        .supported_usage_classes(sdk::UsageClassType::Spot)
        .supported_virtualization_types(sdk::VirtualizationType::Hvm)
        .processor_info(
            sdk::ProcessorInfo::builder()
                .supported_architectures(sdk::ArchitectureType::X8664)
                .build(),
        )
        .v_cpu_info(sdk::VCpuInfo::builder().default_v_cpus(vcpus).build())
        .memory_info(sdk::MemoryInfo::builder().size_in_mib(mib).build())
        .network_info(
            sdk::NetworkInfo::builder()
                .maximum_network_interfaces(3)
                .ipv4_addresses_per_interface(10)
                .build(),
        )
        .build()
}

fn types_page(names: &[&str], next_token: Option<&str>) -> DescribeInstanceTypesOutput {
    DescribeInstanceTypesOutput::builder()
        .set_instance_types(Some(names.iter().map(|n| sdk_type(n, 2, 8192)).collect()))
        .set_next_token(next_token.map(str::to_string))
        .build()
}

fn offerings_page(
    pairs: &[(&str, &str)],
    next_token: Option<&str>,
) -> DescribeInstanceTypeOfferingsOutput {
    DescribeInstanceTypeOfferingsOutput::builder()
        .set_instance_type_offerings(Some(
            pairs
                .iter()
                .map(|(t, z)| {
                    sdk::InstanceTypeOffering::builder()
                        .instance_type(sdk::InstanceType::from(*t))
                        .location_type(sdk::LocationType::AvailabilityZone)
                        .location(*z)
                        .build()
                })
                .collect(),
        ))
        .set_next_token(next_token.map(str::to_string))
        .build()
}

fn unauthorized() -> DescribeInstanceTypesError {
    DescribeInstanceTypesError::generic(
        ErrorMetadata::builder()
            .code("UnauthorizedOperation")
            .message("You are not authorized to perform this operation.")
            .build(),
    )
}

/// Pricing and spot price rules that answer one price each, every time.
fn price_rules() -> (Rule, Rule) {
    let products = mock!(aws_sdk_pricing::Client::get_products)
        .sequence()
        .output(|| {
            GetProductsOutput::builder()
                .price_list(crate::pricing::price_document("m5.large", 0.096))
                .build()
        })
        .repeatedly()
        .build();
    let spot = mock!(aws_sdk_ec2::Client::describe_spot_price_history)
        .sequence()
        .output(|| {
            DescribeSpotPriceHistoryOutput::builder()
                .spot_price_history(
                    sdk::SpotPrice::builder()
                        .instance_type(sdk::InstanceType::M5Large)
                        .availability_zone("us-east-1a")
                        .spot_price("0.0351")
                        .timestamp(aws_sdk_ec2::primitives::DateTime::from_secs(1_000))
                        .product_description(sdk::RiProductDescription::LinuxUnix)
                        .build(),
                )
                .build()
        })
        .repeatedly()
        .build();
    (products, spot)
}

fn refresher(region: &str, ec2_rules: &[&Rule], products: &Rule) -> CatalogRefresher {
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, ec2_rules);
    let pricing = mock_client!(aws_sdk_pricing, RuleMode::MatchAny, [products]);
    CatalogRefresher::new(
        ec2.clone(),
        PricingProvider::new(region, pricing, ec2).unwrap(),
    )
}

fn names(catalog: &Catalog) -> BTreeSet<&str> {
    catalog
        .instance_types()
        .iter()
        .map(|i| i.instance_type.as_str())
        .collect()
}

#[tokio::test]
async fn describe_instance_types_and_offerings_read_every_page() {
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .match_requests(|input| {
            input.max_results() == Some(100)
                && input.filters().iter().any(|f| {
                    f.name() == Some("supported-virtualization-type") && f.values() == ["hvm"]
                })
        })
        .then_compute_output(|input| match input.next_token() {
            None => types_page(&["m5.large", "m5.xlarge"], Some("t2")),
            Some("t2") => types_page(&["c5.large"], Some("t3")),
            _ => types_page(&["r5.large"], None),
        });
    let offerings = mock!(aws_sdk_ec2::Client::describe_instance_type_offerings)
        .match_requests(|input| input.location_type() == Some(&sdk::LocationType::AvailabilityZone))
        .then_compute_output(|input| match input.next_token() {
            None => offerings_page(
                &[("m5.large", "us-east-1a"), ("m5.xlarge", "us-east-1a")],
                Some("o2"),
            ),
            _ => offerings_page(
                &[
                    ("m5.large", "us-east-1b"),
                    ("c5.large", "us-east-1a"),
                    ("r5.large", "us-east-1c"),
                ],
                None,
            ),
        });
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&types, &offerings]);

    let (infos, zonal) = describe(&ec2, "us-east-1").await.unwrap();
    assert_eq!(types.num_calls(), 3);
    assert_eq!(offerings.num_calls(), 2);
    let catalog = Catalog::versioned(
        LIVE_LABEL,
        "us-east-1",
        infos,
        zonal,
        embedded_prices("us-east-1").unwrap(),
    );
    assert_eq!(
        names(&catalog),
        BTreeSet::from(["c5.large", "m5.large", "m5.xlarge", "r5.large"])
    );
    assert_eq!(
        catalog.zones_of("m5.large").collect::<Vec<_>>(),
        ["us-east-1a", "us-east-1b"]
    );
    assert_eq!(catalog.zones(), ["us-east-1a", "us-east-1b", "us-east-1c"]);
}

#[tokio::test]
async fn a_failed_or_empty_refresh_keeps_the_last_good_catalog() {
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .sequence()
        .output(|| types_page(&["m5.large", "c5.large"], None))
        .error(unauthorized)
        .output(|| types_page(&[], None))
        .build();
    let offerings = mock!(aws_sdk_ec2::Client::describe_instance_type_offerings)
        .sequence()
        .output(|| {
            offerings_page(
                &[("m5.large", "us-east-1a"), ("c5.large", "us-east-1a")],
                None,
            )
        })
        .repeatedly()
        .build();
    let (products, spot) = price_rules();
    let refresher = refresher("us-east-1", &[&types, &offerings, &spot], &products);

    let good = refresher.refresh().await.unwrap();
    assert!(matches!(
        good.instance_types,
        InstanceTypesOutcome::Fetched {
            instance_types: 2,
            ..
        }
    ));
    assert!(good.catalog.version().starts_with("live/us-east-1/"));
    assert_eq!(good.catalog.prices().on_demand("m5.large"), Some(0.096));
    assert_eq!(
        good.catalog.prices().spot("m5.large", "us-east-1a"),
        Some(0.0351)
    );
    let provider = InstanceTypeProvider::new(
        good.catalog.clone(),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        Arc::default(),
    );

    for attempt in ["fails", "answers with no instance types"] {
        let report = refresher.refresh().await.unwrap();
        let InstanceTypesOutcome::Kept(error) = &report.instance_types else {
            panic!("{attempt}: {:?}", report.instance_types);
        };
        assert_eq!(
            report.catalog.version(),
            good.catalog.version(),
            "{attempt}: {error}"
        );
        assert_eq!(
            names(&report.catalog),
            BTreeSet::from(["c5.large", "m5.large"])
        );
        serve(&provider, report.catalog);
        assert!(Arc::ptr_eq(&provider.catalog(), &good.catalog), "{attempt}");
    }
    assert_eq!(types.num_calls(), 3);
}

#[tokio::test]
async fn new_offerings_give_a_new_version_that_the_provider_serves() {
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .then_output(|| types_page(&["m5.large"], None));
    let offerings = mock!(aws_sdk_ec2::Client::describe_instance_type_offerings)
        .sequence()
        .output(|| offerings_page(&[("m5.large", "us-east-1a")], None))
        .output(|| {
            offerings_page(
                &[("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")],
                None,
            )
        })
        .build();
    let (products, spot) = price_rules();
    let refresher = refresher("us-east-1", &[&types, &offerings, &spot], &products);

    let first = refresher.refresh().await.unwrap();
    let provider = InstanceTypeProvider::new(
        first.catalog.clone(),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        Arc::default(),
    );
    let before = provider.resolve(&node_class()).unwrap();
    let second = refresher.refresh().await.unwrap();
    assert_ne!(second.catalog.version(), first.catalog.version());
    serve(&provider, second.catalog.clone());
    assert_eq!(provider.catalog().version(), second.catalog.version());
    let after = provider.resolve(&node_class()).unwrap();
    let zones = |types: &[InstanceType]| -> BTreeSet<String> {
        types[0].offerings.iter().map(|o| o.zone.clone()).collect()
    };
    assert_eq!(zones(&before), BTreeSet::from(["us-east-1a".to_string()]));
    assert_eq!(
        zones(&after),
        BTreeSet::from(["us-east-1a".to_string(), "us-east-1b".to_string()])
    );
}

#[tokio::test]
async fn a_first_failed_refresh_falls_back_to_the_embedded_catalog_or_reports_the_error() {
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .sequence()
        .error(unauthorized)
        .repeatedly()
        .build();
    let offerings = mock!(aws_sdk_ec2::Client::describe_instance_type_offerings)
        .then_output(|| offerings_page(&[("m5.large", "us-east-1a")], None));
    let (products, spot) = price_rules();

    let embedded = refresher("us-east-1", &[&types, &offerings, &spot], &products);
    let report = embedded.refresh().await.unwrap();
    let InstanceTypesOutcome::EmbeddedFallback(error) = &report.instance_types else {
        panic!("{:?}", report.instance_types);
    };
    assert!(
        error.to_string().contains("UnauthorizedOperation"),
        "{error}"
    );
    assert!(
        report
            .catalog
            .version()
            .starts_with("embedded-fallback/us-east-1/")
    );
    assert_eq!(
        report.catalog.instance_types().len(),
        Catalog::embedded("us-east-1")
            .unwrap()
            .instance_types()
            .len()
    );
    // Prices are still the live ones.
    assert_eq!(
        report.catalog.prices().spot("m5.large", "us-east-1a"),
        Some(0.0351)
    );
    // The next failure keeps the fallback: nothing better is known yet.
    let again = embedded.refresh().await.unwrap();
    assert!(matches!(
        again.instance_types,
        InstanceTypesOutcome::Kept(_)
    ));
    assert!(Arc::ptr_eq(&again.catalog, &report.catalog));

    let nowhere = refresher("eu-west-1", &[&types, &offerings, &spot], &products);
    let error = nowhere.refresh().await.unwrap_err().to_string();
    assert!(
        error.contains("DescribeInstanceTypes") && error.contains("eu-west-1"),
        "{error}"
    );
    assert!(nowhere.catalog().is_none());
}

// ---- simulate --aws ----

/// Manifests for a round that may use spot or on-demand capacity.
fn write_manifests(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("pool.yaml"),
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["spot", "on-demand"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["m"]}
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx
          resources: {requests: {cpu: "1", memory: 2Gi}}
"#,
    )
    .unwrap();
}

fn simulate_binary(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .arg("simulate")
        .args(args)
        .env("AWS_ENDPOINT_URL", &moto().endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .output()
        .unwrap()
}

#[test]
fn simulate_aws_plans_from_motos_catalog_in_a_region_nothing_is_embedded_for() {
    let dir = std::env::temp_dir().join(format!("nodewright-simulate-aws-{}", std::process::id()));
    write_manifests(&dir);
    let path = dir.to_str().unwrap();

    // eu-west-1 has no embedded catalog: without --aws there is nothing to plan on.
    let offline = simulate_binary(&[path, "--region", "eu-west-1"]);
    assert!(!offline.status.success());
    let stderr = String::from_utf8_lossy(&offline.stderr);
    assert!(stderr.contains("unknown region \"eu-west-1\""), "{stderr}");

    let live = simulate_binary(&[path, "--aws", "--region", "eu-west-1", "--output", "json"]);
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&live.stdout);
    let stderr = String::from_utf8_lossy(&live.stderr);
    assert!(
        live.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["catalog"], "live");
    assert_eq!(plan["region"], "eu-west-1");
    let warnings: Vec<&str> = plan["catalogWarnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("on-demand prices: Pricing API GetProducts"),
        "moto serves no Pricing API: {warnings:?}"
    );
    let claims = plan["nodeClaims"].as_array().unwrap();
    assert!(!claims.is_empty());
    let placed: usize = claims
        .iter()
        .map(|c| c["pods"].as_array().unwrap().len())
        .sum();
    assert_eq!(placed, 3);
    for claim in claims {
        // moto's spot price history quotes 0.00001 for every offering: the
        // cheapest spot offering, and a real (not estimated) spot price.
        assert_eq!(claim["capacityType"], "spot", "{claim}");
        assert_eq!(claim["pricePerHour"], 0.00001, "{claim}");
        assert_eq!(claim["priceIsEstimate"], false, "{claim}");
        let zone = claim["zone"].as_str().unwrap();
        assert!(zone.starts_with("eu-west-1"), "{zone}");
        assert!(claim["instanceType"].as_str().unwrap().starts_with('m'));
    }
}

#[tokio::test]
async fn the_refresh_loop_swaps_the_live_catalog_into_the_provider() {
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .then_output(|| types_page(&["m5.large"], None));
    let offerings = mock!(aws_sdk_ec2::Client::describe_instance_type_offerings)
        .then_output(|| offerings_page(&[("m5.large", "us-east-1a")], None));
    let (products, spot) = price_rules();
    let refresher = refresher("us-east-1", &[&types, &offerings, &spot], &products)
        .with_interval(std::time::Duration::from_millis(10));
    let embedded = Arc::new(Catalog::embedded("us-east-1").unwrap());
    let provider = Arc::new(InstanceTypeProvider::new(
        embedded.clone(),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        Arc::default(),
    ));

    let running = tokio::spawn(Arc::new(refresher).run(provider.clone()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Arc::ptr_eq(&provider.catalog(), &embedded) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let served = provider.catalog();
    let calls_then = types.num_calls();
    // Later refreshes find the same data: the provider keeps that catalog.
    while types.num_calls() < calls_then + 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    running.abort();
    assert!(
        served.version().starts_with("live/us-east-1/"),
        "{}",
        served.version()
    );
    assert_eq!(names(&served), BTreeSet::from(["m5.large"]));
    assert!(
        types.num_calls() >= calls_then + 3,
        "the loop keeps refreshing"
    );
    assert!(Arc::ptr_eq(&provider.catalog(), &served));
}

#[tokio::test]
async fn the_embedded_fallback_gives_way_to_the_live_catalog_once_ec2_answers() {
    let types = mock!(aws_sdk_ec2::Client::describe_instance_types)
        .sequence()
        .error(unauthorized)
        .output(|| types_page(&["m5.large"], None))
        .build();
    let offerings = mock!(aws_sdk_ec2::Client::describe_instance_type_offerings)
        .then_output(|| offerings_page(&[("m5.large", "us-east-1a")], None));
    let (products, spot) = price_rules();
    let refresher = refresher("us-east-1", &[&types, &offerings, &spot], &products);

    let fallback = refresher.refresh().await.unwrap();
    assert!(matches!(
        fallback.instance_types,
        InstanceTypesOutcome::EmbeddedFallback(_)
    ));
    let live = refresher.refresh().await.unwrap();
    assert!(matches!(
        live.instance_types,
        InstanceTypesOutcome::Fetched {
            instance_types: 1,
            ..
        }
    ));
    assert!(live.catalog.version().starts_with("live/us-east-1/"));
    assert_eq!(names(&live.catalog), BTreeSet::from(["m5.large"]));
}
