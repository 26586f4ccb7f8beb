//! The JSONPath subset CRD printer columns and scale paths use:
//! `.a.b`, escaped dots in keys (`.labels.node\.kubernetes\.io/zone`),
//! `[n]`, `[*]` and equality filters (`[?(@.type=="Ready")]`).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.path=="value")]`
    Filter(Vec<String>, String),
}

fn parse(path: &str) -> Result<Vec<Step>, String> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut steps = Vec::new();
    let chars: Vec<char> = path.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                let mut name = String::new();
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    name.push(chars[i]);
                    i += 1;
                }
                if !name.is_empty() {
                    steps.push(Step::Field(name));
                }
            }
            '[' => {
                let end = chars[i..]
                    .iter()
                    .position(|c| *c == ']')
                    .ok_or_else(|| format!("unterminated [ in {path:?}"))?
                    + i;
                let inner: String = chars[i + 1..end].iter().collect();
                if inner == "*" {
                    steps.push(Step::All);
                } else if let Ok(index) = inner.parse() {
                    steps.push(Step::Index(index));
                } else if let Some(filter) =
                    inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
                {
                    let (field, value) = filter
                        .split_once("==")
                        .ok_or_else(|| format!("unsupported filter {inner:?} in {path:?}"))?;
                    let value = value
                        .trim()
                        .trim_matches('"')
                        .trim_matches('\'')
                        .to_string();
                    steps.push(Step::Filter(
                        field.trim().split('.').map(str::to_string).collect(),
                        value,
                    ));
                } else if let Some(key) =
                    inner.strip_prefix('\'').and_then(|k| k.strip_suffix('\''))
                {
                    steps.push(Step::Field(key.to_string()));
                } else {
                    return Err(format!("unsupported subscript [{inner}] in {path:?}"));
                }
                i = end + 1;
            }
            c => return Err(format!("unexpected {c:?} in JSONPath {path:?}")),
        }
    }
    Ok(steps)
}

/// Every value `path` selects in `object`.
pub fn find<'a>(object: &'a Value, path: &str) -> Result<Vec<&'a Value>, String> {
    let mut current = vec![object];
    for step in parse(path)? {
        let mut next = Vec::new();
        for value in current {
            match &step {
                Step::Field(name) => next.extend(value.get(name)),
                Step::Index(i) => next.extend(value.get(*i)),
                Step::All => match value {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Step::Filter(field, expected) => {
                    if let Value::Array(items) = value {
                        next.extend(items.iter().filter(|item| {
                            let found = field.iter().try_fold(*item, |v, k| v.get(k));
                            match found {
                                Some(Value::String(s)) => s == expected,
                                Some(other) => {
                                    serde_json::from_str::<Value>(expected).ok().as_ref()
                                        == Some(other)
                                }
                                None => false,
                            }
                        }));
                    }
                }
            }
        }
        current = next;
    }
    Ok(current)
}

/// The first value `path` selects, if any.
pub fn first<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    find(object, path).ok()?.into_iter().next()
}

/// Sets the value at a plain field path (`.spec.replicas`), creating objects.
pub fn set(object: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let steps = parse(path)?;
    let mut current = object;
    for (i, step) in steps.iter().enumerate() {
        let Step::Field(name) = step else {
            return Err(format!("{path:?} is not a plain field path"));
        };
        if !current.is_object() {
            *current = Value::Object(serde_json::Map::new());
        }
        if i + 1 == steps.len() {
            current[name.as_str()] = value;
            return Ok(());
        }
        current = current
            .as_object_mut()
            .map(|m| m.entry(name.clone()).or_insert(Value::Null))
            .ok_or_else(|| format!("{path:?}: not an object"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn printer_column_paths() {
        let object = json!({
            "metadata": {"labels": {"node.kubernetes.io/instance-type": "m5.large"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]},
            "spec": {"items": [1, 2]},
        });
        assert_eq!(
            first(
                &object,
                r".metadata.labels.node\.kubernetes\.io/instance-type"
            ),
            Some(&json!("m5.large"))
        );
        assert_eq!(
            first(&object, r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(&json!("True"))
        );
        assert_eq!(find(&object, ".spec.items[*]").unwrap().len(), 2);
        assert_eq!(first(&object, ".spec.items[1]"), Some(&json!(2)));
        assert_eq!(first(&object, ".spec.missing"), None);
        let mut target = json!({});
        set(&mut target, ".spec.replicas", json!(3)).unwrap();
        assert_eq!(target, json!({"spec": {"replicas": 3}}));
    }
}
