//! The OpenAPI v3 documents kubectl needs before it writes: `/openapi/v3`
//! lists one document per group version, and each document declares the
//! PATCH operation of every kind with its `fieldValidation` parameter, so
//! `kubectl apply` and `create` validate on the server
//! (`fieldValidation=Strict`) instead of downloading schemas. The documents
//! carry custom resources' schemas (from their CRDs) but no schemas for
//! built-in kinds; strategic merge patches are not advertised, so kubectl
//! computes them from its compiled-in types, as it does for servers without
//! OpenAPI.

use serde_json::{Map, Value, json};

use super::resources::Registry;

/// A group version's path in the OpenAPI v3 index (`api/v1`, `apis/apps/v1`).
fn index_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: where each group version's document is.
pub fn index(registry: &Registry, hash: u64) -> Value {
    let mut paths = Map::new();
    for (group, versions) in registry.groups() {
        for version in versions {
            let path = index_path(&group, &version);
            let url = format!("/openapi/v3/{path}?hash={hash:016X}");
            paths.insert(path, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<api/v1 | apis/group/version>`, if served.
pub fn document(registry: &Registry, path: &str) -> Option<Value> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version) = match segments.as_slice() {
        ["api", version] => ("", *version),
        ["apis", group, version] => (*group, *version),
        _ => return None,
    };
    let defs: Vec<_> = registry
        .all()
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for def in defs {
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if def.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", def.plural)
        } else {
            format!("{prefix}/{}/{{name}}", def.plural)
        };
        let gvk = json!({"group": def.group, "version": def.version, "kind": def.kind});
        paths.insert(
            path,
            json!({"patch": {
                "operationId": format!("patch{}", def.kind),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
                ],
                "requestBody": {"content": {
                    "application/apply-patch+yaml": {"schema": {"type": "object"}},
                    "application/json-patch+json": {"schema": {"type": "object"}},
                    "application/merge-patch+json": {"schema": {"type": "object"}},
                }},
                "responses": {"200": {"description": "OK"}},
            }}),
        );
        if let Some(crd) = &def.crd {
            let mut schema = crd.schema.clone();
            schema["x-kubernetes-group-version-kind"] = json!([gvk]);
            let name = format!(
                "{}.{}.{}",
                reverse_domain(&def.group),
                def.version,
                def.kind
            );
            schemas.insert(name, schema);
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `karpenter.sh` → `sh.karpenter`, as OpenAPI schema names spell groups.
fn reverse_domain(group: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    parts.join(".")
}
