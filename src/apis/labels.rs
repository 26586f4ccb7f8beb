//! Well-known label keys, restricted label domains, annotations, taints and
//! finalizers of Karpenter v1 (core and the AWS provider), so every module
//! spells them the same way.

/// API group of NodePool and NodeClaim.
pub const GROUP: &str = "karpenter.sh";
/// API group of EC2NodeClass.
pub const AWS_GROUP: &str = "karpenter.k8s.aws";
/// Compatibility group used for provider annotations.
pub const COMPATIBILITY_GROUP: &str = "compatibility.karpenter.sh";
/// AWS compatibility group.
pub const AWS_COMPATIBILITY_GROUP: &str = "compatibility.karpenter.k8s.aws";

// ---- core labels -------------------------------------------------------------

/// The NodePool that owns a NodeClaim/Node.
pub const NODE_POOL_LABEL_KEY: &str = "karpenter.sh/nodepool";
/// `on-demand`, `spot` or `reserved`.
pub const CAPACITY_TYPE_LABEL_KEY: &str = "karpenter.sh/capacity-type";
/// Set to `"true"` on a Node once it is initialized.
pub const NODE_INITIALIZED_LABEL_KEY: &str = "karpenter.sh/initialized";
/// Set to `"true"` on a Node at registration.
pub const NODE_REGISTERED_LABEL_KEY: &str = "karpenter.sh/registered";
/// If `"true"` on a Node, registration does not merge NodeClaim taints.
pub const NODE_DO_NOT_SYNC_TAINTS_LABEL_KEY: &str = "karpenter.sh/do-not-sync-taints";
/// Label set on a Node while it drains.
pub const EXCLUDE_FROM_LOAD_BALANCERS_LABEL_KEY: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

/// Capacity type value for on-demand instances.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// Capacity type value for spot instances.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// Capacity type value for capacity-reservation instances.
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";

// ---- upstream well-known labels ----------------------------------------------

/// `topology.kubernetes.io/zone`.
pub const ZONE_LABEL_KEY: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const REGION_LABEL_KEY: &str = "topology.kubernetes.io/region";
/// `node.kubernetes.io/instance-type`.
pub const INSTANCE_TYPE_LABEL_KEY: &str = "node.kubernetes.io/instance-type";
/// `kubernetes.io/arch`.
pub const ARCH_LABEL_KEY: &str = "kubernetes.io/arch";
/// `kubernetes.io/os`.
pub const OS_LABEL_KEY: &str = "kubernetes.io/os";
/// `node.kubernetes.io/windows-build`.
pub const WINDOWS_BUILD_LABEL_KEY: &str = "node.kubernetes.io/windows-build";
/// The label Kubernetes puts on every Namespace with its name.
pub const NAMESPACE_NAME_LABEL_KEY: &str = "kubernetes.io/metadata.name";
/// `kubernetes.io/hostname` (restricted: Karpenter never lets users set it).
pub const HOSTNAME_LABEL_KEY: &str = "kubernetes.io/hostname";

/// Deprecated label keys and the stable keys they normalize to.
pub const NORMALIZED_LABELS: &[(&str, &str)] = &[
    ("failure-domain.beta.kubernetes.io/zone", ZONE_LABEL_KEY),
    ("failure-domain.beta.kubernetes.io/region", REGION_LABEL_KEY),
    ("beta.kubernetes.io/arch", ARCH_LABEL_KEY),
    ("beta.kubernetes.io/os", OS_LABEL_KEY),
    ("beta.kubernetes.io/instance-type", INSTANCE_TYPE_LABEL_KEY),
];

// ---- AWS labels --------------------------------------------------------------

/// Zone ID of the subnet (`use1-az1`).
pub const ZONE_ID_LABEL_KEY: &str = "topology.k8s.aws/zone-id";
/// `karpenter.k8s.aws/instance-tenancy` (`default` | `dedicated`).
pub const INSTANCE_TENANCY_LABEL_KEY: &str = "karpenter.k8s.aws/instance-tenancy";
/// `karpenter.k8s.aws/capacity-reservation-type` (`default` | `capacity-block`).
pub const CAPACITY_RESERVATION_TYPE_LABEL_KEY: &str = "karpenter.k8s.aws/capacity-reservation-type";
/// `karpenter.k8s.aws/capacity-reservation-id`.
pub const CAPACITY_RESERVATION_ID_LABEL_KEY: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// `karpenter.k8s.aws/capacity-reservation-interruptible`.
pub const CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY: &str =
    "karpenter.k8s.aws/capacity-reservation-interruptible";
/// `karpenter.k8s.aws/ec2nodeclass`: the NodeClass a NodeClaim was launched from.
pub const EC2_NODE_CLASS_LABEL_KEY: &str = "karpenter.k8s.aws/ec2nodeclass";
/// `karpenter.k8s.aws/instance-encryption-in-transit-supported`.
pub const INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL_KEY: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
/// `karpenter.k8s.aws/nitro-sandbox` (replaces instance-nitro-enclaves-supported after v1.14.1).
pub const NITRO_SANDBOX_LABEL_KEY: &str = "karpenter.k8s.aws/nitro-sandbox";
/// `karpenter.k8s.aws/instance-category` (`m`, `c`, ...).
pub const INSTANCE_CATEGORY_LABEL_KEY: &str = "karpenter.k8s.aws/instance-category";
/// `karpenter.k8s.aws/instance-hypervisor` (`nitro`, `xen`).
pub const INSTANCE_HYPERVISOR_LABEL_KEY: &str = "karpenter.k8s.aws/instance-hypervisor";
/// `karpenter.k8s.aws/instance-family` (`m5d`).
pub const INSTANCE_FAMILY_LABEL_KEY: &str = "karpenter.k8s.aws/instance-family";
/// `karpenter.k8s.aws/instance-generation` (`5`).
pub const INSTANCE_GENERATION_LABEL_KEY: &str = "karpenter.k8s.aws/instance-generation";
/// `karpenter.k8s.aws/instance-local-nvme` (GB).
pub const INSTANCE_LOCAL_NVME_LABEL_KEY: &str = "karpenter.k8s.aws/instance-local-nvme";
/// `karpenter.k8s.aws/instance-size` (`2xlarge`, `metal`).
pub const INSTANCE_SIZE_LABEL_KEY: &str = "karpenter.k8s.aws/instance-size";
/// `karpenter.k8s.aws/instance-cpu` (vCPUs).
pub const INSTANCE_CPU_LABEL_KEY: &str = "karpenter.k8s.aws/instance-cpu";
/// `karpenter.k8s.aws/instance-cpu-manufacturer` (`intel`, `amd`, `aws`).
pub const INSTANCE_CPU_MANUFACTURER_LABEL_KEY: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
/// `karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz`.
pub const INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ_LABEL_KEY: &str =
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
/// `karpenter.k8s.aws/instance-memory` (MiB).
pub const INSTANCE_MEMORY_LABEL_KEY: &str = "karpenter.k8s.aws/instance-memory";
/// `karpenter.k8s.aws/instance-ebs-bandwidth` (Mbps).
pub const INSTANCE_EBS_BANDWIDTH_LABEL_KEY: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
/// `karpenter.k8s.aws/instance-network-bandwidth` (Mbps).
pub const INSTANCE_NETWORK_BANDWIDTH_LABEL_KEY: &str =
    "karpenter.k8s.aws/instance-network-bandwidth";
/// `karpenter.k8s.aws/instance-gpu-name`.
pub const INSTANCE_GPU_NAME_LABEL_KEY: &str = "karpenter.k8s.aws/instance-gpu-name";
/// `karpenter.k8s.aws/instance-gpu-manufacturer`.
pub const INSTANCE_GPU_MANUFACTURER_LABEL_KEY: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
/// `karpenter.k8s.aws/instance-gpu-count`.
pub const INSTANCE_GPU_COUNT_LABEL_KEY: &str = "karpenter.k8s.aws/instance-gpu-count";
/// `karpenter.k8s.aws/instance-gpu-memory` (MiB).
pub const INSTANCE_GPU_MEMORY_LABEL_KEY: &str = "karpenter.k8s.aws/instance-gpu-memory";
/// `karpenter.k8s.aws/instance-accelerator-name`.
pub const INSTANCE_ACCELERATOR_NAME_LABEL_KEY: &str = "karpenter.k8s.aws/instance-accelerator-name";
/// `karpenter.k8s.aws/instance-accelerator-manufacturer`.
pub const INSTANCE_ACCELERATOR_MANUFACTURER_LABEL_KEY: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
/// `karpenter.k8s.aws/instance-accelerator-count`.
pub const INSTANCE_ACCELERATOR_COUNT_LABEL_KEY: &str =
    "karpenter.k8s.aws/instance-accelerator-count";
/// `karpenter.k8s.aws/instance-capability-flex` (`true` for `-flex` families).
pub const INSTANCE_CAPABILITY_FLEX_LABEL_KEY: &str = "karpenter.k8s.aws/instance-capability-flex";
/// `karpenter.k8s.aws/placement-group-id`.
pub const PLACEMENT_GROUP_ID_LABEL_KEY: &str = "karpenter.k8s.aws/placement-group-id";
/// `karpenter.k8s.aws/placement-group-partition`.
pub const PLACEMENT_GROUP_PARTITION_LABEL_KEY: &str = "karpenter.k8s.aws/placement-group-partition";

/// The `karpenter.k8s.aws/*` keys users may name in NodePool labels and requirements
/// (the allow-list of the AWS provider's CRD rules, v1.14.1 plus `nitro-sandbox`).
pub const AWS_ALLOWED_LABEL_KEYS: &[&str] = &[
    INSTANCE_TENANCY_LABEL_KEY,
    CAPACITY_RESERVATION_TYPE_LABEL_KEY,
    CAPACITY_RESERVATION_ID_LABEL_KEY,
    CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY,
    EC2_NODE_CLASS_LABEL_KEY,
    INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL_KEY,
    NITRO_SANDBOX_LABEL_KEY,
    INSTANCE_CATEGORY_LABEL_KEY,
    INSTANCE_HYPERVISOR_LABEL_KEY,
    INSTANCE_FAMILY_LABEL_KEY,
    INSTANCE_GENERATION_LABEL_KEY,
    INSTANCE_LOCAL_NVME_LABEL_KEY,
    INSTANCE_SIZE_LABEL_KEY,
    INSTANCE_CPU_LABEL_KEY,
    INSTANCE_CPU_MANUFACTURER_LABEL_KEY,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ_LABEL_KEY,
    INSTANCE_MEMORY_LABEL_KEY,
    INSTANCE_EBS_BANDWIDTH_LABEL_KEY,
    INSTANCE_NETWORK_BANDWIDTH_LABEL_KEY,
    INSTANCE_GPU_NAME_LABEL_KEY,
    INSTANCE_GPU_MANUFACTURER_LABEL_KEY,
    INSTANCE_GPU_COUNT_LABEL_KEY,
    INSTANCE_GPU_MEMORY_LABEL_KEY,
    INSTANCE_ACCELERATOR_NAME_LABEL_KEY,
    INSTANCE_ACCELERATOR_MANUFACTURER_LABEL_KEY,
    INSTANCE_ACCELERATOR_COUNT_LABEL_KEY,
    INSTANCE_CAPABILITY_FLEX_LABEL_KEY,
    PLACEMENT_GROUP_ID_LABEL_KEY,
    PLACEMENT_GROUP_PARTITION_LABEL_KEY,
];

/// Well-known label keys the scheduler understands (core + AWS, as in Karpenter
/// v1.14.1 plus `nitro-sandbox`). `karpenter.k8s.aws/ec2nodeclass` is not one:
/// the CRD rules let it through, Karpenter's runtime validation does not.
pub const WELL_KNOWN_LABELS: &[&str] = &[
    NODE_POOL_LABEL_KEY,
    CAPACITY_TYPE_LABEL_KEY,
    ZONE_LABEL_KEY,
    REGION_LABEL_KEY,
    INSTANCE_TYPE_LABEL_KEY,
    ARCH_LABEL_KEY,
    OS_LABEL_KEY,
    WINDOWS_BUILD_LABEL_KEY,
    ZONE_ID_LABEL_KEY,
    INSTANCE_TENANCY_LABEL_KEY,
    CAPACITY_RESERVATION_TYPE_LABEL_KEY,
    CAPACITY_RESERVATION_ID_LABEL_KEY,
    CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY,
    INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL_KEY,
    NITRO_SANDBOX_LABEL_KEY,
    INSTANCE_CATEGORY_LABEL_KEY,
    INSTANCE_HYPERVISOR_LABEL_KEY,
    INSTANCE_FAMILY_LABEL_KEY,
    INSTANCE_GENERATION_LABEL_KEY,
    INSTANCE_LOCAL_NVME_LABEL_KEY,
    INSTANCE_SIZE_LABEL_KEY,
    INSTANCE_CPU_LABEL_KEY,
    INSTANCE_CPU_MANUFACTURER_LABEL_KEY,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ_LABEL_KEY,
    INSTANCE_MEMORY_LABEL_KEY,
    INSTANCE_EBS_BANDWIDTH_LABEL_KEY,
    INSTANCE_NETWORK_BANDWIDTH_LABEL_KEY,
    INSTANCE_GPU_NAME_LABEL_KEY,
    INSTANCE_GPU_MANUFACTURER_LABEL_KEY,
    INSTANCE_GPU_COUNT_LABEL_KEY,
    INSTANCE_GPU_MEMORY_LABEL_KEY,
    INSTANCE_ACCELERATOR_NAME_LABEL_KEY,
    INSTANCE_ACCELERATOR_MANUFACTURER_LABEL_KEY,
    INSTANCE_ACCELERATOR_COUNT_LABEL_KEY,
    INSTANCE_CAPABILITY_FLEX_LABEL_KEY,
    PLACEMENT_GROUP_ID_LABEL_KEY,
    PLACEMENT_GROUP_PARTITION_LABEL_KEY,
];

/// Well-known keys whose values are a closed set, and that set: a requirement
/// `In` on them must name at least one of these values.
pub const WELL_KNOWN_VALUES: &[(&str, &[&str])] = &[
    (
        CAPACITY_TYPE_LABEL_KEY,
        &[
            CAPACITY_TYPE_ON_DEMAND,
            CAPACITY_TYPE_SPOT,
            CAPACITY_TYPE_RESERVED,
        ],
    ),
    (INSTANCE_TENANCY_LABEL_KEY, &["default", "dedicated"]),
];

/// The closed value set of a well-known key, if it has one.
pub fn well_known_values(key: &str) -> Option<&'static [&'static str]> {
    WELL_KNOWN_VALUES
        .iter()
        .find(|(known, _)| *known == key)
        .map(|(_, values)| *values)
}

/// Label domains users may not set (except the well-known keys inside them).
pub const RESTRICTED_LABEL_DOMAINS: &[&str] = &[GROUP, AWS_GROUP];

/// Label keys users may never set, whatever their domain.
pub const RESTRICTED_LABELS: &[&str] = &[HOSTNAME_LABEL_KEY];

/// Label key of the NodeClass kind on NodeClaims: `<group>/<lowercase kind>`.
pub fn node_class_label_key(group: &str, kind: &str) -> String {
    format!("{group}/{}", kind.to_ascii_lowercase())
}

/// The stable key for a deprecated one (`beta.kubernetes.io/arch` → `kubernetes.io/arch`);
/// other keys are returned unchanged.
pub fn normalize_label(key: &str) -> &str {
    NORMALIZED_LABELS
        .iter()
        .find(|(old, _)| *old == key)
        .map_or(key, |(_, new)| new)
}

/// The domain (prefix before `/`) of a label key, if any.
pub fn label_domain(key: &str) -> Option<&str> {
    key.split_once('/').map(|(domain, _)| domain)
}

/// Whether users are forbidden to use `key` in NodePool template labels or requirements.
///
/// Mirrors Karpenter's `IsRestrictedLabel`: `kubernetes.io/hostname` and every key in a
/// restricted domain (or a subdomain of it) unless it is well known.
pub fn is_restricted_label(key: &str) -> bool {
    let key = normalize_label(key);
    if WELL_KNOWN_LABELS.contains(&key) {
        return false;
    }
    if RESTRICTED_LABELS.contains(&key) {
        return true;
    }
    match label_domain(key) {
        Some(domain) => RESTRICTED_LABEL_DOMAINS.iter().any(|restricted| {
            domain == *restricted
                || domain
                    .strip_suffix(restricted)
                    .is_some_and(|prefix| prefix.ends_with('.'))
        }),
        None => false,
    }
}

// ---- annotations ---------------------------------------------------------------

/// On Pods (`"true"` or a duration) and Nodes (`"true"`): blocks voluntary disruption.
pub const DO_NOT_DISRUPT_ANNOTATION_KEY: &str = "karpenter.sh/do-not-disrupt";
/// Hash of the NodePool template, for static drift.
pub const NODE_POOL_HASH_ANNOTATION_KEY: &str = "karpenter.sh/nodepool-hash";
/// Version of the NodePool hash algorithm.
pub const NODE_POOL_HASH_VERSION_ANNOTATION_KEY: &str = "karpenter.sh/nodepool-hash-version";
/// RFC3339 time at which a terminating NodeClaim's pods are force-deleted.
pub const NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY: &str =
    "karpenter.sh/nodeclaim-termination-timestamp";
/// `"true"` when minValues was relaxed for a NodeClaim.
pub const NODE_CLAIM_MIN_VALUES_RELAXED_ANNOTATION_KEY: &str =
    "karpenter.sh/nodeclaim-min-values-relaxed";
/// Provider compatibility annotation.
pub const PROVIDER_COMPATIBILITY_ANNOTATION_KEY: &str = "compatibility.karpenter.sh/provider";
/// Hash of the EC2NodeClass spec, for drift.
pub const EC2_NODE_CLASS_HASH_ANNOTATION_KEY: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// Version of the EC2NodeClass hash algorithm.
pub const EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY: &str =
    "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// Set when the instance carries the Name/nodeclaim tags.
pub const TAGGED_ANNOTATION_KEY: &str = "karpenter.k8s.aws/tagged";
/// Instance profile copied onto a NodeClaim at launch.
pub const INSTANCE_PROFILE_ANNOTATION_KEY: &str = "karpenter.k8s.aws/instance-profile-name";
/// Set when the instance carries the `eks:eks-cluster-name` tag.
pub const CLUSTER_NAME_TAGGED_ANNOTATION_KEY: &str =
    "compatibility.karpenter.k8s.aws/cluster-name-tagged";

/// On a NodePool, `"true"` opts it into priority back-migration: a node on
/// an instance type of lower priority than a type that now fits at no
/// higher price is replaced by single-node consolidation.
pub const PRIORITY_MIGRATION_ANNOTATION_KEY: &str = "nodewright.io/priority-migration";
/// On a NodePool, the most its nodes may cost together, in dollars per hour
/// (a decimal such as `"12.50"`): provisioning launches nothing that would
/// take the pool past it. Off when absent.
pub const PRICE_LIMIT_ANNOTATION_KEY: &str = "nodewright.io/price-limit-per-hour";
/// On a Node the interruption controller cordoned under a NodePool's
/// `Cordon` policy: the kind of message it cordoned for. While the Node
/// stays cordoned, consolidation leaves it (its pods wait for an operator);
/// emptiness, drift and expiration still take it.
pub const INTERRUPTION_CORDONED_ANNOTATION_KEY: &str = "nodewright.io/cordoned-by-interruption";

// ---- taints and finalizers ------------------------------------------------------

/// Taint key put on nodes being disrupted (`NoSchedule`).
pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
/// Taint key put on nodes until they register (`NoExecute`).
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";
/// Taint the node lifecycle controller puts on a node that is not ready.
pub const NOT_READY_TAINT_KEY: &str = "node.kubernetes.io/not-ready";
/// Taint the node lifecycle controller puts on a node it cannot reach.
pub const UNREACHABLE_TAINT_KEY: &str = "node.kubernetes.io/unreachable";
/// Taint a node carries until the cloud controller manager initializes it.
pub const CLOUD_PROVIDER_UNINITIALIZED_TAINT_KEY: &str =
    "node.cloudprovider.kubernetes.io/uninitialized";
/// Prefix of the taint keys readiness gates put on starting nodes.
pub const READINESS_TAINT_KEY_PREFIX: &str = "readiness.k8s.io/";
/// Finalizer on NodeClaims and Nodes.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
/// Finalizer on EC2NodeClasses.
pub const AWS_TERMINATION_FINALIZER: &str = "karpenter.k8s.aws/termination";

// ---- EC2 tags -------------------------------------------------------------------

/// Tag keys users may not set in `EC2NodeClass.spec.tags` (besides `kubernetes.io/cluster/*`).
pub const RESTRICTED_TAGS: &[&str] = &[
    "eks:eks-cluster-name",
    NODE_POOL_LABEL_KEY,
    "karpenter.sh/nodeclaim",
    EC2_NODE_CLASS_LABEL_KEY,
];

/// Prefix of the restricted `kubernetes.io/cluster/<name>` tags.
pub const RESTRICTED_TAG_PREFIX: &str = "kubernetes.io/cluster";

/// Whether users are forbidden to set the EC2 tag `key` in `EC2NodeClass.spec.tags`.
pub fn is_restricted_tag(key: &str) -> bool {
    RESTRICTED_TAGS.contains(&key) || key.starts_with(RESTRICTED_TAG_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_labels() {
        assert!(is_restricted_label("karpenter.sh/foo"));
        assert!(is_restricted_label("sub.karpenter.sh/foo"));
        assert!(is_restricted_label("karpenter.k8s.aws/unknown"));
        assert!(is_restricted_label("kubernetes.io/hostname"));
        assert!(!is_restricted_label("karpenter.sh/capacity-type"));
        assert!(!is_restricted_label("karpenter.k8s.aws/instance-family"));
        assert!(!is_restricted_label("example.com/team"));
        assert!(!is_restricted_label("team"));
        assert!(!is_restricted_label("notkarpenter.sh/foo"));
        assert!(is_restricted_label("karpenter.k8s.aws/ec2nodeclass"));
        assert_eq!(
            well_known_values(CAPACITY_TYPE_LABEL_KEY).map(<[_]>::len),
            Some(3)
        );
        assert_eq!(well_known_values(ZONE_LABEL_KEY), None);
    }

    #[test]
    fn normalizes_beta_labels() {
        assert_eq!(normalize_label("beta.kubernetes.io/arch"), ARCH_LABEL_KEY);
        assert_eq!(normalize_label("example.com/x"), "example.com/x");
        assert_eq!(
            node_class_label_key(AWS_GROUP, "EC2NodeClass"),
            EC2_NODE_CLASS_LABEL_KEY
        );
    }

    #[test]
    fn restricted_tags() {
        assert!(is_restricted_tag("kubernetes.io/cluster/prod"));
        assert!(is_restricted_tag("karpenter.sh/nodepool"));
        assert!(!is_restricted_tag("team"));
    }
}
