//! Who a request is from, and whether RBAC lets it through — as
//! kube-apiserver's token authenticator and RBAC authorizer decide, for
//! ServiceAccounts only.
//!
//! A request without an `Authorization` header acts as a cluster admin (the
//! sandbox's stand-ins, tests and a plain kubeconfig). A request with a
//! bearer token the double issued ([`crate::ApiServer::service_account_token`])
//! acts as that ServiceAccount: it is allowed only by the rules of the
//! ClusterRoles and Roles bound to it, and a denial is the real `403
//! Forbidden`. Every decision is remembered, so a test can ask which
//! requests were denied and which bound rules no request needed
//! ([`crate::ApiServer::authorization_report`]).
//!
//! Left out: users and groups other than a ServiceAccount's own, aggregated
//! ClusterRoles (`aggregationRule`), impersonation, and escalation checks on
//! writes of RBAC objects. The tokens guard nothing: this is a test double
//! on loopback.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, Hasher};

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::error::ApiError;
use super::path::Route;
use super::store::Store;

const RBAC: &str = "rbac.authorization.k8s.io";

/// A ServiceAccount: the identity a token stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccount {
    /// Its user name, `system:serviceaccount:<namespace>:<name>`.
    pub fn user_name(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

/// One rule of a ClusterRole or Role: the role and the rule's position.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleRef {
    /// `ClusterRole` or `Role`.
    pub role_kind: String,
    /// The Role's namespace; empty for a ClusterRole.
    pub role_namespace: String,
    pub role_name: String,
    /// Index in the role's `rules`.
    pub index: usize,
}

/// A rule bound to a ServiceAccount that no request of it needed.
#[derive(Debug, Clone, PartialEq)]
pub struct UnusedRule {
    pub rule: RuleRef,
    /// The rule as the role holds it.
    pub text: Value,
}

/// A request refused with `403 Forbidden`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Denial {
    pub user: String,
    pub verb: String,
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    /// Empty at cluster scope.
    pub namespace: String,
    pub name: String,
}

/// What RBAC decided for one ServiceAccount since the server started.
#[derive(Debug, Clone, Default)]
pub struct AuthorizationReport {
    /// Every distinct refused request.
    pub denied: Vec<Denial>,
    /// Rules of the roles bound to it now that allowed no request.
    pub unused: Vec<UnusedRule>,
}

/// Issued tokens and every decision taken.
#[derive(Default)]
pub(crate) struct Authorization {
    tokens: HashMap<String, ServiceAccount>,
    denied: BTreeSet<(ServiceAccount, Denial)>,
    used: BTreeSet<RuleRef>,
}

/// What a resource request asks, in RBAC's terms.
struct Attributes<'a> {
    verb: &'static str,
    group: &'a str,
    resource: &'a str,
    subresource: &'a str,
    namespace: &'a str,
    name: &'a str,
}

impl Attributes<'_> {
    fn resource_with_subresource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// RBAC's verb for a request (`watch`, `list` and `deletecollection` act on
/// collections).
pub(crate) fn verb(method: &Method, named: bool, watch: bool) -> &'static str {
    match (method.as_str(), named) {
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) if watch => "watch",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

impl Authorization {
    /// A new token for `account`.
    pub(crate) fn issue(&mut self, account: ServiceAccount) -> String {
        let state = std::collections::hash_map::RandomState::new();
        let mut token = String::from("sandbox.");
        for salt in [0u64, 1] {
            let mut hasher = state.build_hasher();
            hasher.write_u64(salt);
            hasher.write_usize(self.tokens.len());
            token.push_str(&format!("{:016x}", hasher.finish()));
        }
        self.tokens.insert(token.clone(), account);
        token
    }

    /// The ServiceAccount a bearer token stands for: `Ok(None)` without a
    /// header (an admin), 401 for a token not issued here or whose
    /// ServiceAccount no longer exists.
    pub(crate) fn authenticate(
        &self,
        store: &Store,
        header: Option<&str>,
    ) -> Result<Option<ServiceAccount>, ApiError> {
        let Some(header) = header else {
            return Ok(None);
        };
        let token = header
            .strip_prefix("Bearer ")
            .map(str::trim)
            .ok_or_else(unauthorized)?;
        let account = self.tokens.get(token).ok_or_else(unauthorized)?;
        let storage = (String::new(), "serviceaccounts".to_string());
        if store
            .get(&storage, &account.namespace, &account.name)
            .is_none()
        {
            return Err(unauthorized());
        }
        Ok(Some(account.clone()))
    }

    /// Lets `account`'s request on `route` through, or answers 403 and
    /// remembers the denial. `list_name` is the name a list or watch is
    /// limited to by a `metadata.name` field selector.
    pub(crate) fn authorize(
        &mut self,
        store: &Store,
        account: &ServiceAccount,
        verb: &'static str,
        route: &Route,
        list_name: Option<&str>,
    ) -> Result<(), ApiError> {
        let attributes = Attributes {
            verb,
            group: &route.def.group,
            resource: &route.def.plural,
            subresource: route.subresource.as_deref().unwrap_or_default(),
            namespace: route.namespace_or_empty(),
            name: route.name.as_deref().or(list_name).unwrap_or_default(),
        };
        let matching: Vec<RuleRef> = bound_rules(store, account, attributes.namespace)
            .into_iter()
            .filter(|(_, rule)| rule_allows(rule, &attributes))
            .map(|(rule_ref, _)| rule_ref)
            .collect();
        if !matching.is_empty() {
            self.used.extend(matching);
            return Ok(());
        }
        let denial = Denial {
            user: account.user_name(),
            verb: verb.to_string(),
            group: attributes.group.to_string(),
            resource: attributes.resource_with_subresource(),
            namespace: attributes.namespace.to_string(),
            name: attributes.name.to_string(),
        };
        let error = forbidden(&route.def.group_resource(), &denial);
        tracing::warn!(message = %error.message, "API server double: forbidden");
        self.denied.insert((account.clone(), denial));
        Err(error)
    }

    /// The denials of `account`, and the rules bound to it now that allowed
    /// none of its requests.
    pub(crate) fn report(&self, store: &Store, account: &ServiceAccount) -> AuthorizationReport {
        let denied = self
            .denied
            .iter()
            .filter(|(who, _)| who == account)
            .map(|(_, denial)| denial.clone())
            .collect();
        let namespaces: BTreeSet<String> = rolebindings(store, None)
            .map(|binding| namespace_of(binding).to_string())
            .collect();
        let mut bound: BTreeSet<(RuleRef, String)> = BTreeSet::new();
        let mut texts = HashMap::new();
        for namespace in std::iter::once("").chain(namespaces.iter().map(String::as_str)) {
            for (rule_ref, rule) in bound_rules(store, account, namespace) {
                let key = rule.to_string();
                texts.insert(key.clone(), rule);
                bound.insert((rule_ref, key));
            }
        }
        let unused = bound
            .into_iter()
            .filter(|(rule_ref, _)| !self.used.contains(rule_ref))
            .map(|(rule, key)| UnusedRule {
                rule,
                text: texts.remove(&key).unwrap_or(Value::Null),
            })
            .collect();
        AuthorizationReport { denied, unused }
    }
}

/// `401 Unauthorized`, worded as kube-apiserver words it.
fn unauthorized() -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
}

/// kube-apiserver's 403 for a resource request.
fn forbidden(group_resource: &str, denial: &Denial) -> ApiError {
    let scope = if denial.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", denial.namespace)
    };
    let why = format!(
        "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
        denial.user, denial.verb, denial.resource, denial.group
    );
    let message = if denial.name.is_empty() {
        format!("{group_resource} is forbidden: {why}")
    } else {
        format!("{group_resource} {:?} is forbidden: {why}", denial.name)
    };
    let mut error = ApiError::new(StatusCode::FORBIDDEN, "Forbidden", message);
    let kind = denial
        .resource
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    error.details = Some(json!({"name": denial.name, "group": denial.group, "kind": kind}));
    error
}

fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// RoleBindings in one namespace, or in all.
fn rolebindings<'a>(
    store: &'a Store,
    namespace: Option<&'a str>,
) -> impl Iterator<Item = &'a Value> + 'a {
    let storage = (RBAC.to_string(), "rolebindings".to_string());
    store.list(&storage, namespace).map(|b| b.as_ref())
}

/// Every rule that applies to `account`'s requests in `namespace` (empty:
/// cluster scope): ClusterRoleBindings' roles everywhere, plus the
/// namespace's RoleBindings.
fn bound_rules(store: &Store, account: &ServiceAccount, namespace: &str) -> Vec<(RuleRef, Value)> {
    let cluster_bindings = store
        .list(&(RBAC.to_string(), "clusterrolebindings".to_string()), None)
        .map(|b| b.as_ref());
    let namespace_bindings: Box<dyn Iterator<Item = &Value>> = if namespace.is_empty() {
        Box::new(std::iter::empty())
    } else {
        Box::new(rolebindings(store, Some(namespace)))
    };
    let mut rules = Vec::new();
    for binding in cluster_bindings.chain(namespace_bindings) {
        if !binds(binding, account) {
            continue;
        }
        let role_ref = &binding["roleRef"];
        let role_name = role_ref["name"].as_str().unwrap_or_default();
        let (role_kind, role_namespace, plural) = match role_ref["kind"].as_str() {
            Some("ClusterRole") => ("ClusterRole", "", "clusterroles"),
            // A RoleBinding's Role is in the binding's namespace.
            Some("Role") => ("Role", namespace_of(binding), "roles"),
            _ => continue,
        };
        let storage = (RBAC.to_string(), plural.to_string());
        let Some(role) = store.get(&storage, role_namespace, role_name) else {
            continue;
        };
        let Some(role_rules) = role["rules"].as_array() else {
            continue;
        };
        for (index, rule) in role_rules.iter().enumerate() {
            let rule_ref = RuleRef {
                role_kind: role_kind.to_string(),
                role_namespace: role_namespace.to_string(),
                role_name: role_name.to_string(),
                index,
            };
            rules.push((rule_ref, rule.clone()));
        }
    }
    rules
}

/// Whether a binding's subjects name the ServiceAccount, its user name or
/// one of its groups.
fn binds(binding: &Value, account: &ServiceAccount) -> bool {
    let Some(subjects) = binding["subjects"].as_array() else {
        return false;
    };
    let groups = [
        "system:authenticated".to_string(),
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{}", account.namespace),
    ];
    subjects.iter().any(|subject| {
        let name = subject["name"].as_str().unwrap_or_default();
        match subject["kind"].as_str() {
            Some("ServiceAccount") => {
                // A RoleBinding's subject without a namespace is in the binding's.
                let namespace = subject["namespace"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| namespace_of(binding));
                name == account.name && namespace == account.namespace
            }
            Some("User") => name == account.user_name(),
            Some("Group") => groups.iter().any(|g| g == name),
            _ => false,
        }
    })
}

/// RBAC's `RuleAllows`: verbs, API groups, resources (with subresources
/// and `*/sub`) and resource names.
fn rule_allows(rule: &Value, attributes: &Attributes) -> bool {
    let list = |field: &str| -> Vec<&str> {
        rule[field]
            .as_array()
            .map(|items| items.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let verbs = list("verbs");
    if !verbs.iter().any(|v| *v == "*" || *v == attributes.verb) {
        return false;
    }
    let groups = list("apiGroups");
    if !groups.iter().any(|g| *g == "*" || *g == attributes.group) {
        return false;
    }
    let combined = attributes.resource_with_subresource();
    let resources = list("resources");
    let resource_matches = resources.iter().any(|r| {
        *r == "*"
            || *r == combined
            || (!attributes.subresource.is_empty()
                && r.strip_prefix("*/") == Some(attributes.subresource))
    });
    if !resource_matches {
        return false;
    }
    let names = list("resourceNames");
    names.is_empty() || (!attributes.name.is_empty() && names.contains(&attributes.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes<'a>(verb: &'static str, resource: &'a str, sub: &'a str) -> Attributes<'a> {
        Attributes {
            verb,
            group: "",
            resource,
            subresource: sub,
            namespace: "",
            name: "n1",
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names_as_rbac_does() {
        let rule = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]});
        assert!(rule_allows(&rule, &attributes("get", "pods", "")));
        assert!(!rule_allows(&rule, &attributes("delete", "pods", "")));
        assert!(!rule_allows(&rule, &attributes("get", "nodes", "")));
        // A subresource needs its own entry.
        assert!(!rule_allows(&rule, &attributes("get", "pods", "status")));
        let sub = json!({"apiGroups": [""], "resources": ["*/status"], "verbs": ["*"]});
        assert!(rule_allows(&sub, &attributes("patch", "pods", "status")));
        assert!(!rule_allows(&sub, &attributes("patch", "pods", "")));
        let other_group = json!({"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]});
        assert!(!rule_allows(&other_group, &attributes("get", "pods", "")));
        let named = json!({"apiGroups": [""], "resources": ["pods"], "resourceNames": ["n1"], "verbs": ["get"]});
        assert!(rule_allows(&named, &attributes("get", "pods", "")));
        let mut unnamed = attributes("get", "pods", "");
        unnamed.name = "";
        assert!(!rule_allows(&named, &unnamed));
    }

    #[test]
    fn subjects_bind_the_account_its_user_and_its_groups() {
        let account = ServiceAccount {
            namespace: "ns".into(),
            name: "sa".into(),
        };
        let binding =
            |subject: Value| json!({"metadata": {"namespace": "ns"}, "subjects": [subject]});
        assert!(binds(
            &binding(json!({"kind": "ServiceAccount", "name": "sa"})),
            &account
        ));
        assert!(!binds(
            &binding(json!({"kind": "ServiceAccount", "name": "sa", "namespace": "other"})),
            &account
        ));
        assert!(binds(
            &binding(json!({"kind": "User", "name": "system:serviceaccount:ns:sa"})),
            &account
        ));
        assert!(binds(
            &binding(json!({"kind": "Group", "name": "system:serviceaccounts:ns"})),
            &account
        ));
        assert!(!binds(
            &binding(json!({"kind": "Group", "name": "system:masters"})),
            &account
        ));
    }

    #[test]
    fn verbs_follow_the_method_and_the_target() {
        assert_eq!(verb(&Method::GET, true, false), "get");
        assert_eq!(verb(&Method::GET, false, true), "watch");
        assert_eq!(verb(&Method::GET, false, false), "list");
        assert_eq!(verb(&Method::DELETE, false, false), "deletecollection");
        assert_eq!(verb(&Method::PATCH, true, false), "patch");
    }

    #[test]
    fn the_forbidden_message_is_kube_apiservers() {
        let denial = Denial {
            user: "system:serviceaccount:kube-system:nw".into(),
            verb: "list".into(),
            group: "karpenter.sh".into(),
            resource: "nodeclaims".into(),
            namespace: String::new(),
            name: String::new(),
        };
        assert_eq!(
            forbidden("nodeclaims.karpenter.sh", &denial).message,
            "nodeclaims.karpenter.sh is forbidden: User \"system:serviceaccount:kube-system:nw\" cannot list resource \"nodeclaims\" in API group \"karpenter.sh\" at the cluster scope"
        );
    }
}
