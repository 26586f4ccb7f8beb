//! A loaded module — a native built-in or a sandboxed component — and the
//! three calls, each with output validation.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use nodewright_filter::{Ami, AmiSelector, AmiState, Context, LogLevel, PriorityScorer, Verdict};
use wasmtime::{Engine, Store, Trap};

use crate::bindings::{filter, host_iface, scorer, selector, wit};
use crate::candidates::{InstanceTypeSet, architecture};
use crate::clock::SleptPastDeadline;
use crate::sandbox::{CallState, MemoryLimitExceeded};
use crate::text::{self, Keep};
use crate::{CallError, Limits, LoadError, Role};

/// Longest drop reason a filter may return, bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// Native built-ins, addressed as `builtin:NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    AvailableAmis,
    FlexFirst,
}

impl Builtin {
    const ALL: [(Builtin, &'static str, Role); 2] = [
        (Builtin::AvailableAmis, "available-amis", Role::AmiSelector),
        (Builtin::FlexFirst, "flex-first", Role::PriorityScorer),
    ];

    pub(crate) fn find(role: Role, name: &str) -> Result<Builtin, LoadError> {
        Builtin::ALL
            .iter()
            .find(|(_, n, r)| *n == name && *r == role)
            .map(|(b, _, _)| *b)
            .ok_or_else(|| LoadError::UnknownBuiltin {
                name: name.to_string(),
                role,
                known: {
                    let known: Vec<&str> = Builtin::ALL
                        .iter()
                        .filter(|(_, _, r)| *r == role)
                        .map(|(_, n, _)| *n)
                        .collect();
                    if known.is_empty() {
                        "(none)".to_string()
                    } else {
                        known.join(", ")
                    }
                },
            })
    }

    fn name(self) -> &'static str {
        match self {
            Builtin::AvailableAmis => "available-amis",
            Builtin::FlexFirst => "flex-first",
        }
    }
}

/// Role-specific pre-instantiated component.
pub(crate) enum RolePre {
    Filter(filter::InstanceFilterPre<CallState>),
    Selector(selector::AmiSelectorPre<CallState>),
    Scorer(scorer::PriorityScorerPre<CallState>),
}

/// A compiled, checked component, shared through the cache.
pub(crate) struct WasmModule {
    pub(crate) name: String,
    pub(crate) sha256: String,
    pub(crate) role: Role,
    pub(crate) pre: RolePre,
}

#[derive(Clone)]
enum Kind {
    Builtin(Builtin),
    Wasm {
        module: Arc<WasmModule>,
        engine: Engine,
        epoch_tick: Duration,
    },
}

/// What a call left behind besides its answer: the component's log lines
/// and stdout/stderr, and how long it took.
#[derive(Debug, Clone, Default)]
pub struct CallReport {
    /// Lines the component sent through the `log` import (size-capped).
    pub logs: Vec<(LogLevel, String)>,
    /// `log` lines dropped because the cap was reached.
    pub logs_dropped: usize,
    /// What the component wrote to stdout/stderr: the first and last 8 KiB,
    /// with a line saying how much was dropped in between.
    pub guest_output: String,
    /// Bytes of stdout/stderr dropped because the per-call cap was reached.
    pub output_dropped: usize,
    /// Wall time of the call, instantiation included.
    pub elapsed: Duration,
}

/// A module ready to be called. Cheap to clone. Every call of a component
/// runs in a fresh store under the module's [`Limits`].
#[derive(Clone)]
pub struct LoadedModule {
    role: Role,
    kind: Kind,
    limits: Limits,
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModule")
            .field("name", &self.name())
            .field("role", &self.role)
            .field("limits", &self.limits)
            .finish()
    }
}

impl LoadedModule {
    pub(crate) fn builtin(role: Role, builtin: Builtin, limits: Limits) -> Self {
        LoadedModule {
            role,
            kind: Kind::Builtin(builtin),
            limits,
        }
    }

    pub(crate) fn wasm(
        module: Arc<WasmModule>,
        limits: Limits,
        engine: Engine,
        epoch_tick: Duration,
    ) -> Self {
        LoadedModule {
            role: module.role,
            kind: Kind::Wasm {
                module,
                engine,
                epoch_tick,
            },
            limits,
        }
    }

    /// The same module with other limits (per-module configuration).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits calls run under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The role it was loaded for.
    pub fn role(&self) -> Role {
        self.role
    }

    /// `builtin:NAME`, or the source it was loaded from.
    pub fn name(&self) -> String {
        match &self.kind {
            Kind::Builtin(b) => format!("builtin:{}", b.name()),
            Kind::Wasm { module, .. } => module.name.clone(),
        }
    }

    /// The pinned digest of a component (`None` for built-ins).
    pub fn sha256(&self) -> Option<&str> {
        match &self.kind {
            Kind::Builtin(_) => None,
            Kind::Wasm { module, .. } => Some(&module.sha256),
        }
    }

    /// Runs an instance filter: one verdict per candidate.
    pub fn filter(
        &self,
        ctx: &Context,
        candidates: &InstanceTypeSet,
    ) -> Result<Vec<Verdict>, CallError> {
        self.filter_reported(ctx, candidates).0
    }

    /// [`LoadedModule::filter`], also returning the call's logs and timing.
    pub fn filter_reported(
        &self,
        ctx: &Context,
        candidates: &InstanceTypeSet,
    ) -> (Result<Vec<Verdict>, CallError>, CallReport) {
        let (result, report) = match &self.kind {
            Kind::Builtin(_) => (
                Err(self.wrong_role(Role::InstanceFilter)),
                CallReport::default(),
            ),
            Kind::Wasm { module, .. } => match &module.pre {
                RolePre::Filter(pre) => self.run_wasm(|store| {
                    let instance = pre.instantiate(&mut *store)?;
                    instance.call_filter(&mut *store, &wit_context(ctx), candidates.wit())
                }),
                _ => (
                    Err(self.wrong_role(Role::InstanceFilter)),
                    CallReport::default(),
                ),
            },
        };
        let result = result
            .and_then(|r| r.map_err(rejected))
            .and_then(|verdicts| {
                let verdicts: Vec<Verdict> = verdicts
                    .into_iter()
                    .map(|v| match v {
                        wit::Verdict::Keep => Verdict::Keep,
                        wit::Verdict::Drop(reason) => Verdict::Drop(reason),
                    })
                    .collect();
                validate_verdicts(&verdicts, candidates.len())?;
                Ok(verdicts
                    .into_iter()
                    .map(|v| match v {
                        Verdict::Drop(reason) => Verdict::Drop(text::one_line_owned(
                            reason,
                            MAX_REASON_BYTES,
                            Keep::Head,
                        )),
                        keep => keep,
                    })
                    .collect())
            });
        (result, report)
    }

    /// Runs a priority scorer: one score per candidate, higher first.
    pub fn score(
        &self,
        ctx: &Context,
        candidates: &InstanceTypeSet,
    ) -> Result<Vec<i32>, CallError> {
        self.score_reported(ctx, candidates).0
    }

    /// [`LoadedModule::score`], also returning the call's logs and timing.
    pub fn score_reported(
        &self,
        ctx: &Context,
        candidates: &InstanceTypeSet,
    ) -> (Result<Vec<i32>, CallError>, CallReport) {
        let (result, report) = match &self.kind {
            Kind::Builtin(Builtin::FlexFirst) => {
                let start = Instant::now();
                let r = nodewright_flex_first::FlexFirst.score(ctx, &candidates.views());
                (
                    Ok(r),
                    CallReport {
                        elapsed: start.elapsed(),
                        ..CallReport::default()
                    },
                )
            }
            Kind::Builtin(_) => (
                Err(self.wrong_role(Role::PriorityScorer)),
                CallReport::default(),
            ),
            Kind::Wasm { module, .. } => match &module.pre {
                RolePre::Scorer(pre) => self.run_wasm(|store| {
                    let instance = pre.instantiate(&mut *store)?;
                    instance.call_score(&mut *store, &wit_context(ctx), candidates.wit())
                }),
                _ => (
                    Err(self.wrong_role(Role::PriorityScorer)),
                    CallReport::default(),
                ),
            },
        };
        let result = result.and_then(|r| r.map_err(rejected)).and_then(|scores| {
            if scores.len() != candidates.len() {
                return Err(CallError::MalformedOutput(format!(
                    "{} scores for {} candidates; return exactly one score per candidate",
                    scores.len(),
                    candidates.len()
                )));
            }
            Ok(scores)
        });
        (result, report)
    }

    /// Runs an AMI selector: candidate indices, best first.
    pub fn select(&self, ctx: &Context, candidates: &[Ami]) -> Result<Vec<u32>, CallError> {
        self.select_reported(ctx, candidates).0
    }

    /// [`LoadedModule::select`], also returning the call's logs and timing.
    pub fn select_reported(
        &self,
        ctx: &Context,
        candidates: &[Ami],
    ) -> (Result<Vec<u32>, CallError>, CallReport) {
        let (result, report) = match &self.kind {
            Kind::Builtin(Builtin::AvailableAmis) => {
                let start = Instant::now();
                let r = nodewright_available_amis::AvailableAmis.select(ctx, candidates);
                (
                    Ok(r),
                    CallReport {
                        elapsed: start.elapsed(),
                        ..CallReport::default()
                    },
                )
            }
            Kind::Builtin(_) => (
                Err(self.wrong_role(Role::AmiSelector)),
                CallReport::default(),
            ),
            Kind::Wasm { module, .. } => match &module.pre {
                RolePre::Selector(pre) => {
                    let amis: Vec<wit::Ami> = candidates.iter().map(wit_ami).collect();
                    self.run_wasm(|store| {
                        let instance = pre.instantiate(&mut *store)?;
                        instance.call_select(&mut *store, &wit_context(ctx), &amis)
                    })
                }
                _ => (
                    Err(self.wrong_role(Role::AmiSelector)),
                    CallReport::default(),
                ),
            },
        };
        let result = result.and_then(|r| r.map_err(rejected)).and_then(|order| {
            validate_selection(&order, candidates.len())?;
            Ok(order)
        });
        (result, report)
    }

    fn wrong_role(&self, called: Role) -> CallError {
        CallError::WrongRole {
            loaded: self.role,
            called,
        }
    }

    /// Runs `call` in a fresh store under the module's limits and turns
    /// wasmtime errors into [`CallError`]s.
    fn run_wasm<R>(
        &self,
        call: impl FnOnce(&mut Store<CallState>) -> wasmtime::Result<R>,
    ) -> (Result<R, CallError>, CallReport) {
        let Kind::Wasm {
            module,
            engine,
            epoch_tick,
        } = &self.kind
        else {
            return (
                Err(CallError::Setup("not a component".to_string())),
                CallReport::default(),
            );
        };
        let start = Instant::now();
        let mut store = Store::new(
            engine,
            CallState::new(self.limits.memory_bytes, self.limits.timeout),
        );
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(deadline_ticks(self.limits.timeout, *epoch_tick));
        store.epoch_deadline_trap();

        let outcome = call(&mut store);
        let elapsed = start.elapsed();
        let state = store.data();
        let (guest_output, output_dropped) = state.guest_output();
        let report = CallReport {
            logs: state
                .logs
                .iter()
                .map(|(l, m)| (log_level(*l), m.clone()))
                .collect(),
            logs_dropped: state.logs_dropped,
            guest_output,
            output_dropped,
            elapsed,
        };
        emit_logs(&module.name, &report);

        let result = outcome.map_err(|e| {
            if state.limiter.exceeded || e.downcast_ref::<MemoryLimitExceeded>().is_some() {
                CallError::MemoryExhausted {
                    limit_bytes: state.limiter.memory_limit,
                }
            } else if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt))
                || e.downcast_ref::<SleptPastDeadline>().is_some()
            {
                CallError::Timeout {
                    deadline: self.limits.timeout,
                }
            } else {
                CallError::Trap {
                    message: trap_message(&e),
                    guest_output: text::one_line(
                        report.guest_output.trim(),
                        text::MAX_OUTPUT_EXCERPT_BYTES,
                        Keep::Tail,
                    ),
                }
            }
        });
        (result, report)
    }
}

/// Most epoch ticks a deadline may be: wasmtime adds the delta to the
/// current epoch, which must not overflow (at a 5 ms tick this is still
/// longer than any call could run).
const MAX_DEADLINE_TICKS: u64 = u64::MAX / 2;

/// Epoch ticks for a deadline: rounded up, plus one because the current
/// tick is already partly over; saturates for absurdly long timeouts.
fn deadline_ticks(timeout: Duration, tick: Duration) -> u64 {
    let tick = tick.as_nanos().max(1);
    let ticks = timeout.as_nanos().div_ceil(tick);
    u64::try_from(ticks)
        .unwrap_or(u64::MAX)
        .saturating_add(1)
        .min(MAX_DEADLINE_TICKS)
}

/// A component's own error text, bounded and escaped.
fn rejected(message: String) -> CallError {
    CallError::Rejected(text::one_line_owned(
        message,
        text::MAX_ERROR_BYTES,
        Keep::Head,
    ))
}

/// What went wrong, without wasmtime's backtrace of `<wasm function N>`
/// frames (meaningless to the user, and kilobytes long).
fn trap_message(error: &wasmtime::Error) -> String {
    let message = match error.downcast_ref::<Trap>() {
        // A Rust component keeps its stack in linear memory, so running out
        // of stack shows as an out-of-bounds access.
        Some(Trap::MemoryOutOfBounds) => {
            format!(
                "{} (a stack overflow in the component shows as this too)",
                Trap::MemoryOutOfBounds
            )
        }
        Some(trap) => trap.to_string(),
        None => error.root_cause().to_string(),
    };
    let first = message.split("wasm backtrace:").next().unwrap_or_default();
    text::one_line(first.trim(), text::MAX_ERROR_BYTES, Keep::Head)
}

fn emit_logs(module: &str, report: &CallReport) {
    for (level, message) in &report.logs {
        match level {
            LogLevel::Debug => tracing::debug!(module, "{message}"),
            LogLevel::Info => tracing::info!(module, "{message}"),
            LogLevel::Warn => tracing::warn!(module, "{message}"),
            LogLevel::Error => tracing::error!(module, "{message}"),
        }
    }
    if report.logs_dropped > 0 {
        tracing::warn!(
            module,
            dropped = report.logs_dropped,
            "component log lines dropped (per-call cap)"
        );
    }
    if report.output_dropped > 0 {
        tracing::warn!(
            module,
            dropped = report.output_dropped,
            "component stdout/stderr: {} bytes dropped (per-call cap)",
            report.output_dropped
        );
    }
    if !report.guest_output.is_empty() {
        tracing::debug!(module, output = %report.guest_output, "component stdout/stderr");
    }
}

fn log_level(level: host_iface::Level) -> LogLevel {
    match level {
        host_iface::Level::Debug => LogLevel::Debug,
        host_iface::Level::Info => LogLevel::Info,
        host_iface::Level::Warn => LogLevel::Warn,
        host_iface::Level::Error => LogLevel::Error,
    }
}

fn wit_context(ctx: &Context) -> wit::Context {
    wit::Context {
        node_pool: ctx.node_pool.clone(),
        node_class: ctx.node_class.clone(),
        region: ctx.region.clone(),
        config: ctx.config.clone(),
        now: ctx.now,
    }
}

fn wit_ami(ami: &Ami) -> wit::Ami {
    wit::Ami {
        id: ami.id.clone(),
        name: ami.name.clone(),
        owner: ami.owner.clone(),
        state: match ami.state {
            AmiState::Available => wit::AmiState::Available,
            AmiState::Pending => wit::AmiState::Pending,
            AmiState::Invalid => wit::AmiState::Invalid,
            AmiState::Deregistered => wit::AmiState::Deregistered,
            AmiState::Transient => wit::AmiState::Transient,
            AmiState::Failed => wit::AmiState::Failed,
            AmiState::Error => wit::AmiState::Error,
            AmiState::Disabled => wit::AmiState::Disabled,
        },
        creation_time: ami.creation_time,
        deprecation_time: ami.deprecation_time,
        architecture: architecture(ami.architecture),
        variant: ami.variant.clone(),
        tags: ami
            .tags
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        source: ami.source.clone(),
    }
}

fn validate_verdicts(verdicts: &[Verdict], candidates: usize) -> Result<(), CallError> {
    if verdicts.len() != candidates {
        return Err(CallError::MalformedOutput(format!(
            "{} verdicts for {candidates} candidates; return exactly one verdict per candidate",
            verdicts.len()
        )));
    }
    for (i, v) in verdicts.iter().enumerate() {
        if let Verdict::Drop(reason) = v
            && reason.len() > MAX_REASON_BYTES
        {
            return Err(CallError::MalformedOutput(format!(
                "drop reason for candidate {i} is {} bytes; the limit is {MAX_REASON_BYTES}",
                reason.len()
            )));
        }
    }
    Ok(())
}

fn validate_selection(order: &[u32], candidates: usize) -> Result<(), CallError> {
    let mut seen = vec![false; candidates];
    for &i in order {
        let slot = usize::try_from(i)
            .ok()
            .and_then(|i| seen.get_mut(i))
            .ok_or_else(|| {
                CallError::MalformedOutput(format!(
                    "index {i} is out of range for {candidates} candidates"
                ))
            })?;
        if *slot {
            return Err(CallError::MalformedOutput(format!(
                "index {i} appears more than once"
            )));
        }
        *slot = true;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_validation() {
        assert!(validate_selection(&[2, 0], 3).is_ok());
        assert!(
            matches!(validate_selection(&[3], 3), Err(CallError::MalformedOutput(m)) if m.contains("out of range"))
        );
        assert!(
            matches!(validate_selection(&[1, 1], 3), Err(CallError::MalformedOutput(m)) if m.contains("more than once"))
        );
    }

    #[test]
    fn verdict_validation() {
        assert!(validate_verdicts(&[Verdict::Keep, Verdict::drop("t3")], 2).is_ok());
        assert!(validate_verdicts(&[Verdict::Keep], 2).is_err());
        assert!(validate_verdicts(&[Verdict::drop("x".repeat(MAX_REASON_BYTES + 1))], 1).is_err());
    }

    #[test]
    fn huge_deadlines_saturate() {
        assert_eq!(
            deadline_ticks(Duration::MAX, Duration::from_millis(5)),
            MAX_DEADLINE_TICKS
        );
        assert_eq!(
            deadline_ticks(
                Duration::from_secs(100_000_000_000_000 * 3600),
                Duration::from_nanos(1)
            ),
            MAX_DEADLINE_TICKS
        );
    }

    #[test]
    fn deadline_rounds_up() {
        assert_eq!(
            deadline_ticks(Duration::from_millis(100), Duration::from_millis(5)),
            21
        );
        assert_eq!(
            deadline_ticks(Duration::from_millis(1), Duration::from_millis(5)),
            2
        );
    }
}
