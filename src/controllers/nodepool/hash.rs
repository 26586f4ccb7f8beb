//! The NodePool template hash that static drift compares: the template
//! without its requirements (they drift by themselves), with lists treated
//! as sets and empty values ignored, hashed with a stable 64-bit FNV-1a so
//! the value survives upgrades. Karpenter's own hash (of another version)
//! is never compared with ours: NodeClaims carrying an older hash version
//! are re-stamped, not drifted, which makes switching from Karpenter safe.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::apis::hash::{canonical, fnv1a, restamp};
use crate::apis::labels::{NODE_POOL_HASH_ANNOTATION_KEY, NODE_POOL_HASH_VERSION_ANNOTATION_KEY};
use crate::apis::{NodeClaim, NodePool};

/// Version of this hash, written beside it (`karpenter.sh/nodepool-hash-version`).
pub const NODE_POOL_HASH_VERSION: &str = "nw1";

/// The hash of `pool`'s template.
pub fn node_pool_hash(pool: &NodePool) -> String {
    let mut template = serde_json::to_value(&pool.spec.template).unwrap_or(Value::Null);
    if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("requirements");
    }
    let canonical = canonical(template).unwrap_or(Value::Null);
    fnv1a(canonical.to_string().as_bytes()).to_string()
}

/// The annotations re-stamping writes on a NodeClaim of a pool whose hash
/// is `hash` (as Karpenter's NodePool hash controller): nothing when the
/// claim already carries this hash version; otherwise the version, and the
/// hash unless the claim is already `Drifted` — a drift found under the old
/// hash (Karpenter's, on migration) cannot be re-checked under the new one,
/// so the old hash stays and the claim stays drifted.
pub fn restamped_annotations(claim: &NodeClaim, hash: &str) -> BTreeMap<&'static str, String> {
    restamp(
        claim,
        hash,
        NODE_POOL_HASH_ANNOTATION_KEY,
        NODE_POOL_HASH_VERSION_ANNOTATION_KEY,
        NODE_POOL_HASH_VERSION,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(extra: &str) -> NodePool {
        crate::yaml::from_str(&format!(
            r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: general}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: [{{key: karpenter.k8s.aws/instance-category, operator: In, values: [c]}}]
{extra}"#
        ))
        .unwrap()
    }

    fn claim(version: &str, drifted: bool) -> NodeClaim {
        let conditions = if drifted {
            serde_json::json!([{"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
                                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}])
        } else {
            serde_json::json!([])
        };
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "a", "annotations": {
                "karpenter.sh/nodepool-hash": "old", "karpenter.sh/nodepool-hash-version": version}},
            "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn restamping_keeps_the_hash_of_a_drifted_claim() {
        let fresh = restamped_annotations(&claim("v3", false), "new");
        assert_eq!(fresh[NODE_POOL_HASH_ANNOTATION_KEY], "new");
        assert_eq!(
            fresh[NODE_POOL_HASH_VERSION_ANNOTATION_KEY],
            NODE_POOL_HASH_VERSION
        );
        let drifted = restamped_annotations(&claim("v3", true), "new");
        assert_eq!(drifted.get(NODE_POOL_HASH_ANNOTATION_KEY), None);
        assert_eq!(
            drifted[NODE_POOL_HASH_VERSION_ANNOTATION_KEY],
            NODE_POOL_HASH_VERSION
        );
        assert!(restamped_annotations(&claim(NODE_POOL_HASH_VERSION, false), "new").is_empty());
    }

    #[test]
    fn the_hash_follows_the_template_but_not_its_requirements() {
        let base = node_pool_hash(&pool(""));
        assert_eq!(base, node_pool_hash(&pool("")), "stable");
        // Pinned: a change of the algorithm must come with a new version.
        assert_eq!(
            base, "8789470249708341331",
            "bump NODE_POOL_HASH_VERSION with the algorithm"
        );
        let other_requirements = pool("").spec.template.spec.requirements.clone();
        let mut changed = pool("");
        changed.spec.template.spec.requirements = other_requirements.into_iter().rev().collect();
        changed.spec.template.spec.requirements.clear();
        assert_eq!(
            base,
            node_pool_hash(&changed),
            "requirements are not hashed"
        );
        let tainted =
            pool("      taints: [{key: a, effect: NoSchedule}, {key: b, effect: NoSchedule}]\n");
        let reordered =
            pool("      taints: [{key: b, effect: NoSchedule}, {key: a, effect: NoSchedule}]\n");
        assert_ne!(base, node_pool_hash(&tainted));
        assert_eq!(
            node_pool_hash(&tainted),
            node_pool_hash(&reordered),
            "lists are sets"
        );
        assert_eq!(
            base,
            node_pool_hash(&pool("      taints: []\n")),
            "empty is absent"
        );
    }
}
