//! `nodewright simulate`: one provisioning round on manifests, printed as a plan.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::table::Table;
use super::{CliError, emit};
use crate::aws::catalog::PriceSource;
use crate::aws::catalog::live::{LiveCatalog, fetch_catalog};
use crate::aws::clients::{AwsClients, AwsSettings, sdk_config};
use crate::aws::pricing::{PricingError, PricingProvider};
use crate::sim::{CatalogKind, Plan, SimulateOptions, simulate, simulate_with};

/// Arguments of `nodewright simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// YAML files or directories: NodePools, EC2NodeClasses, Pods, Deployments,
    /// ReplicaSets, StatefulSets, Jobs, DaemonSets, Nodes, ConfigMaps.
    #[arg(required = true, value_name = "FILE_OR_DIR")]
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
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

/// Runs the simulation and prints the plan.
pub fn run(args: &SimulateArgs) -> Result<(), CliError> {
    let options = SimulateOptions {
        paths: args.paths.clone(),
        region: args.region.clone(),
        ignore_preferences: args.ignore_preferences,
    };
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
    out.push_str(&render_extensions(plan));
    for node in &plan.existing_nodes {
        out.push_str(&format!(
            "existing node {}: {} pods\n",
            node.name,
            node.pods.len()
        ));
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

/// One line per extension module and NodePool: what it dropped or why it failed.
fn render_extensions(plan: &Plan) -> String {
    const EXAMPLES: usize = 4;
    let mut out = String::new();
    if !plan.extensions.is_empty() {
        out.push_str("\nextensions:\n");
    }
    for run in &plan.extensions {
        let head = format!(
            "  {}/{} {} {} ({})",
            run.node_class, run.node_pool, run.role, run.module, run.source
        );
        if let Some(error) = &run.error {
            let effect = if run.failure_policy == "Fail" {
                "failurePolicy Fail: no launches for this EC2NodeClass"
            } else {
                "failurePolicy Ignore: module skipped"
            };
            out.push_str(&format!("{head}: FAILED ({effect}): {error}\n"));
            continue;
        }
        let dropped: usize = run.dropped.iter().map(|g| g.instance_types.len()).sum();
        if run.role == "instance-filter" {
            out.push_str(&format!("{head}: dropped {dropped} instance types\n"));
        } else {
            out.push_str(&format!("{head}: ordered the instance-type options\n"));
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
