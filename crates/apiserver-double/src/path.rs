//! Resource paths: `/api/v1/...` (core) or `/apis/{group}/{version}/...`,
//! optionally namespaced, optionally naming an object and a subresource,
//! resolved against the served resources.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::resources::{Registry, ResourceDef};

/// A request path resolved to a resource.
#[derive(Debug, Clone)]
pub struct Route {
    pub def: Arc<ResourceDef>,
    /// The namespace in the path (`None`: cluster-scoped, or all namespaces).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Route {
    /// The namespace for a single object ("" for cluster-scoped resources).
    pub fn namespace_or_empty(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }
}

/// Resolves `path`, or `None` when it names no served resource (404).
pub fn route(registry: &Registry, path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    // `namespaces/{ns}/{plural}/...` is namespaced when `plural` is a
    // namespaced resource; otherwise `namespaces/{name}/status` is the
    // Namespace's own subresource.
    let namespaced = match rest {
        ["namespaces", namespace, plural, tail @ ..] => registry
            .lookup(group, version, plural)
            .filter(|d| d.namespaced)
            .map(|def| (def, Some(namespace.to_string()), tail)),
        _ => None,
    };
    let (def, namespace, tail) = match namespaced {
        Some(found) => found,
        None => {
            let [plural, tail @ ..] = rest else {
                return None;
            };
            (registry.lookup(group, version, plural)?, None, tail)
        }
    };
    let (name, subresource) = match tail {
        [] => (None, None),
        [name] => (Some(name.to_string()), None),
        [name, sub] => (Some(name.to_string()), Some(sub.to_string())),
        _ => return None,
    };
    // A namespaced object needs its namespace; collections may span all.
    if def.namespaced && namespace.is_none() && name.is_some() {
        return None;
    }
    if let Some(sub) = &subresource
        && !def.subresources().iter().any(|(s, ..)| s == sub)
    {
        return None;
    }
    if namespace.as_deref().is_some_and(str::is_empty) {
        return None;
    }
    Some(Route {
        def,
        namespace,
        name,
        subresource,
    })
}

/// Decoded query parameters.
pub fn query_params(query: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_with_scopes() {
        let registry = Registry::builtin();
        let pods = route(&registry, "/api/v1/namespaces/default/pods/web-1/eviction").unwrap();
        assert_eq!(pods.def.plural, "pods");
        assert_eq!(pods.namespace.as_deref(), Some("default"));
        assert_eq!(pods.subresource.as_deref(), Some("eviction"));
        let all = route(&registry, "/api/v1/pods").unwrap();
        assert!(all.namespace.is_none() && all.name.is_none());
        let ns_status = route(&registry, "/api/v1/namespaces/default/status").unwrap();
        assert_eq!(ns_status.def.plural, "namespaces");
        assert_eq!(ns_status.name.as_deref(), Some("default"));
        assert!(route(&registry, "/api/v1/pods/web-1").is_none());
        assert!(route(&registry, "/api/v1/namespaces/default/widgets").is_none());
        assert!(route(&registry, "/apis/apps/v1/namespaces/x/deployments/d/scale").is_some());
        assert!(route(&registry, "/apis/apps/v1/namespaces/x/daemonsets/d/scale").is_none());
    }
}
