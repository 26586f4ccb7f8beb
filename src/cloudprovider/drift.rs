//! Drift checks that need no cloud API: the EC2NodeClass hash a NodeClaim
//! was launched with against the class's current one.

use crate::apis::labels::{
    EC2_NODE_CLASS_HASH_ANNOTATION_KEY, EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY,
};
use crate::apis::{EC2NodeClass, NodeClaim};

/// Whether the class's spec changed since `claim` was launched: both carry
/// the class hash annotation, of the same hash version, and they differ
/// (Karpenter's static drift; a hash of another version is not compared).
pub fn node_class_hash_drifted(claim: &NodeClaim, class: &EC2NodeClass) -> bool {
    let get = |annotations: &Option<std::collections::BTreeMap<String, String>>, key: &str| {
        annotations.as_ref().and_then(|a| a.get(key).cloned())
    };
    let (claim_hash, class_hash) = (
        get(
            &claim.metadata.annotations,
            EC2_NODE_CLASS_HASH_ANNOTATION_KEY,
        ),
        get(
            &class.metadata.annotations,
            EC2_NODE_CLASS_HASH_ANNOTATION_KEY,
        ),
    );
    let same_version = get(
        &claim.metadata.annotations,
        EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY,
    ) == get(
        &class.metadata.annotations,
        EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY,
    );
    matches!((claim_hash, class_hash), (Some(a), Some(b)) if same_version && a != b)
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
        serde_norway::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: c}\nspec:\n  requirements: []\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
        )
        .unwrap()
    }

    fn class() -> EC2NodeClass {
        serde_norway::from_str(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  role: R\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{id: subnet-1}]\n  securityGroupSelectorTerms: [{id: sg-1}]\n",
        )
        .unwrap()
    }

    #[test]
    fn a_changed_hash_of_the_same_version_is_drift() {
        assert!(node_class_hash_drifted(
            &with_hash(claim(), "1", "v6"),
            &with_hash(class(), "2", "v6")
        ));
        assert!(!node_class_hash_drifted(
            &with_hash(claim(), "1", "v6"),
            &with_hash(class(), "1", "v6")
        ));
        assert!(!node_class_hash_drifted(
            &with_hash(claim(), "1", "v5"),
            &with_hash(class(), "2", "v6")
        ));
        assert!(!node_class_hash_drifted(
            &claim(),
            &with_hash(class(), "2", "v6")
        ));
    }
}
