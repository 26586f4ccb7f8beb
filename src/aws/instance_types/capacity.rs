//! Node capacity and overhead formulas, the same numbers Karpenter's AWS
//! provider computes, so a pod that fits here fits on the launched node.
//!
//! All quantities are integers: CPU in millicores, memory and storage in bytes.

use std::collections::BTreeMap;

use crate::aws::catalog::InstanceTypeInfo;

/// One mebibyte.
pub const MIB: i64 = 1024 * 1024;
/// One gibibyte.
pub const GIB: i64 = 1024 * MIB;

/// `nvidia.com/gpu`.
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
/// `amd.com/gpu`.
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
/// `habana.ai/gaudi`.
pub const RESOURCE_HABANA_GAUDI: &str = "habana.ai/gaudi";
/// `aws.amazon.com/neuron` (Neuron devices).
pub const RESOURCE_NEURON: &str = "aws.amazon.com/neuron";
/// `aws.amazon.com/neuroncore` (cores across all Neuron devices).
pub const RESOURCE_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
/// `vpc.amazonaws.com/efa`.
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";

/// Karpenter's default `--vm-memory-overhead-percent`.
pub const DEFAULT_VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;

/// The root volume size Karpenter assumes when the EC2NodeClass sets none (20Gi).
pub const DEFAULT_ROOT_VOLUME_BYTES: i64 = 20 * GIB;

/// Pods per node when the AMI family does not use ENI-limited density.
pub const DEFAULT_MAX_PODS: i64 = 110;

/// Memory the node reports, in bytes.
///
/// `MemoryInfo.SizeInMiB`, less 64 MiB of CMA memory on Graviton (arm64), less
/// `ceil(MiB × vm_overhead_percent)` MiB of hypervisor overhead.
pub fn memory_bytes(info: &InstanceTypeInfo, arm64: bool, vm_overhead_percent: f64) -> i64 {
    let mut mib = info.memory_info.size_in_mi_b as i64;
    if arm64 {
        mib -= 64;
    }
    let overhead_mib = (mib as f64 * vm_overhead_percent).ceil() as i64;
    (mib - overhead_mib).max(0) * MIB
}

/// The VPC CNI's pod limit: `usable ENIs × (IPv4 per ENI − 1) + 2`.
///
/// Only the default network card's interfaces count (the CNI attaches there);
/// `reserved_enis` are held back for other uses.
pub fn eni_limited_pods(info: &InstanceTypeInfo, reserved_enis: u32) -> i64 {
    let network = &info.network_info;
    let interfaces = network
        .network_cards
        .iter()
        .find(|card| card.network_card_index == network.default_network_card_index)
        .map(|card| card.maximum_network_interfaces)
        .unwrap_or(network.maximum_network_interfaces);
    let usable = i64::from(interfaces.saturating_sub(reserved_enis));
    if usable == 0 {
        return 0;
    }
    let per_interface = i64::from(network.ipv4_addresses_per_interface);
    usable * (per_interface - 1).max(0) + 2
}

/// Pods per node: kubelet `maxPods` if set, else the ENI limit (or 110 when the
/// AMI family does not use ENI-limited density), capped at `podsPerCore × vCPU`.
pub fn pods(
    info: &InstanceTypeInfo,
    max_pods: Option<i64>,
    pods_per_core: Option<i64>,
    eni_limited: bool,
    reserved_enis: u32,
) -> i64 {
    let mut count = match max_pods {
        Some(max) => max,
        None if eni_limited => eni_limited_pods(info, reserved_enis),
        None => DEFAULT_MAX_PODS,
    };
    if let Some(per_core) = pods_per_core.filter(|p| *p > 0) {
        count = count.min(per_core * i64::from(info.v_cpu_info.default_v_cpus));
    }
    count
}

/// Accelerators and EFA interfaces as Kubernetes extended resources.
///
/// GPUs are counted per vendor (NVIDIA, AMD, Habana); Neuron devices give both
/// `aws.amazon.com/neuron` (devices) and `aws.amazon.com/neuroncore` (cores).
pub fn extended_resources(info: &InstanceTypeInfo) -> BTreeMap<&'static str, i64> {
    let mut out = BTreeMap::new();
    for gpu in info.gpu_info.iter().flat_map(|g| &g.gpus) {
        let key = match gpu.manufacturer.to_ascii_lowercase().as_str() {
            "nvidia" => RESOURCE_NVIDIA_GPU,
            "amd" => RESOURCE_AMD_GPU,
            "habana" => RESOURCE_HABANA_GAUDI,
            _ => continue,
        };
        *out.entry(key).or_insert(0) += i64::from(gpu.count);
    }
    for device in info.neuron_info.iter().flat_map(|n| &n.neuron_devices) {
        *out.entry(RESOURCE_NEURON).or_insert(0) += i64::from(device.count);
        *out.entry(RESOURCE_NEURON_CORE).or_insert(0) +=
            i64::from(device.count) * i64::from(device.core_info.count);
    }
    if info.network_info.efa_supported
        && let Some(efa) = &info.network_info.efa_info
        && efa.maximum_efa_interfaces > 0
    {
        out.insert(RESOURCE_EFA, i64::from(efa.maximum_efa_interfaces));
    }
    out
}

/// Kube-reserved CPU in millicores by Karpenter's tiers: 6% of the first core,
/// 1% of the second, 0.5% of cores three and four, 0.25% of every core above
/// four. Each tier's share is truncated to whole millicores.
pub fn kube_reserved_cpu_millis(cpu_millis: i64) -> i64 {
    const TIERS: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    TIERS
        .iter()
        .filter(|(start, _, _)| cpu_millis >= *start)
        .map(|(start, end, percent)| {
            let span = cpu_millis.min(*end) - start;
            (span as f64 * percent) as i64
        })
        .sum()
}

/// Kube-reserved memory in bytes: `11 MiB × pods + 255 MiB`.
pub fn kube_reserved_memory_bytes(pods: i64) -> i64 {
    (11 * pods + 255) * MIB
}

/// Kube-reserved ephemeral storage: 1 GiB.
pub const KUBE_RESERVED_EPHEMERAL_BYTES: i64 = GIB;

/// Default hard-eviction threshold for `memory.available`: 100 MiB.
pub const EVICTION_MEMORY_BYTES: i64 = 100 * MIB;

/// Default hard-eviction threshold for `nodefs.available`: 10% of the root volume, rounded up.
pub fn eviction_nodefs_bytes(ephemeral_bytes: i64) -> i64 {
    (ephemeral_bytes as f64 / 100.0 * 10.0).ceil() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::catalog::Catalog;

    fn info(name: &str) -> InstanceTypeInfo {
        Catalog::embedded("us-east-1")
            .unwrap()
            .instance_types()
            .iter()
            .find(|i| i.instance_type == name)
            .unwrap()
            .clone()
    }

    #[test]
    fn kube_reserved_cpu_matches_karpenters_tiers() {
        assert_eq!(kube_reserved_cpu_millis(1000), 60);
        assert_eq!(kube_reserved_cpu_millis(2000), 70);
        assert_eq!(kube_reserved_cpu_millis(4000), 80);
        assert_eq!(kube_reserved_cpu_millis(8000), 90);
        assert_eq!(kube_reserved_cpu_millis(96_000), 310);
        assert_eq!(kube_reserved_cpu_millis(500), 30);
    }

    #[test]
    fn eni_limited_pods_for_common_types() {
        // Figures from the EKS AMI's eni-max-pods table.
        assert_eq!(eni_limited_pods(&info("c7i-flex.large"), 0), 29);
        assert_eq!(eni_limited_pods(&info("m5.large"), 0), 29);
        assert_eq!(eni_limited_pods(&info("m5.xlarge"), 0), 58);
        assert_eq!(eni_limited_pods(&info("t3.micro"), 0), 4);
        assert_eq!(eni_limited_pods(&info("m5.24xlarge"), 0), 737);
        assert_eq!(eni_limited_pods(&info("m5.large"), 3), 0);
    }

    #[test]
    fn max_pods_and_pods_per_core_override_the_eni_limit() {
        let m5 = info("m5.large");
        assert_eq!(pods(&m5, Some(50), None, true, 0), 50);
        assert_eq!(pods(&m5, None, Some(4), true, 0), 8);
        assert_eq!(pods(&m5, None, None, false, 0), 110);
    }

    #[test]
    fn memory_subtracts_vm_overhead_and_graviton_cma() {
        // 4096 MiB − ceil(4096 × 0.075) = 4096 − 308 = 3788 MiB
        assert_eq!(
            memory_bytes(&info("c7i-flex.large"), false, 0.075),
            3788 * MIB
        );
        // m7g.large: 8192 − 64 = 8128; − ceil(609.6) = 7518 MiB
        assert_eq!(memory_bytes(&info("m7g.large"), true, 0.075), 7518 * MIB);
    }

    #[test]
    fn accelerators_become_extended_resources() {
        let g5 = extended_resources(&info("g5.xlarge"));
        assert_eq!(g5.get(RESOURCE_NVIDIA_GPU), Some(&1));
        let inf2 = extended_resources(&info("inf2.xlarge"));
        assert_eq!(inf2.get(RESOURCE_NEURON), Some(&1));
        assert_eq!(inf2.get(RESOURCE_NEURON_CORE), Some(&2));
        let p5 = extended_resources(&info("p5.48xlarge"));
        assert_eq!(p5.get(RESOURCE_NVIDIA_GPU), Some(&8));
        assert_eq!(p5.get(RESOURCE_EFA), Some(&32));
        assert!(extended_resources(&info("m5.large")).is_empty());
    }
}
