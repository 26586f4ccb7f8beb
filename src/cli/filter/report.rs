//! What `nodewright filter test` found: one [`TestReport`] per run, printed
//! as a summary a person reads on a terminal (counts, drop reasons grouped
//! with a few names each) or, with `--output json`, in full.

use std::collections::HashMap;
use std::time::Duration;

use nodewright_host::harness::Harness;
use nodewright_host::sdk::{Ami, InstanceTypeInfo};
use nodewright_host::{CallError, CallReport, Role};
use serde::Serialize;

use crate::extensions::Reorder;

/// Reason groups the text output shows; the rest are counted.
const GROUPS_SHOWN: usize = 10;
/// Names the text output quotes per reason group.
const NAMES_PER_GROUP: usize = 5;
/// Kept names the text output quotes.
const KEPT_SHOWN: usize = 8;
/// Stands for the dropped type's own name in a grouped reason.
const TYPE_PLACEHOLDER: &str = "<type>";
/// Stands for a number in a grouped reason.
const NUMBER_PLACEHOLDER: &str = "<n>";

/// The `--output json` document of `filter test`; the text output is a
/// summary of the same. Fields of the other roles are left out.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TestReport {
    /// With `--snapshot`: the NodePool whose instance types these were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    /// The module's name (file path or `builtin:NAME`).
    pub component: String,
    /// `instance-filter`, `ami-selector` or `priority-scorer`.
    pub role: &'static str,
    /// `enforce` or `shadow`.
    pub mode: &'static str,
    /// Candidates passed to the call.
    pub candidates: usize,
    /// Time to load (compile) the module, in milliseconds.
    pub load_ms: f64,
    /// Wall time of the call, instantiation included, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_ms: Option<f64>,
    /// Instance filter: the kept names, in candidate order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<Vec<String>>,
    /// Instance filter: every dropped name with its reason, in candidate order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Vec<Dropped>>,
    /// Instance filter: the dropped names grouped by reason, largest group first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_by_reason: Option<Vec<ReasonGroup>>,
    /// Priority scorer: every candidate in try order with its score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<Scored>>,
    /// AMI selector: the chosen image ids, best first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected: Option<Vec<String>>,
    /// AMI selector: the image ids it left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_out: Option<Vec<String>>,
    /// Shadow scorer or selector: how it would reorder the enforced order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder: Option<Reorder>,
    /// Shadow mode only: why the module failed (reported, not enforced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Lines the module sent through the `log` import.
    pub logs: Vec<LogLine>,
    /// What the module wrote to stdout/stderr (bounded), if anything.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// The call's wall time, for the text output's `{:?}` formatting.
    #[serde(skip)]
    elapsed: Option<Duration>,
    /// The selector's enforced order (shadow), for the text output.
    #[serde(skip)]
    enforced_amis: Vec<String>,
}

/// One dropped instance type.
#[derive(Debug, Serialize)]
pub struct Dropped {
    /// Instance type name.
    pub name: String,
    /// The module's reason, as it gave it.
    pub reason: String,
}

/// Dropped types whose reasons differ only in the type's own name and in
/// numbers, so a thousand drops read as a few reasons.
#[derive(Debug, Serialize)]
pub struct ReasonGroup {
    /// The reason with the type's name as `<type>` and numbers as `<n>`.
    pub reason: String,
    /// How many types were dropped for it.
    pub count: usize,
    /// One of the reasons as given (the first type's).
    pub example: String,
    /// Every type dropped for it, in candidate order.
    pub types: Vec<String>,
}

/// One candidate of a scorer's try order.
#[derive(Debug, Serialize)]
pub struct Scored {
    /// Instance type name.
    pub name: String,
    /// The score the module gave it.
    pub score: i32,
}

/// One `log` line of the module.
#[derive(Debug, Serialize)]
pub struct LogLine {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: String,
    /// The line (bounded, control characters escaped).
    pub message: String,
}

impl TestReport {
    /// An empty report for one run of `module` as `role`.
    pub fn new(
        component: String,
        role: Role,
        shadow: bool,
        candidates: usize,
        load: Duration,
    ) -> TestReport {
        TestReport {
            node_pool: None,
            component,
            role: role.as_str(),
            mode: if shadow { "shadow" } else { "enforce" },
            candidates,
            load_ms: millis(load),
            call_ms: None,
            kept: None,
            dropped: None,
            dropped_by_reason: None,
            order: None,
            selected: None,
            left_out: None,
            reorder: None,
            error: None,
            logs: Vec::new(),
            output: String::new(),
            elapsed: None,
            enforced_amis: Vec::new(),
        }
    }

    fn shadow(&self) -> bool {
        self.mode == "shadow"
    }

    fn record(&mut self, report: &CallReport) {
        self.elapsed = Some(report.elapsed);
        self.call_ms = Some(millis(report.elapsed));
        self.logs = report
            .logs
            .iter()
            .map(|(level, message)| LogLine {
                level: format!("{level:?}").to_lowercase(),
                message: message.clone(),
            })
            .collect();
        self.output = report.guest_output.trim().to_string();
    }

    /// Runs an instance filter on `types`.
    pub fn run_filter(
        &mut self,
        harness: &Harness,
        types: &[InstanceTypeInfo],
    ) -> Result<(), CallError> {
        let r = harness.filter(types)?;
        self.record(&r.report);
        self.dropped_by_reason = Some(group_reasons(&r.dropped));
        self.dropped = Some(
            r.dropped
                .into_iter()
                .map(|(name, reason)| Dropped { name, reason })
                .collect(),
        );
        self.kept = Some(r.kept);
        Ok(())
    }

    /// Runs a priority scorer on `types`; in shadow mode compares its order
    /// with the price order used without it.
    pub fn run_scorer(
        &mut self,
        harness: &Harness,
        types: &[InstanceTypeInfo],
    ) -> Result<(), CallError> {
        let r = harness.score(types)?;
        self.record(&r.report);
        if self.shadow() {
            self.reorder = Some(Reorder::between(&price_order(types), &r.order));
        }
        self.order = Some(
            r.order
                .iter()
                .map(|name| Scored {
                    name: name.clone(),
                    score: r.score_of(name).unwrap_or_default(),
                })
                .collect(),
        );
        Ok(())
    }

    /// Runs an AMI selector on `amis`; in shadow mode compares its choice
    /// with `builtin:available-amis`, which decides while it is shadowed.
    pub fn run_selector(&mut self, harness: &Harness, amis: &[Ami]) -> Result<(), CallError> {
        let r = harness.select(amis)?;
        self.record(&r.report);
        if self.shadow() {
            let enforced = Harness::builtin(Role::AmiSelector, "available-amis")
                .map_err(|e| CallError::Setup(e.to_string()))?
                .select(amis)?;
            self.reorder = Some(Reorder::between(&enforced.order, &r.order));
            self.enforced_amis = enforced.order;
        }
        self.left_out = Some(
            amis.iter()
                .map(|a| a.id.clone())
                .filter(|id| !r.order.contains(id))
                .collect(),
        );
        self.selected = Some(r.order);
        Ok(())
    }

    /// The summary for a terminal, after the `loaded in` line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if let Some(error) = &self.error {
            out.push_str(&format!(
                "shadow module failed (reported, not enforced; nothing changes): {error}\n"
            ));
            return out;
        }
        if let Some(elapsed) = self.elapsed {
            out.push_str(&format!(
                "call: {elapsed:.2?} for {} candidates\n",
                self.candidates
            ));
        }
        if let (Some(kept), Some(dropped), Some(groups)) =
            (&self.kept, &self.dropped, &self.dropped_by_reason)
        {
            self.filter_text(&mut out, kept, dropped.len(), groups);
        }
        if let Some(order) = &self.order {
            self.scorer_text(&mut out, order);
        }
        if let (Some(selected), Some(left_out)) = (&self.selected, &self.left_out) {
            self.selector_text(&mut out, selected, left_out);
        }
        for line in &self.logs {
            out.push_str(&format!("log {}: {}\n", line.level, line.message));
        }
        if !self.output.is_empty() {
            out.push_str(&format!("stdout/stderr: {}\n", self.output));
        }
        out
    }

    fn filter_text(
        &self,
        out: &mut String,
        kept: &[String],
        dropped: usize,
        groups: &[ReasonGroup],
    ) {
        let total = self.candidates;
        if self.shadow() {
            out.push_str(&format!(
                "nothing is dropped in shadow mode; kept ({total}): all\nwould keep {}, would drop {dropped}, of {total}\n",
                kept.len()
            ));
        } else {
            out.push_str(&format!(
                "kept {}, dropped {dropped}, of {total}\n",
                kept.len()
            ));
        }
        if dropped > 0 {
            let verb = if self.shadow() {
                "would drop"
            } else {
                "dropped"
            };
            out.push_str(&format!(
                "{verb} ({dropped}) by reason ({} reason{}):\n",
                groups.len(),
                if groups.len() == 1 { "" } else { "s" }
            ));
            let width = groups.first().map_or(1, |g| g.count.to_string().len());
            for group in groups.iter().take(GROUPS_SHOWN) {
                out.push_str(&format!("  {:>width$}  {}\n", group.count, group.reason));
                // Numbers were set aside: show one reason as given.
                if group.example.replace(&group.types[0], TYPE_PLACEHOLDER) != group.reason {
                    out.push_str(&format!("  {:width$}  e.g. {}\n", "", group.example));
                }
                out.push_str(&format!(
                    "  {:width$}  {}\n",
                    "",
                    first_few(&group.types, NAMES_PER_GROUP)
                ));
            }
            if groups.len() > GROUPS_SHOWN {
                let rest = &groups[GROUPS_SHOWN..];
                out.push_str(&format!(
                    "  … {} more reasons ({} types)\n",
                    rest.len(),
                    rest.iter().map(|g| g.count).sum::<usize>()
                ));
            }
        }
        if !self.shadow() && !kept.is_empty() {
            out.push_str(&format!(
                "kept ({}): {}\n",
                kept.len(),
                first_few(kept, KEPT_SHOWN)
            ));
        }
        if kept.len() > KEPT_SHOWN || groups.iter().any(|g| g.count > NAMES_PER_GROUP) {
            out.push_str("every type and reason: --output json\n");
        }
    }

    fn scorer_text(&self, out: &mut String, order: &[Scored]) {
        if let Some(reorder) = &self.reorder {
            out.push_str(&format!(
                "would move {} of {} options against price order\n  enforced (price order): {}\n  with this scorer:       {}\n",
                reorder.moved,
                reorder.total,
                reorder.enforced.join(", "),
                reorder.shadow.join(", ")
            ));
            out.push_str("try order it would give (score, then price):\n");
        } else {
            out.push_str("try order (score, then price):\n");
        }
        for (i, s) in order.iter().enumerate() {
            out.push_str(&format!("  {:>3}. {} (score {})\n", i + 1, s.name, s.score));
        }
    }

    fn selector_text(&self, out: &mut String, selected: &[String], left_out: &[String]) {
        if let Some(reorder) = &self.reorder {
            out.push_str(&format!(
                "would move {} of {} images against builtin:available-amis\n  enforced (available-amis): {}\n  with this selector:        {}\n",
                reorder.moved,
                reorder.total,
                self.enforced_amis.join(", "),
                selected.join(", ")
            ));
        } else {
            out.push_str("selected, best first:\n");
            for id in selected {
                out.push_str(&format!("  {id}\n"));
            }
        }
        let label = if self.shadow() {
            "would leave out"
        } else {
            "left out"
        };
        out.push_str(&format!("{label}: {}\n", left_out.join(", ")));
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `names[..n]` joined, with how many more there are.
fn first_few(names: &[String], n: usize) -> String {
    let shown = names[..names.len().min(n)].join(", ");
    if names.len() > n {
        format!("{shown} … and {} more", names.len() - n)
    } else {
        shown
    }
}

/// Groups drops whose reasons read the same once the type's own name and
/// the numbers are set aside; largest group first, ties in order of first
/// appearance.
pub fn group_reasons(dropped: &[(String, String)]) -> Vec<ReasonGroup> {
    let mut groups: Vec<ReasonGroup> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (name, reason) in dropped {
        let key = generalize(name, reason);
        let i = *index.entry(key.clone()).or_insert_with(|| {
            groups.push(ReasonGroup {
                reason: key,
                count: 0,
                example: reason.clone(),
                types: Vec::new(),
            });
            groups.len() - 1
        });
        groups[i].count += 1;
        groups[i].types.push(name.clone());
    }
    // Stable: equal counts keep their order of first appearance.
    groups.sort_by_key(|g| std::cmp::Reverse(g.count));
    groups
}

/// `reason` with `name` as `<type>` and each standalone number (digits,
/// with `.` or `,` inside, not touching a letter: `16`, `0.096`, `1,340`,
/// but not the `5` of `c5`) as `<n>`.
fn generalize(name: &str, reason: &str) -> String {
    let text = if name.is_empty() {
        reason.to_string()
    } else {
        reason.replace(name, TYPE_PLACEHOLDER)
    };
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let starts_number = chars[i].is_ascii_digit()
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'));
        if starts_number {
            let mut end = i;
            while end < chars.len()
                && (chars[end].is_ascii_digit() || matches!(chars[end], '.' | ','))
            {
                end += 1;
            }
            // Sentence punctuation after a number is not part of it.
            while end > i && matches!(chars[end - 1], '.' | ',') {
                end -= 1;
            }
            let touches_letter = chars
                .get(end)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_');
            if !touches_letter {
                out.push_str(NUMBER_PLACEHOLDER);
                i = end;
                continue;
            }
            out.extend(&chars[i..end]);
            i = end;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Names ordered as without any scorer: cheapest available offering first.
fn price_order(types: &[InstanceTypeInfo]) -> Vec<String> {
    let price = |t: &InstanceTypeInfo| {
        t.offerings
            .iter()
            .filter(|o| o.available)
            .map(|o| o.price)
            .min_by(f64::total_cmp)
            .unwrap_or(f64::INFINITY)
    };
    let mut order: Vec<&InstanceTypeInfo> = types.iter().collect();
    order.sort_by(|a, b| price(a).total_cmp(&price(b)));
    order.into_iter().map(|t| t.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drop(name: &str, reason: &str) -> (String, String) {
        (name.to_string(), reason.to_string())
    }

    #[test]
    fn names_and_numbers_are_set_aside() {
        assert_eq!(
            generalize("m7g.4xlarge", "m7g.4xlarge has 16 vCPUs, more than 4."),
            "<type> has <n> vCPUs, more than <n>."
        );
        assert_eq!(
            generalize(
                "c5.large",
                "c5.large costs $0.085/h (cap $0.05/h), 1,340 types"
            ),
            "<type> costs $<n>/h (cap $<n>/h), <n> types"
        );
        // Numbers inside words and family names stay.
        assert_eq!(
            generalize("c5.large", "c5.large is in family c5, not m7g or 4xlarge"),
            "<type> is in family c5, not m7g or 4xlarge"
        );
    }

    #[test]
    fn groups_are_counted_largest_first_in_candidate_order() {
        let groups = group_reasons(&[
            drop("c5.large", "c5.large is in family c5"),
            drop("t3.large", "t3.large is burstable"),
            drop("t3.xlarge", "t3.xlarge is burstable"),
            drop("m5.large", "m5.large has 2 vCPUs"),
            drop("t2.nano", "t2.nano is burstable"),
            drop("m5.xlarge", "m5.xlarge has 4 vCPUs"),
        ]);
        let summary: Vec<(&str, usize, Vec<&str>)> = groups
            .iter()
            .map(|g| {
                (
                    g.reason.as_str(),
                    g.count,
                    g.types.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "<type> is burstable",
                    3,
                    vec!["t3.large", "t3.xlarge", "t2.nano"]
                ),
                ("<type> has <n> vCPUs", 2, vec!["m5.large", "m5.xlarge"]),
                ("<type> is in family c5", 1, vec!["c5.large"]),
            ]
        );
        assert_eq!(groups[1].example, "m5.large has 2 vCPUs");
    }

    #[test]
    fn a_long_list_is_cut_with_a_count() {
        let names: Vec<String> = (0..7).map(|i| format!("t{i}")).collect();
        assert_eq!(first_few(&names, 3), "t0, t1, t2 … and 4 more");
        assert_eq!(first_few(&names[..2], 3), "t0, t1");
    }
}
