//! Karpenter's well-known instance-type labels, computed from `DescribeInstanceTypes`.
//!
//! Keys and values match the AWS provider exactly (`computeRequirements`), so
//! NodePool requirements written for Karpenter select the same types here.

use std::collections::BTreeMap;

use crate::aws::catalog::InstanceTypeInfo;

// Short names for the label keys defined in `crate::apis::labels`.
pub use crate::apis::labels::{
    ARCH_LABEL_KEY as ARCH, CAPACITY_TYPE_LABEL_KEY as CAPACITY_TYPE,
    INSTANCE_ACCELERATOR_COUNT_LABEL_KEY as INSTANCE_ACCELERATOR_COUNT,
    INSTANCE_ACCELERATOR_MANUFACTURER_LABEL_KEY as INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_NAME_LABEL_KEY as INSTANCE_ACCELERATOR_NAME,
    INSTANCE_CAPABILITY_FLEX_LABEL_KEY as INSTANCE_CAPABILITY_FLEX,
    INSTANCE_CATEGORY_LABEL_KEY as INSTANCE_CATEGORY, INSTANCE_CPU_LABEL_KEY as INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER_LABEL_KEY as INSTANCE_CPU_MANUFACTURER,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ_LABEL_KEY as INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    INSTANCE_EBS_BANDWIDTH_LABEL_KEY as INSTANCE_EBS_BANDWIDTH,
    INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL_KEY as INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    INSTANCE_FAMILY_LABEL_KEY as INSTANCE_FAMILY,
    INSTANCE_GENERATION_LABEL_KEY as INSTANCE_GENERATION,
    INSTANCE_GPU_COUNT_LABEL_KEY as INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MANUFACTURER_LABEL_KEY as INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_MEMORY_LABEL_KEY as INSTANCE_GPU_MEMORY,
    INSTANCE_GPU_NAME_LABEL_KEY as INSTANCE_GPU_NAME,
    INSTANCE_HYPERVISOR_LABEL_KEY as INSTANCE_HYPERVISOR,
    INSTANCE_LOCAL_NVME_LABEL_KEY as INSTANCE_LOCAL_NVME,
    INSTANCE_MEMORY_LABEL_KEY as INSTANCE_MEMORY,
    INSTANCE_NETWORK_BANDWIDTH_LABEL_KEY as INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_SIZE_LABEL_KEY as INSTANCE_SIZE, INSTANCE_TYPE_LABEL_KEY as INSTANCE_TYPE,
    OS_LABEL_KEY as OS, REGION_LABEL_KEY as REGION, ZONE_LABEL_KEY as ZONE,
};

/// Every single-valued label an instance type can carry, in a stable order.
///
/// A type lacking one of these (no GPU, no local NVMe, ...) gets a
/// `DoesNotExist` requirement for it, so `Exists` selectors exclude it.
pub const INSTANCE_TYPE_LABEL_KEYS: [&str; 25] = [
    INSTANCE_TYPE,
    ARCH,
    OS,
    REGION,
    INSTANCE_CATEGORY,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_SIZE,
    INSTANCE_CAPABILITY_FLEX,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    INSTANCE_MEMORY,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_LOCAL_NVME,
    INSTANCE_HYPERVISOR,
    INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
    INSTANCE_ACCELERATOR_NAME,
    INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_COUNT,
];

/// The Kubernetes architecture of an instance type, or `None` for types
/// Karpenter does not launch (Mac, 32-bit only).
///
/// Karpenter lists types with `processor-info.supported-architecture` of
/// `x86_64` or `arm64` only and maps them to `amd64` / `arm64`.
pub fn kube_arch(info: &InstanceTypeInfo) -> Option<&'static str> {
    info.processor_info
        .supported_architectures
        .iter()
        .find_map(|arch| match arch.as_str() {
            "x86_64" => Some("amd64"),
            "arm64" => Some("arm64"),
            _ => None,
        })
}

/// `(family, size)`: the text before and after the first `.`.
pub fn family_and_size(name: &str) -> (Option<&str>, Option<&str>) {
    match name.split_once('.') {
        Some((family, size)) => (Some(family), Some(size)),
        None => (None, None),
    }
}

/// `(category, generation)` by Karpenter's pattern `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`:
/// letters, an optional `-<n>tb` (high-memory `u-6tb1`), then the generation digits.
pub fn category_and_generation(name: &str) -> Option<(&str, &str)> {
    let (family, _) = name.split_once('.')?;
    let letters_end = family
        .find(|c: char| !c.is_ascii_lowercase())
        .unwrap_or(family.len());
    if letters_end == 0 {
        return None;
    }
    let category = &family[..letters_end];
    let mut rest = &family[letters_end..];
    if let Some(after_dash) = rest.strip_prefix('-') {
        let digits = after_dash
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after_dash.len());
        if digits > 0 && after_dash[digits..].starts_with("tb") {
            rest = &after_dash[digits + 2..];
        }
    }
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    if digits == 0 {
        return None;
    }
    Some((category, &rest[..digits]))
}

/// Lower-case, spaces to dashes: how Karpenter normalises vendor and model names.
pub fn lower_kebab(s: &str) -> String {
    s.trim().to_lowercase().replace(' ', "-")
}

/// Baseline network bandwidth in Mbps, summed over network cards.
///
/// Karpenter reads a generated table of baseline bandwidths; the same figures
/// are in `NetworkCards[].BaselineBandwidthInGbps`.
pub fn network_bandwidth_mbps(info: &InstanceTypeInfo) -> Option<u64> {
    let gbps: Vec<f64> = info
        .network_info
        .network_cards
        .iter()
        .filter_map(|card| card.baseline_bandwidth_in_gbps)
        .collect();
    if gbps.is_empty() {
        return None;
    }
    Some((gbps.iter().sum::<f64>() * 1000.0).round() as u64)
}

/// The instance type's labels except zone and capacity type, which vary per offering.
///
/// `os` is the AMI family's OS (`linux` unless a Windows family is in use).
pub fn instance_labels(
    info: &InstanceTypeInfo,
    region: &str,
    os: &str,
) -> BTreeMap<&'static str, String> {
    let mut labels = BTreeMap::new();
    let name = info.instance_type.as_str();
    labels.insert(INSTANCE_TYPE, name.to_string());
    if let Some(arch) = kube_arch(info) {
        labels.insert(ARCH, arch.to_string());
    }
    labels.insert(OS, os.to_string());
    labels.insert(REGION, region.to_string());
    let (family, size) = family_and_size(name);
    if let Some(family) = family {
        labels.insert(INSTANCE_FAMILY, family.to_string());
        labels.insert(
            INSTANCE_CAPABILITY_FLEX,
            family.contains("-flex").to_string(),
        );
    }
    if let Some(size) = size {
        labels.insert(INSTANCE_SIZE, size.to_string());
    }
    if let Some((category, generation)) = category_and_generation(name) {
        labels.insert(INSTANCE_CATEGORY, category.to_string());
        labels.insert(INSTANCE_GENERATION, generation.to_string());
    }
    labels.insert(INSTANCE_CPU, info.v_cpu_info.default_v_cpus.to_string());
    if let Some(manufacturer) = &info.processor_info.manufacturer {
        labels.insert(INSTANCE_CPU_MANUFACTURER, lower_kebab(manufacturer));
    }
    if let Some(ghz) = info.processor_info.sustained_clock_speed_in_ghz {
        labels.insert(
            INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
            ((ghz * 1000.0).round() as u64).to_string(),
        );
    }
    labels.insert(INSTANCE_MEMORY, info.memory_info.size_in_mi_b.to_string());
    if info.ebs_info.ebs_optimized_support.as_deref() == Some("default")
        && let Some(mbps) = info
            .ebs_info
            .ebs_optimized_info
            .as_ref()
            .and_then(|e| e.maximum_bandwidth_in_mbps)
    {
        labels.insert(INSTANCE_EBS_BANDWIDTH, mbps.to_string());
    }
    if let Some(mbps) = network_bandwidth_mbps(info) {
        labels.insert(INSTANCE_NETWORK_BANDWIDTH, mbps.to_string());
    }
    if let Some(storage) = &info.instance_storage_info
        && storage
            .nvme_support
            .as_deref()
            .is_some_and(|s| s != "unsupported")
    {
        labels.insert(INSTANCE_LOCAL_NVME, storage.total_size_in_gb.to_string());
    }
    if let Some(hypervisor) = &info.hypervisor {
        labels.insert(INSTANCE_HYPERVISOR, hypervisor.clone());
    }
    labels.insert(
        INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        info.network_info
            .encryption_in_transit_supported
            .to_string(),
    );
    // GPU labels only when the type has exactly one GPU model, as in Karpenter.
    if let Some([gpu]) = info.gpu_info.as_ref().map(|g| g.gpus.as_slice()) {
        labels.insert(INSTANCE_GPU_NAME, lower_kebab(&gpu.name));
        labels.insert(INSTANCE_GPU_MANUFACTURER, lower_kebab(&gpu.manufacturer));
        labels.insert(INSTANCE_GPU_COUNT, gpu.count.to_string());
        labels.insert(
            INSTANCE_GPU_MEMORY,
            gpu.memory_info.size_in_mi_b.to_string(),
        );
    }
    // Accelerators: Neuron devices first (manufacturer aws), else a single
    // inference accelerator entry.
    if let Some(device) = info
        .neuron_info
        .as_ref()
        .and_then(|n| n.neuron_devices.first())
    {
        labels.insert(INSTANCE_ACCELERATOR_NAME, lower_kebab(&device.name));
        labels.insert(INSTANCE_ACCELERATOR_MANUFACTURER, "aws".to_string());
        labels.insert(INSTANCE_ACCELERATOR_COUNT, device.count.to_string());
    } else if let Some([accelerator]) = info
        .inference_accelerator_info
        .as_ref()
        .map(|a| a.accelerators.as_slice())
    {
        labels.insert(INSTANCE_ACCELERATOR_NAME, lower_kebab(&accelerator.name));
        labels.insert(
            INSTANCE_ACCELERATOR_MANUFACTURER,
            lower_kebab(&accelerator.manufacturer),
        );
        labels.insert(INSTANCE_ACCELERATOR_COUNT, accelerator.count.to_string());
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_and_generation_follow_karpenters_pattern() {
        assert_eq!(category_and_generation("c7i-flex.large"), Some(("c", "7")));
        assert_eq!(category_and_generation("m5d.2xlarge"), Some(("m", "5")));
        assert_eq!(
            category_and_generation("u-12tb1.112xlarge"),
            Some(("u", "1"))
        );
        assert_eq!(category_and_generation("mac2-m2.metal"), Some(("mac", "2")));
        assert_eq!(category_and_generation("x2iezn.metal"), Some(("x", "2")));
        assert_eq!(category_and_generation("nodot"), None);
        assert_eq!(category_and_generation("7x.large"), None);
    }

    #[test]
    fn family_and_size_split_on_the_first_dot() {
        assert_eq!(
            family_and_size("c7i-flex.large"),
            (Some("c7i-flex"), Some("large"))
        );
        assert_eq!(family_and_size("bad"), (None, None));
    }

    #[test]
    fn lower_kebab_normalises_vendor_names() {
        assert_eq!(lower_kebab("NVIDIA"), "nvidia");
        assert_eq!(lower_kebab("RTX PRO Server 6000"), "rtx-pro-server-6000");
    }
}
