//! Instance types prepared for calls. The controller builds one
//! [`InstanceTypeSet`] per catalog version and reuses it for every filter
//! and scorer call: the guest-facing records (with repeated strings interned
//! into one table) are built once, not per call.

use std::collections::HashMap;

use nodewright_filter::{Accelerator, Architecture, CapacityType, InstanceTypeInfo};

use crate::bindings::wit;

/// Instance types in both forms: plain Rust for native built-ins, WIT records
/// for components.
#[derive(Debug, Clone)]
pub struct InstanceTypeSet {
    plain: Vec<InstanceTypeInfo>,
    wit: wit::InstanceTypes,
}

/// Interns strings into the per-set table.
#[derive(Default)]
struct StringTable {
    index: HashMap<String, u32>,
    strings: Vec<String>,
}

impl StringTable {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        // More than u32::MAX distinct strings cannot occur in a catalog of a
        // few thousand instance types; saturate rather than wrap.
        let i = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
        self.strings.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

impl InstanceTypeSet {
    /// Builds both representations.
    pub fn new(plain: Vec<InstanceTypeInfo>) -> Self {
        let mut table = StringTable::default();
        let items = plain.iter().map(|it| to_wit(it, &mut table)).collect();
        let wit = wit::InstanceTypes {
            strings: table.strings,
            items,
        };
        InstanceTypeSet { plain, wit }
    }

    /// The instance types, in candidate order.
    pub fn types(&self) -> &[InstanceTypeInfo] {
        &self.plain
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.plain.len()
    }

    /// No candidates.
    pub fn is_empty(&self) -> bool {
        self.plain.is_empty()
    }

    /// Number of distinct strings in the shared table (a measure of what a
    /// call lowers into the guest).
    pub fn string_table_len(&self) -> usize {
        self.wit.strings.len()
    }

    pub(crate) fn wit(&self) -> &wit::InstanceTypes {
        &self.wit
    }
}

impl From<Vec<InstanceTypeInfo>> for InstanceTypeSet {
    fn from(plain: Vec<InstanceTypeInfo>) -> Self {
        InstanceTypeSet::new(plain)
    }
}

fn to_wit(it: &InstanceTypeInfo, t: &mut StringTable) -> wit::InstanceType {
    let accel = |a: &Accelerator, t: &mut StringTable| wit::Accelerator {
        name: t.intern(&a.name),
        manufacturer: t.intern(&a.manufacturer),
        count: a.count,
        memory_mib: a.memory_mib,
    };
    wit::InstanceType {
        name: it.name.clone(),
        family: t.intern(&it.family),
        category: t.intern(&it.category),
        generation: it.generation,
        size: t.intern(&it.size),
        architecture: architecture(it.architecture),
        cpu_manufacturer: t.intern(&it.cpu_manufacturer),
        vcpu: it.vcpu,
        memory_mib: it.memory_mib,
        gpus: it.gpus.iter().map(|a| accel(a, t)).collect(),
        accelerators: it.accelerators.iter().map(|a| accel(a, t)).collect(),
        local_nvme_gib: it.local_nvme_gib,
        network_bandwidth_mbps: it.network_bandwidth_mbps,
        ebs_bandwidth_mbps: it.ebs_bandwidth_mbps,
        hypervisor: t.intern(&it.hypervisor),
        bare_metal: it.bare_metal,
        burstable: it.burstable,
        current_generation: it.current_generation,
        encryption_in_transit: it.encryption_in_transit,
        labels: it
            .labels
            .iter()
            .map(|(k, v)| wit::Label {
                key: t.intern(k),
                value: t.intern(v),
            })
            .collect(),
        offerings: it
            .offerings
            .iter()
            .map(|o| wit::Offering {
                zone: t.intern(&o.zone),
                capacity_type: match o.capacity_type {
                    CapacityType::OnDemand => wit::CapacityType::OnDemand,
                    CapacityType::Spot => wit::CapacityType::Spot,
                    CapacityType::Reserved => wit::CapacityType::Reserved,
                },
                price: o.price,
                available: o.available,
                reservation_id: o.reservation_id.as_deref().map(|r| t.intern(r)),
            })
            .collect(),
    }
}

pub(crate) fn architecture(a: Architecture) -> wit::Architecture {
    match a {
        Architecture::Amd64 => wit::Architecture::Amd64,
        Architecture::Arm64 => wit::Architecture::Arm64,
    }
}
