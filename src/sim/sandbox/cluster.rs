//! The sandbox on a cluster of its user's (`nodewright sandbox --cluster
//! KUBECONFIG`): a real control plane — the pinned one `scripts/control-plane`
//! starts, a kind or KWOK cluster — instead of the API server double. What
//! the double is given at start, the cluster is given here: nodewright's
//! CRDs are applied (server-side) and waited for until `Established`, and
//! the controllers' ServiceAccount gets a token from the TokenRequest API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};

use super::apply::FIELD_MANAGER;

/// How long the CRDs may take to be `Established`.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// A token for the controllers' ServiceAccount lasts this long (the
/// sandbox asks for a new one when it starts again).
const TOKEN_SECONDS: i64 = 24 * 60 * 60;

/// Why the sandbox could not use the cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig could not be read or used.
    #[error("--cluster {path}: {message}")]
    Kubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The cluster refused or did not answer a request.
    #[error("--cluster {path}: {what}: {source}")]
    Api {
        /// The kubeconfig.
        path: PathBuf,
        /// What the sandbox was doing.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// A CRD did not become `Established` in time.
    #[error(
        "--cluster {path}: the CustomResourceDefinition {name} was not Established within {seconds} s (`kubectl describe crd {name}` says why)"
    )]
    NotEstablished {
        /// The kubeconfig.
        path: PathBuf,
        /// The CRD.
        name: String,
        /// The wait.
        seconds: u64,
    },
}

/// A cluster the sandbox runs on.
#[derive(Clone)]
pub struct Cluster {
    path: PathBuf,
    config: Config,
    client: Client,
}

impl Cluster {
    /// Connects with the current context of the kubeconfig at `path`.
    pub async fn connect(path: &Path) -> Result<Cluster, ClusterError> {
        let kubeconfig_error = |message: String| ClusterError::Kubeconfig {
            path: path.to_path_buf(),
            message,
        };
        let kubeconfig =
            Kubeconfig::read_from(path).map_err(|e| kubeconfig_error(e.to_string()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| kubeconfig_error(e.to_string()))?;
        let client = crate::operator::client::client(config.clone())
            .map_err(|e| kubeconfig_error(e.to_string()))?;
        let cluster = Cluster {
            path: path.to_path_buf(),
            config,
            client,
        };
        cluster
            .client
            .apiserver_version()
            .await
            .map_err(|source| cluster.api_error("asking the API server its version", source))?;
        Ok(cluster)
    }

    fn api_error(&self, what: &str, source: kube::Error) -> ClusterError {
        ClusterError::Api {
            path: self.path.clone(),
            what: what.to_string(),
            source,
        }
    }

    /// A client as the kubeconfig's user.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The API server's URL.
    pub fn url(&self) -> String {
        self.config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string()
    }

    /// The kubeconfig it was connected with.
    pub fn kubeconfig(&self) -> &Path {
        &self.path
    }

    /// `(major, minor)` of the API server (`"1"`, `"35"`), a `+` suffix
    /// (some distributions add one) dropped.
    pub async fn version(&self) -> Result<(String, String), ClusterError> {
        let info = self
            .client
            .apiserver_version()
            .await
            .map_err(|source| self.api_error("asking the API server its version", source))?;
        let minor: String = info
            .minor
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Ok((info.major, minor))
    }

    /// Applies `crds` server-side and waits until each is `Established`.
    pub async fn install_crds(
        &self,
        crds: &[CustomResourceDefinition],
    ) -> Result<(), ClusterError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for crd in crds {
            let name = crd.name_any();
            let mut object = crd.clone();
            object.metadata.managed_fields = None;
            object.metadata.resource_version = None;
            api.patch(&name, &params, &Patch::Apply(&object))
                .await
                .map_err(|source| self.api_error(&format!("applying the CRD {name}"), source))?;
        }
        for crd in crds {
            let name = crd.name_any();
            let deadline = tokio::time::Instant::now() + ESTABLISH_TIMEOUT;
            loop {
                let current = api
                    .get(&name)
                    .await
                    .map_err(|source| self.api_error(&format!("reading the CRD {name}"), source))?;
                let established = current
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|conditions| {
                        conditions
                            .iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                    });
                if established {
                    break;
                }
                if tokio::time::Instant::now() > deadline {
                    return Err(ClusterError::NotEstablished {
                        path: self.path.clone(),
                        name,
                        seconds: ESTABLISH_TIMEOUT.as_secs(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    /// A client acting as the ServiceAccount `namespace/name`, with a token
    /// from the TokenRequest API; TLS as the kubeconfig's cluster, none of
    /// its user's credentials.
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Client, ClusterError> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let issued = api
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|source| {
                self.api_error(
                    &format!("a token for the ServiceAccount {namespace}/{name}"),
                    source,
                )
            })?;
        let token = issued.status.and_then(|s| s.token).unwrap_or_default();
        let mut config = self.config.clone();
        config.auth_info = AuthInfo {
            token: Some(token.into()),
            ..AuthInfo::default()
        };
        crate::operator::client::client(config).map_err(|e| ClusterError::Kubeconfig {
            path: self.path.clone(),
            message: e.to_string(),
        })
    }
}
