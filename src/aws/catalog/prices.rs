//! Prices for one region: an on-demand snapshot (embedded, possibly borrowed
//! from another region) with live prices layered over it — on-demand from the
//! Pricing API, spot per zone from EC2's spot price history.
//!
//! Live prices are only ever merged in: a refresh adds or updates the prices
//! it returned and never removes one, so a partial or failed refresh cannot
//! erase good prices of other types, zones or the other capacity type.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

/// Where the snapshot prices come from, so estimates are never shown as fact.
#[derive(Debug, Clone, PartialEq)]
pub enum PriceSource {
    /// The region's own on-demand price snapshot.
    Snapshot {
        /// When the snapshot was taken (RFC 3339).
        generated_at: String,
    },
    /// No price data for this region: another region's snapshot stands in, as
    /// Karpenter's static fallback does; every price is an estimate.
    Borrowed {
        /// The region whose prices are used.
        from_region: String,
        /// When that snapshot was taken (RFC 3339).
        generated_at: String,
    },
}

/// On-demand and spot prices for one region, with their provenance.
#[derive(Debug, Clone)]
pub struct PriceBook {
    /// Snapshot on-demand prices by instance type.
    on_demand: HashMap<String, f64>,
    source: PriceSource,
    /// On-demand prices from the Pricing API, by instance type.
    live_on_demand: HashMap<String, f64>,
    /// When live on-demand prices were last merged in (RFC 3339).
    on_demand_fetched_at: Option<String>,
    /// Spot prices from the spot price history: instance type → zone → price.
    spot: HashMap<String, HashMap<String, f64>>,
    /// When spot prices were last merged in (RFC 3339).
    spot_fetched_at: Option<String>,
}

impl PriceBook {
    /// A price book holding only snapshot prices (the embedded catalog, tests).
    pub fn new(on_demand: HashMap<String, f64>, source: PriceSource) -> Self {
        Self {
            on_demand,
            source,
            live_on_demand: HashMap::new(),
            on_demand_fetched_at: None,
            spot: HashMap::new(),
            spot_fetched_at: None,
        }
    }

    /// The Linux on-demand USD/hour price of an instance type: the live
    /// price when one was fetched, else the snapshot's.
    pub fn on_demand(&self, instance_type: &str) -> Option<f64> {
        self.live_on_demand
            .get(instance_type)
            .or_else(|| self.on_demand.get(instance_type))
            .copied()
    }

    /// Whether the on-demand price of `instance_type` is an estimate: no live
    /// price for it, and the snapshot is another region's.
    pub fn on_demand_is_estimate(&self, instance_type: &str) -> bool {
        !self.live_on_demand.contains_key(instance_type) && self.is_estimate()
    }

    /// The latest known Linux spot USD/hour price of an instance type in a
    /// zone, if the spot price history had one.
    pub fn spot(&self, instance_type: &str, zone: &str) -> Option<f64> {
        self.spot.get(instance_type)?.get(zone).copied()
    }

    /// Every instance type with an on-demand price, in no particular order.
    pub fn instance_types(&self) -> impl Iterator<Item = &str> {
        self.on_demand.keys().map(String::as_str).chain(
            self.live_on_demand
                .keys()
                .filter(|name| !self.on_demand.contains_key(*name))
                .map(String::as_str),
        )
    }

    /// Where the snapshot prices come from.
    pub fn source(&self) -> &PriceSource {
        &self.source
    }

    /// Whether the snapshot prices are another region's (estimates wherever
    /// no live price replaces them).
    pub fn is_estimate(&self) -> bool {
        matches!(self.source, PriceSource::Borrowed { .. })
    }

    /// Merges on-demand prices fetched from the Pricing API at `fetched_at`:
    /// each given type's price is set; every other price is kept.
    pub fn merge_on_demand(&mut self, prices: HashMap<String, f64>, fetched_at: String) {
        self.live_on_demand.extend(prices);
        self.on_demand_fetched_at = Some(fetched_at);
    }

    /// Merges spot prices (instance type → zone → price) fetched at
    /// `fetched_at`: each given (type, zone) price is set; every other price
    /// is kept.
    pub fn merge_spot(
        &mut self,
        prices: HashMap<String, HashMap<String, f64>>,
        fetched_at: String,
    ) {
        for (instance_type, zones) in prices {
            self.spot.entry(instance_type).or_default().extend(zones);
        }
        self.spot_fetched_at = Some(fetched_at);
    }

    /// When on-demand prices were last fetched from the Pricing API, if ever.
    pub fn on_demand_fetched_at(&self) -> Option<&str> {
        self.on_demand_fetched_at.as_deref()
    }

    /// When spot prices were last fetched from the spot price history, if ever.
    pub fn spot_fetched_at(&self) -> Option<&str> {
        self.spot_fetched_at.as_deref()
    }

    /// How many instance types have a live on-demand price.
    pub fn live_on_demand_count(&self) -> usize {
        self.live_on_demand.len()
    }

    /// How many (instance type, zone) pairs have a spot price.
    pub fn spot_count(&self) -> usize {
        self.spot.values().map(HashMap::len).sum()
    }

    /// Feeds every price and the snapshot's provenance into `state` in a
    /// fixed order (maps sorted), for content-derived catalog versions. Fetch
    /// times are left out: a refresh that returns the same prices leaves the
    /// version, and every cache keyed on it, as it was.
    pub(crate) fn hash_content<H: Hasher>(&self, state: &mut H) {
        fn prices<H: Hasher>(map: &HashMap<String, f64>, state: &mut H) {
            let sorted: BTreeMap<&String, u64> =
                map.iter().map(|(k, v)| (k, v.to_bits())).collect();
            sorted.hash(state);
        }
        match &self.source {
            PriceSource::Snapshot { generated_at } => ("snapshot", generated_at).hash(state),
            PriceSource::Borrowed {
                from_region,
                generated_at,
            } => ("borrowed", from_region, generated_at).hash(state),
        }
        prices(&self.on_demand, state);
        prices(&self.live_on_demand, state);
        let spot: BTreeMap<&String, BTreeMap<&String, u64>> = self
            .spot
            .iter()
            .map(|(t, zones)| (t, zones.iter().map(|(z, p)| (z, p.to_bits())).collect()))
            .collect();
        spot.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::DefaultHasher;

    fn book() -> PriceBook {
        PriceBook::new(
            HashMap::from([
                ("m5.large".to_string(), 0.096),
                ("c5.large".to_string(), 0.085),
            ]),
            PriceSource::Borrowed {
                from_region: "us-east-1".into(),
                generated_at: "2026-07-20T00:00:00Z".into(),
            },
        )
    }

    fn digest(book: &PriceBook) -> u64 {
        let mut hasher = DefaultHasher::new();
        book.hash_content(&mut hasher);
        hasher.finish()
    }

    fn spot(entries: &[(&str, &str, f64)]) -> HashMap<String, HashMap<String, f64>> {
        let mut out: HashMap<String, HashMap<String, f64>> = HashMap::new();
        for (t, z, p) in entries {
            out.entry(t.to_string())
                .or_default()
                .insert(z.to_string(), *p);
        }
        out
    }

    #[test]
    fn live_on_demand_prices_replace_the_snapshot_and_are_not_estimates() {
        let mut book = book();
        assert!(book.on_demand_is_estimate("m5.large"));
        book.merge_on_demand(
            HashMap::from([("m5.large".to_string(), 0.1)]),
            "2026-11-23T00:00:00Z".into(),
        );
        assert_eq!(book.on_demand("m5.large"), Some(0.1));
        assert!(!book.on_demand_is_estimate("m5.large"));
        assert_eq!(book.on_demand("c5.large"), Some(0.085));
        assert!(book.on_demand_is_estimate("c5.large"));
        assert_eq!(book.on_demand_fetched_at(), Some("2026-11-23T00:00:00Z"));
    }

    #[test]
    fn a_partial_merge_keeps_every_price_it_does_not_name() {
        let mut book = book();
        book.merge_on_demand(
            HashMap::from([
                ("m5.large".to_string(), 0.1),
                ("c5.large".to_string(), 0.09),
            ]),
            "t1".into(),
        );
        book.merge_spot(
            spot(&[("m5.large", "a", 0.03), ("m5.large", "b", 0.04)]),
            "t1".into(),
        );
        book.merge_on_demand(HashMap::from([("m5.large".to_string(), 0.11)]), "t2".into());
        book.merge_spot(spot(&[("m5.large", "b", 0.05)]), "t2".into());
        assert_eq!(book.on_demand("m5.large"), Some(0.11));
        assert_eq!(book.on_demand("c5.large"), Some(0.09));
        assert_eq!(book.spot("m5.large", "a"), Some(0.03));
        assert_eq!(book.spot("m5.large", "b"), Some(0.05));
        assert_eq!(book.spot("c5.large", "a"), None);
        assert_eq!(book.spot_count(), 2);
    }

    #[test]
    fn the_content_digest_follows_prices_but_not_fetch_times() {
        let mut a = book();
        let before = digest(&a);
        a.merge_spot(spot(&[("m5.large", "a", 0.03)]), "t1".into());
        let with_spot = digest(&a);
        assert_ne!(before, with_spot);
        a.merge_spot(spot(&[("m5.large", "a", 0.03)]), "t2".into());
        assert_eq!(digest(&a), with_spot, "same prices, later fetch");
        a.merge_spot(spot(&[("m5.large", "a", 0.031)]), "t3".into());
        assert_ne!(digest(&a), with_spot);
        let mut b = book();
        b.merge_on_demand(HashMap::from([("m5.large".to_string(), 0.096)]), "t".into());
        assert_ne!(
            digest(&b),
            before,
            "a live price equal to the snapshot's is still a different provenance"
        );
    }
}
