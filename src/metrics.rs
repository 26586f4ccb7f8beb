//! The Prometheus registry nodewright serves on `/metrics`, with Karpenter's
//! metric names where the meaning is the same, so existing dashboards and
//! alerts keep working. One process-wide set ([`metrics()`]); controllers
//! record into it where things happen.

use std::sync::LazyLock;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label pairs, in the order written.
pub type Labels = Vec<(String, String)>;

/// A family of counters by labels.
pub type Counters = Family<Labels, Counter>;
/// A family of gauges by labels.
pub type Gauges = Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>;
/// A family of histograms by labels.
pub type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Every metric nodewright exports.
pub struct Metrics {
    registry: Registry,
    /// `karpenter_build_info{version}`: 1.
    pub build_info: Gauges,
    /// `karpenter_nodeclaims_created_total{reason, nodepool, min_values_relaxed}`.
    pub nodeclaims_created: Counters,
    /// `karpenter_nodeclaims_terminated_total{nodepool, capacity_type, zone}`.
    pub nodeclaims_terminated: Counters,
    /// `karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type}`:
    /// NodeClaims removed other than by a user (insufficient capacity, a class
    /// not ready, launch or registration timeouts, garbage collection,
    /// unhealthy nodes).
    pub nodeclaims_disrupted: Counters,
    /// `karpenter_nodeclaims_unhealthy_disrupted_total{condition, nodepool,
    /// capacity_type, image_id}`: NodeClaims node repair deleted, by the
    /// Node condition (snake_case) that made them unhealthy.
    pub nodeclaims_unhealthy_disrupted: Counters,
    /// `karpenter_nodes_created_total{nodepool, zone}`: nodes registered.
    pub nodes_created: Counters,
    /// `karpenter_nodes_terminated_total{nodepool, zone}`: nodes released.
    pub nodes_terminated: Counters,
    /// `karpenter_nodes_drained_total{nodepool}`.
    pub nodes_drained: Counters,
    /// `karpenter_pods_eviction_requests_total{code}`.
    pub pods_eviction_requests: Counters,
    /// `karpenter_pods_drained_total{reason}`.
    pub pods_drained: Counters,
    /// `karpenter_pods_scheduling_decision_duration_seconds`: from a pod being
    /// unschedulable to the provisioning decision about it.
    pub pods_scheduling_decision_duration: Histograms,
    /// `karpenter_scheduler_scheduling_duration_seconds{controller}`.
    pub scheduling_duration: Histograms,
    /// `karpenter_scheduler_queue_depth{controller}`: pods in the last solve.
    pub scheduler_queue_depth: Gauges,
    /// `karpenter_scheduler_ignored_pods_count`: pods left out of the last
    /// round because they could not be read.
    pub scheduler_ignored_pods: Gauges,
    /// `karpenter_scheduler_unschedulable_pods_count{controller}`.
    pub scheduler_unschedulable_pods: Gauges,
    /// `karpenter_cloudprovider_duration_seconds{controller, method, provider}`.
    pub cloudprovider_duration: Histograms,
    /// `karpenter_cloudprovider_errors_total{controller, method, provider, error}`.
    pub cloudprovider_errors: Counters,
    /// `karpenter_cloudprovider_instance_type_offering_available{instance_type, capacity_type, zone}`.
    pub offering_available: Gauges,
    /// `karpenter_cloudprovider_instance_type_offering_price_estimate{instance_type, capacity_type, zone}`.
    pub offering_price: Gauges,
    /// `karpenter_cluster_state_synced`: 1 once every watch has listed.
    pub cluster_state_synced: Gauges,
    /// `karpenter_cluster_state_node_count`.
    pub cluster_state_node_count: Gauges,
    /// `karpenter_nodepools_usage{resource_type, nodepool}`.
    pub nodepools_usage: Gauges,
    /// `karpenter_nodepools_limit{resource_type, nodepool}`.
    pub nodepools_limit: Gauges,
    /// `karpenter_nodepools_allowed_disruptions{nodepool, reason}`: nodes
    /// each NodePool's budgets let go now.
    pub nodepools_allowed_disruptions: Gauges,
    /// `karpenter_voluntary_disruption_decisions_total{decision, reason,
    /// consolidation_type}`: commands started.
    pub disruption_decisions: Counters,
    /// `karpenter_voluntary_disruption_eligible_nodes{reason}`.
    pub disruption_eligible_nodes: Gauges,
    /// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds{reason,
    /// consolidation_type}`: one method's evaluation.
    pub disruption_evaluation_duration: Histograms,
    /// `karpenter_voluntary_disruption_failed_validations_total{consolidation_type}`:
    /// commands dropped because they no longer held after the wait.
    pub disruption_failed_validations: Counters,
    /// `karpenter_voluntary_disruption_queue_failures_total{decision, reason,
    /// consolidation_type}`: replace commands rolled back.
    pub disruption_queue_failures: Counters,
    /// `karpenter_interruption_received_messages_total{message_type}`
    /// (`no_op` for kinds not acted on, `malformed` for unreadable bodies).
    pub interruption_received_messages: Counters,
    /// `karpenter_interruption_deleted_messages_total`.
    pub interruption_deleted_messages: Counters,
    /// `karpenter_interruption_message_queue_duration_seconds`: from the
    /// event's time to its handling.
    pub interruption_message_queue_duration: Histograms,
    /// `nodewright_interruption_actions_total{message_type, action}`.
    pub interruption_actions: Counters,
    /// `karpenter_interruption_instance_status_unhealthy_total{category}`:
    /// unhealthy instance statuses found by polling, each once per instance
    /// while it lasts.
    pub interruption_instance_status_unhealthy: Counters,
    /// `nodewright_interruption_queue_healthy{queue}`: 1 while the queue
    /// can be read, 0 while it cannot.
    pub interruption_queue_healthy: Gauges,
    /// `karpenter_consolidation_moves_total{decision, nodepool, policy}`:
    /// consolidation moves scored (every single-node move; one per
    /// multi-node search), approved or rejected.
    pub consolidation_moves: Counters,
    /// `karpenter_consolidation_score{decision, nodepool, policy}`: the
    /// scores of `Balanced` pools' moves.
    pub consolidation_score: Histograms,
    /// The extension module metrics (`nodewright_extension_*`).
    pub extensions: ExtensionMetrics,
}

/// What extension modules did, apart from [`Metrics`] so a test can give
/// an `Extensions` families of its own and read exact counts. Labels stay
/// bounded: `module` is the entry's name in the EC2NodeClass, never a
/// digest or a source text.
#[derive(Clone)]
pub struct ExtensionMetrics {
    /// `nodewright_extension_calls_total{nodeclass, role, module, result}`:
    /// calls into loaded modules, by how they ended (`ok`, `timeout`,
    /// `memory`, `trap`, `rejected`, `malformed`, `host_error`).
    pub calls: Counters,
    /// `nodewright_extension_call_duration_seconds{role}`: one call, from
    /// entering the module to its validated answer or failure.
    pub call_duration: Histograms,
    /// `nodewright_extension_load_failures_total{nodeclass, role, module,
    /// reason}`: modules that could not be fetched, verified or compiled.
    pub load_failures: Counters,
    /// `nodewright_extension_cache_lookups_total{nodeclass, result}`:
    /// evaluations of filters and scorers answered from the outcome cache
    /// (`hit`) or run (`miss`).
    pub cache_lookups: Counters,
    /// `nodewright_extension_concurrency_wait_seconds`: how long an
    /// evaluation waited for a turn under the concurrency cap.
    pub concurrency_wait: Histograms,
}

impl ExtensionMetrics {
    /// Families registered nowhere: what they count is seen only by whoever
    /// holds them (tests, tools that must not add to the process's counts).
    pub fn detached() -> Self {
        ExtensionMetrics {
            calls: Counters::default(),
            call_duration: Histograms::new_with_constructor(call_histogram),
            load_failures: Counters::default(),
            cache_lookups: Counters::default(),
            concurrency_wait: Histograms::new_with_constructor(call_histogram),
        }
    }
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// Extension calls: from 100 µs, doubling, 18 buckets (to about 13 s), so
/// sub-millisecond calls are told apart and the longest deadline (10 s)
/// still falls in a bucket.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// Karpenter's buckets for `karpenter_consolidation_score`.
fn score_histogram() -> Histogram {
    Histogram::new([0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0])
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        // Help texts have no final period: the text encoder adds one.
        let mut counters = |name: &str, help: &str| {
            let family = Counters::default();
            registry.register(name, help, family.clone());
            family
        };
        let nodeclaims_created = counters(
            "karpenter_nodeclaims_created",
            "NodeClaims created, by reason and NodePool",
        );
        let nodeclaims_terminated = counters(
            "karpenter_nodeclaims_terminated",
            "NodeClaims whose finalization completed",
        );
        let nodeclaims_disrupted = counters(
            "karpenter_nodeclaims_disrupted",
            "NodeClaims removed by nodewright, by reason",
        );
        let nodeclaims_unhealthy_disrupted = counters(
            "karpenter_nodeclaims_unhealthy_disrupted",
            "Unhealthy NodeClaims node repair deleted, by the Node condition, NodePool and image",
        );
        let nodes_created = counters(
            "karpenter_nodes_created",
            "Nodes registered for a NodeClaim",
        );
        let nodes_terminated = counters(
            "karpenter_nodes_terminated",
            "Nodes released after termination",
        );
        let consolidation_moves = counters(
            "karpenter_consolidation_moves",
            "Consolidation moves scored, by decision, NodePool and policy",
        );
        let nodes_drained = counters("karpenter_nodes_drained", "Nodes drained");
        let pods_eviction_requests = counters(
            "karpenter_pods_eviction_requests",
            "Eviction requests, by response code",
        );
        let pods_drained = counters(
            "karpenter_pods_drained",
            "Pods removed from draining nodes, by how",
        );
        let cloudprovider_errors = counters(
            "karpenter_cloudprovider_errors",
            "Cloud provider calls that failed",
        );
        let disruption_decisions = counters(
            "karpenter_voluntary_disruption_decisions",
            "Disruption commands started, by decision, reason and consolidation type",
        );
        let disruption_failed_validations = counters(
            "karpenter_voluntary_disruption_failed_validations",
            "Disruption commands that no longer held after the validation wait",
        );
        let interruption_received_messages = counters(
            "karpenter_interruption_received_messages",
            "Interruption queue messages received, by message type",
        );
        let interruption_deleted_messages = counters(
            "karpenter_interruption_deleted_messages",
            "Interruption queue messages deleted after handling",
        );
        let interruption_instance_status_unhealthy = counters(
            "karpenter_interruption_instance_status_unhealthy",
            "Unique unhealthy instance statuses found by DescribeInstanceStatus, by status check category",
        );
        let interruption_actions = counters(
            "nodewright_interruption_actions",
            "Actions taken on NodeClaims for interruption messages, by message type and action",
        );
        let disruption_queue_failures = counters(
            "karpenter_voluntary_disruption_queue_failures",
            "Replace commands rolled back because a replacement did not initialize",
        );
        let extension_calls = counters(
            "nodewright_extension_calls",
            "Calls into extension modules, by EC2NodeClass, role, module entry and result",
        );
        let extension_load_failures = counters(
            "nodewright_extension_load_failures",
            "Extension modules that could not be fetched, verified or compiled, by reason",
        );
        let extension_cache_lookups = counters(
            "nodewright_extension_cache_lookups",
            "Evaluations of instance filters and priority scorers answered from the outcome cache (hit) or run (miss)",
        );
        let mut gauges = |name: &str, help: &str| {
            let family = Gauges::default();
            registry.register(name, help, family.clone());
            family
        };
        let build_info = gauges("karpenter_build_info", "The running build");
        let scheduler_queue_depth = gauges(
            "karpenter_scheduler_queue_depth",
            "Pods in the last provisioning solve",
        );
        let scheduler_ignored_pods = gauges(
            "karpenter_scheduler_ignored_pods_count",
            "Pods left out of the last provisioning round",
        );
        let scheduler_unschedulable_pods = gauges(
            "karpenter_scheduler_unschedulable_pods_count",
            "Pods the last provisioning round could not place",
        );
        let offering_available = gauges(
            "karpenter_cloudprovider_instance_type_offering_available",
            "1 when an offering can be launched, 0 when not",
        );
        let offering_price = gauges(
            "karpenter_cloudprovider_instance_type_offering_price_estimate",
            "Hourly price of an offering",
        );
        let cluster_state_synced = gauges(
            "karpenter_cluster_state_synced",
            "1 once the cluster state has listed everything",
        );
        let cluster_state_node_count = gauges(
            "karpenter_cluster_state_node_count",
            "Nodes in the cluster state",
        );
        let nodepools_usage = gauges(
            "karpenter_nodepools_usage",
            "Resources a NodePool's nodes hold",
        );
        let nodepools_limit = gauges("karpenter_nodepools_limit", "A NodePool's limits");
        let nodepools_allowed_disruptions = gauges(
            "karpenter_nodepools_allowed_disruptions",
            "Nodes a NodePool's disruption budgets let go now, by reason",
        );
        let interruption_queue_healthy = gauges(
            "nodewright_interruption_queue_healthy",
            "1 while the interruption queue can be read, 0 while it cannot",
        );
        let disruption_eligible_nodes = gauges(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Nodes a disruption method may consider, by reason",
        );
        let mut histograms = |name: &str, help: &str, buckets: fn() -> Histogram| {
            let family = Histograms::new_with_constructor(buckets);
            registry.register(name, help, family.clone());
            family
        };
        let pods_scheduling_decision_duration = histograms(
            "karpenter_pods_scheduling_decision_duration_seconds",
            "From a pod becoming unschedulable to the provisioning decision about it",
            duration_histogram,
        );
        let scheduling_duration = histograms(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of a provisioning solve",
            duration_histogram,
        );
        let cloudprovider_duration = histograms(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider calls",
            duration_histogram,
        );
        let interruption_message_queue_duration = histograms(
            "karpenter_interruption_message_queue_duration_seconds",
            "From an interruption event's time to its handling",
            duration_histogram,
        );
        let disruption_evaluation_duration = histograms(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of one disruption method's evaluation",
            duration_histogram,
        );
        let consolidation_score = histograms(
            "karpenter_consolidation_score",
            "Scores of Balanced consolidation moves, by decision, NodePool and policy",
            score_histogram,
        );
        let extension_call_duration = histograms(
            "nodewright_extension_call_duration_seconds",
            "Duration of one call into an extension module, by role",
            call_histogram,
        );
        let extension_concurrency_wait = histograms(
            "nodewright_extension_concurrency_wait_seconds",
            "Time an extension evaluation waited for a turn under the concurrency cap",
            call_histogram,
        );
        build_info
            .get_or_create(&labels(&[("version", env!("CARGO_PKG_VERSION"))]))
            .set(1.0);
        Metrics {
            registry,
            build_info,
            nodeclaims_created,
            nodeclaims_terminated,
            nodeclaims_disrupted,
            nodeclaims_unhealthy_disrupted,
            nodes_created,
            nodes_terminated,
            nodes_drained,
            pods_eviction_requests,
            pods_drained,
            pods_scheduling_decision_duration,
            scheduling_duration,
            scheduler_queue_depth,
            scheduler_ignored_pods,
            scheduler_unschedulable_pods,
            cloudprovider_duration,
            cloudprovider_errors,
            offering_available,
            offering_price,
            cluster_state_synced,
            cluster_state_node_count,
            nodepools_usage,
            nodepools_limit,
            nodepools_allowed_disruptions,
            disruption_decisions,
            disruption_eligible_nodes,
            disruption_evaluation_duration,
            disruption_failed_validations,
            disruption_queue_failures,
            interruption_received_messages,
            interruption_deleted_messages,
            interruption_message_queue_duration,
            interruption_actions,
            interruption_instance_status_unhealthy,
            interruption_queue_healthy,
            consolidation_moves,
            consolidation_score,
            extensions: ExtensionMetrics {
                calls: extension_calls,
                call_duration: extension_call_duration,
                load_failures: extension_load_failures,
                cache_lookups: extension_cache_lookups,
                concurrency_wait: extension_concurrency_wait,
            },
        }
    }

    /// Everything in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Label pairs from `(name, value)`s.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_with_karpenter_names() {
        let m = metrics();
        m.nodeclaims_created
            .get_or_create(&labels(&[
                ("reason", "provisioning"),
                ("nodepool", "general"),
            ]))
            .inc();
        m.scheduling_duration
            .get_or_create(&labels(&[("controller", "provisioner")]))
            .observe(0.02);
        let text = m.render();
        assert!(
            text.contains(
                "karpenter_nodeclaims_created_total{reason=\"provisioning\",nodepool=\"general\"}"
            ),
            "{text}"
        );
        assert!(
            text.contains("karpenter_scheduler_scheduling_duration_seconds_bucket"),
            "{text}"
        );
        assert!(text.contains("karpenter_build_info{version="), "{text}");
        let reason = labels(&[("reason", "underutilized")]);
        m.nodepools_allowed_disruptions
            .get_or_create(&reason)
            .set(1.0);
        m.disruption_decisions.get_or_create(&reason).inc();
        m.disruption_eligible_nodes.get_or_create(&reason).set(2.0);
        m.disruption_evaluation_duration
            .get_or_create(&reason)
            .observe(0.01);
        m.disruption_failed_validations.get_or_create(&reason).inc();
        m.disruption_queue_failures.get_or_create(&reason).inc();
        let text = m.render();
        for name in [
            "karpenter_nodepools_allowed_disruptions{",
            "karpenter_voluntary_disruption_decisions_total{",
            "karpenter_voluntary_disruption_eligible_nodes{",
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_bucket{",
            "karpenter_voluntary_disruption_failed_validations_total{",
            "karpenter_voluntary_disruption_queue_failures_total{",
        ] {
            assert!(text.contains(name), "{name}: {text}");
        }
    }
}
