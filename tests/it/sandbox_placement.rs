//! Placement groups in `nodewright sandbox` with the machine's `kubectl`:
//! the simulated EC2NodeClass controller resolves a selector to a cluster
//! group, a partition group written into the status is kept, and the
//! Kafka brokers of `examples/workloads/placement-group` land one per
//! partition on nodes labelled with the group and their partition, while
//! the etcd member selecting the spread group by id gets a node in it.

use super::sandbox_disruption::Sandbox;
use super::sandbox_kubectl::{Backend, until, until_within};
use std::time::Duration;

const DIR: &str = "examples/workloads/placement-group";

#[test]
fn brokers_spread_over_the_partitions_of_their_placement_group() {
    let sandbox = Sandbox::start_on("placement", Backend::Double);
    let kubeconfig = sandbox.kubeconfig();
    sandbox.ok(&[
        "apply",
        "-f",
        &format!("{DIR}/ec2nodeclasses.yaml"),
        "-f",
        &format!("{DIR}/nodepools.yaml"),
    ]);
    // No EC2 to ask: the selector's name becomes a simulated cluster group.
    until(
        kubeconfig,
        &[
            "get",
            "ec2nodeclass",
            "kafka",
            "-o",
            "jsonpath={.status.placementGroup.id} {.status.placementGroup.strategy}",
        ],
        |out| out == "pg-sim-kafka-brokers cluster",
    );
    // A partition group written into the status for the same name is kept.
    sandbox.ok(&[
        "patch",
        "ec2nodeclass",
        "kafka",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"placementGroup":{"id":"pg-0a1b2c3d4e5f60001","name":"kafka-brokers","strategy":"partition","partitionCount":3}}}"#,
    ]);
    until(
        kubeconfig,
        &[
            "get",
            "ec2nodeclass",
            "kafka",
            "-o",
            "jsonpath={.status.placementGroup.strategy} {.status.conditions[?(@.type==\"Ready\")].status}",
        ],
        |out| out == "partition True",
    );
    sandbox.ok(&["apply", "-f", &format!("{DIR}/workloads.yaml")]);
    let partitions = until_within(
        kubeconfig,
        &[
            "get",
            "nodes",
            "-l",
            "karpenter.sh/nodepool=kafka",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.labels.karpenter\.k8s\.aws/placement-group-id}/{.metadata.labels.karpenter\.k8s\.aws/placement-group-partition}{"\n"}{end}"#,
        ],
        Duration::from_secs(120),
        |out| out.lines().count() == 3,
    );
    let mut partitions: Vec<&str> = partitions.lines().collect();
    partitions.sort();
    assert_eq!(
        partitions,
        [
            "pg-0a1b2c3d4e5f60001/1",
            "pg-0a1b2c3d4e5f60001/2",
            "pg-0a1b2c3d4e5f60001/3"
        ]
    );
    until_within(
        kubeconfig,
        &[
            "get",
            "pods",
            "-l",
            "app=kafka",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ],
        Duration::from_secs(120),
        |out| out == "Running Running Running",
    );
    // The etcd member selects the spread group by the id its class names.
    until_within(
        kubeconfig,
        &[
            "get",
            "nodes",
            "-l",
            "karpenter.k8s.aws/placement-group-id=pg-0a1b2c3d4e5f60002",
            "-o",
            "name",
        ],
        Duration::from_secs(120),
        |out| out.lines().count() == 1,
    );
}
