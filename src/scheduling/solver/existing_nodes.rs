//! Nodes already in the cluster and in-flight NodeClaims: their free
//! capacity and whether a pod fits on one (Karpenter's `existingnode.go`).

use crate::scheduling::index::{Reqs, Res, add_into, intern_reqs, shortfall};
use crate::scheduling::input::{ExistingNode, SchedulerInput};
use crate::scheduling::labels;
use crate::scheduling::pod::HostPort;
use crate::scheduling::requirements::Requirements;
use crate::scheduling::taints::{Taint, first_untolerated, is_known_ephemeral};

use super::overlay::Overlay;
use super::{Current, NODE_NAME_FIELD, Solver, positive};

pub(super) struct NodeSlot {
    pub(super) name: String,
    pub(super) reqs: Reqs,
    pub(super) taints: Vec<Taint>,
    pub(super) free: Res,
    pub(super) host_ports: Vec<HostPort>,
    pub(super) host_counts: Vec<(u32, i32)>,
}

/// Existing nodes and in-flight NodeClaims in the order Karpenter tries them
/// (`sortExistingNodes`): initialized nodes first, then by name. Nodes being
/// deleted take no pods and are left out. The flag marks in-flight NodeClaims.
pub(super) fn ordered_nodes(input: &SchedulerInput) -> Vec<(&ExistingNode, bool)> {
    let mut nodes: Vec<(&ExistingNode, bool)> = input
        .existing_nodes
        .iter()
        .map(|n| (n, false))
        .chain(input.in_flight.iter().map(|n| (n, true)))
        .filter(|(n, _)| !n.marked_for_deletion)
        .collect();
    let initialized = |(n, in_flight): &(&ExistingNode, bool)| n.initialized && !in_flight;
    nodes.sort_by(|a, b| {
        initialized(b)
            .cmp(&initialized(a))
            .then_with(|| a.0.name.cmp(&b.0.name))
    });
    nodes
}

impl Solver<'_> {
    pub(super) fn prepare_nodes(&mut self) {
        let input = self.input;
        for (node, in_flight) in ordered_nodes(input) {
            let initialized = node.initialized && !in_flight;
            let pool = node
                .labels
                .get(labels::NODE_POOL)
                .and_then(|name| self.pools.iter().position(|p| &p.name == name));
            let mut labels = node.labels.clone();
            labels
                .entry(labels::HOSTNAME.to_string())
                .or_insert_with(|| node.name.clone());
            let reqs = intern_reqs(
                &Requirements::from_labels(labels.iter()),
                &mut self.keys,
                &mut self.values,
            );
            let startup: Vec<Taint> = pool
                .and_then(|p| {
                    input
                        .node_pools
                        .iter()
                        .find(|s| s.name == self.pools[p].name)
                })
                .map(|s| s.startup_taints.clone())
                .unwrap_or_default();
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
                if pod.owner_kind.as_deref() == Some("DaemonSet") {
                    add_into(&mut daemon_used, &v);
                }
                host_ports.extend(pod.host_ports.iter().cloned());
            }
            // Room for the DaemonSets that would run on the node and have not
            // bound their pod yet (Karpenter's remaining daemon resources).
            let pending =
                self.node_daemon_overhead(&Requirements::from_labels(labels.iter()), &taints);
            for (d, pending) in pending.iter().enumerate() {
                used[d] += (pending - daemon_used[d]).max(0);
            }
            let alloc = self.res.vector(&node.allocatable);
            let free = alloc.iter().zip(&used).map(|(a, u)| a - u).collect();
            if let Some(p) = pool {
                if let Some(n) = self.pools[p].nodes_remaining.as_mut() {
                    *n -= 1;
                }
                let capacity = self.res.vector(&node.capacity);
                for (r, c) in self.pools[p].remaining.iter_mut().zip(capacity) {
                    if *r != i64::MAX {
                        *r -= c;
                    }
                }
            }
            self.nodes.push(NodeSlot {
                name: node.name.clone(),
                reqs,
                taints,
                free,
                host_ports,
                host_counts: Vec::new(),
            });
        }
    }

    pub(super) fn eval_node(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        node: &NodeSlot,
    ) -> Result<(), String> {
        let p = &self.pods[pi];
        if let Some(d) = shortfall(&p.requests, &vec![0; p.requests.len()], &node.free) {
            return Err(why!(explain, "not enough {}", self.res.name(d)));
        }
        if let Some(fields) = p.required_fields.get(cur.required_term)
            && !fields
                .iter()
                .all(|f| f.key == NODE_NAME_FIELD && f.has(&node.name))
        {
            return Err(why!(
                explain,
                "node name does not satisfy matchFields {fields}"
            ));
        }
        let tolerations = &self.input.pods[p.input].tolerations;
        if let Some(t) = first_untolerated(&node.taints, tolerations, !cur.tolerate_prefer) {
            return Err(why!(explain, "did not tolerate taint {t}"));
        }
        self.check_ports(explain, pi, &node.host_ports)?;
        self.check_hostname_groups(explain, pi, cur, &node.host_counts)?;
        let number = |v: &u32| self.values.number(*v);
        for r in &cur.reqs.items {
            match node.reqs.get(r.key) {
                Some(label) if label.set.intersects(&r.set, &number) => {}
                None if !positive(r.set.operator()) => {}
                _ => {
                    return Err(why!(
                        explain,
                        "node labels do not satisfy {}",
                        self.describe_req(r)
                    ));
                }
            }
        }
        for &g in &cur.groups {
            let group = &self.groups[g as usize];
            if !group.hostname && node.reqs.get(group.id.key).is_none() {
                return Err(why!(
                    explain,
                    "node has no {} label for the pod's topology constraint",
                    self.keys.name(group.id.key)
                ));
            }
        }
        let mut ov = Overlay::new(&node.reqs);
        self.topology_narrow(explain, pi, cur, &mut ov)
    }
}
