//! Collects pending-pod triggers into one provisioning round: a round starts
//! at the first trigger and ends when no trigger came for the idle window, or
//! when the maximum window has passed since the first (Karpenter's
//! `BATCH_IDLE_DURATION` 1s / `BATCH_MAX_DURATION` 10s), so a burst of pods is
//! scheduled together rather than one NodeClaim at a time. Each time
//! triggers pause for half the idle window, the waiter is told, so it can
//! start work the closing batch will most likely want.

use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

/// The batch windows.
#[derive(Debug, Clone, Copy)]
pub struct BatchWindows {
    /// A round ends after this long without a new trigger.
    pub idle: Duration,
    /// A round ends at the latest this long after its first trigger.
    pub max: Duration,
}

impl Default for BatchWindows {
    fn default() -> Self {
        BatchWindows {
            idle: Duration::from_secs(1),
            max: Duration::from_secs(10),
        }
    }
}

/// Triggers in, closed batches out.
#[derive(Debug, Default)]
pub struct Batcher {
    windows: BatchWindows,
    notify: Notify,
}

impl Batcher {
    /// A batcher with `windows`.
    pub fn new(windows: BatchWindows) -> Self {
        Batcher {
            windows,
            notify: Notify::new(),
        }
    }

    /// Something changed that may need provisioning.
    pub fn trigger(&self) {
        self.notify.notify_one();
    }

    /// Waits for a trigger, then for the batch it starts to close; calls
    /// `quiet` once per pause in the triggers that lasts half the idle
    /// window (not when the pause closes the batch first).
    pub async fn wait(&self, mut quiet: impl FnMut()) {
        self.notify.notified().await;
        let deadline = Instant::now() + self.windows.max;
        loop {
            let pause = Instant::now();
            let mut told = false;
            loop {
                tokio::select! {
                    _ = self.notify.notified() => {
                        if Instant::now() >= deadline {
                            return;
                        }
                        break;
                    }
                    _ = sleep_until(pause + self.windows.idle / 2), if !told => {
                        told = true;
                        quiet();
                    }
                    _ = sleep_until(pause + self.windows.idle) => return,
                    _ = sleep_until(deadline) => return,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Fails the test instead of hanging when a batch never closes.
    async fn closes(batcher: &Batcher) {
        tokio::time::timeout(Duration::from_secs(5), batcher.wait(|| {}))
            .await
            .expect("the batch closed");
    }

    #[tokio::test]
    async fn a_batch_closes_once_triggers_stop_for_the_idle_window() {
        let batcher = Batcher::new(BatchWindows {
            idle: Duration::from_millis(20),
            max: Duration::from_secs(3600),
        });
        batcher.trigger();
        closes(&batcher).await;
    }

    #[tokio::test]
    async fn steady_triggers_close_the_batch_at_the_max_window() {
        // Triggers every 5 ms never leave a 1-hour idle window: only the max
        // window can close this batch.
        let batcher = Arc::new(Batcher::new(BatchWindows {
            idle: Duration::from_secs(3600),
            max: Duration::from_millis(100),
        }));
        let feeder = batcher.clone();
        let feeding = tokio::spawn(async move {
            loop {
                feeder.trigger();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        closes(&batcher).await;
        feeding.abort();
    }

    #[tokio::test]
    async fn no_batch_closes_without_a_trigger() {
        let batcher = Batcher::new(BatchWindows {
            idle: Duration::from_millis(1),
            max: Duration::from_millis(1),
        });
        let waited = tokio::time::timeout(Duration::from_millis(100), batcher.wait(|| {})).await;
        assert!(waited.is_err(), "a batch closed with nothing to provision");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_of_half_the_idle_window_is_told_once() {
        let batcher = Arc::new(Batcher::new(BatchWindows {
            idle: Duration::from_millis(100),
            max: Duration::from_secs(3600),
        }));
        let feeder = batcher.clone();
        // Triggers 10 ms apart, then a 60 ms pause (told), then 10 ms apart
        // again; the batch closes 100 ms after the last.
        let feeding = tokio::spawn(async move {
            for pause in [10, 10, 60, 10, 10] {
                feeder.trigger();
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            feeder.trigger();
        });
        let mut told = Vec::new();
        let start = Instant::now();
        batcher.wait(|| told.push(start.elapsed())).await;
        feeding.await.expect("the feeder ran");
        // Told in the 60 ms pause (at 70 ms) and once in the final pause
        // (50 ms after the last trigger at 100 ms), and nowhere else.
        assert_eq!(
            told,
            [Duration::from_millis(70), Duration::from_millis(150)],
            "told at {told:?}"
        );
        assert_eq!(start.elapsed(), Duration::from_millis(200));
    }
}
