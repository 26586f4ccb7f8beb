//! Recorded calls: what a component was given on a real cluster and what
//! it answered (`nodewright filter test --snapshot FILE --record DIR`), one
//! JSON file per call, replayed by [`Harness::assert_fixtures`] in a filter
//! crate's `cargo test --features harness`, so its tests pin what it did on
//! the team's cluster.
//!
//! A fixture file holds `role` (`instance-filter`, `priority-scorer` or
//! `ami-selector`), `context` (the call's NodePool, EC2NodeClass, region,
//! config and time), the candidates (`instanceTypes` or `amis`, in the
//! SDK's serde shape) and `answer`: `{"filter": {"kept": [...], "dropped":
//! [{"name", "reason"}]}}`, `{"score": {"scores": [{"name", "score"}]}}` or
//! `{"select": {"order": [...]}}`.

use std::path::{Path, PathBuf};

use nodewright_filter::{Ami, Context, InstanceTypeInfo};
use serde::{Deserialize, Serialize};

use crate::harness::{Harness, HarnessError};
use crate::{CallError, Role};

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fixture {
    /// The role the component was called as.
    pub role: String,
    /// The call's context.
    pub context: Context,
    /// The instance types given (filters and scorers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_types: Vec<InstanceTypeInfo>,
    /// The AMIs given (selectors).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<Ami>,
    /// What the component answered.
    pub answer: Answer,
}

/// A component's answer, by role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Answer {
    /// An instance filter's verdicts.
    Filter {
        /// Kept names, in candidate order.
        kept: Vec<String>,
        /// Dropped names with their reasons, in candidate order.
        dropped: Vec<DroppedType>,
    },
    /// A priority scorer's scores.
    Score {
        /// Every candidate's score, in candidate order.
        scores: Vec<ScoredType>,
    },
    /// An AMI selector's choice.
    Select {
        /// Chosen AMI ids, best first.
        order: Vec<String>,
    },
}

/// A dropped instance type and the reason given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedType {
    /// Instance type name.
    pub name: String,
    /// The component's reason.
    pub reason: String,
}

/// An instance type and its score.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoredType {
    /// Instance type name.
    pub name: String,
    /// The component's score.
    pub score: i32,
}

/// The candidates of a call to record.
pub enum Given<'a> {
    /// Instance types (filters and scorers).
    InstanceTypes(&'a [InstanceTypeInfo]),
    /// AMIs (selectors).
    Amis(&'a [Ami]),
}

impl Fixture {
    /// Calls `harness`'s module with `context` on `given` and records the
    /// call. An error when the call fails (a failing call is not a fixture)
    /// or the candidates do not suit the module's role.
    pub fn record(
        harness: &Harness,
        context: &Context,
        given: Given<'_>,
    ) -> Result<Fixture, CallError> {
        let module = harness.module();
        let role = module.role();
        let call = Harness::from_module(module.clone()).with_context(context.clone());
        let (instance_types, amis, answer) = match (role, given) {
            (Role::InstanceFilter, Given::InstanceTypes(types)) => {
                let out = call.filter(types)?;
                let answer = Answer::Filter {
                    kept: out.kept,
                    dropped: out
                        .dropped
                        .into_iter()
                        .map(|(name, reason)| DroppedType { name, reason })
                        .collect(),
                };
                (types.to_vec(), Vec::new(), answer)
            }
            (Role::PriorityScorer, Given::InstanceTypes(types)) => {
                let out = call.score(types)?;
                let answer = Answer::Score {
                    scores: out
                        .scores
                        .into_iter()
                        .map(|(name, score)| ScoredType { name, score })
                        .collect(),
                };
                (types.to_vec(), Vec::new(), answer)
            }
            (Role::AmiSelector, Given::Amis(amis)) => {
                let out = call.select(amis)?;
                (
                    Vec::new(),
                    amis.to_vec(),
                    Answer::Select { order: out.order },
                )
            }
            (role, _) => {
                return Err(CallError::Setup(format!(
                    "a {role} is not recorded with these candidates"
                )));
            }
        };
        Ok(Fixture {
            role: role.as_str().to_string(),
            context: context.clone(),
            instance_types,
            amis,
            answer,
        })
    }

    /// What the module of `harness` answers to this fixture's call now:
    /// the same call recorded again.
    fn replay(&self, harness: &Harness) -> Result<Answer, CallError> {
        let given = match harness.module().role() {
            Role::AmiSelector => Given::Amis(&self.amis),
            Role::InstanceFilter | Role::PriorityScorer => {
                Given::InstanceTypes(&self.instance_types)
            }
        };
        Ok(Fixture::record(harness, &self.context, given)?.answer)
    }
}

/// The fixture files (`*.json`) of `dir`, sorted by name; none when the
/// directory does not exist.
pub fn fixture_files(dir: &Path) -> Result<Vec<PathBuf>, HarnessError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(HarnessError::Read {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

impl Harness {
    /// Replays every fixture in `dir` (as `filter test --record` writes
    /// them) against this module and panics, naming the file and the first
    /// difference, when an answer is not the recorded one. Returns how many
    /// were replayed (0 for a missing or empty directory).
    #[track_caller]
    pub fn assert_fixtures(&self, dir: impl AsRef<Path>) -> usize {
        let files = match fixture_files(dir.as_ref()) {
            Ok(files) => files,
            Err(e) => panic!("{e}"),
        };
        let role = self.module().role();
        for file in &files {
            let text = std::fs::read_to_string(file)
                .unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", file.display()));
            let fixture: Fixture = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("fixture {} is not one: {e}", file.display()));
            assert!(
                fixture.role == role.as_str(),
                "fixture {} records a {}, this module is a {role}",
                file.display(),
                fixture.role
            );
            let now = fixture
                .replay(self)
                .unwrap_or_else(|e| panic!("fixture {}: the call failed: {e}", file.display()));
            if now != fixture.answer {
                panic!(
                    "fixture {} (NodePool {:?}): the answer changed\n{}",
                    file.display(),
                    fixture.context.node_pool,
                    difference(&fixture.answer, &now)
                );
            }
        }
        files.len()
    }
}

/// The first differences between the recorded answer and today's.
fn difference(recorded: &Answer, now: &Answer) -> String {
    match (recorded, now) {
        (
            Answer::Filter {
                kept: a,
                dropped: da,
            },
            Answer::Filter {
                kept: b,
                dropped: db,
            },
        ) => {
            let newly_dropped: Vec<&DroppedType> =
                db.iter().filter(|d| a.contains(&d.name)).take(5).collect();
            let newly_kept: Vec<&String> = b
                .iter()
                .filter(|k| da.iter().any(|d| &d.name == *k))
                .take(5)
                .collect();
            let reasons: Vec<(&DroppedType, &DroppedType)> = da
                .iter()
                .filter_map(|d| {
                    Some((
                        d,
                        db.iter()
                            .find(|e| e.name == d.name && e.reason != d.reason)?,
                    ))
                })
                .take(5)
                .collect();
            format!(
                "  now dropped (recorded kept): {newly_dropped:?}\n  now kept (recorded dropped): {newly_kept:?}\n  reasons changed (recorded, now): {reasons:?}"
            )
        }
        (Answer::Score { scores: a }, Answer::Score { scores: b }) => {
            let changed: Vec<(&ScoredType, &ScoredType)> =
                a.iter().zip(b).filter(|(x, y)| x != y).take(5).collect();
            format!("  scores changed (recorded, now): {changed:?}")
        }
        (a, b) => format!("  recorded: {a:?}\n  now:      {b:?}"),
    }
}
