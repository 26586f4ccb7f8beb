//! `nodewright simulate`: one provisioning round on manifests, printed as a plan.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::table::Table;
use super::{CliError, emit};
use crate::aws::catalog::PriceSource;
use crate::aws::catalog::live::{LiveCatalog, fetch_catalog};
use crate::aws::clients::{AwsClients, AwsSettings, sdk_config};
use crate::aws::pricing::{PricingError, PricingProvider};
use crate::sim::disruption::{DisruptionOptions, simulate_disruption, simulate_disruption_with};
use crate::sim::plan::ClusterSummary;
use crate::sim::{CatalogKind, Plan, SimulateOptions, simulate, simulate_with};
use k8s_openapi::jiff::Timestamp;

/// Arguments of `nodewright simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// YAML (or JSON) files or directories, or - for standard input:
    /// NodePools, EC2NodeClasses, NodeClaims, Nodes, Pods, Deployments,
    /// ReplicaSets, StatefulSets, Jobs, DaemonSets, Namespaces, ConfigMaps,
    /// and Lists of them. A cluster snapshot works as it is:
    /// `kubectl get nodepools,ec2nodeclasses,nodeclaims,nodes,namespaces,pods,deployments,replicasets,statefulsets,daemonsets,jobs,pdb -A -o yaml | nodewright simulate -`
    #[arg(required = true, value_name = "FILE_OR_DIR|-")]
    paths: Vec<PathBuf>,
    /// AWS region: of the embedded catalog, or the one asked with --aws.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// Read instance types, offerings and prices from the EC2 and Pricing
    /// APIs (default credential chain; AWS_ENDPOINT_URL is honoured) instead
    /// of the embedded catalog. Prices that cannot be read fall back to the
    /// embedded snapshot, with a warning.
    #[arg(long)]
    aws: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// Schedule as if pods had no preferred affinities or spreads.
    #[arg(long)]
    ignore_preferences: bool,
    /// Instead of a provisioning round, run the disruption controller's
    /// passes: NodeClaims marked at --at (Consolidatable, Drifted,
    /// expired), then expiration, emptiness, drift, multi-node and
    /// single-node consolidation, each pass's command applied before the
    /// next, within the NodePools' budgets. Prints the commands, every
    /// NodeClaim's marks and why each other node is kept.
    #[arg(long)]
    disruption: bool,
    /// With --disruption: the time to judge at (RFC 3339, e.g.
    /// 2026-11-26T12:00:00Z); now by default.
    #[arg(long, value_name = "RFC3339", requires = "disruption")]
    at: Option<String>,
    /// The controller's feature gates, `Name=true|false,…`, parsed as the
    /// controller parses them: NodeOverlay=true applies the NodeOverlays
    /// read (without it they are listed as not applied);
    /// StaticCapacity=true shows the NodeClaims static NodePools
    /// (spec.replicas) would open or delete; with --disruption,
    /// SpotToSpotConsolidation=true lets spot nodes be replaced by spot.
    #[arg(long, value_name = "GATES", default_value = "")]
    feature_gates: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

/// Runs the simulation and prints the plan.
pub fn run(args: &SimulateArgs) -> Result<(), CliError> {
    let gates = super::controller::feature_gates(&args.feature_gates)?;
    let options = SimulateOptions {
        paths: args.paths.clone(),
        region: args.region.clone(),
        ignore_preferences: args.ignore_preferences,
        node_overlay: gates
            .iter()
            .rfind(|(name, _)| *name == "NodeOverlay")
            .is_some_and(|(_, on)| *on),
        static_capacity: gates
            .iter()
            .rfind(|(name, _)| *name == "StaticCapacity")
            .is_some_and(|(_, on)| *on),
    };
    if args.disruption {
        if options.node_overlay {
            return Err("--feature-gates NodeOverlay=true: simulate --disruption does not apply NodeOverlays yet; leave the gate off for --disruption, or plan a provisioning round without --disruption".into());
        }
        return run_disruption(args, &options);
    }
    let plan = if args.aws {
        let live = live_catalog(&args.region)?;
        let warnings: Vec<String> = live
            .price_errors
            .iter()
            .map(|e| price_warning(e, &live))
            .collect();
        let mut plan = simulate_with(&options, live.catalog, CatalogKind::Live)?;
        plan.catalog_warnings = warnings;
        plan
    } else {
        simulate(&options)?
    };
    match args.output {
        Output::Table => emit(&render(&plan)),
        Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&plan)?)),
    }
}

/// `simulate --disruption`.
fn run_disruption(args: &SimulateArgs, options: &SimulateOptions) -> Result<(), CliError> {
    let at = match &args.at {
        Some(text) => text.parse::<Timestamp>().map_err(|e| {
            format!("--at {text:?}: not an RFC 3339 time ({e}); write e.g. 2026-11-26T12:00:00Z")
        })?,
        None => Timestamp::now(),
    };
    let gates = super::controller::feature_gates(&args.feature_gates)?;
    let disruption = DisruptionOptions {
        at,
        spot_to_spot: gates
            .iter()
            .rfind(|(name, _)| *name == "SpotToSpotConsolidation")
            .is_some_and(|(_, on)| *on),
    };
    let output = if args.aws {
        let live = live_catalog(&args.region)?;
        simulate_disruption_with(options, &disruption, live.catalog, CatalogKind::Live)?
    } else {
        simulate_disruption(options, &disruption)?
    };
    match args.output {
        Output::Table => emit(&super::simulate_disruption::render(&output)),
        Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&output)?)),
    }
}

/// Reads the live catalog of `region` once, on a runtime of its own (the
/// simulation itself runs outside it).
fn live_catalog(region: &str) -> Result<LiveCatalog, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let sdk = sdk_config(&AwsSettings {
            region: Some(region.to_string()),
            ..AwsSettings::default()
        })
        .await;
        let clients = AwsClients::new(&sdk);
        let pricing = PricingProvider::new(region, clients.pricing.clone(), clients.ec2.clone())?;
        let live = fetch_catalog(&clients.ec2, &pricing)
            .await
            .map_err(|e| format!("--aws: {e}"))?;
        Ok(live)
    })
}

/// What a failed price refresh means for the plan's prices.
fn price_warning(error: &PricingError, live: &LiveCatalog) -> String {
    match error {
        PricingError::SpotPriceHistory { .. } | PricingError::NoSpotPrices { .. } => {
            format!("spot prices: {error}; the on-demand price stands in, marked as an estimate")
        }
        _ => {
            let snapshot = match live.catalog.prices().source() {
                PriceSource::Snapshot { generated_at } => {
                    format!("the embedded snapshot of {generated_at}")
                }
                PriceSource::Borrowed {
                    from_region,
                    generated_at,
                } => format!(
                    "the embedded {from_region} snapshot of {generated_at}, marked as estimates"
                ),
            };
            format!("on-demand prices: {error}; {snapshot} stands in")
        }
    }
}

/// The plan as a table: one row per NodeClaim, then unschedulable pods, then the total.
fn render(plan: &Plan) -> String {
    let percent = |f: Option<f64>| f.map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0));
    let mut table = Table::new(&[
        "NODECLAIM",
        "NODEPOOL",
        "INSTANCE TYPE",
        "#OPTIONS",
        "CAPACITY",
        "ZONE",
        "#$/H",
        "#PODS",
        "#CPU",
        "#MEMORY",
    ]);
    for claim in &plan.node_claims {
        table.row(vec![
            claim.name.clone(),
            claim.node_pool.clone(),
            claim.instance_type.clone(),
            claim.instance_type_options.len().to_string(),
            claim.capacity_type.clone(),
            claim.zone.clone(),
            format!(
                "{}{:.4}",
                if claim.price_is_estimate { "~" } else { "" },
                claim.price_per_hour
            ),
            claim.pods.len().to_string(),
            percent(claim.cpu_fill),
            percent(claim.memory_fill),
        ]);
    }
    let mut out = table.render();
    out.push_str(&render_overlays(plan));
    out.push_str(&render_static_pools(plan));
    out.push_str(&render_price_limits(plan));
    out.push_str(&render_extensions(plan));
    out.push_str(&render_cluster(&plan.cluster));
    for node in &plan.existing_nodes {
        let what = if node.in_flight {
            "in-flight NodeClaim"
        } else {
            "existing node"
        };
        let pods = count(node.pods.len(), "pod");
        out.push_str(&format!("{what} {}: {pods} placed\n", node.name));
    }
    if !plan.unschedulable.is_empty() {
        out.push_str("\nunschedulable pods:\n");
        for pod in &plan.unschedulable {
            out.push_str(&format!("  {}: {}\n", pod.pod, pod.reason));
        }
    }
    out.push_str(&format!(
        "\n{} new NodeClaims, total ${:.4}/h in {}, solved in {:.1} ms\n",
        plan.node_claims.len(),
        plan.total_price_per_hour,
        plan.region,
        plan.solve_millis
    ));
    match plan.catalog {
        CatalogKind::Embedded => out.push_str(
            "catalog: embedded in the binary (--aws reads it from the EC2 and Pricing APIs)\n",
        ),
        CatalogKind::Live => out.push_str(&format!(
            "catalog: live, from the EC2 and Pricing APIs in {}\n",
            plan.region
        )),
    }
    for warning in &plan.catalog_warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    if plan.node_claims.iter().any(|c| c.price_is_estimate) {
        out.push_str(match plan.catalog {
            CatalogKind::Embedded => "~ marks estimated prices (no spot price source offline; on-demand price shown as the upper bound)\n",
            CatalogKind::Live => "~ marks estimated prices (the on-demand price where no spot price is known, or another region's snapshot)\n",
        });
    }
    out
}

/// One line on what the round started from.
fn render_cluster(cluster: &ClusterSummary) -> String {
    let c = cluster;
    let mut line = format!(
        "\ncluster: {}, {}; pods: {} to place",
        count(c.nodes, "node"),
        count(c.in_flight_node_claims, "in-flight NodeClaim"),
        c.pending_pods
    );
    if c.expanded_pods > 0 {
        line.push_str(&format!(" ({} from workloads)", c.expanded_pods));
    }
    line.push_str(&format!(
        ", {} running, {} ignored (finished, being deleted, or a DaemonSet's)\n",
        c.bound_pods, c.ignored_pods
    ));
    line
}

/// One line per NodeOverlay: applied (and what it matched), or why not;
/// then which claims an overlay priced differently from the catalog.
fn render_overlays(plan: &Plan) -> String {
    let mut out = String::new();
    if plan.node_overlays.is_empty() {
        return out;
    }
    out.push_str("\nnode overlays:\n");
    for overlay in &plan.node_overlays {
        match (&overlay.reason, overlay.applied) {
            (_, true) => out.push_str(&format!(
                "  {}: applied; {}\n",
                overlay.name, overlay.message
            )),
            (reason, false) => out.push_str(&format!(
                "  {}: not applied ({}): {}\n",
                overlay.name,
                reason.as_deref().unwrap_or("unknown"),
                overlay.message
            )),
        }
    }
    for claim in &plan.node_claims {
        if claim.price_per_hour != claim.list_price_per_hour {
            out.push_str(&format!(
                "  {}: ${:.4}/h with overlays, ${:.4}/h list\n",
                claim.name, claim.price_per_hour, claim.list_price_per_hour
            ));
        }
    }
    out
}

/// One line per NodePool with a price limit: what it spends against it.
fn render_price_limits(plan: &Plan) -> String {
    let mut out = String::new();
    if plan.price_limits.is_empty() {
        return out;
    }
    out.push_str("\nprice limits (nodewright.io/price-limit-per-hour):\n");
    for limit in &plan.price_limits {
        out.push_str(&format!(
            "  {}: ${:.4}/h of ${:.4}/h (nodes ${:.4}/h, planned ${:.4}/h), ${:.4}/h left\n",
            limit.node_pool,
            limit.nodes_per_hour + limit.planned_per_hour,
            limit.limit_per_hour,
            limit.nodes_per_hour,
            limit.planned_per_hour,
            limit.left_per_hour
        ));
    }
    out
}

/// One line per static NodePool: what it opens (and at what price) or
/// deletes, or why it holds.
fn render_static_pools(plan: &Plan) -> String {
    let mut out = String::new();
    if plan.static_node_pools.is_empty() {
        return out;
    }
    out.push_str(
        "
static node pools:
",
    );
    for pool in &plan.static_node_pools {
        let mut line = format!(
            "  {}: {} of {} replicas",
            pool.node_pool, pool.active, pool.replicas
        );
        if let Some(claim) = &pool.node_claim {
            line.push_str(&format!(
                "; opens {} ({} {} in {}, ${:.4}/h together)",
                count(pool.open as usize, "NodeClaim"),
                claim.instance_type,
                claim.capacity_type,
                claim.zone,
                pool.price_per_hour
            ));
        }
        if !pool.remove.is_empty() {
            line.push_str(&format!("; deletes {}", pool.remove.join(", ")));
        }
        if let Some(why) = &pool.held {
            line.push_str(&format!("; held: {why}"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `1 pod`, `2 pods`.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// One line per extension module and NodePool: what it dropped, how it
/// would reorder (shadow), why it failed, or that it changed nothing.
fn render_extensions(plan: &Plan) -> String {
    const EXAMPLES: usize = 4;
    let mut out = String::new();
    if !plan.extensions.is_empty() {
        out.push_str("\nextensions:\n");
    }
    for run in &plan.extensions {
        let shadow = run.mode == "Shadow";
        let head = format!(
            "  {}/{} {} {} ({}){}",
            run.node_class,
            run.node_pool,
            run.role,
            run.module,
            run.source,
            if shadow { " [shadow]" } else { "" }
        );
        if let Some(error) = &run.error {
            let effect = if shadow {
                "shadow mode: nothing changes"
            } else if run.failure_policy == "Fail" {
                "failurePolicy Fail: no launches for this EC2NodeClass"
            } else {
                "failurePolicy Ignore: module skipped"
            };
            out.push_str(&format!("{head}: FAILED ({effect}): {error}\n"));
            continue;
        }
        let dropped: usize = run.dropped.iter().map(|g| g.instance_types.len()).sum();
        match (run.role.as_str(), shadow, &run.reorder) {
            (role, _, _) if run.no_effect.is_some() => {
                let what = if role == "instance-filter" {
                    format!("dropped {dropped} instance types")
                } else {
                    "ran".to_string()
                };
                let why = run.no_effect.as_deref().unwrap_or_default();
                out.push_str(&format!("{head}: {what}, {why}\n"));
            }
            ("instance-filter", false, _) => {
                out.push_str(&format!("{head}: dropped {dropped} instance types\n"))
            }
            ("instance-filter", true, _) => out.push_str(&format!(
                "{head}: would drop {dropped} instance types (nothing dropped)\n"
            )),
            (_, true, Some(r)) if r.moved == 0 => out.push_str(&format!(
                "{head}: would keep the order of {} options\n",
                r.total
            )),
            (_, true, Some(r)) => out.push_str(&format!(
                "{head}: would move {} of {} options: first {} instead of {}\n",
                r.moved,
                r.total,
                r.shadow.join(", "),
                r.enforced.join(", ")
            )),
            _ => out.push_str(&format!("{head}: ordered the instance-type options\n")),
        }
        for group in &run.dropped {
            let mut names =
                group.instance_types[..group.instance_types.len().min(EXAMPLES)].join(", ");
            if group.instance_types.len() > EXAMPLES {
                names.push_str(&format!(", … (+{})", group.instance_types.len() - EXAMPLES));
            }
            out.push_str(&format!("    {}: {names}\n", group.reason));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::SchedulingResult;

    fn empty_plan(kind: CatalogKind, warnings: &[&str]) -> Plan {
        let mut plan = Plan::new(
            "eu-west-1",
            &SchedulingResult::default(),
            &Default::default(),
            &Default::default(),
            0.0,
        );
        plan.catalog = kind;
        plan.catalog_warnings = warnings.iter().map(|w| w.to_string()).collect();
        plan
    }

    #[test]
    fn the_footer_names_the_catalog_and_its_warnings() {
        let embedded = render(&empty_plan(CatalogKind::Embedded, &[]));
        assert!(
            embedded.contains("catalog: embedded in the binary"),
            "{embedded}"
        );
        let live = render(&empty_plan(
            CatalogKind::Live,
            &["on-demand prices: denied"],
        ));
        assert!(
            live.contains("catalog: live, from the EC2 and Pricing APIs in eu-west-1"),
            "{live}"
        );
        assert!(live.contains("warning: on-demand prices: denied"), "{live}");
        let json = serde_json::to_value(empty_plan(CatalogKind::Embedded, &[])).unwrap();
        assert_eq!(json["catalog"], "embedded");
        assert!(json.get("catalogWarnings").is_none());
    }
}
