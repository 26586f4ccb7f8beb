//! The EC2NodeClass hash that static drift compares (Karpenter's
//! `EC2NodeClass.Hash()`): the spec without the fields that drift by
//! themselves through the class's status (subnet, security group, AMI and
//! capacity reservation selectors, `amiFamily`), without `kubelet` and
//! `ipPrefixCount` (as Karpenter) and without nodewright's `extensions`
//! (their effect shows as requirement or AMI drift), in the canonical
//! form the NodePool hash uses. Karpenter's own hash (of another version)
//! is never compared with ours: NodeClaims carrying it are re-stamped.

use serde_json::Value;

use super::EC2NodeClass;
use crate::apis::hash::{canonical, fnv1a};

/// Version of this hash (`karpenter.k8s.aws/ec2nodeclass-hash-version`).
pub const EC2_NODE_CLASS_HASH_VERSION: &str = "nw1";

/// Spec fields the hash leaves out.
const NOT_HASHED: [&str; 8] = [
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "capacityReservationSelectorTerms",
    "amiSelectorTerms",
    "amiFamily",
    "ipPrefixCount",
    "kubelet",
    "extensions",
];

impl EC2NodeClass {
    /// The hash of the class's static spec, of version
    /// [`EC2_NODE_CLASS_HASH_VERSION`].
    pub fn hash(&self) -> String {
        let mut spec = serde_json::to_value(&self.spec).unwrap_or(Value::Null);
        if let Some(fields) = spec.as_object_mut() {
            for field in NOT_HASHED {
                fields.remove(field);
            }
        }
        let canonical = canonical(spec).unwrap_or(Value::Null);
        fnv1a(canonical.to_string().as_bytes()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(extra: &str) -> EC2NodeClass {
        crate::yaml::from_str(&format!(
            r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: NodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{discovery: a}}}}]
  securityGroupSelectorTerms: [{{tags: {{discovery: a}}}}]
{extra}"#
        ))
        .unwrap()
    }

    #[test]
    fn static_fields_change_the_hash() {
        let base = class("").hash();
        assert_eq!(base, class("").hash(), "stable");
        for changed in [
            "  userData: echo hi",
            "  tags: {team: a}",
            "  detailedMonitoring: true",
            "  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 40Gi}}]",
            "  metadataOptions: {httpTokens: optional}",
        ] {
            assert_ne!(base, class(changed).hash(), "{changed}");
        }
        let role = class("").hash();
        let mut other = class("");
        other.spec.role = Some("OtherRole".to_string());
        assert_ne!(role, other.hash());
    }

    #[test]
    fn fields_that_drift_through_the_status_do_not() {
        let base = class("").hash();
        let mut selectors = class("  amiFamily: AL2023\n  kubelet: {maxPods: 20}\n");
        selectors.spec.subnet_selector_terms.clear();
        selectors.spec.security_group_selector_terms.clear();
        selectors.spec.ami_selector_terms.clear();
        assert_eq!(base, selectors.hash());
    }
}
