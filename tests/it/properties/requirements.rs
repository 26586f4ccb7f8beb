//! The requirements algebra against a brute-force model: over a small
//! universe of label values, a requirement accepts exactly what the
//! Kubernetes/Karpenter operator says, and an intersection accepts exactly
//! what both sides accept, in either order.

use nodewright::scheduling::{Operator, Requirement, Requirements};
use proptest::prelude::*;

/// Label values the model checks membership of: words and integers, with
/// the integers on both sides of every bound the generator uses.
const UNIVERSE: &[&str] = &[
    "a", "b", "c", "-3", "-1", "0", "1", "2", "3", "4", "7", "10", "007", "+2", "x1",
];

const OPERATORS: [Operator; 8] = [
    Operator::In,
    Operator::NotIn,
    Operator::Exists,
    Operator::DoesNotExist,
    Operator::Gt,
    Operator::Lt,
    Operator::Gte,
    Operator::Lte,
];

/// An operator with values that fit it, as a NodePool or pod would write it.
fn written() -> impl Strategy<Value = (Operator, Vec<String>)> {
    let listed = proptest::sample::subsequence(UNIVERSE.to_vec(), 0..5)
        .prop_map(|v| v.into_iter().map(str::to_string).collect::<Vec<_>>());
    (0..OPERATORS.len(), listed, -4i64..12).prop_map(|(op, listed, bound)| {
        let operator = OPERATORS[op];
        let values = match operator {
            Operator::In | Operator::NotIn => listed,
            Operator::Exists | Operator::DoesNotExist => Vec::new(),
            _ => vec![bound.to_string()],
        };
        (operator, values)
    })
}

/// What Kubernetes says a present label value `v` satisfies.
fn model(operator: Operator, values: &[String], v: &str) -> bool {
    let number = |s: &str| s.parse::<i64>().ok();
    let bound = || values.first().and_then(|b| number(b.trim()));
    let compare = |f: fn(i64, i64) -> bool| match (number(v), bound()) {
        (Some(n), Some(b)) => f(n, b),
        _ => false,
    };
    match operator {
        Operator::In => values.iter().any(|x| x == v),
        Operator::NotIn => !values.iter().any(|x| x == v),
        Operator::Exists => true,
        Operator::DoesNotExist => false,
        Operator::Gt => compare(|n, b| n > b),
        Operator::Lt => compare(|n, b| n < b),
        Operator::Gte => compare(|n, b| n >= b),
        Operator::Lte => compare(|n, b| n <= b),
    }
}

fn build(key: &str, (operator, values): &(Operator, Vec<String>)) -> Requirement {
    Requirement::from_parts(key, *operator, values.clone())
        .unwrap_or_else(|e| panic!("{operator} {values:?} is well-formed: {e}"))
}

proptest! {
    #![proptest_config(super::config(256))]

    /// One requirement accepts exactly what its operator says.
    #[test]
    fn a_requirement_accepts_what_its_operator_says(w in written()) {
        let r = build("k", &w);
        for v in UNIVERSE {
            prop_assert_eq!(r.has(v), model(w.0, &w.1, v), "{} on {:?}", r, v);
        }
    }

    /// `a ∩ b` accepts a value iff both do; `a ∩ b == b ∩ a`; an empty
    /// result has no member; a listed (non-complement) result's values are
    /// all members.
    #[test]
    fn intersection_is_commutative_and_agrees_with_the_model(a in written(), b in written()) {
        let (ra, rb) = (build("k", &a), build("k", &b));
        let ab = ra.intersection(&rb);
        let ba = rb.intersection(&ra);
        prop_assert_eq!(&ab, &ba, "{} ∩ {}", ra, rb);
        for v in UNIVERSE {
            prop_assert_eq!(
                ab.has(v),
                model(a.0, &a.1, v) && model(b.0, &b.1, v),
                "({}) ∩ ({}) = {} on {:?}", ra, rb, ab, v
            );
        }
        if ab.values.is_empty() {
            prop_assert!(!UNIVERSE.iter().any(|v| ab.has(v)), "{} claims empty", ab);
        }
        if !ab.values.is_complement() {
            for v in ab.values.values() {
                prop_assert!(ab.has(v), "{} lists {:?} but rejects it", ab, v);
            }
        }
    }

    /// Intersection is associative (as sets of accepted values and as
    /// data), so the order requirements arrive in never matters.
    #[test]
    fn intersection_is_associative(a in written(), b in written(), c in written()) {
        let (ra, rb, rc) = (build("k", &a), build("k", &b), build("k", &c));
        let left = ra.intersection(&rb).intersection(&rc);
        let right = ra.intersection(&rb.intersection(&rc));
        prop_assert_eq!(&left, &right, "({} ∩ {}) ∩ {}", ra, rb, rc);
    }

    /// `Requirements::add` in any order gives the same conjunction, and a
    /// value common to both sides of a key means `intersects` holds.
    #[test]
    fn requirements_are_order_independent_and_intersect_when_a_value_is_shared(
        items in proptest::collection::vec((0..3usize, written()), 1..6),
        other in proptest::collection::vec((0..3usize, written()), 1..4),
        rotate in 0..6usize,
    ) {
        const KEYS: [&str; 3] = ["k0", "k1", "example.com/team"];
        let reqs: Vec<Requirement> = items.iter().map(|(k, w)| build(KEYS[*k], w)).collect();
        let forward: Requirements = reqs.iter().cloned().collect();
        let mut turned = reqs.clone();
        turned.rotate_left(rotate % reqs.len());
        turned.reverse();
        let backward: Requirements = turned.into_iter().collect();
        prop_assert_eq!(&forward, &backward);

        let theirs: Requirements = other.iter().map(|(k, w)| build(KEYS[*k], w)).collect();
        let shared_everywhere = theirs.iter().all(|t| match forward.get(&t.key) {
            None => true,
            Some(ours) => UNIVERSE.iter().any(|v| ours.has(v) && t.has(v)),
        });
        if shared_everywhere {
            prop_assert!(forward.intersects(&theirs).is_ok(), "{} vs {}", forward, theirs);
        }
    }
}
