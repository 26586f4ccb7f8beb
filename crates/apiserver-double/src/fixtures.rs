//! Test fixtures from the workspace the double lives in: nodewright's
//! generated CRDs (`crds/`, which nodewright's own tests keep equal to its
//! API types) and its examples (`examples/`). They are the largest real
//! schemas and objects the double validates, read as files so that the
//! double does not depend on nodewright.

use serde_json::Value;

/// The workspace root.
fn root() -> String {
    format!("{}/../..", env!("CARGO_MANIFEST_DIR"))
}

/// Every YAML document in `dir` (under the workspace root), as JSON.
fn documents(dir: &str) -> Vec<Value> {
    let dir = format!("{}/{dir}", root());
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixture directory")
        .map(|entry| entry.expect("entry").path())
        .collect();
    paths.sort();
    let found: Vec<Value> = paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            crate::yaml::to_json(&text).expect("fixture YAML")
        })
        .collect();
    assert!(!found.is_empty(), "no fixtures in {dir}");
    found
}

/// The OpenAPI v3 schema of the CRD of `kind` in `crds/`.
pub fn schema(kind: &str) -> Value {
    documents("crds")
        .into_iter()
        .find(|crd| crd.pointer("/spec/names/kind").and_then(Value::as_str) == Some(kind))
        .and_then(|crd| {
            crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
                .cloned()
        })
        .expect("schema")
}

/// Each example in `examples/<dir>`, as JSON.
pub fn examples(dir: &str) -> Vec<Value> {
    documents(&format!("examples/{dir}"))
}
