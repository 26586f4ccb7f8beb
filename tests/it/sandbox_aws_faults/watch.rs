//! Watches a faulted AWS sandbox from outside, straight against moto and
//! the API server, four times a second: which NodeClaims ever existed, how
//! long any NodeClaim pointed at an instance moto does not run (apart for
//! NodeClaims being deleted, whose finalizer terminates the instance and
//! then waits for it), and how long any instance ran without a NodeClaim
//! pointing at it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{Filter, InstanceStateName};
use kube::api::{Api, ListParams};
use nodewright::apis::NodeClaim;
use nodewright::aws::clients::AwsClients;

/// What the watch saw so far.
#[derive(Debug, Clone, Default)]
pub struct Watched {
    /// Every NodeClaim name seen.
    pub claims: BTreeSet<String>,
    /// The longest a NodeClaim not being deleted pointed at an instance
    /// that was not pending or running, and which.
    pub longest_missing: (Duration, String),
    /// The longest a NodeClaim being deleted pointed at an instance that
    /// was not pending or running (terminated by its finalizer, which
    /// polls until the instance is gone), and which.
    pub longest_finalizing: (Duration, String),
    /// The longest an instance ran with no NodeClaim pointing at it, and
    /// which.
    pub longest_orphan: (Duration, String),
}

/// A running watch; stopped when dropped.
pub struct Watch {
    seen: Arc<Mutex<Watched>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watch {
    /// Starts watching cluster `label`'s NodeClaims through `client` and
    /// its instances through `clients` (moto, unfaulted).
    pub fn start(client: kube::Client, clients: AwsClients, label: &str) -> Watch {
        let seen = Arc::new(Mutex::new(Watched::default()));
        let label = label.to_string();
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            let claims: Api<NodeClaim> = Api::all(client);
            let mut missing: BTreeMap<String, Instant> = BTreeMap::new();
            let mut finalizing: BTreeMap<String, Instant> = BTreeMap::new();
            let mut orphans: BTreeMap<String, Instant> = BTreeMap::new();
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let Ok(list) = claims.list(&ListParams::default()).await else {
                    continue;
                };
                let Some(states) = states(&clients, &label).await else {
                    continue;
                };
                let now = Instant::now();
                let pointed: BTreeMap<String, String> = list
                    .items
                    .iter()
                    .filter_map(|c| {
                        let id = c.status.as_ref()?.provider_id.as_deref()?;
                        Some((c.metadata.name.clone()?, id.rsplit('/').next()?.to_string()))
                    })
                    .collect();
                let deleting: BTreeSet<String> = list
                    .items
                    .iter()
                    .filter(|c| c.metadata.deletion_timestamp.is_some())
                    .filter_map(|c| c.metadata.name.clone())
                    .collect();
                let live = |id: &str| {
                    matches!(
                        states.get(id),
                        Some(InstanceStateName::Pending | InstanceStateName::Running)
                    )
                };
                let mut seen = shared.lock().unwrap();
                seen.claims
                    .extend(list.items.iter().filter_map(|c| c.metadata.name.clone()));
                // A span ends when the claim or instance goes, or is set right.
                let stale = |name: &String| pointed.get(name).is_some_and(|id| !live(id));
                missing.retain(|name, _| stale(name) && !deleting.contains(name));
                finalizing.retain(|name, _| stale(name) && deleting.contains(name));
                for (name, id) in &pointed {
                    if live(id) {
                        continue;
                    }
                    let (spans, record) = if deleting.contains(name) {
                        (&mut finalizing, &mut seen.longest_finalizing)
                    } else {
                        (&mut missing, &mut seen.longest_missing)
                    };
                    let since = *spans.entry(name.clone()).or_insert(now);
                    longest(record, now - since, name);
                }
                let owned: BTreeSet<&String> = pointed.values().collect();
                let running: Vec<&String> = states
                    .keys()
                    .filter(|id| live(id) && !owned.contains(id))
                    .collect();
                orphans.retain(|id, _| running.contains(&id));
                for id in running {
                    let since = *orphans.entry(id.clone()).or_insert(now);
                    longest(&mut seen.longest_orphan, now - since, id);
                }
            }
        });
        Watch { seen, task }
    }

    /// What was seen so far.
    pub fn seen(&self) -> Watched {
        self.seen.lock().unwrap().clone()
    }
}

fn longest(record: &mut (Duration, String), span: Duration, what: &str) {
    if span > record.0 {
        *record = (span, what.to_string());
    }
}

/// Every instance moto holds for cluster `label`, in any state.
pub async fn states(
    clients: &AwsClients,
    label: &str,
) -> Option<BTreeMap<String, InstanceStateName>> {
    let described = clients
        .ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(label)
                .build(),
        )
        .send()
        .await
        .ok()?;
    Some(
        described
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(|i| {
                let state = i.state()?.name()?.clone();
                Some((i.instance_id()?.to_string(), state))
            })
            .collect(),
    )
}
