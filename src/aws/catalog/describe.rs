//! The subset of EC2's `DescribeInstanceTypes` and `DescribeInstanceTypeOfferings`
//! response shapes that the instance-type resolver reads.
//!
//! Field names follow the EC2 API (PascalCase) so the embedded catalog, saved API
//! responses and live SDK results all convert into the same structs. Every field
//! EC2 may omit is optional; the resolver decides what an absent value means.

use serde::{Deserialize, Serialize};

/// One entry of `DescribeInstanceTypes`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceTypeInfo {
    /// The instance type name, e.g. `c7i-flex.large`.
    pub instance_type: String,
    /// Whether the type is bare metal (`*.metal`).
    #[serde(default)]
    pub bare_metal: bool,
    /// Whether the type is a burstable (`t*`) type.
    #[serde(default)]
    pub burstable_performance_supported: bool,
    /// Whether AWS still lists the type as current generation.
    #[serde(default)]
    pub current_generation: bool,
    /// `nitro` or `xen`; absent for some bare-metal types.
    pub hypervisor: Option<String>,
    /// `on-demand`, `spot`, `capacity-block`.
    #[serde(default)]
    pub supported_usage_classes: Vec<String>,
    /// `hvm`, `paravirtual`.
    #[serde(default)]
    pub supported_virtualization_types: Vec<String>,
    /// Virtual CPUs.
    #[serde(default)]
    pub v_cpu_info: VCpuInfo,
    /// Memory.
    #[serde(default)]
    pub memory_info: MemoryInfo,
    /// CPU architecture, manufacturer and clock speed.
    #[serde(default)]
    pub processor_info: ProcessorInfo,
    /// Network interfaces, addresses and bandwidth.
    #[serde(default)]
    pub network_info: NetworkInfo,
    /// EBS optimisation and bandwidth.
    #[serde(default)]
    pub ebs_info: EbsInfo,
    /// GPUs, when the type has any.
    pub gpu_info: Option<GpuInfo>,
    /// AWS Neuron devices (Inferentia, Trainium).
    pub neuron_info: Option<NeuronInfo>,
    /// Older inference accelerators.
    pub inference_accelerator_info: Option<InferenceAcceleratorInfo>,
    /// Local instance-store disks.
    pub instance_storage_info: Option<InstanceStorageInfo>,
    /// `supported` when Nitro Enclaves can run.
    pub nitro_enclaves_support: Option<String>,
    /// The placement group strategies the type can launch into.
    pub placement_group_info: Option<PlacementGroupInfo>,
}

/// `PlacementGroupInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct PlacementGroupInfo {
    /// `cluster`, `partition`, `spread`.
    #[serde(default)]
    pub supported_strategies: Vec<String>,
}

/// `VCpuInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct VCpuInfo {
    /// vCPUs a launched instance gets by default.
    #[serde(default)]
    pub default_v_cpus: u32,
}

/// `MemoryInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MemoryInfo {
    /// Memory in MiB as EC2 advertises it (before hypervisor overhead).
    #[serde(default)]
    pub size_in_mi_b: u64,
}

/// `ProcessorInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProcessorInfo {
    /// `x86_64`, `arm64`, `i386`, `x86_64_mac`, `arm64_mac`.
    #[serde(default)]
    pub supported_architectures: Vec<String>,
    /// `Intel`, `AMD`, `AWS`, `Apple`.
    pub manufacturer: Option<String>,
    /// Sustained all-core clock speed.
    pub sustained_clock_speed_in_ghz: Option<f64>,
}

/// `NetworkInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkInfo {
    /// Index of the card the VPC CNI attaches interfaces to.
    #[serde(default)]
    pub default_network_card_index: u32,
    /// Interfaces across all cards.
    #[serde(default)]
    pub maximum_network_interfaces: u32,
    /// Private IPv4 addresses per interface.
    #[serde(default)]
    pub ipv4_addresses_per_interface: u32,
    /// Whether in-transit encryption between instances is supported.
    #[serde(default)]
    pub encryption_in_transit_supported: bool,
    /// Whether Elastic Fabric Adapter is supported.
    #[serde(default)]
    pub efa_supported: bool,
    /// EFA limits.
    pub efa_info: Option<EfaInfo>,
    /// Per-card interface limits and bandwidth.
    #[serde(default)]
    pub network_cards: Vec<NetworkCard>,
}

/// `EfaInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EfaInfo {
    /// EFA interfaces the type supports.
    #[serde(default)]
    pub maximum_efa_interfaces: u32,
}

/// One entry of `NetworkInfo.NetworkCards`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkCard {
    /// Position of the card.
    #[serde(default)]
    pub network_card_index: u32,
    /// Interfaces on this card.
    #[serde(default)]
    pub maximum_network_interfaces: u32,
    /// Guaranteed bandwidth.
    pub baseline_bandwidth_in_gbps: Option<f64>,
}

/// `EbsInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EbsInfo {
    /// `default`, `supported` or `unsupported`.
    pub ebs_optimized_support: Option<String>,
    /// Bandwidth figures when EBS-optimised.
    pub ebs_optimized_info: Option<EbsOptimizedInfo>,
}

/// `EbsOptimizedInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EbsOptimizedInfo {
    /// Peak EBS bandwidth.
    pub maximum_bandwidth_in_mbps: Option<u64>,
}

/// `GpuInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct GpuInfo {
    /// One entry per GPU model on the type.
    #[serde(default)]
    pub gpus: Vec<GpuDevice>,
}

/// One entry of `GpuInfo.Gpus`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct GpuDevice {
    /// Model name, e.g. `A10G`.
    #[serde(default)]
    pub name: String,
    /// Vendor, e.g. `NVIDIA`.
    #[serde(default)]
    pub manufacturer: String,
    /// GPUs of this model.
    #[serde(default)]
    pub count: u32,
    /// Memory of one GPU.
    #[serde(default)]
    pub memory_info: MemoryInfo,
}

/// `NeuronInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronInfo {
    /// One entry per Neuron device model.
    #[serde(default)]
    pub neuron_devices: Vec<NeuronDevice>,
}

/// One entry of `NeuronInfo.NeuronDevices`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronDevice {
    /// `Inferentia`, `Inferentia2`, `Trainium`, ...
    #[serde(default)]
    pub name: String,
    /// Devices of this model.
    #[serde(default)]
    pub count: u32,
    /// NeuronCores per device.
    #[serde(default)]
    pub core_info: NeuronCoreInfo,
}

/// `NeuronDevice.CoreInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronCoreInfo {
    /// NeuronCores on one device.
    #[serde(default)]
    pub count: u32,
}

/// `InferenceAcceleratorInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct InferenceAcceleratorInfo {
    /// One entry per accelerator model.
    #[serde(default)]
    pub accelerators: Vec<InferenceAccelerator>,
}

/// One entry of `InferenceAcceleratorInfo.Accelerators`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct InferenceAccelerator {
    /// Model name.
    #[serde(default)]
    pub name: String,
    /// Vendor.
    #[serde(default)]
    pub manufacturer: String,
    /// Accelerators of this model.
    #[serde(default)]
    pub count: u32,
}

/// `InstanceStorageInfo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceStorageInfo {
    /// Total local storage in GB (10^9 bytes).
    #[serde(default, rename = "TotalSizeInGB")]
    pub total_size_in_gb: u64,
    /// `required`, `supported` or `unsupported`.
    pub nvme_support: Option<String>,
}

/// One entry of `DescribeInstanceTypeOfferings` with `LocationType=availability-zone`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceTypeOffering {
    /// The instance type offered.
    pub instance_type: String,
    /// The availability zone it is offered in.
    pub location: String,
}
