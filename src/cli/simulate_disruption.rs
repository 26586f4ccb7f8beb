//! The table view of `simulate --disruption`: one row per decision, then
//! the kept nodes grouped by reason, then the totals.

use std::collections::BTreeMap;

use super::table::Table;
use crate::sim::disruption::DisruptionOutput;

/// The decisions (method, nodes out, replacements in, pods moved, $/h
/// before → after), the kept nodes by reason, and the totals.
pub fn render(output: &DisruptionOutput) -> String {
    let report = &output.disruption;
    let mut table = Table::new(&[
        "PASS",
        "METHOD",
        "DECISION",
        "NODES OUT",
        "REPLACEMENTS",
        "#PODS",
        "#$/H BEFORE",
        "#$/H AFTER",
    ]);
    for d in &report.decisions {
        let out: Vec<String> = d
            .candidates
            .iter()
            .map(|c| format!("{} ({})", c.node, c.instance_type))
            .collect();
        let replacements: Vec<String> = d
            .replacements
            .iter()
            .map(|r| format!("{} ({})", r.name, r.instance_type))
            .collect();
        table.row(vec![
            d.pass.to_string(),
            d.method.clone(),
            d.decision.clone(),
            out.join(", "),
            if replacements.is_empty() {
                "-".to_string()
            } else {
                replacements.join(", ")
            },
            d.pods.len().to_string(),
            format!("{:.4}", d.price_per_hour_before),
            format!("{:.4}", d.price_per_hour_after),
        ]);
    }
    let mut text = if report.decisions.is_empty() {
        "no disruption decisions\n".to_string()
    } else {
        table.render()
    };
    let mut by_reason: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for k in &report.kept {
        by_reason
            .entry(k.reason.as_str())
            .or_default()
            .push(format!("{}: {}", k.node, k.message));
    }
    if !by_reason.is_empty() {
        text.push_str("\nkept:\n");
        for (reason, nodes) in by_reason {
            text.push_str(&format!("  {reason} ({}):\n", nodes.len()));
            for line in nodes {
                text.push_str(&format!("    {line}\n"));
            }
        }
    }
    if !report.problems.is_empty() {
        text.push_str("\nleft out:\n");
        for problem in &report.problems {
            text.push_str(&format!("  {problem}\n"));
        }
    }
    text.push_str(&format!(
        "\n{} decisions at {}; managed nodes ${:.4}/h -> ${:.4}/h in {}, solved in {:.1} ms\n",
        report.decisions.len(),
        report.at,
        report.price_per_hour_before,
        report.price_per_hour_after,
        output.region,
        report.solve_millis
    ));
    text
}
