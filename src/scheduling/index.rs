//! Pre-indexed, interned forms of labels, requirements and resources that the
//! solver's hot loop works on: label keys and values become `u32` ids and
//! resources become fixed-length integer vectors.

use std::collections::HashMap;

use super::requirements::{Operator, Requirement, Requirements, ValueSet, label_number};
use super::resources::Resources;

/// Reads and adds interned ids: the model's frozen [`Interner`], or a
/// solve's view of it with the ids that solve added.
pub(crate) trait Ids {
    /// The id of `text`, added if new.
    fn id(&mut self, text: &str) -> u32;
    /// The text of `id` (empty for an unknown id).
    fn name(&self, id: u32) -> &str;
    /// The integer reading of `id`'s text, for `Gt`/`Lt`.
    fn number(&self, id: u32) -> Option<i64>;
}

/// Interned strings with their integer reading (for Gt/Lt).
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
    numbers: Vec<Option<i64>>,
}

impl Interner {
    /// The id of `text`, if it was interned.
    pub(crate) fn get(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// How many strings are interned (the next id).
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

impl Ids for Interner {
    fn id(&mut self, text: &str) -> u32 {
        if let Some(id) = self.ids.get(text) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(text.to_string(), id);
        self.names.push(text.to_string());
        self.numbers.push(text.parse().ok());
        id
    }

    fn name(&self, id: u32) -> &str {
        self.names
            .get(id as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    fn number(&self, id: u32) -> Option<i64> {
        self.numbers.get(id as usize).copied().flatten()
    }
}

/// A value set over interned ids.
pub(crate) type Set = ValueSet<u32>;

/// One interned requirement.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Req {
    pub key: u32,
    pub set: Set,
    pub min_values: Option<u32>,
}

/// Interned requirements sorted by key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Reqs {
    pub items: Vec<Req>,
}

impl Reqs {
    pub(crate) fn get(&self, key: u32) -> Option<&Req> {
        self.items
            .binary_search_by_key(&key, |r| r.key)
            .ok()
            .and_then(|i| self.items.get(i))
    }

    /// Intersects `req` into these requirements.
    pub(crate) fn add(&mut self, req: Req, values: &impl Ids) {
        let number = |v: &u32| values.number(*v);
        match self.items.binary_search_by_key(&req.key, |r| r.key) {
            Ok(i) => {
                let existing = &mut self.items[i];
                existing.set = existing.set.intersection(&req.set, &number);
                existing.min_values = existing.min_values.max(req.min_values);
            }
            Err(i) => self.items.insert(i, req),
        }
    }

    pub(crate) fn add_all(&mut self, other: &Reqs, values: &impl Ids) {
        for req in &other.items {
            self.add(req.clone(), values);
        }
    }
}

/// Interns a requirement.
pub(crate) fn intern_req(req: &Requirement, keys: &mut impl Ids, values: &mut impl Ids) -> Req {
    let set = req.values.clone();
    let ids: Vec<u32> = set.values().iter().map(|v| values.id(v)).collect();
    let interned = match set.operator() {
        Operator::In | Operator::DoesNotExist => ValueSet::of(ids),
        _ => {
            if set.greater_than().is_some() || set.less_than().is_some() {
                let bounded: Set = ValueSet::bounded(set.greater_than(), set.less_than());
                let except: Set = ValueSet::except(ids);
                bounded.intersection(&except, &|v: &u32| values.number(*v))
            } else {
                ValueSet::except(ids)
            }
        }
    };
    Req {
        key: keys.id(&req.key),
        set: interned,
        min_values: req.min_values,
    }
}

/// Interns a set of requirements.
pub(crate) fn intern_reqs(reqs: &Requirements, keys: &mut impl Ids, values: &mut impl Ids) -> Reqs {
    let mut out = Reqs::default();
    for r in reqs.iter() {
        let req = intern_req(r, keys, values);
        out.add(req, values);
    }
    out
}

/// Turns interned requirements back into the public form.
pub(crate) fn export_reqs(reqs: &Reqs, keys: &impl Ids, values: &impl Ids) -> Requirements {
    reqs.items
        .iter()
        .map(|r| export_req(r, keys, values))
        .collect()
}

pub(crate) fn export_req(r: &Req, keys: &impl Ids, values: &impl Ids) -> Requirement {
    let names: Vec<String> = r
        .set
        .values()
        .iter()
        .map(|v| values.name(*v).to_string())
        .collect();
    let set = if r.set.is_complement() {
        let bounded: ValueSet<String> = ValueSet::bounded(r.set.greater_than(), r.set.less_than());
        bounded.intersection(&ValueSet::except(names), &label_number)
    } else {
        ValueSet::of(names)
    };
    Requirement {
        key: keys.name(r.key).to_string(),
        values: set,
        min_values: r.min_values,
    }
}

/// Fixed-length resource vector: cpu, memory, ephemeral storage, pods, then
/// extended resources by interned index.
pub(crate) type Res = Vec<i64>;

pub(crate) const DIM_PODS: usize = 3;

/// Maps extended resource names to vector positions.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResourceNames {
    extended: HashMap<String, usize>,
    pub names: Vec<String>,
}

impl ResourceNames {
    pub(crate) fn register(&mut self, resources: &Resources) {
        for name in resources.extended.keys() {
            if !self.extended.contains_key(name) {
                self.extended.insert(name.clone(), 4 + self.names.len());
                self.names.push(name.clone());
            }
        }
    }

    /// Whether every extended resource of `resources` has a position.
    pub(crate) fn knows(&self, resources: &Resources) -> bool {
        resources
            .extended
            .keys()
            .all(|name| self.extended.contains_key(name))
    }

    pub(crate) fn dims(&self) -> usize {
        4 + self.names.len()
    }

    pub(crate) fn vector(&self, r: &Resources) -> Res {
        let mut out = vec![0; self.dims()];
        out[0] = r.cpu_millis;
        out[1] = r.memory;
        out[2] = r.ephemeral_storage;
        out[3] = r.pods;
        for (name, amount) in &r.extended {
            if let Some(i) = self.extended.get(name) {
                out[*i] = *amount;
            }
        }
        out
    }

    pub(crate) fn resources(&self, v: &[i64]) -> Resources {
        let mut out = Resources {
            cpu_millis: v.first().copied().unwrap_or(0),
            memory: v.get(1).copied().unwrap_or(0),
            ephemeral_storage: v.get(2).copied().unwrap_or(0),
            pods: v.get(3).copied().unwrap_or(0),
            ..Resources::default()
        };
        for (i, name) in self.names.iter().enumerate() {
            let amount = v.get(4 + i).copied().unwrap_or(0);
            if amount != 0 {
                out.extended.insert(name.clone(), amount);
            }
        }
        out
    }

    pub(crate) fn name(&self, dim: usize) -> &str {
        match dim {
            0 => "cpu",
            1 => "memory",
            2 => "ephemeral-storage",
            3 => "pods",
            d => self.names.get(d - 4).map(String::as_str).unwrap_or("?"),
        }
    }
}

/// `a + b <= c` in every dimension.
#[inline]
pub(crate) fn fits_sum(a: &[i64], b: &[i64], c: &[i64]) -> bool {
    a.iter()
        .zip(b)
        .zip(c)
        .all(|((x, y), z)| x.saturating_add(*y) <= *z)
}

/// First dimension where `a + b > c`.
pub(crate) fn shortfall(a: &[i64], b: &[i64], c: &[i64]) -> Option<usize> {
    a.iter()
        .zip(b)
        .zip(c)
        .position(|((x, y), z)| x.saturating_add(*y) > *z)
}

pub(crate) fn add_into(a: &mut [i64], b: &[i64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}
