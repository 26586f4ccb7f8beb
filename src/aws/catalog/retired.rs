//! Instance types the embedded price snapshot still prices but EC2 no longer
//! lists, so the embedded catalog leaves them out on purpose.
//!
//! Price lists keep retired types for years; `DescribeInstanceTypes` does not.
//! Every type priced in the snapshot is either in the catalog or named here
//! with the reason it is not (a unit test holds the two lists together). The
//! evidence for each family is in `data/README.md`.

/// One family (or the retired sizes of one) with why it is not in the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetiredFamily {
    /// The instance family, e.g. `p2`.
    pub family: &'static str,
    /// The priced sizes EC2 no longer lists; other sizes of the family may be current.
    pub instance_types: &'static [&'static str],
    /// Why the catalog omits them.
    pub reason: &'static str,
}

/// Every priced type the embedded catalog omits, by family.
pub const RETIRED_FAMILIES: &[RetiredFamily] = &[
    RetiredFamily {
        family: "cr1",
        instance_types: &["cr1.8xlarge"],
        reason: "previous-generation memory-optimized type that no region lists any more",
    },
    RetiredFamily {
        family: "dl1",
        instance_types: &["dl1.24xlarge"],
        reason: "Habana Gaudi training type no longer listed in us-east-1, us-east-2 or us-west-2 (since mid-2026)",
    },
    RetiredFamily {
        family: "f1",
        instance_types: &["f1.2xlarge", "f1.4xlarge", "f1.16xlarge"],
        reason: "first FPGA generation, no longer listed (since mid-2026); f2 replaces it",
    },
    RetiredFamily {
        family: "g2",
        instance_types: &["g2.2xlarge", "g2.8xlarge"],
        reason: "NVIDIA GRID K520 generation, not listed since 2023",
    },
    RetiredFamily {
        family: "g3",
        instance_types: &["g3.4xlarge", "g3.8xlarge", "g3.16xlarge"],
        reason: "NVIDIA Tesla M60 generation, not listed since late 2024",
    },
    RetiredFamily {
        family: "g3s",
        instance_types: &["g3s.xlarge"],
        reason: "NVIDIA Tesla M60 generation, not listed since late 2024",
    },
    RetiredFamily {
        family: "i3",
        instance_types: &["i3.metal"],
        reason: "the bare-metal size only, not listed since 2025; the virtualized i3 sizes remain",
    },
    RetiredFamily {
        family: "p2",
        instance_types: &["p2.xlarge", "p2.8xlarge", "p2.16xlarge"],
        reason: "NVIDIA K80 generation, not listed since 2025",
    },
    RetiredFamily {
        family: "p3",
        instance_types: &["p3.2xlarge", "p3.8xlarge", "p3.16xlarge"],
        reason: "NVIDIA V100 generation, not listed since mid-2026; p3dn.24xlarge remains",
    },
    RetiredFamily {
        family: "u-9tb1",
        instance_types: &["u-9tb1.112xlarge"],
        reason: "virtualized High Memory size not listed since 2025",
    },
    RetiredFamily {
        family: "u-12tb1",
        instance_types: &["u-12tb1.112xlarge"],
        reason: "virtualized High Memory size not listed since 2025",
    },
    RetiredFamily {
        family: "u-18tb1",
        instance_types: &["u-18tb1.112xlarge"],
        reason: "virtualized High Memory size not listed since 2025",
    },
    RetiredFamily {
        family: "u-24tb1",
        instance_types: &["u-24tb1.112xlarge"],
        reason: "virtualized High Memory size not listed since 2025",
    },
];

/// The retired family entry naming `instance_type`, if it is a retired type.
pub fn retired_family(instance_type: &str) -> Option<&'static RetiredFamily> {
    RETIRED_FAMILIES
        .iter()
        .find(|family| family.instance_types.contains(&instance_type))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::aws::catalog::{Catalog, PRICED_REGION};

    fn catalog_names(catalog: &Catalog) -> BTreeSet<&str> {
        catalog
            .instance_types()
            .iter()
            .map(|info| info.instance_type.as_str())
            .collect()
    }

    #[test]
    fn every_priced_type_is_in_the_catalog_or_retired() {
        let catalog = Catalog::embedded(PRICED_REGION).unwrap();
        let names = catalog_names(&catalog);
        let unexplained: Vec<&str> = catalog
            .prices()
            .instance_types()
            .filter(|name| !names.contains(name) && retired_family(name).is_none())
            .collect();
        assert!(
            unexplained.is_empty(),
            "priced but neither in the catalog nor retired: {unexplained:?}"
        );
    }

    #[test]
    fn retired_types_are_priced_and_absent_from_every_embedded_catalog() {
        let priced = Catalog::embedded(PRICED_REGION).unwrap();
        for region in crate::aws::catalog::EMBEDDED_REGIONS {
            let catalog = Catalog::embedded(region).unwrap();
            let names = catalog_names(&catalog);
            for family in RETIRED_FAMILIES {
                for name in family.instance_types {
                    assert!(!names.contains(name), "{name} is retired but in {region}");
                    assert!(
                        priced.prices().on_demand(name).is_some(),
                        "{name} is no longer priced: drop it from the retired list"
                    );
                }
            }
        }
    }

    #[test]
    fn retired_entries_name_their_family_and_a_reason() {
        let mut seen = BTreeSet::new();
        for family in RETIRED_FAMILIES {
            assert!(!family.reason.trim().is_empty(), "{}", family.family);
            assert!(!family.instance_types.is_empty(), "{}", family.family);
            for name in family.instance_types {
                assert_eq!(
                    name.split_once('.').map(|(f, _)| f),
                    Some(family.family),
                    "{name} is listed under {}",
                    family.family
                );
                assert!(seen.insert(*name), "{name} is listed twice");
            }
        }
        assert_eq!(retired_family("p2.xlarge").map(|f| f.family), Some("p2"));
        assert_eq!(retired_family("i3.large"), None);
        assert_eq!(retired_family("g4ad.xlarge"), None);
    }
}
