//! Instance types prepared for calls. The controller builds one
//! [`InstanceTypeSet`] per catalog version and reuses it for every filter
//! and scorer call: the column-wise table (each string stored once, nested
//! lists flattened) and its WIT form are built once, not per call.

use nodewright_filter::{
    AcceleratorColumns, Architecture, InstanceType, InstanceTypeInfo, InstanceTypes,
};

use crate::bindings::wit;

/// Instance types in the two forms calls need: the checked table native
/// built-ins read, and its WIT form for components.
#[derive(Debug, Clone)]
pub struct InstanceTypeSet {
    table: InstanceTypes,
    wit: wit::InstanceTypes,
}

impl InstanceTypeSet {
    /// Builds both forms.
    pub fn new(plain: Vec<InstanceTypeInfo>) -> Self {
        let table = InstanceTypes::from_infos(&plain);
        let wit = to_wit(&table);
        InstanceTypeSet { table, wit }
    }

    /// The table native built-ins read.
    pub fn table(&self) -> &InstanceTypes {
        &self.table
    }

    /// Views over [`InstanceTypeSet::table`], as a native module receives
    /// them.
    pub fn views(&self) -> Vec<InstanceType<'_>> {
        self.table.views()
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// No candidates.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Number of distinct strings in the table (a measure of what a call
    /// copies into the guest).
    pub fn string_table_len(&self) -> usize {
        self.table.string_count()
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

fn to_wit(table: &InstanceTypes) -> wit::InstanceTypes {
    let p = table.parts().clone();
    let accelerators = |a: AcceleratorColumns| wit::AcceleratorColumns {
        name: a.name,
        manufacturer: a.manufacturer,
        count: a.count,
        memory_mib: a.memory_mib,
    };
    wit::InstanceTypes {
        text: p.text,
        ends: p.ends,
        name: p.name,
        family: p.family,
        category: p.category,
        generation: p.generation,
        size: p.size,
        architecture: p.architecture,
        cpu_manufacturer: p.cpu_manufacturer,
        vcpu: p.vcpu,
        memory_mib: p.memory_mib,
        local_nvme_gib: p.local_nvme_gib,
        network_bandwidth_mbps: p.network_bandwidth_mbps,
        ebs_bandwidth_mbps: p.ebs_bandwidth_mbps,
        hypervisor: p.hypervisor,
        traits: p.traits,
        gpus: accelerators(p.gpus),
        gpu_ends: p.gpu_ends,
        accelerators: accelerators(p.accelerators),
        accelerator_ends: p.accelerator_ends,
        labels: wit::LabelColumns {
            key: p.labels.key,
            value: p.labels.value,
        },
        label_ends: p.label_ends,
        offerings: wit::OfferingColumns {
            zone: p.offerings.zone,
            capacity_type: p.offerings.capacity_type,
            price: p.offerings.price,
            available: p.offerings.available,
            reservation_id: p.offerings.reservation_id,
        },
        offering_ends: p.offering_ends,
    }
}

pub(crate) fn architecture(a: Architecture) -> wit::Architecture {
    match a {
        Architecture::Amd64 => wit::Architecture::Amd64,
        Architecture::Arm64 => wit::Architecture::Arm64,
    }
}
