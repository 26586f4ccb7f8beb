//! The instance-type table a call carries, and the borrowed views authors
//! read it through.
//!
//! A call over the full catalog passes ~1,400 instance types with ~10
//! offerings each. Passed as records, every field of every item is written
//! into the guest one at a time and read back one at a time, which was most
//! of a call's time. The table is instead column-wise: one list of plain
//! numbers per field, which both sides copy in bulk. Every string is stored
//! once in one text buffer and referred to by index ([`StrRef`]); nested
//! lists (GPUs, accelerators, labels, offerings) are flat columns with an
//! `*_ends` column giving where each instance type's items end. The host
//! builds the table once per catalog version. [`InstanceType`] and its
//! `*Ref` companions read it without allocating.

use std::collections::BTreeMap;

use crate::types::{Accelerator, Architecture, CapacityType, InstanceTypeInfo, Offering};

/// Index of a string in the table's text (`str-ref` in the WIT contract).
pub type StrRef = u32;

/// Bit in [`TableParts::traits`]: a `.metal` size.
pub const TRAIT_BARE_METAL: u8 = 1;
/// Bit in [`TableParts::traits`]: burstable performance (CPU credits).
pub const TRAIT_BURSTABLE: u8 = 1 << 1;
/// Bit in [`TableParts::traits`]: EC2 lists the type as current generation.
pub const TRAIT_CURRENT_GENERATION: u8 = 1 << 2;
/// Bit in [`TableParts::traits`]: supports encryption in transit.
pub const TRAIT_ENCRYPTION_IN_TRANSIT: u8 = 1 << 3;

/// Column codes of [`Architecture`]: its position in the WIT enum.
fn architecture_code(a: Architecture) -> u8 {
    match a {
        Architecture::Amd64 => 0,
        Architecture::Arm64 => 1,
    }
}

fn architecture_from(code: u8) -> Architecture {
    if code == 1 {
        Architecture::Arm64
    } else {
        Architecture::Amd64
    }
}

/// Column codes of [`CapacityType`]: 0 on-demand, 1 spot, 2 reserved.
fn capacity_type_code(c: CapacityType) -> u8 {
    match c {
        CapacityType::OnDemand => 0,
        CapacityType::Spot => 1,
        CapacityType::Reserved => 2,
    }
}

fn capacity_type_from(code: u8) -> CapacityType {
    match code {
        1 => CapacityType::Spot,
        2 => CapacityType::Reserved,
        _ => CapacityType::OnDemand,
    }
}

/// GPUs or other accelerators, one entry per device kind.
#[derive(Debug, Clone, Default, PartialEq)]
#[allow(missing_docs)] // Mirrors `Accelerator`, which documents the fields.
pub struct AcceleratorColumns {
    pub name: Vec<StrRef>,
    pub manufacturer: Vec<StrRef>,
    pub count: Vec<u32>,
    pub memory_mib: Vec<u64>,
}

/// Labels without a typed accessor.
#[derive(Debug, Clone, Default, PartialEq)]
#[allow(missing_docs)]
pub struct LabelColumns {
    pub key: Vec<StrRef>,
    pub value: Vec<StrRef>,
}

/// Offerings.
#[derive(Debug, Clone, Default, PartialEq)]
#[allow(missing_docs)] // Mirrors `Offering`, which documents the fields.
pub struct OfferingColumns {
    pub zone: Vec<StrRef>,
    /// 0 on-demand, 1 spot, 2 reserved.
    pub capacity_type: Vec<u8>,
    pub price: Vec<f64>,
    /// 0 or 1.
    pub available: Vec<u8>,
    /// The empty string for offerings that are not reserved.
    pub reservation_id: Vec<StrRef>,
}

/// The raw columns of a table, exactly as the WIT `instance-types` record
/// carries them. [`InstanceTypes::from_parts`] checks them.
#[derive(Debug, Clone, Default, PartialEq)]
#[allow(missing_docs)] // Per-type columns mirror `InstanceTypeInfo`.
pub struct TableParts {
    /// Every distinct string, concatenated.
    pub text: String,
    /// String `i` is `text[ends[i-1]..ends[i]]` (from 0 for `i == 0`).
    pub ends: Vec<u32>,
    pub name: Vec<StrRef>,
    pub family: Vec<StrRef>,
    pub category: Vec<StrRef>,
    pub generation: Vec<u32>,
    pub size: Vec<StrRef>,
    /// 0 amd64, 1 arm64.
    pub architecture: Vec<u8>,
    pub cpu_manufacturer: Vec<StrRef>,
    pub vcpu: Vec<u32>,
    pub memory_mib: Vec<u64>,
    pub local_nvme_gib: Vec<u64>,
    pub network_bandwidth_mbps: Vec<u32>,
    pub ebs_bandwidth_mbps: Vec<u32>,
    pub hypervisor: Vec<StrRef>,
    /// `TRAIT_*` bits.
    pub traits: Vec<u8>,
    pub gpus: AcceleratorColumns,
    /// Type `i`'s GPUs are `gpus[gpu_ends[i-1]..gpu_ends[i]]`.
    pub gpu_ends: Vec<u32>,
    pub accelerators: AcceleratorColumns,
    /// Type `i`'s accelerators end at `accelerator_ends[i]`.
    pub accelerator_ends: Vec<u32>,
    pub labels: LabelColumns,
    /// Type `i`'s labels end at `label_ends[i]`.
    pub label_ends: Vec<u32>,
    pub offerings: OfferingColumns,
    /// Type `i`'s offerings end at `offering_ends[i]`.
    pub offering_ends: Vec<u32>,
}

/// A checked instance-type table: every column has its expected length and
/// every string index and end offset is in range, so the views below never
/// fail.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceTypes {
    parts: TableParts,
}

impl InstanceTypes {
    /// Builds the table from plain instance types, storing each distinct
    /// string once.
    pub fn from_infos(infos: &[InstanceTypeInfo]) -> InstanceTypes {
        let mut b = Builder::default();
        for it in infos {
            b.push(it);
        }
        InstanceTypes { parts: b.parts }
    }

    /// Checks raw columns received over the wire.
    pub fn from_parts(parts: TableParts) -> Result<InstanceTypes, String> {
        check(&parts)?;
        Ok(InstanceTypes { parts })
    }

    /// The raw columns, for the host to hand to a component.
    pub fn parts(&self) -> &TableParts {
        &self.parts
    }

    /// Number of instance types.
    pub fn len(&self) -> usize {
        self.parts.name.len()
    }

    /// No instance types.
    pub fn is_empty(&self) -> bool {
        self.parts.name.is_empty()
    }

    /// Number of distinct strings (what a call copies as text).
    pub fn string_count(&self) -> usize {
        self.parts.ends.len()
    }

    /// A view of every instance type, in candidate order.
    pub fn views(&self) -> Vec<InstanceType<'_>> {
        (0..self.len())
            .map(|i| InstanceType { table: self, i })
            .collect()
    }

    fn str(&self, i: StrRef) -> &str {
        let i = i as usize;
        let end = self.parts.ends.get(i).copied().unwrap_or(0) as usize;
        let start = match i.checked_sub(1) {
            Some(p) => self.parts.ends.get(p).copied().unwrap_or(0) as usize,
            None => 0,
        };
        self.parts.text.get(start..end).unwrap_or("")
    }
}

/// Item `i` of a column; checked tables always have it.
fn at<T: Copy + Default>(column: &[T], i: usize) -> T {
    column.get(i).copied().unwrap_or_default()
}

/// The items of instance type `i` in a flat column with an ends column.
fn items(ends: &[u32], i: usize) -> std::ops::Range<usize> {
    let end = at(ends, i) as usize;
    let start = match i.checked_sub(1) {
        Some(p) => at(ends, p) as usize,
        None => 0,
    };
    start..end.max(start)
}

/// Interns strings and appends columns.
#[derive(Default)]
struct Builder {
    parts: TableParts,
    index: std::collections::HashMap<String, StrRef>,
}

fn end_of<T>(column: &[T]) -> u32 {
    // A catalog has a few thousand types and strings, far below u32::MAX;
    // saturate rather than wrap if that ever changes.
    u32::try_from(column.len()).unwrap_or(u32::MAX)
}

impl Builder {
    fn intern(&mut self, s: &str) -> StrRef {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = end_of(&self.parts.ends);
        self.parts.text.push_str(s);
        self.parts.ends.push(end_of(self.parts.text.as_bytes()));
        self.index.insert(s.to_string(), i);
        i
    }

    fn accelerators(&mut self, list: &[Accelerator], gpus: bool) {
        for a in list {
            let name = self.intern(&a.name);
            let manufacturer = self.intern(&a.manufacturer);
            let cols = if gpus {
                &mut self.parts.gpus
            } else {
                &mut self.parts.accelerators
            };
            cols.name.push(name);
            cols.manufacturer.push(manufacturer);
            cols.count.push(a.count);
            cols.memory_mib.push(a.memory_mib);
        }
        let (cols, ends) = if gpus {
            (&self.parts.gpus, &mut self.parts.gpu_ends)
        } else {
            (&self.parts.accelerators, &mut self.parts.accelerator_ends)
        };
        ends.push(end_of(&cols.name));
    }

    fn push(&mut self, it: &InstanceTypeInfo) {
        self.accelerators(&it.gpus, true);
        self.accelerators(&it.accelerators, false);
        for (k, v) in &it.labels {
            let key = self.intern(k);
            let value = self.intern(v);
            self.parts.labels.key.push(key);
            self.parts.labels.value.push(value);
        }
        self.parts.label_ends.push(end_of(&self.parts.labels.key));
        for o in &it.offerings {
            let zone = self.intern(&o.zone);
            let reservation = self.intern(o.reservation_id.as_deref().unwrap_or(""));
            let cols = &mut self.parts.offerings;
            cols.zone.push(zone);
            cols.capacity_type.push(capacity_type_code(o.capacity_type));
            cols.price.push(o.price);
            cols.available.push(u8::from(o.available));
            cols.reservation_id.push(reservation);
        }
        self.parts
            .offering_ends
            .push(end_of(&self.parts.offerings.zone));
        let strings = [
            &it.name,
            &it.family,
            &it.category,
            &it.size,
            &it.cpu_manufacturer,
            &it.hypervisor,
        ]
        .map(|s| self.intern(s));
        let p = &mut self.parts;
        for (column, value) in [
            &mut p.name,
            &mut p.family,
            &mut p.category,
            &mut p.size,
            &mut p.cpu_manufacturer,
            &mut p.hypervisor,
        ]
        .into_iter()
        .zip(strings)
        {
            column.push(value);
        }
        p.generation.push(it.generation);
        p.architecture.push(architecture_code(it.architecture));
        p.vcpu.push(it.vcpu);
        p.memory_mib.push(it.memory_mib);
        p.local_nvme_gib.push(it.local_nvme_gib);
        p.network_bandwidth_mbps.push(it.network_bandwidth_mbps);
        p.ebs_bandwidth_mbps.push(it.ebs_bandwidth_mbps);
        let mut traits = 0;
        for (set, bit) in [
            (it.bare_metal, TRAIT_BARE_METAL),
            (it.burstable, TRAIT_BURSTABLE),
            (it.current_generation, TRAIT_CURRENT_GENERATION),
            (it.encryption_in_transit, TRAIT_ENCRYPTION_IN_TRANSIT),
        ] {
            if set {
                traits |= bit;
            }
        }
        p.traits.push(traits);
    }
}

/// Checks column lengths, end offsets, string indices and codes.
fn check(p: &TableParts) -> Result<(), String> {
    let mut prev = 0usize;
    for (i, &end) in p.ends.iter().enumerate() {
        let end = end as usize;
        if end < prev || end > p.text.len() || !p.text.is_char_boundary(end) {
            return Err(format!(
                "string {i} ends at byte {end}, outside the {}-byte text or before the string before it",
                p.text.len()
            ));
        }
        prev = end;
    }
    let n = p.name.len();
    let len_ok = |what: &str, len: usize, want: usize| -> Result<(), String> {
        if len == want {
            Ok(())
        } else {
            Err(format!("column {what} has {len} entries, expected {want}"))
        }
    };
    for (what, len) in [
        ("family", p.family.len()),
        ("category", p.category.len()),
        ("generation", p.generation.len()),
        ("size", p.size.len()),
        ("architecture", p.architecture.len()),
        ("cpu-manufacturer", p.cpu_manufacturer.len()),
        ("vcpu", p.vcpu.len()),
        ("memory-mib", p.memory_mib.len()),
        ("local-nvme-gib", p.local_nvme_gib.len()),
        ("network-bandwidth-mbps", p.network_bandwidth_mbps.len()),
        ("ebs-bandwidth-mbps", p.ebs_bandwidth_mbps.len()),
        ("hypervisor", p.hypervisor.len()),
        ("traits", p.traits.len()),
        ("gpu-ends", p.gpu_ends.len()),
        ("accelerator-ends", p.accelerator_ends.len()),
        ("label-ends", p.label_ends.len()),
        ("offering-ends", p.offering_ends.len()),
    ] {
        len_ok(what, len, n)?;
    }
    let ends_ok = |what: &str, ends: &[u32], items: usize| -> Result<(), String> {
        let mut prev = 0u32;
        for &end in ends {
            if end < prev {
                return Err(format!("{what} decreases ({end} after {prev})"));
            }
            prev = end;
        }
        len_ok(&format!("{what} total"), prev as usize, items)
    };
    for (what, cols, ends) in [
        ("gpus", &p.gpus, &p.gpu_ends),
        ("accelerators", &p.accelerators, &p.accelerator_ends),
    ] {
        let m = cols.name.len();
        len_ok(&format!("{what}.manufacturer"), cols.manufacturer.len(), m)?;
        len_ok(&format!("{what}.count"), cols.count.len(), m)?;
        len_ok(&format!("{what}.memory-mib"), cols.memory_mib.len(), m)?;
        ends_ok(&format!("{what} ends"), ends, m)?;
    }
    len_ok("labels.value", p.labels.value.len(), p.labels.key.len())?;
    ends_ok("label-ends", &p.label_ends, p.labels.key.len())?;
    let o = &p.offerings;
    let m = o.zone.len();
    len_ok("offerings.capacity-type", o.capacity_type.len(), m)?;
    len_ok("offerings.price", o.price.len(), m)?;
    len_ok("offerings.available", o.available.len(), m)?;
    len_ok("offerings.reservation-id", o.reservation_id.len(), m)?;
    ends_ok("offering-ends", &p.offering_ends, m)?;
    if let Some(c) = o.capacity_type.iter().find(|&&c| c > 2) {
        return Err(format!(
            "offering capacity-type code {c}; expected 0, 1 or 2"
        ));
    }
    if let Some(a) = p.architecture.iter().find(|&&a| a > 1) {
        return Err(format!("architecture code {a}; expected 0 or 1"));
    }
    let strings = p.ends.len();
    let refs: [(&str, &[StrRef]); 14] = [
        ("name", &p.name),
        ("family", &p.family),
        ("category", &p.category),
        ("size", &p.size),
        ("cpu-manufacturer", &p.cpu_manufacturer),
        ("hypervisor", &p.hypervisor),
        ("gpus.name", &p.gpus.name),
        ("gpus.manufacturer", &p.gpus.manufacturer),
        ("accelerators.name", &p.accelerators.name),
        ("accelerators.manufacturer", &p.accelerators.manufacturer),
        ("labels.key", &p.labels.key),
        ("labels.value", &p.labels.value),
        ("offerings.zone", &o.zone),
        ("offerings.reservation-id", &o.reservation_id),
    ];
    for (what, column) in refs {
        if let Some(r) = column.iter().find(|&&r| r as usize >= strings) {
            return Err(format!("{what} refers to string {r} of {strings}"));
        }
    }
    Ok(())
}

/// One instance type, read from an [`InstanceTypes`] table without copying.
#[derive(Debug, Clone, Copy)]
pub struct InstanceType<'a> {
    table: &'a InstanceTypes,
    i: usize,
}

/// A GPU or other accelerator of an [`InstanceType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceleratorRef<'a> {
    /// For example `a10g`, `inferentia2`.
    pub name: &'a str,
    /// For example `nvidia`, `aws`.
    pub manufacturer: &'a str,
    /// Number of devices.
    pub count: u32,
    /// Memory per device, MiB (0 when unknown).
    pub memory_mib: u64,
}

/// One zone and capacity type an [`InstanceType`] can be bought in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OfferingRef<'a> {
    /// Availability zone name, for example `us-east-1a`.
    pub zone: &'a str,
    /// How it is bought.
    pub capacity_type: CapacityType,
    /// USD per hour.
    pub price: f64,
    /// False after an insufficient-capacity error or when not offered.
    pub available: bool,
    /// Capacity reservation id for reserved offerings.
    pub reservation_id: Option<&'a str>,
}

impl<'a> InstanceType<'a> {
    fn text(&self, column: &[StrRef]) -> &'a str {
        let table = self.table;
        table.str(at(column, self.i))
    }

    fn has(&self, bit: u8) -> bool {
        at(&self.table.parts.traits, self.i) & bit != 0
    }

    /// For example `m7g.large`.
    pub fn name(&self) -> &'a str {
        self.text(&self.table.parts.name)
    }
    /// For example `m7g`.
    pub fn family(&self) -> &'a str {
        self.text(&self.table.parts.family)
    }
    /// For example `m`.
    pub fn category(&self) -> &'a str {
        self.text(&self.table.parts.category)
    }
    /// For example 7.
    pub fn generation(&self) -> u32 {
        at(&self.table.parts.generation, self.i)
    }
    /// For example `large`.
    pub fn size(&self) -> &'a str {
        self.text(&self.table.parts.size)
    }
    /// CPU architecture.
    pub fn architecture(&self) -> Architecture {
        architecture_from(at(&self.table.parts.architecture, self.i))
    }
    /// `aws`, `intel`, `amd`, ...
    pub fn cpu_manufacturer(&self) -> &'a str {
        self.text(&self.table.parts.cpu_manufacturer)
    }
    /// Number of vCPUs.
    pub fn vcpu(&self) -> u32 {
        at(&self.table.parts.vcpu, self.i)
    }
    /// Memory, MiB.
    pub fn memory_mib(&self) -> u64 {
        at(&self.table.parts.memory_mib, self.i)
    }
    /// GPUs.
    pub fn gpus(&self) -> impl ExactSizeIterator<Item = AcceleratorRef<'a>> + 'a {
        let p = &self.table.parts;
        self.accelerator_list(&p.gpus, &p.gpu_ends)
    }
    /// Non-GPU accelerators (Inferentia, Trainium, ...).
    pub fn accelerators(&self) -> impl ExactSizeIterator<Item = AcceleratorRef<'a>> + 'a {
        let p = &self.table.parts;
        self.accelerator_list(&p.accelerators, &p.accelerator_ends)
    }
    /// Local NVMe instance storage, GiB.
    pub fn local_nvme_gib(&self) -> u64 {
        at(&self.table.parts.local_nvme_gib, self.i)
    }
    /// Baseline network bandwidth, Mbit/s.
    pub fn network_bandwidth_mbps(&self) -> u32 {
        at(&self.table.parts.network_bandwidth_mbps, self.i)
    }
    /// Baseline EBS bandwidth, Mbit/s.
    pub fn ebs_bandwidth_mbps(&self) -> u32 {
        at(&self.table.parts.ebs_bandwidth_mbps, self.i)
    }
    /// `nitro`, `xen`, or empty for bare metal.
    pub fn hypervisor(&self) -> &'a str {
        self.text(&self.table.parts.hypervisor)
    }
    /// A `.metal` size.
    pub fn bare_metal(&self) -> bool {
        self.has(TRAIT_BARE_METAL)
    }
    /// Burstable performance (CPU credits).
    pub fn burstable(&self) -> bool {
        self.has(TRAIT_BURSTABLE)
    }
    /// EC2 lists the type as current generation.
    pub fn current_generation(&self) -> bool {
        self.has(TRAIT_CURRENT_GENERATION)
    }
    /// Supports encryption in transit.
    pub fn encryption_in_transit(&self) -> bool {
        self.has(TRAIT_ENCRYPTION_IN_TRANSIT)
    }

    /// Labels that have no typed accessor, as `(key, value)`.
    pub fn labels(&self) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'a {
        let table = self.table;
        let l = &table.parts.labels;
        items(&table.parts.label_ends, self.i)
            .map(move |j| (table.str(at(&l.key, j)), table.str(at(&l.value, j))))
    }

    /// The value of one label without a typed accessor.
    pub fn label(&self, key: &str) -> Option<&'a str> {
        self.labels().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Where and how the type can be bought.
    pub fn offerings(&self) -> impl ExactSizeIterator<Item = OfferingRef<'a>> + 'a {
        let table = self.table;
        let o = &table.parts.offerings;
        items(&table.parts.offering_ends, self.i).map(move |j| {
            let reservation = table.str(at(&o.reservation_id, j));
            OfferingRef {
                zone: table.str(at(&o.zone, j)),
                capacity_type: capacity_type_from(at(&o.capacity_type, j)),
                price: at(&o.price, j),
                available: at(&o.available, j) != 0,
                reservation_id: (!reservation.is_empty()).then_some(reservation),
            }
        })
    }

    /// A `*-flex` family (`m7i-flex`, `c7i-flex`, ...).
    pub fn is_flex(&self) -> bool {
        self.family().ends_with("-flex")
    }

    /// Total GPU memory across all GPUs, MiB.
    pub fn total_gpu_memory_mib(&self) -> u64 {
        self.gpus()
            .map(|g| g.memory_mib.saturating_mul(u64::from(g.count)))
            .fold(0, u64::saturating_add)
    }

    /// Cheapest available offering price, USD per hour.
    pub fn cheapest_available_price(&self) -> Option<f64> {
        self.offerings()
            .filter(|o| o.available)
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    }

    /// The node labels Karpenter derives from this instance type; see
    /// [`InstanceTypeInfo::well_known_labels`].
    pub fn well_known_labels(&self) -> BTreeMap<String, String> {
        self.to_info().well_known_labels()
    }

    /// An owned copy, for tests and messages.
    pub fn to_info(&self) -> InstanceTypeInfo {
        let owned = |a: AcceleratorRef<'_>| Accelerator {
            name: a.name.to_string(),
            manufacturer: a.manufacturer.to_string(),
            count: a.count,
            memory_mib: a.memory_mib,
        };
        InstanceTypeInfo {
            name: self.name().to_string(),
            family: self.family().to_string(),
            category: self.category().to_string(),
            generation: self.generation(),
            size: self.size().to_string(),
            architecture: self.architecture(),
            cpu_manufacturer: self.cpu_manufacturer().to_string(),
            vcpu: self.vcpu(),
            memory_mib: self.memory_mib(),
            gpus: self.gpus().map(owned).collect(),
            accelerators: self.accelerators().map(owned).collect(),
            local_nvme_gib: self.local_nvme_gib(),
            network_bandwidth_mbps: self.network_bandwidth_mbps(),
            ebs_bandwidth_mbps: self.ebs_bandwidth_mbps(),
            hypervisor: self.hypervisor().to_string(),
            bare_metal: self.bare_metal(),
            burstable: self.burstable(),
            current_generation: self.current_generation(),
            encryption_in_transit: self.encryption_in_transit(),
            labels: self
                .labels()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            offerings: self
                .offerings()
                .map(|o| Offering {
                    zone: o.zone.to_string(),
                    capacity_type: o.capacity_type,
                    price: o.price,
                    available: o.available,
                    reservation_id: o.reservation_id.map(str::to_string),
                })
                .collect(),
        }
    }

    fn accelerator_list(
        &self,
        cols: &'a AcceleratorColumns,
        ends: &'a [u32],
    ) -> impl ExactSizeIterator<Item = AcceleratorRef<'a>> + 'a {
        let table = self.table;
        items(ends, self.i).map(move |j| AcceleratorRef {
            name: table.str(at(&cols.name, j)),
            manufacturer: table.str(at(&cols.manufacturer, j)),
            count: at(&cols.count, j),
            memory_mib: at(&cols.memory_mib, j),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, family: &str) -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: name.to_string(),
            family: family.to_string(),
            category: family[..1].to_string(),
            generation: 7,
            size: "large".to_string(),
            architecture: Architecture::Amd64,
            cpu_manufacturer: "intel".to_string(),
            vcpu: 2,
            memory_mib: 8192,
            gpus: vec![Accelerator {
                name: "a10g".to_string(),
                manufacturer: "nvidia".to_string(),
                count: 2,
                memory_mib: 24576,
            }],
            accelerators: Vec::new(),
            local_nvme_gib: 0,
            network_bandwidth_mbps: 781,
            ebs_bandwidth_mbps: 650,
            hypervisor: "nitro".to_string(),
            bare_metal: false,
            burstable: false,
            current_generation: true,
            encryption_in_transit: true,
            labels: BTreeMap::from([("example.com/team".to_string(), "web".to_string())]),
            offerings: vec![
                Offering {
                    zone: "us-east-1a".to_string(),
                    capacity_type: CapacityType::OnDemand,
                    price: 0.2,
                    available: true,
                    reservation_id: None,
                },
                Offering {
                    zone: "us-east-1b".to_string(),
                    capacity_type: CapacityType::Reserved,
                    price: 0.1,
                    available: false,
                    reservation_id: Some("cr-1".to_string()),
                },
            ],
        }
    }

    #[test]
    fn views_read_back_what_was_stored() {
        let infos = vec![info("m7i.large", "m7i"), info("c7i-flex.large", "c7i-flex")];
        let table = InstanceTypes::from_infos(&infos);
        let back: Vec<InstanceTypeInfo> = table.views().iter().map(InstanceType::to_info).collect();
        assert_eq!(back, infos);
        let views = table.views();
        assert!(views[1].is_flex() && !views[0].is_flex());
        assert_eq!(views[0].label("example.com/team"), Some("web"));
        assert_eq!(views[0].label("missing"), None);
        assert_eq!(views[0].total_gpu_memory_mib(), 2 * 24576);
        assert_eq!(views[0].cheapest_available_price(), Some(0.2));
    }

    #[test]
    fn shared_strings_are_stored_once() {
        let infos = vec![info("m7i.large", "m7i"), info("m7i.xlarge", "m7i")];
        let table = InstanceTypes::from_infos(&infos);
        // Both names differ; everything else is shared.
        let once = InstanceTypes::from_infos(&infos[..1]).string_count();
        assert_eq!(table.string_count(), once + 1);
    }

    #[test]
    fn parts_out_of_range_are_refused() {
        let table = InstanceTypes::from_infos(&[info("m7i.large", "m7i")]);
        let mut bad = table.parts().clone();
        bad.family[0] = 999;
        let err = InstanceTypes::from_parts(bad).unwrap_err();
        assert!(err.contains("family refers to string 999"), "{err}");

        let mut bad = table.parts().clone();
        bad.offering_ends[0] = 5;
        let err = InstanceTypes::from_parts(bad).unwrap_err();
        assert!(
            err.contains("offering-ends total has 5 entries, expected 2"),
            "{err}"
        );

        let mut bad = table.parts().clone();
        bad.vcpu.pop();
        let err = InstanceTypes::from_parts(bad).unwrap_err();
        assert!(
            err.contains("column vcpu has 0 entries, expected 1"),
            "{err}"
        );

        let mut bad = table.parts().clone();
        bad.offerings.capacity_type[0] = 7;
        assert!(InstanceTypes::from_parts(bad).is_err());

        let mut bad = table.parts().clone();
        bad.ends[0] = 10_000;
        assert!(InstanceTypes::from_parts(bad).is_err());

        assert!(InstanceTypes::from_parts(table.parts().clone()).is_ok());
    }
}
