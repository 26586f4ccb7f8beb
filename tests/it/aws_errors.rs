//! What a failed AWS call looks like to the controller, over the wire
//! (moto behind the fault-injecting proxy): the operation and the
//! service's error code in its error, and retries bounded by a quota that
//! belongs to one set of clients.

use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use nodewright::aws::clients::{AwsClients, AwsSettings};

use crate::aws_proxy::{Fault, FaultPlan, start_with_faults, unchanged};
use crate::moto::moto;

/// The SDK configuration of the clients, against `endpoint`.
async fn config_for(endpoint: &str, retry: RetryConfig) -> aws_config::SdkConfig {
    let settings = AwsSettings {
        region: Some("us-east-1".to_string()),
        endpoint_url: Some(endpoint.to_string()),
        credentials: Some(aws_sdk_ec2::config::Credentials::new(
            "testing", "testing", None, None, "moto",
        )),
    };
    nodewright::aws::clients::sdk_config(&settings)
        .await
        .into_builder()
        .retry_config(retry)
        .build()
}

/// A cloud-provider call that still fails after the SDK's retries names
/// its operation and the service's error code (read with
/// `ProvideErrorMetadata`), which is what the one warning its controller
/// logs shows; the SDK error alone displays as "service error".
#[tokio::test]
async fn a_failed_call_names_its_operation_and_error_code() {
    let plan = FaultPlan::new(3, 0.0, 0.0);
    let proxy = start_with_faults(&moto().endpoint, unchanged(), Some(plan.clone())).await;
    let config = config_for(&proxy.endpoint, RetryConfig::disabled()).await;
    let instances = nodewright::aws::instance::InstanceProvider::new(
        aws_sdk_ec2::Client::new(&config),
        "faults-codes",
        Arc::new(nodewright::cloudprovider::UnavailableOfferings::default()),
    );
    for (fault, shown) in [
        (
            Fault::Throttle,
            "ec2:DescribeInstances: RequestLimitExceeded: Request limit exceeded.",
        ),
        (
            Fault::ServerError,
            "ec2:DescribeInstances: InternalError: An internal error has occurred",
        ),
    ] {
        plan.script(&[fault]);
        let error = instances
            .list()
            .await
            .expect_err("the proxy failed the call");
        assert_eq!(error.to_string(), shown);
    }
    let templates = nodewright::aws::launch_template::LaunchTemplateProvider::new(
        aws_sdk_ec2::Client::new(&config),
        "faults-codes",
    );
    plan.script(&[Fault::Throttle]);
    let error = templates
        .list_for_class("default")
        .await
        .expect_err("the proxy failed the call");
    assert_eq!(
        error.to_string(),
        "ec2:DescribeLaunchTemplates default: RequestLimitExceeded: Request limit exceeded."
    );
}

/// The SDK's retry quota (a token bucket drained by failed retries) is,
/// by default, one per service and region for the whole process. Clients
/// built by `AwsClients::new` hold their own: a sandbox whose calls kept
/// failing, which spent its quota, leaves the next sandbox of the process
/// its retries. (Sharing one quota, a faulted scenario left every later
/// one of the test run without retries, and an EC2NodeClass whose lookups
/// then failed more often than not took minutes to become Ready.)
#[tokio::test]
async fn each_set_of_clients_has_its_own_retry_quota() {
    let fast = RetryConfig::standard()
        .with_max_attempts(5)
        .with_initial_backoff(Duration::from_millis(1))
        .with_max_backoff(Duration::from_millis(2));
    // Every call throttled: 30 calls spend the quota (500 tokens, 5 a
    // retry, 4 retries a call) after 25.
    let always = FaultPlan::new(11, 1.0, 0.0);
    let throttling = start_with_faults(&moto().endpoint, unchanged(), Some(always.clone())).await;
    let spent = AwsClients::new(&config_for(&throttling.endpoint, fast.clone()).await);
    for _ in 0..30 {
        spent
            .ec2
            .describe_instances()
            .send()
            .await
            .expect_err("every call is throttled");
    }
    let attempts = always.total().throttled;
    assert_eq!(attempts, 25 * 5 + 5, "retries stop once the quota is spent");

    // Other clients of the same process, region and service: their first
    // attempt is throttled, the retry goes through.
    let once = FaultPlan::new(12, 0.0, 0.0);
    let proxy = start_with_faults(&moto().endpoint, unchanged(), Some(once.clone())).await;
    let fresh = AwsClients::new(&config_for(&proxy.endpoint, fast).await);
    once.script(&[Fault::Throttle]);
    fresh
        .ec2
        .describe_instances()
        .send()
        .await
        .expect("retried after the throttle");
    assert_eq!(once.total().throttled, 1);
    assert_eq!(once.total().forwarded, 1);
}
