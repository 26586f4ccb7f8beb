//! Structured mutation of JSON documents: a seed manifest with one value at
//! one path replaced, removed or retyped, remembering the path so a
//! rejection can be checked to name it.

use proptest::prelude::*;
use serde_json::{Value, json};

/// Values a field may be replaced with: the right type with odd contents,
/// and every wrong type.
pub(crate) fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        proptest::sample::select(vec![
            0i64,
            -1,
            1,
            3,
            100,
            i64::from(i32::MIN),
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ])
        .prop_map(|n| json!(n)),
        Just(json!(1.5)),
        proptest::sample::select(vec![
            "",
            "Never",
            "5m",
            "720h",
            "-1s",
            "1.5h",
            "10%",
            "-3",
            "abc",
            "In",
            "Like",
            "NoSchedule",
            "WhenEmpty",
            "Drifted",
            "al2023@latest",
            "Exists",
            "Gt",
            "1e3",
            "500m",
            "Infinity",
            "karpenter.sh/nodepool",
            "a/b/c",
            "@daily",
            "*/5 * * * *",
            "\u{0}",
            "é",
            "Ki",
        ])
        .prop_map(|s| json!(s)),
        Just(json!([])),
        Just(json!(["x", 1])),
        Just(json!({})),
        Just(json!({"unexpected": true})),
    ]
}

/// One step of a JSON path, rendered the way `serde_path_to_error` does.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

pub(crate) fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() { ".".to_string() } else { out }
}

/// Every path in `value`, parents before children.
pub(crate) fn paths(value: &Value) -> Vec<Vec<Step>> {
    fn walk(value: &Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        out.push(here.clone());
        match value {
            Value::Object(fields) => {
                for (k, v) in fields {
                    here.push(Step::Key(k.clone()));
                    walk(v, here, out);
                    here.pop();
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    here.push(Step::Index(i));
                    walk(v, here, out);
                    here.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// `value` with the node at `path` replaced by `new` (or removed).
pub(crate) fn replace(value: &mut Value, path: &[Step], new: Option<Value>) {
    let Some((last, parents)) = path.split_last() else {
        if let Some(new) = new {
            *value = new;
        }
        return;
    };
    let mut node = value;
    for step in parents {
        node = match (step, node) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k).expect("path exists"),
            (Step::Index(i), Value::Array(a)) => &mut a[*i],
            _ => unreachable!("paths() follows the value"),
        };
    }
    match (last, node, new) {
        (Step::Key(k), Value::Object(m), Some(new)) => {
            m.insert(k.clone(), new);
        }
        (Step::Key(k), Value::Object(m), None) => {
            m.remove(k);
        }
        (Step::Index(i), Value::Array(a), Some(new)) => a[*i] = new,
        (Step::Index(i), Value::Array(a), None) => {
            a.remove(*i);
        }
        _ => unreachable!("paths() follows the value"),
    }
}

/// A seed with one mutation, and the path mutated.
pub(crate) fn mutated(seeds: Vec<Value>) -> impl Strategy<Value = (Value, String)> {
    (
        proptest::sample::select(seeds),
        any::<proptest::sample::Index>(),
        proptest::option::weighted(0.85, odd_value()),
    )
        .prop_map(|(mut seed, at, new)| {
            let all = paths(&seed);
            let path = all[at.index(all.len())].clone();
            // Removing the root is not a mutation; replace it instead.
            let new = if path.is_empty() {
                new.or(Some(Value::Null))
            } else {
                new
            };
            replace(&mut seed, &path, new);
            (seed, render(&path))
        })
}

/// Every document of the YAML files in `dir` (relative to the repository).
pub(crate) fn seeds(dirs: &[&str], kinds: &[&str]) -> Vec<Value> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in dirs {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .expect("examples directory")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("example");
            nodewright::yaml::each_document(&text, |index, value| {
                let value =
                    value.map_err(|e| format!("{} (document {index}): {e}", file.display()))?;
                let kind = value
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if kinds.contains(&kind) {
                    out.push(value);
                }
                Ok::<(), String>(())
            })
            .expect("example is YAML");
        }
    }
    assert!(!out.is_empty(), "no {kinds:?} under {dirs:?}");
    out
}
