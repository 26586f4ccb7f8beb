//! The identity nodewright's controllers run as in a sandbox with API
//! faults and no `--controller-service-account`: the ServiceAccount
//! `kube-system/nodewright-sandbox`, bound to a ClusterRole that allows
//! everything — a cluster admin, as the controllers are without a
//! ServiceAccount, but one whose requests carry a token. The API server
//! double's fault plan targets requests with a token by default, so the
//! controllers meet the faults and the sandbox's own stand-ins (kubelet,
//! binder, workload controllers) and `kubectl` do not. The three objects
//! are ordinary RBAC objects, visible with `kubectl get`.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};

/// The ServiceAccount's namespace.
pub const NAMESPACE: &str = "kube-system";
/// The ServiceAccount's, ClusterRole's and ClusterRoleBinding's name.
pub const NAME: &str = "nodewright-sandbox";

/// A ServiceAccount's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Creates the ServiceAccount and binds it to a ClusterRole allowing every
/// verb on every resource; `client` must be an admin's.
pub async fn cluster_admin(client: &kube::Client) -> Result<Account, kube::Error> {
    let meta = |namespace: Option<&str>| ObjectMeta {
        name: Some(NAME.to_string()),
        namespace: namespace.map(str::to_string),
        ..ObjectMeta::default()
    };
    let every = || Some(vec!["*".to_string()]);
    let post = PostParams::default();
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create(
            &post,
            &ServiceAccount {
                metadata: meta(Some(NAMESPACE)),
                ..ServiceAccount::default()
            },
        )
        .await?;
    Api::<ClusterRole>::all(client.clone())
        .create(
            &post,
            &ClusterRole {
                metadata: meta(None),
                rules: Some(vec![PolicyRule {
                    api_groups: every(),
                    resources: every(),
                    verbs: vec!["*".to_string()],
                    ..PolicyRule::default()
                }]),
                ..ClusterRole::default()
            },
        )
        .await?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(
            &post,
            &ClusterRoleBinding {
                metadata: meta(None),
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".to_string()),
                    kind: "ClusterRole".to_string(),
                    name: NAME.to_string(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".to_string(),
                    name: NAME.to_string(),
                    namespace: Some(NAMESPACE.to_string()),
                    ..Subject::default()
                }]),
            },
        )
        .await?;
    Ok(Account {
        namespace: NAMESPACE.to_string(),
        name: NAME.to_string(),
    })
}
