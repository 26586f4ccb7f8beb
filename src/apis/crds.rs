//! The CustomResourceDefinitions (NodePool, NodeClaim, EC2NodeClass and the
//! alpha NodeOverlay), generated from the Rust types and
//! serialized as YAML for `crds/` and `nodewright crds`.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::apis::ec2nodeclass::EC2NodeClass;
use crate::apis::nodeclaim::NodeClaim;
use crate::apis::nodeoverlay::NodeOverlay;
use crate::apis::nodepool::NodePool;

/// Why the CRDs could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// YAML serialization failed.
    #[error("serializing CRD {name} to YAML: {source}")]
    Yaml {
        /// CRD name.
        name: String,
        /// The serializer's error.
        source: serde_saphyr::SerializeError,
    },
}

/// First line of every generated file.
pub const HEADER: &str =
    "# Generated from the nodewright API types by `nodewright crds`; do not edit.\n";

/// The CRD objects, in file order, shaped like Karpenter's: no `nullable`
/// markers (absent and null mean the same to these APIs), no `title`, the
/// standard `apiVersion`/`kind`/`metadata` root properties and a `listKind`.
///
/// Install these (not `NodePool::crd()` directly) into API servers and emulators.
pub fn definitions() -> Vec<CustomResourceDefinition> {
    vec![
        NodePool::crd(),
        NodeClaim::crd(),
        EC2NodeClass::crd(),
        NodeOverlay::crd(),
    ]
    .into_iter()
    .map(karpenter_style)
    .collect()
}

fn karpenter_style(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    if crd.spec.names.list_kind.is_none() {
        crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    }
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        strip_nullable(schema);
        schema.title = None;
        let properties = schema.properties.get_or_insert_with(BTreeMap::new);
        let string = |description: &str| JSONSchemaProps {
            type_: Some("string".into()),
            description: Some(description.into()),
            ..JSONSchemaProps::default()
        };
        properties.entry("apiVersion".into()).or_insert_with(|| {
            string("APIVersion defines the versioned schema of this representation of an object.")
        });
        properties.entry("kind".into()).or_insert_with(|| {
            string("Kind is a string value representing the REST resource this object represents.")
        });
        properties
            .entry("metadata".into())
            .or_insert_with(|| JSONSchemaProps {
                type_: Some("object".into()),
                ..JSONSchemaProps::default()
            });
    }
    crd
}

/// Removes `nullable` and `title` everywhere, and writes int-or-string
/// alternatives as `anyOf: [{type: integer}, {type: string}]` like controller-gen.
fn strip_nullable(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    schema.title = None;
    if schema.x_kubernetes_int_or_string == Some(true)
        && let Some(any_of) = &mut schema.any_of
        && any_of.len() == 2
        && any_of.iter().all(|alt| alt.type_.is_none())
    {
        for (alt, type_) in any_of.iter_mut().zip(["integer", "string"]) {
            alt.type_ = Some(type_.into());
        }
    }
    let children = schema
        .properties
        .iter_mut()
        .flat_map(|p| p.values_mut())
        .chain(schema.all_of.iter_mut().flatten())
        .chain(schema.any_of.iter_mut().flatten())
        .chain(schema.one_of.iter_mut().flatten());
    for child in children {
        strip_nullable(child);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => strip_nullable(item),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(strip_nullable),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(additional)) = &mut schema.additional_properties {
        strip_nullable(additional);
    }
    if let Some(not) = &mut schema.not {
        strip_nullable(not);
    }
}

/// The file name a CRD is written to: `<group>_<plural>.yaml`, as Karpenter names them.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// The CRDs as `(file name, YAML)` pairs: `karpenter.sh_nodepools.yaml`,
/// `karpenter.sh_nodeclaims.yaml`, `karpenter.k8s.aws_ec2nodeclasses.yaml`,
/// `karpenter.sh_nodeoverlays.yaml`.
/// Output is deterministic (object keys are sorted).
pub fn generate() -> Result<Vec<(String, String)>, CrdError> {
    definitions()
        .into_iter()
        .map(|crd| {
            let name = file_name(&crd);
            let yaml = crate::yaml::to_string(&crd).map_err(|source| CrdError::Yaml {
                name: crd.metadata.name.clone().unwrap_or_default(),
                source,
            })?;
            Ok((name, format!("{HEADER}{yaml}")))
        })
        .collect()
}
