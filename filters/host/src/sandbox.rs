//! The sandbox a component runs in: which imports it may have, the
//! deterministic WASI context that satisfies the imports Rust's standard
//! library always brings (with virtual time, see `clock`, and capped output,
//! see `output`), the memory limiter, and the `log` import.

use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

use crate::bindings::host_iface;
use crate::clock::VirtualClock;
use crate::output::CappedOutput;
use crate::text::{self, Keep};

/// Interfaces a component may import. Everything else (filesystem,
/// sockets, HTTP, ...) is refused when the component is loaded. Versions are
/// not pinned: any `@x.y.z` of these interfaces is accepted.
const ALLOWED_IMPORTS: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "nodewright:filters/host",
    "nodewright:filters/types",
];

/// Returns the imports of `imports` the sandbox refuses.
pub(crate) fn forbidden_imports<'a>(imports: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    imports
        .into_iter()
        .filter(|name| {
            let unversioned = name.split('@').next().unwrap_or(name);
            !ALLOWED_IMPORTS.contains(&unversioned)
        })
        .map(str::to_string)
        .collect()
}

/// Most bytes of stdout+stderr kept per call (the first and the last half);
/// the rest is dropped and counted, never an error.
pub(crate) const GUEST_OUTPUT_CAP: usize = 16 * 1024;
/// Most bytes of `log` messages kept per call.
pub(crate) const LOG_CAP: usize = 16 * 1024;

/// The fixed instant components see as "now" through WASI clocks
/// (2025-01-01T00:00:00Z). The real time is in `context.now`.
const FROZEN_WALL_CLOCK: Duration = Duration::from_secs(1_735_689_600);

struct FrozenWallClock;

impl HostWallClock for FrozenWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        FROZEN_WALL_CLOCK
    }
}

struct FrozenMonotonicClock;

impl HostMonotonicClock for FrozenMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// Fixed bytes the deterministic random sources cycle through.
fn random_pattern() -> Vec<u8> {
    // splitmix64 from a fixed seed: looks random, is the same every run.
    let mut state: u64 = 0x6e6f_6465_7772_6967; // "nodewrig"
    let mut out = Vec::with_capacity(256);
    while out.len() < 256 {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out
}

/// Memory limiter that remembers whether it refused a growth, so the host
/// can tell memory exhaustion apart from other traps. The cap is on the
/// total of every linear memory of the call: a component may hold several
/// core modules, each with its own memory, and wasmtime's `StoreLimits`
/// caps each memory on its own.
pub(crate) struct Limiter {
    inner: StoreLimits,
    pub(crate) memory_limit: usize,
    /// Bytes of all linear memories of the call so far.
    total: usize,
    pub(crate) exceeded: bool,
}

impl Limiter {
    fn new(memory_limit: usize) -> Self {
        Limiter {
            inner: StoreLimitsBuilder::new()
                .memory_size(memory_limit)
                .instances(16)
                .tables(64)
                .memories(8)
                .build(),
            memory_limit,
            total: 0,
            exceeded: false,
        }
    }
}

/// The trap raised when a memory or table growth is refused.
#[derive(Debug, thiserror::Error)]
#[error("memory limit of {0} bytes exceeded")]
pub(crate) struct MemoryLimitExceeded(pub(crate) usize);

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Memories only grow within a store, and `current` is what this
        // memory was counted at before.
        let total = self.total.saturating_sub(current).saturating_add(desired);
        if total <= self.memory_limit && self.inner.memory_growing(current, desired, maximum)? {
            self.total = total;
            Ok(true)
        } else {
            self.exceeded = true;
            Err(wasmtime::Error::new(MemoryLimitExceeded(self.memory_limit)))
        }
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

/// Per-call store data.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    clock: VirtualClock,
    pub(crate) limiter: Limiter,
    output: CappedOutput,
    pub(crate) logs: Vec<(host_iface::Level, String)>,
    log_bytes: usize,
    pub(crate) logs_dropped: usize,
}

impl CallState {
    /// State for one call that may use `memory_limit` bytes and must end
    /// within `deadline` (sleeps included).
    pub(crate) fn new(memory_limit: usize, deadline: Duration) -> Self {
        let output = CappedOutput::new(GUEST_OUTPUT_CAP);
        let wasi = WasiCtxBuilder::new()
            .stdout(output.clone())
            .stderr(output.clone())
            .secure_random(wasmtime_wasi::Deterministic::new(random_pattern()))
            .insecure_random(wasmtime_wasi::Deterministic::new(random_pattern()))
            .insecure_random_seed(0x6e6f_6465_7772_6967_6874_0000_0000_0001)
            .wall_clock(FrozenWallClock)
            .monotonic_clock(FrozenMonotonicClock)
            .build();
        CallState {
            wasi,
            table: ResourceTable::new(),
            clock: VirtualClock::new(deadline),
            limiter: Limiter::new(memory_limit),
            output,
            logs: Vec::new(),
            log_bytes: 0,
            logs_dropped: 0,
        }
    }

    /// What the component wrote to stdout/stderr (lossily decoded, control
    /// characters but newlines escaped) and how many bytes were dropped.
    pub(crate) fn guest_output(&self) -> (String, usize) {
        let (raw, dropped) = self.output.contents();
        (text::multi_line(&raw, usize::MAX, Keep::Head), dropped)
    }

    /// The virtual clock and the resource table its subscriptions live in.
    pub(crate) fn clock_and_table(&mut self) -> (&mut VirtualClock, &mut ResourceTable) {
        (&mut self.clock, &mut self.table)
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl host_iface::Host for CallState {
    fn log(&mut self, level: host_iface::Level, message: String) {
        let line = text::one_line_owned(message, text::MAX_LOG_LINE_BYTES, Keep::Head);
        if self.log_bytes.saturating_add(line.len()) > LOG_CAP {
            self.logs_dropped = self.logs_dropped.saturating_add(1);
            return;
        }
        self.log_bytes += line.len();
        self.logs.push((level, line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_cap_is_on_the_total_of_all_memories() {
        const MIB: usize = 1 << 20;
        let mut limiter = Limiter::new(64 * MIB);
        // Two memories of 40 MiB: each under the cap, together over it.
        assert!(limiter.memory_growing(0, 40 * MIB, None).unwrap());
        assert!(limiter.memory_growing(0, 40 * MIB, None).is_err());
        assert!(limiter.exceeded);
        // Growing the first memory counts only the growth.
        let mut limiter = Limiter::new(64 * MIB);
        assert!(limiter.memory_growing(0, 16 * MIB, None).unwrap());
        assert!(limiter.memory_growing(16 * MIB, 48 * MIB, None).unwrap());
        assert!(limiter.memory_growing(0, 16 * MIB, None).unwrap());
        assert!(limiter.memory_growing(0, 64 * 1024, None).is_err());
    }
}
