//! RBAC as kube-apiserver enforced it, read back from its audit log: the
//! requests a ServiceAccount made (verb, resource, subresource, namespace,
//! name, response code), which of them were refused, and which rules of the
//! roles bound to it (read from the cluster: the ClusterRoleBindings and
//! RoleBindings naming it) no allowed request used. The double's
//! `authorization_report` says the same from its own authorizer.

use std::path::Path;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ListParams};

/// One audited request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// RBAC's verb (`get`, `list`, `watch`, `create`, …).
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (`pods`).
    pub resource: String,
    /// The subresource (`status`, `eviction`), or `""`.
    pub subresource: String,
    /// The namespace, or `""` for cluster-scoped requests.
    pub namespace: String,
    /// The object's name, or `""`.
    pub name: String,
    /// The response code.
    pub code: u16,
}

/// A rule of a role bound to the account.
#[derive(Debug, Clone)]
pub struct BoundRule {
    /// The role's name (a ClusterRole's, or a Role's in the binding's
    /// namespace).
    pub role_name: String,
    /// Where the binding grants it: `None` everywhere (ClusterRoleBinding),
    /// or one namespace (RoleBinding).
    pub namespace: Option<String>,
    /// The rule.
    pub rule: PolicyRule,
}

/// What the audit log says of one account.
#[derive(Debug)]
pub struct Report {
    /// Distinct refused requests (403).
    pub denied: Vec<Request>,
    /// Rules no allowed request used.
    pub unused: Vec<BoundRule>,
    /// How many requests the account made.
    pub requests: usize,
}

/// The resource requests `username` made, from the audit log at `path`
/// (one JSON event per line; only `ResponseComplete` and, for watches,
/// `ResponseStarted` are logged).
pub fn requests_of(path: &Path, username: &str) -> Vec<Request> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading the audit log {}: {e}", path.display()));
    let mut requests = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if event["user"]["username"].as_str() != Some(username) {
            continue;
        }
        let Some(object) = event.get("objectRef") else {
            continue;
        };
        let field = |name: &str| object[name].as_str().unwrap_or_default().to_string();
        requests.push(Request {
            verb: event["verb"].as_str().unwrap_or_default().to_string(),
            group: field("apiGroup"),
            resource: field("resource"),
            subresource: field("subresource"),
            namespace: field("namespace"),
            name: field("name"),
            code: event["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
        });
    }
    requests.sort();
    requests.dedup();
    requests
}

fn names_account(subjects: Option<&Vec<Subject>>, namespace: &str, account: &str) -> bool {
    subjects.into_iter().flatten().any(|s| {
        s.kind == "ServiceAccount" && s.name == account && s.namespace.as_deref() == Some(namespace)
    })
}

/// The rules of `role_ref` (a ClusterRole, or a Role in `namespace`).
async fn rules_of(client: &kube::Client, role_ref: &RoleRef, namespace: &str) -> Vec<PolicyRule> {
    if role_ref.kind == "ClusterRole" {
        let roles: Api<ClusterRole> = Api::all(client.clone());
        roles
            .get(&role_ref.name)
            .await
            .map(|r| r.rules.unwrap_or_default())
            .unwrap_or_default()
    } else {
        let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
        roles
            .get(&role_ref.name)
            .await
            .map(|r| r.rules.unwrap_or_default())
            .unwrap_or_default()
    }
}

/// Every rule bound to the ServiceAccount `namespace/account`.
pub async fn rules_bound_to(
    client: &kube::Client,
    namespace: &str,
    account: &str,
) -> Vec<BoundRule> {
    let mut bound = Vec::new();
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for binding in cluster_bindings
        .list(&ListParams::default())
        .await
        .expect("listing ClusterRoleBindings")
        .items
    {
        if !names_account(binding.subjects.as_ref(), namespace, account) {
            continue;
        }
        for rule in rules_of(client, &binding.role_ref, "").await {
            bound.push(BoundRule {
                role_name: binding.role_ref.name.clone(),
                namespace: None,
                rule,
            });
        }
    }
    let bindings: Api<RoleBinding> = Api::all(client.clone());
    for binding in bindings
        .list(&ListParams::default())
        .await
        .expect("listing RoleBindings")
        .items
    {
        if !names_account(binding.subjects.as_ref(), namespace, account) {
            continue;
        }
        let at = binding.metadata.namespace.clone().unwrap_or_default();
        for rule in rules_of(client, &binding.role_ref, &at).await {
            bound.push(BoundRule {
                role_name: binding.role_ref.name.clone(),
                namespace: Some(at.clone()),
                rule,
            });
        }
    }
    bound
}

fn any_of(values: Option<&Vec<String>>, wanted: &str) -> bool {
    values
        .into_iter()
        .flatten()
        .any(|v| v == "*" || v == wanted)
}

/// Whether `bound` allows `request`, as RBAC decides it.
pub fn allows(bound: &BoundRule, request: &Request) -> bool {
    let rule = &bound.rule;
    if let Some(namespace) = &bound.namespace
        && *namespace != request.namespace
    {
        return false;
    }
    let resource = if request.subresource.is_empty() {
        request.resource.clone()
    } else {
        format!("{}/{}", request.resource, request.subresource)
    };
    let names_ok = match rule.resource_names.as_ref() {
        None => true,
        Some(names) if names.is_empty() => true,
        Some(names) => names.contains(&request.name),
    };
    rule.verbs.iter().any(|v| v == "*" || *v == request.verb)
        && any_of(rule.api_groups.as_ref(), &request.group)
        && any_of(rule.resources.as_ref(), &resource)
        && names_ok
}

/// The RBAC report of the ServiceAccount `namespace/account` from the
/// audit log at `path`, against the roles bound to it in the cluster now.
pub async fn report(client: &kube::Client, path: &Path, namespace: &str, account: &str) -> Report {
    let requests = requests_of(
        path,
        &format!("system:serviceaccount:{namespace}:{account}"),
    );
    let rules = rules_bound_to(client, namespace, account).await;
    let denied: Vec<Request> = requests.iter().filter(|r| r.code == 403).cloned().collect();
    // As the double counts it: a rule is used when it allowed a request.
    let unused = rules
        .iter()
        .filter(|rule| !requests.iter().any(|r| r.code != 403 && allows(rule, r)))
        .cloned()
        .collect();
    Report {
        denied,
        unused,
        requests: requests.len(),
    }
}
