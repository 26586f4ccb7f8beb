//! The controller's policy as the test reads it: placeholders replaced, the
//! copy moto can evaluate, and an evaluator of the resource ARNs and tag
//! conditions moto skips (see the parent module for what moto checks).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{ACCOUNT, CLUSTER, NODE_ROLE, REGION};

/// deploy/iam/controller-policy.json with its placeholders replaced as the
/// CloudFormation stack replaces them, for this cluster in moto's account.
pub(super) fn controller_policy() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/iam/controller-policy.json"
    );
    let mut text = std::fs::read_to_string(path).expect("deploy/iam/controller-policy.json");
    let role = format!("arn:aws:iam::{ACCOUNT}:role/{NODE_ROLE}");
    for (placeholder, value) in [
        ("${AWS::Partition}", "aws"),
        ("${AWS::Region}", REGION),
        ("${AWS::AccountId}", ACCOUNT),
        ("${ClusterName}", CLUSTER),
        ("${NodeRoleArn}", role.as_str()),
    ] {
        text = text.replace(placeholder, value);
    }
    assert!(
        !text.contains("${"),
        "a placeholder this test does not know: {text}"
    );
    serde_json::from_str(&text).expect("the policy is JSON")
}

/// Actions moto authorizes against the resource's real ARN (the queue's):
/// every other action it authorizes against `*`.
const MOTO_CHECKS_RESOURCE: &[&str] = &["sqs:ReceiveMessage", "sqs:DeleteMessage"];
/// (action AWS authorizes, operation moto authorizes under its own name).
const MOTO_NAMES: &[(&str, &str)] = &[("sqs:DeleteMessage", "sqs:DeleteMessageBatch")];

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// The policy as moto can evaluate it: each statement split into the
/// actions moto checks against `*` (their `Resource` becomes `*`) and those
/// it checks against the real ARN (kept), with moto's names for batch
/// operations added. Actions, effects and conditions are unchanged.
pub(super) fn as_moto_evaluates(policy: &Value) -> Value {
    let mut statements = Vec::new();
    for statement in policy["Statement"].as_array().expect("statements") {
        let actions = strings(&statement["Action"]);
        let (kept, widened): (Vec<String>, Vec<String>) = actions
            .into_iter()
            .partition(|a| MOTO_CHECKS_RESOURCE.contains(&a.as_str()));
        for (actions, resource, suffix) in [
            (widened, json!("*"), "AnyResource"),
            (kept, statement["Resource"].clone(), ""),
        ] {
            if actions.is_empty() {
                continue;
            }
            let mut actions = actions;
            for (aws, moto) in MOTO_NAMES {
                if actions.iter().any(|a| a == aws) {
                    actions.push(moto.to_string());
                }
            }
            let mut copy = statement.clone();
            copy["Action"] = json!(actions);
            copy["Resource"] = resource;
            copy["Sid"] = json!(format!(
                "{}{suffix}",
                statement["Sid"].as_str().unwrap_or("")
            ));
            statements.push(copy);
        }
    }
    json!({"Version": "2012-10-17", "Statement": statements})
}

/// `*` and `?` wildcards, as IAM matches ARNs and `StringLike` values.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // matched[j]: pattern so far matches text[..j].
    let mut matched = vec![false; t.len() + 1];
    matched[0] = true;
    for c in p {
        let mut next = vec![false; t.len() + 1];
        for j in 0..=t.len() {
            next[j] = match c {
                '*' => matched[j] || (j > 0 && next[j - 1]),
                '?' => j > 0 && matched[j - 1],
                c => j > 0 && matched[j - 1] && t[j - 1] == c,
            };
        }
        matched = next;
    }
    matched[t.len()]
}

/// One authorization AWS makes for a call: the action, the resource's ARN
/// and the request context (condition keys and their values).
struct Ask {
    action: &'static str,
    arn: String,
    context: BTreeMap<String, String>,
}

impl Ask {
    fn new(action: &'static str, arn: &str) -> Ask {
        let context = BTreeMap::from([("aws:RequestedRegion".to_string(), REGION.to_string())]);
        Ask {
            action,
            arn: arn.to_string(),
            context,
        }
    }

    /// The tags as `aws:<kind>/KEY` (`RequestTag` when the call creates the
    /// resource, `ResourceTag` when it acts on one that exists).
    fn tags(mut self, kind: &str, tags: &BTreeMap<String, String>) -> Ask {
        for (key, value) in tags {
            self.context
                .insert(format!("aws:{kind}/{key}"), value.clone());
        }
        self
    }

    fn with(mut self, key: &str, value: &str) -> Ask {
        self.context.insert(key.to_string(), value.to_string());
        self
    }
}

/// Whether an Allow statement of `policy` grants `ask`: action, resource
/// and every condition (a key missing from the context fails, as in IAM).
/// The policy has no Deny and only these operators; another fails loudly.
fn allowed(policy: &Value, ask: &Ask) -> bool {
    policy["Statement"]
        .as_array()
        .expect("statements")
        .iter()
        .any(|statement| {
            assert_eq!(
                statement["Effect"], "Allow",
                "the evaluator knows Allow only"
            );
            let action = strings(&statement["Action"])
                .iter()
                .any(|a| glob(a, ask.action));
            let resource = strings(&statement["Resource"])
                .iter()
                .any(|r| glob(r, &ask.arn));
            let empty = serde_json::Map::new();
            let conditions = statement["Condition"].as_object().unwrap_or(&empty);
            let hold = conditions.iter().all(|(operator, block)| {
                block
                    .as_object()
                    .expect("condition block")
                    .iter()
                    .all(|(key, expected)| {
                        let Some(actual) = ask.context.get(key) else {
                            return false;
                        };
                        let expected = strings(expected);
                        match operator.as_str() {
                            "StringEquals" => expected.iter().any(|e| e == actual),
                            "StringLike" => expected.iter().any(|e| glob(e, actual)),
                            other => {
                                panic!("the evaluator does not know condition operator {other}")
                            }
                        }
                    })
            });
            action && resource && hold
        })
}
/// The resources the scenario's controller made in moto: ARNs and tags.
pub(super) struct Made {
    pub(super) instance: String,
    pub(super) instance_tags: BTreeMap<String, String>,
    pub(super) subnet: String,
    pub(super) image: String,
    pub(super) template: String,
    pub(super) template_tags: BTreeMap<String, String>,
    pub(super) profile: String,
    pub(super) profile_tags: BTreeMap<String, String>,
}

/// Each authorization AWS makes for the calls that made, used and deleted
/// these resources is granted by the real policy, conditions included —
/// what moto could not check. `iam:PassedToService` and `ec2:CreateAction`
/// are the values AWS sets for these calls.
pub(super) fn check_conditions(policy: &Value, made: Made) {
    let role = format!("arn:aws:iam::{ACCOUNT}:role/{NODE_ROLE}");
    let queue = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{CLUSTER}");
    let cluster = format!("arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}");
    let (instance, template, profile) = (&made.instance, &made.template, &made.profile);
    let (i, t, p) = (&made.instance_tags, &made.template_tags, &made.profile_tags);
    let asks = [
        Ask::new("ec2:CreateLaunchTemplate", template).tags("RequestTag", t),
        Ask::new("ec2:CreateTags", template)
            .tags("RequestTag", t)
            .with("ec2:CreateAction", "CreateLaunchTemplate"),
        Ask::new("ec2:CreateFleet", template).tags("ResourceTag", t),
        Ask::new("ec2:RunInstances", template).tags("ResourceTag", t),
        Ask::new("ec2:CreateFleet", instance).tags("RequestTag", i),
        Ask::new("ec2:RunInstances", instance).tags("RequestTag", i),
        Ask::new("ec2:CreateFleet", &made.subnet),
        Ask::new("ec2:RunInstances", &made.subnet),
        Ask::new("ec2:CreateFleet", &made.image),
        Ask::new("ec2:RunInstances", &made.image),
        Ask::new("ec2:CreateTags", instance)
            .tags("RequestTag", i)
            .with("ec2:CreateAction", "CreateFleet"),
        Ask::new("iam:PassRole", &role).with("iam:PassedToService", "ec2.amazonaws.com"),
        Ask::new("ec2:TerminateInstances", instance).tags("ResourceTag", i),
        Ask::new("ec2:DeleteLaunchTemplate", template).tags("ResourceTag", t),
        Ask::new("ec2:DescribeInstances", "*"),
        Ask::new("iam:GetInstanceProfile", profile),
        Ask::new("iam:CreateInstanceProfile", profile).tags("RequestTag", p),
        Ask::new("iam:TagInstanceProfile", profile).tags("RequestTag", p),
        Ask::new("iam:AddRoleToInstanceProfile", profile).tags("ResourceTag", p),
        Ask::new("iam:RemoveRoleFromInstanceProfile", profile).tags("ResourceTag", p),
        Ask::new("iam:DeleteInstanceProfile", profile).tags("ResourceTag", p),
        Ask::new("sqs:ReceiveMessage", &queue),
        Ask::new("sqs:DeleteMessage", &queue),
        Ask::new("eks:DescribeCluster", &cluster),
    ];
    let denied: Vec<String> = asks
        .iter()
        .filter(|ask| !allowed(policy, ask))
        .map(|ask| format!("{} on {} with {:?}", ask.action, ask.arn, ask.context))
        .collect();
    assert!(
        denied.is_empty(),
        "the policy's conditions refuse what the controller did:\n{}",
        denied.join("\n")
    );
    // The evaluator refuses what the policy's conditions keep out: another
    // cluster's instance, a tag added after creation, the role to Lambda,
    // another cluster's endpoint.
    let mut other = i.clone();
    other.remove(&format!("kubernetes.io/cluster/{CLUSTER}"));
    other.insert(
        "kubernetes.io/cluster/other".to_string(),
        "owned".to_string(),
    );
    for ask in [
        Ask::new("ec2:TerminateInstances", instance).tags("ResourceTag", &other),
        Ask::new("ec2:CreateTags", instance).tags("RequestTag", i),
        Ask::new("iam:PassRole", &role).with("iam:PassedToService", "lambda.amazonaws.com"),
        Ask::new(
            "eks:DescribeCluster",
            &format!("arn:aws:eks:{REGION}:{ACCOUNT}:cluster/other"),
        ),
    ] {
        assert!(
            !allowed(policy, &ask),
            "{} on {} allowed with {:?}",
            ask.action,
            ask.arn,
            ask.context
        );
    }
}

#[test]
fn moto_gets_every_action_of_the_policy_and_only_resources_widened() {
    let policy = controller_policy();
    let moto = as_moto_evaluates(&policy);
    let actions = |p: &Value| -> BTreeSet<String> {
        p["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| strings(&s["Action"]))
            .collect()
    };
    let mut expected = actions(&policy);
    expected.extend(MOTO_NAMES.iter().map(|(_, moto)| moto.to_string()));
    assert_eq!(actions(&moto), expected);
    for statement in moto["Statement"].as_array().unwrap() {
        let original = policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| {
                statement["Sid"]
                    .as_str()
                    .unwrap()
                    .starts_with(s["Sid"].as_str().unwrap())
            })
            .unwrap();
        assert_eq!(statement["Condition"], original["Condition"]);
        assert_eq!(statement["Effect"], original["Effect"]);
        let checked = strings(&statement["Action"])
            .iter()
            .any(|a| MOTO_CHECKS_RESOURCE.contains(&a.as_str()));
        if checked {
            assert_eq!(statement["Resource"], original["Resource"], "{statement}");
        }
    }
    assert!(glob(
        "arn:aws:ec2:*:*:instance/*",
        "arn:aws:ec2:us-east-1:1:instance/i-1"
    ));
    assert!(!glob(
        "arn:aws:ec2:*::image/*",
        "arn:aws:ec2:us-east-1:1:instance/i-1"
    ));
    assert!(glob("a?c*", "abcdef") && !glob("a?c", "ac"));
}
