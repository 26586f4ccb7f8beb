//! Which preferences a pod still holds and the order they are dropped in
//! when nothing fits (Karpenter's `preferences.go`).

use super::{Current, State};

#[derive(Default)]
pub(super) struct PodState {
    pub(super) required_term: usize,
    pub(super) preferred_node: usize,
    pub(super) preferred_affinity: usize,
    pub(super) preferred_anti: usize,
    pub(super) soft_spread: usize,
    pub(super) tolerate_prefer: bool,
}

impl State<'_> {
    pub(super) fn initial_state(&self, pi: usize) -> PodState {
        if !self.m.options.ignore_preferences {
            return PodState::default();
        }
        let p = &self.pods[pi];
        PodState {
            required_term: 0,
            preferred_node: p.preferred_terms.len(),
            preferred_affinity: p.pref_aff.len(),
            preferred_anti: p.pref_anti.len(),
            soft_spread: p.spread_soft.len(),
            tolerate_prefer: true,
        }
    }

    /// Karpenter's relaxation order; false when nothing is left to relax.
    pub(super) fn relax(&self, pi: usize, st: &mut PodState) -> bool {
        let p = &self.pods[pi];
        if st.required_term + 1 < p.required_terms.len() {
            st.required_term += 1;
        } else if st.preferred_affinity < p.pref_aff.len() {
            st.preferred_affinity += 1;
        } else if st.preferred_anti < p.pref_anti.len() {
            st.preferred_anti += 1;
        } else if st.preferred_node < p.preferred_terms.len() {
            st.preferred_node += 1;
        } else if st.soft_spread < p.spread_soft.len() {
            st.soft_spread += 1;
        } else if !st.tolerate_prefer {
            st.tolerate_prefer = true;
        } else {
            return false;
        }
        true
    }

    pub(super) fn current(&self, pi: usize, st: &PodState) -> Current {
        let p = &self.pods[pi];
        let mut reqs = p.base.clone();
        if let Some(term) = p.required_terms.get(st.required_term) {
            reqs.add_all(term, &self.values);
        }
        let strict = reqs.clone();
        if let Some(term) = p.preferred_terms.get(st.preferred_node) {
            reqs.add_all(term, &self.values);
        }
        let mut groups = p.req_aff.clone();
        groups.extend(p.pref_aff.iter().skip(st.preferred_affinity));
        groups.extend(&p.req_anti);
        groups.extend(p.pref_anti.iter().skip(st.preferred_anti));
        groups.extend(&p.spread_hard);
        groups.extend(p.spread_soft.iter().skip(st.soft_spread));
        Current {
            required_term: st.required_term,
            reqs,
            strict,
            groups,
            tolerate_prefer: st.tolerate_prefer,
        }
    }
}
