//! The room left on each NodeClaim opened by a solve, kept in a tree of
//! per-resource maxima so a pod finds the first claim (in creation order)
//! with room for it without trying every full one before it.
//!
//! A claim's room on a resource is the largest allocatable among its
//! instance-type options less what its pods request; it only shrinks as
//! pods are added. A pod can only go on a claim whose room covers its
//! requests on every resource (the first check `eval_claim` makes), so a
//! subtree whose maxima do not cover the requests holds no candidate.

/// Room per claim and resource, as a binary tree over claim indices whose
/// inner nodes hold the per-resource maximum of their leaves.
#[derive(Clone, Default)]
pub(super) struct Room {
    dims: usize,
    /// Number of leaves: a power of two, at least the number of claims.
    leaves: usize,
    /// `dims` values per tree node, node 1 the root, node `leaves + i`
    /// claim `i`; unused leaves hold `i64::MIN` and cover no pod.
    max: Vec<i64>,
}

impl Room {
    pub(super) fn new(dims: usize) -> Self {
        Room {
            dims,
            leaves: 0,
            max: Vec::new(),
        }
    }

    /// Records claim `ci`'s room from its requests and the largest
    /// allocatable of its options.
    pub(super) fn set(&mut self, ci: usize, requests: &[i64], max_alloc: &[i64]) {
        if ci >= self.leaves {
            self.grow(ci + 1);
        }
        let dims = self.dims;
        let mut node = self.leaves + ci;
        for (d, slot) in self.max[node * dims..(node + 1) * dims]
            .iter_mut()
            .enumerate()
        {
            let alloc = max_alloc.get(d).copied().unwrap_or(0);
            let used = requests.get(d).copied().unwrap_or(0);
            // `eval_claim` adds with saturation: an unbounded resource
            // (i64::MAX) has room for any request.
            *slot = if alloc == i64::MAX {
                i64::MAX
            } else {
                alloc.saturating_sub(used)
            };
        }
        while node > 1 {
            node /= 2;
            self.pull_up(node);
        }
    }

    /// The first claim at or after `from` whose room covers `need` on every
    /// resource; claims it skips could not take the pod.
    pub(super) fn next_fitting(&self, from: usize, need: &[i64]) -> Option<usize> {
        if from >= self.leaves {
            return None;
        }
        self.first(1, 0, self.leaves, from, need)
    }

    fn first(&self, node: usize, lo: usize, hi: usize, from: usize, need: &[i64]) -> Option<usize> {
        if hi <= from || !self.covers(node, need) {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = lo + (hi - lo) / 2;
        self.first(2 * node, lo, mid, from, need)
            .or_else(|| self.first(2 * node + 1, mid, hi, from, need))
    }

    fn covers(&self, node: usize, need: &[i64]) -> bool {
        let dims = self.dims;
        self.max[node * dims..(node + 1) * dims]
            .iter()
            .zip(need)
            .all(|(room, n)| n <= room)
    }

    fn pull_up(&mut self, node: usize) {
        let dims = self.dims;
        for d in 0..dims {
            let left = self.max[2 * node * dims + d];
            let right = self.max[(2 * node + 1) * dims + d];
            self.max[node * dims + d] = left.max(right);
        }
    }

    /// Rebuilds the tree with room for at least `claims` leaves.
    fn grow(&mut self, claims: usize) {
        let leaves = claims.next_power_of_two().max(64);
        let dims = self.dims;
        let mut max = vec![i64::MIN; 2 * leaves * dims];
        if self.leaves > 0 {
            let old = &self.max[self.leaves * dims..2 * self.leaves * dims];
            max[leaves * dims..leaves * dims + old.len()].copy_from_slice(old);
        }
        self.leaves = leaves;
        self.max = max;
        for node in (1..leaves).rev() {
            self.pull_up(node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Room;

    /// The tree agrees with trying every claim in order.
    #[test]
    fn finds_the_first_claim_with_room_for_a_pod() {
        let mut room = Room::new(2);
        let mut rooms: Vec<[i64; 2]> = Vec::new();
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as i64 % 10
        };
        for ci in 0..300 {
            let alloc = [next() + 5, next() + 5];
            let used = [next(), next()];
            room.set(ci, &used, &alloc);
            rooms.push([alloc[0] - used[0], alloc[1] - used[1]]);
            if ci % 3 == 0 {
                // A claim taking another pod: its room shrinks.
                let back = ci / 2;
                let more = [used[0] + 2, used[1] + 1];
                room.set(back, &more, &alloc);
                rooms[back] = [alloc[0] - more[0], alloc[1] - more[1]];
            }
            for need in [[0, 0], [3, 4], [8, 2], [12, 12], [1, 9]] {
                for from in [0, ci / 2, ci] {
                    let expected =
                        (from..=ci).find(|&c| rooms[c][0] >= need[0] && rooms[c][1] >= need[1]);
                    assert_eq!(
                        room.next_fitting(from, &need),
                        expected,
                        "need {need:?} from {from}"
                    );
                }
            }
        }
        assert_eq!(room.next_fitting(300, &[0, 0]), None);
    }

    #[test]
    fn an_unbounded_resource_has_room_for_anything() {
        let mut room = Room::new(1);
        room.set(0, &[5], &[i64::MAX]);
        assert_eq!(room.next_fitting(0, &[i64::MAX]), Some(0));
        room.set(1, &[5], &[10]);
        assert_eq!(room.next_fitting(1, &[6]), None);
        assert_eq!(room.next_fitting(1, &[5]), Some(1));
    }
}
