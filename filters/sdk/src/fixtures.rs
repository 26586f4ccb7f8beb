//! Fixture builders for tests: instance types and AMIs with plausible
//! defaults, each field overridable. Plain Rust with no dependencies, so a
//! filter's own logic is unit-tested natively in seconds; the host's
//! harness (`nodewright_host::harness`) uses the same builders to run the
//! built component in the production sandbox.
//!
//! ```
//! use nodewright_filter::fixtures::it;
//! use nodewright_filter::InstanceTypes;
//! let table = InstanceTypes::from_infos(&[it("m7g.large").build(), it("t3.micro").burstable().build()]);
//! let views = table.views();
//! assert_eq!(views[0].family(), "m7g");
//! assert!(views[1].burstable());
//! ```

use std::collections::BTreeMap;

use crate::{Accelerator, Ami, AmiState, Architecture, CapacityType, InstanceTypeInfo, Offering};

/// Starts an instance type fixture. Family, category, generation, size,
/// architecture and CPU manufacturer are inferred from the name
/// (`m7g.large` → family `m7g`, category `m`, generation 7, size `large`,
/// arm64, `aws`); everything can be overridden.
pub fn it(name: &str) -> InstanceTypeBuilder {
    InstanceTypeBuilder::new(name)
}

/// Builds [`InstanceTypeInfo`] fixtures.
#[derive(Debug, Clone)]
pub struct InstanceTypeBuilder {
    info: InstanceTypeInfo,
}

impl InstanceTypeBuilder {
    /// See [`it`].
    pub fn new(name: &str) -> Self {
        let (family, size) = name.split_once('.').unwrap_or((name, ""));
        let base = family.split('-').next().unwrap_or(family);
        let category: String = base
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        let rest = &base[category.len()..];
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let attrs = &rest[digits.len()..];
        let generation = digits.parse().unwrap_or(0);
        let graviton = attrs.contains('g') && !matches!(category.as_str(), "g" | "p");
        let cpu_manufacturer = if graviton {
            "aws"
        } else if attrs.contains('a') {
            "amd"
        } else {
            "intel"
        };
        InstanceTypeBuilder {
            info: InstanceTypeInfo {
                name: name.to_string(),
                family: family.to_string(),
                category: category.clone(),
                generation,
                size: size.to_string(),
                architecture: if graviton {
                    Architecture::Arm64
                } else {
                    Architecture::Amd64
                },
                cpu_manufacturer: cpu_manufacturer.to_string(),
                vcpu: 2,
                memory_mib: 8 * 1024,
                gpus: Vec::new(),
                accelerators: Vec::new(),
                local_nvme_gib: if attrs.contains('d') { 118 } else { 0 },
                network_bandwidth_mbps: 750,
                ebs_bandwidth_mbps: 650,
                hypervisor: if size == "metal" {
                    String::new()
                } else {
                    "nitro".to_string()
                },
                bare_metal: size == "metal",
                burstable: category == "t",
                current_generation: true,
                encryption_in_transit: generation >= 5,
                labels: BTreeMap::new(),
                offerings: vec![Offering {
                    zone: "us-east-1a".to_string(),
                    capacity_type: CapacityType::OnDemand,
                    price: 0.1,
                    available: true,
                    reservation_id: None,
                }],
            },
        }
    }

    /// vCPUs and memory in GiB.
    pub fn shape(mut self, vcpu: u32, memory_gib: u64) -> Self {
        self.info.vcpu = vcpu;
        self.info.memory_mib = memory_gib * 1024;
        self
    }

    /// Architecture.
    pub fn arch(mut self, a: Architecture) -> Self {
        self.info.architecture = a;
        self
    }

    /// CPU manufacturer (`aws`, `intel`, `amd`).
    pub fn cpu_manufacturer(mut self, m: &str) -> Self {
        self.info.cpu_manufacturer = m.to_string();
        self
    }

    /// Adds `count` GPUs with `memory_gib` each.
    pub fn gpu(mut self, name: &str, manufacturer: &str, count: u32, memory_gib: u64) -> Self {
        self.info.gpus.push(Accelerator {
            name: name.to_string(),
            manufacturer: manufacturer.to_string(),
            count,
            memory_mib: memory_gib * 1024,
        });
        self
    }

    /// Marks the type burstable (or not).
    pub fn burstable(mut self) -> Self {
        self.info.burstable = true;
        self
    }

    /// Marks the type previous generation.
    pub fn previous_generation(mut self) -> Self {
        self.info.current_generation = false;
        self
    }

    /// Replaces the offerings with one on-demand offering at `price`.
    pub fn price(mut self, price: f64) -> Self {
        self.info.offerings = vec![Offering {
            zone: "us-east-1a".to_string(),
            capacity_type: CapacityType::OnDemand,
            price,
            available: true,
            reservation_id: None,
        }];
        self
    }

    /// Adds an offering.
    pub fn offering(
        mut self,
        zone: &str,
        capacity_type: CapacityType,
        price: f64,
        available: bool,
    ) -> Self {
        self.info.offerings.push(Offering {
            zone: zone.to_string(),
            capacity_type,
            price,
            available,
            reservation_id: None,
        });
        self
    }

    /// Adds a label without a typed field.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.info.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Edits any field.
    pub fn with(mut self, edit: impl FnOnce(&mut InstanceTypeInfo)) -> Self {
        edit(&mut self.info);
        self
    }

    /// The fixture.
    pub fn build(self) -> InstanceTypeInfo {
        self.info
    }
}

/// Starts an AMI fixture: available, amd64, `standard`, created at
/// `creation_time`, never deprecated.
pub fn ami(id: &str, creation_time: i64) -> AmiBuilder {
    AmiBuilder {
        ami: Ami {
            id: id.to_string(),
            name: format!("{id}-name"),
            owner: "amazon".to_string(),
            state: AmiState::Available,
            creation_time,
            deprecation_time: None,
            architecture: Architecture::Amd64,
            variant: "standard".to_string(),
            tags: BTreeMap::new(),
            source: "alias:al2023@latest".to_string(),
        },
    }
}

/// Builds [`Ami`] fixtures.
#[derive(Debug, Clone)]
pub struct AmiBuilder {
    ami: Ami,
}

impl AmiBuilder {
    /// Image state.
    pub fn state(mut self, state: AmiState) -> Self {
        self.ami.state = state;
        self
    }

    /// Deprecation time.
    pub fn deprecated_at(mut self, t: i64) -> Self {
        self.ami.deprecation_time = Some(t);
        self
    }

    /// Architecture.
    pub fn arch(mut self, a: Architecture) -> Self {
        self.ami.architecture = a;
        self
    }

    /// Variant (`standard`, `nvidia`, ...).
    pub fn variant(mut self, v: &str) -> Self {
        self.ami.variant = v.to_string();
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, k: &str, v: &str) -> Self {
        self.ami.tags.insert(k.to_string(), v.to_string());
        self
    }

    /// The fixture.
    pub fn build(self) -> Ami {
        self.ami
    }
}
