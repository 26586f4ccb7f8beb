//! The soak's figures as a Markdown table (see `soak.rs`).

use std::collections::BTreeMap;

use super::Report;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

impl Report {
    /// The figures as a Markdown table.
    pub fn table(&self) -> String {
        let mib = |kib: u64| format!("{:.0} MiB", kib as f64 / 1024.0);
        let mut rates = self.burst_rates.clone();
        rates.sort_by(f64::total_cmp);
        let secs = self.elapsed.as_secs_f64().max(0.001);
        let join = |m: &BTreeMap<String, f64>| -> String {
            if m.is_empty() {
                return "none".to_string();
            }
            m.iter()
                .map(|(k, v)| format!("{k} {v:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rows = [
            (
                "run",
                format!(
                    "{:.0} s of bursts, {} bursts, {} drifts, {} interruptions injected",
                    secs, self.bursts, self.drifts, self.interruptions
                ),
            ),
            (
                "pods created / Running",
                format!("{} / {}", self.pods_created, self.pods_running),
            ),
            (
                "pods Running per second (whole run)",
                format!("{:.1}", self.pods_running as f64 / secs),
            ),
            (
                "pods Running per second (scale-up bursts: median, best)",
                format!(
                    "{:.1}, {:.1}",
                    percentile(&rates, 0.5),
                    rates.last().copied().unwrap_or(0.0)
                ),
            ),
            (
                "pending → Running p50 / p99 / max",
                format!(
                    "{:.1} s / {:.1} s / {:.1} s",
                    percentile(&self.latencies, 0.5),
                    percentile(&self.latencies, 0.99),
                    self.latencies.last().copied().unwrap_or(0.0)
                ),
            ),
            (
                "NodeClaims created / terminated (most at once)",
                format!(
                    "{:.0} / {:.0} ({})",
                    self.nodeclaims_created, self.nodeclaims_terminated, self.max_nodeclaims
                ),
            ),
            ("disruption decisions by reason", join(&self.decisions)),
            ("interruption actions", join(&self.interruption_actions)),
            ("peak RSS (VmHWM)", mib(self.peak_rss_kib)),
            (
                "RSS start / plateau / end",
                format!(
                    "{} / {} / {}",
                    mib(self.start.rss_kib),
                    mib(self.plateau_rss_kib),
                    mib(self.end.rss_kib)
                ),
            ),
            (
                "file descriptors start / peak / end",
                format!("{} / {} / {}", self.start.fds, self.peak.fds, self.end.fds),
            ),
            (
                "tokio tasks start / peak / end",
                format!(
                    "{} / {} / {}",
                    self.start.tasks, self.peak.tasks, self.end.tasks
                ),
            ),
            (
                "API server watches start / peak / end",
                format!(
                    "{} / {} / {}",
                    self.start.watches, self.peak.watches, self.end.watches
                ),
            ),
        ];
        let mut out = String::from("| figure | value |\n|---|---|\n");
        for (k, v) in rows {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
        out
    }
}
