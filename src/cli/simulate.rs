//! `nodewright simulate`: one provisioning round on manifests, printed as a plan.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::table::Table;
use super::{CliError, emit};
use crate::sim::plan::ClusterSummary;
use crate::sim::{Plan, SimulateOptions, simulate};

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
    /// AWS region of the embedded catalog.
    #[arg(long, default_value = "us-east-1")]
    region: String,
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
    let plan = simulate(&SimulateOptions {
        paths: args.paths.clone(),
        region: args.region.clone(),
        ignore_preferences: args.ignore_preferences,
    })?;
    match args.output {
        Output::Table => emit(&render(&plan)),
        Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&plan)?)),
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
    if plan.node_claims.iter().any(|c| c.price_is_estimate) {
        out.push_str("~ marks estimated prices (no spot price source offline; on-demand price shown as the upper bound)\n");
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

/// `1 pod`, `2 pods`.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
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
