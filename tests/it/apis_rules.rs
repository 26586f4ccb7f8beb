//! CRD rules: bad NodePools, NodeClaims, EC2NodeClasses and extension
//! entries are refused by the schemas (structural + CEL) with a message
//! naming the field.

use super::*;

/// Sets (or with `Value::Null`, removes) the value at a JSON pointer.
fn with(mut document: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let key = key.replace("~1", "/").replace("~0", "~");
    let target = document.pointer_mut(parent).unwrap();
    match target {
        Value::Object(map) if value.is_null() => {
            map.remove(&key);
        }
        Value::Object(map) => {
            map.insert(key, value);
        }
        Value::Array(items) => {
            let index = key.parse::<usize>().unwrap();
            if index == items.len() {
                items.push(value);
            } else {
                items[index] = value;
            }
        }
        _ => panic!("{pointer}: parent is not a container"),
    }
    document
}

/// `document` must be refused with an error that mentions `field` and `message`.
#[track_caller]
fn assert_rejected(document: &Value, old: Option<&Value>, field: &str, message: &str) {
    let errors = validator::validate(&schema_for(kind(document)), document, old);
    assert!(
        errors
            .iter()
            .any(|e| e.contains(field) && e.contains(message)),
        "expected an error on {field:?} containing {message:?}, got {errors:#?}"
    );
}

const REQUIREMENTS: &str = "/spec/template/spec/requirements";

#[test]
fn nodepool_rules_reject_bad_manifests() {
    let pool = load("examples/nodepools/general-purpose.yaml");
    let requirement = |r: Value| with(pool.clone(), &format!("{REQUIREMENTS}/0"), r);

    assert_rejected(
        &requirement(
            json!({"key": "kubernetes.io/arch", "operator": "Approx", "values": ["amd64"]}),
        ),
        None,
        "spec.template.spec.requirements[0].operator",
        "Unsupported value",
    );
    assert_rejected(
        &requirement(
            json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 0}),
        ),
        None,
        "spec.template.spec.requirements[0].minValues",
        "greater than or equal to 1",
    );
    assert_rejected(
        &requirement(
            json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 51}),
        ),
        None,
        "spec.template.spec.requirements[0].minValues",
        "less than or equal to 50",
    );
    assert_rejected(
        &requirement(
            json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 2}),
        ),
        None,
        "spec.template.spec.requirements",
        "must have at least that many values",
    );
    assert_rejected(
        &requirement(json!({"key": "kubernetes.io/arch", "operator": "In", "values": []})),
        None,
        "spec.template.spec.requirements",
        "operator 'In' must have a value defined",
    );
    assert_rejected(
        &requirement(
            json!({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["2", "4"]}),
        ),
        None,
        "spec.template.spec.requirements",
        "must have a single positive integer value",
    );
    assert_rejected(
        &requirement(json!({"key": "karpenter.sh/foo", "operator": "Exists"})),
        None,
        "spec.template.spec.requirements[0].key",
        "label domain \"karpenter.sh\" is restricted",
    );
    assert_rejected(
        &requirement(json!({"key": "karpenter.sh/nodepool", "operator": "Exists"})),
        None,
        "spec.template.spec.requirements[0].key",
        "label \"karpenter.sh/nodepool\" is restricted",
    );
    assert_rejected(
        &requirement(json!({"key": "karpenter.k8s.aws/not-a-label", "operator": "Exists"})),
        None,
        "spec.template.spec.requirements[0].key",
        "label domain \"karpenter.k8s.aws\" is restricted",
    );
    assert_rejected(
        &requirement(json!({"key": "kubernetes.io/hostname", "operator": "Exists"})),
        None,
        "spec.template.spec.requirements[0].key",
        "label \"kubernetes.io/hostname\" is restricted",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/template/metadata/labels/karpenter.sh~1foo",
            json!("x"),
        ),
        None,
        "spec.template.metadata.labels",
        "label domain \"karpenter.sh\" is restricted",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/template/metadata/labels/team",
            json!("not a label value!"),
        ),
        None,
        "spec.template.metadata.labels.team",
        "should match",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/disruption/consolidationPolicy",
            json!("Sometimes"),
        ),
        None,
        "spec.disruption.consolidationPolicy",
        "Unsupported value",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/disruption/budgets/1/duration",
            Value::Null,
        ),
        None,
        "spec.disruption.budgets",
        "'schedule' must be set with 'duration'",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/disruption/budgets/0/nodes",
            json!("150%"),
        ),
        None,
        "spec.disruption.budgets[0].nodes",
        "should match",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/disruption/consolidateAfter",
            json!("5 minutes"),
        ),
        None,
        "spec.disruption.consolidateAfter",
        "should match",
    );
    assert_rejected(
        &with(pool.clone(), "/spec/weight", json!(0)),
        None,
        "spec.weight",
        "greater than or equal to 1",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/template/spec/nodeClassRef/name",
            json!(""),
        ),
        None,
        "spec.template.spec.nodeClassRef.name",
        "name may not be empty",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/template/spec/taints",
            json!([{"key": "a", "effect": "Sometimes"}]),
        ),
        None,
        "spec.template.spec.taints[0].effect",
        "Unsupported value",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/disruption/consolidationPolicyy",
            json!("WhenEmpty"),
        ),
        None,
        "spec.disruption.consolidationPolicyy",
        "field not declared",
    );
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/template/spec/nodeClassRef",
            Value::Null,
        ),
        None,
        "spec.template.spec.nodeClassRef",
        "Required value",
    );
    // Static pools: no weight, only limits.nodes, and no switching modes.
    let fixed = load("examples/nodepools/static.yaml");
    assert_rejected(
        &with(fixed.clone(), "/spec/weight", json!(5)),
        None,
        "spec",
        "'weight' is not supported",
    );
    assert_rejected(
        &with(fixed.clone(), "/spec/limits/cpu", json!("10")),
        None,
        "spec",
        "only 'limits.nodes' is supported",
    );
    assert_rejected(
        &with(fixed.clone(), "/spec/replicas", Value::Null),
        Some(&fixed),
        "spec",
        "Cannot transition NodePool between static",
    );
    // Transition rule: the NodeClass group is immutable.
    assert_rejected(
        &with(
            pool.clone(),
            "/spec/template/spec/nodeClassRef/group",
            json!("example.com"),
        ),
        Some(&pool),
        "spec.template.spec.nodeClassRef",
        "nodeClassRef.group is immutable",
    );
}

#[test]
fn nodeclaim_rules_reject_bad_manifests() {
    let claim = load("examples/nodeclaims/nodeclaim.yaml");
    assert_rejected(
        &with(claim.clone(), "/spec/expireAfter", json!("1h")),
        Some(&claim),
        "spec",
        "spec is immutable",
    );
    assert_rejected(
        &with(
            claim.clone(),
            "/spec/requirements/1/key",
            json!("karpenter.sh/bar"),
        ),
        None,
        "spec.requirements[1].key",
        "label domain \"karpenter.sh\" is restricted",
    );
    assert_rejected(
        &with(claim.clone(), "/status/conditions/0/status", json!("Maybe")),
        None,
        "status.conditions[0].status",
        "Unsupported value",
    );
}

#[test]
fn ec2nodeclass_rules_reject_bad_manifests() {
    let class = load("examples/ec2nodeclasses/al2023.yaml");
    let custom = load("examples/ec2nodeclasses/custom-ami.yaml");
    assert_rejected(
        &with(
            class.clone(),
            "/spec/amiSelectorTerms/0/id",
            json!("ami-0123456789abcdef0"),
        ),
        None,
        "spec.amiSelectorTerms",
        "'alias' is mutually exclusive, cannot be set with a combination of other fields",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/amiSelectorTerms/1",
            json!({"id": "ami-0123"}),
        ),
        None,
        "spec.amiSelectorTerms",
        "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
    );
    assert_rejected(
        &with(class.clone(), "/spec/amiSelectorTerms", json!([])),
        None,
        "spec.amiSelectorTerms",
        "at least 1 items",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/amiSelectorTerms/0/alias",
            json!("windows2022@v1"),
        ),
        None,
        "spec.amiSelectorTerms[0].alias",
        "windows families may only specify version 'latest'",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/amiSelectorTerms/0/alias",
            json!("ubuntu@latest"),
        ),
        None,
        "spec.amiSelectorTerms[0].alias",
        "family is not supported",
    );
    assert_rejected(
        &with(class.clone(), "/spec/amiFamily", json!("Bottlerocket")),
        None,
        "spec",
        "amiFamily must be 'AL2023' or 'Custom'",
    );
    assert_rejected(
        &with(custom.clone(), "/spec/amiFamily", Value::Null),
        None,
        "spec",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    );
    assert_rejected(
        &with(class.clone(), "/spec/subnetSelectorTerms", json!([])),
        None,
        "spec.subnetSelectorTerms",
        "subnetSelectorTerms cannot be empty",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/securityGroupSelectorTerms",
            json!([{}]),
        ),
        None,
        "spec.securityGroupSelectorTerms",
        "expected at least one, got none",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/subnetSelectorTerms/0/id",
            json!("subnet-0123"),
        ),
        None,
        "spec.subnetSelectorTerms",
        "'id' is mutually exclusive",
    );
    assert_rejected(
        &with(class.clone(), "/spec/instanceProfile", json!("profile")),
        None,
        "spec",
        "must specify exactly one of ['role', 'instanceProfile']",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/tags/kubernetes.io~1cluster~1prod",
            json!("owned"),
        ),
        None,
        "spec.tags",
        "restricted tag matching kubernetes.io/cluster/",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/metadataOptions/httpPutResponseHopLimit",
            json!(65),
        ),
        None,
        "spec.metadataOptions.httpPutResponseHopLimit",
        "less than or equal to 64",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/blockDeviceMappings/0/ebs/volumeSize",
            json!("100TB"),
        ),
        None,
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "should match",
    );
    assert_rejected(
        &with(
            custom.clone(),
            "/spec/kubelet/imageGCLowThresholdPercent",
            json!(90),
        ),
        None,
        "spec.kubelet",
        "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
    );
    assert_rejected(
        &with(custom.clone(), "/spec/kubelet/kubeReserved/gpu", json!("1")),
        None,
        "spec.kubelet.kubeReserved",
        "valid keys for kubeReserved",
    );
    assert_rejected(
        &with(
            custom.clone(),
            "/spec/networkInterfaces/0/interfaceType",
            json!("efa-only"),
        ),
        None,
        "spec.networkInterfaces",
        "must include a primary interface",
    );
    assert_rejected(
        &with(
            custom.clone(),
            "/spec/placementGroupSelector/id",
            json!("pg-0123"),
        ),
        None,
        "spec.placementGroupSelector",
        "'name' and 'id' are mutually exclusive",
    );
    assert_rejected(
        &with(
            custom.clone(),
            "/spec/blockDeviceMappings/1/rootVolume",
            json!(true),
        ),
        None,
        "spec.blockDeviceMappings",
        "must have only one blockDeviceMappings with rootVolume",
    );
}

#[test]
fn extension_rules_reject_bad_manifests() {
    let class = load("examples/ec2nodeclasses/extensions.yaml");
    let filter = "/spec/extensions/instanceFilters/1";
    assert_rejected(
        &with(
            class.clone(),
            &format!("{filter}/path"),
            json!("/tmp/x.wasm"),
        ),
        None,
        "spec.extensions.instanceFilters[1]",
        "must specify exactly one module source",
    );
    assert_rejected(
        &with(class.clone(), &format!("{filter}/url"), Value::Null),
        None,
        "spec.extensions.instanceFilters[1]",
        "must specify exactly one module source",
    );
    assert_rejected(
        &with(class.clone(), &format!("{filter}/sha256"), Value::Null),
        None,
        "spec.extensions.instanceFilters[1]",
        "'sha256' is required unless the module is 'builtin'",
    );
    assert_rejected(
        &with(class.clone(), &format!("{filter}/sha256"), json!("ABC123")),
        None,
        "spec.extensions.instanceFilters[1].sha256",
        "should match",
    );
    assert_rejected(
        &with(
            class.clone(),
            &format!("{filter}/url"),
            json!("http://modules.example.com/m.wasm"),
        ),
        None,
        "spec.extensions.instanceFilters[1].url",
        "should match",
    );
    assert_rejected(
        &with(
            class.clone(),
            &format!("{filter}/failurePolicy"),
            json!("Retry"),
        ),
        None,
        "spec.extensions.instanceFilters[1].failurePolicy",
        "Unsupported value",
    );
    assert_rejected(
        &with(class.clone(), &format!("{filter}/timeout"), json!("fast")),
        None,
        "spec.extensions.instanceFilters[1].timeout",
        "should match",
    );
    assert_rejected(
        &with(
            class.clone(),
            &format!("{filter}/timeout"),
            json!("100000000000000h"),
        ),
        None,
        "spec.extensions.instanceFilters[1].timeout",
        "timeout must be at most 10s",
    );
    assert_rejected(
        &with(
            class.clone(),
            &format!("{filter}/signatureKeys"),
            json!({"name": "team-keys", "namespace": "nodewright"}),
        ),
        None,
        "spec.extensions.instanceFilters[1]",
        "'signatureKeys' is only valid on an 'oci' module",
    );
    assert_rejected(
        &with(class.clone(), &format!("{filter}/mode"), json!("Monitor")),
        None,
        "spec.extensions.instanceFilters[1].mode",
        "Unsupported value",
    );
    assert_rejected(
        &with(
            class.clone(),
            &format!("{filter}/name"),
            json!("no-burstable"),
        ),
        None,
        "spec.extensions.instanceFilters",
        "instanceFilters names must be unique",
    );
    assert_rejected(
        &with(class.clone(), &format!("{filter}/weight"), json!(2)),
        None,
        "spec.extensions.instanceFilters",
        "'weight' is only valid on priorityScorers",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/extensions/amiSelector/sha256",
            json!("0".repeat(64)),
        ),
        None,
        "spec.extensions.amiSelector",
        "'sha256' must not be set on a 'builtin' module",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/extensions/priorityScorers/0/weight",
            json!(0),
        ),
        None,
        "spec.extensions.priorityScorers[0].weight",
        "greater than or equal to 1",
    );
    assert_rejected(
        &with(
            class.clone(),
            "/spec/extensions/instanceFilters/0/configMap/key",
            Value::Null,
        ),
        None,
        "spec.extensions.instanceFilters[0].configMap.key",
        "Required value",
    );
}
