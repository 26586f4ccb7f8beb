//! Existing nodes and in-flight NodeClaims during a solve: their free
//! capacity and whether a pod fits on one (Karpenter's `existingnode.go`).

use std::borrow::Cow;

use crate::scheduling::index::Ids;
use crate::scheduling::pod::HostPort;
use crate::scheduling::taints::first_untolerated;

use super::model::NodeBase;
use super::overlay::Overlay;
use super::{Current, NODE_NAME_FIELD, State, positive};

/// A node of the model as this solve has filled it. Free capacity and
/// host ports are the model's until a pod lands (copied on first write):
/// a what-if touches a few of a thousand nodes.
#[derive(Clone)]
pub(super) struct NodeSlot<'m> {
    pub(super) base: &'m NodeBase,
    pub(super) free: Cow<'m, [i64]>,
    pub(super) host_ports: Cow<'m, [HostPort]>,
    pub(super) host_counts: Vec<(u32, i32)>,
    /// Takes no moving pod (see [`Model::solve_moving`](super::Model::solve_moving)).
    pub(super) closed_to_moving: bool,
}

impl<'m> NodeSlot<'m> {
    pub(super) fn new(base: &'m NodeBase) -> Self {
        NodeSlot {
            base,
            free: Cow::Borrowed(&base.free),
            host_ports: Cow::Borrowed(&base.host_ports),
            host_counts: Vec::new(),
            closed_to_moving: false,
        }
    }
}

impl State<'_> {
    pub(super) fn eval_node(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        node: &NodeSlot,
    ) -> Result<(), String> {
        let p = &self.pods[pi];
        if p.moving && node.closed_to_moving {
            return Err(why!(
                explain,
                "the node takes no pods moved off other nodes now"
            ));
        }
        if let Some(d) = p
            .requests
            .iter()
            .zip(node.free.iter())
            .position(|(r, f)| r > f)
        {
            return Err(why!(explain, "not enough {}", self.m.res.name(d)));
        }
        if let Some(fields) = p.required_fields.get(cur.required_term)
            && !fields
                .iter()
                .all(|f| f.key == NODE_NAME_FIELD && f.has(&node.base.source.name))
        {
            return Err(why!(
                explain,
                "node name does not satisfy matchFields {fields}"
            ));
        }
        if let Some(t) = first_untolerated(&node.base.taints, &p.tolerations, !cur.tolerate_prefer)
        {
            return Err(why!(explain, "did not tolerate taint {t}"));
        }
        self.check_ports(explain, pi, &node.host_ports)?;
        self.check_hostname_groups(explain, pi, cur, &node.host_counts)?;
        let number = self.number();
        for r in &cur.reqs.items {
            match node.base.reqs.get(r.key) {
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
            if !group.hostname && node.base.reqs.get(group.id.key).is_none() {
                return Err(why!(
                    explain,
                    "node has no {} label for the pod's topology constraint",
                    self.keys.name(group.id.key)
                ));
            }
        }
        let mut ov = Overlay::new(&node.base.reqs);
        self.topology_narrow(explain, pi, cur, &mut ov)
    }
}
