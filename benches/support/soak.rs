//! The soak loop, shared by `benches/soak.rs` (long, release, `scripts/soak`)
//! and `tests/it/soak.rs` (brief, in the test command): a simulated-cloud
//! sandbox under Deployments scaling up and down in bursts, with
//! consolidation, drift (NodePool template changes) and injected spot
//! interruptions mixed in; then everything scaled to zero and the leak
//! checks. Real time throughout: the disruption controller's poll and
//! validation wait are constants, so nothing here can be sped up by a
//! paused clock.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use nodewright::apis::{NodeClaim, NodePool};
use nodewright::controllers::provisioning::BatchWindows;
use nodewright::sim::sandbox::interruptions::INJECT_ANNOTATION_KEY;
use nodewright::sim::sandbox::{Sandbox, SandboxSettings};
use serde_json::json;

#[path = "soak_table.rs"]
mod table;

/// The namespace the workloads run in.
const NAMESPACE: &str = "soak";
/// The NodePool's name.
const POOL: &str = "soak";
/// CPU requests of the Deployments, cycled: a mix, so consolidation has
/// something to repack.
const CPUS: [&str; 4] = ["100m", "250m", "500m", "1"];

/// What one soak run does.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long bursts keep coming; the drain to zero comes after.
    pub duration: Duration,
    /// The most pods at once.
    pub pods: usize,
    /// Deployments the pods are spread over.
    pub deployments: usize,
    /// How long a burst may take to have every pod Running before it
    /// counts as stuck.
    pub burst_timeout: Duration,
    /// How long the load is held after a burst settles (consolidation
    /// needs `consolidateAfter` plus the disruption poll and its 15 s
    /// validation wait to act).
    pub hold: Duration,
    /// A NodePool template change (drift) every this many bursts.
    pub drift_every: usize,
    /// One spot interruption injected on a random node this often.
    pub interrupt_every: Duration,
    /// How long the cluster may take to drain to nothing at the end.
    pub settle_timeout: Duration,
    /// Checks RSS at the end against the plateau (only meaningful when the
    /// process runs nothing else).
    pub check_rss: bool,
    /// Open file descriptors allowed above the start at the end: 0 when
    /// the process runs nothing else.
    pub fd_slack: usize,
    /// Seeds the burst sizes.
    pub seed: u64,
    /// Prints a line per burst, and RSS every 10 s, to stderr.
    pub progress: bool,
    /// How long the API server double keeps an Event after its last write
    /// (kube-apiserver's `--event-ttl`).
    pub event_ttl: Duration,
}

/// The figures of one run, and what failed.
#[derive(Debug, Default)]
pub struct Report {
    pub elapsed: Duration,
    pub bursts: usize,
    pub drifts: usize,
    pub interruptions: usize,
    pub pods_created: usize,
    pub pods_running: usize,
    /// From a pod's creation to Running, in seconds, sorted.
    pub latencies: Vec<f64>,
    /// Pods Running per second of each scale-up burst, until all ran.
    pub burst_rates: Vec<f64>,
    /// Metric deltas over the run: `(series, value)`.
    pub nodeclaims_created: f64,
    pub nodeclaims_terminated: f64,
    pub decisions: BTreeMap<String, f64>,
    pub interruption_actions: BTreeMap<String, f64>,
    pub max_nodeclaims: usize,
    pub start: Sample,
    pub plateau_rss_kib: u64,
    pub end: Sample,
    pub peak: Sample,
    pub peak_rss_kib: u64,
    pub failures: Vec<String>,
}

/// The process and the double at one moment.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sample {
    pub rss_kib: u64,
    pub fds: usize,
    pub tasks: usize,
    pub watches: usize,
}

/// Pods the soak has seen, from its own watch.
#[derive(Default)]
struct Tracker {
    /// Seen, not yet Running: when first seen.
    pending: HashMap<String, Instant>,
    /// Running and not being deleted.
    running: std::collections::HashSet<String>,
    /// Every pod not being deleted.
    live: std::collections::HashSet<String>,
    latencies: Vec<f64>,
    created: usize,
    started: usize,
}

impl Tracker {
    fn apply(&mut self, pod: &Pod) {
        let Some(uid) = pod.uid() else { return };
        let is_running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if pod.meta().deletion_timestamp.is_some() {
            self.forget(&uid);
            return;
        }
        if self.live.insert(uid.clone()) && !is_running {
            self.pending.insert(uid.clone(), Instant::now());
            self.created += 1;
        }
        if is_running
            && self.running.insert(uid.clone())
            && let Some(seen) = self.pending.remove(&uid)
        {
            self.latencies.push(seen.elapsed().as_secs_f64());
            self.started += 1;
        }
    }

    fn forget(&mut self, uid: &str) {
        self.pending.remove(uid);
        self.running.remove(uid);
        self.live.remove(uid);
    }
}

/// A tiny deterministic generator (xorshift64*): burst sizes repeat per seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// In `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// This process's resident set now, in KiB.
pub fn rss_kib() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * 4
}

/// This process's peak resident set (`VmHWM`), in KiB.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn sample(sandbox: &Sandbox) -> Sample {
    Sample {
        rss_kib: rss_kib(),
        fds: open_fds(),
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        watches: sandbox
            .server()
            .expect("the soak runs on the double")
            .live_watches(),
    }
}

/// Sums the rendered series of `metric` by the value of `label`.
fn by_label(rendered: &str, metric: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in rendered.lines().filter(|l| l.starts_with(metric)) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        if !series[metric.len()..].starts_with(['{', ' ']) && series.len() != metric.len() {
            continue;
        }
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let needle = format!("{label}=\"");
        let key = series
            .find(&needle)
            .map(|at| &series[at + needle.len()..])
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("")
            .to_string();
        *out.entry(key).or_insert(0.0) += value;
    }
    out
}

fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

fn manifests(options: &Options) -> String {
    let mut text = format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {NAMESPACE}}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: NodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: soak}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: soak}}}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {POOL}}}
spec:
  template:
    metadata: {{labels: {{soak/generation: "0"}}}}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      expireAfter: 720h
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}}
      - {{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["5"]}}
      - {{key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ["65"]}}
  limits: {{cpu: "100000"}}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5s
    # Empty nodes all at once (the drain to zero at the end is not held
    # up); replacements a third at a time.
    budgets:
    - {{nodes: "100%", reasons: [Empty]}}
    - {{nodes: "30%", reasons: [Drifted, Underutilized]}}
"#
    );
    for i in 0..options.deployments {
        let cpu = CPUS[i % CPUS.len()];
        text.push_str(&format!(
            r#"---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app-{i}, namespace: {NAMESPACE}}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: app-{i}}}}}
  template:
    metadata: {{labels: {{app: app-{i}}}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: app
        image: public.ecr.aws/nginx/nginx:1.27
        resources: {{requests: {{cpu: "{cpu}", memory: 256Mi}}}}
"#
        ));
    }
    text
}

/// Runs the soak; the report says what failed (never panics on a failed check).
pub async fn run(options: Options) -> Report {
    let dir = std::env::temp_dir().join(format!("nodewright-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut report = Report::default();
    if let Err(error) = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("soak.yaml"), manifests(&options)))
    {
        report
            .failures
            .push(format!("cannot write the manifests: {error}"));
        return report;
    }
    let result = run_in(&options, dir.clone(), &mut report).await;
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(error) = result {
        report.failures.push(error);
    }
    report
}

async fn run_in(options: &Options, dir: PathBuf, report: &mut Report) -> Result<(), String> {
    let settings = SandboxSettings {
        manifests: vec![dir],
        launch_delay: Duration::from_millis(200),
        kubelet_poll: Duration::from_millis(100),
        batch: BatchWindows {
            idle: Duration::from_millis(300),
            max: Duration::from_secs(3),
        },
        event_ttl: options.event_ttl,
        ..SandboxSettings::default()
    }
    .with_register_delay(Duration::from_millis(300));
    let sandbox = Sandbox::start(settings)
        .await
        .map_err(|e| format!("the sandbox did not start: {e}"))?;
    let client = sandbox.client();
    let metrics_before = nodewright::metrics::metrics().render();

    // The soak's own view of the pods, for pending-to-Running times.
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let watching = {
        let tracker = tracker.clone();
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let mut t = tracker.lock().unwrap_or_else(|e| e.into_inner());
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        t.apply(&pod)
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        if let Some(uid) = pod.uid() {
                            t.forget(&uid);
                        }
                    }
                    _ => {}
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    report.start = sample(&sandbox);

    // Samples every second, into the peak and the plateau window (the
    // second quarter of the loop, after the first full-size burst).
    let samples: Arc<Mutex<Vec<(Duration, Sample)>>> = Arc::default();
    let started = Instant::now();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let pools: Api<NodePool> = Api::all(client.clone());
    let mut rng = Rng(options.seed | 1);
    let mut next_interrupt = Instant::now() + options.interrupt_every;

    while started.elapsed() < options.duration {
        // A burst: every other one up (every fourth to the full size),
        // the others down to at most a third.
        let total = match report.bursts % 4 {
            0 => options.pods,
            2 => options.pods / 2 + rng.below(options.pods / 2 + 1),
            _ => rng.below(options.pods / 3 + 1),
        };
        let targets = split(total, options.deployments, &mut rng);
        for (i, replicas) in targets.iter().enumerate() {
            let patch = json!({"spec": {"replicas": replicas}});
            deployments
                .patch(
                    &format!("app-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(|e| format!("scaling app-{i}: {e}"))?;
        }
        report.bursts += 1;
        if report.bursts.is_multiple_of(options.drift_every) {
            let patch = json!({"spec": {"template": {"metadata": {"labels": {"soak/generation": report.bursts.to_string()}}}}});
            pools
                .patch(POOL, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| format!("drifting the NodePool: {e}"))?;
            report.drifts += 1;
        }

        // Until every desired pod runs, interrupting and sampling as we go.
        let burst_start = Instant::now();
        let started_before = lock(&tracker).started;
        loop {
            let (running, live) = {
                let t = lock(&tracker);
                (t.running.len(), t.live.len())
            };
            if running == total && live == total {
                break;
            }
            if burst_start.elapsed() > options.burst_timeout {
                report.failures.push(format!(
                    "burst {} (to {total} pods): {running} Running of {live} after {:?}",
                    report.bursts, options.burst_timeout
                ));
                break;
            }
            tick(
                &sandbox,
                &claims,
                &nodes,
                options,
                &mut rng,
                &mut next_interrupt,
                report,
                &samples,
                started,
            )
            .await;
        }
        let ran = lock(&tracker).started - started_before;
        if options.progress {
            eprintln!(
                "soak: {:>4.0} s  burst {} to {total} pods: {ran} started in {:.1} s; {} NodeClaims at most, RSS {} MiB, {} Events stored",
                started.elapsed().as_secs_f64(),
                report.bursts,
                burst_start.elapsed().as_secs_f64(),
                report.max_nodeclaims,
                rss_kib() / 1024,
                sandbox
                    .server()
                    .expect("the soak runs on the double")
                    .objects("", "events")
                    .len()
            );
        }
        if ran > 0 && total > 0 {
            report
                .burst_rates
                .push(ran as f64 / burst_start.elapsed().as_secs_f64().max(0.001));
        }
        let hold_until = Instant::now() + options.hold;
        while Instant::now() < hold_until && started.elapsed() < options.duration {
            tick(
                &sandbox,
                &claims,
                &nodes,
                options,
                &mut rng,
                &mut next_interrupt,
                report,
                &samples,
                started,
            )
            .await;
        }
    }

    // Everything to zero; the cluster must drain to nothing by itself.
    for i in 0..options.deployments {
        let patch = json!({"spec": {"replicas": 0}});
        deployments
            .patch(
                &format!("app-{i}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| format!("scaling app-{i} to zero: {e}"))?;
    }
    report.elapsed = started.elapsed();
    let settle = Instant::now();
    let mut left = (usize::MAX, usize::MAX);
    while settle.elapsed() < options.settle_timeout {
        let claims_left = claims
            .list(&ListParams::default())
            .await
            .map_or(usize::MAX, |l| l.items.len());
        let instances_left = sandbox.cloud().list().await.map_or(usize::MAX, |l| l.len());
        left = (claims_left, instances_left);
        if left == (0, 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if left != (0, 0) {
        report.failures.push(format!(
            "{} NodeClaims and {} instances left {:?} after scaling to zero",
            left.0, left.1, options.settle_timeout
        ));
    }
    check_pairing(&sandbox, &claims, report).await;
    let nodes_left = nodes
        .list(&ListParams::default())
        .await
        .map_or(usize::MAX, |l| l.items.len());
    if nodes_left != 0 {
        report
            .failures
            .push(format!("{nodes_left} Nodes left after scaling to zero"));
    }

    // Watches, tasks and fds back where they started: a stream whose
    // client went away is noticed at its next event or bookmark, so give
    // them a little while.
    let allowed_tasks = report.start.tasks + 8;
    let back = Instant::now();
    loop {
        report.end = sample(&sandbox);
        let end = report.end;
        if (end.watches <= report.start.watches
            && end.tasks <= allowed_tasks
            && end.fds <= report.start.fds + options.fd_slack)
            || back.elapsed() > Duration::from_secs(30)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (start, end) = (report.start, report.end);
    if end.watches > start.watches {
        report.failures.push(format!(
            "watches: {} open at the start, {} at the end",
            start.watches, end.watches
        ));
    }
    if end.tasks > allowed_tasks {
        report.failures.push(format!(
            "tasks: {} alive at the start, {} at the end",
            start.tasks, end.tasks
        ));
    }
    if end.fds > start.fds + options.fd_slack {
        report.failures.push(format!(
            "file descriptors: {} open at the start, {} at the end",
            start.fds, end.fds
        ));
    }

    let taken = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let (from, to) = (options.duration / 4, options.duration / 2);
    report.plateau_rss_kib = taken
        .iter()
        .filter(|(at, _)| *at >= from && *at <= to)
        .map(|(_, s)| s.rss_kib)
        .max()
        .unwrap_or(0);
    report.peak = taken
        .iter()
        .map(|(_, s)| *s)
        .fold(Sample::default(), |a, s| Sample {
            rss_kib: a.rss_kib.max(s.rss_kib),
            fds: a.fds.max(s.fds),
            tasks: a.tasks.max(s.tasks),
            watches: a.watches.max(s.watches),
        });
    report.peak_rss_kib = peak_rss_kib();
    if options.check_rss && end.rss_kib as f64 > report.plateau_rss_kib as f64 * 1.10 {
        report.failures.push(format!(
            "RSS: {} MiB at the end, more than 10 % above the plateau's {} MiB",
            end.rss_kib / 1024,
            report.plateau_rss_kib / 1024
        ));
    }

    let metrics_after = nodewright::metrics::metrics().render();
    let sum = |m: &str| -> f64 {
        delta(
            &by_label(&metrics_before, m, "nodepool"),
            &by_label(&metrics_after, m, "nodepool"),
        )
        .values()
        .sum()
    };
    report.nodeclaims_created = sum("karpenter_nodeclaims_created_total");
    report.nodeclaims_terminated = sum("karpenter_nodeclaims_terminated_total");
    report.decisions = delta(
        &by_label(
            &metrics_before,
            "karpenter_voluntary_disruption_decisions_total",
            "reason",
        ),
        &by_label(
            &metrics_after,
            "karpenter_voluntary_disruption_decisions_total",
            "reason",
        ),
    );
    report.interruption_actions = delta(
        &by_label(
            &metrics_before,
            "nodewright_interruption_actions_total",
            "action",
        ),
        &by_label(
            &metrics_after,
            "nodewright_interruption_actions_total",
            "action",
        ),
    );
    {
        let t = lock(&tracker);
        report.pods_created = t.created;
        report.pods_running = t.started;
        report.latencies = t.latencies.clone();
    }
    report.latencies.sort_by(f64::total_cmp);
    watching.abort();
    let _ = watching.await;
    sandbox.stop().await;
    Ok(())
}

fn lock(tracker: &Mutex<Tracker>) -> std::sync::MutexGuard<'_, Tracker> {
    tracker.lock().unwrap_or_else(|e| e.into_inner())
}

/// `total` split over `n` parts at random.
fn split(total: usize, n: usize, rng: &mut Rng) -> Vec<usize> {
    let weights: Vec<usize> = (0..n).map(|_| 1 + rng.below(10)).collect();
    let sum: usize = weights.iter().sum();
    let mut parts: Vec<usize> = weights.iter().map(|w| total * w / sum).collect();
    let short = total - parts.iter().sum::<usize>();
    for part in parts.iter_mut().take(short) {
        *part += 1;
    }
    parts
}

/// Half a second of the loop: an interruption when one is due, a sample,
/// the NodeClaim count.
#[allow(clippy::too_many_arguments)]
async fn tick(
    sandbox: &Sandbox,
    claims: &Api<NodeClaim>,
    nodes: &Api<Node>,
    options: &Options,
    rng: &mut Rng,
    next_interrupt: &mut Instant,
    report: &mut Report,
    samples: &Mutex<Vec<(Duration, Sample)>>,
    started: Instant,
) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    if Instant::now() >= *next_interrupt {
        *next_interrupt = Instant::now() + options.interrupt_every;
        if let Ok(list) = nodes.list(&ListParams::default()).await {
            let ready: Vec<&Node> = list
                .items
                .iter()
                .filter(|n| n.meta().deletion_timestamp.is_none())
                .collect();
            if !ready.is_empty() {
                let node = ready[rng.below(ready.len())];
                let patch = json!({"metadata": {"annotations": {INJECT_ANNOTATION_KEY: "spot_interrupted"}}});
                if nodes
                    .patch(
                        &node.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .is_ok()
                {
                    report.interruptions += 1;
                }
            }
        }
    }
    if let Ok(list) = claims.list(&ListParams::default()).await {
        report.max_nodeclaims = report.max_nodeclaims.max(list.items.len());
    }
    let now = sample(sandbox);
    let mut samples = samples.lock().unwrap_or_else(|e| e.into_inner());
    samples.push((started.elapsed(), now));
    if options.progress && samples.len().is_multiple_of(20) {
        eprintln!(
            "soak: {:>4.0} s  RSS {} MiB",
            started.elapsed().as_secs_f64(),
            now.rss_kib / 1024
        );
    }
}

/// Every instance in the cloud has a NodeClaim, and every NodeClaim with
/// an instance has it in the cloud.
async fn check_pairing(sandbox: &Sandbox, claims: &Api<NodeClaim>, report: &mut Report) {
    let (Ok(instances), Ok(listed)) = (
        sandbox.cloud().list().await,
        claims.list(&ListParams::default()).await,
    ) else {
        report
            .failures
            .push("cannot list the instances or the NodeClaims".to_string());
        return;
    };
    let ids = |c: &NodeClaim| c.status.as_ref().and_then(|s| s.provider_id.clone());
    let in_cloud: std::collections::BTreeSet<String> = instances.iter().filter_map(ids).collect();
    let claimed: std::collections::BTreeSet<String> = listed.items.iter().filter_map(ids).collect();
    let orphans: Vec<&String> = in_cloud.difference(&claimed).collect();
    let missing: Vec<&String> = claimed.difference(&in_cloud).collect();
    if !orphans.is_empty() {
        report
            .failures
            .push(format!("instances without a NodeClaim: {orphans:?}"));
    }
    if !missing.is_empty() {
        report
            .failures
            .push(format!("NodeClaims whose instance is gone: {missing:?}"));
    }
}
