//! Karpenter's CRD validation cases (`pkg/apis/v1/*_validation_cel_test.go`
//! of kubernetes-sigs/karpenter and aws/karpenter-provider-aws), as data,
//! run against the API server double and against the real kube-apiserver of
//! the pinned control plane with the CRDs of `crds/` installed.
//!
//! Each case is named by Karpenter's `It` text (with the table entry after
//! ` / `), holds the object Karpenter's typed client would send (Go's JSON
//! encoding: fields without `omitempty` are sent empty, `NillableDuration`s
//! that were never set are sent as `Never`, `metav1.Duration` as `20m0s`)
//! and Karpenter's verdict. An update case names the object created first.
//! Both tests report every disagreement at once.

#[path = "apis_cel/ec2nodeclass.rs"]
mod ec2nodeclass;
#[path = "apis_cel/ec2nodeclass_kubelet.rs"]
mod ec2nodeclass_kubelet;
#[path = "apis_cel/nodeclaim.rs"]
mod nodeclaim;
#[path = "apis_cel/nodepool.rs"]
mod nodepool;
#[path = "apis_cel/nodepool_aws.rs"]
mod nodepool_aws;

use kube::api::{Api, DeleteParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

/// What Karpenter's test expects of the API server.
#[derive(Clone, Debug)]
pub enum Expect {
    /// `To(Succeed())`.
    Accept,
    /// `ToNot(Succeed())`, with a fragment of the message where one is asserted.
    Refuse(Option<&'static str>),
}

/// One ported case.
#[derive(Clone, Debug)]
pub struct Case {
    /// Karpenter's `It` text (` / ` and the entry for table entries).
    pub name: String,
    /// The object sent (its `metadata.name` is filled in by the runner).
    pub object: Value,
    /// For an update: the object created first; `object` then replaces it.
    pub old: Option<Value>,
    /// Karpenter's verdict.
    pub expect: Expect,
    /// On acceptance: JSON pointers and the values the server must have
    /// defaulted them to.
    pub defaults: Vec<(&'static str, Value)>,
}

impl Case {
    /// A create Karpenter expects to succeed.
    pub fn accept(name: impl Into<String>, object: Value) -> Case {
        Case {
            name: name.into(),
            object,
            old: None,
            expect: Expect::Accept,
            defaults: Vec::new(),
        }
    }

    /// A create Karpenter expects to fail.
    pub fn refuse(name: impl Into<String>, object: Value) -> Case {
        Case {
            expect: Expect::Refuse(None),
            ..Case::accept(name, object)
        }
    }

    /// The case is an update from `old` (created first).
    pub fn updating(mut self, old: Value) -> Case {
        self.old = Some(old);
        self
    }

    /// On acceptance, `pointer` must hold `value` in the server's answer.
    pub fn defaulted(mut self, pointer: &'static str, value: Value) -> Case {
        self.defaults.push((pointer, value));
        self
    }
}

/// Sets the value at a JSON pointer, creating missing objects on the way;
/// `Value::Null` removes it.
pub fn set(mut document: Value, pointer: &str, value: Value) -> Value {
    let mut target = &mut document;
    let keys: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|k| k.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = keys.split_last() else {
        return value;
    };
    for key in parents {
        target = match target {
            Value::Array(items) => &mut items[key.parse::<usize>().expect("an array index")],
            other => {
                if !other.is_object() {
                    *other = Value::Object(Default::default());
                }
                other
                    .as_object_mut()
                    .expect("an object")
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Default::default()))
            }
        };
    }
    match target {
        Value::Object(map) if value.is_null() => {
            map.remove(last);
        }
        Value::Object(map) => {
            map.insert(last.clone(), value);
        }
        Value::Array(items) => {
            let index = last.parse::<usize>().expect("an array index");
            if index == items.len() {
                items.push(value);
            } else {
                items[index] = value;
            }
        }
        other => panic!("{pointer}: parent {other} is not a container"),
    }
    document
}

/// Every ported case, in file order.
pub fn all() -> Vec<Case> {
    let mut cases = nodepool::cases();
    cases.extend(nodeclaim::cases());
    cases.extend(ec2nodeclass::cases());
    cases
}

/// What a server answered.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Accepted; the object as the server returned it (defaults applied).
    Accepted(Value),
    /// Refused with this message (an API error).
    Refused(String),
    /// Not an answer about the object (transport, or the old object of an
    /// update could not be created).
    Failed(String),
}

fn resource(kind: &str) -> ApiResource {
    let (group, plural) = match kind {
        "NodePool" => ("karpenter.sh", "nodepools"),
        "NodeClaim" => ("karpenter.sh", "nodeclaims"),
        "EC2NodeClass" => ("karpenter.k8s.aws", "ec2nodeclasses"),
        other => panic!("a case of unknown kind {other}"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

fn named(object: &Value, name: &str) -> DynamicObject {
    let object = set(object.clone(), "/metadata/name", Value::String(name.into()));
    serde_json::from_value(object).expect("a case object is a Kubernetes object")
}

fn outcome(result: Result<DynamicObject, kube::Error>) -> Outcome {
    match result {
        Ok(object) => Outcome::Accepted(serde_json::to_value(object).unwrap_or_default()),
        Err(kube::Error::Api(status)) => Outcome::Refused(status.message.clone()),
        Err(other) => Outcome::Failed(other.to_string()),
    }
}

/// Runs every case against the server behind `client`: creates with
/// `dryRun=All`; for an update, creates the old object (named
/// `{prefix}-{index}`), replaces it with `dryRun=All` and deletes it.
pub async fn run(client: &kube::Client, cases: &[Case], prefix: &str) -> Vec<Outcome> {
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut outcomes = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        let kind = case.object["kind"].as_str().unwrap_or_default();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind));
        let name = format!("{prefix}-{index}");
        let result = match &case.old {
            None => outcome(api.create(&dry_run, &named(&case.object, &name)).await),
            Some(old) => match api.create(&PostParams::default(), &named(old, &name)).await {
                Err(e) => Outcome::Failed(format!("creating the old object: {e}")),
                Ok(created) => {
                    let mut new = named(&case.object, &name);
                    new.metadata.resource_version = created.metadata.resource_version.clone();
                    let replaced = outcome(api.replace(&name, &dry_run, &new).await);
                    match api.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => replaced,
                        Err(e) => Outcome::Failed(format!("deleting the old object: {e}")),
                    }
                }
            },
        };
        outcomes.push(result);
    }
    outcomes
}

/// Every case whose outcome is not Karpenter's verdict, one line each.
pub fn disagreements(cases: &[Case], outcomes: &[Outcome]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (case, outcome) in cases.iter().zip(outcomes) {
        let name = &case.name;
        match (&case.expect, outcome) {
            (_, Outcome::Failed(error)) => wrong.push(format!("{name}: failed: {error}")),
            (Expect::Accept, Outcome::Refused(message)) => {
                wrong.push(format!("{name}: expected accept, got refused: {message}"))
            }
            (Expect::Refuse(_), Outcome::Accepted(_)) => {
                wrong.push(format!("{name}: expected refuse, got accepted"))
            }
            (Expect::Refuse(Some(fragment)), Outcome::Refused(message))
                if !message.contains(fragment) =>
            {
                wrong.push(format!(
                    "{name}: expected a refusal containing {fragment:?}, got: {message}"
                ))
            }
            (Expect::Accept, Outcome::Accepted(answer)) => {
                for (pointer, value) in &case.defaults {
                    let got = answer.pointer(pointer);
                    if got != Some(value) {
                        wrong.push(format!(
                            "{name}: expected {pointer} defaulted to {value}, got {got:?}"
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    wrong
}

/// The verdicts of two servers that differ, and the specs they defaulted
/// differently, one line each.
pub fn differences(cases: &[Case], a: &[Outcome], b: &[Outcome]) -> Vec<String> {
    let mut different = Vec::new();
    for ((case, a), b) in cases.iter().zip(a).zip(b) {
        match (a, b) {
            (Outcome::Accepted(x), Outcome::Accepted(y)) if x["spec"] != y["spec"] => {
                different.push(format!(
                    "{}: defaulted specs differ:\n    kube-apiserver {}\n    double         {}",
                    case.name, x["spec"], y["spec"]
                ));
            }
            (Outcome::Accepted(_), Outcome::Accepted(_))
            | (Outcome::Refused(_), Outcome::Refused(_)) => {}
            (a, b) => different.push(format!(
                "{}: kube-apiserver {}, double {}",
                case.name,
                verdict(a),
                verdict(b)
            )),
        }
    }
    different
}

fn verdict(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Accepted(_) => "accepted".into(),
        Outcome::Refused(message) => format!("refused ({message})"),
        Outcome::Failed(error) => format!("failed ({error})"),
    }
}

fn report(backend: &str, cases: &[Case], wrong: &[String]) -> String {
    format!(
        "{} of {} of Karpenter's validation cases disagree on {backend}:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    )
}

#[tokio::test]
async fn karpenters_validation_cases_on_the_double() {
    let cases = all();
    let server = nodewright::sim::double::server();
    let outcomes = run(&server.client(), &cases, "cel").await;
    let wrong = disagreements(&cases, &outcomes);
    assert!(wrong.is_empty(), "{}", report("the double", &cases, &wrong));
}

/// The CRDs of `crds/`, as checked in.
fn checked_in_crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let mut crds = Vec::new();
    for name in [
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
    ] {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        crds.push(
            nodewright::yaml::from_str(&text)
                .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display())),
        );
    }
    crds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenters_validation_cases_on_kube_apiserver() {
    let plane = tokio::task::spawn_blocking(super::control_plane::shared)
        .await
        .unwrap();
    let cluster = nodewright::sim::sandbox::cluster::Cluster::connect(plane.kubeconfig())
        .await
        .unwrap();
    cluster.install_crds(&checked_in_crds()).await.unwrap();
    let cases = all();
    let outcomes = run(&cluster.client(), &cases, "cel").await;
    let mut wrong = disagreements(&cases, &outcomes);
    // The double must answer as kube-apiserver does, defaults included.
    let server = nodewright::sim::double::server();
    let double = run(&server.client(), &cases, "cel").await;
    wrong.extend(
        differences(&cases, &outcomes, &double)
            .into_iter()
            .map(|d| format!("double vs kube-apiserver: {d}")),
    );
    assert!(
        wrong.is_empty(),
        "{}",
        report("kube-apiserver", &cases, &wrong)
    );
}
