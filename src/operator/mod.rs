//! The composition root of `nodewright controller`: the shared cluster
//! state, every controller, the metrics and health endpoints, and leader
//! election — only the replica holding the Lease runs controllers, and it
//! stops them the moment it loses it.

pub mod client;
pub mod leader_election;
pub mod server;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use kube::runtime::events::Reporter;
use tokio::task::JoinSet;

pub use leader_election::{LeaderElector, LeaseLost, LeaseSettings};
pub use server::Readiness;

use crate::aws::instance_types::InstanceTypeProvider;
use crate::cloudprovider::CloudProvider;
use crate::cloudprovider::metered::Metered;
use crate::cluster::ClusterState;
use crate::controllers::nodeclaim::NodeClaimContext;
use crate::controllers::nodepool::NodePoolContext;
use crate::controllers::provisioning::{Provisioner, ProvisioningSettings};
use crate::controllers::recorder::Recorder;
use crate::controllers::{self, disruption, gauges, node, nodeclaim, nodepool};

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct OperatorSettings {
    /// Batch windows and scheduler options.
    pub provisioning: ProvisioningSettings,
    /// The Lease to hold before acting; `None` acts at once (one replica).
    pub leader_election: Option<LeaseSettings>,
    /// Where `/metrics` is served.
    pub metrics_addr: SocketAddr,
    /// Where `/healthz` and `/readyz` are served.
    pub health_addr: SocketAddr,
    /// Run node repair (`--feature-gates NodeRepair=true`): unhealthy
    /// nodes' NodeClaims are deleted after their repair policy's toleration.
    pub node_repair: bool,
    /// Let consolidation replace spot nodes with cheaper spot nodes
    /// (`--feature-gates SpotToSpotConsolidation=true`).
    pub spot_to_spot_consolidation: bool,
    /// Run the NodeOverlay controller (`--feature-gates NodeOverlay=true`):
    /// NodeOverlays change the prices and extended resources every
    /// decision sees.
    pub node_overlay: bool,
    /// Run the static capacity controller (`--feature-gates
    /// StaticCapacity=true`): static NodePools are kept at `spec.replicas`.
    pub static_capacity: bool,
}

/// Why the operator stopped other than by a shutdown signal.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// This replica lost the leader Lease: it stopped acting (and should exit).
    #[error(transparent)]
    LeaseLost(#[from] LeaseLost),
    /// An endpoint could not be served.
    #[error("serving {what} on {addr}: {source}")]
    Serve {
        /// Which endpoint.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A controller stopped on its own.
    #[error("controller {0} stopped")]
    ControllerStopped(&'static str),
}

/// Everything the operator runs.
pub struct Operator {
    /// The API server.
    pub client: kube::Client,
    /// Each NodePool's instance types.
    pub instance_types: Arc<InstanceTypeProvider>,
    /// Where instances are launched; `None` runs no launch, termination or
    /// garbage-collection controller (status controllers only).
    pub cloud: Option<Arc<dyn CloudProvider>>,
    /// What the EC2NodeClass status controller is made from, when it runs.
    pub node_classes: Option<controllers::NodeClassSetup>,
    /// Settings.
    pub settings: OperatorSettings,
    /// The interruption queue to poll (`--interruption-queue`), if any.
    pub interruption_queue: Option<Arc<interruption_queue::Queue>>,
    /// Instance status polling (`DescribeInstanceStatus`), with the AWS
    /// cloud provider; `None` runs no instance status controller.
    pub instance_status: Option<controllers::interruption::instance_status::InstanceStatusPolling>,
}

/// The endpoints' bound addresses, for callers that asked for port 0.
#[derive(Debug, Clone, Copy)]
pub struct Endpoints {
    /// `/metrics`.
    pub metrics: SocketAddr,
    /// `/healthz`, `/readyz`.
    pub health: SocketAddr,
}

impl Operator {
    /// Runs until `shutdown` completes (then stops the controllers and
    /// releases the lease) or the lease is lost. `on_serving` is told where
    /// the endpoints listen.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()>,
        on_serving: impl FnOnce(Endpoints),
    ) -> Result<(), OperatorError> {
        let readiness = Readiness::default();
        let mut background = JoinSet::new();
        let metrics = self
            .serve(
                "metrics",
                self.settings.metrics_addr,
                &readiness,
                &mut background,
            )
            .await?;
        let health = if self.settings.health_addr == self.settings.metrics_addr {
            metrics
        } else {
            self.serve(
                "health",
                self.settings.health_addr,
                &readiness,
                &mut background,
            )
            .await?
        };
        on_serving(Endpoints { metrics, health });

        let (state, driver) = ClusterState::start(self.client.clone());
        background.spawn(driver);
        {
            let (state, readiness) = (state.clone(), readiness.clone());
            background.spawn(async move {
                state.synced().await;
                readiness.set_ready();
            });
        }
        let elector = self
            .settings
            .leader_election
            .clone()
            .map(|lease| LeaderElector::new(self.client.clone(), lease));
        let mut shutdown = std::pin::pin!(shutdown);
        if let Some(elector) = &elector {
            tokio::select! {
                _ = elector.acquire() => {}
                _ = &mut shutdown => return Ok(()),
            }
        }
        let mut controllers = self.start_controllers(state);
        let lost = async {
            match &elector {
                Some(elector) => elector.hold().await,
                None => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            _ = &mut shutdown => Ok(()),
            lost = lost => {
                tracing::error!(%lost, "lost the leader lease; stopping every controller");
                Err(OperatorError::LeaseLost(lost))
            }
            Some(ended) = controllers.join_next() => {
                let name = ended.unwrap_or("a controller");
                Err(OperatorError::ControllerStopped(name))
            }
        };
        controllers.abort_all();
        background.abort_all();
        if result.is_ok()
            && let Some(elector) = &elector
        {
            elector.release().await;
        }
        result
    }

    async fn serve(
        &self,
        what: &'static str,
        addr: SocketAddr,
        readiness: &Readiness,
        tasks: &mut JoinSet<()>,
    ) -> Result<SocketAddr, OperatorError> {
        let (bound, serving) = server::serve(addr, readiness.clone())
            .await
            .map_err(|source| OperatorError::Serve { what, addr, source })?;
        tasks.spawn(serving);
        Ok(bound)
    }

    /// Spawns every controller; each task ends with its name.
    fn start_controllers(&self, state: Arc<ClusterState>) -> JoinSet<&'static str> {
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: "nodewright".to_string(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        let mut set = JoinSet::new();
        let provisioner = Arc::new(Provisioner::new(
            self.client.clone(),
            state.clone(),
            self.instance_types.clone(),
            self.settings.provisioning.clone(),
            recorder.clone(),
        ));
        if let Some(cloud) = &self.cloud {
            set.spawn(async move {
                provisioner.run().await;
                "provisioner"
            });
            let context = |controller: &'static str| {
                Arc::new(NodeClaimContext {
                    client: self.client.clone(),
                    state: state.clone(),
                    cloud: Metered::wrap(cloud.clone(), controller),
                    recorder: recorder.clone(),
                })
            };
            let lifecycle = context("nodeclaim.lifecycle");
            set.spawn(async move {
                nodeclaim::run(lifecycle).await;
                "nodeclaim.lifecycle"
            });
            let termination = context("node.termination");
            set.spawn(async move {
                node::run(termination).await;
                "node.termination"
            });
            let marking = context("nodeclaim.disruption");
            set.spawn(async move {
                nodeclaim::disruption::run(marking).await;
                "nodeclaim.disruption"
            });
            let disrupter = Arc::new(disruption::controller::DisruptionController::new(
                self.client.clone(),
                state.clone(),
                self.instance_types.clone(),
                self.settings.provisioning.scheduler.clone(),
                self.settings.spot_to_spot_consolidation,
                recorder.clone(),
            ));
            set.spawn(async move {
                disrupter.run().await;
                "disruption"
            });
            if let Some(queue) = self.interruption_queue.clone() {
                let interrupter = Arc::new(controllers::interruption::InterruptionController::new(
                    self.client.clone(),
                    state.clone(),
                    queue,
                    self.instance_types.clone(),
                    recorder.clone(),
                ));
                set.spawn(async move {
                    interrupter.run().await;
                    "interruption"
                });
            }
            if let Some(polling) = self.instance_status.clone() {
                use controllers::interruption::{InterruptionHandler, instance_status};
                let handler = InterruptionHandler::new(
                    self.client.clone(),
                    state.clone(),
                    self.instance_types.clone(),
                    recorder.clone(),
                );
                let poller = Arc::new(instance_status::InstanceStatusController::new(
                    polling, handler,
                ));
                set.spawn(async move {
                    poller.run().await;
                    "interruption.instancestatus"
                });
            }
            let expiration = context("nodeclaim.expiration");
            set.spawn(async move {
                nodeclaim::expiration::run(expiration).await;
                "nodeclaim.expiration"
            });
            let pod_events = context("nodeclaim.podevents");
            set.spawn(async move {
                nodeclaim::pod_events::run(pod_events).await;
                "nodeclaim.podevents"
            });
            let collector = context("nodeclaim.garbagecollection");
            set.spawn(async move {
                nodeclaim::garbage_collection::run(collector).await;
                "nodeclaim.garbagecollection"
            });
            if self.settings.static_capacity {
                let statics = Arc::new(controllers::static_capacity::StaticCapacityContext {
                    client: self.client.clone(),
                    state: state.clone(),
                    instance_types: self.instance_types.clone(),
                    max_instance_types: self.settings.provisioning.scheduler.max_instance_types,
                    recorder: recorder.clone(),
                });
                set.spawn(async move {
                    controllers::static_capacity::run(statics).await;
                    "static.capacity"
                });
            }
            if self.settings.node_repair {
                let health = context("node.health");
                set.spawn(async move {
                    node::health::run(health).await;
                    "node.health"
                });
            }
        } else {
            tracing::warn!(
                "no cloud provider: nothing is launched or terminated; status controllers only"
            );
        }
        if self.settings.node_overlay {
            let overlays = Arc::new(controllers::nodeoverlay::NodeOverlayContext {
                client: self.client.clone(),
                state: state.clone(),
                instance_types: self.instance_types.clone(),
            });
            set.spawn(async move {
                controllers::nodeoverlay::run(overlays).await;
                "nodeoverlay"
            });
        }
        let pools = Arc::new(NodePoolContext {
            client: self.client.clone(),
            state: state.clone(),
        });
        set.spawn(async move {
            nodepool::run(pools).await;
            "nodepool"
        });
        let hashes = Arc::new(controllers::nodeclass::hash::HashContext {
            client: self.client.clone(),
            state: state.clone(),
        });
        set.spawn(async move {
            controllers::nodeclass::hash::run(hashes).await;
            "nodeclass.hash"
        });
        let types = self.instance_types.clone();
        let gauged = state.clone();
        set.spawn(async move {
            gauges::run(gauged, types).await;
            "gauges"
        });
        if let Some(setup) = &self.node_classes {
            let classes =
                Arc::new(setup.context(self.client.clone(), state, self.instance_types.clone()));
            let collector = classes.clone();
            set.spawn(async move {
                controllers::nodeclass::run(classes).await;
                "nodeclass"
            });
            set.spawn(async move {
                controllers::nodeclass::garbage_collection::run(collector).await;
                "instanceprofile.garbagecollection"
            });
        }
        set
    }
}
