//! Drift checks that need no cloud API: the EC2NodeClass hash a NodeClaim
//! was launched with against the class's spec now.

use std::collections::BTreeMap;

use crate::apis::ec2nodeclass::EC2_NODE_CLASS_HASH_VERSION;
use crate::apis::hash::restamp;
use crate::apis::labels::{
    EC2_NODE_CLASS_HASH_ANNOTATION_KEY, EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY,
};
use crate::apis::{EC2NodeClass, NodeClaim};

/// Whether the class's static spec changed since `claim` was launched: the
/// claim carries a class hash of this version and it is not the class's
/// hash now (Karpenter's static drift). A hash of another version
/// (Karpenter's) is not compared; the EC2NodeClass controller re-stamps it.
pub fn node_class_hash_drifted(claim: &NodeClaim, class: &EC2NodeClass) -> bool {
    let annotations = claim.metadata.annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key));
    if get(EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY).map(String::as_str)
        != Some(EC2_NODE_CLASS_HASH_VERSION)
    {
        return false;
    }
    get(EC2_NODE_CLASS_HASH_ANNOTATION_KEY).is_some_and(|hash| *hash != class.hash())
}

/// Writes `class`'s hash and its version on a NodeClaim being launched.
pub fn stamp_node_class_hash(claim: &mut NodeClaim, class: &EC2NodeClass) {
    let annotations = claim.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(EC2_NODE_CLASS_HASH_ANNOTATION_KEY.to_string(), class.hash());
    annotations.insert(
        EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY.to_string(),
        EC2_NODE_CLASS_HASH_VERSION.to_string(),
    );
}

/// The annotations that re-stamp `claim` with `class`'s hash when it
/// carries a class hash of another version (nothing otherwise; a `Drifted`
/// claim keeps its old hash).
pub fn restamped_class_annotations(
    claim: &NodeClaim,
    class: &EC2NodeClass,
) -> BTreeMap<&'static str, String> {
    restamp(
        claim,
        &class.hash(),
        EC2_NODE_CLASS_HASH_ANNOTATION_KEY,
        EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY,
        EC2_NODE_CLASS_HASH_VERSION,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_hash<T: kube::Resource>(mut object: T, hash: &str, version: &str) -> T {
        object.meta_mut().annotations = Some(
            [
                (
                    EC2_NODE_CLASS_HASH_ANNOTATION_KEY.to_string(),
                    hash.to_string(),
                ),
                (
                    EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY.to_string(),
                    version.to_string(),
                ),
            ]
            .into(),
        );
        object
    }

    fn claim() -> NodeClaim {
        crate::yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: c}\nspec:\n  requirements: []\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
        )
        .unwrap()
    }

    fn class() -> EC2NodeClass {
        crate::yaml::from_str(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  role: R\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{id: subnet-1}]\n  securityGroupSelectorTerms: [{id: sg-1}]\n",
        )
        .unwrap()
    }

    #[test]
    fn a_changed_spec_under_the_same_hash_version_is_drift() {
        let mut launched = claim();
        stamp_node_class_hash(&mut launched, &class());
        assert!(!node_class_hash_drifted(&launched, &class()));
        let mut changed = class();
        changed.spec.user_data = Some("echo changed".to_string());
        assert!(node_class_hash_drifted(&launched, &changed));
        // Karpenter's hash (another version) is never compared, and a claim
        // without a hash is not drifted by it.
        let karpenter = with_hash(claim(), "123", "v4");
        assert!(!node_class_hash_drifted(&karpenter, &changed));
        assert!(!node_class_hash_drifted(&claim(), &changed));
    }

    #[test]
    fn claims_of_another_hash_version_are_restamped() {
        let karpenter = with_hash(claim(), "123", "v4");
        let stamp = restamped_class_annotations(&karpenter, &class());
        assert_eq!(stamp[EC2_NODE_CLASS_HASH_ANNOTATION_KEY], class().hash());
        assert_eq!(
            stamp[EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY],
            EC2_NODE_CLASS_HASH_VERSION
        );
        let mut ours = claim();
        stamp_node_class_hash(&mut ours, &class());
        assert!(restamped_class_annotations(&ours, &class()).is_empty());
    }
}
