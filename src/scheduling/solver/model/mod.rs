//! The scheduling model: everything about a cluster that does not change
//! while pods are placed — NodePools with their instance types, offerings
//! and DaemonSet overhead, capacity reservations, and the nodes already
//! there — compiled once and shared (behind an `Arc`) by every solve over
//! it. A what-if ("without these nodes, where would these pods go?") reads
//! the model and pays only for its own pods.

pub(super) mod daemonsets;
pub(super) mod nodes;
pub(super) mod pools;
pub(super) mod running;
pub(super) mod types;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use crate::scheduling::index::{Ids, Interner, ResourceNames};
use crate::scheduling::input::{ExistingNode, SchedulerInput, SchedulerOptions, SchedulingResult};
use crate::scheduling::instance_type::CapacityType;
use crate::scheduling::labels;
use crate::scheduling::pod::Pod;

pub(super) use daemonsets::DaemonSetIdx;
pub(super) use nodes::NodeBase;
pub(super) use pools::PoolIdx;

use super::State;

/// A cluster compiled for scheduling: build it once with
/// [`Model::compile`], then [`Model::solve`] any pods against any subset of
/// its nodes, as often as needed.
pub struct Model {
    pub(super) keys: Interner,
    pub(super) values: Interner,
    pub(super) res: ResourceNames,
    pub(super) k_zone: u32,
    pub(super) k_ct: u32,
    pub(super) k_host: u32,
    pub(super) k_reservation: u32,
    pub(super) v_reserved: u32,
    pub(super) well_known: HashSet<u32>,
    pub(super) daemonsets: Vec<DaemonSetIdx>,
    /// By descending weight, then name.
    pub(super) pools: Vec<PoolIdx>,
    /// Capacity of each reservation an offering names.
    pub(super) reservation_capacity: Vec<u32>,
    /// Existing nodes and in-flight NodeClaims, in the order they are tried.
    pub(super) nodes: Vec<NodeBase>,
    /// Each node's index in `nodes`, by name.
    node_index: HashMap<String, usize>,
    /// The pods running on `nodes`.
    pub(super) running: running::RunningPods,
    pub(super) options: SchedulerOptions,
    pub(super) namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// The input's pending pods, for [`Model::solve_pending`].
    pending: Vec<Pod>,
    /// [`Model::pool_domains`] already worked out, by label key.
    pool_domains: Mutex<HashMap<u32, pools::PoolDomains>>,
}

impl Model {
    /// Compiles NodePools, DaemonSets and nodes of `input`. Resource
    /// dimensions are those of every pool, node and pod in it; its pending
    /// pods are kept for [`Model::solve_pending`].
    pub fn compile(input: SchedulerInput) -> Model {
        let mut keys = Interner::default();
        let mut values = Interner::default();
        let k_zone = keys.id(labels::ZONE);
        let k_ct = keys.id(labels::CAPACITY_TYPE);
        let k_host = keys.id(labels::HOSTNAME);
        let k_reservation = keys.id(labels::CAPACITY_RESERVATION_ID);
        let v_reserved = values.id(CapacityType::Reserved.label_value());
        let well_known = labels::WELL_KNOWN_LABELS
            .iter()
            .map(|k| keys.id(k))
            .collect();

        let mut res = ResourceNames::default();
        for pool in &input.node_pools {
            for it in pool.instance_types.iter() {
                res.register(&it.capacity);
            }
        }
        for pod in input.pods.iter().chain(&input.daemonsets) {
            res.register(&pod.requests);
        }
        for node in input.existing_nodes.iter().chain(&input.in_flight) {
            res.register(&node.allocatable);
            for pod in &node.pods {
                res.register(&pod.requests);
            }
        }
        let SchedulerInput {
            node_pools,
            existing_nodes,
            in_flight,
            pods,
            daemonsets,
            namespace_labels,
            options,
        } = input;
        let mut model = Model {
            keys,
            values,
            res,
            k_zone,
            k_ct,
            k_host,
            k_reservation,
            v_reserved,
            well_known,
            daemonsets: Vec::new(),
            pools: Vec::new(),
            reservation_capacity: Vec::new(),
            nodes: Vec::new(),
            node_index: HashMap::new(),
            running: running::RunningPods::default(),
            options,
            namespace_labels,
            pending: pods,
            pool_domains: Mutex::default(),
        };
        model.compile_daemonsets(daemonsets);
        model.compile_pools(&node_pools);
        model.compile_nodes(existing_nodes, in_flight);
        model.node_index = model
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.source.name.clone(), i))
            .collect();
        model.running = running::RunningPods::index(&model.nodes);
        model.compile_inverse_groups();
        model
    }

    /// Places `pods` on the nodes `keep` admits (and on new NodeClaims).
    /// The result is what a fresh [`Scheduler`](super::Scheduler) solve of
    /// the same input without the other nodes and with these pods gives.
    pub fn solve<'p>(
        &self,
        keep: impl Fn(&ExistingNode) -> bool,
        pods: impl IntoIterator<Item = &'p Pod>,
    ) -> SchedulingResult {
        let pods: Vec<&Pod> = pods.into_iter().collect();
        if pods.iter().any(|p| !self.res.knows(&p.requests)) {
            // A resource no pool, node or pod of the model names: the
            // vectors have no place for it, so solve on a fresh model.
            return self.recompiled(&keep, &pods).solve_pending();
        }
        let nodes: Vec<&NodeBase> = self.nodes.iter().filter(|n| keep(&n.source)).collect();
        State::prepare(self, &nodes, &pods).run()
    }

    /// [`Model::solve`] on every node but those at `without` (indices into
    /// [`Model::nodes`]): what disruption's what-ifs ask, without a name
    /// comparison per node.
    pub fn solve_without<'p>(
        &self,
        without: &[usize],
        pods: impl IntoIterator<Item = &'p Pod>,
    ) -> SchedulingResult {
        let pods: Vec<&Pod> = pods.into_iter().collect();
        let kept = |i: usize| !without.contains(&i);
        if pods.iter().any(|p| !self.res.knows(&p.requests)) {
            let names: Vec<&str> = without
                .iter()
                .filter_map(|&i| self.nodes.get(i))
                .map(|n| n.source.name.as_str())
                .collect();
            let keep = |n: &ExistingNode| !names.contains(&n.name.as_str());
            return self.recompiled(&keep, &pods).solve_pending();
        }
        let nodes: Vec<&NodeBase> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| kept(*i))
            .map(|(_, n)| n)
            .collect();
        State::prepare(self, &nodes, &pods).run()
    }

    /// [`Model::solve_without`] where the nodes at `closed` take none of
    /// the `moving` pods: a consolidation does not move pods onto a node
    /// within its `consolidateAfter` (Karpenter v1.14), while pending pods
    /// and those of deleting nodes may land there. Of pods of the same
    /// size, `others` are tried first: the pods of nodes already going
    /// claim the room made for them (a replacement still launching) before
    /// a what-if's pods.
    pub fn solve_moving<'p>(
        &self,
        without: &[usize],
        closed: &[usize],
        moving: impl IntoIterator<Item = &'p Pod>,
        others: impl IntoIterator<Item = &'p Pod>,
    ) -> SchedulingResult {
        let mut pods: Vec<&Pod> = others.into_iter().collect();
        let first_moving = pods.len();
        pods.extend(moving);
        let count = pods.len() - first_moving;
        if closed.is_empty() {
            return self.solve_without(without, pods);
        }
        let closed_names: Vec<&str> = closed
            .iter()
            .filter_map(|&i| self.nodes.get(i))
            .map(|n| n.source.name.as_str())
            .collect();
        if pods.iter().any(|p| !self.res.knows(&p.requests)) {
            let names: Vec<&str> = without
                .iter()
                .filter_map(|&i| self.nodes.get(i))
                .map(|n| n.source.name.as_str())
                .collect();
            let keep = |n: &ExistingNode| !names.contains(&n.name.as_str());
            let model = self.recompiled(&keep, &pods);
            let closed: Vec<usize> = closed_names
                .iter()
                .filter_map(|n| model.node_index(n))
                .collect();
            let nodes: Vec<&NodeBase> = model.nodes.iter().collect();
            return State::prepare_closed(&model, &nodes, &pods, &closed, count).run();
        }
        let (nodes, closed): (Vec<&NodeBase>, Vec<usize>) = {
            let kept: Vec<(usize, &NodeBase)> = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(i, _)| !without.contains(i))
                .collect();
            let closed = kept
                .iter()
                .enumerate()
                .filter(|(_, (i, _))| closed.contains(i))
                .map(|(slot, _)| slot)
                .collect();
            (kept.into_iter().map(|(_, n)| n).collect(), closed)
        };
        State::prepare_closed(self, &nodes, &pods, &closed, count).run()
    }

    /// Places the input's pending pods on every node.
    pub fn solve_pending(&self) -> SchedulingResult {
        self.solve(|_| true, &self.pending)
    }

    /// The nodes of the model (existing nodes and in-flight NodeClaims).
    pub fn nodes(&self) -> impl Iterator<Item = &ExistingNode> {
        self.nodes.iter().map(|n| &n.source)
    }

    /// The index in [`Model::nodes`] of the node called `name`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    /// The node at `index` in [`Model::nodes`].
    pub fn node(&self, index: usize) -> Option<&ExistingNode> {
        self.nodes.get(index).map(|n| &n.source)
    }

    /// The input's pending pods.
    pub fn pending_pods(&self) -> &[Pod] {
        &self.pending
    }

    /// Each NodePool with a `nodewright.io/price-limit-per-hour`: its limit
    /// and what its nodes and in-flight NodeClaims cost per hour, as the
    /// solve counts them against it.
    pub fn price_limits(&self) -> Vec<PoolSpend> {
        self.pools
            .iter()
            .enumerate()
            .filter_map(|(i, pool)| {
                let limit = pool.price_limit?;
                let nodes_per_hour = self
                    .nodes
                    .iter()
                    .filter(|n| n.pool == Some(i))
                    .fold(0.0, |total, n| total + n.price);
                Some(PoolSpend {
                    node_pool: pool.name().to_string(),
                    limit_per_hour: limit,
                    nodes_per_hour,
                })
            })
            .collect()
    }

    fn recompiled(&self, keep: &impl Fn(&ExistingNode) -> bool, pods: &[&Pod]) -> Model {
        let (mut existing_nodes, mut in_flight) = (Vec::new(), Vec::new());
        for node in self.nodes.iter().filter(|n| keep(&n.source)) {
            let list = if node.in_flight {
                &mut in_flight
            } else {
                &mut existing_nodes
            };
            list.push(node.source.clone());
        }
        Model::compile(SchedulerInput {
            node_pools: self.pools.iter().map(|p| p.spec.clone()).collect(),
            existing_nodes,
            in_flight,
            pods: pods.iter().map(|p| (*p).clone()).collect(),
            daemonsets: self.daemonsets.iter().map(|d| d.pod.clone()).collect(),
            namespace_labels: self.namespace_labels.clone(),
            options: self.options.clone(),
        })
    }

    /// A pod running on one of the model's nodes.
    pub(super) fn pod_at(&self, at: running::PodAt) -> Option<&Pod> {
        running::pod_at(&self.nodes, at)
    }

    pub(super) fn number(&self) -> impl Fn(&u32) -> Option<i64> + '_ {
        |v| self.values.number(*v)
    }
}

/// A NodePool's price limit and what its standing nodes cost against it.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSpend {
    /// The NodePool.
    pub node_pool: String,
    /// `nodewright.io/price-limit-per-hour`.
    pub limit_per_hour: f64,
    /// Its nodes and in-flight NodeClaims, at their offering prices.
    pub nodes_per_hour: f64,
}

/// Reservation index by id while offerings are compiled.
pub(super) type ReservationIds = HashMap<String, usize>;
