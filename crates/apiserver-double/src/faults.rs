//! Fault injection: a plan of failures the double answers some requests
//! with, so controllers can be tested against a server that misbehaves the
//! way a loaded kube-apiserver does — errors per verb (`500
//! InternalError`, `409 Conflict` on writes, `429 TooManyRequests` with
//! `Retry-After`, `504 Timeout` after the write was applied), watches that
//! end early or expire (`410 Gone`, reason `Expired`, so the client must
//! list again), and slow responses.
//!
//! Every decision is drawn from one SplitMix64 generator seeded by the plan,
//! so one sequence of requests meets the same faults on every run; requests
//! running concurrently draw in the order they arrive. Faults apply only to
//! the requests the plan targets ([`Target`]), so a test's own clients and
//! the sandbox's stand-ins can stay fault-free while the code under test
//! does not. Every injected fault is counted ([`FaultCounts`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use super::error::ApiError;
use super::path::Route;

/// A request verb, as RBAC names it (`deletecollection` counts as `delete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
}

impl Verb {
    /// Every verb.
    pub const ALL: [Verb; 7] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
    ];

    /// The verb of an RBAC name; `None` for other names.
    pub fn from_rbac(name: &str) -> Option<Verb> {
        Some(match name {
            "get" => Verb::Get,
            "list" => Verb::List,
            "watch" => Verb::Watch,
            "create" => Verb::Create,
            "update" => Verb::Update,
            "patch" => Verb::Patch,
            "delete" | "deletecollection" => Verb::Delete,
            _ => return None,
        })
    }

    /// Whether the verb changes stored objects.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
        )
    }

    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error a faulted request is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// `500 InternalError`, before the request runs; any verb.
    Internal,
    /// `409 Conflict` ("the object has been modified"), before the write
    /// runs; update, patch and delete only.
    Conflict,
    /// `429 TooManyRequests` with a `Retry-After` header and
    /// `details.retryAfterSeconds`, before the request runs; any verb.
    TooManyRequests,
    /// `504 Timeout` *after* the write was applied, as when the server
    /// commits but the answer is lost: the caller cannot tell it happened;
    /// create, update, patch and delete only.
    Timeout,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 4] = [
        ErrorKind::Internal,
        ErrorKind::Conflict,
        ErrorKind::TooManyRequests,
        ErrorKind::Timeout,
    ];

    /// Whether a request of `verb` can meet this error.
    pub fn applies_to(self, verb: Verb) -> bool {
        match self {
            ErrorKind::Internal | ErrorKind::TooManyRequests => true,
            ErrorKind::Conflict => matches!(verb, Verb::Update | Verb::Patch | Verb::Delete),
            ErrorKind::Timeout => verb.writes(),
        }
    }

    /// Whether the request runs before the error is answered.
    pub fn after_the_request(self) -> bool {
        self == ErrorKind::Timeout
    }
}

/// How a faulted watch ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WatchEnd {
    /// The stream just ends, as when a connection drops; the client
    /// watches again from the last resourceVersion it saw.
    Drop,
    /// An `ERROR` event with a `410 Gone` Status (reason `Expired`), then
    /// the end: the client must list again.
    Expire,
}

/// Which requests the plan applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Requests carrying a token the double issued (a ServiceAccount's,
    /// [`crate::ApiServer::service_account_token`]); requests without one —
    /// a test's admin client, the sandbox's stand-ins, `kubectl` — are left
    /// alone.
    ServiceAccounts,
    /// Every resource request.
    Everyone,
}

/// A fault plan. The default injects nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Faults {
    /// Seeds every decision.
    pub seed: u64,
    /// The share of requests (0 to 1) of each verb answered with an error.
    pub error_rates: BTreeMap<Verb, f64>,
    /// The errors drawn from, uniformly among those that apply to the
    /// request's verb; a verb none applies to gets no error.
    pub errors: Vec<ErrorKind>,
    /// What a 429 asks the client to wait, in seconds.
    pub retry_after_seconds: u32,
    /// The share of watch events after which the watch is dropped.
    pub watch_drop_rate: f64,
    /// The share of watch events after which the watch expires (410).
    pub watch_expire_rate: f64,
    /// Every watch ends this way after this many events.
    pub watch_end_after: Option<(u32, WatchEnd)>,
    /// Added before every targeted response (watches: before the stream).
    pub delay: Duration,
    /// Up to this much more, uniformly drawn, on top of `delay`.
    pub jitter: Duration,
    /// Which requests the plan applies to.
    pub target: Target,
    /// The resources (plural names, as `pods`) whose requests meet faults;
    /// empty: every resource.
    pub resources: BTreeSet<String>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            seed: 0,
            error_rates: BTreeMap::new(),
            errors: ErrorKind::ALL.to_vec(),
            retry_after_seconds: 1,
            watch_drop_rate: 0.0,
            watch_expire_rate: 0.0,
            watch_end_after: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            target: Target::ServiceAccounts,
            resources: BTreeSet::new(),
        }
    }
}

impl Faults {
    /// A plan that injects nothing yet, drawing from `seed`.
    pub fn seeded(seed: u64) -> Self {
        Faults {
            seed,
            ..Faults::default()
        }
    }

    /// Answers `rate` (0 to 1) of the requests of `verb` with an error.
    pub fn error_rate(mut self, verb: Verb, rate: f64) -> Self {
        self.error_rates.insert(verb, rate.clamp(0.0, 1.0));
        self
    }

    /// Answers `rate` of the requests of every verb with an error.
    pub fn error_rate_all(self, rate: f64) -> Self {
        Verb::ALL
            .into_iter()
            .fold(self, |faults, verb| faults.error_rate(verb, rate))
    }

    /// The errors drawn from (default: every kind).
    pub fn errors(mut self, kinds: impl IntoIterator<Item = ErrorKind>) -> Self {
        self.errors = kinds.into_iter().collect();
        self
    }

    /// What a 429 asks the client to wait (default 1 s).
    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after_seconds = seconds;
        self
    }

    /// Drops a watch after `rate` of its events.
    pub fn drop_watches(mut self, rate: f64) -> Self {
        self.watch_drop_rate = rate.clamp(0.0, 1.0);
        self
    }

    /// Expires a watch (410 Gone) after `rate` of its events.
    pub fn expire_watches(mut self, rate: f64) -> Self {
        self.watch_expire_rate = rate.clamp(0.0, 1.0);
        self
    }

    /// Ends every watch `how` after `events` events.
    pub fn end_watches_after(mut self, events: u32, how: WatchEnd) -> Self {
        self.watch_end_after = Some((events, how));
        self
    }

    /// Delays every targeted response by `delay` plus up to `jitter`.
    pub fn delay(mut self, delay: Duration, jitter: Duration) -> Self {
        self.delay = delay;
        self.jitter = jitter;
        self
    }

    /// Which requests the plan applies to (default: ServiceAccounts').
    pub fn target(mut self, target: Target) -> Self {
        self.target = target;
        self
    }

    /// Limits the faults to requests on these resources (plural names, as
    /// `pods`): to starve one of a controller's caches, say.
    pub fn only_resources<S: Into<String>>(mut self, plurals: impl IntoIterator<Item = S>) -> Self {
        self.resources = plurals.into_iter().map(Into::into).collect();
        self
    }

    fn error_rate_of(&self, verb: Verb) -> f64 {
        self.error_rates.get(&verb).copied().unwrap_or(0.0)
    }
}

/// What was injected since the server started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Errors answered, by verb and kind.
    pub errors: BTreeMap<(Verb, ErrorKind), u64>,
    /// Watches ended early without a word.
    pub watches_dropped: u64,
    /// Watches ended with `410 Gone`.
    pub watches_expired: u64,
    /// Responses delayed.
    pub delayed: u64,
}

impl FaultCounts {
    /// Errors of `kind` answered, every verb.
    pub fn errors_of(&self, kind: ErrorKind) -> u64 {
        self.errors
            .iter()
            .filter(|((_, k), _)| *k == kind)
            .map(|(_, n)| n)
            .sum()
    }

    /// Errors answered to requests of `verb`.
    pub fn errors_on(&self, verb: Verb) -> u64 {
        self.errors
            .iter()
            .filter(|((v, _), _)| *v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every error answered.
    pub fn total_errors(&self) -> u64 {
        self.errors.values().sum()
    }
}

impl fmt::Display for FaultCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<String> = ErrorKind::ALL
            .iter()
            .map(|k| format!("{k:?} {}", self.errors_of(*k)))
            .collect();
        write!(
            f,
            "{} errors ({}), {} watches dropped, {} expired, {} responses delayed",
            self.total_errors(),
            kinds.join(", "),
            self.watches_dropped,
            self.watches_expired,
            self.delayed
        )
    }
}

/// SplitMix64: small, fast and good enough to draw faults from.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`; draws nothing when `p` is 0, so a plan
    /// without a fault keeps the sequence of the others unchanged.
    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

/// What happens to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision {
    pub delay: Duration,
    pub error: Option<ErrorKind>,
}

/// The plan in force, its generator and its counts.
#[derive(Debug)]
pub(crate) struct Injector {
    plan: Faults,
    rng: SplitMix64,
    counts: FaultCounts,
}

impl Default for Injector {
    fn default() -> Self {
        Injector::new(Faults::default())
    }
}

impl Injector {
    pub fn new(plan: Faults) -> Self {
        Injector {
            rng: SplitMix64(plan.seed),
            plan,
            counts: FaultCounts::default(),
        }
    }

    /// Puts `plan` in force, its generator restarted from its seed; the
    /// counts go on.
    pub fn set(&mut self, plan: Faults) {
        self.rng = SplitMix64(plan.seed);
        self.plan = plan;
    }

    pub fn counts(&self) -> FaultCounts {
        self.counts.clone()
    }

    /// Whether a request (with or without an issued token) on the resource
    /// `plural` is targeted.
    pub fn targets(&self, with_token: bool, plural: &str) -> bool {
        let who = match self.plan.target {
            Target::ServiceAccounts => with_token,
            Target::Everyone => true,
        };
        who && (self.plan.resources.is_empty() || self.plan.resources.contains(plural))
    }

    /// Draws the fate of one targeted request of `verb` and counts it.
    pub fn decide(&mut self, verb: Verb) -> Decision {
        let mut delay = self.plan.delay;
        if !self.plan.jitter.is_zero() {
            delay += self.plan.jitter.mul_f64(self.rng.unit());
        }
        if !delay.is_zero() {
            self.counts.delayed += 1;
        }
        let mut error = None;
        if self.rng.chance(self.plan.error_rate_of(verb)) {
            let kinds: Vec<ErrorKind> = self
                .plan
                .errors
                .iter()
                .copied()
                .filter(|k| k.applies_to(verb))
                .collect();
            if !kinds.is_empty() {
                let pick = (self.rng.next() % kinds.len() as u64) as usize;
                let kind = kinds[pick];
                *self.counts.errors.entry((verb, kind)).or_default() += 1;
                error = Some(kind);
            }
        }
        Decision { delay, error }
    }

    /// The faults of one new watch, with a generator of its own seeded from
    /// this one.
    pub fn watch(&mut self) -> WatchFaults {
        WatchFaults {
            rng: SplitMix64(self.rng.next()),
            drop_rate: self.plan.watch_drop_rate,
            expire_rate: self.plan.watch_expire_rate,
            end_after: self.plan.watch_end_after,
            events: 0,
        }
    }

    /// Counts a watch ended by its faults.
    pub fn ended(&mut self, how: WatchEnd) {
        match how {
            WatchEnd::Drop => self.counts.watches_dropped += 1,
            WatchEnd::Expire => self.counts.watches_expired += 1,
        }
    }

    /// The error a request of `verb` on `route` is answered with.
    pub fn error(&self, kind: ErrorKind, route: &Route) -> ApiError {
        let name = route.name.as_deref().unwrap_or_default();
        match kind {
            ErrorKind::Internal => ApiError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                reason: "InternalError",
                message: "Internal error occurred: injected fault".to_string(),
                details: Some(json!({"causes": [{"message": "injected fault"}]})),
            },
            ErrorKind::Conflict => ApiError::modified(&route.def, name),
            ErrorKind::TooManyRequests => ApiError::too_many_requests(
                "Too many requests, please try again later.",
                self.plan.retry_after_seconds,
                Vec::new(),
            ),
            ErrorKind::Timeout => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                "Timeout: request did not complete within the allotted timeout",
            ),
        }
    }
}

/// The faults of one watch: after each event it sends, whether it ends.
#[derive(Debug)]
pub(crate) struct WatchFaults {
    rng: SplitMix64,
    drop_rate: f64,
    expire_rate: f64,
    end_after: Option<(u32, WatchEnd)>,
    events: u32,
}

impl WatchFaults {
    /// Whether the watch ends after the event just sent, and how.
    pub fn after_event(&mut self) -> Option<WatchEnd> {
        self.events = self.events.saturating_add(1);
        if let Some((after, how)) = self.end_after
            && self.events >= after
        {
            return Some(how);
        }
        if self.rng.chance(self.expire_rate) {
            return Some(WatchEnd::Expire);
        }
        if self.rng.chance(self.drop_rate) {
            return Some(WatchEnd::Drop);
        }
        None
    }

    /// Whether any fault can end this watch.
    pub fn active(&self) -> bool {
        self.end_after.is_some() || self.drop_rate > 0.0 || self.expire_rate > 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_faults() {
        let plan = Faults::seeded(7)
            .error_rate_all(0.3)
            .delay(Duration::from_millis(5), Duration::from_millis(10));
        let draw = |plan: &Faults| {
            let mut injector = Injector::new(plan.clone());
            (0..500)
                .map(|i| injector.decide(Verb::ALL[i % Verb::ALL.len()]))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(&plan), draw(&plan));
        assert_ne!(draw(&plan), draw(&Faults { seed: 8, ..plan }));
    }

    #[test]
    fn rates_are_kept_per_verb() {
        let mut injector = Injector::new(
            Faults::seeded(1)
                .error_rate(Verb::Patch, 0.5)
                .errors([ErrorKind::Internal]),
        );
        for _ in 0..2000 {
            injector.decide(Verb::Patch);
            assert_eq!(injector.decide(Verb::Get).error, None);
        }
        let patched = injector.counts().errors_on(Verb::Patch);
        assert!((800..1200).contains(&patched), "{patched} of 2000");
        assert_eq!(injector.counts().errors_on(Verb::Get), 0);
    }

    #[test]
    fn kinds_that_do_not_apply_to_a_verb_are_not_drawn() {
        let mut injector = Injector::new(
            Faults::seeded(3)
                .error_rate_all(1.0)
                .errors([ErrorKind::Conflict, ErrorKind::Timeout]),
        );
        for verb in [Verb::Get, Verb::List, Verb::Watch] {
            assert_eq!(injector.decide(verb).error, None, "{verb}");
        }
        assert_eq!(
            injector.decide(Verb::Create).error,
            Some(ErrorKind::Timeout)
        );
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..50 {
            seen.extend(injector.decide(Verb::Update).error);
        }
        assert_eq!(seen.len(), 2, "both kinds drawn for updates: {seen:?}");
    }

    #[test]
    fn a_plan_without_faults_injects_nothing() {
        let mut injector = Injector::default();
        for verb in Verb::ALL {
            let decision = injector.decide(verb);
            assert_eq!(decision.error, None);
            assert!(decision.delay.is_zero());
        }
        assert!(!injector.watch().active());
        assert_eq!(injector.counts(), FaultCounts::default());
    }

    #[test]
    fn watches_end_after_n_events_or_at_their_rate() {
        let mut injector = Injector::new(Faults::seeded(5).end_watches_after(3, WatchEnd::Expire));
        let mut watch = injector.watch();
        assert_eq!(watch.after_event(), None);
        assert_eq!(watch.after_event(), None);
        assert_eq!(watch.after_event(), Some(WatchEnd::Expire));

        let mut injector = Injector::new(Faults::seeded(5).drop_watches(0.1));
        let mut lengths = Vec::new();
        for _ in 0..200 {
            let mut watch = injector.watch();
            let mut events = 1;
            while watch.after_event().is_none() {
                events += 1;
            }
            lengths.push(events);
        }
        let mean = lengths.iter().sum::<u32>() as f64 / lengths.len() as f64;
        assert!((7.0..13.0).contains(&mean), "mean watch length {mean}");
    }

    #[test]
    fn delays_stay_within_their_jitter() {
        let mut injector = Injector::new(
            Faults::seeded(9).delay(Duration::from_millis(20), Duration::from_millis(10)),
        );
        for _ in 0..100 {
            let delay = injector.decide(Verb::Get).delay;
            assert!(delay >= Duration::from_millis(20) && delay <= Duration::from_millis(30));
        }
        assert_eq!(injector.counts().delayed, 100);
    }

    #[test]
    fn a_plan_can_be_limited_to_some_resources() {
        let injector = Injector::new(Faults::seeded(1).only_resources(["pods"]));
        assert!(injector.targets(true, "pods"));
        assert!(!injector.targets(true, "nodes"));
        assert!(!injector.targets(false, "pods"), "ServiceAccounts only");
        let everyone = Injector::new(Faults::seeded(1).target(Target::Everyone));
        assert!(everyone.targets(false, "nodes"));
    }

    #[test]
    fn verbs_read_as_rbac_names_them() {
        for verb in Verb::ALL {
            assert_eq!(Verb::from_rbac(&verb.to_string()), Some(verb));
        }
        assert_eq!(Verb::from_rbac("deletecollection"), Some(Verb::Delete));
        assert_eq!(Verb::from_rbac("escalate"), None);
    }
}
