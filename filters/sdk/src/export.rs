//! Export macros: turn a type implementing one role's trait into the
//! component's export. They expand to nothing on native targets, so the same
//! crate builds natively for tests and for the controller.

/// Conversions from the WIT records generated in the author's crate into the
/// SDK's plain types. Expanded next to the generated bindings.
#[doc(hidden)]
#[macro_export]
macro_rules! __nodewright_convert_common {
    () => {
        fn __architecture(a: __wit::Architecture) -> $crate::Architecture {
            match a {
                __wit::Architecture::Amd64 => $crate::Architecture::Amd64,
                __wit::Architecture::Arm64 => $crate::Architecture::Arm64,
            }
        }

        fn __context(c: __wit::Context) -> $crate::Context {
            $crate::Context {
                node_pool: c.node_pool,
                node_class: c.node_class,
                region: c.region,
                config: c.config,
                now: c.now,
            }
        }
    };
}

/// Conversion of the string-table encoded instance types.
#[doc(hidden)]
#[macro_export]
macro_rules! __nodewright_convert_instance_types {
    () => {
        fn __instance_types(
            set: __wit::InstanceTypes,
        ) -> ::core::result::Result<::std::vec::Vec<$crate::InstanceTypeInfo>, ::std::string::String> {
            let strings = set.strings;
            let s = |i: u32| -> ::core::result::Result<::std::string::String, ::std::string::String> {
                strings
                    .get(i as usize)
                    .cloned()
                    .ok_or_else(|| ::std::format!("string index {i} out of range ({} strings)", strings.len()))
            };
            let accel = |a: &__wit::Accelerator| -> ::core::result::Result<$crate::Accelerator, ::std::string::String> {
                Ok($crate::Accelerator {
                    name: s(a.name)?,
                    manufacturer: s(a.manufacturer)?,
                    count: a.count,
                    memory_mib: a.memory_mib,
                })
            };
            let mut out = ::std::vec::Vec::with_capacity(set.items.len());
            for it in set.items {
                let mut labels = ::std::collections::BTreeMap::new();
                for l in &it.labels {
                    labels.insert(s(l.key)?, s(l.value)?);
                }
                let mut offerings = ::std::vec::Vec::with_capacity(it.offerings.len());
                for o in &it.offerings {
                    offerings.push($crate::Offering {
                        zone: s(o.zone)?,
                        capacity_type: match o.capacity_type {
                            __wit::CapacityType::OnDemand => $crate::CapacityType::OnDemand,
                            __wit::CapacityType::Spot => $crate::CapacityType::Spot,
                            __wit::CapacityType::Reserved => $crate::CapacityType::Reserved,
                        },
                        price: o.price,
                        available: o.available,
                        reservation_id: match o.reservation_id {
                            Some(r) => Some(s(r)?),
                            None => None,
                        },
                    });
                }
                out.push($crate::InstanceTypeInfo {
                    name: it.name,
                    family: s(it.family)?,
                    category: s(it.category)?,
                    generation: it.generation,
                    size: s(it.size)?,
                    architecture: __architecture(it.architecture),
                    cpu_manufacturer: s(it.cpu_manufacturer)?,
                    vcpu: it.vcpu,
                    memory_mib: it.memory_mib,
                    gpus: it.gpus.iter().map(accel).collect::<::core::result::Result<_, _>>()?,
                    accelerators: it.accelerators.iter().map(accel).collect::<::core::result::Result<_, _>>()?,
                    local_nvme_gib: it.local_nvme_gib,
                    network_bandwidth_mbps: it.network_bandwidth_mbps,
                    ebs_bandwidth_mbps: it.ebs_bandwidth_mbps,
                    hypervisor: s(it.hypervisor)?,
                    bare_metal: it.bare_metal,
                    burstable: it.burstable,
                    current_generation: it.current_generation,
                    encryption_in_transit: it.encryption_in_transit,
                    labels,
                    offerings,
                });
            }
            Ok(out)
        }
    };
}

/// Exports a type implementing [`InstanceFilter`](crate::InstanceFilter) and
/// [`Default`] as the component's `filter` function.
///
/// ```ignore
/// #[derive(Default)]
/// struct DropBurstable;
/// impl nodewright_filter::InstanceFilter for DropBurstable { /* ... */ }
/// nodewright_filter::export_instance_filter!(DropBurstable);
/// ```
#[macro_export]
macro_rules! export_instance_filter {
    ($t:ty) => {
        #[cfg(target_family = "wasm")]
        #[doc(hidden)]
        #[allow(clippy::all)]
        mod __nodewright_export {
            #[allow(unused_imports)]
            use super::*;
            $crate::__nodewright_generate!("instance-filter");
            use self::nodewright::filters::types as __wit;
            $crate::__nodewright_convert_common!();
            $crate::__nodewright_convert_instance_types!();

            struct __Export;

            impl Guest for __Export {
                fn filter(
                    ctx: __wit::Context,
                    candidates: __wit::InstanceTypes,
                ) -> ::core::result::Result<::std::vec::Vec<__wit::Verdict>, ::std::string::String>
                {
                    let ctx = __context(ctx);
                    let candidates = __instance_types(candidates)?;
                    let component: $t = ::core::default::Default::default();
                    let verdicts = $crate::InstanceFilter::filter(&component, &ctx, &candidates)?;
                    Ok(verdicts
                        .into_iter()
                        .map(|v| match v {
                            $crate::Verdict::Keep => __wit::Verdict::Keep,
                            $crate::Verdict::Drop(reason) => __wit::Verdict::Drop(reason),
                        })
                        .collect())
                }
            }

            export!(__Export);
        }
    };
}

/// Exports a type implementing [`PriorityScorer`](crate::PriorityScorer) and
/// [`Default`] as the component's `score` function.
#[macro_export]
macro_rules! export_priority_scorer {
    ($t:ty) => {
        #[cfg(target_family = "wasm")]
        #[doc(hidden)]
        #[allow(clippy::all)]
        mod __nodewright_export {
            #[allow(unused_imports)]
            use super::*;
            $crate::__nodewright_generate!("priority-scorer");
            use self::nodewright::filters::types as __wit;
            $crate::__nodewright_convert_common!();
            $crate::__nodewright_convert_instance_types!();

            struct __Export;

            impl Guest for __Export {
                fn score(
                    ctx: __wit::Context,
                    candidates: __wit::InstanceTypes,
                ) -> ::core::result::Result<::std::vec::Vec<i32>, ::std::string::String> {
                    let ctx = __context(ctx);
                    let candidates = __instance_types(candidates)?;
                    let component: $t = ::core::default::Default::default();
                    $crate::PriorityScorer::score(&component, &ctx, &candidates)
                }
            }

            export!(__Export);
        }
    };
}

/// Exports a type implementing [`AmiSelector`](crate::AmiSelector) and
/// [`Default`] as the component's `select` function.
#[macro_export]
macro_rules! export_ami_selector {
    ($t:ty) => {
        #[cfg(target_family = "wasm")]
        #[doc(hidden)]
        #[allow(clippy::all)]
        mod __nodewright_export {
            #[allow(unused_imports)]
            use super::*;
            $crate::__nodewright_generate!("ami-selector");
            use self::nodewright::filters::types as __wit;
            $crate::__nodewright_convert_common!();

            struct __Export;

            impl Guest for __Export {
                fn select(
                    ctx: __wit::Context,
                    candidates: ::std::vec::Vec<__wit::Ami>,
                ) -> ::core::result::Result<::std::vec::Vec<u32>, ::std::string::String> {
                    let ctx = __context(ctx);
                    let amis: ::std::vec::Vec<$crate::Ami> = candidates
                        .into_iter()
                        .map(|a| $crate::Ami {
                            id: a.id,
                            name: a.name,
                            owner: a.owner,
                            state: match a.state {
                                __wit::AmiState::Available => $crate::AmiState::Available,
                                __wit::AmiState::Pending => $crate::AmiState::Pending,
                                __wit::AmiState::Invalid => $crate::AmiState::Invalid,
                                __wit::AmiState::Deregistered => $crate::AmiState::Deregistered,
                                __wit::AmiState::Transient => $crate::AmiState::Transient,
                                __wit::AmiState::Failed => $crate::AmiState::Failed,
                                __wit::AmiState::Error => $crate::AmiState::Error,
                                __wit::AmiState::Disabled => $crate::AmiState::Disabled,
                            },
                            creation_time: a.creation_time,
                            deprecation_time: a.deprecation_time,
                            architecture: __architecture(a.architecture),
                            variant: a.variant,
                            tags: a.tags.into_iter().collect(),
                            source: a.source,
                        })
                        .collect();
                    let component: $t = ::core::default::Default::default();
                    $crate::AmiSelector::select(&component, &ctx, &amis)
                }
            }

            export!(__Export);
        }
    };
}
