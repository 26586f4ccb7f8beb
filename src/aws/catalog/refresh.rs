//! Keeps the instance-type provider's catalog current: on a timer, reads the
//! instance types and offerings from EC2 and the prices from the pricing
//! provider, and swaps the result in with
//! [`InstanceTypeProvider::set_catalog`] when its content changed.
//!
//! Intervals (Karpenter's in parentheses):
//! - instance types and offerings: every [`INSTANCE_TYPES_INTERVAL`], 5
//!   minutes (`InstanceTypesZonesAndOfferingsTTL`, 5m);
//! - on-demand and spot prices: every [`PRICES_INTERVAL`], 12 hours (the
//!   `providers.pricing` controller, 12h); a price refresh that failed is
//!   retried at the next instance-type refresh.
//!
//! Failures never make things worse: a failed instance-type refresh keeps the
//! last good catalog (with any newer prices); the first one falls back to the
//! embedded catalog of the region if there is one, and is an error otherwise.
//! Prices follow the pricing provider's merge rule (see [`crate::aws::pricing`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::live::{LIVE_LABEL, LiveCatalogError, describe};
use super::{Catalog, CatalogError};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::aws::pricing::{PricingError, PricingProvider};

/// How often instance types and offerings are read.
pub const INSTANCE_TYPES_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// How often prices are read once they were read successfully.
pub const PRICES_INTERVAL: Duration = Duration::from_secs(12 * 60 * 60);
/// Version label of a catalog whose instance types are the embedded ones
/// (EC2 could not be read yet) priced by the pricing provider.
pub const EMBEDDED_FALLBACK_LABEL: &str = "embedded-fallback";

/// What happened to the instance types in one refresh.
#[derive(Debug)]
pub enum InstanceTypesOutcome {
    /// Read from EC2.
    Fetched {
        /// Instance types described.
        instance_types: usize,
        /// Zonal offerings described.
        offerings: usize,
    },
    /// EC2 could not be read; the last good instance types are kept.
    Kept(LiveCatalogError),
    /// EC2 could not be read and there is no earlier catalog; the embedded
    /// catalog of the region stands in.
    EmbeddedFallback(LiveCatalogError),
}

/// The result of one refresh.
#[derive(Debug)]
pub struct RefreshReport {
    /// The catalog to serve now.
    pub catalog: Arc<Catalog>,
    /// What happened to the instance types and offerings.
    pub instance_types: InstanceTypesOutcome,
    /// The on-demand price refresh, if one was due: prices merged, or why not.
    pub on_demand: Option<Result<usize, PricingError>>,
    /// The spot price refresh, if one was due.
    pub spot: Option<Result<usize, PricingError>>,
}

#[derive(Default)]
struct State {
    /// The last catalog served and the label its instance types carry.
    current: Option<(Arc<Catalog>, &'static str)>,
    on_demand_at: Option<Instant>,
    spot_at: Option<Instant>,
}

/// Refreshes one region's catalog.
pub struct CatalogRefresher {
    region: String,
    ec2: aws_sdk_ec2::Client,
    pricing: PricingProvider,
    interval: Duration,
    prices_interval: Duration,
    state: Mutex<State>,
}

fn due(last_success: Option<Instant>, interval: Duration) -> bool {
    last_success.is_none_or(|at| at.elapsed() >= interval)
}

impl CatalogRefresher {
    /// A refresher reading instance types through `ec2` and prices through
    /// `pricing` (whose region is the catalog's).
    pub fn new(ec2: aws_sdk_ec2::Client, pricing: PricingProvider) -> Self {
        CatalogRefresher {
            region: pricing.region().to_string(),
            ec2,
            pricing,
            interval: INSTANCE_TYPES_INTERVAL,
            prices_interval: PRICES_INTERVAL,
            state: Mutex::new(State::default()),
        }
    }

    /// Refreshes every `interval` instead of [`INSTANCE_TYPES_INTERVAL`].
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Re-reads prices after `interval` instead of [`PRICES_INTERVAL`].
    pub fn with_prices_interval(mut self, interval: Duration) -> Self {
        self.prices_interval = interval;
        self
    }

    /// The region refreshed.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The last catalog produced, if any.
    pub fn catalog(&self) -> Option<Arc<Catalog>> {
        self.lock().current.as_ref().map(|(c, _)| c.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One refresh: prices if due, then instance types and offerings. An
    /// error only when EC2 cannot be read, nothing was read before, and the
    /// region has no embedded catalog.
    pub async fn refresh(&self) -> Result<RefreshReport, LiveCatalogError> {
        let (prices_on_demand, prices_spot) = {
            let state = self.lock();
            (
                due(state.on_demand_at, self.prices_interval),
                due(state.spot_at, self.prices_interval),
            )
        };
        let on_demand = async {
            match prices_on_demand {
                true => Some(self.pricing.update_on_demand().await),
                false => None,
            }
        };
        let spot = async {
            match prices_spot {
                true => Some(self.pricing.update_spot().await),
                false => None,
            }
        };
        let (described, on_demand, spot) =
            futures::join!(describe(&self.ec2, &self.region), on_demand, spot);
        let prices = self.pricing.prices();

        let mut state = self.lock();
        if matches!(on_demand, Some(Ok(_))) {
            state.on_demand_at = Some(Instant::now());
        }
        if matches!(spot, Some(Ok(_))) {
            state.spot_at = Some(Instant::now());
        }
        let (catalog, label, instance_types) = match described {
            Ok((types, offerings)) => {
                let outcome = InstanceTypesOutcome::Fetched {
                    instance_types: types.len(),
                    offerings: offerings.len(),
                };
                let catalog =
                    Catalog::versioned(LIVE_LABEL, &self.region, types, offerings, prices);
                (catalog, LIVE_LABEL, outcome)
            }
            Err(e) => match &state.current {
                Some((current, label)) => (
                    current.with_prices(label, prices),
                    *label,
                    InstanceTypesOutcome::Kept(e),
                ),
                None => match Catalog::embedded(&self.region) {
                    Ok(embedded) => (
                        embedded.with_prices(EMBEDDED_FALLBACK_LABEL, prices),
                        EMBEDDED_FALLBACK_LABEL,
                        InstanceTypesOutcome::EmbeddedFallback(e),
                    ),
                    Err(CatalogError::UnknownRegion { .. }) => return Err(e),
                    Err(other) => return Err(other.into()),
                },
            },
        };
        let catalog = match &state.current {
            Some((current, _)) if current.version() == catalog.version() => current.clone(),
            _ => Arc::new(catalog),
        };
        state.current = Some((catalog.clone(), label));
        Ok(RefreshReport {
            catalog,
            instance_types,
            on_demand,
            spot,
        })
    }

    /// Refreshes every interval ([`INSTANCE_TYPES_INTERVAL`] by default)
    /// forever, serving each new catalog through `provider` (which keeps its
    /// catalog when a refresh fails). The first refresh runs after one
    /// interval: call [`refresh`](Self::refresh) once at startup to seed the
    /// provider.
    pub async fn run(self: Arc<Self>, provider: Arc<InstanceTypeProvider>) {
        loop {
            tokio::time::sleep(self.interval).await;
            match self.refresh().await {
                Ok(report) => {
                    log_report(&self.region, &report);
                    serve(&provider, report.catalog);
                }
                Err(e) => {
                    tracing::warn!(region = %self.region, error = %e, "catalog refresh failed; the current catalog stays")
                }
            }
        }
    }
}

/// Swaps `catalog` into `provider` unless it already serves that version
/// (a swap drops the provider's resolved-type caches).
pub fn serve(provider: &InstanceTypeProvider, catalog: Arc<Catalog>) {
    if provider.catalog().version() != catalog.version() {
        tracing::info!(version = catalog.version(), "serving a new catalog");
        provider.set_catalog(catalog);
    }
}

/// Logs one refresh: failures as warnings, the rest at debug.
pub fn log_report(region: &str, report: &RefreshReport) {
    match &report.instance_types {
        InstanceTypesOutcome::Fetched {
            instance_types,
            offerings,
        } => {
            tracing::debug!(%region, instance_types, offerings, "read instance types and offerings")
        }
        InstanceTypesOutcome::Kept(e) => {
            tracing::warn!(%region, error = %e, "cannot read instance types; the last good catalog stays")
        }
        InstanceTypesOutcome::EmbeddedFallback(e) => {
            tracing::warn!(%region, error = %e, "cannot read instance types; the embedded catalog stands in")
        }
    }
    for (kind, result) in [("on-demand", &report.on_demand), ("spot", &report.spot)] {
        match result {
            Some(Ok(count)) => tracing::debug!(%region, kind, count, "read prices"),
            Some(Err(e)) => {
                tracing::warn!(%region, kind, error = %e, "cannot read prices; the prices held stay")
            }
            None => {}
        }
    }
}
