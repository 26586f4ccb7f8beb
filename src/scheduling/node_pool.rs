//! NodePools and NodeClaims (the API objects) in the scheduler's terms: the
//! one place their requirements, labels, taints and limits are read, for
//! provisioning, `simulate` and the cloud providers alike.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;

use super::convert::{ConvertError, taint_from_k8s};
use super::input::NodePoolSpec;
use super::instance_type::InstanceType;
use super::labels;
use super::requirements::{Operator, Requirement, Requirements};
use super::resources::Resources;
use crate::apis::requirements::NodeSelectorRequirementWithMinValues;
use crate::apis::validation;
use crate::apis::{NodeClaim, NodePool};

/// `requirements` (a NodePool's or NodeClaim's, at `field`) as scheduler
/// requirements; `object` names the owner in errors.
pub fn requirements_from_api(
    object: &str,
    field: &str,
    requirements: &[NodeSelectorRequirementWithMinValues],
) -> Result<Requirements, ConvertError> {
    let mut out = Requirements::new();
    for (i, r) in requirements.iter().enumerate() {
        let field = format!("{field}[{i}]");
        let values: Vec<&str> = r.values().iter().map(String::as_str).collect();
        let mut requirement = Requirement::new(&r.key, Operator::from(r.operator), &values)
            .map_err(|source| ConvertError::Requirement {
                object: object.to_string(),
                field: field.clone(),
                source,
            })?;
        if let Some(min) = r.min_values {
            let min = u32::try_from(min)
                .ok()
                .filter(|m| (1..=50).contains(m))
                .ok_or_else(|| ConvertError::Invalid {
                    object: object.to_string(),
                    field: format!("{field}.minValues"),
                    message: format!("{min} is out of range; use 1 to 50"),
                })?;
            requirement = requirement.with_min_values(min);
        }
        out.add(requirement);
    }
    Ok(out)
}

/// Scheduler requirements as API requirements (a NodeClaim's
/// `spec.requirements`): `In`, `NotIn`, `Exists`, `DoesNotExist`, and `Gt` /
/// `Lt` for integer bounds (both when both are set), with `minValues`.
pub fn requirements_to_api(
    requirements: &Requirements,
) -> Vec<NodeSelectorRequirementWithMinValues> {
    use crate::apis::RequirementOperator as Api;
    let mut out = Vec::new();
    for r in requirements.iter() {
        let min_values = r.min_values.map(i64::from);
        let entry =
            |operator: Api, values: Option<Vec<String>>| NodeSelectorRequirementWithMinValues {
                key: r.key.clone(),
                operator,
                values,
                min_values,
            };
        let values = r.values.values().to_vec();
        match r.values.operator() {
            Operator::In => out.push(entry(Api::In, Some(values))),
            Operator::DoesNotExist => out.push(entry(Api::DoesNotExist, None)),
            Operator::NotIn => out.push(entry(Api::NotIn, Some(values))),
            _ => {
                let bounded = r.values.greater_than().is_some() || r.values.less_than().is_some();
                if !bounded {
                    out.push(entry(Api::Exists, None));
                }
            }
        }
        if let Some(gt) = r.values.greater_than() {
            out.push(entry(Api::Gt, Some(vec![gt.to_string()])));
        }
        if let Some(lt) = r.values.less_than() {
            out.push(entry(Api::Lt, Some(vec![lt.to_string()])));
        }
    }
    out
}

/// A NodeClaim's requirements (`spec.requirements`).
pub fn node_claim_requirements(claim: &NodeClaim) -> Result<Requirements, ConvertError> {
    let object = format!(
        "NodeClaim {}",
        claim.metadata.name.as_deref().unwrap_or_default()
    );
    requirements_from_api(&object, "spec.requirements", &claim.spec.requirements)
}

/// A NodePool in the scheduler's terms, launching `instance_types`.
/// Priority scores and `blocked` are left for the caller, who knows the
/// pool's extensions and readiness.
pub fn node_pool_spec(
    pool: &NodePool,
    instance_types: Arc<Vec<InstanceType>>,
) -> Result<NodePoolSpec, ConvertError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let object = format!("NodePool {name:?}");
    let template = &pool.spec.template;
    let mut requirements = requirements_from_api(
        &object,
        "spec.template.spec.requirements",
        &template.spec.requirements,
    )?;
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    for (key, value) in &labels {
        requirements.add(Requirement::single(key, value));
    }
    requirements.add(Requirement::single(labels::NODE_POOL, &name));
    let taints_at = |field: &str, list: Option<&Vec<k8s_openapi::api::core::v1::Taint>>| {
        list.into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| taint_from_k8s(&object, &format!("{field}[{i}]"), t))
            .collect::<Result<Vec<_>, _>>()
    };
    let taints = taints_at("spec.template.spec.taints", template.spec.taints.as_ref())?;
    let startup_taints = taints_at(
        "spec.template.spec.startupTaints",
        template.spec.startup_taints.as_ref(),
    )?;
    let mut limits = BTreeMap::new();
    if let Some(given) = &pool.spec.limits {
        let parsed = Resources::parse(given.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
            .map_err(|source| ConvertError::Quantity {
                object: object.clone(),
                field: "spec.limits".to_string(),
                source,
            })?;
        for key in given.keys() {
            limits.insert(key.clone(), parsed.get(key));
        }
    }
    Ok(NodePoolSpec {
        name,
        weight: pool.spec.weight.unwrap_or(0),
        requirements,
        labels,
        taints,
        startup_taints,
        limits,
        price_limit: price_limit(pool, &object)?,
        instance_types,
        priority_scores: None,
        blocked: None,
    })
}

/// The pool's `nodewright.io/price-limit-per-hour`, read as the NodePool
/// controller validates it.
fn price_limit(pool: &NodePool, object: &str) -> Result<Option<f64>, ConvertError> {
    validation::price_limit(pool.annotations()).map_err(|e| match e {
        validation::ValidationError::InvalidAnnotation {
            field,
            value,
            expected,
        } => ConvertError::Invalid {
            object: object.to_string(),
            field,
            message: format!("{value:?} is not {expected}"),
        },
        other => ConvertError::Invalid {
            object: object.to_string(),
            field: "metadata.annotations".to_string(),
            message: other.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(yaml: &str) -> NodePool {
        crate::yaml::from_str(yaml).unwrap()
    }

    const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  weight: 10
  limits: {cpu: "100", memory: 400Gi}
  template:
    metadata: {labels: {team: web}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m], minValues: 2}
      taints: [{key: dedicated, value: web, effect: NoSchedule}]
      startupTaints: [{key: agent, effect: NoExecute}]
"#;

    #[test]
    fn a_pool_reads_into_requirements_labels_taints_and_limits() {
        let spec = node_pool_spec(&pool(POOL), Arc::default()).unwrap();
        assert_eq!(spec.name, "general");
        assert_eq!(spec.weight, 10);
        let category = spec
            .requirements
            .get(crate::apis::labels::INSTANCE_CATEGORY_LABEL_KEY)
            .unwrap();
        assert!(category.has("c") && category.has("m") && !category.has("r"));
        assert_eq!(category.min_values, Some(2));
        assert!(spec.requirements.get("team").unwrap().has("web"));
        assert!(
            spec.requirements
                .get(labels::NODE_POOL)
                .unwrap()
                .has("general")
        );
        assert_eq!(spec.taints.len(), 1);
        assert_eq!(spec.startup_taints.len(), 1);
        assert_eq!(spec.limits.get("cpu"), Some(&100_000));
    }

    #[test]
    fn the_price_limit_annotation_is_read_and_a_bad_one_names_itself() {
        let annotated = |value: &str| {
            POOL.replace(
                "metadata: {name: general}",
                &format!("metadata: {{name: general, annotations: {{nodewright.io/price-limit-per-hour: {value:?}}}}}"),
            )
        };
        let spec = node_pool_spec(&pool(POOL), Arc::default()).unwrap();
        assert_eq!(spec.price_limit, None, "off by default");
        let spec = node_pool_spec(&pool(&annotated("12.50")), Arc::default()).unwrap();
        assert_eq!(spec.price_limit, Some(12.5));
        for bad in ["twelve", "-1", "NaN", "inf", ""] {
            let error = node_pool_spec(&pool(&annotated(bad)), Arc::default())
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("metadata.annotations[nodewright.io/price-limit-per-hour]")
                    && error.contains("dollars per hour"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn requirements_round_trip_through_the_api_form() {
        let mut reqs = Requirements::new();
        reqs.add(
            Requirement::new("zone", Operator::In, &["a", "b"])
                .unwrap()
                .with_min_values(2),
        );
        reqs.add(Requirement::new("family", Operator::NotIn, &["t3"]).unwrap());
        reqs.add(Requirement::new("gpu", Operator::DoesNotExist, &[]).unwrap());
        reqs.add(Requirement::new("team", Operator::Exists, &[]).unwrap());
        let mut cpu = Requirement::new("cpu", Operator::Gt, &["2"]).unwrap();
        cpu = cpu.intersection(&Requirement::new("cpu", Operator::Lt, &["16"]).unwrap());
        reqs.add(cpu);
        let api = requirements_to_api(&reqs);
        assert_eq!(api.len(), 6, "{api:?}");
        let back = requirements_from_api("test", "spec.requirements", &api).unwrap();
        for key in ["zone", "family", "gpu", "team"] {
            assert_eq!(back.get(key), reqs.get(key), "{key}");
        }
        let cpu = back.get("cpu").unwrap();
        assert!(cpu.has("3") && cpu.has("15") && !cpu.has("2") && !cpu.has("16"));
        assert_eq!(back.get("zone").unwrap().min_values, Some(2));
    }

    #[test]
    fn a_bad_min_values_names_the_field() {
        let yaml = POOL.replace("minValues: 2", "minValues: 60");
        let err = node_pool_spec(&pool(&yaml), Arc::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("NodePool \"general\"")
                && err.contains("spec.template.spec.requirements[0].minValues")
                && err.contains("1 to 50"),
            "{err}"
        );
    }
}
