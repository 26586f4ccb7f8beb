//! The AWS side: the EC2 catalog (embedded, or live from the EC2 API and
//! refreshed) and the instance-type resolver that turns it into the
//! scheduler's instance types, prices, the providers an EC2NodeClass's
//! status comes from (AMIs, subnets, security groups, instance profiles,
//! capacity reservations, placement groups, dry-run permission checks),
//! launch templates and instances, the AWS cloud provider, the SDK clients,
//! and the cluster's endpoint from EKS.

pub mod amis;
pub mod capacity_reservations;
pub mod catalog;
pub mod clients;
pub mod cloudprovider;
pub mod cluster;
pub mod dry_run;
pub mod errors;
pub mod filters;
pub mod instance;
pub mod instance_profile;
pub mod instance_status;
pub mod instance_types;
pub mod launch_template;
pub mod placement_groups;
pub mod pricing;
pub mod security_groups;
pub mod subnets;

/// A cache of at most `max_entries` entries, each dropped `ttl` after it was
/// written. The providers' caches hold what AWS answered last, so a full one
/// evicts its least recently used entry (moka's default admission policy
/// could refuse the newest answer instead).
pub(crate) fn ttl_cache<K, V>(ttl: std::time::Duration, max_entries: u64) -> moka::sync::Cache<K, V>
where
    K: std::hash::Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    moka::sync::Cache::builder()
        .max_capacity(max_entries.max(1))
        .time_to_live(ttl)
        .eviction_policy(moka::policy::EvictionPolicy::lru())
        .build()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ttl_cache;

    #[test]
    fn entries_expire_after_the_ttl() {
        let cache = ttl_cache(Duration::from_millis(20), 10);
        cache.insert("a", 1);
        let long = ttl_cache(Duration::from_secs(3600), 10);
        long.insert("a", 1);
        // Only lower bounds on time: the sleep outlasts the short TTL however
        // slow the machine, and the long one cannot pass within a test.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(cache.get(&"a"), None, "an expired entry is dropped");
        assert_eq!(long.get(&"a"), Some(1));
    }

    #[test]
    fn a_full_cache_keeps_its_bound_and_the_newest_entry() {
        let cache = ttl_cache(Duration::from_secs(3600), 2);
        cache.insert("old", 1);
        cache.insert("new", 2);
        cache.run_pending_tasks();
        cache.insert("newer", 3);
        cache.run_pending_tasks();
        assert_eq!(cache.entry_count(), 2);
        assert_eq!(cache.get(&"newer"), Some(3));
        assert_eq!(
            cache.get(&"old"),
            None,
            "the least recently used entry goes"
        );
    }
}
