//! A planned NodeClaim (the scheduler's [`NewNodeClaim`]) as the object the
//! provisioner creates, following Karpenter's `NodeClaimTemplate.ToNodeClaim`:
//! the pool's template (labels, annotations, taints, startup taints,
//! `expireAfter`, `terminationGracePeriod`, class reference), the solved
//! requirements narrowed to the instance-type options, the pods' requests,
//! and an owner reference to the NodePool. It carries the termination
//! finalizer from the start, which spares the lifecycle controller a write
//! per claim (it still adds the finalizer to claims made without it).

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use crate::apis::labels::{
    EC2_NODE_CLASS_LABEL_KEY, INSTANCE_TYPE_LABEL_KEY, NODE_POOL_HASH_ANNOTATION_KEY,
    NODE_POOL_HASH_VERSION_ANNOTATION_KEY, NODE_POOL_LABEL_KEY, TERMINATION_FINALIZER,
};
use crate::apis::nodeclaim::NodeClaimResources;
use crate::apis::requirements::NodeSelectorRequirementWithMinValues;
use crate::apis::{NodeClaim, NodeClaimSpec, NodePool, RequirementOperator};
use crate::controllers::nodepool::{NODE_POOL_HASH_VERSION, node_pool_hash};
use crate::scheduling::NewNodeClaim;
use crate::scheduling::node_pool::requirements_to_api;

/// Characters of generated name suffixes (the API server's `generateName`
/// alphabet: no vowels, no look-alikes).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `<pool>-<5 random characters>`, as the API server names objects created
/// with `generateName`.
pub fn generate_name(pool: &str) -> String {
    let mut random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let mut suffix = String::with_capacity(5);
    for _ in 0..5 {
        let index = (random % SUFFIX_ALPHABET.len() as u64) as usize;
        suffix.push(char::from(SUFFIX_ALPHABET[index]));
        random /= SUFFIX_ALPHABET.len() as u64;
    }
    format!("{pool}-{suffix}")
}

/// Counts a NodeClaim created for `reason` (`provisioning`, or a
/// disruption reason for a replacement) in
/// `karpenter_nodeclaims_created_total`.
pub fn count_created(node_pool: &str, reason: &str) {
    crate::metrics::metrics()
        .nodeclaims_created
        .get_or_create(&crate::metrics::labels(&[
            ("reason", reason),
            ("nodepool", node_pool),
            ("min_values_relaxed", "false"),
        ]))
        .inc();
}

/// The NodeClaim object for `planned`, a NodeClaim of `pool`, named `name`.
pub fn node_claim_object(pool: &NodePool, planned: &NewNodeClaim, name: String) -> NodeClaim {
    let template = &pool.spec.template;
    let template_meta = template.metadata.clone().unwrap_or_default();
    let pool_name = pool.name_any();

    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    labels.extend(planned.labels.clone());
    labels.insert(NODE_POOL_LABEL_KEY.to_string(), pool_name.clone());
    labels.insert(
        EC2_NODE_CLASS_LABEL_KEY.to_string(),
        template.spec.node_class_ref.name.clone(),
    );
    // The hash of the template the claim is made from, computed here as
    // Karpenter does: the pool's annotation lags (the NodePool controller
    // stamps it), and a claim made before the first stamp would have none
    // and could never drift.
    let mut annotations: BTreeMap<String, String> = template_meta.annotations.unwrap_or_default();
    annotations.insert(
        NODE_POOL_HASH_ANNOTATION_KEY.to_string(),
        node_pool_hash(pool),
    );
    annotations.insert(
        NODE_POOL_HASH_VERSION_ANNOTATION_KEY.to_string(),
        NODE_POOL_HASH_VERSION.to_string(),
    );

    let mut requirements: Vec<NodeSelectorRequirementWithMinValues> =
        requirements_to_api(&planned.requirements)
            .into_iter()
            .filter(|r| r.key != INSTANCE_TYPE_LABEL_KEY)
            .collect();
    let min_values = planned
        .requirements
        .get(INSTANCE_TYPE_LABEL_KEY)
        .and_then(|r| r.min_values)
        .map(i64::from);
    requirements.push(NodeSelectorRequirementWithMinValues {
        key: INSTANCE_TYPE_LABEL_KEY.to_string(),
        operator: RequirementOperator::In,
        values: Some(
            planned
                .instance_type_options
                .iter()
                .map(|o| o.name.clone())
                .collect(),
        ),
        min_values,
    });
    let requests: BTreeMap<String, Quantity> = planned
        .requests
        .to_quantities()
        .into_iter()
        .map(|(k, v)| (k, Quantity(v)))
        .collect();

    NodeClaim {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "karpenter.sh/v1".to_string(),
                kind: "NodePool".to_string(),
                name: pool_name,
                uid: pool.metadata.uid.clone().unwrap_or_default(),
                block_owner_deletion: Some(true),
                controller: None,
            }]),
            finalizers: Some(vec![TERMINATION_FINALIZER.to_string()]),
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            taints: template.spec.taints.clone(),
            startup_taints: template.spec.startup_taints.clone(),
            requirements,
            resources: Some(NodeClaimResources {
                requests: Some(requests),
            }),
            node_class_ref: template.spec.node_class_ref.clone(),
            termination_grace_period: template.spec.termination_grace_period.clone(),
            expire_after: template.spec.expire_after.clone(),
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::{
        CapacityType, InstanceTypeOption, Operator, Requirement, Requirements, Resources,
    };

    fn pool() -> NodePool {
        crate::yaml::from_str(
            r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
  uid: pool-uid
  annotations: {karpenter.sh/nodepool-hash: "123", karpenter.sh/nodepool-hash-version: v3}
spec:
  template:
    metadata: {labels: {team: web}, annotations: {owner: platform}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
      taints: [{key: dedicated, value: web, effect: NoSchedule}]
      startupTaints: [{key: agent, effect: NoExecute}]
      expireAfter: 720h
      terminationGracePeriod: 48h
"#,
        )
        .unwrap()
    }

    fn planned() -> NewNodeClaim {
        let mut requirements = Requirements::new();
        requirements.add(
            Requirement::new(
                crate::apis::labels::ZONE_LABEL_KEY,
                Operator::In,
                &["us-east-1a"],
            )
            .unwrap(),
        );
        requirements.add(
            Requirement::new(
                INSTANCE_TYPE_LABEL_KEY,
                Operator::In,
                &["m5.large", "m5.xlarge", "c5.large"],
            )
            .unwrap(),
        );
        let option = |name: &str, price| InstanceTypeOption {
            name: name.to_string(),
            price,
            score: None,
        };
        NewNodeClaim {
            node_pool: "general".to_string(),
            instance_type_options: vec![option("m5.large", 0.096), option("m5.xlarge", 0.192)],
            instance_type: "m5.large".to_string(),
            zone: "us-east-1a".to_string(),
            capacity_type: CapacityType::OnDemand,
            price: 0.096,
            reservation_id: None,
            pods: vec![crate::scheduling::PodKey::new("default", "web-0")],
            requests: Resources::cpu_memory(1500, 3 << 30).with_pods(2),
            requirements,
            labels: BTreeMap::from([(
                crate::apis::labels::ZONE_LABEL_KEY.to_string(),
                "us-east-1a".to_string(),
            )]),
            taints: Vec::new(),
        }
    }

    /// A claim made before the NodePool controller first stamps the pool
    /// (its write refused, say) still drifts when the template changes.
    #[test]
    fn a_claim_made_before_the_pool_is_stamped_drifts_when_its_template_changes() {
        use crate::cloudprovider::DriftReason;
        use crate::controllers::nodeclaim::marks::node_pool_drift;

        let stamp = |mut pool: NodePool| {
            let hash = node_pool_hash(&pool);
            pool.metadata.annotations = Some(BTreeMap::from([
                (NODE_POOL_HASH_ANNOTATION_KEY.to_string(), hash),
                (
                    NODE_POOL_HASH_VERSION_ANNOTATION_KEY.to_string(),
                    NODE_POOL_HASH_VERSION.to_string(),
                ),
            ]));
            pool
        };
        let mut unstamped = pool();
        unstamped.metadata.annotations = None;
        let claim = node_claim_object(&unstamped, &planned(), "general-x".to_string());
        assert_eq!(node_pool_drift(&stamp(unstamped.clone()), &claim), None);
        let mut changed = unstamped;
        if let Some(meta) = changed.spec.template.metadata.as_mut() {
            meta.labels
                .get_or_insert_with(BTreeMap::new)
                .insert("team".to_string(), "api".to_string());
        }
        assert_eq!(
            node_pool_drift(&stamp(changed), &claim),
            Some(DriftReason::NodePoolDrifted)
        );
    }

    #[test]
    fn the_claim_carries_the_template_the_options_and_the_requests() {
        let claim = node_claim_object(&pool(), &planned(), "general-x".to_string());
        let labels = claim.metadata.labels.clone().unwrap();
        assert_eq!(labels["team"], "web");
        assert_eq!(labels[NODE_POOL_LABEL_KEY], "general");
        assert_eq!(labels[EC2_NODE_CLASS_LABEL_KEY], "default");
        assert_eq!(labels[crate::apis::labels::ZONE_LABEL_KEY], "us-east-1a");
        let annotations = claim.metadata.annotations.clone().unwrap();
        assert_eq!(annotations["owner"], "platform");
        // The template's own hash, not the pool's (possibly stale) stamp.
        assert_eq!(
            annotations[NODE_POOL_HASH_ANNOTATION_KEY],
            node_pool_hash(&pool())
        );
        assert_ne!(annotations[NODE_POOL_HASH_ANNOTATION_KEY], "123");
        assert_eq!(
            annotations[NODE_POOL_HASH_VERSION_ANNOTATION_KEY],
            NODE_POOL_HASH_VERSION
        );
        let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("NodePool", "pool-uid")
        );
        assert_eq!(claim.finalizers(), [TERMINATION_FINALIZER]);
        let types: Vec<&NodeSelectorRequirementWithMinValues> = claim
            .spec
            .requirements
            .iter()
            .filter(|r| r.key == INSTANCE_TYPE_LABEL_KEY)
            .collect();
        assert_eq!(types.len(), 1);
        assert_eq!(
            types[0].values.as_deref().unwrap(),
            ["m5.large".to_string(), "m5.xlarge".to_string()]
        );
        let requests = claim.spec.resources.unwrap().requests.unwrap();
        assert_eq!(requests["cpu"].0, "1500m");
        assert_eq!(requests["memory"].0, "3Gi");
        assert_eq!(claim.spec.taints.unwrap()[0].key, "dedicated");
        assert_eq!(claim.spec.startup_taints.unwrap()[0].key, "agent");
        assert_eq!(claim.spec.termination_grace_period.as_deref(), Some("48h"));
    }

    #[test]
    fn generated_names_look_like_the_api_servers() {
        let name = generate_name("general");
        let suffix = name.strip_prefix("general-").unwrap();
        assert_eq!(suffix.len(), 5);
        assert!(
            suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)),
            "{name}"
        );
        assert_ne!(generate_name("general"), generate_name("general"));
    }
}
