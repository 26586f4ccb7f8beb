//! API discovery: the legacy documents (`/api`, `/apis`, `/api/v1`,
//! `/apis/<group>[/<version>]`) and the aggregated `apidiscovery.k8s.io`
//! v2 / v2beta1 lists that kubectl 1.32 and client-go ask for first.

use serde_json::{Value, json};

use super::resources::{Registry, ResourceDef, VERBS};

/// Which aggregated discovery format a request accepts, if any.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    for range in accept.split(',') {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        let has = |p: &str| params.contains(&p);
        if has("as=APIGroupDiscoveryList") && has("g=apidiscovery.k8s.io") {
            if has("v=v2") {
                return Some("v2");
            }
            if has("v=v2beta1") {
                return Some("v2beta1");
            }
        }
    }
    None
}

fn scope(def: &ResourceDef) -> &'static str {
    if def.namespaced {
        "Namespaced"
    } else {
        "Cluster"
    }
}

fn resource_discovery(def: &ResourceDef) -> Value {
    let subresources: Vec<Value> = def
        .subresources()
        .into_iter()
        .map(|(name, group, version, kind, verbs)| {
            json!({"subresource": name, "responseKind": {"group": group, "version": version, "kind": kind}, "verbs": verbs})
        })
        .collect();
    let mut resource = json!({
        "resource": def.plural,
        "responseKind": {"group": def.group, "version": def.version, "kind": def.kind},
        "scope": scope(def),
        "singularResource": def.singular,
        "verbs": VERBS,
    });
    if !def.short_names.is_empty() {
        resource["shortNames"] = json!(def.short_names);
    }
    if !def.categories.is_empty() {
        resource["categories"] = json!(def.categories);
    }
    if !subresources.is_empty() {
        resource["subresources"] = json!(subresources);
    }
    resource
}

/// The aggregated list for `/api` (`core`) or `/apis` (every other group).
pub fn aggregated(registry: &Registry, core: bool, version: &str) -> Value {
    let items: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|(group, _)| group.is_empty() == core)
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = registry
                        .all()
                        .iter()
                        .filter(|d| d.group == group && &d.version == v)
                        .map(|d| resource_discovery(d))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !group.is_empty() {
                metadata["name"] = json!(group);
            }
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// `/api`.
pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn group_document(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions.first().cloned().unwrap_or(json!({}))})
}

/// `/apis`.
pub fn api_groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, versions)| group_document(&group, &versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, if the group is served.
pub fn api_group(registry: &Registry, group: &str) -> Option<Value> {
    let (_, versions) = registry.groups().into_iter().find(|(g, _)| g == group)?;
    let mut document = group_document(group, &versions);
    document["kind"] = json!("APIGroup");
    document["apiVersion"] = json!("v1");
    Some(document)
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs: Vec<_> = registry
        .all()
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for def in defs {
        let mut resource = json!({
            "name": def.plural, "singularName": def.singular, "namespaced": def.namespaced,
            "kind": def.kind, "verbs": VERBS,
        });
        if !def.short_names.is_empty() {
            resource["shortNames"] = json!(def.short_names);
        }
        if !def.categories.is_empty() {
            resource["categories"] = json!(def.categories);
        }
        resources.push(resource);
        for (name, sub_group, sub_version, kind, verbs) in def.subresources() {
            let mut sub = json!({
                "name": format!("{}/{name}", def.plural), "singularName": "", "namespaced": def.namespaced,
                "kind": kind, "verbs": verbs,
            });
            if sub_group != def.group || sub_version != def.version {
                sub["group"] = json!(sub_group);
                sub["version"] = json!(sub_version);
            }
            resources.push(sub);
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}
