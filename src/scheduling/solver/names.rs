//! A solve's view of the model's frozen interner: the model's ids as they
//! are, plus the ids of keys and values only this solve's pods and nodes
//! name, so a what-if never changes the shared model.

use crate::scheduling::index::{Ids, Interner};

/// The model's interner and the ids one solve added after it.
#[derive(Clone)]
pub(super) struct Names<'m> {
    base: &'m Interner,
    /// Ids from `base.len()` on.
    extra: Interner,
}

impl<'m> Names<'m> {
    pub(super) fn new(base: &'m Interner) -> Self {
        Names {
            base,
            extra: Interner::default(),
        }
    }

    fn offset(&self) -> u32 {
        self.base.len() as u32
    }
}

impl Ids for Names<'_> {
    fn id(&mut self, text: &str) -> u32 {
        if let Some(id) = self.base.get(text) {
            return id;
        }
        self.offset() + self.extra.id(text)
    }

    fn name(&self, id: u32) -> &str {
        match id.checked_sub(self.offset()) {
            Some(extra) => self.extra.name(extra),
            None => self.base.name(id),
        }
    }

    #[inline]
    fn number(&self, id: u32) -> Option<i64> {
        match id.checked_sub(self.offset()) {
            Some(extra) => self.extra.number(extra),
            None => self.base.number(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_names_follow_the_base_and_leave_it_unchanged() {
        let mut base = Interner::default();
        let zone = base.id("zone-a");
        let mut names = Names::new(&base);
        assert_eq!(names.id("zone-a"), zone);
        let fresh = names.id("42");
        assert_eq!(fresh, 1);
        assert_eq!(names.name(fresh), "42");
        assert_eq!(names.number(fresh), Some(42));
        assert_eq!(names.name(zone), "zone-a");
        assert_eq!(base.get("42"), None);
    }
}
