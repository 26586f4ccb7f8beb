//! A CRD schema's `x-kubernetes-validations` rules, evaluated only at the
//! schema nodes that carry them.
//!
//! kube's evaluator, handed a whole object, converts the subtree under every
//! schema node it visits into a CEL value, so an object is converted once
//! per level of its depth, and it recompiles the regular expression of
//! every `find()` on every call. That made admitting one NodeClaim cost
//! nearly two milliseconds of CPU. Here the schema is split once into the nodes
//! with rules ([`RuleTree`]): an object is walked down to them, each node's
//! own rules run on its own value, and a value that passed a node's rules
//! once (with the same old value) is not evaluated there again: a
//! requirement key is the same string in every NodeClaim, and a claim's
//! spec is the same on each of its status writes. Values are remembered by
//! a 128-bit keyed digest. The rules and their results are kube's; only
//! where they run from changes.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::Mutex;

use kube::core::cel::{CompiledSchema, ValidationError, Validator, compile_schema};
use serde_json::Value;

const RULES: &str = "x-kubernetes-validations";
const BRANCHES: [&str; 3] = ["allOf", "oneOf", "anyOf"];
/// Passes remembered before the memo starts again.
const MEMO_LIMIT: usize = 4096;

/// A value that passed a node's rules: (node id, digest of the value,
/// digest of the old value).
type Pass = (usize, u128, Option<u128>);

/// The rules of one schema, compiled per node that carries them.
#[derive(Debug)]
pub struct SchemaRules {
    tree: RuleTree,
    /// Values that passed a node's rules.
    passed: Mutex<HashSet<Pass>>,
    /// The keys of the two 64-bit halves of a digest.
    digest_keys: [RandomState; 2],
}

/// One schema node on the way to rules.
#[derive(Debug)]
struct RuleTree {
    id: usize,
    /// The node's own rules, compiled over [`own_schema`].
    own: Option<CompiledSchema>,
    /// Whether the node's rules all compare with `oldSelf`, so they do not
    /// run on a create.
    transition_only: bool,
    properties: Vec<(String, RuleTree)>,
    items: Option<Box<RuleTree>>,
    /// Rules of map values (`additionalProperties`).
    additional: Option<Box<RuleTree>>,
}

impl SchemaRules {
    /// Splits `schema` (an `openAPIV3Schema`) at the nodes with rules.
    pub fn new(schema: &Value) -> Self {
        let mut next_id = 0;
        let tree = RuleTree::new(schema, &mut next_id).unwrap_or_else(RuleTree::empty);
        SchemaRules {
            tree,
            passed: Mutex::new(HashSet::new()),
            digest_keys: [RandomState::new(), RandomState::new()],
        }
    }

    /// Runs every rule on `object` (already defaulted); `old` is the stored
    /// object on updates. Field paths are kube's (`spec.a[0].b`).
    pub fn validate(
        &self,
        validator: &Validator,
        object: &Value,
        old: Option<&Value>,
    ) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        self.walk(&self.tree, validator, object, old, "", &mut errors);
        errors
    }

    fn walk(
        &self,
        node: &RuleTree,
        validator: &Validator,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        errors: &mut Vec<ValidationError>,
    ) {
        if let Some(own) = &node.own
            && !(node.transition_only && old.is_none())
        {
            self.run_own(node.id, own, validator, value, old, path, errors);
        }
        if let Value::Object(map) = value {
            let mut field = |child: &RuleTree, key: &str, child_value: &Value| {
                let child_old = old.and_then(|o| o.get(key));
                let child_path = join(path, key);
                self.walk(
                    child,
                    validator,
                    child_value,
                    child_old,
                    &child_path,
                    errors,
                );
            };
            for (key, child) in &node.properties {
                if let Some(child_value) = map.get(key) {
                    field(child, key, child_value);
                }
            }
            if let Some(additional) = &node.additional {
                for (key, child_value) in map {
                    if !node.properties.iter().any(|(name, _)| name == key) {
                        field(additional, key, child_value);
                    }
                }
            }
        }
        if let (Some(items), Value::Array(values)) = (&node.items, value) {
            for (i, item) in values.iter().enumerate() {
                let item_old = old.and_then(|o| o.get(i));
                let item_path = format!("{path}[{i}]");
                self.walk(items, validator, item, item_old, &item_path, errors);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_own(
        &self,
        id: usize,
        own: &CompiledSchema,
        validator: &Validator,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        errors: &mut Vec<ValidationError>,
    ) {
        let key = (id, self.digest(value), old.map(|old| self.digest(old)));
        if self.passed().contains(&key) {
            return;
        }
        match validator.validate_compiled(own, value, old) {
            Ok(()) => {
                let mut passed = self.passed();
                if passed.len() >= MEMO_LIMIT {
                    passed.clear();
                }
                passed.insert(key);
            }
            Err(found) => errors.extend(found.into_vec().into_iter().map(|mut error| {
                error.field_path = under(path, &error.field_path);
                error
            })),
        }
    }

    /// A 128-bit digest of `value` under this process's random keys.
    fn digest(&self, value: &Value) -> u128 {
        let [high, low] = self.digest_keys.each_ref().map(|keys| {
            let mut hasher = keys.build_hasher();
            feed(value, &mut hasher);
            hasher.finish()
        });
        (u128::from(high) << 64) | u128::from(low)
    }

    fn passed(&self) -> std::sync::MutexGuard<'_, HashSet<Pass>> {
        self.passed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RuleTree {
    fn empty() -> Self {
        RuleTree {
            id: 0,
            own: None,
            transition_only: false,
            properties: Vec::new(),
            items: None,
            additional: None,
        }
    }

    /// The node for `schema`, or `None` when nothing under it has rules.
    fn new(schema: &Value, next_id: &mut usize) -> Option<Self> {
        if !has_rules(schema) {
            return None;
        }
        *next_id += 1;
        let id = *next_id;
        // Rules inside allOf/oneOf/anyOf run where kube runs them: the node
        // is evaluated whole, as before the split.
        let branched = BRANCHES.iter().any(|b| {
            schema
                .get(*b)
                .and_then(Value::as_array)
                .is_some_and(|branches| branches.iter().any(has_rules))
        });
        if branched {
            return Some(RuleTree {
                id,
                own: Some(compile_schema(schema)),
                ..RuleTree::empty()
            });
        }
        let own = schema
            .get(RULES)
            .and_then(Value::as_array)
            .is_some_and(|rules| !rules.is_empty())
            .then(|| compile_schema(&own_schema(schema)));
        let transition_only = own.as_ref().is_some_and(|own| {
            own.validations.iter().all(|rule| {
                rule.as_ref().is_ok_and(|compiled| {
                    compiled.is_transition_rule && compiled.rule.optional_old_self != Some(true)
                })
            })
        });
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| {
                properties
                    .iter()
                    .filter_map(|(key, child)| Some((key.clone(), RuleTree::new(child, next_id)?)))
                    .collect()
            })
            .unwrap_or_default();
        let items = schema
            .get("items")
            .and_then(|items| RuleTree::new(items, next_id))
            .map(Box::new);
        let preserve =
            schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        let additional = schema
            .get("additionalProperties")
            .filter(|a| a.is_object() && !preserve)
            .and_then(|a| RuleTree::new(a, next_id))
            .map(Box::new);
        Some(RuleTree {
            id,
            own,
            transition_only,
            properties,
            items,
            additional,
        })
    }
}

/// Whether `schema` or anything under it declares rules.
fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.iter().any(|(key, child)| match key.as_str() {
            RULES => child.as_array().is_some_and(|rules| !rules.is_empty()),
            "properties" => child
                .as_object()
                .is_some_and(|properties| properties.values().any(has_rules)),
            "items" | "additionalProperties" => has_rules(child),
            b if BRANCHES.contains(&b) => child.as_array().is_some_and(|b| b.iter().any(has_rules)),
            _ => false,
        }),
        _ => false,
    }
}

/// The schema a node's own rules are compiled over: its rules, and of what
/// is under it only what changes how a value converts to CEL. kube walks
/// whatever schema it is given, converting the value again at every level,
/// and a plain subtree converts the same without its schema.
fn own_schema(schema: &Value) -> Value {
    let mut own = conversion_only(schema);
    if let (Some(rules), Value::Object(map)) = (schema.get(RULES), &mut own) {
        map.insert(RULES.to_string(), rules.clone());
    }
    own
}

/// `schema` without rules or branches, and without the children that are
/// [`plain`]; a map whose values are plain stays a map (`true`), since map
/// keys are not escaped.
fn conversion_only(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut kept = serde_json::Map::new();
    for (key, child) in map {
        let child = match key.as_str() {
            RULES => continue,
            b if BRANCHES.contains(&b) => continue,
            "properties" => {
                let typed: serde_json::Map<String, Value> = child
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, property)| !plain(property))
                    .map(|(name, property)| (name.clone(), conversion_only(property)))
                    .collect();
                if typed.is_empty() {
                    continue;
                }
                Value::Object(typed)
            }
            "items" if plain(child) => continue,
            "additionalProperties" if child.is_object() && plain(child) => Value::Bool(true),
            "items" | "additionalProperties" => conversion_only(child),
            _ => child.clone(),
        };
        kept.insert(key.clone(), child);
    }
    Value::Object(kept)
}

/// Whether values of `schema` convert to CEL the same with and without it:
/// no date-time, duration or byte format, no map, no embedded resource,
/// anywhere under it.
fn plain(schema: &Value) -> bool {
    let format = schema.get("format").and_then(Value::as_str);
    !matches!(format, Some("date-time" | "duration" | "byte"))
        && schema.get("x-kubernetes-embedded-resource") != Some(&Value::Bool(true))
        && matches!(
            schema.get("additionalProperties"),
            None | Some(Value::Bool(false))
        )
        && schema
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|properties| properties.values().all(plain))
        && schema.get("items").is_none_or(plain)
}

/// Feeds `value` to `hasher`, tagged by kind and length so that different
/// values feed different streams.
fn feed(value: &Value, hasher: &mut impl Hasher) {
    match value {
        Value::Null => hasher.write_u8(0),
        Value::Bool(b) => {
            hasher.write_u8(1);
            b.hash(hasher);
        }
        Value::Number(n) => {
            hasher.write_u8(2);
            n.hash(hasher);
        }
        Value::String(s) => {
            hasher.write_u8(3);
            s.hash(hasher);
        }
        Value::Array(items) => {
            hasher.write_u8(4);
            hasher.write_usize(items.len());
            items.iter().for_each(|item| feed(item, hasher));
        }
        Value::Object(map) => {
            hasher.write_u8(5);
            hasher.write_usize(map.len());
            for (key, child) in map {
                key.hash(hasher);
                feed(child, hasher);
            }
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A field path kube reported relative to a node, under the node's `path`.
fn under(path: &str, relative: &str) -> String {
    if path.is_empty() {
        relative.to_string()
    } else if relative.is_empty() {
        path.to_string()
    } else if relative.starts_with('.') || relative.starts_with('[') {
        format!("{path}{relative}")
    } else {
        format!("{path}.{relative}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{examples, schema};
    use kube::core::cel::compile_schema;
    use serde_json::json;

    /// (field, message) pairs, sorted.
    type Reported = Vec<(String, String)>;

    /// (field, message) pairs, sorted, as `SchemaRules` reports them and as
    /// kube's evaluator reports them over the whole object.
    fn both(schema: &Value, object: &Value, old: Option<&Value>) -> (Reported, Reported) {
        let validator = Validator::new();
        let pairs = |errors: Vec<ValidationError>| {
            let mut pairs: Reported = errors
                .into_iter()
                .map(|e| (e.field_path, e.message))
                .collect();
            pairs.sort();
            pairs
        };
        let split = pairs(SchemaRules::new(schema).validate(&validator, object, old));
        let whole = validator
            .validate_compiled(&compile_schema(schema), object, old)
            .err()
            .map(|e| e.into_vec())
            .unwrap_or_default();
        (split, pairs(whole))
    }

    fn set(object: &mut Value, pointer: &str, value: Value) {
        *object.pointer_mut(pointer).expect(pointer) = value;
    }

    #[test]
    fn node_claim_rules_report_what_the_whole_object_evaluation_reports() {
        let schema = schema("NodeClaim");
        let claim = examples("nodeclaims").remove(0);
        let mut bad = claim.clone();
        set(
            &mut bad,
            "/spec/requirements/0/key",
            json!("karpenter.sh/unknown"),
        );
        set(
            &mut bad,
            "/spec/requirements/1/key",
            json!("kubernetes.io/hostname"),
        );
        set(&mut bad, "/spec/requirements/2/values", json!([]));
        set(&mut bad, "/spec/requirements/3/values", json!(["-1"]));
        set(&mut bad, "/spec/nodeClassRef/group", json!(""));
        let mut changed = claim.clone();
        set(&mut changed, "/spec/expireAfter", json!("1h"));

        for (object, old, expected) in [
            (&claim, None, 0),
            (&claim, Some(&claim), 0),
            (&bad, None, 5),
            (&changed, Some(&claim), 1),
            (&changed, None, 0),
        ] {
            let (split, whole) = both(&schema, object, old);
            assert_eq!(split, whole);
            assert_eq!(split.len(), expected, "{split:?}");
        }
        let (split, _) = both(&schema, &changed, Some(&claim));
        assert_eq!(split[0].0, "spec", "{split:?}");
        let (split, _) = both(&schema, &bad, None);
        assert!(
            split
                .iter()
                .any(|(field, _)| field == "spec.requirements[0].key"),
            "{split:?}"
        );
    }

    #[test]
    fn node_pool_and_class_rules_report_what_the_whole_object_evaluation_reports() {
        for (kind, dir) in [
            ("NodePool", "nodepools"),
            ("EC2NodeClass", "ec2nodeclasses"),
        ] {
            let schema = schema(kind);
            for example in examples(dir) {
                let (split, whole) = both(&schema, &example, None);
                assert_eq!(split, whole, "{kind}");
                assert_eq!(split, [], "{kind}: the examples are valid");
                let (split, whole) = both(&schema, &example, Some(&example));
                assert_eq!(split, whole, "{kind} update");
            }
        }
        let schema = schema("NodePool");
        let mut pool = examples("nodepools")
            .into_iter()
            .find(|p| p.pointer("/spec/template/metadata/labels").is_some())
            .expect("a NodePool example with template labels");
        set(
            &mut pool,
            "/spec/template/metadata/labels",
            json!({"karpenter.sh/nodepool": "x", "kubernetes.io/hostname": "y"}),
        );
        let (split, whole) = both(&schema, &pool, None);
        assert_eq!(split, whole);
        assert_eq!(split.len(), 2, "{split:?}");
    }

    #[test]
    fn a_remembered_pass_never_hides_a_failure() {
        let schema = json!({
            "type": "object",
            "properties": {"keys": {"type": "array", "items": {
                "type": "string",
                "x-kubernetes-validations": [{"rule": "!self.find('^([^/]+)').endsWith('reserved.io')", "message": "reserved"}],
            }}},
        });
        let rules = SchemaRules::new(&schema);
        let validator = Validator::new();
        let object = json!({"keys": ["a.io/x", "reserved.io/y", "a.io/x", "reserved.io/y"]});
        for _ in 0..2 {
            let errors = rules.validate(&validator, &object, None);
            let fields: Vec<&str> = errors.iter().map(|e| e.field_path.as_str()).collect();
            assert_eq!(fields, ["keys[1]", "keys[3]"]);
        }
    }

    #[test]
    fn values_keep_their_cel_types_where_the_schema_gives_them() {
        let schema = json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.at.inner < timestamp('2030-01-01T00:00:00Z')", "message": "too late"},
                    {"rule": "self.wait.every > duration('1m')", "message": "too short"},
                    {"rule": "self.labels.all(k, k.startsWith('a/'))", "message": "bad key"},
                    {"rule": "self.name__dash__part == 'x'", "message": "bad name"},
                ],
                "properties": {
                    "at": {"type": "object", "properties": {"inner": {"type": "string", "format": "date-time"}}},
                    "wait": {"type": "object", "properties": {"every": {"type": "string", "format": "duration"}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "name-part": {"type": "string"},
                },
            }},
        });
        let good = json!({"spec": {"at": {"inner": "2026-01-01T00:00:00Z"}, "wait": {"every": "5m"},
            "labels": {"a/b": "1"}, "name-part": "x"}});
        let bad = json!({"spec": {"at": {"inner": "2031-01-01T00:00:00Z"}, "wait": {"every": "30s"},
            "labels": {"b/c": "1"}, "name-part": "y"}});
        let (split, whole) = both(&schema, &good, None);
        assert_eq!(split, whole);
        assert_eq!(split, []);
        let (split, whole) = both(&schema, &bad, None);
        assert_eq!(split, whole);
        let messages: Vec<&str> = split.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(messages, ["bad key", "bad name", "too late", "too short"]);
    }

    #[test]
    fn a_remembered_pass_is_per_value_and_old_value() {
        let schema = json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}],
                "properties": {"a": {"type": "array", "items": {"type": "string"}}},
            }},
        });
        let rules = SchemaRules::new(&schema);
        let validator = Validator::new();
        let first = json!({"spec": {"a": ["x", "y"]}});
        let changed = json!({"spec": {"a": ["x", "z"]}});
        for _ in 0..2 {
            assert!(rules.validate(&validator, &first, Some(&first)).is_empty());
            assert!(
                rules
                    .validate(&validator, &changed, Some(&changed))
                    .is_empty()
            );
            let errors = rules.validate(&validator, &changed, Some(&first));
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(errors[0].message, "immutable");
        }
    }

    #[test]
    fn rules_under_branches_run_on_the_whole_node() {
        let schema = json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "allOf": [{"x-kubernetes-validations": [{"rule": "self.a > 1", "message": "a is too small"}]}],
            }},
        });
        let object = json!({"spec": {"a": 1}});
        let (split, whole) = both(&schema, &object, None);
        assert_eq!(split, whole);
        assert_eq!(split, [("spec".to_string(), "a is too small".to_string())]);
    }
}
