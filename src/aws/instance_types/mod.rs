//! The instance-type resolver: turns EC2 `DescribeInstanceTypes` /
//! `DescribeInstanceTypeOfferings`-shaped data plus prices into the scheduler's
//! [`InstanceType`]s — labels, capacity, overhead and offerings.
//!
//! One resolver serves the embedded catalog and the live EC2 API: both produce
//! a [`Catalog`], and everything here is a pure function of it and of the
//! EC2NodeClass-derived [`ResolverSettings`].

pub mod capacity;
pub mod labels;
mod placement;
mod provider;
mod records;
pub mod reserved;
mod settings;

pub use provider::{InstanceTypeProvider, MAX_RESOLVED};
pub use records::filter_records;
pub use reserved::ReservedCapacity;

use std::collections::{BTreeMap, BTreeSet};

use crate::apis::ec2nodeclass::PlacementGroupStatus;
use crate::aws::catalog::{Catalog, InstanceTypeInfo, PriceBook};
use crate::scheduling::{
    CapacityType, InstanceType, Offering, Overhead, QuantityError, Requirement, Requirements,
    Resources, parse_quantity,
};

use capacity::{
    DEFAULT_ROOT_VOLUME_BYTES, DEFAULT_VM_MEMORY_OVERHEAD_PERCENT, EVICTION_MEMORY_BYTES,
    KUBE_RESERVED_EPHEMERAL_BYTES,
};

/// Why an instance type could not be resolved under the given settings.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// A quantity in the EC2NodeClass did not parse.
    #[error("spec.{field}: {source}")]
    Quantity {
        /// The field under `spec`, e.g. `kubelet.kubeReserved.memory`.
        field: String,
        /// The quantity problem.
        #[source]
        source: QuantityError,
    },
    /// An eviction percentage is not a number between 0 and 100.
    #[error("spec.kubelet.{field}: {value:?} is not a valid percentage; use e.g. \"10%\"")]
    EvictionPercent {
        /// The kubelet field.
        field: String,
        /// The value given.
        value: String,
    },
}

/// The kubelet settings that change capacity or overhead (EC2NodeClass `spec.kubelet`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeletSettings {
    /// `maxPods`: overrides the ENI-derived pod limit.
    pub max_pods: Option<i64>,
    /// `podsPerCore`: caps pods at this many per vCPU.
    pub pods_per_core: Option<i64>,
    /// `kubeReserved`: resource name → quantity; replaces the computed value per resource.
    pub kube_reserved: BTreeMap<String, String>,
    /// `systemReserved`: resource name → quantity.
    pub system_reserved: BTreeMap<String, String>,
    /// `evictionHard`: signal (`memory.available`, `nodefs.available`) → quantity or percentage.
    pub eviction_hard: BTreeMap<String, String>,
    /// `evictionSoft`: as `eviction_hard`; the larger of the two wins.
    pub eviction_soft: BTreeMap<String, String>,
}

/// What an EC2NodeClass contributes to instance-type resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolverSettings {
    /// The OS label value: `linux`, or `windows` for Windows AMI families.
    pub os: String,
    /// Whether pods are limited by ENIs (AL2, AL2023, Bottlerocket) or fixed at 110.
    pub eni_limited_pods: bool,
    /// ENIs held back from the VPC CNI.
    pub reserved_enis: u32,
    /// Hypervisor memory overhead fraction (`--vm-memory-overhead-percent`).
    pub vm_memory_overhead_percent: f64,
    /// Node ephemeral storage: the root volume size, or local NVMe when
    /// `instanceStorePolicy: RAID0` (see `instance_store_raid0`).
    pub root_volume_bytes: i64,
    /// `instanceStorePolicy: RAID0`: ephemeral storage is the local NVMe total.
    pub instance_store_raid0: bool,
    /// Zones the EC2NodeClass's subnets cover; `None` means every zone.
    pub zones: Option<BTreeSet<String>>,
    /// Kubelet settings.
    pub kubelet: KubeletSettings,
    /// Capacity reservations the class may launch into (its
    /// `status.capacityReservations`), each a reserved offering.
    pub capacity_reservations: Vec<ReservedCapacity>,
    /// The placement group every instance launches into (the class's
    /// `status.placementGroup`): types that cannot join it are left out,
    /// and the others carry its id and partitions as labels.
    pub placement_group: Option<PlacementGroupStatus>,
}

impl Default for ResolverSettings {
    /// An AL2023 EC2NodeClass with no kubelet block and a 20Gi root volume.
    fn default() -> Self {
        Self {
            os: "linux".to_string(),
            eni_limited_pods: true,
            reserved_enis: 0,
            vm_memory_overhead_percent: DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
            root_volume_bytes: DEFAULT_ROOT_VOLUME_BYTES,
            instance_store_raid0: false,
            zones: None,
            kubelet: KubeletSettings::default(),
            capacity_reservations: Vec::new(),
            placement_group: None,
        }
    }
}

/// Resolves every launchable instance type in the catalog.
///
/// Types Karpenter never lists are skipped: Mac and 32-bit-only types (no
/// `x86_64`/`arm64` architecture), non-HVM types, arm64 types when the OS
/// is Windows, and types whose `PlacementGroupInfo` lacks the strategy of
/// the class's placement group.
pub fn resolve_all(
    catalog: &Catalog,
    settings: &ResolverSettings,
) -> Result<Vec<InstanceType>, ResolveError> {
    let mut out = Vec::with_capacity(catalog.instance_types().len());
    for info in catalog.instance_types() {
        if let Some(instance_type) = resolve(catalog, info, settings)? {
            out.push(instance_type);
        }
    }
    Ok(out)
}

/// Resolves one instance type, or `None` if it is not launchable (see [`resolve_all`]).
pub fn resolve(
    catalog: &Catalog,
    info: &InstanceTypeInfo,
    settings: &ResolverSettings,
) -> Result<Option<InstanceType>, ResolveError> {
    let Some(arch) = labels::kube_arch(info) else {
        return Ok(None);
    };
    if !info
        .supported_virtualization_types
        .iter()
        .any(|v| v == "hvm")
        || (settings.os == "windows" && arch != "amd64")
        || !placement::joins(info, settings.placement_group.as_ref())
    {
        return Ok(None);
    }
    let name = info.instance_type.as_str();
    let mut requirements = Requirements::new();
    let label_values = labels::instance_labels(info, catalog.region(), &settings.os);
    for key in labels::INSTANCE_TYPE_LABEL_KEYS {
        requirements.add(match label_values.get(key) {
            Some(value) => Requirement::single(key, value),
            None => Requirement::does_not_exist(key),
        });
    }
    for requirement in reserved::reservation_requirements(&settings.capacity_reservations, name) {
        requirements.add(requirement);
    }
    if let Some(group) = &settings.placement_group {
        for requirement in placement::requirements(group) {
            requirements.add(requirement);
        }
    }
    let capacity = node_capacity(info, arch == "arm64", settings);
    let overhead = node_overhead(&capacity, settings)?;
    let offerings = offerings(catalog, info, settings);
    Ok(Some(InstanceType::new(
        name,
        requirements,
        offerings,
        capacity,
        overhead,
    )))
}

/// Capacity of one node: CPU, memory less VM overhead, pods, ephemeral storage
/// and accelerators as extended resources.
fn node_capacity(info: &InstanceTypeInfo, arm64: bool, settings: &ResolverSettings) -> Resources {
    let pods = capacity::pods(
        info,
        settings.kubelet.max_pods,
        settings.kubelet.pods_per_core,
        settings.eni_limited_pods,
        settings.reserved_enis,
    );
    let raid0_bytes = info
        .instance_storage_info
        .as_ref()
        .filter(|_| settings.instance_store_raid0)
        .map(|storage| storage.total_size_in_gb as i64 * 1_000_000_000);
    let mut resources = Resources::cpu_memory(
        i64::from(info.v_cpu_info.default_v_cpus) * 1000,
        capacity::memory_bytes(info, arm64, settings.vm_memory_overhead_percent),
    )
    .with_pods(pods);
    resources.ephemeral_storage = raid0_bytes.unwrap_or(settings.root_volume_bytes);
    for (name, amount) in capacity::extended_resources(info) {
        resources.set(name, amount);
    }
    resources
}

/// Kube-reserved, system-reserved and eviction thresholds for a node of `capacity`.
///
/// Kube-reserved defaults: CPU by [`capacity::kube_reserved_cpu_millis`], memory
/// `11Mi × pods + 255Mi`, ephemeral storage 1Gi; each resource set in
/// `kubeReserved` replaces its default. Eviction defaults: memory 100Mi,
/// nodefs 10% of ephemeral storage; `evictionHard`/`evictionSoft` replace them
/// with the larger of the two.
fn node_overhead(
    capacity: &Resources,
    settings: &ResolverSettings,
) -> Result<Overhead, ResolveError> {
    let kubelet = &settings.kubelet;
    let mut kube_reserved = Resources::cpu_memory(
        capacity::kube_reserved_cpu_millis(capacity.cpu_millis),
        capacity::kube_reserved_memory_bytes(capacity.pods),
    );
    kube_reserved.ephemeral_storage = KUBE_RESERVED_EPHEMERAL_BYTES;
    apply_reservations(&mut kube_reserved, &kubelet.kube_reserved, "kubeReserved")?;
    let mut system_reserved = Resources::zero();
    apply_reservations(
        &mut system_reserved,
        &kubelet.system_reserved,
        "systemReserved",
    )?;

    let mut eviction = Resources::zero();
    eviction.memory = EVICTION_MEMORY_BYTES;
    eviction.ephemeral_storage = capacity::eviction_nodefs_bytes(capacity.ephemeral_storage);
    let mut overridden = Resources::zero();
    for (field, signals) in [
        ("evictionHard", &kubelet.eviction_hard),
        ("evictionSoft", &kubelet.eviction_soft),
    ] {
        for (signal, value) in signals {
            let (resource, total) = match signal.as_str() {
                "memory.available" => ("memory", capacity.memory),
                "nodefs.available" => ("ephemeral-storage", capacity.ephemeral_storage),
                _ => continue,
            };
            let amount = eviction_signal(&format!("{field}.{signal}"), value, total)?;
            overridden.set(resource, overridden.get(resource).max(amount));
        }
    }
    if overridden.memory > 0 {
        eviction.memory = overridden.memory;
    }
    if overridden.ephemeral_storage > 0 {
        eviction.ephemeral_storage = overridden.ephemeral_storage;
    }
    Ok(Overhead {
        kube_reserved,
        system_reserved,
        eviction_threshold: eviction,
    })
}

fn apply_reservations(
    into: &mut Resources,
    reserved: &BTreeMap<String, String>,
    field: &str,
) -> Result<(), ResolveError> {
    for (resource, quantity) in reserved {
        let scale = if resource == "cpu" { 3 } else { 0 };
        let amount =
            parse_quantity(resource, quantity, scale).map_err(|source| ResolveError::Quantity {
                field: format!("kubelet.{field}.{resource}"),
                source,
            })?;
        into.set(resource, amount);
    }
    Ok(())
}

/// An eviction signal's threshold: a percentage of `total` (rounded up) or a quantity.
fn eviction_signal(field: &str, value: &str, total: i64) -> Result<i64, ResolveError> {
    match value.strip_suffix('%') {
        Some(percent) => {
            let percent: f64 = percent
                .trim()
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..=100.0).contains(p))
                .ok_or_else(|| ResolveError::EvictionPercent {
                    field: field.to_string(),
                    value: value.to_string(),
                })?;
            Ok((total as f64 / 100.0 * percent).ceil() as i64)
        }
        None => parse_quantity(field, value, 0).map_err(|source| ResolveError::Quantity {
            field: format!("kubelet.{field}"),
            source,
        }),
    }
}

/// On-demand and spot offerings in every zone that offers the type (and that
/// the EC2NodeClass's subnets cover), then one reserved offering per capacity
/// reservation of the type (see [`reserved`]).
///
/// On-demand prices come from the price book (estimates when the region
/// borrows another region's snapshot and no live price replaced it). Spot
/// offerings carry the zone's spot price when the spot price history had
/// one; otherwise the on-demand price stands in — what Karpenter uses before
/// its first spot price refresh — marked as an estimate. An offering with no
/// price is marked unavailable: it cannot be launched.
fn offerings(
    catalog: &Catalog,
    info: &InstanceTypeInfo,
    settings: &ResolverSettings,
) -> Vec<Offering> {
    let prices: &PriceBook = catalog.prices();
    let name = info.instance_type.as_str();
    let on_demand = prices.on_demand(name);
    let on_demand_is_estimate = prices.on_demand_is_estimate(name);
    let capacity_types: Vec<CapacityType> = [CapacityType::OnDemand, CapacityType::Spot]
        .into_iter()
        .filter(|ct| {
            info.supported_usage_classes
                .iter()
                .any(|u| u == ct.label_value())
        })
        .collect();
    let mut out = Vec::new();
    for zone in catalog.zones_of(name) {
        if settings.zones.as_ref().is_some_and(|z| !z.contains(zone)) {
            continue;
        }
        for &capacity_type in &capacity_types {
            let (price, estimate) = if capacity_type == CapacityType::Spot {
                match prices.spot(name, zone) {
                    Some(spot) => (Some(spot), false),
                    None => (on_demand, true),
                }
            } else {
                (on_demand, on_demand_is_estimate)
            };
            let mut offering = Offering::new(zone, capacity_type, price.unwrap_or(0.0));
            offering.available = price.is_some();
            offering.price_is_estimate = estimate;
            out.push(offering);
        }
    }
    let launchable = |zone: &str| {
        settings.zones.as_ref().is_none_or(|z| z.contains(zone))
            && catalog
                .zones_of(&info.instance_type)
                .any(|offered| offered == zone)
    };
    out.extend(reserved::reserved_offerings(
        &settings.capacity_reservations,
        &info.instance_type,
        on_demand,
        launchable,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use capacity::{GIB, MIB};

    fn resolved(name: &str, settings: &ResolverSettings) -> InstanceType {
        let catalog = Catalog::embedded("us-east-1").unwrap();
        let info = catalog
            .instance_types()
            .iter()
            .find(|i| i.instance_type == name)
            .unwrap();
        resolve(&catalog, info, settings).unwrap().unwrap()
    }

    fn label(it: &InstanceType, key: &str) -> Option<String> {
        it.requirements.single_value_labels().get(key).cloned()
    }

    #[test]
    fn c7i_flex_large_has_karpenters_labels() {
        let it = resolved("c7i-flex.large", &ResolverSettings::default());
        for (key, value) in [
            (labels::INSTANCE_TYPE, "c7i-flex.large"),
            (labels::ARCH, "amd64"),
            (labels::OS, "linux"),
            (labels::INSTANCE_FAMILY, "c7i-flex"),
            (labels::INSTANCE_CATEGORY, "c"),
            (labels::INSTANCE_GENERATION, "7"),
            (labels::INSTANCE_SIZE, "large"),
            (labels::INSTANCE_CPU, "2"),
            (labels::INSTANCE_MEMORY, "4096"),
            (labels::INSTANCE_CPU_MANUFACTURER, "intel"),
            (labels::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, "3200"),
            (labels::INSTANCE_HYPERVISOR, "nitro"),
            (labels::INSTANCE_CAPABILITY_FLEX, "true"),
            (labels::INSTANCE_EBS_BANDWIDTH, "10000"),
            (labels::INSTANCE_NETWORK_BANDWIDTH, "390"),
            (labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, "true"),
        ] {
            assert_eq!(label(&it, key).as_deref(), Some(value), "{key}");
        }
        let gpu = it.requirements.get(labels::INSTANCE_GPU_NAME).unwrap();
        assert_eq!(gpu.operator(), crate::scheduling::Operator::DoesNotExist);
    }

    #[test]
    fn c7i_flex_large_capacity_and_overhead() {
        let it = resolved("c7i-flex.large", &ResolverSettings::default());
        assert_eq!(it.capacity.cpu_millis, 2000);
        assert_eq!(it.capacity.memory, 3788 * MIB);
        assert_eq!(it.capacity.pods, 29);
        assert_eq!(it.capacity.ephemeral_storage, 20 * GIB);
        assert_eq!(it.overhead.kube_reserved.cpu_millis, 70);
        assert_eq!(it.overhead.kube_reserved.memory, (11 * 29 + 255) * MIB);
        assert_eq!(it.overhead.kube_reserved.ephemeral_storage, GIB);
        assert_eq!(it.overhead.eviction_threshold.memory, 100 * MIB);
        assert_eq!(it.overhead.eviction_threshold.ephemeral_storage, 2 * GIB);
        assert_eq!(it.allocatable().cpu_millis, 1930);
    }

    #[test]
    fn offerings_cover_zones_and_capacity_types_with_prices() {
        let it = resolved("c7i-flex.large", &ResolverSettings::default());
        let on_demand: Vec<&Offering> = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
            .collect();
        assert!(!on_demand.is_empty());
        for o in &on_demand {
            assert_eq!(o.price, 0.08479);
            assert!(o.available && !o.price_is_estimate);
        }
        assert!(
            it.offerings
                .iter()
                .filter(|o| o.capacity_type == CapacityType::Spot)
                .all(|o| o.price_is_estimate)
        );
    }

    #[test]
    fn a_known_spot_price_replaces_the_on_demand_stand_in_in_its_zone_only() {
        let embedded = Catalog::embedded("us-west-2").unwrap();
        let mut prices = embedded.prices().clone();
        prices.merge_spot(
            std::collections::HashMap::from([(
                "m5.large".to_string(),
                std::collections::HashMap::from([("us-west-2a".to_string(), 0.0351)]),
            )]),
            "2026-11-23T00:00:00Z".into(),
        );
        prices.merge_on_demand(
            std::collections::HashMap::from([("m5.large".to_string(), 0.096)]),
            "2026-11-23T00:00:00Z".into(),
        );
        let catalog = embedded.with_prices("test", prices);
        let info = catalog
            .instance_types()
            .iter()
            .find(|i| i.instance_type == "m5.large")
            .unwrap();
        let it = resolve(&catalog, info, &ResolverSettings::default())
            .unwrap()
            .unwrap();
        let find = |zone: &str, ct: CapacityType| {
            it.offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == ct)
                .unwrap()
        };
        let spot_a = find("us-west-2a", CapacityType::Spot);
        assert_eq!(spot_a.price, 0.0351);
        assert!(spot_a.available && !spot_a.price_is_estimate);
        let spot_b = find("us-west-2b", CapacityType::Spot);
        assert_eq!(spot_b.price, 0.096);
        assert!(spot_b.available && spot_b.price_is_estimate);
        // The live on-demand price is the region's own, no longer borrowed.
        let od = find("us-west-2b", CapacityType::OnDemand);
        assert_eq!(od.price, 0.096);
        assert!(!od.price_is_estimate);
        // Types without a live price keep the borrowed snapshot, marked.
        let c5 = resolved_in(&catalog, "c5.large");
        assert!(c5.offerings.iter().all(|o| o.price_is_estimate));
    }

    fn resolved_in(catalog: &Catalog, name: &str) -> InstanceType {
        let info = catalog
            .instance_types()
            .iter()
            .find(|i| i.instance_type == name)
            .unwrap();
        resolve(catalog, info, &ResolverSettings::default())
            .unwrap()
            .unwrap()
    }

    #[test]
    fn subnet_zones_restrict_offerings() {
        let settings = ResolverSettings {
            zones: Some(BTreeSet::from(["us-east-1a".to_string()])),
            ..ResolverSettings::default()
        };
        let it = resolved("m5.large", &settings);
        assert!(it.offerings.iter().all(|o| o.zone == "us-east-1a"));
        assert_eq!(it.offerings.len(), 2);
    }

    #[test]
    fn capacity_reservations_add_reserved_offerings_and_labels() {
        let settings = ResolverSettings {
            zones: Some(BTreeSet::from([
                "us-east-1a".to_string(),
                "us-east-1b".to_string(),
            ])),
            capacity_reservations: vec![ReservedCapacity {
                id: "cr-1".into(),
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                reservation_type: "default".into(),
                interruptible: false,
                expiring: false,
                available: Some(3),
            }],
            ..ResolverSettings::default()
        };
        let it = resolved("m5.large", &settings);
        let on_demand = it
            .offerings
            .iter()
            .find(|o| o.capacity_type == CapacityType::OnDemand)
            .unwrap()
            .price;
        let reserved: Vec<&Offering> = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Reserved)
            .collect();
        assert_eq!(reserved.len(), 1);
        assert_eq!(reserved[0].zone, "us-east-1a");
        assert_eq!(reserved[0].reservation_id.as_deref(), Some("cr-1"));
        assert_eq!(reserved[0].reservation_capacity, Some(3));
        assert!(reserved[0].available);
        assert_eq!(
            reserved[0].price,
            on_demand / reserved::RESERVED_PRICE_DIVISOR
        );
        assert!(
            it.requirements
                .get(labels::CAPACITY_TYPE)
                .unwrap()
                .has("reserved")
        );
        let id = it
            .requirements
            .get(crate::apis::labels::CAPACITY_RESERVATION_ID_LABEL_KEY)
            .unwrap();
        assert!(id.has("cr-1"));

        let other = resolved("c5.large", &settings);
        assert!(
            other
                .offerings
                .iter()
                .all(|o| o.capacity_type != CapacityType::Reserved)
        );
        let none = other
            .requirements
            .get(crate::apis::labels::CAPACITY_RESERVATION_ID_LABEL_KEY)
            .unwrap();
        assert_eq!(none.operator(), crate::scheduling::Operator::DoesNotExist);
    }

    #[test]
    fn kubelet_settings_override_reservations_and_eviction() {
        let mut settings = ResolverSettings::default();
        settings.kubelet.max_pods = Some(110);
        settings.kubelet.kube_reserved = BTreeMap::from([("cpu".into(), "250m".into())]);
        settings.kubelet.system_reserved = BTreeMap::from([("memory".into(), "1Gi".into())]);
        settings.kubelet.eviction_hard = BTreeMap::from([("memory.available".into(), "5%".into())]);
        settings.kubelet.eviction_soft =
            BTreeMap::from([("memory.available".into(), "500Mi".into())]);
        let it = resolved("m5.large", &settings);
        assert_eq!(it.capacity.pods, 110);
        assert_eq!(it.overhead.kube_reserved.cpu_millis, 250);
        assert_eq!(it.overhead.kube_reserved.memory, (11 * 110 + 255) * MIB);
        assert_eq!(it.overhead.system_reserved.memory, GIB);
        // 5% of m5.large's 7578Mi is ~379Mi, below the 500Mi soft threshold.
        assert_eq!(it.overhead.eviction_threshold.memory, 500 * MIB);
    }

    #[test]
    fn bad_kubelet_quantities_name_the_field() {
        let mut settings = ResolverSettings::default();
        settings.kubelet.kube_reserved = BTreeMap::from([("memory".into(), "lots".into())]);
        let catalog = Catalog::embedded("us-east-1").unwrap();
        let err = resolve_all(&catalog, &settings).unwrap_err().to_string();
        assert!(err.contains("kubeReserved.memory"), "{err}");
        settings.kubelet.kube_reserved.clear();
        settings.kubelet.eviction_hard =
            BTreeMap::from([("nodefs.available".into(), "150%".into())]);
        let err = resolve_all(&catalog, &settings).unwrap_err().to_string();
        assert!(err.contains("evictionHard.nodefs.available"), "{err}");
    }

    #[test]
    fn raid0_uses_local_nvme_for_ephemeral_storage() {
        let settings = ResolverSettings {
            instance_store_raid0: true,
            ..ResolverSettings::default()
        };
        let it = resolved("m5d.large", &settings);
        assert_eq!(it.capacity.ephemeral_storage, 75_000_000_000);
        assert_eq!(
            label(&it, labels::INSTANCE_LOCAL_NVME).as_deref(),
            Some("75")
        );
    }

    #[test]
    fn mac_and_32bit_only_types_are_not_launchable() {
        let catalog = Catalog::embedded("us-east-1").unwrap();
        let all = resolve_all(&catalog, &ResolverSettings::default()).unwrap();
        assert!(all.iter().all(|it| !it.name.starts_with("mac")));
        assert!(all.len() > 1300, "{}", all.len());
        let windows = ResolverSettings {
            os: "windows".into(),
            ..ResolverSettings::default()
        };
        let all = resolve_all(&catalog, &windows).unwrap();
        assert!(
            all.iter()
                .all(|it| label(it, labels::ARCH).as_deref() == Some("amd64"))
        );
    }

    #[test]
    fn gpu_types_get_gpu_labels_and_resources() {
        let it = resolved("g5.xlarge", &ResolverSettings::default());
        assert_eq!(
            label(&it, labels::INSTANCE_GPU_NAME).as_deref(),
            Some("a10g")
        );
        assert_eq!(
            label(&it, labels::INSTANCE_GPU_MANUFACTURER).as_deref(),
            Some("nvidia")
        );
        assert_eq!(label(&it, labels::INSTANCE_GPU_COUNT).as_deref(), Some("1"));
        assert_eq!(
            label(&it, labels::INSTANCE_GPU_MEMORY).as_deref(),
            Some("22888")
        );
        assert_eq!(it.capacity.get("nvidia.com/gpu"), 1);
        let inf2 = resolved("inf2.xlarge", &ResolverSettings::default());
        assert_eq!(
            label(&inf2, labels::INSTANCE_ACCELERATOR_NAME).as_deref(),
            Some("inferentia2")
        );
        assert_eq!(
            label(&inf2, labels::INSTANCE_ACCELERATOR_MANUFACTURER).as_deref(),
            Some("aws")
        );
        assert_eq!(
            label(&inf2, labels::INSTANCE_ACCELERATOR_COUNT).as_deref(),
            Some("1")
        );
    }

    /// One g4ad size as Karpenter's generated instance-type reference shows it
    /// (AL2023, no block device mappings).
    struct Reference {
        name: &'static str,
        /// `instance-cpu`, `-memory`, `-ebs-bandwidth`, `-local-nvme`,
        /// `-network-bandwidth`, `-gpu-count`.
        labels: [&'static str; 6],
        /// Allocatable CPU (m), memory (Mi), pods, `amd.com/gpu`.
        allocatable: [i64; 4],
    }

    const G4AD_REFERENCE: [Reference; 5] = [
        Reference {
            name: "g4ad.xlarge",
            labels: ["4", "16384", "3170", "150", "2000", "1"],
            allocatable: [3920, 14712, 8, 1],
        },
        Reference {
            name: "g4ad.2xlarge",
            labels: ["8", "32768", "3170", "300", "4167", "1"],
            allocatable: [7910, 29867, 8, 1],
        },
        Reference {
            name: "g4ad.4xlarge",
            labels: ["16", "65536", "3170", "600", "8333", "1"],
            allocatable: [15890, 59946, 29, 1],
        },
        Reference {
            name: "g4ad.8xlarge",
            labels: ["32", "131072", "3170", "1200", "15000", "2"],
            allocatable: [31850, 120248, 58, 2],
        },
        Reference {
            name: "g4ad.16xlarge",
            labels: ["64", "262144", "6300", "2400", "25000", "4"],
            allocatable: [63770, 239554, 234, 4],
        },
    ];

    #[test]
    fn g4ad_matches_karpenters_reference_labels_and_allocatable() {
        for Reference {
            name,
            labels: [cpu, memory, ebs, nvme, network, gpus],
            allocatable: [cpu_m, memory_mi, pods, amd],
        } in G4AD_REFERENCE
        {
            let it = resolved(name, &ResolverSettings::default());
            for (key, value) in [
                (labels::ARCH, "amd64"),
                (labels::INSTANCE_CATEGORY, "g"),
                (labels::INSTANCE_FAMILY, "g4ad"),
                (labels::INSTANCE_GENERATION, "4"),
                (labels::INSTANCE_CPU, cpu),
                (labels::INSTANCE_CPU_MANUFACTURER, "amd"),
                (labels::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, "3000"),
                (labels::INSTANCE_MEMORY, memory),
                (labels::INSTANCE_EBS_BANDWIDTH, ebs),
                (labels::INSTANCE_LOCAL_NVME, nvme),
                (labels::INSTANCE_NETWORK_BANDWIDTH, network),
                (labels::INSTANCE_HYPERVISOR, "nitro"),
                (labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, "true"),
                (labels::INSTANCE_CAPABILITY_FLEX, "false"),
                (labels::INSTANCE_GPU_NAME, "radeon-pro-v520"),
                (labels::INSTANCE_GPU_MANUFACTURER, "amd"),
                (labels::INSTANCE_GPU_COUNT, gpus),
                (labels::INSTANCE_GPU_MEMORY, "8192"),
            ] {
                assert_eq!(label(&it, key).as_deref(), Some(value), "{name} {key}");
            }
            assert_eq!(it.capacity.get(capacity::RESOURCE_AMD_GPU), amd, "{name}");
            assert_eq!(it.capacity.get(capacity::RESOURCE_NVIDIA_GPU), 0, "{name}");
            let allocatable = it.allocatable();
            assert_eq!(allocatable.cpu_millis, cpu_m, "{name} cpu");
            assert_eq!(allocatable.memory, memory_mi * MIB, "{name} memory");
            assert_eq!(allocatable.pods, pods, "{name} pods");
            assert_eq!(allocatable.ephemeral_storage, 17 * GIB, "{name} ephemeral");
            assert_eq!(allocatable.get(capacity::RESOURCE_AMD_GPU), amd, "{name}");
            assert!(it.offerings.iter().any(|o| o.available && o.price > 0.0));
        }
    }

    #[test]
    fn an_amd_gpu_request_fits_only_g4ad_and_the_cheapest_is_g4ad_xlarge() {
        // The request of Karpenter's gpu-amd example workload.
        let request = Resources::parse([("cpu", "1"), ("memory", "256M"), ("amd.com/gpu", "1")])
            .unwrap()
            .with_pods(1);
        for region in crate::aws::catalog::EMBEDDED_REGIONS {
            let catalog = Catalog::embedded(region).unwrap();
            let all = resolve_all(&catalog, &ResolverSettings::default()).unwrap();
            let mut fitting: Vec<&InstanceType> = all
                .iter()
                .filter(|it| request.fits(&it.allocatable()))
                .filter(|it| it.offerings.iter().any(|o| o.available))
                .collect();
            assert_eq!(fitting.len(), 5, "{region}");
            assert!(fitting.iter().all(|it| it.name.starts_with("g4ad.")));
            let cheapest = |it: &InstanceType| {
                it.offerings
                    .iter()
                    .filter(|o| o.available && o.capacity_type == CapacityType::OnDemand)
                    .map(|o| o.price)
                    .fold(f64::INFINITY, f64::min)
            };
            fitting.sort_by(|a, b| cheapest(a).total_cmp(&cheapest(b)));
            assert_eq!(fitting[0].name, "g4ad.xlarge", "{region}");
            assert_eq!(cheapest(fitting[0]), 0.37853, "{region}");
        }
    }
}
