//! EC2's eventual consistency right after a launch, as the proxy shows it:
//! for a while after CreateFleet returned an instance, DescribeInstances
//! leaves it out of its answers and answers `InvalidInstanceID.NotFound`
//! when asked for it by ID, and TerminateInstances does the same (see
//! "Eventual consistency" in the EC2 API guide). The instance IDs are read
//! from the CreateFleet answers that pass through the proxy.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Instances EC2 does not know yet, and what that did to the calls.
#[derive(Default)]
pub struct LaunchLag {
    /// How long a launched instance stays unknown; zero: not at all.
    hide_for: Mutex<Duration>,
    /// Instance ID → when EC2 will know it.
    hidden: Mutex<BTreeMap<String, Instant>>,
    tally: Mutex<LagTally>,
}

/// What [`LaunchLag`] did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LagTally {
    /// Instances hidden after their launch.
    pub launched: u64,
    /// Calls answered `InvalidInstanceID.NotFound` for a hidden instance.
    pub refused: u64,
    /// Instances left out of DescribeInstances answers.
    pub left_out: u64,
}

impl LaunchLag {
    /// Hides each instance launched from now on for `span`.
    pub fn hide_for(&self, span: Duration) {
        *self.hide_for.lock().unwrap() = span;
    }

    /// What was hidden and refused so far.
    pub fn tally(&self) -> LagTally {
        *self.tally.lock().unwrap()
    }

    /// The instances still unknown now.
    fn hidden(&self) -> Vec<String> {
        let now = Instant::now();
        let mut hidden = self.hidden.lock().unwrap();
        hidden.retain(|_, until| *until > now);
        hidden.keys().cloned().collect()
    }

    /// Notes the instances of a CreateFleet answer, if it hides them.
    pub fn launched(&self, answer: &[u8]) {
        let span = *self.hide_for.lock().unwrap();
        if span.is_zero() {
            return;
        }
        let ids = instance_ids(&String::from_utf8_lossy(answer));
        let until = Instant::now() + span;
        self.tally.lock().unwrap().launched += ids.len() as u64;
        let mut hidden = self.hidden.lock().unwrap();
        for id in ids {
            hidden.insert(id, until);
        }
    }

    /// For a DescribeInstances or TerminateInstances call naming a hidden
    /// instance (`InstanceId.N=` in its form), the instance EC2 answers it
    /// does not know; the call is then not forwarded, as EC2 fails it whole.
    pub fn refuses(&self, operation: &str, request: &[u8]) -> Option<String> {
        if !matches!(operation, "DescribeInstances" | "TerminateInstances") {
            return None;
        }
        let request = String::from_utf8_lossy(request);
        let hidden = self.hidden();
        let refused = request
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .filter(|(key, _)| key.starts_with("InstanceId."))
            .map(|(_, id)| id.to_string())
            .find(|id| hidden.contains(id))?;
        self.tally.lock().unwrap().refused += 1;
        Some(refused)
    }

    /// A DescribeInstances answer without the hidden instances.
    pub fn filter(&self, operation: &str, answer: Bytes) -> Bytes {
        if operation != "DescribeInstances" {
            return answer;
        }
        let hidden = self.hidden();
        if hidden.is_empty() {
            return answer;
        }
        let text = String::from_utf8_lossy(&answer);
        let mut left_out = 0;
        let kept = drop_items(&text, "instancesSet", |item| {
            let hide = hidden
                .iter()
                .any(|id| item.contains(&format!("<instanceId>{id}</instanceId>")));
            left_out += u64::from(hide);
            hide
        });
        if left_out == 0 {
            return answer;
        }
        // A reservation whose instances are all hidden is left out too.
        let kept = drop_items(&kept, "reservationSet", |reservation| {
            reservation.contains("<instancesSet></instancesSet>")
        });
        self.tally.lock().unwrap().left_out += left_out;
        Bytes::from(kept)
    }
}

/// The instance IDs in an EC2 answer: every element text `i-<hex>`.
fn instance_ids(answer: &str) -> Vec<String> {
    answer
        .split('>')
        .filter_map(|chunk| chunk.split('<').next())
        .filter(|text| {
            text.strip_prefix("i-")
                .is_some_and(|hex| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .map(str::to_string)
        .collect()
}

/// `xml` without the `<item>` children of each `<set>` element for which
/// `drop` holds (items nest: only those directly under `<set>` count).
fn drop_items(xml: &str, set: &str, mut drop: impl FnMut(&str) -> bool) -> String {
    let (open, close) = (format!("<{set}>"), format!("</{set}>"));
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let body_start = start + open.len();
        out.push_str(&rest[..body_start]);
        let Some(end) = rest[body_start..].find(&close).map(|e| body_start + e) else {
            rest = &rest[body_start..];
            break;
        };
        let body = &rest[body_start..end];
        for item in top_items(body) {
            if !drop(item) {
                out.push_str(item);
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The outermost `<item>…</item>` elements of `body`, in order (what lies
/// between them, whitespace in moto's answers, is dropped).
fn top_items(body: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start, mut at) = (0usize, 0usize, 0usize);
    while at < body.len() {
        let rest = &body[at..];
        if rest.starts_with("<item>") {
            if depth == 0 {
                start = at;
            }
            depth += 1;
            at += "<item>".len();
        } else if rest.starts_with("</item>") {
            depth = depth.saturating_sub(1);
            at += "</item>".len();
            if depth == 0 {
                items.push(&body[start..at]);
            }
        } else {
            at += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLEET: &str = "<CreateFleetResponse><fleetId>fleet-0b2f</fleetId><fleetInstanceSet><item><launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateId>lt-f052</launchTemplateId></launchTemplateSpecification></launchTemplateAndOverrides><instanceIds><item>i-4063af9e79682e903</item></instanceIds></item></fleetInstanceSet></CreateFleetResponse>";

    fn reservation(id: &str) -> String {
        format!(
            "<item><reservationId>r-{id}</reservationId><groupSet/><instancesSet><item><blockDeviceMapping><item><deviceName>/dev/xvda</deviceName></item></blockDeviceMapping><instanceId>{id}</instanceId></item></instancesSet></item>"
        )
    }

    #[test]
    fn a_launched_instance_is_unknown_for_its_span_and_then_known() {
        let lag = LaunchLag::default();
        lag.launched(FLEET.as_bytes());
        assert!(lag.hidden().is_empty(), "no span, nothing hidden");

        lag.hide_for(Duration::from_millis(300));
        lag.launched(FLEET.as_bytes());
        assert_eq!(lag.hidden(), ["i-4063af9e79682e903"]);
        let by_id =
            b"Action=TerminateInstances&Version=2016-11-15&InstanceId.1=i-4063af9e79682e903";
        assert_eq!(
            lag.refuses("TerminateInstances", by_id).as_deref(),
            Some("i-4063af9e79682e903")
        );
        assert_eq!(
            lag.refuses(
                "DescribeInstances",
                b"Action=DescribeInstances&InstanceId.1=i-00ff"
            ),
            None
        );
        assert_eq!(lag.refuses("CreateTags", by_id), None);

        let answer = format!(
            "<DescribeInstancesResponse><reservationSet>{}{}</reservationSet></DescribeInstancesResponse>",
            reservation("i-4063af9e79682e903"),
            reservation("i-00ff")
        );
        let filtered = lag.filter("DescribeInstances", Bytes::from(answer.clone()));
        assert_eq!(
            String::from_utf8_lossy(&filtered),
            format!(
                "<DescribeInstancesResponse><reservationSet>{}</reservationSet></DescribeInstancesResponse>",
                reservation("i-00ff")
            )
        );
        assert_eq!(
            lag.tally(),
            LagTally {
                launched: 1,
                refused: 1,
                left_out: 1
            }
        );

        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(lag.refuses("TerminateInstances", by_id), None);
        assert_eq!(
            lag.filter("DescribeInstances", Bytes::from(answer.clone())),
            Bytes::from(answer)
        );
    }

    #[test]
    fn instance_ids_are_element_texts() {
        assert_eq!(instance_ids(FLEET), ["i-4063af9e79682e903"]);
        assert!(instance_ids("<a>i-</a><b>i-xyz</b><c>ami-0123</c>").is_empty());
    }

    /// Over the wire: an instance launched through the proxy is unknown to
    /// the controller's instance provider for the span, then known.
    #[tokio::test]
    async fn the_instance_provider_sees_a_fresh_instance_as_not_found_until_ec2_knows_it() {
        use aws_sdk_ec2::types::{
            DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
            FleetLaunchTemplateSpecificationRequest, FleetType, RequestLaunchTemplateData,
            TargetCapacitySpecificationRequest,
        };
        let plan = crate::aws_proxy::FaultPlan::new(1, 0.0, 0.0);
        plan.hide_launched_for(Duration::from_secs(2));
        let proxy = crate::aws_proxy::start_with_faults(
            &crate::moto::moto().endpoint,
            crate::aws_proxy::unchanged(),
            Some(plan.clone()),
        )
        .await;
        let settings = nodewright::aws::clients::AwsSettings {
            region: Some("us-east-1".to_string()),
            endpoint_url: Some(proxy.endpoint.clone()),
            credentials: Some(aws_sdk_ec2::config::Credentials::new(
                "testing", "testing", None, None, "moto",
            )),
        };
        let config = nodewright::aws::clients::sdk_config(&settings).await;
        let ec2 = aws_sdk_ec2::Client::new(&config);
        let image = ec2.describe_images().send().await.unwrap().images()[0]
            .image_id()
            .unwrap()
            .to_string();
        let template = ec2
            .create_launch_template()
            .launch_template_name("consistency-lag")
            .launch_template_data(
                RequestLaunchTemplateData::builder()
                    .image_id(image)
                    .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
                    .build(),
            )
            .send()
            .await
            .unwrap()
            .launch_template
            .unwrap()
            .launch_template_id
            .unwrap();
        let fleet = ec2
            .create_fleet()
            .r#type(FleetType::Instant)
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(DefaultTargetCapacityType::OnDemand)
                    .build(),
            )
            .launch_template_configs(
                FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_id(template)
                            .version("$Latest")
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await
            .unwrap();
        let id = fleet.instances()[0].instance_ids()[0].clone();
        let instances = nodewright::aws::instance::InstanceProvider::new(
            ec2.clone(),
            "consistency-lag",
            std::sync::Arc::new(nodewright::cloudprovider::UnavailableOfferings::default()),
        );
        let error = instances.get(&id).await.expect_err("not known yet");
        assert!(error.is_not_found(), "{error}");
        let error = instances.terminate(&id).await.expect_err("not known yet");
        assert!(error.is_not_found(), "{error}");
        let listed = ec2.describe_instances().send().await.unwrap();
        assert!(
            listed
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .all(|i| i.instance_id() != Some(id.as_str())),
            "left out of DescribeInstances"
        );

        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert_eq!(instances.get(&id).await.unwrap().id, id);
        instances.terminate(&id).await.unwrap();
        let tally = plan.lag();
        assert_eq!((tally.launched, tally.refused), (1, 2), "{tally:?}");
        assert!(tally.left_out >= 1, "{tally:?}");
    }
}
