//! Peak memory of a benchmark process, shared by the benches that report it.

/// This process's peak resident set (`VmHWM`), in MiB; 0 where
/// `/proc/self/status` cannot be read.
pub fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}
