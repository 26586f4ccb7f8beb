//! How long to wait after failed calls, and when an outage starts and ends.

use std::time::Duration;

/// Exponential backoff between attempts after errors, reset by a success.
///
/// The n-th consecutive failure asks for a wait of `initial × 2ⁿ⁻¹`, capped
/// at `max`: by default 1 s, 2 s, 4 s, … up to 1 min. There is no jitter, so
/// the delays are deterministic; one controller polls one queue, so there
/// is no herd of clients to spread out.
///
/// It also tells an outage's bounds, so that a caller can log once per
/// outage rather than once per call: [`failure`](Self::failure) returns
/// [`Failure::first`] on the first failure after a success, and
/// [`success`](Self::success) returns how many failures the outage it ends
/// counted.
///
/// ```
/// use std::time::Duration;
/// use interruption_queue::Backoff;
///
/// let mut backoff = Backoff::default();
/// let failure = backoff.failure();
/// assert!(failure.first);
/// assert_eq!(failure.delay, Duration::from_secs(1));
/// assert_eq!(backoff.failure().delay, Duration::from_secs(2));
/// assert_eq!(backoff.success(), Some(2));
/// assert_eq!(backoff.failure().delay, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    failures: u32,
}

/// What a caller should do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// How long to wait before the next attempt.
    pub delay: Duration,
    /// Whether this failure starts an outage (the first since a success or
    /// since the start): the one to log.
    pub first: bool,
    /// Consecutive failures so far, this one included.
    pub failures: u32,
}

impl Backoff {
    /// The wait after a first failure: 1 s.
    pub const INITIAL: Duration = Duration::from_secs(1);
    /// The longest wait: 1 min.
    pub const MAX: Duration = Duration::from_secs(60);

    /// A backoff from `initial` doubling up to `max`; a `max` below
    /// `initial` is raised to it.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max: max.max(initial),
            failures: 0,
        }
    }

    /// Records a failure and returns the wait before the next attempt.
    pub fn failure(&mut self) -> Failure {
        self.failures = self.failures.saturating_add(1);
        Failure {
            delay: self.delay(),
            first: self.failures == 1,
            failures: self.failures,
        }
    }

    /// Records a success, which resets the backoff; returns the number of
    /// consecutive failures it ends, `None` when there were none.
    pub fn success(&mut self) -> Option<u32> {
        let failures = std::mem::take(&mut self.failures);
        (failures > 0).then_some(failures)
    }

    /// Consecutive failures since the last success; 0 when healthy.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The wait for the current number of failures; zero when healthy.
    pub fn delay(&self) -> Duration {
        let Some(doublings) = self.failures.checked_sub(1) else {
            return Duration::ZERO;
        };
        let factor = 1u32.checked_shl(doublings).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

impl Default for Backoff {
    /// From [`Backoff::INITIAL`] (1 s) to [`Backoff::MAX`] (1 min).
    fn default() -> Self {
        Self::new(Self::INITIAL, Self::MAX)
    }
}
