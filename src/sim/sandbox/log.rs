//! What the sandbox prints while it runs: one line per thing that happens
//! (NodeClaim created, launched, registered, initialized; node registered,
//! Ready; pod bound, Running, unschedulable …) on stderr, readable text with
//! the time since start by default, JSON lines for tools. `RUST_LOG`
//! overrides the default filter (nodewright at `info`, libraries at `warn`).

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `  3.214s  INFO pod bound pod=shop/web-1 node=ip-10-0-17-48.ec2.internal`.
    Text,
    /// One JSON object per line.
    Json,
}

/// The filter without `RUST_LOG`.
pub const DEFAULT_FILTER: &str = "warn,nodewright=info";

/// Installs the process's log subscriber (a second call keeps the first).
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_target(false)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .compact()
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
