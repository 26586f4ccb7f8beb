//! The instance status controller (Karpenter's
//! `interruption.instancestatus`): every interval, asks EC2 for the status
//! of the cluster's instances (those of the NodeClaims in the cluster
//! state) and acts on the unhealthy ones through the interruption handler,
//! as on the matching queue messages:
//!
//! - an instance or system status check failed for two minutes: forceful,
//!   as a spot interruption (the instance is broken; its drain does not wait
//!   on PodDisruptionBudgets);
//! - a scheduled event (reboot, maintenance, retirement, stop): the
//!   NodePool's scheduled-change policy (`Drain`, `Cordon` or `Ignore`), as
//!   an AWS Health scheduled change.
//!
//! It runs with or without an interruption queue. Each category is acted on
//! once per instance while EC2 keeps reporting it; once it clears, a new
//! failure counts again. An EC2 failure leaves everything as it was until
//! the next poll, and is logged once until polling works again — with the
//! missing permission named when that is the cause.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use interruption::Kind;
use kube::ResourceExt;

use super::{InterruptionHandler, Target};
use crate::aws::errors::AwsError;
use crate::aws::instance_status::{Category, InstanceStatusProvider};
use crate::metrics::{labels, metrics};

/// How often instance statuses are read (Karpenter's
/// `InstanceStatusInterval`).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The message kind a failing category is handled as.
pub fn kind_of(category: Category) -> Kind {
    match category {
        Category::InstanceStatus => Kind::InstanceStatus,
        Category::SystemStatus => Kind::SystemStatus,
        Category::EventStatus => Kind::EventStatus,
    }
}

/// Where and how often instance statuses are read: the operator runs the
/// controller when it has one (with the AWS cloud provider).
#[derive(Clone)]
pub struct InstanceStatusPolling {
    /// EC2.
    pub provider: InstanceStatusProvider,
    /// Between polls; [`DEFAULT_INTERVAL`] outside tests.
    pub interval: Duration,
}

impl InstanceStatusPolling {
    /// Polling EC2 through `ec2` every [`DEFAULT_INTERVAL`].
    pub fn new(ec2: aws_sdk_ec2::Client) -> Self {
        InstanceStatusPolling {
            provider: InstanceStatusProvider::new(ec2),
            interval: DEFAULT_INTERVAL,
        }
    }
}

/// What one poll found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Poll {
    /// Instances asked about.
    pub instances: usize,
    /// (instance, category) pairs acted on for the first time.
    pub acted: Vec<(String, Category)>,
}

/// Polls instance statuses and acts on the unhealthy ones.
pub struct InstanceStatusController {
    provider: InstanceStatusProvider,
    handler: InterruptionHandler,
    interval: Duration,
    /// (instance, category) pairs already acted on, while still reported.
    seen: Mutex<BTreeSet<(String, Category)>>,
}

impl InstanceStatusController {
    /// A controller polling as `polling` says, acting through `handler`.
    pub fn new(polling: InstanceStatusPolling, handler: InterruptionHandler) -> Self {
        InstanceStatusController {
            provider: polling.provider,
            handler,
            interval: polling.interval,
            seen: Mutex::default(),
        }
    }

    /// Polls until the process ends.
    pub async fn run(self: Arc<Self>) {
        self.handler.state.synced().await;
        let mut every = tokio::time::interval(self.interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            every.tick().await;
            match self.poll().await {
                Ok(_) => {
                    if failing {
                        tracing::info!("instance statuses can be read again");
                    }
                    failing = false;
                }
                Err(error) => {
                    if !failing {
                        warn(&error);
                    }
                    failing = true;
                }
            }
        }
    }

    /// One poll: reads the cluster's instances' statuses and acts on each
    /// newly unhealthy (instance, category).
    pub async fn poll(&self) -> Result<Poll, AwsError> {
        let claims = self.handler.claims_by_instance(None);
        let ids: Vec<String> = claims.keys().cloned().collect();
        let mut poll = Poll {
            instances: ids.len(),
            acted: Vec::new(),
        };
        let unhealthy = if ids.is_empty() {
            Vec::new()
        } else {
            self.provider.unhealthy(&ids, SystemTime::now()).await?
        };
        let mut reported = BTreeSet::new();
        for instance in unhealthy {
            // In category order: a failed check (forceful) before an event.
            for category in instance.categories {
                let key = (instance.instance_id.clone(), category);
                reported.insert(key.clone());
                if self.seen().contains(&key) {
                    continue;
                }
                if self.act(&claims, &instance.instance_id, category).await {
                    counted(&instance.instance_id, category);
                    self.seen().insert(key.clone());
                    poll.acted.push(key);
                }
            }
        }
        // A status that cleared counts again if it comes back.
        self.seen().retain(|key| reported.contains(key));
        Ok(poll)
    }

    /// Acts on every NodeClaim of `instance` for `category`; whether every
    /// action was taken.
    async fn act(
        &self,
        claims: &HashMap<String, Vec<Target>>,
        instance: &str,
        category: Category,
    ) -> bool {
        let kind = kind_of(category);
        let mut ok = true;
        for target in claims.get(instance).into_iter().flatten() {
            if let Err(error) = self.handler.act(kind, target).await {
                tracing::warn!(%error, nodeclaim = %target.claim.name_any(), kind = kind.as_str(), "cannot act on an unhealthy instance; trying again at the next poll");
                ok = false;
            }
        }
        ok
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, Category)>> {
        // A set of keys stays consistent even if a holder panicked.
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts and logs an unhealthy (instance, category) once acted on.
fn counted(instance: &str, category: Category) {
    metrics()
        .interruption_instance_status_unhealthy
        .get_or_create(&labels(&[("category", category.as_str())]))
        .inc();
    tracing::info!(
        instance,
        category = category.as_str(),
        "acted on an unhealthy instance of the cluster"
    );
}

/// Logs a failed poll once, naming the missing permission when that is why.
fn warn(error: &AwsError) {
    let code = error.code.as_deref().unwrap_or("");
    if matches!(
        code,
        "UnauthorizedOperation" | "AccessDenied" | "AccessDeniedException"
    ) {
        tracing::warn!(%error, code, "instance statuses cannot be read: allow ec2:DescribeInstanceStatus in the controller's IAM policy; polling goes on and resumes by itself");
    } else {
        tracing::warn!(%error, code, "instance statuses cannot be read; polling goes on and resumes by itself");
    }
}
