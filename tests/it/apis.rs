//! API types: generated CRDs are current, examples round-trip and validate
//! against the CRD schemas (structural + CEL), and bad manifests are refused
//! with a message naming the field.

#[path = "apis_overlay_rules.rs"]
mod overlay_rules;
#[path = "apis_rules.rs"]
mod rules;
#[path = "apis_validator.rs"]
mod validator;

use std::collections::BTreeSet;
use std::path::PathBuf;

use nodewright::apis::extensions::{BUILTIN_AVAILABLE_AMIS, BUILTIN_FLEX_FIRST};
use nodewright::apis::{EC2NodeClass, FailurePolicy, ModuleSource, NodeClaim, NodePool, crds};
use nodewright::sim::manifests::{ManifestError, Manifests, documents};
use serde_json::{Value, json};

/// A document typed by the manifest reader: one of the three kinds, or another.
#[derive(Debug)]
enum Manifest {
    NodePool(Box<NodePool>),
    NodeClaim(Box<NodeClaim>),
    EC2NodeClass(Box<EC2NodeClass>),
    Other,
}

impl Manifest {
    fn to_value(&self) -> Result<Value, serde_json::Error> {
        match self {
            Manifest::NodePool(v) => serde_json::to_value(v),
            Manifest::NodeClaim(v) => serde_json::to_value(v),
            Manifest::EC2NodeClass(v) => serde_json::to_value(v),
            Manifest::Other => Ok(Value::Null),
        }
    }
}

/// Types one document through the manifest reader.
fn parse_value(index: usize, document: Value) -> Result<Manifest, ManifestError> {
    let mut read = Manifests::default();
    read.add_document(&format!("document {index}"), document)?;
    Ok(if let Some(pool) = read.node_pools.pop() {
        Manifest::NodePool(Box::new(pool))
    } else if let Some(claim) = read.node_claims.pop() {
        Manifest::NodeClaim(Box::new(claim))
    } else if let Some(class) = read.node_classes.pop() {
        Manifest::EC2NodeClass(Box::new(class))
    } else {
        Manifest::Other
    })
}

/// The documents of a YAML stream, as JSON.
fn yaml_documents(yaml: &str) -> Result<Vec<Value>, ManifestError> {
    Ok(documents("example", yaml)?
        .into_iter()
        .map(|d| d.value)
        .collect())
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `crds/*.yaml` must equal `generate()`. With `NODEWRIGHT_UPDATE_CRDS=1` the
/// files are rewritten instead.
#[test]
fn crds_are_up_to_date() {
    let dir = repo_root().join("crds");
    let generated = crds::generate().unwrap();
    assert_eq!(generated.len(), 4);
    if std::env::var_os("NODEWRIGHT_UPDATE_CRDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, yaml) in &generated {
            std::fs::write(dir.join(name), yaml).unwrap();
        }
    }
    let mut stale = Vec::new();
    for (name, yaml) in &generated {
        let path = dir.join(name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if &on_disk != yaml {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "CRDs are stale: {stale:?}. Regenerate them with `cargo run -- crds --output-dir crds` \
         (or `NODEWRIGHT_UPDATE_CRDS=1 cargo test --test it apis::crds_are_up_to_date`)"
    );
    let names: Vec<&str> = generated.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "karpenter.sh_nodepools.yaml",
            "karpenter.sh_nodeclaims.yaml",
            "karpenter.k8s.aws_ec2nodeclasses.yaml",
            "karpenter.sh_nodeoverlays.yaml"
        ]
    );
}

/// The example directories this module owns (other areas add their own).
const EXAMPLE_DIRS: &[&str] = &[
    "examples/nodepools",
    "examples/ec2nodeclasses",
    "examples/nodeclaims",
];

/// Files of other example directories that hold only this module's kinds.
const EXAMPLE_FILES: &[&str] = &[
    "examples/workloads/placement-group/ec2nodeclasses.yaml",
    "examples/workloads/placement-group/nodepools.yaml",
];

/// Every YAML document of the example directories and files, with its file.
fn example_documents() -> Vec<(String, Value)> {
    let mut documents = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in EXAMPLE_DIRS {
        let mut in_dir: Vec<PathBuf> = std::fs::read_dir(repo_root().join(dir))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
            .collect();
        in_dir.sort();
        files.extend(in_dir);
    }
    files.extend(EXAMPLE_FILES.iter().map(|f| repo_root().join(f)));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file
            .strip_prefix(repo_root())
            .unwrap()
            .display()
            .to_string();
        for document in yaml_documents(&text).unwrap() {
            documents.push((name.clone(), document));
        }
    }
    assert!(documents.len() >= 12, "examples are missing");
    documents
}

/// The `openAPIV3Schema` of the CRD serving `kind`, as JSON.
fn schema_for(kind: &str) -> Value {
    let crd = crds::definitions()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"));
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    serde_json::to_value(schema).unwrap()
}

fn kind(document: &Value) -> &str {
    document["kind"].as_str().unwrap()
}

/// Compares what we serialized with what the manifest said. The only change
/// allowed is the one the API server makes too: an int-or-string quantity
/// written as a number comes back as the same digits in a string.
fn assert_same(schema: &Value, original: &Value, serialized: &Value, path: &str) {
    match (original, serialized) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child_path = format!("{path}.{key}");
                let child_schema = schema
                    .get("properties")
                    .and_then(|p| p.get(key.as_str()))
                    .or_else(|| schema.get("additionalProperties"))
                    .cloned()
                    .unwrap_or(Value::Null);
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => assert_same(&child_schema, x, y, &child_path),
                    (Some(_), None) => panic!("{child_path}: dropped by the typed round trip"),
                    (None, Some(y)) => panic!("{child_path}: added by the typed round trip ({y})"),
                    (None, None) => unreachable!(),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: length changed");
            let item_schema = schema.get("items").cloned().unwrap_or(Value::Null);
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_same(&item_schema, x, y, &format!("{path}[{i}]"));
            }
        }
        (Value::Number(n), Value::String(s))
            if schema.get("x-kubernetes-int-or-string") == Some(&json!(true)) =>
        {
            assert_eq!(&n.to_string(), s, "{path}: quantity changed");
        }
        (a, b) => assert_eq!(a, b, "{path}: value changed"),
    }
}

/// Parse every example into its type, serialize it back, compare as JSON.
#[test]
fn examples_round_trip_through_the_types() {
    let mut typed = 0;
    for (file, document) in example_documents() {
        let manifest = parse_value(0, document.clone())
            .unwrap_or_else(|e| panic!("{file}: does not parse: {e}"));
        assert!(
            !matches!(manifest, Manifest::Other),
            "{file}: not one of our kinds"
        );
        let serialized = manifest.to_value().unwrap();
        assert_same(&schema_for(kind(&document)), &document, &serialized, &file);
        typed += 1;
    }
    assert!(typed >= 12);
}

/// Every example passes the generated CRD's structural schema and CEL rules.
#[test]
fn examples_validate_against_generated_crds() {
    for (file, document) in example_documents() {
        let errors = validator::validate(&schema_for(kind(&document)), &document, None);
        assert!(errors.is_empty(), "{file}: {errors:#?}");
        // Updating an object to itself must pass the transition rules too.
        let errors = validator::validate(&schema_for(kind(&document)), &document, Some(&document));
        assert!(errors.is_empty(), "{file} (update): {errors:#?}");
    }
}

/// Property paths of a schema (`spec.template.spec.requirements[].key`), map
/// values as `*`, stopping at preserve-unknown-fields.
fn schema_paths(schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (key, child) in properties {
            let child_path = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            out.insert(child_path.clone());
            schema_paths(child, &child_path, out);
        }
    }
    if let Some(items) = schema.get("items") {
        schema_paths(items, &format!("{path}[]"), out);
    }
    if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        schema_paths(additional, &format!("{path}.*"), out);
    }
}

fn value_paths(schema: &Value, value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            for (key, child) in map {
                if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
                    let child_path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    out.insert(child_path.clone());
                    value_paths(child_schema, child, &child_path, out);
                } else if let Some(additional) = schema.get("additionalProperties") {
                    value_paths(additional, child, &format!("{path}.*"), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    value_paths(item_schema, item, &format!("{path}[]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Together the examples set every field of the three CRDs (spec and status).
#[test]
fn examples_cover_every_field() {
    let documents = example_documents();
    for kind_name in ["NodePool", "NodeClaim", "EC2NodeClass"] {
        let schema = schema_for(kind_name);
        let mut wanted = BTreeSet::new();
        schema_paths(&schema, "", &mut wanted);
        wanted.retain(|p| p.starts_with("spec") || p.starts_with("status"));
        // Set by the node lifecycle on live taints; meaningless in a NodePool template.
        wanted.remove("spec.template.spec.taints[].timeAdded");
        wanted.remove("spec.template.spec.startupTaints[].timeAdded");
        let mut seen = BTreeSet::new();
        for (_, document) in documents.iter().filter(|(_, d)| kind(d) == kind_name) {
            value_paths(&schema, document, "", &mut seen);
        }
        // The three extension lists share one entry type: cover its fields once.
        let entry = |paths: BTreeSet<String>| -> BTreeSet<String> {
            paths
                .into_iter()
                .map(|p| {
                    [
                        "spec.extensions.amiSelector",
                        "spec.extensions.instanceFilters[]",
                        "spec.extensions.priorityScorers[]",
                    ]
                    .iter()
                    .find_map(|prefix| {
                        p.strip_prefix(prefix)
                            .map(|rest| format!("spec.extensions.<entry>{rest}"))
                    })
                    .unwrap_or(p)
                })
                .collect()
        };
        let (wanted, seen) = (entry(wanted), entry(seen));
        let missing: Vec<&String> = wanted.difference(&seen).collect();
        assert!(
            missing.is_empty(),
            "{kind_name}: no example sets {missing:#?}"
        );
    }
}

#[test]
fn the_manifest_reader_types_every_kind_and_keeps_config_maps() {
    let yaml = format!(
        "{}\n---\n{}\n---\n{}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n",
        std::fs::read_to_string(repo_root().join("examples/nodepools/static.yaml")).unwrap(),
        std::fs::read_to_string(repo_root().join("examples/nodeclaims/nodeclaim.yaml")).unwrap(),
        std::fs::read_to_string(repo_root().join("examples/ec2nodeclasses/windows.yaml")).unwrap(),
    );
    let mut manifests = Manifests::default();
    manifests.add_yaml("examples", &yaml).unwrap();
    assert_eq!(manifests.node_pools.len(), 1);
    assert_eq!(manifests.node_pools[0].spec.replicas, Some(3));
    assert_eq!(manifests.node_claims.len(), 1);
    assert_eq!(manifests.node_classes.len(), 1);
    assert_eq!(manifests.config_maps.len(), 1);
}

#[test]
fn typed_parse_errors_name_the_field() {
    let mut document = load("examples/nodepools/general-purpose.yaml");
    document["spec"]["template"]["spec"]["requirements"][1]["operator"] = json!("Approx");
    let error = parse_value(0, document).unwrap_err().to_string();
    assert!(
        error.contains("spec.template.spec.requirements[1].operator") && error.contains("Approx"),
        "{error}"
    );
}

#[test]
fn extensions_example_resolves_every_source() {
    let document = load("examples/ec2nodeclasses/extensions.yaml");
    let Manifest::EC2NodeClass(class) = parse_value(0, document).unwrap() else {
        panic!("not an EC2NodeClass")
    };
    let effective = class.spec.effective_extensions().unwrap();
    let sources: Vec<&ModuleSource> = effective
        .instance_filters
        .iter()
        .map(|m| &m.source)
        .collect();
    assert!(matches!(sources[0], ModuleSource::ConfigMap(c) if c.key == "no-burstable.wasm"));
    assert!(matches!(sources[1], ModuleSource::Url(_)));
    assert!(matches!(sources[2], ModuleSource::Oci(_)));
    assert_eq!(
        effective.instance_filters[2]
            .signature_keys
            .as_ref()
            .map(|k| k.name.as_str()),
        Some("platform-team-keys")
    );
    assert!(matches!(sources[3], ModuleSource::Path(_)));
    assert_eq!(
        effective.instance_filters[1].failure_policy,
        FailurePolicy::Ignore
    );
    assert_eq!(
        effective.instance_filters[1].timeout,
        std::time::Duration::from_millis(50)
    );
    assert_eq!(effective.instance_filters[0].config["families"][0], "t2");
    assert_eq!(
        effective.instance_filters[2].mode,
        nodewright::apis::extensions::ExtensionMode::Shadow
    );
    assert_eq!(
        effective.instance_filters[0].mode,
        nodewright::apis::extensions::ExtensionMode::Enforce
    );
    assert_eq!(
        effective.ami_selector.source,
        ModuleSource::Builtin(BUILTIN_AVAILABLE_AMIS.into())
    );
    assert_eq!(effective.priority_scorers[0].weight, 3);

    // A class without extensions gets the built-in defaults.
    let document = load("examples/ec2nodeclasses/al2023.yaml");
    let Manifest::EC2NodeClass(class) = parse_value(0, document).unwrap() else {
        panic!("not an EC2NodeClass")
    };
    let effective = class.spec.effective_extensions().unwrap();
    assert!(effective.instance_filters.is_empty());
    assert_eq!(
        effective.priority_scorers[0].module.source,
        ModuleSource::Builtin(BUILTIN_FLEX_FIRST.into())
    );
}

fn load(relative: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join(relative)).unwrap();
    yaml_documents(&text).unwrap().remove(0)
}

/// The NodePool examples also pass Karpenter's runtime validation, and so do
/// the NodeClaim example's requirements.
#[test]
fn examples_pass_runtime_validation() {
    use nodewright::apis::validation::{validate_node_pool, validate_requirement};
    for (file, document) in example_documents() {
        match parse_value(0, document).unwrap() {
            Manifest::NodePool(pool) => {
                assert_eq!(validate_node_pool(&pool.spec), Ok(()), "{file}");
            }
            Manifest::NodeClaim(claim) => {
                for (i, requirement) in claim.spec.requirements.iter().enumerate() {
                    let errors =
                        validate_requirement(requirement, &format!("spec.requirements[{i}]"));
                    assert!(errors.is_empty(), "{file}: {errors:?}");
                }
            }
            _ => {}
        }
    }
}
