//! The instance-type provider: the one pipeline from a catalog to what a
//! NodePool may launch — resolve the catalog under an EC2NodeClass's
//! settings, run the class's instance filters and priority scorers, and mark
//! offerings that recently ran out of capacity. `simulate`, the controllers
//! and the cloud providers all call it, so they see the same instance types.
//!
//! Caches: resolved types per (resolver settings, catalog version), at most
//! [`MAX_RESOLVED`] entries, dropped whenever the catalog is replaced (the
//! settings include each capacity reservation's free count, so a changed
//! count resolves again);
//! extension outcomes live in [`Extensions`]' own cache. The catalog itself is
//! swapped in by whoever refreshes it (the live EC2 catalog on a timer).
//! NodeOverlays, evaluated by whoever reads them (the NodeOverlay
//! controller, `simulate`), are set here and applied last, so every reader
//! of a pool's types — scheduler, consolidation, launch — sees the same
//! overlaid prices.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::{ResolveError, ResolverSettings, resolve_all};
use crate::apis::EC2NodeClass;
use crate::aws::capacity_reservations::ReservationAvailability;
use crate::aws::catalog::Catalog;
use crate::cloudprovider::{
    InstanceTypeSource, LaunchableTypes, NodeClassContext, UnavailableOfferings,
};
use crate::extensions::{ConfigMapSource, Extensions, Outcome};
use crate::scheduling::overlay::Overlays;
use crate::scheduling::{Blocked, BlockedReason, InstanceType};

/// Resolved instance-type sets kept at once (one per distinct class settings).
pub const MAX_RESOLVED: usize = 64;

/// Serves each NodePool's instance types.
pub struct InstanceTypeProvider {
    catalog: RwLock<Arc<Catalog>>,
    extensions: Arc<Extensions>,
    unavailable: Arc<UnavailableOfferings>,
    reservations: Arc<ReservationAvailability>,
    resolved: Mutex<HashMap<String, Arc<Vec<InstanceType>>>>,
    /// Catalogs and overlay sets swapped in so far.
    catalogs: AtomicU64,
    /// The NodeOverlays in force (none unless the gate is on and some exist).
    overlays: RwLock<Arc<Overlays>>,
}

impl InstanceTypeProvider {
    /// A provider serving `catalog` through `extensions`, marking offerings
    /// in `unavailable` as not available.
    pub fn new(
        catalog: Arc<Catalog>,
        extensions: Arc<Extensions>,
        unavailable: Arc<UnavailableOfferings>,
    ) -> Self {
        InstanceTypeProvider {
            catalog: RwLock::new(catalog),
            extensions,
            unavailable,
            reservations: Arc::default(),
            resolved: Mutex::new(HashMap::new()),
            catalogs: AtomicU64::new(0),
            overlays: RwLock::new(Arc::default()),
        }
    }

    /// The NodeOverlays in force from now on (a NodeOverlay reconcile, or
    /// `simulate` with the gate on); counts as a new version.
    pub fn set_overlays(&self, overlays: Arc<Overlays>) {
        match self.overlays.write() {
            Ok(mut current) => *current = overlays,
            Err(e) => *e.into_inner() = overlays,
        }
        self.catalogs.fetch_add(1, Ordering::SeqCst);
    }

    /// The NodeOverlays in force.
    pub fn overlays(&self) -> Arc<Overlays> {
        self.overlays
            .read()
            .map(|o| o.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Changes whenever what [`InstanceTypeProvider::for_pool`] returns for
    /// the same class and ConfigMaps may change — a new catalog, an offering
    /// marked unavailable, a reservation count written — so a decision made
    /// from it knows when it is out of date. (Unavailable marks also lapse
    /// with time, which this does not count.)
    pub fn version(&self) -> u64 {
        self.catalogs
            .load(Ordering::SeqCst)
            .wrapping_add(self.unavailable.version())
            .wrapping_add(self.reservations.version())
    }

    /// The catalog served now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Serves `catalog` from now on (a refresh of the live catalog).
    pub fn set_catalog(&self, catalog: Arc<Catalog>) {
        match self.catalog.write() {
            Ok(mut current) => *current = catalog,
            Err(e) => *e.into_inner() = catalog,
        }
        self.catalogs.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut resolved) = self.resolved.lock() {
            resolved.clear();
        }
    }

    /// The extension runner (for the AMI selector, which runs elsewhere).
    pub fn extensions(&self) -> &Arc<Extensions> {
        &self.extensions
    }

    /// The shared cache of offerings that ran out of capacity.
    pub fn unavailable(&self) -> &Arc<UnavailableOfferings> {
        &self.unavailable
    }

    /// Free instances per capacity reservation: refreshed by the capacity
    /// reservation provider, adjusted by launches, read for reserved offerings.
    pub fn reservation_availability(&self) -> &Arc<ReservationAvailability> {
        &self.reservations
    }

    /// Every launchable instance type of the catalog under `class`'s
    /// settings, before its extensions run.
    pub fn resolve(&self, class: &EC2NodeClass) -> Result<Arc<Vec<InstanceType>>, ResolveError> {
        let mut settings = ResolverSettings::from_node_class(class)?;
        for reservation in &mut settings.capacity_reservations {
            reservation.available = self.reservations.available(&reservation.id);
        }
        let catalog = self.catalog();
        let key = format!("{}/{settings:?}", catalog.version());
        if let Some(hit) = self.resolved.lock().ok().and_then(|r| r.get(&key).cloned()) {
            return Ok(hit);
        }
        let types = Arc::new(resolve_all(&catalog, &settings)?);
        if let Ok(mut resolved) = self.resolved.lock() {
            if resolved.len() >= MAX_RESOLVED {
                resolved.clear();
            }
            resolved.insert(key, types.clone());
        }
        Ok(types)
    }

    /// What `pool` may launch with `class`: the resolved types after the
    /// class's extensions, offerings that recently ran out of capacity
    /// marked unavailable, NodeOverlays applied. An error when the class's
    /// settings cannot be resolved (a bad quantity in `spec.kubelet`, …).
    /// Blocking: it may run Wasm modules.
    pub fn for_pool(
        &self,
        class: &EC2NodeClass,
        pool: &str,
        config_maps: &dyn ConfigMapSource,
    ) -> Result<Arc<Outcome>, ResolveError> {
        let outcome = self.without_overlays(class, pool, config_maps)?;
        let overlays = self.overlays();
        let types = overlays.apply(pool, &outcome.instance_types);
        if Arc::ptr_eq(&types, &outcome.instance_types) {
            return Ok(outcome);
        }
        let mut overlaid = Outcome::clone(&outcome);
        overlaid.instance_types = types;
        Ok(Arc::new(overlaid))
    }

    /// [`Self::for_pool`] before NodeOverlays: what overlays are evaluated
    /// against.
    pub fn without_overlays(
        &self,
        class: &EC2NodeClass,
        pool: &str,
        config_maps: &dyn ConfigMapSource,
    ) -> Result<Arc<Outcome>, ResolveError> {
        let types = self.resolve(class)?;
        let catalog = self.catalog();
        let outcome = self
            .extensions
            .apply(class, pool, catalog.as_ref(), types, config_maps);
        if self.unavailable.entries().is_empty() {
            return Ok(outcome);
        }
        let group = class
            .status
            .as_ref()
            .and_then(|s| s.placement_group.as_ref())
            .map(|g| g.id.as_str());
        let mut marked = Outcome::clone(&outcome);
        self.unavailable.apply(
            Arc::make_mut(&mut marked.instance_types).as_mut_slice(),
            group,
        );
        Ok(Arc::new(marked))
    }
}

impl InstanceTypeSource for InstanceTypeProvider {
    fn launchable(&self, pool: &str, class: &NodeClassContext) -> Arc<LaunchableTypes> {
        let launchable = match self.for_pool(&class.class, pool, class.config_maps.as_ref()) {
            Ok(outcome) => LaunchableTypes {
                instance_types: outcome.instance_types.clone(),
                priority_scores: outcome.priority_scores.clone(),
                blocked: outcome.blocked.clone(),
            },
            Err(e) => LaunchableTypes {
                blocked: Some(Blocked::new(
                    BlockedReason::NodeClassNotResolvable,
                    format!("cannot resolve instance types: {e}"),
                )),
                ..LaunchableTypes::default()
            },
        };
        Arc::new(launchable)
    }
}
