//! Collects pending-pod triggers into one provisioning round: a round starts
//! at the first trigger and ends when no trigger came for the idle window, or
//! when the maximum window has passed since the first (Karpenter's
//! `BATCH_IDLE_DURATION` 1s / `BATCH_MAX_DURATION` 10s), so a burst of pods is
//! scheduled together rather than one NodeClaim at a time.

use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, sleep, sleep_until};

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

    /// Waits for a trigger, then for the batch it starts to close.
    pub async fn wait(&self) {
        self.notify.notified().await;
        let deadline = Instant::now() + self.windows.max;
        loop {
            tokio::select! {
                _ = self.notify.notified() => {
                    if Instant::now() >= deadline {
                        return;
                    }
                }
                _ = sleep(self.windows.idle) => return,
                _ = sleep_until(deadline) => return,
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
        tokio::time::timeout(Duration::from_secs(5), batcher.wait())
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
                sleep(Duration::from_millis(5)).await;
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
        let waited = tokio::time::timeout(Duration::from_millis(100), batcher.wait()).await;
        assert!(waited.is_err(), "a batch closed with nothing to provision");
    }
}
