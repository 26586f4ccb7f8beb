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

/// Conversion of the WIT instance-type table into the SDK's checked table.
/// Every column moves as is; nothing is copied.
#[doc(hidden)]
#[macro_export]
macro_rules! __nodewright_convert_instance_types {
    () => {
        fn __accelerators(a: __wit::AcceleratorColumns) -> $crate::AcceleratorColumns {
            $crate::AcceleratorColumns {
                name: a.name,
                manufacturer: a.manufacturer,
                count: a.count,
                memory_mib: a.memory_mib,
            }
        }

        fn __instance_types(
            t: __wit::InstanceTypes,
        ) -> ::core::result::Result<$crate::InstanceTypes, ::std::string::String> {
            $crate::InstanceTypes::from_parts($crate::TableParts {
                text: t.text,
                ends: t.ends,
                name: t.name,
                family: t.family,
                category: t.category,
                generation: t.generation,
                size: t.size,
                architecture: t.architecture,
                cpu_manufacturer: t.cpu_manufacturer,
                vcpu: t.vcpu,
                memory_mib: t.memory_mib,
                local_nvme_gib: t.local_nvme_gib,
                network_bandwidth_mbps: t.network_bandwidth_mbps,
                ebs_bandwidth_mbps: t.ebs_bandwidth_mbps,
                hypervisor: t.hypervisor,
                traits: t.traits,
                gpus: __accelerators(t.gpus),
                gpu_ends: t.gpu_ends,
                accelerators: __accelerators(t.accelerators),
                accelerator_ends: t.accelerator_ends,
                labels: $crate::LabelColumns {
                    key: t.labels.key,
                    value: t.labels.value,
                },
                label_ends: t.label_ends,
                offerings: $crate::OfferingColumns {
                    zone: t.offerings.zone,
                    capacity_type: t.offerings.capacity_type,
                    price: t.offerings.price,
                    available: t.offerings.available,
                    reservation_id: t.offerings.reservation_id,
                },
                offering_ends: t.offering_ends,
            })
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
                    let table = __instance_types(candidates)?;
                    let component: $t = ::core::default::Default::default();
                    let verdicts =
                        $crate::InstanceFilter::filter(&component, &ctx, &table.views())?;
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
                    let table = __instance_types(candidates)?;
                    let component: $t = ::core::default::Default::default();
                    $crate::PriorityScorer::score(&component, &ctx, &table.views())
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
