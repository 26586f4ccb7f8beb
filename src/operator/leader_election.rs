//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go does
//! it: a replica takes the lease when it is free or when its holder has not
//! renewed it for `lease_duration` (measured on this replica's own clock, from
//! when it last saw the record change, so clocks need not agree), renews it
//! every `retry_period`, and gives up leading the moment it cannot renew for
//! `renew_deadline` or sees another holder. A replica that stops cleanly
//! releases the lease so another takes over at once.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

/// Where the lease lives and how it is held.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity (the pod name, by default).
    pub identity: String,
    /// How long a lease holds without renewal (client-go default 15s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up (10s).
    pub renew_deadline: Duration,
    /// How often candidates try and the leader renews (2s).
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// The defaults controller-runtime uses, for `identity`.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        LeaseSettings {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why leading ended.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LeaseLost {
    /// Another replica holds the lease now.
    #[error("lease {0} is held by {1}")]
    TakenBy(String, String),
    /// Renewal kept failing past the renew deadline.
    #[error("could not renew lease {0} within the renew deadline")]
    NotRenewed(String),
}

/// Takes and holds one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    settings: LeaseSettings,
    /// The record last seen, and when (on this replica's clock).
    observed: std::sync::Mutex<Option<(Option<LeaseSpec>, Instant)>>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl LeaderElector {
    /// An elector for `settings` through `client`.
    pub fn new(client: kube::Client, settings: LeaseSettings) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: std::sync::Mutex::new(None),
        }
    }

    /// Waits until this replica holds the lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.settings.name, identity = %self.settings.identity, "acquired leader lease");
                    return;
                }
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "leader election"),
            }
            tokio::time::sleep(self.settings.retry_period).await;
        }
    }

    /// Renews the lease until it is lost; returns why.
    pub async fn hold(&self) -> LeaseLost {
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.settings.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = Instant::now(),
                Ok(false) => {
                    let holder = self
                        .observed_holder()
                        .unwrap_or_else(|| "nobody".to_string());
                    return LeaseLost::TakenBy(self.settings.name.clone(), holder);
                }
                Err(error) => {
                    tracing::warn!(%error, "renewing leader lease");
                    if last_renewed.elapsed() > self.settings.renew_deadline {
                        return LeaseLost::NotRenewed(self.settings.name.clone());
                    }
                }
            }
        }
    }

    /// Gives the lease up (on a clean stop), if this replica holds it.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.settings.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        if let Err(error) = self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(%error, "releasing leader lease");
        }
    }

    fn observed_holder(&self) -> Option<String> {
        self.observed
            .lock()
            .ok()?
            .as_ref()?
            .0
            .as_ref()?
            .holder_identity
            .clone()
    }

    /// One attempt: `true` when this replica holds the lease afterwards.
    async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let me = self.settings.identity.clone();
        let duration = i32::try_from(self.settings.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.settings.name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created.spec);
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let held_by_me = holder.as_deref() == Some(me.as_str());
        if !held_by_me && holder.is_some() && !self.expired(&spec) {
            return Ok(false);
        }
        let mut next = spec.clone();
        if !held_by_me {
            next.acquire_time = Some(now());
            next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        next.holder_identity = Some(me);
        next.lease_duration_seconds = Some(duration);
        next.renew_time = Some(now());
        lease.spec = Some(next);
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(written.spec);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether the holder has let the lease run out: the record has not
    /// changed for its duration since this replica first saw it so.
    fn expired(&self, spec: &LeaseSpec) -> bool {
        let Ok(mut observed) = self.observed.lock() else {
            return false;
        };
        let changed = observed
            .as_ref()
            .is_none_or(|(seen, _)| seen.as_ref() != Some(spec));
        if changed {
            *observed = Some((Some(spec.clone()), Instant::now()));
            return false;
        }
        let duration = spec
            .lease_duration_seconds
            .map_or(self.settings.lease_duration, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            });
        observed
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() > duration)
    }

    fn observe(&self, spec: Option<LeaseSpec>) {
        if let Ok(mut observed) = self.observed.lock() {
            *observed = Some((spec, Instant::now()));
        }
    }
}
