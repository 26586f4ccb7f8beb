//! Plain Rust types every role works on. The controller uses them to call
//! built-ins natively; inside a component the SDK converts the WIT records
//! into them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::labels::well_known;

/// CPU architecture, as `kubernetes.io/arch` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// x86-64.
    Amd64,
    /// 64-bit Arm (Graviton).
    Arm64,
}

impl Architecture {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Architecture::Amd64 => "amd64",
            Architecture::Arm64 => "arm64",
        }
    }
}

/// How an offering is bought (`karpenter.sh/capacity-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    /// On-demand.
    OnDemand,
    /// Spot.
    Spot,
    /// A capacity reservation.
    Reserved,
}

impl CapacityType {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
            CapacityType::Reserved => "reserved",
        }
    }
}

/// A GPU or other accelerator attached to an instance type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Accelerator {
    /// For example `a10g`, `inferentia2`.
    pub name: String,
    /// For example `nvidia`, `aws`.
    pub manufacturer: String,
    /// Number of devices.
    pub count: u32,
    /// Memory per device, MiB (0 when unknown).
    pub memory_mib: u64,
}

/// One zone and capacity type an instance type can be bought in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offering {
    /// Availability zone name, for example `us-east-1a`.
    pub zone: String,
    /// How it is bought.
    pub capacity_type: CapacityType,
    /// USD per hour.
    pub price: f64,
    /// False after an insufficient-capacity error or when not offered.
    pub available: bool,
    /// Capacity reservation id for reserved offerings.
    pub reservation_id: Option<String>,
}

/// An EC2 instance type with what Karpenter's well-known labels describe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceTypeInfo {
    /// For example `m7g.large`.
    pub name: String,
    /// For example `m7g`.
    pub family: String,
    /// For example `m`.
    pub category: String,
    /// For example 7.
    pub generation: u32,
    /// For example `large`.
    pub size: String,
    /// CPU architecture.
    pub architecture: Architecture,
    /// `aws`, `intel`, `amd`, ...
    pub cpu_manufacturer: String,
    /// Number of vCPUs.
    pub vcpu: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// GPUs.
    pub gpus: Vec<Accelerator>,
    /// Non-GPU accelerators (Inferentia, Trainium, ...).
    pub accelerators: Vec<Accelerator>,
    /// Local NVMe instance storage, GiB.
    pub local_nvme_gib: u64,
    /// Baseline network bandwidth, Mbit/s.
    pub network_bandwidth_mbps: u32,
    /// Baseline EBS bandwidth, Mbit/s.
    pub ebs_bandwidth_mbps: u32,
    /// `nitro`, `xen`, or empty for bare metal.
    pub hypervisor: String,
    /// A `.metal` size.
    pub bare_metal: bool,
    /// Burstable performance (CPU credits).
    pub burstable: bool,
    /// EC2 lists the type as current generation.
    pub current_generation: bool,
    /// Supports encryption in transit.
    pub encryption_in_transit: bool,
    /// Labels that have no typed field here.
    pub labels: BTreeMap<String, String>,
    /// Where and how the type can be bought.
    pub offerings: Vec<Offering>,
}

impl Default for InstanceTypeInfo {
    /// An unnamed current-generation amd64 type with nothing set and no
    /// offerings; fill in what a test needs (or start from
    /// [`crate::fixtures::it`], which infers fields from a name).
    fn default() -> Self {
        InstanceTypeInfo {
            name: String::new(),
            family: String::new(),
            category: String::new(),
            generation: 0,
            size: String::new(),
            architecture: Architecture::Amd64,
            cpu_manufacturer: String::new(),
            vcpu: 0,
            memory_mib: 0,
            gpus: Vec::new(),
            accelerators: Vec::new(),
            local_nvme_gib: 0,
            network_bandwidth_mbps: 0,
            ebs_bandwidth_mbps: 0,
            hypervisor: String::new(),
            bare_metal: false,
            burstable: false,
            current_generation: true,
            encryption_in_transit: false,
            labels: BTreeMap::new(),
            offerings: Vec::new(),
        }
    }
}

impl InstanceTypeInfo {
    /// The node labels Karpenter derives from this instance type, plus
    /// [`InstanceTypeInfo::labels`]. Zone and capacity type depend on the
    /// offering and are not included.
    pub fn well_known_labels(&self) -> BTreeMap<String, String> {
        let mut out = self.labels.clone();
        let mut put = |k: &str, v: String| {
            out.insert(k.to_string(), v);
        };
        put(well_known::INSTANCE_TYPE, self.name.clone());
        put(well_known::ARCH, self.architecture.as_str().to_string());
        put(well_known::OS, "linux".to_string());
        put(well_known::INSTANCE_FAMILY, self.family.clone());
        put(well_known::INSTANCE_CATEGORY, self.category.clone());
        put(well_known::INSTANCE_GENERATION, self.generation.to_string());
        put(well_known::INSTANCE_SIZE, self.size.clone());
        put(well_known::INSTANCE_CPU, self.vcpu.to_string());
        put(
            well_known::INSTANCE_CPU_MANUFACTURER,
            self.cpu_manufacturer.clone(),
        );
        put(well_known::INSTANCE_MEMORY, self.memory_mib.to_string());
        put(
            well_known::INSTANCE_EBS_BANDWIDTH,
            self.ebs_bandwidth_mbps.to_string(),
        );
        put(
            well_known::INSTANCE_NETWORK_BANDWIDTH,
            self.network_bandwidth_mbps.to_string(),
        );
        put(well_known::INSTANCE_HYPERVISOR, self.hypervisor.clone());
        put(
            well_known::INSTANCE_ENCRYPTION_IN_TRANSIT,
            self.encryption_in_transit.to_string(),
        );
        put(
            well_known::INSTANCE_CAPABILITY_FLEX,
            self.family.ends_with("-flex").to_string(),
        );
        if self.local_nvme_gib > 0 {
            put(
                well_known::INSTANCE_LOCAL_NVME,
                self.local_nvme_gib.to_string(),
            );
        }
        if let Some(gpu) = self.gpus.first() {
            put(well_known::INSTANCE_GPU_NAME, gpu.name.clone());
            put(
                well_known::INSTANCE_GPU_MANUFACTURER,
                gpu.manufacturer.clone(),
            );
            put(well_known::INSTANCE_GPU_COUNT, gpu.count.to_string());
            put(well_known::INSTANCE_GPU_MEMORY, gpu.memory_mib.to_string());
        }
        if let Some(acc) = self.accelerators.first() {
            put(well_known::INSTANCE_ACCELERATOR_NAME, acc.name.clone());
            put(
                well_known::INSTANCE_ACCELERATOR_MANUFACTURER,
                acc.manufacturer.clone(),
            );
            put(
                well_known::INSTANCE_ACCELERATOR_COUNT,
                acc.count.to_string(),
            );
        }
        out
    }
}

/// EC2 image state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AmiState {
    /// Ready to launch.
    Available,
    /// Still being created; must never be launched.
    Pending,
    /// Invalid.
    Invalid,
    /// Deregistered.
    Deregistered,
    /// Transient.
    Transient,
    /// Creation failed.
    Failed,
    /// Error.
    Error,
    /// Disabled by its owner.
    Disabled,
}

impl AmiState {
    /// The state as EC2 writes it (`available`, `pending`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            AmiState::Available => "available",
            AmiState::Pending => "pending",
            AmiState::Invalid => "invalid",
            AmiState::Deregistered => "deregistered",
            AmiState::Transient => "transient",
            AmiState::Failed => "failed",
            AmiState::Error => "error",
            AmiState::Disabled => "disabled",
        }
    }
}

/// A machine image the EC2NodeClass's selector terms resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ami {
    /// `ami-...`.
    pub id: String,
    /// Image name.
    pub name: String,
    /// Owner account id or alias.
    pub owner: String,
    /// Image state.
    pub state: AmiState,
    /// Creation time, seconds since the Unix epoch.
    pub creation_time: i64,
    /// Deprecation time, seconds since the Unix epoch.
    pub deprecation_time: Option<i64>,
    /// CPU architecture.
    pub architecture: Architecture,
    /// `standard`, `nvidia`, `neuron`, ... (empty when unknown).
    pub variant: String,
    /// Image tags.
    pub tags: BTreeMap<String, String>,
    /// The SSM parameter or selector term it came from.
    pub source: String,
}

impl Ami {
    /// Deprecated at `now` (seconds since the Unix epoch).
    pub fn is_deprecated(&self, now: i64) -> bool {
        self.deprecation_time.is_some_and(|t| t <= now)
    }
}

/// Who is asking, and the user's configuration for the component.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Context {
    /// NodePool name.
    pub node_pool: String,
    /// EC2NodeClass name.
    pub node_class: String,
    /// AWS region.
    pub region: String,
    /// The `config` JSON from the EC2NodeClass (`{}` when absent).
    pub config: String,
    /// The host's clock, seconds since the Unix epoch.
    pub now: i64,
}

/// The `config` JSON did not match what the component expects.
#[derive(Debug)]
pub struct ConfigError(serde_json::Error);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid extension config JSON: {}", self.0)
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

impl Context {
    /// Parses `config` into the component's own settings type. An empty
    /// string reads as `{}`.
    pub fn config<T: serde::de::DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let text = if self.config.trim().is_empty() {
            "{}"
        } else {
            &self.config
        };
        serde_json::from_str(text).map_err(ConfigError)
    }
}

/// Keep a candidate, or drop it with a reason shown to the user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Keep the candidate.
    Keep,
    /// Drop it; the reason lands in logs and events.
    Drop(String),
}

impl Verdict {
    /// Shorthand for a drop with a reason.
    pub fn drop(reason: impl Into<String>) -> Self {
        Verdict::Drop(reason.into())
    }

    /// The candidate is kept.
    pub fn is_keep(&self) -> bool {
        matches!(self, Verdict::Keep)
    }
}

/// Severity of a component log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Warning.
    Warn,
    /// Error.
    Error,
}
