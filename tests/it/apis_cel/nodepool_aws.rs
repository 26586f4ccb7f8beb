//! aws/karpenter-provider-aws `pkg/apis/v1/nodepool_validation_cel_test.go`:
//! the admission verdicts (the `RuntimeValidate` halves are the
//! controller's). Its rows are named `(aws) …`.

use serde_json::{Value, json};

use super::nodepool::{CORE_WELL_KNOWN, LABELS, REQUIREMENTS, base};
use super::{Case, set};

/// `karpv1.WellKnownLabels.Insert(...)` of the AWS provider's `labels.go`.
pub const AWS_WELL_KNOWN: [&str; 30] = [
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "topology.k8s.aws/zone-id",
    "karpenter.k8s.aws/instance-tenancy",
    "node.kubernetes.io/windows-build",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// The AWS provider's test NodePool (its class reference is an EC2NodeClass).
fn aws_base() -> Value {
    set(
        base(),
        "/spec/template/spec/nodeClassRef",
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}),
    )
}

/// The AWS provider's NodePool cases.
pub fn cases() -> Vec<Case> {
    let aws = |pointer: &str, value: Value| set(aws_base(), pointer, value);
    let mut cases = Vec::new();
    for label in CORE_WELL_KNOWN
        .into_iter()
        .chain(AWS_WELL_KNOWN)
        .filter(|l| {
            !matches!(
                *l,
                "karpenter.sh/nodepool"
                    | "karpenter.sh/capacity-type"
                    | "karpenter.k8s.aws/instance-tenancy"
            )
        })
    {
        cases.push(Case::accept(
            format!("(aws) Requirements should allow well known label exceptions / {label}"),
            aws(
                REQUIREMENTS,
                json!([{"key": label, "operator": "In", "values": ["test"]}]),
            ),
        ));
    }
    for (it, key, values) in [
        (
            "should fail validation with only invalid capacity types",
            "karpenter.sh/capacity-type",
            json!(["xspot"]),
        ),
        (
            "should pass validation with valid capacity types",
            "karpenter.sh/capacity-type",
            json!(["on-demand"]),
        ),
        (
            "should fail open if invalid and valid capacity types are present",
            "karpenter.sh/capacity-type",
            json!(["on-demand", "xspot"]),
        ),
        (
            "should fail validation with only invalid tenancy types",
            "karpenter.k8s.aws/instance-tenancy",
            json!(["xdedicated"]),
        ),
        (
            "should pass validation with valid tenancy types",
            "karpenter.k8s.aws/instance-tenancy",
            json!(["default"]),
        ),
        (
            "should fail open if invalid and valid tenancy types are present",
            "karpenter.k8s.aws/instance-tenancy",
            json!(["default", "xdedicated"]),
        ),
    ] {
        // Admission accepts all of them; the verdicts differ at RuntimeValidate.
        cases.push(Case::accept(
            format!("(aws) {it}"),
            aws(
                REQUIREMENTS,
                json!([{"key": key, "operator": "In", "values": values}]),
            ),
        ));
    }
    for label in CORE_WELL_KNOWN
        .into_iter()
        .chain(AWS_WELL_KNOWN)
        .filter(|l| *l != "karpenter.sh/nodepool")
    {
        cases.push(Case::accept(
            format!("(aws) Labels should allow well known label exceptions / {label}"),
            aws(LABELS, json!({label: "test"})),
        ));
    }
    cases
}
