//! The controller's second line of defence around extension work: every
//! blocking evaluation runs on tokio's blocking pool under an outer time
//! bound derived from the modules' own deadlines. The sandbox already ends
//! each call at its deadline; this bound holds even if something below it
//! (a download, a compile, a host bug) does not.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinError;

use super::Extensions;
use crate::apis::{EC2NodeClass, ModuleSource};

/// Allowance per non-built-in module for compiling it once it is fetched.
const COMPILE_ALLOWANCE: Duration = Duration::from_secs(30);
/// Allowance for the work around the calls (resolving instance types,
/// building the candidate tables, reading ConfigMaps).
const SLACK: Duration = Duration::from_secs(10);
/// Used when the class's extensions are invalid (nothing will be called).
const INVALID_BOUND: Duration = SLACK;

impl Extensions {
    /// The longest `evaluations` runs of `class`'s extensions may take
    /// (one per NodePool for filters and scorers, one for the AMI selector):
    /// every module's deadline per run, a download and a compile per module
    /// that is not built in, plus slack.
    pub fn time_bound(&self, class: &EC2NodeClass, evaluations: usize) -> Duration {
        let Ok(effective) = class.spec.effective_extensions() else {
            return INVALID_BOUND;
        };
        let config = self.host.config();
        let runs = u32::try_from(evaluations.max(1)).unwrap_or(u32::MAX);
        let modules = effective
            .instance_filters
            .iter()
            .chain(effective.priority_scorers.iter().map(|s| &s.module))
            .chain(std::iter::once(&effective.ami_selector));
        let mut bound = SLACK;
        for module in modules {
            bound = bound.saturating_add(module.timeout.saturating_mul(runs));
            if !matches!(module.source, ModuleSource::Builtin(_)) {
                bound = bound
                    .saturating_add(config.download_timeout)
                    .saturating_add(config.download_connect_timeout)
                    .saturating_add(COMPILE_ALLOWANCE);
            }
        }
        bound
    }
}

/// Runs `work` on the blocking pool and waits at most `bound` for it. Past
/// the bound the caller gets `on_timeout(message)` at once; the work itself
/// cannot be stopped and finishes in the background (its result is
/// discarded). A panic in `work` comes back as the `JoinError`.
pub fn run_blocking<T, W, F>(
    bound: Duration,
    work: W,
    on_timeout: F,
) -> impl Future<Output = Result<T, JoinError>>
where
    T: Send + 'static,
    W: FnOnce() -> T + Send + 'static,
    F: FnOnce(String) -> T,
{
    let task = tokio::task::spawn_blocking(work);
    async move {
        match tokio::time::timeout(bound, task).await {
            Ok(done) => done,
            Err(_) => {
                let message = format!(
                    "extension modules did not finish within {bound:?} (the sum of their deadlines plus download and compile allowances); nothing they decide is offered until they do"
                );
                tracing::error!(bound = ?bound, "{message}");
                Ok(on_timeout(message))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_past_the_bound_gives_the_fallback() {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let result = run_blocking(
            Duration::from_millis(10),
            move || {
                // Held until the test lets go, long after the bound.
                let _ = wait.recv();
                "finished"
            },
            |_message| "gave up",
        )
        .await
        .unwrap();
        assert_eq!(result, "gave up");
        release.send(()).unwrap();
    }

    #[tokio::test]
    async fn work_within_the_bound_returns_its_result() {
        let result = run_blocking(Duration::from_secs(60), || 42, |_| 0)
            .await
            .unwrap();
        assert_eq!(result, 42);
    }
}
