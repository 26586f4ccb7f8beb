//! `nodewright sandbox`: a whole cluster on one machine, to try nodewright
//! without one. The API server double ([`apiserver_double`], a test
//! double) is served on loopback so `kubectl` works against it; stand-ins
//! do what the rest of a cluster would:
//!
//! - [`kubelet`]: every instance the cloud provider launched registers a
//!   Node, which turns `Ready` and loses its startup taints; a Node whose
//!   instance is gone is deleted;
//! - [`binder`]: kube-scheduler's part — pending pods are bound to the
//!   nodes they fit on (by nodewright's own scheduler) and started, and
//!   pods that fit nowhere are marked `Unschedulable`;
//! - [`node_class`]: the EC2NodeClass status, simulated, while the cloud
//!   is simulated (with `--cloud-provider aws` the real EC2NodeClass
//!   controller runs);
//!
//! and nodewright's controllers run as `nodewright controller` runs them
//! (the same [`Operator`]: provisioning, the NodeClaim lifecycle, node
//! termination and drain, garbage collection, NodePool status, metrics),
//! with the simulated cloud provider. [`apply`] applies the manifests the
//! sandbox is started with; [`log`] prints what happens.
//!
//! With [`SandboxSettings::faults`], the API server double misbehaves for
//! the controllers' requests only ([`identity`]), and
//! [`Sandbox::restart_controllers`] kills and restarts them mid-work: how
//! the controllers hold up is what these two exercise.

pub mod apply;
mod aws;
pub mod binder;
pub mod cluster;
pub mod heartbeat;
pub mod identity;
pub mod interruptions;
pub mod kubelet;
pub mod log;
pub mod node;
pub mod node_class;
pub mod pod_status;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use nodewright_host::{HostConfig, HostError};
use tokio::task::{JoinHandle, JoinSet};

use crate::aws::catalog::{Catalog, CatalogError};
use crate::aws::clients::AwsSettings;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cloudprovider::simulated::{SimulatedCloudProvider, SimulatedSettings};
use crate::cloudprovider::{CloudProvider, UnavailableOfferings};
use crate::cluster::ClusterState;
use crate::controllers::interruption::instance_status::InstanceStatusPolling;
use crate::controllers::provisioning::{BatchWindows, ProvisioningSettings};
use crate::controllers::recorder::Recorder;
use crate::extensions::Extensions;
use crate::operator::{Endpoints, LeaseSettings, Operator, OperatorSettings};
use apiserver_double::{ApiServer, Faults};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;

use cluster::{Cluster, ClusterError};

pub use apply::{Applied, ApplyError};
pub use binder::Binder;
pub use kubelet::{Kubelet, KubeletSettings};

/// The Kubernetes version the sandbox's API server reports.
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "34");

/// Which cloud the sandbox launches instances in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudChoice {
    /// In memory: instances of the embedded catalog's types, nothing leaves the process.
    Simulated,
    /// EC2 through the AWS SDK (real AWS, or moto through `AWS_ENDPOINT_URL`):
    /// the AWS cloud provider and the real EC2NodeClass controller.
    Aws,
}

/// How the sandbox runs.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// Where the API server listens; loopback only. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// YAML files or directories applied at start.
    pub manifests: Vec<PathBuf>,
    /// The cloud provider.
    pub cloud: CloudChoice,
    /// The region (its embedded catalog).
    pub region: String,
    /// The cluster name launched instances are tagged with (AWS only): the
    /// kubelet registers Nodes for this cluster's instances.
    pub cluster_name: String,
    /// Where the AWS clients connect and as whom (AWS only); the default is
    /// the SDK's chain, `AWS_ENDPOINT_URL` included. Its region is ignored:
    /// [`SandboxSettings::region`] is used.
    pub aws: AwsSettings,
    /// How long a simulated launch takes.
    pub launch_delay: Duration,
    /// From launch to the Node's registration.
    pub register_delay: Duration,
    /// From registration to `Ready`.
    pub ready_delay: Duration,
    /// From `Ready` to the startup taints' removal.
    pub startup_taint_delay: Duration,
    /// How often the simulated kubelet lists the cloud's instances.
    pub kubelet_poll: Duration,
    /// The provisioner's batch windows.
    pub batch: BatchWindows,
    /// How long an offering that ran out of capacity is not tried again
    /// (Karpenter's 3 minutes; tests shorten it).
    pub unavailable_offerings_ttl: Duration,
    /// The SQS interruption queue the controller polls (AWS only).
    pub interruption_queue: Option<String>,
    /// The ServiceAccount nodewright's controllers run as, with RBAC
    /// enforced; `None`: as a cluster admin.
    pub controller_account: Option<ControllerAccount>,
    /// Faults the API server double injects (see
    /// [`apiserver_double::faults`]). With the plan's default target, only
    /// the controllers' requests meet them — they carry a ServiceAccount's
    /// token, [`identity`] — while the stand-ins and `kubectl` stay
    /// fault-free. `None`: no faults.
    pub faults: Option<Faults>,
    /// How long the API server double keeps an Event after its last write
    /// (kube-apiserver's `--event-ttl`, one hour by default).
    pub event_ttl: Duration,
    /// The kubeconfig of a real cluster to run on instead of serving the
    /// double (`--cluster`): its kube-scheduler binds, its
    /// kube-controller-manager runs workloads, garbage collection and node
    /// lifecycle; the simulated kubelet also renews node Leases and posts
    /// heartbeats. `listen`, `event_ttl` and `faults` are the double's and
    /// do not apply.
    pub cluster: Option<PathBuf>,
    /// Run the static capacity controller (`--feature-gates
    /// StaticCapacity=true`), as the controller does with the gate on.
    pub static_capacity: bool,
    /// Run the NodeOverlay controller (`--feature-gates NodeOverlay=true`),
    /// as the controller does with the gate on.
    pub node_overlay: bool,
}

/// The identity nodewright's controllers run under in the sandbox, as the
/// chart's Deployment runs them: a ServiceAccount among the applied
/// manifests, whose bound ClusterRoles and Roles authorize every request
/// they make, and leader election on a Lease in its namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerAccount {
    /// The ServiceAccount's namespace (the release's namespace).
    pub namespace: String,
    /// The ServiceAccount's name.
    pub name: String,
    /// The leader-election Lease, in the same namespace.
    pub lease: String,
}

impl Default for SandboxSettings {
    /// What `nodewright sandbox` runs with when no flag is given.
    fn default() -> Self {
        SandboxSettings {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            manifests: Vec::new(),
            cloud: CloudChoice::Simulated,
            region: "us-east-1".to_string(),
            cluster_name: "sandbox".to_string(),
            aws: AwsSettings::default(),
            launch_delay: Duration::from_secs(2),
            register_delay: Duration::from_secs(3),
            ready_delay: Duration::from_secs(1),
            startup_taint_delay: Duration::from_secs(1),
            kubelet_poll: Duration::from_millis(200),
            batch: BatchWindows::default(),
            unavailable_offerings_ttl: crate::cloudprovider::UNAVAILABLE_OFFERINGS_TTL,
            interruption_queue: None,
            controller_account: None,
            faults: None,
            event_ttl: Duration::from_secs(60 * 60),
            cluster: None,
            static_capacity: false,
            node_overlay: false,
        }
    }
}

impl SandboxSettings {
    /// Sets the register delay, and the ready and startup-taint delays
    /// after it to the same, at most one second each.
    pub fn with_register_delay(mut self, delay: Duration) -> Self {
        self.register_delay = delay;
        self.ready_delay = delay.min(Duration::from_secs(1));
        self.startup_taint_delay = self.ready_delay;
        self
    }
}

/// Why the sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// `--listen` names an address other machines could reach.
    #[error(
        "--listen {0}: the sandbox's API server has no authentication, so it listens on loopback only; use 127.0.0.1:PORT or [::1]:PORT"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    #[error("--listen {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The region has no embedded catalog.
    #[error("--region: {0}")]
    Catalog(#[from] CatalogError),
    /// The extension host could not start.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A manifest could not be read or was refused.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The identity the controllers run as under faults could not be made.
    #[error("the sandbox's controller identity: {0}")]
    Identity(#[source] kube::Error),
    /// The cluster could not be used.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// Faults are injected by the double only.
    #[error(
        "API server faults are injected by the API server double only; leave them out with --cluster"
    )]
    FaultsNeedTheDouble,
    /// The controllers' ServiceAccount is not among the manifests.
    #[error(
        "--controller-service-account {namespace}/{name}: no such ServiceAccount among the manifests (nor, with --cluster, in the cluster); pass the chart's rendered manifests (`helm template`), which create it with its ClusterRoles, Roles and bindings"
    )]
    NoControllerAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// What the sandbox runs on.
enum Backend {
    /// The API server double, served on loopback.
    Double {
        server: ApiServer,
        address: SocketAddr,
        serving: JoinHandle<std::io::Result<()>>,
    },
    /// A real cluster (boxed: its client configuration is large).
    Cluster(Box<Cluster>),
}

/// A running sandbox. [`Sandbox::stop`] ends every task it started and
/// closes its listener.
pub struct Sandbox {
    backend: Backend,
    /// A cluster-admin client: the double's in process, or the cluster's.
    client: kube::Client,
    cloud: Arc<dyn CloudProvider>,
    /// The AWS cloud over clients of its own, to terminate the instances
    /// when the sandbox stops; none for the simulated cloud.
    cleanup: Option<Arc<dyn CloudProvider>>,
    simulated: Option<Arc<SimulatedCloudProvider>>,
    state: Arc<ClusterState>,
    applied: Vec<Applied>,
    tasks: JoinSet<()>,
    /// Makes the controllers' operator afresh, for a restart.
    operator: Arc<dyn Fn() -> Operator + Send + Sync>,
    controllers: JoinHandle<()>,
}

impl Sandbox {
    /// Serves the API server, applies the manifests and starts the
    /// stand-ins and the controllers.
    pub async fn start(settings: SandboxSettings) -> Result<Sandbox, SandboxError> {
        let catalog = Arc::new(Catalog::embedded(&settings.region)?);
        let documents = apply::read(&settings.manifests)?;
        let backend = match &settings.cluster {
            None => Self::serve_double(&settings).await?,
            Some(path) => {
                if settings.faults.is_some() {
                    return Err(SandboxError::FaultsNeedTheDouble);
                }
                let cluster = Cluster::connect(path).await?;
                cluster
                    .install_crds(&crate::apis::crds::definitions())
                    .await?;
                Backend::Cluster(Box::new(cluster))
            }
        };
        let client = match &backend {
            Backend::Double { server, .. } => server.client(),
            Backend::Cluster(cluster) => cluster.client(),
        };
        let started = Self::start_on(settings, catalog, documents, backend, client).await;
        match started {
            Ok(sandbox) => Ok(sandbox),
            Err((error, backend)) => {
                if let Backend::Double { serving, .. } = backend {
                    serving.abort();
                    let _ = serving.await;
                }
                Err(error)
            }
        }
    }

    /// Serves the double on the settings' loopback address.
    async fn serve_double(settings: &SandboxSettings) -> Result<Backend, SandboxError> {
        if !settings.listen.ip().is_loopback() {
            return Err(SandboxError::NotLoopback(settings.listen));
        }
        let (major, minor) = KUBERNETES_VERSION;
        let server = crate::sim::double::builder()
            .kubernetes_version(major, minor)
            .event_ttl(settings.event_ttl)
            .build();
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .map_err(|source| SandboxError::Bind {
                address: settings.listen,
                source,
            })?;
        let address = listener.local_addr().map_err(|source| SandboxError::Bind {
            address: settings.listen,
            source,
        })?;
        let serving = tokio::spawn(server.clone().serve(listener));
        Ok(Backend::Double {
            server,
            address,
            serving,
        })
    }

    /// The controllers' client: as the account (RBAC enforced), as a cluster
    /// admin of its own under faults (so only its requests meet them), or
    /// the sandbox's own.
    async fn controller_client(
        settings: &SandboxSettings,
        backend: &Backend,
        client: &kube::Client,
        applied: &[Applied],
    ) -> Result<kube::Client, SandboxError> {
        match (&settings.controller_account, backend) {
            (None, Backend::Double { server, .. }) if settings.faults.is_some() => {
                let account = identity::cluster_admin(client)
                    .await
                    .map_err(SandboxError::Identity)?;
                Ok(server.client_with_token(
                    &server.service_account_token(&account.namespace, &account.name),
                ))
            }
            (None, _) => Ok(client.clone()),
            (Some(account), backend) => {
                let among_manifests = applied.iter().any(|a| {
                    a.kind == "ServiceAccount"
                        && a.name == format!("{}/{}", account.namespace, account.name)
                });
                let missing = || SandboxError::NoControllerAccount {
                    namespace: account.namespace.clone(),
                    name: account.name.clone(),
                };
                match backend {
                    Backend::Double { server, .. } => {
                        if !among_manifests {
                            return Err(missing());
                        }
                        Ok(server.client_with_token(
                            &server.service_account_token(&account.namespace, &account.name),
                        ))
                    }
                    Backend::Cluster(cluster) => {
                        let accounts: Api<ServiceAccount> =
                            Api::namespaced(client.clone(), &account.namespace);
                        match accounts.get_opt(&account.name).await {
                            Ok(Some(_)) => {}
                            Ok(None) => return Err(missing()),
                            Err(source) => {
                                return Err(ClusterError::Api {
                                    path: cluster.kubeconfig().to_path_buf(),
                                    what: format!(
                                        "reading the ServiceAccount {}/{}",
                                        account.namespace, account.name
                                    ),
                                    source,
                                }
                                .into());
                            }
                        }
                        Ok(cluster
                            .service_account_client(&account.namespace, &account.name)
                            .await?)
                    }
                }
            }
        }
    }

    /// Applies the manifests and starts the stand-ins and the controllers
    /// on `backend`; on failure, the backend back to be shut down.
    async fn start_on(
        settings: SandboxSettings,
        catalog: Arc<Catalog>,
        documents: Vec<apply::Document>,
        backend: Backend,
        client: kube::Client,
    ) -> Result<Sandbox, (SandboxError, Backend)> {
        let applied = match apply::apply(&client, documents).await {
            Ok(applied) => applied,
            Err(error) => return Err((error.into(), backend)),
        };
        for object in &applied {
            tracing::info!(kind = %object.kind, name = %object.name, from = %object.origin, "applied");
        }
        let controller_client =
            match Self::controller_client(&settings, &backend, &client, &applied).await {
                Ok(client) => client,
                Err(error) => return Err((error, backend)),
            };
        let (major, minor) = match &backend {
            Backend::Double { .. } => (
                KUBERNETES_VERSION.0.to_string(),
                KUBERNETES_VERSION.1.to_string(),
            ),
            Backend::Cluster(cluster) => match cluster.version().await {
                Ok(version) => version,
                Err(error) => return Err((error.into(), backend)),
            },
        };
        let url = match &backend {
            Backend::Double { address, .. } => format!("http://{address}"),
            Backend::Cluster(cluster) => cluster.url(),
        };
        let on_cluster = matches!(backend, Backend::Cluster(_));

        if let (Some(faults), Backend::Double { server, .. }) = (&settings.faults, &backend) {
            server.set_faults(faults.clone());
        }
        let extensions = match Extensions::new(HostConfig::default()) {
            Ok(extensions) => Arc::new(extensions),
            Err(error) => return Err((error.into(), backend)),
        };
        let unavailable = Arc::new(UnavailableOfferings::new(
            settings.unavailable_offerings_ttl,
        ));
        let zones: Vec<String> = catalog.zones().into_iter().map(str::to_string).collect();
        let instance_types = Arc::new(InstanceTypeProvider::new(
            catalog,
            extensions,
            unavailable.clone(),
        ));
        let kubernetes_version = format!("{major}.{minor}");
        let mut interruption_queue = None;
        let mut instance_status = None;
        let (cloud, cleanup, simulated, node_classes) = match settings.cloud {
            CloudChoice::Simulated => {
                let simulated = Arc::new(SimulatedCloudProvider::new(
                    instance_types.clone(),
                    unavailable,
                    SimulatedSettings {
                        launch_delay: settings.launch_delay,
                        ..SimulatedSettings::default()
                    },
                ));
                let cloud: Arc<dyn CloudProvider> = simulated.clone();
                (cloud, None, Some(simulated), None)
            }
            CloudChoice::Aws => {
                let aws::AwsProviders {
                    cloud,
                    cleanup,
                    setup,
                } = aws::providers(
                    &settings,
                    &url,
                    &instance_types,
                    unavailable,
                    &kubernetes_version,
                )
                .await;
                interruption_queue = settings.interruption_queue.clone().map(|name| {
                    Arc::new(interruption_queue::Queue::new(
                        setup.clients.sqs.clone(),
                        name,
                    ))
                });
                instance_status = Some(InstanceStatusPolling::new(setup.clients.ec2.clone()));
                (cloud, Some(cleanup), None, Some(setup))
            }
        };
        let mut tasks = JoinSet::new();
        let (state, driver) = ClusterState::start(client.clone());
        tasks.spawn(driver);
        // The stand-ins start on a synced view.
        state.synced().await;
        let recorder = |controller: &str| {
            Recorder::new(
                client.clone(),
                Reporter {
                    controller: controller.to_string(),
                    instance: None,
                },
            )
        };

        // nodewright itself, as `nodewright controller` runs it: every
        // controller, one replica (no lease), endpoints on loopback. It
        // keeps its own view of the cluster, as the separate process it is
        // in a real cluster.
        let leader_election = settings.controller_account.as_ref().map(|account| {
            LeaseSettings::new(&account.namespace, &account.lease, "sandbox-controller")
        });
        let operator: Arc<dyn Fn() -> Operator + Send + Sync> = {
            let (client, instance_types, cloud) = (
                controller_client.clone(),
                instance_types.clone(),
                cloud.clone(),
            );
            let batch = settings.batch;
            let (static_capacity, node_overlay) = (settings.static_capacity, settings.node_overlay);
            Arc::new(move || Operator {
                client: client.clone(),
                instance_types: instance_types.clone(),
                cloud: Some(cloud.clone()),
                node_classes: node_classes.clone(),
                interruption_queue: interruption_queue.clone(),
                instance_status: instance_status.clone(),
                settings: OperatorSettings {
                    provisioning: ProvisioningSettings {
                        batch,
                        ..ProvisioningSettings::default()
                    },
                    leader_election: leader_election.clone(),
                    metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                    health_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                    node_repair: false,
                    spot_to_spot_consolidation: false,
                    node_overlay,
                    static_capacity,
                },
            })
        };
        let controllers = tokio::spawn(run_controllers(operator()));
        if simulated.is_some() {
            tasks.spawn(
                node_class::SimulatedNodeClasses::new(
                    client.clone(),
                    state.clone(),
                    instance_types.clone(),
                    kubernetes_version.clone(),
                )
                .run(),
            );
        }
        tasks.spawn(
            Kubelet::new(
                client.clone(),
                state.clone(),
                cloud.clone(),
                KubeletSettings {
                    register_delay: settings.register_delay,
                    ready_delay: settings.ready_delay,
                    startup_taint_delay: settings.startup_taint_delay,
                    poll: settings.kubelet_poll,
                    region: settings.region.clone(),
                    zones,
                    kubernetes_version,
                    lifecycle_taints: !on_cluster,
                },
            )
            .run(),
        );
        tasks.spawn(
            interruptions::Injector {
                client: client.clone(),
                state: state.clone(),
                // The controller's own handler, writing as the controller.
                handler: crate::controllers::interruption::InterruptionHandler::new(
                    controller_client.clone(),
                    state.clone(),
                    instance_types.clone(),
                    Recorder::new(
                        controller_client.clone(),
                        Reporter {
                            controller: "nodewright".to_string(),
                            instance: None,
                        },
                    ),
                ),
                recorder: recorder("sandbox"),
            }
            .run(),
        );
        let binder = Binder::new(
            client.clone(),
            state.clone(),
            instance_types,
            recorder("default-scheduler"),
        );
        let binder = if on_cluster {
            tasks.spawn(heartbeat::Heartbeat::new(client.clone(), state.clone()).run());
            binder.stepping_aside()
        } else {
            binder
        };
        tasks.spawn(Arc::new(binder).run());
        tracing::info!(
            %url,
            cloud = cloud.name(),
            region = %settings.region,
            "sandbox running"
        );
        Ok(Sandbox {
            backend,
            client,
            cloud,
            cleanup,
            simulated,
            state,
            applied,
            tasks,
            operator,
            controllers,
        })
    }

    /// Kills nodewright's controllers where they are — nothing they were
    /// doing finishes, no lease is released, as when the process is killed
    /// — and starts them afresh, with a new view of the cluster: to check
    /// that they pick up what they left half done.
    pub async fn restart_controllers(&mut self) {
        self.controllers.abort();
        let _ = (&mut self.controllers).await;
        tracing::info!("nodewright's controllers killed; starting them again");
        self.controllers = tokio::spawn(run_controllers((self.operator)()));
    }

    /// Where the double listens; `None` on a cluster.
    pub fn address(&self) -> Option<SocketAddr> {
        match &self.backend {
            Backend::Double { address, .. } => Some(*address),
            Backend::Cluster(_) => None,
        }
    }

    /// The API server's URL (`http://127.0.0.1:PORT` for the double).
    pub fn url(&self) -> String {
        match &self.backend {
            Backend::Double { address, .. } => format!("http://{address}"),
            Backend::Cluster(cluster) => cluster.url(),
        }
    }

    /// A cluster-admin client: the double's in process, or the cluster's.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The API server double; `None` on a cluster.
    pub fn server(&self) -> Option<&ApiServer> {
        match &self.backend {
            Backend::Double { server, .. } => Some(server),
            Backend::Cluster(_) => None,
        }
    }

    /// The cloud instances are launched in.
    pub fn cloud(&self) -> &Arc<dyn CloudProvider> {
        &self.cloud
    }

    /// The simulated cloud, when the sandbox runs on it: to inject capacity
    /// errors or terminate instances behind the controllers' back.
    pub fn simulated_cloud(&self) -> Option<&Arc<SimulatedCloudProvider>> {
        self.simulated.as_ref()
    }

    /// The cluster state the controllers share.
    pub fn state(&self) -> &Arc<ClusterState> {
        &self.state
    }

    /// What was applied at start, in order.
    pub fn applied(&self) -> &[Applied] {
        &self.applied
    }

    /// A kubeconfig for the double (on a cluster, use the cluster's own).
    pub fn kubeconfig(&self) -> String {
        kubeconfig(&self.url())
    }

    /// Stops every controller and stand-in, terminates the instances of an
    /// AWS sandbox, and closes the listener (open connections close with the
    /// runtime).
    pub async fn stop(mut self) {
        self.controllers.abort();
        let _ = (&mut self.controllers).await;
        self.tasks.shutdown().await;
        if let Some(cleanup) = &self.cleanup {
            aws::terminate_instances(cleanup.as_ref()).await;
        }
        if let Backend::Double { serving, .. } = &mut self.backend {
            serving.abort();
            let _ = serving.await;
        }
        tracing::info!("sandbox stopped");
    }
}

/// Runs nodewright's controllers until they stop or are aborted.
async fn run_controllers(operator: Operator) {
    let serving = |endpoints: Endpoints| {
        tracing::info!(metrics = %format!("http://{}/metrics", endpoints.metrics), "nodewright's controllers running");
    };
    if let Err(error) = operator.run(std::future::pending(), serving).await {
        tracing::error!(%error, "nodewright's controllers stopped");
    }
}

/// The first line of every kubeconfig the sandbox writes, so it can tell
/// its own from a user's.
pub const KUBECONFIG_MARKER: &str = "# Written by `nodewright sandbox`";

/// A kubeconfig whose one context points at `url`, without credentials.
pub fn kubeconfig(url: &str) -> String {
    format!(
        "{KUBECONFIG_MARKER}; removed when it stops.\n\
         apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: nodewright-sandbox\n  cluster: {{server: '{url}'}}\n\
         users:\n\
         - name: nodewright-sandbox\n  user: {{}}\n\
         contexts:\n\
         - name: nodewright-sandbox\n  context: {{cluster: nodewright-sandbox, user: nodewright-sandbox}}\n\
         current-context: nodewright-sandbox\n"
    )
}
