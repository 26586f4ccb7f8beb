//! Existing nodes and in-flight NodeClaims compiled into the model: their
//! labels, the taints that count, and the room their pods and DaemonSets
//! leave (Karpenter's `existingnode.go`).

use std::collections::BTreeMap;

use crate::scheduling::index::{Reqs, Res, add_into, intern_reqs};
use crate::scheduling::input::ExistingNode;
use crate::scheduling::labels;
use crate::scheduling::pod::HostPort;
use crate::scheduling::requirements::Requirements;
use crate::scheduling::taints::{Taint, is_known_ephemeral};

use super::Model;
use super::types::type_compatible;

/// A node as every solve starts from it.
pub(in crate::scheduling::solver) struct NodeBase {
    /// The node as given.
    pub(in crate::scheduling::solver) source: ExistingNode,
    /// Its position in the model's nodes.
    pub(in crate::scheduling::solver) index: u32,
    /// An in-flight NodeClaim rather than a node.
    pub(in crate::scheduling::solver) in_flight: bool,
    /// Its labels (with its hostname) as requirements.
    pub(in crate::scheduling::solver) reqs: Reqs,
    /// The taints pods must tolerate (startup and ephemeral taints of a
    /// node still starting left out).
    pub(in crate::scheduling::solver) taints: Vec<Taint>,
    /// Allocatable less its pods and the DaemonSets that have yet to bind.
    pub(in crate::scheduling::solver) free: Res,
    pub(in crate::scheduling::solver) host_ports: Vec<HostPort>,
    /// Its NodePool's index in the model, for the pool's limits.
    pub(in crate::scheduling::solver) pool: Option<usize>,
    pub(in crate::scheduling::solver) capacity: Res,
    /// Its hourly price in its pool (see [`Model::node_price`]), counted
    /// against the pool's price limit.
    pub(in crate::scheduling::solver) price: f64,
}

impl Model {
    /// Compiles nodes in the order Karpenter tries them
    /// (`sortExistingNodes`): initialized nodes first, then by name. Nodes
    /// being deleted take no pods and are left out.
    pub(super) fn compile_nodes(
        &mut self,
        existing: Vec<ExistingNode>,
        in_flight: Vec<ExistingNode>,
    ) {
        let mut nodes: Vec<(ExistingNode, bool)> = existing
            .into_iter()
            .map(|n| (n, false))
            .chain(in_flight.into_iter().map(|n| (n, true)))
            .filter(|(n, _)| !n.marked_for_deletion)
            .collect();
        let initialized = |(n, in_flight): &(ExistingNode, bool)| n.initialized && !in_flight;
        nodes.sort_by(|a, b| {
            initialized(b)
                .cmp(&initialized(a))
                .then_with(|| a.0.name.cmp(&b.0.name))
        });
        for (node, in_flight) in nodes {
            let mut compiled = self.compile_node(node, in_flight);
            compiled.index = self.nodes.len() as u32;
            self.nodes.push(compiled);
        }
    }

    fn compile_node(&mut self, node: ExistingNode, in_flight: bool) -> NodeBase {
        let initialized = node.initialized && !in_flight;
        let pool = node
            .labels
            .get(labels::NODE_POOL)
            .and_then(|name| self.pools.iter().position(|p| p.name() == name));
        let mut labels = node.labels.clone();
        labels
            .entry(labels::HOSTNAME.to_string())
            .or_insert_with(|| node.name.clone());
        let label_reqs = Requirements::from_labels(labels.iter());
        let reqs = intern_reqs(&label_reqs, &mut self.keys, &mut self.values);
        let startup: &[Taint] = pool.map_or(&[], |p| &self.pools[p].spec.startup_taints);
        let taints: Vec<Taint> = node
            .taints
            .iter()
            .filter(|t| initialized || !(is_known_ephemeral(t) || startup.contains(t)))
            .cloned()
            .collect();
        let mut used = vec![0; self.res.dims()];
        let mut daemon_used = vec![0; self.res.dims()];
        let mut host_ports = Vec::new();
        for pod in &node.pods {
            let v = self.pod_vector(pod);
            add_into(&mut used, &v);
            if pod.owned_by_daemon_set() {
                add_into(&mut daemon_used, &v);
            }
            host_ports.extend(pod.host_ports.iter().cloned());
        }
        // Room for the DaemonSets that would run on the node and have not
        // bound their pod yet (Karpenter's remaining daemon resources).
        let pending = self.node_daemon_overhead(&label_reqs, &taints);
        for (d, pending) in pending.iter().enumerate() {
            used[d] += (pending - daemon_used[d]).max(0);
        }
        let alloc = self.res.vector(&node.allocatable);
        let free = alloc.iter().zip(&used).map(|(a, u)| a - u).collect();
        let capacity = self.res.vector(&node.capacity);
        let price = pool.map_or(0.0, |p| self.node_price(p, &node.labels, &reqs));
        NodeBase {
            source: node,
            index: 0,
            in_flight,
            reqs,
            taints,
            free,
            host_ports,
            pool,
            capacity,
            price,
        }
    }

    /// What a node of pool `pool` with `labels` (interned as `reqs`) costs
    /// per hour: the price of its instance type's offering in its zone and
    /// capacity type (and reservation), else the type's cheapest offering
    /// the pool may use. A NodeClaim not launched yet (no instance type)
    /// costs the cheapest of the types its labels allow; a type the pool no
    /// longer offers costs nothing.
    fn node_price(&self, pool: usize, labels: &BTreeMap<String, String>, reqs: &Reqs) -> f64 {
        let pool = &self.pools[pool];
        let Some(name) = labels.get(labels::INSTANCE_TYPE) else {
            let number = self.number();
            return pool
                .types
                .iter()
                .zip(&pool.cheapest)
                .filter(|(ty, price)| {
                    price.is_finite() && type_compatible(ty, reqs.items.iter(), &number)
                })
                .map(|(_, price)| *price)
                .reduce(f64::min)
                .unwrap_or(0.0);
        };
        let Some((t, ty)) = pool
            .types
            .iter()
            .enumerate()
            .find(|(_, ty)| &ty.name == name)
        else {
            return 0.0;
        };
        let value = |key: &str| labels.get(key).and_then(|v| self.values.get(v));
        let (zone, capacity_type) = (value(labels::ZONE), value(labels::CAPACITY_TYPE));
        let reservation = value(labels::CAPACITY_RESERVATION_ID);
        ty.offers
            .iter()
            .find(|o| {
                Some(o.zone) == zone
                    && Some(o.capacity_type_value) == capacity_type
                    && o.reservation_value == reservation
            })
            .map(|o| o.price)
            .or_else(|| pool.cheapest.get(t).copied().filter(|p| p.is_finite()))
            .unwrap_or(0.0)
    }
}
