//! aws/karpenter-provider-aws `pkg/apis/v1/ec2nodeclass_validation_cel_test.go`
//! ("CEL/Validation"): the default branch for every context but Kubelet,
//! which follows v1.14.1 — the typed `spec.kubelet` schema nodewright's CRD
//! keeps (the default branch made it an open map validated by the
//! controller).

use serde_json::{Value, json};

use super::{Case, set};

/// The AWS provider's test EC2NodeClass as its typed client sends it
/// (`capacityReservationSelectorTerms` has no `omitempty`: a nil list goes
/// out as `null`).
fn base() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {},
        "spec": {
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "role-1",
            "securityGroupSelectorTerms": [{"tags": {"*": "*"}}],
            "subnetSelectorTerms": [{"tags": {"*": "*"}}],
            "capacityReservationSelectorTerms": null,
        },
    })
}

pub fn with(pointer: &str, value: Value) -> Value {
    set(base(), pointer, value)
}

const FAMILIES: [&str; 7] = [
    "AL2",
    "AL2023",
    "Bottlerocket",
    "Windows2019",
    "Windows2022",
    "Windows2025",
    "Custom",
];

fn top_level() -> Vec<Case> {
    let profile = || with("/spec/instanceProfile", json!("test-instance-profile"));
    let mut cases = vec![
        Case::accept("should succeed if just specifying role", base()),
        Case::accept(
            "should succeed if just specifying instance profile",
            set(profile(), "/spec/role", Value::Null),
        ),
        Case::refuse(
            "should fail if specifying both instance profile and role",
            profile(),
        ),
        Case::refuse(
            "should fail if not specifying one of instance profile and role",
            with("/spec/role", Value::Null),
        ),
        Case::accept("should succeed if user data is empty", base()),
    ];
    let by_id = || {
        with(
            "/spec/amiSelectorTerms",
            json!([{"id": "ami-0123456789abcdef"}]),
        )
    };
    for family in FAMILIES {
        cases.push(Case::accept(
            format!("should succeed with valid families / {family}"),
            set(by_id(), "/spec/amiFamily", json!(family)),
        ));
    }
    cases.push(Case::refuse(
        "should fail with the ubuntu family",
        set(by_id(), "/spec/amiFamily", json!("Ubuntu")),
    ));
    let aliased = |family: &str, alias: &str| {
        set(
            with("/spec/amiSelectorTerms", json!([{"alias": alias}])),
            "/spec/amiFamily",
            json!(family),
        )
    };
    let families: Vec<&str> = FAMILIES.into_iter().filter(|f| *f != "Custom").collect();
    for family in &families {
        let alias = format!("{}@latest", family.to_lowercase());
        cases.push(Case::accept(
            format!("should succeed when the amiFamily matches amiSelectorTerms[].alias / family {family:?} with alias {alias:?}"),
            aliased(family, &alias),
        ));
        cases.push(Case::accept(
            format!("should succeed when the amiFamily is custom with amiSelectorTerms[].alias / family \"Custom\" with alias {alias:?}"),
            aliased("Custom", &alias),
        ));
    }
    for family in &families {
        for other in families.iter().filter(|o| *o != family) {
            let alias = format!("{}@latest", other.to_lowercase());
            cases.push(Case::refuse(
                format!("should fail when then amiFamily does not match amiSelectorTerms[].alias / family {family:?} with alias {alias:?}"),
                aliased(family, &alias),
            ));
        }
    }
    cases.push(Case::refuse(
        "should fail when neither amiFamily nor an alias are specified",
        set(
            with(
                "/spec/amiSelectorTerms",
                json!([{"id": "ami-01234567890abcdef"}]),
            ),
            "/spec/amiFamily",
            Value::Null,
        ),
    ));
    // `tags` is `omitempty`: the empty map is not sent.
    cases.push(Case::accept("should succeed when tags are empty", base()));
    cases.push(Case::accept(
        "should succeed if tags aren't in restricted tag keys",
        with(
            "/spec/tags",
            json!({"karpenter.sh/custom-key": "value", "karpenter.sh/managed": "true", "kubernetes.io/role/key": "value"}),
        ),
    ));
    for key in [
        "karpenter.sh/nodepool",
        "kubernetes.io/cluster/test",
        "eks:eks-cluster-name",
        "karpenter.k8s.aws/ec2nodeclass",
        "karpenter.sh/nodeclaim",
    ] {
        cases.push(Case::refuse(
            format!("should fail if tags contain a restricted domain key / {key}"),
            with("/spec/tags", json!({key: "value"})),
        ));
    }
    cases
}

/// The cases every selector-term list shares: `field` is the list, `what`
/// Karpenter's word for it.
fn selector_cases(field: &str, what: &str, id: &str) -> Vec<Case> {
    let terms = |list: Value| with(&format!("/spec/{field}"), list);
    let mut cases = vec![
        Case::accept(
            format!("should succeed with a valid {what} selector on tags"),
            terms(json!([{"tags": {"test": "testvalue"}}])),
        ),
        Case::accept(
            format!("should succeed with a valid {what} selector on id"),
            terms(json!([{"id": id}])),
        ),
        Case::refuse(
            format!("should fail when a {what} selector term has no values"),
            terms(json!([{}])),
        ),
        // `tags` is `omitempty`: Go sends the empty map as no field at all.
        Case::refuse(
            format!("should fail when a {what} selector term has no tag map values"),
            terms(json!([{}])),
        ),
        Case::refuse(
            format!("should fail when a {what} selector term has a tag map key that is empty"),
            terms(json!([{"tags": {"test": ""}}])),
        ),
        Case::refuse(
            format!("should fail when a {what} selector term has a tag map value that is empty"),
            terms(json!([{"tags": {"": "testvalue"}}])),
        ),
        Case::refuse(
            format!("should fail when the last {what} selector is invalid"),
            terms(json!([
                {"tags": {"test": "testvalue"}},
                {"tags": {"test2": "testvalue2"}},
                {"tags": {"test3": "testvalue3"}},
                {"tags": {"": "testvalue4"}},
            ])),
        ),
    ];
    if field != "capacityReservationSelectorTerms" {
        cases.push(Case::refuse(
            format!("should fail when {what} selector terms is set to nil"),
            terms(Value::Null),
        ));
        cases.push(Case::refuse(
            format!("should fail when no {what} selector terms exist"),
            terms(json!([])),
        ));
    }
    if field != "amiSelectorTerms" {
        cases.push(Case::refuse(
            if field == "capacityReservationSelectorTerms" {
                "should fail when specifying id with tags in a single term".to_string()
            } else {
                "should fail when specifying id with tags".to_string()
            },
            terms(json!([{"id": id, "tags": {"test": "testvalue"}}])),
        ));
    }
    for case in &mut cases {
        case.name = format!("{field}: {}", case.name);
    }
    cases
}

fn term_cases() -> Vec<Case> {
    let mut cases = selector_cases("subnetSelectorTerms", "subnet", "subnet-12345749");
    cases.extend(selector_cases(
        "securityGroupSelectorTerms",
        "security group",
        "sg-12345749",
    ));
    let groups = |list: Value| with("/spec/securityGroupSelectorTerms", list);
    cases.extend([
        Case::accept(
            "securityGroupSelectorTerms: should succeed with a valid security group selector on name",
            groups(json!([{"name": "testname"}])),
        ),
        Case::refuse(
            "securityGroupSelectorTerms: should fail when specifying id with name",
            groups(json!([{"id": "sg-12345749", "name": "my-security-group"}])),
        ),
        Case::refuse(
            "securityGroupSelectorTerms: should fail when specifying name with tags",
            groups(json!([{"name": "my-security-group", "tags": {"test": "testvalue"}}])),
        ),
    ]);
    cases.extend(selector_cases(
        "capacityReservationSelectorTerms",
        "capacity reservation",
        "cr-12345749",
    ));
    let reservations = |list: Value| with("/spec/capacityReservationSelectorTerms", list);
    for (name, list, accept) in [
        (
            "should succeed for a valid ownerID",
            json!([{"ownerID": "012345678901", "tags": {"test": "testvalue"}}]),
            true,
        ),
        (
            "should fail with a capacity reservation selector on a malformed id",
            json!([{"id": "r-12345749"}]),
            false,
        ),
        (
            "should succeed when capacity group selector terms is set to nil",
            Value::Null,
            true,
        ),
        (
            "should fail when specifying id with ownerID in a single term",
            json!([{"ownerID": "012345678901", "id": "cr-12345749"}]),
            false,
        ),
        (
            "should fail when the ownerID is malformed",
            json!([{"ownerID": "01234567890", "tags": {"test": "testvalue"}}]),
            false,
        ),
        (
            "should fail when the ownerID is set by itself",
            json!([{"ownerID": "012345678901"}]),
            false,
        ),
        (
            "should succeed with a valid instanceMatchCriteria 'open'",
            json!([{"instanceMatchCriteria": "open"}]),
            true,
        ),
        (
            "should succeed with a valid instanceMatchCriteria 'targeted'",
            json!([{"instanceMatchCriteria": "targeted"}]),
            true,
        ),
        (
            "should succeed with instanceMatchCriteria combined with tags",
            json!([{"instanceMatchCriteria": "open", "tags": {"test": "testvalue"}}]),
            true,
        ),
        (
            "should succeed with instanceMatchCriteria combined with ownerID and tags",
            json!([{"instanceMatchCriteria": "targeted", "ownerID": "012345678901", "tags": {"test": "testvalue"}}]),
            true,
        ),
        (
            "should fail with invalid instanceMatchCriteria value",
            json!([{"instanceMatchCriteria": "invalid"}]),
            false,
        ),
        (
            "should fail when specifying id with instanceMatchCriteria",
            json!([{"id": "cr-12345749", "instanceMatchCriteria": "open"}]),
            false,
        ),
    ] {
        let name = format!("capacityReservationSelectorTerms: {name}");
        cases.push(if accept {
            Case::accept(name, reservations(list))
        } else {
            Case::refuse(name, reservations(list))
        });
    }
    cases.extend(selector_cases("amiSelectorTerms", "ami", "ami-12345749"));
    let amis = |list: Value| with("/spec/amiSelectorTerms", list);
    for (name, list) in [
        (
            "should succeed with a valid ami selector on alias",
            json!([{"alias": "al2023@latest"}]),
        ),
        (
            "should succeed with a valid ami selector on name",
            json!([{"name": "testname"}]),
        ),
        (
            "should succeed with a valid ami selector on name and owner",
            json!([{"name": "testname", "owner": "testowner"}]),
        ),
        (
            "should succeed when an ami selector term has an owner key with tags",
            json!([{"owner": "testowner", "tags": {"test": "testvalue"}}]),
        ),
    ] {
        cases.push(Case::accept(
            format!("amiSelectorTerms: {name}"),
            amis(list),
        ));
    }
    for (entry, field, value) in [
        ("alias", "alias", json!("al2023@latest")),
        ("tags", "tags", json!({"test": "testvalue"})),
        ("name", "name", json!("my-custom-ami")),
        ("owner", "owner", json!("123456789")),
    ] {
        let mut term = json!({"id": "ami-1234749"});
        term[field] = value;
        cases.push(Case::refuse(
            format!("amiSelectorTerms: should fail when specifying id with other fields / {entry}"),
            amis(json!([term])),
        ));
    }
    for (entry, field, value) in [
        ("id", "id", json!("ami-1234749")),
        ("tags", "tags", json!({"test": "testvalue"})),
        ("name", "name", json!("my-custom-ami")),
        ("owner", "owner", json!("123456789")),
    ] {
        let mut term = json!({"alias": "al2023@latest"});
        term[field] = value;
        cases.push(Case::refuse(
            format!(
                "amiSelectorTerms: should fail when specifying alias with other fields / {entry}"
            ),
            amis(json!([term])),
        ));
    }
    cases.push(Case::refuse(
        "amiSelectorTerms: should fail when specifying alias with other terms",
        amis(json!([{"alias": "al2023@latest"}, {"id": "ami-1234749"}])),
    ));
    for (entry, alias, family) in [
        ("al2 (latest)", "al2@latest", "AL2"),
        ("al2 (pinned)", "al2@v20240625", "AL2"),
        ("al2023 (latest)", "al2023@latest", "AL2023"),
        ("al2023 (pinned)", "al2023@v20240625", "AL2023"),
        (
            "bottlerocket (latest)",
            "bottlerocket@latest",
            "Bottlerocket",
        ),
        (
            "bottlerocket (pinned)",
            "bottlerocket@1.10.0",
            "Bottlerocket",
        ),
        ("windows2019 (latest)", "windows2019@latest", "Windows2019"),
        ("windows2022 (latest)", "windows2022@latest", "Windows2022"),
        ("windows2025 (latest)", "windows2025@latest", "Windows2025"),
    ] {
        cases.push(Case::accept(
            format!("amiSelectorTerms: should succeed for valid aliases / {entry}"),
            set(
                amis(json!([{"alias": alias}])),
                "/spec/amiFamily",
                json!(family),
            ),
        ));
    }
    for (entry, alias) in [
        ("missing family", "@latest"),
        ("missing version", "al2023"),
        ("missing version", "al2023@"),
        ("invalid separator", "al2023-latest"),
    ] {
        cases.push(Case::refuse(
            format!("amiSelectorTerms: should fail for incorrectly formatted aliases / {entry} {alias:?}"),
            amis(json!([{"alias": alias}])),
        ));
    }
    cases.push(Case::refuse(
        "amiSelectorTerms: should fail for an alias with an invalid family",
        amis(json!([{"alias": "ubuntu@latest"}])),
    ));
    for alias in [
        "windows2019@v1.0.0",
        "windows2022@v1.0.0",
        "windows2025@v1.0.0",
    ] {
        cases.push(Case::refuse(
            format!("amiSelectorTerms: should fail when specifying non-latest versions with Windows aliases / {alias}"),
            amis(json!([{"alias": alias}])),
        ));
    }
    cases
}

fn options_cases() -> Vec<Case> {
    let mut cases = vec![Case::accept(
        "MetadataOptions: should succeed for valid inputs",
        with(
            "/spec/metadataOptions",
            json!({"httpEndpoint": "disabled", "httpProtocolIPv6": "enabled", "httpPutResponseHopLimit": 34, "httpTokens": "optional"}),
        ),
    )];
    for (name, field, value) in [
        (
            "should fail for invalid for HTTPEndpoint",
            "httpEndpoint",
            json!("test"),
        ),
        (
            "should fail for invalid for HTTPProtocolIPv6",
            "httpProtocolIPv6",
            json!("test"),
        ),
        (
            "should fail for invalid for HTTPPutResponseHopLimit",
            "httpPutResponseHopLimit",
            json!(-5),
        ),
        (
            "should fail for invalid for HTTPTokens",
            "httpTokens",
            json!("test"),
        ),
    ] {
        cases.push(Case::refuse(
            format!("MetadataOptions: {name}"),
            with("/spec/metadataOptions", json!({field: value})),
        ));
    }
    cases.push(
        Case::accept("(defaults) metadataOptions", base()).defaulted(
            "/spec/metadataOptions",
            json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}),
        ),
    );
    let device = |name: &str, ebs: Value, root: bool| {
        let mut d = json!({"deviceName": name, "ebs": ebs});
        if root {
            d["rootVolume"] = json!(true);
        }
        d
    };
    let mappings = |list: Value| with("/spec/blockDeviceMappings", list);
    for (name, list, accept) in [
        (
            "should succeed if more than one root volume is specified",
            json!([
                device("map-device-1", json!({"volumeSize": "500G"}), true),
                device("map-device-2", json!({"volumeSize": "50T"}), false)
            ]),
            true,
        ),
        (
            "should succeed for valid VolumeSize in G",
            json!([device("map-device-1", json!({"volumeSize": "58G"}), false)]),
            true,
        ),
        (
            "should succeed for valid VolumeSize in T",
            json!([device("map-device-1", json!({"volumeSize": "45T"}), false)]),
            true,
        ),
        (
            "should fail if more than one root volume is specified",
            json!([
                device("map-device-1", json!({"volumeSize": "50G"}), true),
                device("map-device-2", json!({"volumeSize": "50G"}), true)
            ]),
            false,
        ),
        (
            "should fail VolumeSize is less then 1Gi/1G",
            json!([device("map-device-1", json!({"volumeSize": "1m"}), false)]),
            false,
        ),
        (
            "should fail VolumeSize is greater then 64T",
            json!([device("map-device-1", json!({"volumeSize": "100T"}), false)]),
            false,
        ),
        (
            "should fail for VolumeSize that do not parse into quantity values",
            json!([device("map-device-1", json!({"volumeSize": "0"}), false)]),
            false,
        ),
        (
            "should fail if VolumeInitializationRate set but SnapshotID not specified",
            json!([device(
                "map-device-1",
                json!({"volumeSize": "0", "volumeInitializationRate": 100}),
                false
            )]),
            false,
        ),
        (
            "should fail if VolumeInitializationRate too low",
            json!([device(
                "map-device-1",
                json!({"volumeSize": "0", "snapshotID": "snap-1", "volumeInitializationRate": 99}),
                false
            )]),
            false,
        ),
        (
            "should fail if VolumeInitializationRate too high",
            json!([device(
                "map-device-1",
                json!({"volumeSize": "0", "snapshotID": "snap-1", "volumeInitializationRate": 888}),
                false
            )]),
            false,
        ),
    ] {
        let name = format!("BlockDeviceMappings: {name}");
        let object = mappings(list);
        cases.push(if accept {
            Case::accept(name, object)
        } else {
            Case::refuse(name, object)
        });
    }
    let nic = |card: i32, device: i32, kind: &str| json!({"networkCardIndex": card, "deviceIndex": device, "interfaceType": kind});
    let interfaces = |list: Vec<Value>| with("/spec/networkInterfaces", Value::Array(list));
    for (name, list, accept) in [
        (
            "should succeed with valid multiple network interfaces",
            vec![
                nic(0, 0, "interface"),
                nic(0, 1, "efa-only"),
                nic(1, 0, "efa-only"),
                nic(1, 1, "interface"),
            ],
            true,
        ),
        // `omitempty`: the empty list is sent as an empty list here (Go
        // omits it); both are accepted.
        (
            "should succeed when network interfaces is empty",
            vec![],
            true,
        ),
        (
            "should fail with an invalid interface type",
            vec![nic(0, 0, "efa")],
            false,
        ),
        (
            "should fail with a negative NetworkCardIndex",
            vec![nic(0, 0, "interface"), nic(-1, 0, "interface")],
            false,
        ),
        (
            "should fail with a negative DeviceIndex",
            vec![nic(-1, 0, "interface"), nic(0, -1, "interface")],
            false,
        ),
        (
            "should fail with duplicate Network Interface and Device Index fields",
            vec![
                nic(0, 0, "interface"),
                nic(0, 1, "efa-only"),
                nic(1, 0, "interface"),
                nic(1, 0, "efa-only"),
            ],
            false,
        ),
        (
            "should fail with no primary network interface",
            vec![nic(0, 1, "interface")],
            false,
        ),
        (
            "should fail when primary network interface is not ENA",
            vec![nic(0, 0, "efa-only")],
            false,
        ),
        (
            "should fail when multiple EFA devices on one network card",
            vec![
                nic(0, 0, "interface"),
                nic(1, 0, "efa-only"),
                nic(1, 1, "efa-only"),
            ],
            false,
        ),
    ] {
        let name = format!("NetworkInterfaces: {name}");
        let object = interfaces(list);
        cases.push(if accept {
            Case::accept(name, object)
        } else {
            Case::refuse(name, object)
        });
    }
    let tracking = |t: Value| with("/spec/connectionTracking", t);
    for (name, value, accept) in [
        (
            "should fail when connectionTracking is specified with no fields set",
            json!({}),
            false,
        ),
        (
            "should succeed with valid tcpEstablishedTimeout",
            json!({"tcpEstablishedTimeout": 60}),
            true,
        ),
        (
            "should succeed with valid udpStreamTimeout",
            json!({"udpStreamTimeout": 120}),
            true,
        ),
        (
            "should succeed with valid udpTimeout",
            json!({"udpTimeout": 45}),
            true,
        ),
        (
            "should succeed with all valid connection tracking settings",
            json!({"tcpEstablishedTimeout": 432000, "udpStreamTimeout": 180, "udpTimeout": 60}),
            true,
        ),
        (
            "should fail when tcpEstablishedTimeout is below minimum (60s)",
            json!({"tcpEstablishedTimeout": 59}),
            false,
        ),
        (
            "should fail when tcpEstablishedTimeout is above maximum (432000s)",
            json!({"tcpEstablishedTimeout": 432001}),
            false,
        ),
        (
            "should fail when udpStreamTimeout is below minimum (60s)",
            json!({"udpStreamTimeout": 59}),
            false,
        ),
        (
            "should fail when udpStreamTimeout is above maximum (180s)",
            json!({"udpStreamTimeout": 181}),
            false,
        ),
        (
            "should fail when udpTimeout is below minimum (30s)",
            json!({"udpTimeout": 29}),
            false,
        ),
        (
            "should fail when udpTimeout is above maximum (60s)",
            json!({"udpTimeout": 61}),
            false,
        ),
    ] {
        let name = format!("ConnectionTracking: {name}");
        cases.push(if accept {
            Case::accept(name, tracking(value))
        } else {
            Case::refuse(name, tracking(value))
        });
    }
    let role = |r: &str| with("/spec/role", json!(r));
    let profile = || {
        set(
            with("/spec/role", Value::Null),
            "/spec/instanceProfile",
            json!("test-instance-profile"),
        )
    };
    cases.extend([
        Case::refuse(
            "Role Immutability: should fail if role is not defined",
            with("/spec/role", Value::Null),
        ),
        Case::accept(
            "Role Immutability: should succeed when updating the role",
            role("test-role2"),
        )
        .updating(role("test-role")),
        Case::accept(
            "Role Immutability: should succeed to switch between an unmanaged and managed instance profile",
            role("test-role"),
        )
        .updating(profile()),
        Case::accept(
            "Role Immutability: should succeed to switch between a managed and unmanaged instance profile",
            profile(),
        )
        .updating(role("test-role")),
    ]);
    for (name, value, accept) in [
        (
            "should succeed with nestedVirtualization enabled",
            json!({"nestedVirtualization": "enabled"}),
            true,
        ),
        (
            "should succeed with nestedVirtualization disabled",
            json!({"nestedVirtualization": "disabled"}),
            true,
        ),
        (
            "should fail with invalid nestedVirtualization value",
            json!({"nestedVirtualization": "invalid"}),
            false,
        ),
        ("should succeed with empty CPUOptions", json!({}), true),
    ] {
        let name = format!("CPUOptions: {name}");
        let object = with("/spec/cpuOptions", value);
        cases.push(if accept {
            Case::accept(name, object)
        } else {
            Case::refuse(name, object)
        });
    }
    cases
}

/// Every ported EC2NodeClass case.
pub fn cases() -> Vec<Case> {
    let mut cases = top_level();
    cases.extend(term_cases());
    cases.extend(super::ec2nodeclass_kubelet::cases());
    cases.extend(options_cases());
    for case in &mut cases {
        case.name = format!("EC2NodeClass: {}", case.name);
    }
    cases
}
