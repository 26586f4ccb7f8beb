//! Karpenter's disruption tests (kubernetes-sigs/karpenter
//! `pkg/controllers/disruption/*_test.go`, `pkg/controllers/nodeclaim/
//! {disruption,expiration}/*_test.go`), ported case by case where they
//! apply: each test names the `It` it ports, sets the case up as the
//! `simulate --disruption` snapshot a Karpenter user would take, and checks
//! the decision Karpenter's test expects (or, where nodewright differs on
//! purpose, nodewright's, with why).

mod budgets;
mod candidates;
mod consolidation;
mod drift_expiration;
mod static_drift;
