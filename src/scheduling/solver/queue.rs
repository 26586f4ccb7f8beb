//! The order pods are tried in and the retry loop around them
//! (Karpenter's `queue.go` and `Solve`).

use std::collections::VecDeque;

use crate::scheduling::input::{PodError, SchedulingResult};

use super::State;

impl State<'_> {
    /// Karpenter's queue (`queue.go`, `Solve`): pods in CPU, then memory,
    /// descending order; a pod that cannot be placed even with every
    /// preference relaxed goes back to the end of the queue with its
    /// preferences restored, and the solve stops once a whole pass over the
    /// queue places nothing. A pod that needs another pod of the batch placed
    /// first (pod affinity, a spread that must alternate) thus gets another
    /// chance later in the same solve.
    pub(super) fn run(mut self) -> SchedulingResult {
        let mut order: Vec<usize> = (0..self.pods.len()).collect();
        order.sort_by(|a, b| {
            let (ra, rb) = (&self.pods[*a].requests, &self.pods[*b].requests);
            rb[0].cmp(&ra[0]).then(rb[1].cmp(&ra[1])).then(a.cmp(b))
        });
        let mut queue: VecDeque<usize> = order.iter().copied().collect();
        // Queue length right after each pod was last pushed back: popping it
        // at that same length means a full pass made no progress.
        let mut pushed_at: Vec<Option<usize>> = vec![None; self.pods.len()];
        let mut failures: Vec<Option<String>> = vec![None; self.pods.len()];
        while let Some(&pi) = queue.front() {
            if pushed_at[pi] == Some(queue.len()) {
                break;
            }
            queue.pop_front();
            match self.try_schedule(pi) {
                Ok(()) => failures[pi] = None,
                Err(reason) => {
                    failures[pi] = Some(reason);
                    queue.push_back(pi);
                    pushed_at[pi] = Some(queue.len());
                }
            }
        }
        for pi in order {
            if let Some(reason) = failures[pi].take() {
                self.errors.push(PodError {
                    pod: self.pods[pi].reference.clone(),
                    reason,
                });
            }
        }
        self.finish()
    }

    /// Places one pod, relaxing its preferences one step at a time until it
    /// fits or nothing is left to relax (Karpenter's `trySchedule`).
    pub(super) fn try_schedule(&mut self, pi: usize) -> Result<(), String> {
        let mut st = self.initial_state(pi);
        loop {
            let cur = self.current(pi, &st);
            match self.place(pi, &cur) {
                Ok(()) => return Ok(()),
                Err(reason) => {
                    if !self.relax(pi, &mut st) {
                        return Err(reason);
                    }
                }
            }
        }
    }
}
