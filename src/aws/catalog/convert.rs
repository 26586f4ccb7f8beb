//! EC2 SDK response types → the catalog's `DescribeInstanceTypes` /
//! `DescribeInstanceTypeOfferings` shapes ([`super::describe`]), so live data
//! reaches the resolver exactly as the embedded data does.
//!
//! AWS may omit any field: an absent or negative count becomes 0 and an absent
//! list becomes empty, which is what the embedded files' defaults mean too.
//! An entry without an instance type (or zone) names nothing and is dropped.

use aws_sdk_ec2::types as sdk;

use super::describe::{
    EbsInfo, EbsOptimizedInfo, EfaInfo, GpuDevice, GpuInfo, InferenceAccelerator,
    InferenceAcceleratorInfo, InstanceStorageInfo, InstanceTypeInfo, InstanceTypeOffering,
    MemoryInfo, NetworkCard, NetworkInfo, NeuronCoreInfo, NeuronDevice, NeuronInfo,
    PlacementGroupInfo, ProcessorInfo, VCpuInfo,
};

/// A count EC2 reports as `i32`; absent or negative counts are 0.
fn count(value: Option<i32>) -> u32 {
    value.and_then(|v| u32::try_from(v).ok()).unwrap_or(0)
}

/// A size EC2 reports as `i64`; absent or negative sizes are 0.
fn size(value: Option<i64>) -> u64 {
    value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
}

/// One `DescribeInstanceTypes` entry, or `None` if it names no instance type.
pub fn instance_type_info(info: &sdk::InstanceTypeInfo) -> Option<InstanceTypeInfo> {
    let name = info.instance_type()?.as_str();
    if name.is_empty() {
        return None;
    }
    Some(InstanceTypeInfo {
        instance_type: name.to_string(),
        bare_metal: info.bare_metal().unwrap_or(false),
        burstable_performance_supported: info.burstable_performance_supported().unwrap_or(false),
        current_generation: info.current_generation().unwrap_or(false),
        hypervisor: info.hypervisor().map(|h| h.as_str().to_string()),
        supported_usage_classes: info
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_string())
            .collect(),
        supported_virtualization_types: info
            .supported_virtualization_types()
            .iter()
            .map(|v| v.as_str().to_string())
            .collect(),
        v_cpu_info: VCpuInfo {
            default_v_cpus: count(info.v_cpu_info().and_then(|v| v.default_v_cpus())),
        },
        memory_info: MemoryInfo {
            size_in_mi_b: size(info.memory_info().and_then(|m| m.size_in_mib())),
        },
        processor_info: info.processor_info().map(processor).unwrap_or_default(),
        network_info: info.network_info().map(network).unwrap_or_default(),
        ebs_info: info.ebs_info().map(ebs).unwrap_or_default(),
        gpu_info: info.gpu_info().map(gpu),
        neuron_info: info.neuron_info().map(neuron),
        inference_accelerator_info: info.inference_accelerator_info().map(inference),
        instance_storage_info: info.instance_storage_info().map(|s| InstanceStorageInfo {
            total_size_in_gb: size(s.total_size_in_gb()),
            nvme_support: s.nvme_support().map(|n| n.as_str().to_string()),
        }),
        nitro_enclaves_support: info
            .nitro_enclaves_support()
            .map(|n| n.as_str().to_string()),
        placement_group_info: info.placement_group_info().map(|p| PlacementGroupInfo {
            supported_strategies: p
                .supported_strategies()
                .iter()
                .map(|s| s.as_str().to_string())
                .collect(),
        }),
    })
}

fn processor(p: &sdk::ProcessorInfo) -> ProcessorInfo {
    ProcessorInfo {
        supported_architectures: p
            .supported_architectures()
            .iter()
            .map(|a| a.as_str().to_string())
            .collect(),
        manufacturer: p.manufacturer().map(str::to_string),
        sustained_clock_speed_in_ghz: p.sustained_clock_speed_in_ghz(),
    }
}

fn network(n: &sdk::NetworkInfo) -> NetworkInfo {
    NetworkInfo {
        default_network_card_index: count(n.default_network_card_index()),
        maximum_network_interfaces: count(n.maximum_network_interfaces()),
        ipv4_addresses_per_interface: count(n.ipv4_addresses_per_interface()),
        encryption_in_transit_supported: n.encryption_in_transit_supported().unwrap_or(false),
        efa_supported: n.efa_supported().unwrap_or(false),
        efa_info: n.efa_info().map(|e| EfaInfo {
            maximum_efa_interfaces: count(e.maximum_efa_interfaces()),
        }),
        network_cards: n
            .network_cards()
            .iter()
            .map(|card| NetworkCard {
                network_card_index: count(card.network_card_index()),
                maximum_network_interfaces: count(card.maximum_network_interfaces()),
                baseline_bandwidth_in_gbps: card.baseline_bandwidth_in_gbps(),
            })
            .collect(),
    }
}

fn ebs(e: &sdk::EbsInfo) -> EbsInfo {
    EbsInfo {
        ebs_optimized_support: e.ebs_optimized_support().map(|s| s.as_str().to_string()),
        ebs_optimized_info: e.ebs_optimized_info().map(|o| EbsOptimizedInfo {
            maximum_bandwidth_in_mbps: o
                .maximum_bandwidth_in_mbps()
                .and_then(|v| u64::try_from(v).ok()),
        }),
    }
}

fn gpu(g: &sdk::GpuInfo) -> GpuInfo {
    GpuInfo {
        gpus: g
            .gpus()
            .iter()
            .map(|d| GpuDevice {
                name: d.name().unwrap_or_default().to_string(),
                manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                count: count(d.count()),
                memory_info: MemoryInfo {
                    size_in_mi_b: size(
                        d.memory_info().and_then(|m| m.size_in_mib()).map(i64::from),
                    ),
                },
            })
            .collect(),
    }
}

fn neuron(n: &sdk::NeuronInfo) -> NeuronInfo {
    NeuronInfo {
        neuron_devices: n
            .neuron_devices()
            .iter()
            .map(|d| NeuronDevice {
                name: d.name().unwrap_or_default().to_string(),
                count: count(d.count()),
                core_info: NeuronCoreInfo {
                    count: count(d.core_info().and_then(|c| c.count())),
                },
            })
            .collect(),
    }
}

fn inference(i: &sdk::InferenceAcceleratorInfo) -> InferenceAcceleratorInfo {
    InferenceAcceleratorInfo {
        accelerators: i
            .accelerators()
            .iter()
            .map(|a| InferenceAccelerator {
                name: a.name().unwrap_or_default().to_string(),
                manufacturer: a.manufacturer().unwrap_or_default().to_string(),
                count: count(a.count()),
            })
            .collect(),
    }
}

/// One `DescribeInstanceTypeOfferings` entry, or `None` if it names no
/// instance type or location.
pub fn offering(offering: &sdk::InstanceTypeOffering) -> Option<InstanceTypeOffering> {
    let instance_type = offering.instance_type()?.as_str();
    let location = offering.location()?;
    if instance_type.is_empty() || location.is_empty() {
        return None;
    }
    Some(InstanceTypeOffering {
        instance_type: instance_type.to_string(),
        location: location.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_the_resolver_reads_is_carried_over() {
        let sdk_info = sdk::InstanceTypeInfo::builder()
            .instance_type(sdk::InstanceType::from("g5.xlarge"))
            .current_generation(true)
            .bare_metal(false)
            .burstable_performance_supported(false)
            .hypervisor(sdk::InstanceTypeHypervisor::Nitro)
            .supported_usage_classes(sdk::UsageClassType::OnDemand)
            .supported_usage_classes(sdk::UsageClassType::Spot)
            .supported_virtualization_types(sdk::VirtualizationType::Hvm)
            .v_cpu_info(sdk::VCpuInfo::builder().default_v_cpus(4).build())
            .memory_info(sdk::MemoryInfo::builder().size_in_mib(16384).build())
            .processor_info(
                sdk::ProcessorInfo::builder()
                    .supported_architectures(sdk::ArchitectureType::X8664)
                    .manufacturer("AMD")
                    .sustained_clock_speed_in_ghz(3.3)
                    .build(),
            )
            .network_info(
                sdk::NetworkInfo::builder()
                    .maximum_network_interfaces(4)
                    .ipv4_addresses_per_interface(15)
                    .default_network_card_index(0)
                    .encryption_in_transit_supported(true)
                    .efa_supported(false)
                    .network_cards(
                        sdk::NetworkCardInfo::builder()
                            .network_card_index(0)
                            .maximum_network_interfaces(4)
                            .baseline_bandwidth_in_gbps(2.5)
                            .build(),
                    )
                    .build(),
            )
            .ebs_info(
                sdk::EbsInfo::builder()
                    .ebs_optimized_support(sdk::EbsOptimizedSupport::Default)
                    .ebs_optimized_info(
                        sdk::EbsOptimizedInfo::builder()
                            .maximum_bandwidth_in_mbps(3500)
                            .build(),
                    )
                    .build(),
            )
            .gpu_info(
                sdk::GpuInfo::builder()
                    .gpus(
                        sdk::GpuDeviceInfo::builder()
                            .name("A10G")
                            .manufacturer("NVIDIA")
                            .count(1)
                            .memory_info(
                                sdk::GpuDeviceMemoryInfo::builder()
                                    .size_in_mib(24576)
                                    .build(),
                            )
                            .build(),
                    )
                    .build(),
            )
            .instance_storage_info(
                sdk::InstanceStorageInfo::builder()
                    .total_size_in_gb(250)
                    .nvme_support(sdk::EphemeralNvmeSupport::Required)
                    .build(),
            )
            .nitro_enclaves_support(sdk::NitroEnclavesSupport::Supported)
            .placement_group_info(
                sdk::PlacementGroupInfo::builder()
                    .supported_strategies(sdk::PlacementGroupStrategy::Partition)
                    .supported_strategies(sdk::PlacementGroupStrategy::Spread)
                    .build(),
            )
            .build();
        let info = instance_type_info(&sdk_info).unwrap();
        assert_eq!(info.instance_type, "g5.xlarge");
        assert!(info.current_generation && !info.bare_metal);
        assert_eq!(info.hypervisor.as_deref(), Some("nitro"));
        assert_eq!(info.supported_usage_classes, ["on-demand", "spot"]);
        assert_eq!(info.supported_virtualization_types, ["hvm"]);
        assert_eq!(info.v_cpu_info.default_v_cpus, 4);
        assert_eq!(info.memory_info.size_in_mi_b, 16384);
        assert_eq!(info.processor_info.supported_architectures, ["x86_64"]);
        assert_eq!(info.processor_info.manufacturer.as_deref(), Some("AMD"));
        assert_eq!(info.processor_info.sustained_clock_speed_in_ghz, Some(3.3));
        assert_eq!(info.network_info.maximum_network_interfaces, 4);
        assert_eq!(info.network_info.ipv4_addresses_per_interface, 15);
        assert!(info.network_info.encryption_in_transit_supported);
        assert_eq!(
            info.network_info.network_cards[0].baseline_bandwidth_in_gbps,
            Some(2.5)
        );
        assert_eq!(
            info.ebs_info
                .ebs_optimized_info
                .as_ref()
                .unwrap()
                .maximum_bandwidth_in_mbps,
            Some(3500)
        );
        let gpu = &info.gpu_info.as_ref().unwrap().gpus[0];
        assert_eq!((gpu.name.as_str(), gpu.count), ("A10G", 1));
        assert_eq!(gpu.memory_info.size_in_mi_b, 24576);
        let storage = info.instance_storage_info.as_ref().unwrap();
        assert_eq!(storage.total_size_in_gb, 250);
        assert_eq!(storage.nvme_support.as_deref(), Some("required"));
        assert_eq!(info.nitro_enclaves_support.as_deref(), Some("supported"));
        assert_eq!(
            info.placement_group_info.unwrap().supported_strategies,
            ["partition", "spread"]
        );
    }

    #[test]
    fn absent_and_negative_values_default_and_nameless_entries_are_dropped() {
        let sparse = sdk::InstanceTypeInfo::builder()
            .instance_type(sdk::InstanceType::from("x9.large"))
            .v_cpu_info(sdk::VCpuInfo::builder().default_v_cpus(-2).build())
            .build();
        let info = instance_type_info(&sparse).unwrap();
        assert_eq!(info.v_cpu_info.default_v_cpus, 0);
        assert_eq!(info.memory_info.size_in_mi_b, 0);
        assert!(info.supported_usage_classes.is_empty());
        assert!(info.gpu_info.is_none() && info.hypervisor.is_none());
        assert!(instance_type_info(&sdk::InstanceTypeInfo::builder().build()).is_none());

        let named = sdk::InstanceTypeOffering::builder()
            .instance_type(sdk::InstanceType::M5Large)
            .location("us-east-1a")
            .build();
        let o = offering(&named).unwrap();
        assert_eq!(
            (o.instance_type.as_str(), o.location.as_str()),
            ("m5.large", "us-east-1a")
        );
        let nowhere = sdk::InstanceTypeOffering::builder()
            .instance_type(sdk::InstanceType::M5Large)
            .build();
        assert!(offering(&nowhere).is_none());
    }
}
