//! The instance-type table a call carries, and the borrowed views authors
//! read it through.
//!
//! A call over the full catalog passes ~1,300 instance types with ~10
//! offerings each. Passing them as nested records with their own strings
//! costs tens of thousands of allocations on both sides of the Wasm
//! boundary, which is most of a call's time. The table instead keeps every
//! string once in one text buffer, and every nested list (accelerators,
//! labels, offerings) as one flat list that rows point into with a
//! [`Span`]. The host builds it once per catalog version; a call copies a
//! handful of flat lists. [`InstanceType`] and its `*Ref` companions read it
//! without allocating.

use std::collections::BTreeMap;

use crate::types::{Accelerator, Architecture, CapacityType, InstanceTypeInfo, Offering};

/// Index of a string in the table's text (`str-ref` in the WIT contract).
pub type StrRef = u32;

/// A range of a flat list: `len` items starting at `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// First item.
    pub start: u32,
    /// Number of items.
    pub len: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        let start = self.start as usize;
        start..start.saturating_add(self.len as usize)
    }
}

/// One instance type; strings are [`StrRef`]s, nested lists are [`Span`]s.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)] // Fields mirror `InstanceTypeInfo`, which documents them.
pub struct InstanceTypeRow {
    pub name: StrRef,
    pub family: StrRef,
    pub category: StrRef,
    pub generation: u32,
    pub size: StrRef,
    pub architecture: Architecture,
    pub cpu_manufacturer: StrRef,
    pub vcpu: u32,
    pub memory_mib: u64,
    /// Into [`TableParts::accelerators`].
    pub gpus: Span,
    /// Into [`TableParts::accelerators`].
    pub accelerators: Span,
    pub local_nvme_gib: u64,
    pub network_bandwidth_mbps: u32,
    pub ebs_bandwidth_mbps: u32,
    pub hypervisor: StrRef,
    pub bare_metal: bool,
    pub burstable: bool,
    pub current_generation: bool,
    pub encryption_in_transit: bool,
    /// Into [`TableParts::labels`].
    pub labels: Span,
    /// Into [`TableParts::offerings`].
    pub offerings: Span,
}

/// A GPU or accelerator row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct AcceleratorRow {
    pub name: StrRef,
    pub manufacturer: StrRef,
    pub count: u32,
    pub memory_mib: u64,
}

/// A label row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct LabelRow {
    pub key: StrRef,
    pub value: StrRef,
}

/// An offering row.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub struct OfferingRow {
    pub zone: StrRef,
    pub capacity_type: CapacityType,
    pub price: f64,
    pub available: bool,
    pub reservation_id: Option<StrRef>,
}

/// The raw pieces of a table, exactly as the WIT `instance-types` record
/// carries them. [`InstanceTypes::from_parts`] checks them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableParts {
    /// Every string, concatenated.
    pub text: String,
    /// String `i` is `text[ends[i-1]..ends[i]]` (from 0 for `i == 0`).
    pub ends: Vec<u32>,
    /// One row per candidate, in candidate order.
    pub rows: Vec<InstanceTypeRow>,
    /// GPUs and accelerators of every row.
    pub accelerators: Vec<AcceleratorRow>,
    /// Labels of every row.
    pub labels: Vec<LabelRow>,
    /// Offerings of every row.
    pub offerings: Vec<OfferingRow>,
}

/// A checked instance-type table: every string index and span is in range,
/// so the views below never fail.
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

    /// Checks raw parts received over the wire.
    pub fn from_parts(parts: TableParts) -> Result<InstanceTypes, String> {
        check(&parts)?;
        Ok(InstanceTypes { parts })
    }

    /// The raw parts, for the host to hand to a component.
    pub fn parts(&self) -> &TableParts {
        &self.parts
    }

    /// Number of instance types.
    pub fn len(&self) -> usize {
        self.parts.rows.len()
    }

    /// No instance types.
    pub fn is_empty(&self) -> bool {
        self.parts.rows.is_empty()
    }

    /// Number of distinct strings (what a call copies as text).
    pub fn string_count(&self) -> usize {
        self.parts.ends.len()
    }

    /// A view of every instance type, in candidate order.
    pub fn views(&self) -> Vec<InstanceType<'_>> {
        self.parts
            .rows
            .iter()
            .map(|row| InstanceType { table: self, row })
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

    fn slice<T>(list: &[T], span: Span) -> &[T] {
        list.get(span.range()).unwrap_or(&[])
    }
}

/// Interns strings and appends rows.
#[derive(Default)]
struct Builder {
    parts: TableParts,
    index: std::collections::HashMap<String, StrRef>,
}

impl Builder {
    fn intern(&mut self, s: &str) -> StrRef {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        // A catalog has a few thousand distinct strings of a few bytes, far
        // below u32::MAX; saturate rather than wrap if that ever changes.
        let i = u32::try_from(self.parts.ends.len()).unwrap_or(u32::MAX);
        self.parts.text.push_str(s);
        let end = u32::try_from(self.parts.text.len()).unwrap_or(u32::MAX);
        self.parts.ends.push(end);
        self.index.insert(s.to_string(), i);
        i
    }

    fn span<T>(list: &[T], start: usize) -> Span {
        Span {
            start: u32::try_from(start).unwrap_or(u32::MAX),
            len: u32::try_from(list.len() - start).unwrap_or(u32::MAX),
        }
    }

    fn accelerators(&mut self, list: &[Accelerator]) -> Span {
        let start = self.parts.accelerators.len();
        for a in list {
            let row = AcceleratorRow {
                name: self.intern(&a.name),
                manufacturer: self.intern(&a.manufacturer),
                count: a.count,
                memory_mib: a.memory_mib,
            };
            self.parts.accelerators.push(row);
        }
        Self::span(&self.parts.accelerators, start)
    }

    fn push(&mut self, it: &InstanceTypeInfo) {
        let gpus = self.accelerators(&it.gpus);
        let accelerators = self.accelerators(&it.accelerators);
        let start = self.parts.labels.len();
        for (k, v) in &it.labels {
            let row = LabelRow {
                key: self.intern(k),
                value: self.intern(v),
            };
            self.parts.labels.push(row);
        }
        let labels = Self::span(&self.parts.labels, start);
        let start = self.parts.offerings.len();
        for o in &it.offerings {
            let row = OfferingRow {
                zone: self.intern(&o.zone),
                capacity_type: o.capacity_type,
                price: o.price,
                available: o.available,
                reservation_id: o.reservation_id.as_deref().map(|r| self.intern(r)),
            };
            self.parts.offerings.push(row);
        }
        let offerings = Self::span(&self.parts.offerings, start);
        let row = InstanceTypeRow {
            name: self.intern(&it.name),
            family: self.intern(&it.family),
            category: self.intern(&it.category),
            generation: it.generation,
            size: self.intern(&it.size),
            architecture: it.architecture,
            cpu_manufacturer: self.intern(&it.cpu_manufacturer),
            vcpu: it.vcpu,
            memory_mib: it.memory_mib,
            gpus,
            accelerators,
            local_nvme_gib: it.local_nvme_gib,
            network_bandwidth_mbps: it.network_bandwidth_mbps,
            ebs_bandwidth_mbps: it.ebs_bandwidth_mbps,
            hypervisor: self.intern(&it.hypervisor),
            bare_metal: it.bare_metal,
            burstable: it.burstable,
            current_generation: it.current_generation,
            encryption_in_transit: it.encryption_in_transit,
            labels,
            offerings,
        };
        self.parts.rows.push(row);
    }
}

/// Checks every offset, string index and span.
fn check(p: &TableParts) -> Result<(), String> {
    let mut prev = 0usize;
    for (i, &end) in p.ends.iter().enumerate() {
        let end = end as usize;
        if end < prev || end > p.text.len() || !p.text.is_char_boundary(end) {
            return Err(format!(
                "string {i} ends at byte {end}, outside the {}-byte text or before string {}",
                p.text.len(),
                i.saturating_sub(1)
            ));
        }
        prev = end;
    }
    let strings = p.ends.len();
    let str_ok = |what: &str, r: StrRef| -> Result<(), String> {
        if (r as usize) < strings {
            Ok(())
        } else {
            Err(format!("{what} refers to string {r} of {strings}"))
        }
    };
    let span_ok = |what: &str, s: Span, len: usize| -> Result<(), String> {
        if s.range().end <= len {
            Ok(())
        } else {
            Err(format!(
                "{what} spans items {}..{} of {len}",
                s.start,
                s.range().end
            ))
        }
    };
    for a in &p.accelerators {
        str_ok("accelerator name", a.name)?;
        str_ok("accelerator manufacturer", a.manufacturer)?;
    }
    for l in &p.labels {
        str_ok("label key", l.key)?;
        str_ok("label value", l.value)?;
    }
    for o in &p.offerings {
        str_ok("offering zone", o.zone)?;
        if let Some(r) = o.reservation_id {
            str_ok("offering reservation id", r)?;
        }
    }
    for r in &p.rows {
        for (what, s) in [
            ("name", r.name),
            ("family", r.family),
            ("category", r.category),
            ("size", r.size),
            ("cpu manufacturer", r.cpu_manufacturer),
            ("hypervisor", r.hypervisor),
        ] {
            str_ok(what, s)?;
        }
        span_ok("gpus", r.gpus, p.accelerators.len())?;
        span_ok("accelerators", r.accelerators, p.accelerators.len())?;
        span_ok("labels", r.labels, p.labels.len())?;
        span_ok("offerings", r.offerings, p.offerings.len())?;
    }
    Ok(())
}

/// One instance type, read from an [`InstanceTypes`] table without copying.
#[derive(Debug, Clone, Copy)]
pub struct InstanceType<'a> {
    table: &'a InstanceTypes,
    row: &'a InstanceTypeRow,
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
    /// For example `m7g.large`.
    pub fn name(&self) -> &'a str {
        self.table.str(self.row.name)
    }
    /// For example `m7g`.
    pub fn family(&self) -> &'a str {
        self.table.str(self.row.family)
    }
    /// For example `m`.
    pub fn category(&self) -> &'a str {
        self.table.str(self.row.category)
    }
    /// For example 7.
    pub fn generation(&self) -> u32 {
        self.row.generation
    }
    /// For example `large`.
    pub fn size(&self) -> &'a str {
        self.table.str(self.row.size)
    }
    /// CPU architecture.
    pub fn architecture(&self) -> Architecture {
        self.row.architecture
    }
    /// `aws`, `intel`, `amd`, ...
    pub fn cpu_manufacturer(&self) -> &'a str {
        self.table.str(self.row.cpu_manufacturer)
    }
    /// Number of vCPUs.
    pub fn vcpu(&self) -> u32 {
        self.row.vcpu
    }
    /// Memory, MiB.
    pub fn memory_mib(&self) -> u64 {
        self.row.memory_mib
    }
    /// GPUs.
    pub fn gpus(&self) -> impl ExactSizeIterator<Item = AcceleratorRef<'a>> + 'a {
        self.accelerator_list(self.row.gpus)
    }
    /// Non-GPU accelerators (Inferentia, Trainium, ...).
    pub fn accelerators(&self) -> impl ExactSizeIterator<Item = AcceleratorRef<'a>> + 'a {
        self.accelerator_list(self.row.accelerators)
    }
    /// Local NVMe instance storage, GiB.
    pub fn local_nvme_gib(&self) -> u64 {
        self.row.local_nvme_gib
    }
    /// Baseline network bandwidth, Mbit/s.
    pub fn network_bandwidth_mbps(&self) -> u32 {
        self.row.network_bandwidth_mbps
    }
    /// Baseline EBS bandwidth, Mbit/s.
    pub fn ebs_bandwidth_mbps(&self) -> u32 {
        self.row.ebs_bandwidth_mbps
    }
    /// `nitro`, `xen`, or empty for bare metal.
    pub fn hypervisor(&self) -> &'a str {
        self.table.str(self.row.hypervisor)
    }
    /// A `.metal` size.
    pub fn bare_metal(&self) -> bool {
        self.row.bare_metal
    }
    /// Burstable performance (CPU credits).
    pub fn burstable(&self) -> bool {
        self.row.burstable
    }
    /// EC2 lists the type as current generation.
    pub fn current_generation(&self) -> bool {
        self.row.current_generation
    }
    /// Supports encryption in transit.
    pub fn encryption_in_transit(&self) -> bool {
        self.row.encryption_in_transit
    }

    /// Labels that have no typed accessor, as `(key, value)`.
    pub fn labels(&self) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'a {
        let table = self.table;
        InstanceTypes::slice(&table.parts.labels, self.row.labels)
            .iter()
            .map(move |l| (table.str(l.key), table.str(l.value)))
    }

    /// The value of one label without a typed accessor.
    pub fn label(&self, key: &str) -> Option<&'a str> {
        self.labels().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Where and how the type can be bought.
    pub fn offerings(&self) -> impl ExactSizeIterator<Item = OfferingRef<'a>> + 'a {
        let table = self.table;
        InstanceTypes::slice(&table.parts.offerings, self.row.offerings)
            .iter()
            .map(move |o| OfferingRef {
                zone: table.str(o.zone),
                capacity_type: o.capacity_type,
                price: o.price,
                available: o.available,
                reservation_id: o.reservation_id.map(|r| table.str(r)),
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
        span: Span,
    ) -> impl ExactSizeIterator<Item = AcceleratorRef<'a>> + 'a {
        let table = self.table;
        InstanceTypes::slice(&table.parts.accelerators, span)
            .iter()
            .map(move |a| AcceleratorRef {
                name: table.str(a.name),
                manufacturer: table.str(a.manufacturer),
                count: a.count,
                memory_mib: a.memory_mib,
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
        bad.rows[0].family = 999;
        let err = InstanceTypes::from_parts(bad).unwrap_err();
        assert!(err.contains("family refers to string 999"), "{err}");

        let mut bad = table.parts().clone();
        bad.rows[0].offerings = Span { start: 1, len: 5 };
        let err = InstanceTypes::from_parts(bad).unwrap_err();
        assert!(err.contains("offerings spans items 1..6 of 2"), "{err}");

        let mut bad = table.parts().clone();
        bad.ends[0] = 10_000;
        assert!(InstanceTypes::from_parts(bad).is_err());

        assert!(InstanceTypes::from_parts(table.parts().clone()).is_ok());
    }
}
