//! Requirements of a node or claim with the changes one placement would
//! make, so a candidate is tried without copying its requirements.

use crate::scheduling::index::{Ids, Req, Reqs, Set};

/// Requirements of a node or claim with the changes one placement would make.
pub(super) struct Overlay<'a> {
    pub(super) base: &'a Reqs,
    pub(super) changes: Vec<Req>,
}

impl<'a> Overlay<'a> {
    pub(super) fn new(base: &'a Reqs) -> Self {
        Overlay {
            base,
            changes: Vec::new(),
        }
    }

    pub(super) fn get(&self, key: u32) -> Option<&Req> {
        self.changes
            .iter()
            .find(|r| r.key == key)
            .or_else(|| self.base.get(key))
    }

    /// Intersects `set` into `key`; false when the two share no value.
    pub(super) fn narrow(
        &mut self,
        key: u32,
        set: &Set,
        min_values: Option<u32>,
        values: &impl Ids,
    ) -> bool {
        let number = |v: &u32| values.number(*v);
        let next = match self.get(key) {
            Some(current) => {
                if !current.set.intersects(set, &number) {
                    return false;
                }
                let merged = Req {
                    key,
                    set: current.set.intersection(set, &number),
                    min_values: current.min_values.max(min_values),
                };
                if merged == *current {
                    return true;
                }
                merged
            }
            None => Req {
                key,
                set: set.clone(),
                min_values,
            },
        };
        match self.changes.iter_mut().find(|r| r.key == key) {
            Some(slot) => *slot = next,
            None => self.changes.push(next),
        }
        true
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &Req> {
        let changed: Vec<u32> = self.changes.iter().map(|r| r.key).collect();
        self.base
            .items
            .iter()
            .filter(move |r| !changed.contains(&r.key))
            .chain(self.changes.iter())
    }
}
