//! Taints and tolerations, with Kubernetes' matching rules.

use std::fmt;

use crate::apis::labels::{
    CLOUD_PROVIDER_UNINITIALIZED_TAINT_KEY, NOT_READY_TAINT_KEY, READINESS_TAINT_KEY_PREFIX,
    UNREACHABLE_TAINT_KEY, UNREGISTERED_TAINT_KEY,
};

/// What a taint does to pods that do not tolerate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    /// Pods are not scheduled.
    NoSchedule,
    /// Avoided when possible (a preference the scheduler relaxes last).
    PreferNoSchedule,
    /// Pods are not scheduled and running ones are evicted.
    NoExecute,
}

impl TaintEffect {
    /// Parses the Kubernetes spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

impl Taint {
    /// Builds a taint.
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Self {
        Taint {
            key: key.to_string(),
            value: value.to_string(),
            effect,
        }
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{:?}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{:?}", self.key, self.value, self.effect)
        }
    }
}

/// A pod toleration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Key to match; `None` with `exists` tolerates every taint.
    pub key: Option<String>,
    /// `Exists` (any value) rather than `Equal`.
    pub exists: bool,
    /// Value to match with `Equal`.
    pub value: String,
    /// Effect to match; `None` matches all effects.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// `key=value:effect` with operator Equal.
    pub fn equal(key: &str, value: &str, effect: Option<TaintEffect>) -> Self {
        Toleration {
            key: Some(key.to_string()),
            exists: false,
            value: value.to_string(),
            effect,
        }
    }

    /// `key` with operator Exists.
    pub fn exists(key: &str, effect: Option<TaintEffect>) -> Self {
        Toleration {
            key: Some(key.to_string()),
            exists: true,
            value: String::new(),
            effect,
        }
    }

    /// Whether this toleration tolerates `taint` (Kubernetes `ToleratesTaint`).
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        match &self.key {
            None => self.exists,
            Some(key) if key.is_empty() => self.exists,
            Some(key) => key == &taint.key && (self.exists || self.value == taint.value),
        }
    }
}

/// The first taint in `taints` that `tolerations` do not tolerate.
/// PreferNoSchedule taints count only when `include_prefer_no_schedule`.
pub fn first_untolerated<'a>(
    taints: impl IntoIterator<Item = &'a Taint>,
    tolerations: &[Toleration],
    include_prefer_no_schedule: bool,
) -> Option<&'a Taint> {
    taints.into_iter().find(|taint| {
        (include_prefer_no_schedule || taint.effect != TaintEffect::PreferNoSchedule)
            && !tolerations.iter().any(|t| t.tolerates(taint))
    })
}

/// Taints a node carries only while starting up; Karpenter assumes they go
/// away and ignores them for placement on nodes that are not yet initialized.
pub fn is_known_ephemeral(taint: &Taint) -> bool {
    let key = taint.key.as_str();
    let ephemeral = match taint.effect {
        TaintEffect::NoSchedule => {
            key == NOT_READY_TAINT_KEY
                || key == UNREACHABLE_TAINT_KEY
                || key == CLOUD_PROVIDER_UNINITIALIZED_TAINT_KEY
        }
        TaintEffect::NoExecute => key == NOT_READY_TAINT_KEY || key == UNREGISTERED_TAINT_KEY,
        TaintEffect::PreferNoSchedule => false,
    };
    ephemeral || key.starts_with(READINESS_TAINT_KEY_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toleration_matching() {
        let taint = Taint::new("gpu", "true", TaintEffect::NoSchedule);
        assert!(Toleration::equal("gpu", "true", None).tolerates(&taint));
        assert!(!Toleration::equal("gpu", "false", None).tolerates(&taint));
        assert!(Toleration::exists("gpu", Some(TaintEffect::NoSchedule)).tolerates(&taint));
        assert!(!Toleration::exists("gpu", Some(TaintEffect::NoExecute)).tolerates(&taint));
        let everything = Toleration {
            key: None,
            exists: true,
            ..Default::default()
        };
        assert!(everything.tolerates(&taint));
        let prefer = Taint::new("spot", "", TaintEffect::PreferNoSchedule);
        assert!(first_untolerated([&prefer], &[], false).is_none());
        assert!(first_untolerated([&prefer], &[], true).is_some());
        assert!(is_known_ephemeral(&Taint::new(
            NOT_READY_TAINT_KEY,
            "",
            TaintEffect::NoExecute
        )));
        assert!(!is_known_ephemeral(&taint));
    }
}
