//! Virtual time inside the sandbox. Components see a monotonic clock that
//! starts at zero and moves only when they sleep; a sleep (a
//! `wasi:clocks/monotonic-clock` subscription) resolves at once and is
//! charged against the call's deadline instead of blocking the host thread
//! on the real clock. A sleep that would end past the deadline ends the call
//! with the deadline error.

use std::time::{Duration, Instant};

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};

use crate::sandbox::CallState;

/// One call's virtual monotonic clock and its deadline.
#[derive(Debug)]
pub(crate) struct VirtualClock {
    started: Instant,
    deadline: Duration,
    slept: Duration,
}

impl VirtualClock {
    pub(crate) fn new(deadline: Duration) -> Self {
        VirtualClock {
            started: Instant::now(),
            deadline,
            slept: Duration::ZERO,
        }
    }

    /// Charges a sleep of `duration`: real time spent so far, plus earlier
    /// sleeps, plus this one must stay within the deadline.
    fn charge(&mut self, duration: Duration) -> wasmtime::Result<()> {
        let spent = self.started.elapsed().saturating_add(self.slept);
        if spent.saturating_add(duration) > self.deadline {
            return Err(wasmtime::Error::new(SleptPastDeadline));
        }
        self.slept = self.slept.saturating_add(duration);
        Ok(())
    }

    fn now_nanos(&self) -> u64 {
        u64::try_from(self.slept.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The trap raised when a component sleeps past its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the component slept past its deadline")]
pub(crate) struct SleptPastDeadline;

/// A subscription that is ready at once: the time it waited for has
/// already been charged.
struct Elapsed;

#[wasmtime_wasi::async_trait]
impl Pollable for Elapsed {
    async fn ready(&mut self) {}
}

/// What the clock's host functions see of the store.
pub(crate) struct ClockView<'a> {
    clock: &'a mut VirtualClock,
    table: &'a mut ResourceTable,
}

impl ClockView<'_> {
    fn elapsed_after(&mut self, duration: Duration) -> wasmtime::Result<Resource<DynPollable>> {
        self.clock.charge(duration)?;
        let resource = self.table.push(Elapsed)?;
        subscribe(self.table, resource)
    }
}

impl monotonic_clock::Host for ClockView<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        Ok(self.clock.now_nanos())
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        Ok(1)
    }

    fn subscribe_instant(
        &mut self,
        when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        let wait = when.saturating_sub(self.clock.now_nanos());
        self.elapsed_after(Duration::from_nanos(wait))
    }

    fn subscribe_duration(
        &mut self,
        duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.elapsed_after(Duration::from_nanos(duration))
    }
}

struct VirtualClocks;

impl HasData for VirtualClocks {
    type Data<'a> = ClockView<'a>;
}

/// Replaces the real `wasi:clocks/monotonic-clock` in `linker` (added by
/// `wasmtime_wasi`) with the virtual one.
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let added = monotonic_clock::add_to_linker::<CallState, VirtualClocks>(linker, |state| {
        let (clock, table) = state.clock_and_table();
        ClockView { clock, table }
    });
    linker.allow_shadowing(false);
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_are_charged_against_the_deadline() {
        let mut clock = VirtualClock::new(Duration::from_secs(3600));
        clock.charge(Duration::from_secs(60)).unwrap();
        assert_eq!(clock.now_nanos(), 60_000_000_000);
        assert!(clock.charge(Duration::from_secs(3600)).is_err());
        assert!(clock.charge(Duration::MAX).is_err());
        assert_eq!(clock.now_nanos(), 60_000_000_000);
    }
}
