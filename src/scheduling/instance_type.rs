//! Instance types and their offerings as the scheduler sees them: plain data
//! built by a provider's resolver (e.g. the EC2 catalog) before a solve.

use std::fmt;

use super::labels;
use super::requirements::{Requirement, Requirements};
use super::resources::Resources;

/// How an instance is paid for; the values of `karpenter.sh/capacity-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapacityType {
    /// Pay as you go.
    OnDemand,
    /// Interruptible spare capacity.
    Spot,
    /// A capacity reservation the account already pays for.
    Reserved,
}

impl CapacityType {
    /// Karpenter's label value (`on-demand`, `spot`, `reserved`).
    pub fn label_value(self) -> &'static str {
        match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
            CapacityType::Reserved => "reserved",
        }
    }

    /// Parses a label value.
    pub fn from_label_value(value: &str) -> Option<Self> {
        match value {
            "on-demand" => Some(CapacityType::OnDemand),
            "spot" => Some(CapacityType::Spot),
            "reserved" => Some(CapacityType::Reserved),
            _ => None,
        }
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label_value())
    }
}

/// One place and way an instance type can be bought.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    /// Availability zone name (value of `topology.kubernetes.io/zone`).
    pub zone: String,
    /// On-demand, spot or reserved.
    pub capacity_type: CapacityType,
    /// Hourly price in the account's currency that every decision
    /// minimises: the catalog's, or what a NodeOverlay made of it.
    pub price: f64,
    /// The catalog's hourly price, kept when an overlay changes `price`
    /// (plans show both; overlays adjust this one, not each other's).
    pub list_price: f64,
    /// True when the price is a fallback estimate rather than a live quote.
    pub price_is_estimate: bool,
    /// False when the offering is known to be unusable (ICE, not offered, ...).
    pub available: bool,
    /// The capacity reservation this offering draws from (reserved only).
    pub reservation_id: Option<String>,
    /// Instances still free in that reservation (reserved only).
    pub reservation_capacity: Option<u32>,
}

impl Offering {
    /// Whether `requirements` allow this offering's zone, capacity type
    /// and reservation (an unconstrained key allows any); availability is
    /// the caller's to check.
    pub fn allowed_by(&self, requirements: &super::Requirements) -> bool {
        let allows = |key: &str, value: &str| requirements.get(key).is_none_or(|r| r.has(value));
        allows(labels::ZONE, &self.zone)
            && allows(labels::CAPACITY_TYPE, self.capacity_type.label_value())
            && self
                .reservation_id
                .as_deref()
                .is_none_or(|id| allows(labels::CAPACITY_RESERVATION_ID, id))
    }

    /// An available on-demand or spot offering with a known price.
    pub fn new(zone: &str, capacity_type: CapacityType, price: f64) -> Self {
        Offering {
            zone: zone.to_string(),
            capacity_type,
            price,
            list_price: price,
            price_is_estimate: false,
            available: true,
            reservation_id: None,
            reservation_capacity: None,
        }
    }

    /// An available reserved offering drawing on `reservation_id` with `capacity` free instances.
    pub fn reserved(zone: &str, price: f64, reservation_id: &str, capacity: u32) -> Self {
        Offering {
            reservation_id: Some(reservation_id.to_string()),
            reservation_capacity: Some(capacity),
            ..Offering::new(zone, CapacityType::Reserved, price)
        }
    }
}

/// What a node's kubelet and system keep for themselves: capacity minus this
/// is what pods can use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overhead {
    /// `kubeReserved`.
    pub kube_reserved: Resources,
    /// `systemReserved`.
    pub system_reserved: Resources,
    /// Hard eviction thresholds.
    pub eviction_threshold: Resources,
}

impl Overhead {
    /// Sum of all three parts.
    pub fn total(&self) -> Resources {
        self.kube_reserved
            .plus(&self.system_reserved)
            .plus(&self.eviction_threshold)
    }
}

/// A machine shape a NodePool may launch, with every label it would carry
/// expressed as a requirement.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    /// Name, e.g. `m5.large` (the value of `node.kubernetes.io/instance-type`).
    pub name: String,
    /// Every label as a requirement: single-value `In` for most keys, zone and
    /// capacity type `In` over the offerings, `DoesNotExist` for labels the type lacks.
    pub requirements: Requirements,
    /// Where and how it can be bought.
    pub offerings: Vec<Offering>,
    /// Raw capacity of one node.
    pub capacity: Resources,
    /// Reserved by kubelet/system/eviction.
    pub overhead: Overhead,
}

impl InstanceType {
    /// Builds an instance type. `requirements` need not repeat the instance-type,
    /// zone or capacity-type keys: they are derived from `name` and `offerings`
    /// when missing.
    pub fn new(
        name: &str,
        mut requirements: Requirements,
        offerings: Vec<Offering>,
        capacity: Resources,
        overhead: Overhead,
    ) -> Self {
        if !requirements.has(labels::INSTANCE_TYPE) {
            requirements.add(Requirement::single(labels::INSTANCE_TYPE, name));
        }
        if !requirements.has(labels::ZONE) {
            let zones: Vec<String> = offerings.iter().map(|o| o.zone.clone()).collect();
            requirements.add(zone_or_capacity_requirement(labels::ZONE, zones));
        }
        if !requirements.has(labels::CAPACITY_TYPE) {
            let types: Vec<String> = offerings
                .iter()
                .map(|o| o.capacity_type.label_value().to_string())
                .collect();
            requirements.add(zone_or_capacity_requirement(labels::CAPACITY_TYPE, types));
        }
        InstanceType {
            name: name.to_string(),
            requirements,
            offerings,
            capacity,
            overhead,
        }
    }

    /// Capacity minus overhead: what pods can request on one node.
    pub fn allocatable(&self) -> Resources {
        self.capacity.minus(&self.overhead.total())
    }

    /// Cheapest available offering price, if any offering is available.
    pub fn cheapest_available_price(&self) -> Option<f64> {
        self.offerings
            .iter()
            .filter(|o| o.available)
            .map(|o| o.price)
            .min_by(|a, b| a.total_cmp(b))
    }
}

fn zone_or_capacity_requirement(key: &str, values: Vec<String>) -> Requirement {
    let mut values = values;
    values.sort();
    values.dedup();
    Requirement {
        key: key.to_string(),
        values: super::requirements::ValueSet::of(values),
        min_values: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_labels_and_allocatable() {
        let overhead = Overhead {
            kube_reserved: Resources::cpu_memory(100, 10 << 20),
            system_reserved: Resources::cpu_memory(100, 0),
            eviction_threshold: Resources::cpu_memory(0, 100 << 20),
        };
        let it = InstanceType::new(
            "m5.large",
            Requirements::new(),
            vec![
                Offering::new("us-east-1a", CapacityType::OnDemand, 0.096),
                Offering::new("us-east-1b", CapacityType::Spot, 0.04),
                Offering::reserved("us-east-1a", 0.0, "cr-1", 2),
            ],
            Resources::cpu_memory(2000, 8 << 30).with_pods(29),
            overhead,
        );
        assert!(
            it.requirements
                .get(labels::INSTANCE_TYPE)
                .unwrap()
                .has("m5.large")
        );
        let zone = it.requirements.get(labels::ZONE).unwrap();
        assert!(zone.has("us-east-1a") && zone.has("us-east-1b") && !zone.has("us-east-1c"));
        let ct = it.requirements.get(labels::CAPACITY_TYPE).unwrap();
        assert!(ct.has("reserved") && ct.has("spot") && ct.has("on-demand"));
        let alloc = it.allocatable();
        assert_eq!(alloc.cpu_millis, 1800);
        assert_eq!(alloc.memory, (8 << 30) - (110 << 20));
        assert_eq!(alloc.pods, 29);
        assert_eq!(it.cheapest_available_price(), Some(0.0));
        assert_eq!(
            CapacityType::from_label_value("spot"),
            Some(CapacityType::Spot)
        );
        assert_eq!(CapacityType::from_label_value("cheap"), None);
    }
}
