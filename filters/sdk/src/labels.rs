//! Label keys Karpenter attaches to nodes, so filters can reason in the same
//! vocabulary as NodePool requirements.

/// Well-known label keys (Karpenter v1 and Kubernetes).
pub mod well_known {
    /// `node.kubernetes.io/instance-type`
    pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    /// `kubernetes.io/arch`
    pub const ARCH: &str = "kubernetes.io/arch";
    /// `kubernetes.io/os`
    pub const OS: &str = "kubernetes.io/os";
    /// `topology.kubernetes.io/zone`
    pub const ZONE: &str = "topology.kubernetes.io/zone";
    /// `karpenter.sh/capacity-type`
    pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
    /// `karpenter.k8s.aws/instance-family`
    pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
    /// `karpenter.k8s.aws/instance-category`
    pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
    /// `karpenter.k8s.aws/instance-generation`
    pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
    /// `karpenter.k8s.aws/instance-size`
    pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
    /// `karpenter.k8s.aws/instance-cpu`
    pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
    /// `karpenter.k8s.aws/instance-cpu-manufacturer`
    pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
    /// `karpenter.k8s.aws/instance-memory` (MiB)
    pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
    /// `karpenter.k8s.aws/instance-ebs-bandwidth` (Mbit/s)
    pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
    /// `karpenter.k8s.aws/instance-network-bandwidth` (Mbit/s)
    pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
    /// `karpenter.k8s.aws/instance-gpu-name`
    pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
    /// `karpenter.k8s.aws/instance-gpu-manufacturer`
    pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
    /// `karpenter.k8s.aws/instance-gpu-count`
    pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
    /// `karpenter.k8s.aws/instance-gpu-memory` (MiB)
    pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
    /// `karpenter.k8s.aws/instance-accelerator-name`
    pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
    /// `karpenter.k8s.aws/instance-accelerator-manufacturer`
    pub const INSTANCE_ACCELERATOR_MANUFACTURER: &str =
        "karpenter.k8s.aws/instance-accelerator-manufacturer";
    /// `karpenter.k8s.aws/instance-accelerator-count`
    pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
    /// `karpenter.k8s.aws/instance-hypervisor`
    pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
    /// `karpenter.k8s.aws/instance-encryption-in-transit-supported`
    pub const INSTANCE_ENCRYPTION_IN_TRANSIT: &str =
        "karpenter.k8s.aws/instance-encryption-in-transit-supported";
    /// `karpenter.k8s.aws/instance-local-nvme` (GiB)
    pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
    /// `karpenter.k8s.aws/instance-capability-flex`
    pub const INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
}
