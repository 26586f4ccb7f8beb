//! Pending pods in the scheduler's terms, converted once per
//! resourceVersion — as their changes arrive, not when a round starts, so a
//! round over a burst of 10,000 pods copies conversions instead of making
//! them all after its batch window closed.
//!
//! Entries are keyed by uid and hold the resourceVersion they were made
//! from: a changed pod is converted again. An entry no round used and no
//! change refreshed since the last [`ConvertedPods::sweep`] is dropped, so
//! pods that were bound or deleted do not stay. Objects without a uid or
//! resourceVersion (manifests given to `simulate`) are converted each time
//! and never kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod as K8sPod;

use crate::scheduling::{ConvertError, Pod, convert};

/// One pod's conversion.
struct Entry {
    resource_version: String,
    pod: Arc<Pod>,
    /// The sweep generation it was last used or refreshed in.
    seen: u64,
}

#[derive(Default)]
struct Inner {
    by_uid: HashMap<String, Entry>,
    generation: u64,
}

/// The cache; one per controller that runs rounds (a sweep drops what that
/// controller's last round did not use).
#[derive(Default)]
pub struct ConvertedPods {
    inner: Mutex<Inner>,
}

impl ConvertedPods {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Plain data: still consistent if a holder panicked.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Converts `pod` now unless this version of it already is, so a round
    /// finds it ready; conversion errors wait for the round, which reports them.
    pub fn refresh(&self, pod: &K8sPod) {
        let _ = self.get(pod);
    }

    /// `pod` in the scheduler's terms: the stored conversion of this
    /// resourceVersion, or a new one (stored when the pod has a uid and a
    /// resourceVersion).
    pub fn get(&self, pod: &K8sPod) -> Result<Pod, ConvertError> {
        let meta = &pod.metadata;
        let (Some(uid), Some(version)) = (meta.uid.as_deref(), meta.resource_version.as_deref())
        else {
            return convert::pod_from_k8s(pod);
        };
        {
            let mut inner = self.inner();
            let generation = inner.generation;
            if let Some(entry) = inner.by_uid.get_mut(uid)
                && entry.resource_version == version
            {
                entry.seen = generation;
                return Ok(Pod::clone(&entry.pod));
            }
        }
        // Converted outside the lock: a round may be reading the cache.
        let converted = Arc::new(convert::pod_from_k8s(pod)?);
        let mut inner = self.inner();
        let seen = inner.generation;
        inner.by_uid.insert(
            uid.to_string(),
            Entry {
                resource_version: version.to_string(),
                pod: converted.clone(),
                seen,
            },
        );
        Ok(Pod::clone(&converted))
    }

    /// Drops every entry neither used nor refreshed since the previous
    /// sweep; called once a round has read its pods.
    pub fn sweep(&self) {
        let mut inner = self.inner();
        let current = inner.generation;
        inner.by_uid.retain(|_, entry| entry.seen == current);
        inner.generation += 1;
    }

    /// Pods held (for tests and figures).
    pub fn len(&self) -> usize {
        self.inner().by_uid.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: Option<&str>, version: &str, cpu: &str) -> K8sPod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": version},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_is_converted_again_only_when_its_version_changes() {
        let cache = ConvertedPods::default();
        let cpu = |pod: K8sPod| cache.get(&pod).unwrap().requests.cpu_millis;
        assert_eq!(cpu(pod(Some("u"), "1", "1")), 1000);
        // Same version: the stored conversion, even if the object differs.
        assert_eq!(cpu(pod(Some("u"), "1", "2")), 1000);
        assert_eq!(cpu(pod(Some("u"), "2", "2")), 2000);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_sweep_keeps_what_was_used_or_refreshed_since_the_last_one() {
        let cache = ConvertedPods::default();
        cache.refresh(&pod(Some("kept"), "1", "1"));
        cache.refresh(&pod(Some("dropped"), "1", "1"));
        cache.sweep();
        assert_eq!(cache.len(), 2, "both were refreshed before the first sweep");
        cache.get(&pod(Some("kept"), "1", "1")).unwrap();
        cache.sweep();
        assert_eq!(cache.len(), 1);
        cache.sweep();
        assert!(cache.is_empty());
    }

    #[test]
    fn pods_without_a_uid_are_converted_but_not_kept_and_errors_are_returned() {
        let cache = ConvertedPods::default();
        let converted = cache.get(&pod(None, "1", "1")).unwrap();
        assert_eq!(converted.requests.cpu_millis, 1000);
        assert!(cache.is_empty());
        let error = cache.get(&pod(Some("bad"), "1", "lots")).unwrap_err();
        assert!(error.to_string().contains("cpu"), "{error}");
        assert!(cache.is_empty());
    }
}
