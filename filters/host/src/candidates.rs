//! Instance types prepared for calls. The controller builds one
//! [`InstanceTypeSet`] per catalog version and reuses it for every filter
//! and scorer call: the table (each string stored once, nested lists
//! flattened) and its WIT form are built once, not per call.

use nodewright_filter::{
    AcceleratorRow, Architecture, CapacityType, InstanceType, InstanceTypeInfo, InstanceTypes, Span,
};

use crate::bindings::wit;

/// Instance types in the three forms calls need: plain Rust for reports,
/// the checked table native built-ins read, and its WIT form for components.
#[derive(Debug, Clone)]
pub struct InstanceTypeSet {
    plain: Vec<InstanceTypeInfo>,
    table: InstanceTypes,
    wit: wit::InstanceTypes,
}

impl InstanceTypeSet {
    /// Builds every form.
    pub fn new(plain: Vec<InstanceTypeInfo>) -> Self {
        let table = InstanceTypes::from_infos(&plain);
        let wit = to_wit(&table);
        InstanceTypeSet { plain, table, wit }
    }

    /// The instance types, in candidate order.
    pub fn types(&self) -> &[InstanceTypeInfo] {
        &self.plain
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
        self.plain.len()
    }

    /// No candidates.
    pub fn is_empty(&self) -> bool {
        self.plain.is_empty()
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
    let p = table.parts();
    let span = |s: Span| wit::Span {
        start: s.start,
        len: s.len,
    };
    let accel = |a: &AcceleratorRow| wit::Accelerator {
        name: a.name,
        manufacturer: a.manufacturer,
        count: a.count,
        memory_mib: a.memory_mib,
    };
    wit::InstanceTypes {
        text: p.text.clone(),
        ends: p.ends.clone(),
        items: p
            .rows
            .iter()
            .map(|r| wit::InstanceType {
                name: r.name,
                family: r.family,
                category: r.category,
                generation: r.generation,
                size: r.size,
                architecture: architecture(r.architecture),
                cpu_manufacturer: r.cpu_manufacturer,
                vcpu: r.vcpu,
                memory_mib: r.memory_mib,
                gpus: span(r.gpus),
                accelerators: span(r.accelerators),
                local_nvme_gib: r.local_nvme_gib,
                network_bandwidth_mbps: r.network_bandwidth_mbps,
                ebs_bandwidth_mbps: r.ebs_bandwidth_mbps,
                hypervisor: r.hypervisor,
                bare_metal: r.bare_metal,
                burstable: r.burstable,
                current_generation: r.current_generation,
                encryption_in_transit: r.encryption_in_transit,
                labels: span(r.labels),
                offerings: span(r.offerings),
            })
            .collect(),
        accelerators: p.accelerators.iter().map(accel).collect(),
        labels: p
            .labels
            .iter()
            .map(|l| wit::Label {
                key: l.key,
                value: l.value,
            })
            .collect(),
        offerings: p
            .offerings
            .iter()
            .map(|o| wit::Offering {
                zone: o.zone,
                capacity_type: match o.capacity_type {
                    CapacityType::OnDemand => wit::CapacityType::OnDemand,
                    CapacityType::Spot => wit::CapacityType::Spot,
                    CapacityType::Reserved => wit::CapacityType::Reserved,
                },
                price: o.price,
                available: o.available,
                reservation_id: o.reservation_id,
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
