//! The records extension modules see: the scheduler's instance types joined
//! with the EC2 facts they were resolved from (burstable, bare metal,
//! generation status). The catalog is the extensions' [`CandidateSource`],
//! so they get the table without knowing where its facts come from.

use std::collections::HashMap;

use nodewright_filter::{Accelerator, Architecture, CapacityType, InstanceTypeInfo, Offering};
use nodewright_host::InstanceTypeSet;

use super::labels;
use crate::aws::catalog::{self, Catalog};
use crate::extensions::CandidateSource;
use crate::scheduling::{self, InstanceType};

impl CandidateSource for Catalog {
    fn version(&self) -> &str {
        Catalog::version(self)
    }

    fn region(&self) -> &str {
        Catalog::region(self)
    }

    fn records(&self, instance_types: &[InstanceType]) -> InstanceTypeSet {
        filter_records(self, instance_types)
    }
}

/// The candidate set for modules, in the order of `instance_types`.
///
/// Types missing from the catalog (none, when both come from the same
/// catalog) are passed with the facts their labels carry.
pub fn filter_records(catalog: &Catalog, instance_types: &[InstanceType]) -> InstanceTypeSet {
    let infos: HashMap<&str, &catalog::InstanceTypeInfo> = catalog
        .instance_types()
        .iter()
        .map(|info| (info.instance_type.as_str(), info))
        .collect();
    InstanceTypeSet::new(
        instance_types
            .iter()
            .map(|it| record(infos.get(it.name.as_str()).copied(), it))
            .collect(),
    )
}

fn record(info: Option<&catalog::InstanceTypeInfo>, it: &InstanceType) -> InstanceTypeInfo {
    let labels = it.requirements.single_value_labels();
    let text = |key: &str| labels.get(key).cloned().unwrap_or_default();
    let number = |key: &str| {
        labels
            .get(key)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let gpus = match (
        labels.get(labels::INSTANCE_GPU_NAME),
        labels.get(labels::INSTANCE_GPU_COUNT),
    ) {
        (Some(name), Some(_)) => vec![Accelerator {
            name: name.clone(),
            manufacturer: text(labels::INSTANCE_GPU_MANUFACTURER),
            count: number(labels::INSTANCE_GPU_COUNT) as u32,
            memory_mib: number(labels::INSTANCE_GPU_MEMORY),
        }],
        _ => Vec::new(),
    };
    let accelerators = match labels.get(labels::INSTANCE_ACCELERATOR_NAME) {
        Some(name) => vec![Accelerator {
            name: name.clone(),
            manufacturer: text(labels::INSTANCE_ACCELERATOR_MANUFACTURER),
            count: number(labels::INSTANCE_ACCELERATOR_COUNT) as u32,
            memory_mib: 0,
        }],
        None => Vec::new(),
    };
    // EC2 reports instance storage in GB (10^9 bytes); the record carries GiB.
    let local_nvme_gib = number(labels::INSTANCE_LOCAL_NVME) * 1_000_000_000 / (1 << 30);
    InstanceTypeInfo {
        name: it.name.clone(),
        family: text(labels::INSTANCE_FAMILY),
        category: text(labels::INSTANCE_CATEGORY),
        generation: number(labels::INSTANCE_GENERATION) as u32,
        size: text(labels::INSTANCE_SIZE),
        architecture: if text(labels::ARCH) == "arm64" {
            Architecture::Arm64
        } else {
            Architecture::Amd64
        },
        cpu_manufacturer: text(labels::INSTANCE_CPU_MANUFACTURER),
        vcpu: number(labels::INSTANCE_CPU) as u32,
        memory_mib: number(labels::INSTANCE_MEMORY),
        gpus,
        accelerators,
        local_nvme_gib,
        network_bandwidth_mbps: number(labels::INSTANCE_NETWORK_BANDWIDTH) as u32,
        ebs_bandwidth_mbps: number(labels::INSTANCE_EBS_BANDWIDTH) as u32,
        hypervisor: text(labels::INSTANCE_HYPERVISOR),
        bare_metal: info.is_some_and(|i| i.bare_metal),
        burstable: info.is_some_and(|i| i.burstable_performance_supported),
        current_generation: info.is_none_or(|i| i.current_generation),
        encryption_in_transit: text(labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED) == "true",
        labels: Default::default(),
        offerings: it
            .offerings
            .iter()
            .map(|o| Offering {
                zone: o.zone.clone(),
                capacity_type: match o.capacity_type {
                    scheduling::CapacityType::OnDemand => CapacityType::OnDemand,
                    scheduling::CapacityType::Spot => CapacityType::Spot,
                    scheduling::CapacityType::Reserved => CapacityType::Reserved,
                },
                price: o.price,
                available: o.available,
                reservation_id: o.reservation_id.clone(),
            })
            .collect(),
    }
}
