//! `EC2NodeClass` (`karpenter.k8s.aws/v1`): the AWS side of a NodePool —
//! subnets, security groups, AMIs, IAM role, storage, kubelet settings — plus
//! nodewright's `extensions`.

mod hash;
mod status;

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apis::extensions::{
    EffectiveExtensions, ExtensionError, Extensions, effective_extensions,
};

pub use hash::EC2_NODE_CLASS_HASH_VERSION;
pub use status::{
    AMIRequirement, AMIStatus, CapacityReservationState, CapacityReservationStatus,
    CapacityReservationType, EC2NodeClassStatus, PlacementGroupStatus, PlacementGroupStrategy,
    SecurityGroupStatus, SubnetStatus,
};

const TAG_RULES_MESSAGE: &str = "empty tag keys or values aren't supported";
const TAG_RULE: &str = "self.all(k, k != '' && self[k] != '')";

/// Desired state of an EC2NodeClass.
// Repeated `printcolumn(type_ = ..)` arguments are distinct columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    singular = "ec2nodeclass",
    category = "karpenter",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    status = "EC2NodeClassStatus",
    derive = "PartialEq",
    doc = "EC2NodeClass is the Schema for the EC2NodeClass API",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Role",
        type_ = "string",
        json_path = ".spec.role",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "must specify exactly one of ['role', 'instanceProfile']", "rule": "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))"},
    {"message": "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias", "rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2') : true)"},
    {"message": "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias", "rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2023') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2023') : true)"},
    {"message": "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias", "rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'bottlerocket') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Bottlerocket') : true)"},
    {"message": "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias", "rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2019') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2019') : true)"},
    {"message": "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias", "rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2022') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2022') : true)"},
    {"message": "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias", "rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2025') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2025') : true)"},
    {"message": "must specify amiFamily if amiSelectorTerms does not contain an alias", "rule": "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)"},
]))]
pub struct EC2NodeClassSpec {
    /// Subnets to launch into; terms are ORed, fields within a term ANDed.
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "subnetSelectorTerms cannot be empty", "rule": "self.size() != 0"},
        {"message": "expected at least one, got none, ['tags', 'id']", "rule": "self.all(x, has(x.tags) || has(x.id))"},
        {"message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term", "rule": "!self.all(x, has(x.id) && has(x.tags))"},
    ]))]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Security groups to attach; terms are ORed, fields within a term ANDed.
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "securityGroupSelectorTerms cannot be empty", "rule": "self.size() != 0"},
        {"message": "expected at least one, got none, ['tags', 'id', 'name']", "rule": "self.all(x, has(x.tags) || has(x.id) || has(x.name))"},
        {"message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term", "rule": "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))"},
        {"message": "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term", "rule": "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))"},
    ]))]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Capacity reservations the NodeClass may launch into (`reserved` capacity type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']", "rule": "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))"},
        {"message": "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term", "rule": "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))"},
    ]))]
    pub capacity_reservation_selector_terms: Option<Vec<CapacityReservationSelectorTerm>>,
    /// Placement group to launch into (by name or id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// Whether instances get a public IPv4 address (default: the subnet's setting).
    #[serde(
        rename = "associatePublicIPAddress",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// Number of /28 IPv4 prefixes (or /80 IPv6) assigned to the primary interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ip_prefix_count: Option<i32>,
    /// AMIs to boot: an `alias` (`al2023@latest`) alone, or terms by id/name/owner/tags/ssmParameter.
    #[schemars(length(min = 1, max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']", "rule": "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"},
        {"message": "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms", "rule": "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))"},
        {"message": "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms", "rule": "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))"},
        {"message": "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms", "rule": "!(self.exists(x, has(x.alias)) && self.size() != 1)"},
    ]))]
    pub ami_selector_terms: Vec<AMISelectorTerm>,
    /// Bootstrap format of the AMIs; inferred from an alias, required otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AMIFamily>,
    /// User data merged with (or, for `Custom`, replacing) nodewright's bootstrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// IAM role for the generated instance profile (exclusive with `instanceProfile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"message": "role cannot be empty", "rule": "self != ''"}]))]
    pub role: Option<String>,
    /// Existing instance profile to use (exclusive with `role`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"message": "instanceProfile cannot be empty", "rule": "self != ''"}]))]
    pub instance_profile: Option<String>,
    /// Tags applied to instances, volumes, launch templates and instance profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "empty tag keys aren't supported", "rule": "self.all(k, k != '')"},
        {"message": "tag contains a restricted tag matching eks:eks-cluster-name", "rule": "self.all(k, k !='eks:eks-cluster-name')"},
        {"message": "tag contains a restricted tag matching kubernetes.io/cluster/", "rule": "self.all(k, !k.startsWith('kubernetes.io/cluster') )"},
        {"message": "tag contains a restricted tag matching karpenter.sh/nodepool", "rule": "self.all(k, k != 'karpenter.sh/nodepool')"},
        {"message": "tag contains a restricted tag matching karpenter.sh/nodeclaim", "rule": "self.all(k, k !='karpenter.sh/nodeclaim')"},
        {"message": "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass", "rule": "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')"},
    ]))]
    pub tags: Option<BTreeMap<String, String>>,
    /// Kubelet settings (typed as in Karpenter v1.14.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// EBS volumes and their devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "must have only one blockDeviceMappings with rootVolume", "rule": "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1"},
    ]))]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    /// `RAID0`: stripe instance-store NVMe volumes and use them for ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// Explicit network interfaces (EFA setups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 150))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "networkInterfaces must include a primary interface with interfaceType='interface'", "rule": "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')"},
        {"message": "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card", "rule": "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))"},
    ]))]
    pub network_interfaces: Option<Vec<NetworkInterface>>,
    /// Enables detailed (1-minute) CloudWatch monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Instance metadata service settings. Defaults to IMDSv2 required, hop limit 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}))]
    pub metadata_options: Option<MetadataOptions>,
    /// Connection tracking timeouts of the primary interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// Reserved-capacity context for EC2 Fleet (e.g. an ODCR context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// CPU options of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
    /// nodewright only: the modules that filter instance types, select the AMI and
    /// order instance types. Absent means the built-ins: AMI selector
    /// `builtin: available-amis` and priority scorer `builtin: flex-first`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Extensions>,
}

impl EC2NodeClassSpec {
    /// The extensions this class runs, with built-in defaults for absent parts.
    pub fn effective_extensions(&self) -> Result<EffectiveExtensions, ExtensionError> {
        effective_extensions(self.extensions.as_ref())
    }

    /// The alias term, if the class selects AMIs by alias (`family@version`).
    pub fn alias(&self) -> Option<&str> {
        self.ami_selector_terms
            .iter()
            .find_map(|term| term.alias.as_deref())
    }

    /// The effective AMI family: explicit `amiFamily`, else the alias family.
    pub fn effective_ami_family(&self) -> Option<AMIFamily> {
        self.ami_family.or_else(|| {
            let family = self.alias()?.split('@').next()?;
            AMIFamily::from_alias_family(family)
        })
    }

    /// The metadata options with the schema defaults filled in.
    pub fn effective_metadata_options(&self) -> MetadataOptions {
        let given = self.metadata_options.clone().unwrap_or_default();
        MetadataOptions {
            http_endpoint: given.http_endpoint.or(Some(EnabledDisabled::Enabled)),
            http_protocol_ipv6: given.http_protocol_ipv6.or(Some(EnabledDisabled::Disabled)),
            http_put_response_hop_limit: given.http_put_response_hop_limit.or(Some(1)),
            http_tokens: given.http_tokens.or(Some(HttpTokens::Required)),
        }
    }
}

/// Selects subnets by tags or id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSelectorTerm {
    /// Tags the subnet must carry (`*` matches any value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20, "x-kubernetes-validations" = [{"message": TAG_RULES_MESSAGE, "rule": TAG_RULE}]))]
    pub tags: Option<BTreeMap<String, String>>,
    /// Subnet id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "subnet-[0-9a-z]+"))]
    pub id: Option<String>,
}

/// Selects security groups by tags, id or name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupSelectorTerm {
    /// Tags the security group must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20, "x-kubernetes-validations" = [{"message": TAG_RULES_MESSAGE, "rule": TAG_RULE}]))]
    pub tags: Option<BTreeMap<String, String>>,
    /// Security group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "sg-[0-9a-z]+"))]
    pub id: Option<String>,
    /// Security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `open` or `targeted` capacity reservations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InstanceMatchCriteria {
    /// Any matching instance may use the reservation.
    Open,
    /// Only launches that target the reservation use it.
    Targeted,
}

/// Selects capacity reservations by tags, id, owner or match criteria.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    /// Tags the reservation must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20, "x-kubernetes-validations" = [{"message": TAG_RULES_MESSAGE, "rule": TAG_RULE}]))]
    pub tags: Option<BTreeMap<String, String>>,
    /// Reservation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    /// Owning account (12 digits).
    #[serde(rename = "ownerID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<InstanceMatchCriteria>,
}

/// Selects a placement group by name or id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "expected at least one, got none, ['name', 'id']", "rule": "has(self.name) || has(self.id)"},
    {"message": "'name' and 'id' are mutually exclusive", "rule": "!(has(self.name) && has(self.id))"},
]))]
pub struct PlacementGroupSelector {
    /// Placement group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    /// Placement group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^pg-[0-9a-z]+$"))]
    pub id: Option<String>,
}

/// Selects AMIs by alias, id, name/owner, tags or SSM parameter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AMISelectorTerm {
    /// `family@version` (`al2023@latest`, `bottlerocket@v1.20.0`); must be the only term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "'alias' is improperly formatted, must match the format 'family@version'", "rule": "self.matches('^[a-zA-Z0-9]+@.+$')"},
        {"message": "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'", "rule": "self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']"},
        {"message": "windows families may only specify version 'latest'", "rule": "self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true"},
    ]))]
    pub alias: Option<String>,
    /// Tags the AMI must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20, "x-kubernetes-validations" = [{"message": TAG_RULES_MESSAGE, "rule": TAG_RULE}]))]
    pub tags: Option<BTreeMap<String, String>>,
    /// AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "ami-[0-9a-z]+"))]
    pub id: Option<String>,
    /// AMI name (wildcards allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// AMI owner: account id or alias (`self`, `amazon`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// SSM parameter holding an AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// AMI family: decides the bootstrap format of user data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum AMIFamily {
    /// Amazon Linux 2.
    AL2,
    /// Amazon Linux 2023.
    AL2023,
    /// Bottlerocket.
    Bottlerocket,
    /// User-supplied AMIs; the user owns bootstrapping.
    Custom,
    /// Windows Server 2019.
    Windows2019,
    /// Windows Server 2022.
    Windows2022,
    /// Windows Server 2025.
    Windows2025,
}

impl AMIFamily {
    /// The family an alias prefix names (`al2023` → `AL2023`).
    pub fn from_alias_family(family: &str) -> Option<Self> {
        match family {
            "al2" => Some(Self::AL2),
            "al2023" => Some(Self::AL2023),
            "bottlerocket" => Some(Self::Bottlerocket),
            "windows2019" => Some(Self::Windows2019),
            "windows2022" => Some(Self::Windows2022),
            "windows2025" => Some(Self::Windows2025),
            _ => None,
        }
    }
}

/// Kubelet settings nodewright renders into user data (Karpenter v1.14.1 fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent", "rule": "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true"},
    {"message": "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod", "rule": "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true"},
    {"message": "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft", "rule": "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true"},
]))]
pub struct KubeletConfiguration {
    /// DNS server IPs for pods (default: the cluster DNS service).
    #[serde(
        rename = "clusterDNS",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_dns: Option<Vec<String>>,
    /// Maximum pods per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    /// Maximum pods per CPU core (the lower of this and `maxPods` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    /// Resources reserved for OS daemons (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::quantity_string_map")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']", "rule": "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"},
        {"message": "systemReserved value cannot be a negative resource quantity", "rule": "self.all(x, !self[x].startsWith('-'))"},
    ]))]
    pub system_reserved: Option<BTreeMap<String, String>>,
    /// Resources reserved for Kubernetes daemons (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::quantity_string_map")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']", "rule": "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"},
        {"message": "kubeReserved value cannot be a negative resource quantity", "rule": "self.all(x, !self[x].startsWith('-'))"},
    ]))]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    /// Hard eviction thresholds (`memory.available: 5%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::eviction_threshold_map")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']", "rule": "self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"},
    ]))]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// Soft eviction thresholds; each needs a grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::eviction_threshold_map")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']", "rule": "self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"},
    ]))]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// Grace periods (Go durations) of the soft eviction thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']", "rule": "self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"},
    ]))]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    /// Maximum pod termination grace period (seconds) on soft eviction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Disk usage percent that always triggers image garbage collection.
    #[serde(
        rename = "imageGCHighThresholdPercent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk usage percent image garbage collection frees down to.
    #[serde(
        rename = "imageGCLowThresholdPercent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// Enforce CPU limits with CFS quota.
    #[serde(
        rename = "cpuCFSQuota",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
}

/// One EBS-backed device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// Device name (`/dev/xvda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The EBS volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this volume is the kubelet root volume (at most one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
}

/// EBS volume type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeType {
    /// Magnetic.
    Standard,
    /// Provisioned IOPS SSD.
    Io1,
    /// Provisioned IOPS SSD, newer.
    Io2,
    /// General purpose SSD.
    Gp2,
    /// Cold HDD.
    Sc1,
    /// Throughput-optimized HDD.
    St1,
    /// General purpose SSD, newer.
    Gp3,
}

/// An EBS volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "snapshotID or volumeSize must be defined", "rule": "has(self.snapshotID) || has(self.volumeSize)"},
    {"message": "snapshotID must be set when volumeInitializationRate is set", "rule": "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')"},
]))]
pub struct BlockDevice {
    /// Delete the volume when the instance terminates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Encrypt the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS (io1, io2, gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// KMS key for encryption.
    #[serde(rename = "kmsKeyID", default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Snapshot to create the volume from.
    #[serde(
        rename = "snapshotID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// Snapshot hydration rate in MiB/s (100..300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300))]
    pub volume_initialization_rate: Option<i32>,
    /// Size (`20Gi`, up to 64000G / 64T).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
    ))]
    pub volume_size: Option<String>,
    /// Volume type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<VolumeType>,
}

/// How instance-store volumes are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum InstanceStorePolicy {
    /// Stripe all instance-store volumes into one RAID0 array for ephemeral storage.
    RAID0,
}

/// Network interface kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InterfaceType {
    /// A regular ENI (with EFA if the type supports it).
    Interface,
    /// An EFA-only device without IP networking.
    EfaOnly,
}

/// One network interface of the launch template.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    /// Network card index.
    #[schemars(range(min = 0))]
    pub network_card_index: i32,
    /// Device index on the card.
    #[schemars(range(min = 0))]
    pub device_index: i32,
    /// `interface` or `efa-only`.
    pub interface_type: InterfaceType,
}

/// `enabled` or `disabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EnabledDisabled {
    /// On.
    Enabled,
    /// Off.
    Disabled,
}

/// Whether IMDS requires session tokens (IMDSv2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HttpTokens {
    /// IMDSv2 only.
    Required,
    /// IMDSv1 allowed.
    Optional,
}

/// Instance metadata service options.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// IMDS endpoint on or off. Default `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "enabled"))]
    pub http_endpoint: Option<EnabledDisabled>,
    /// IMDS IPv6 endpoint. Default `disabled`.
    #[serde(
        rename = "httpProtocolIPv6",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("default" = "disabled"))]
    pub http_protocol_ipv6: Option<EnabledDisabled>,
    /// Hop limit of IMDS responses (1..64). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    #[schemars(extend("default" = 1))]
    pub http_put_response_hop_limit: Option<i64>,
    /// IMDSv2 required or optional. Default `required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "required"))]
    pub http_tokens: Option<HttpTokens>,
}

/// Connection tracking timeouts (seconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set", "rule": "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)"},
]))]
pub struct ConnectionTracking {
    /// Idle timeout of established TCP connections (60..432000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 432000))]
    pub tcp_established_timeout: Option<i32>,
    /// Idle timeout of bidirectional UDP flows (60..180).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 180))]
    pub udp_stream_timeout: Option<i32>,
    /// Idle timeout of one-way UDP flows (30..60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 60))]
    pub udp_timeout: Option<i32>,
}

/// CPU options.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    /// Nested virtualization on supported types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<EnabledDisabled>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(terms: serde_json::Value, family: Option<&str>) -> EC2NodeClassSpec {
        let mut value = serde_json::json!({
            "subnetSelectorTerms": [{"id": "subnet-1"}],
            "securityGroupSelectorTerms": [{"id": "sg-1"}],
            "amiSelectorTerms": terms,
            "role": "r",
        });
        if let Some(family) = family {
            value["amiFamily"] = family.into();
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn ami_family_comes_from_field_or_alias() {
        let alias = spec(serde_json::json!([{"alias": "bottlerocket@latest"}]), None);
        assert_eq!(alias.alias(), Some("bottlerocket@latest"));
        assert_eq!(alias.effective_ami_family(), Some(AMIFamily::Bottlerocket));
        let custom = spec(
            serde_json::json!([{"alias": "al2023@latest"}]),
            Some("Custom"),
        );
        assert_eq!(custom.effective_ami_family(), Some(AMIFamily::Custom));
        let by_id = spec(serde_json::json!([{"id": "ami-1"}]), None);
        assert_eq!(by_id.effective_ami_family(), None);
    }

    #[test]
    fn metadata_options_default_to_imdsv2() {
        let options =
            spec(serde_json::json!([{"id": "ami-1"}]), Some("AL2023")).effective_metadata_options();
        assert_eq!(options.http_endpoint, Some(EnabledDisabled::Enabled));
        assert_eq!(options.http_protocol_ipv6, Some(EnabledDisabled::Disabled));
        assert_eq!(options.http_put_response_hop_limit, Some(1));
        assert_eq!(options.http_tokens, Some(HttpTokens::Required));
    }
}
