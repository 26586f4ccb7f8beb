//! Which of the cluster's instances EC2 reports as unhealthy
//! (`DescribeInstanceStatus`): a failed instance or system status check
//! that has been impaired for [`UNHEALTHY_THRESHOLD`], or a scheduled
//! event (reboot, maintenance, retirement, stop) — Karpenter's
//! `instancestatus` provider.
//!
//! The call names the instances (at most [`IDS_PER_CALL`] each), so only
//! the cluster's own instances are read, whatever else runs in the account.
//! Attached EBS status checks are not read: a failed volume may be a pod's,
//! not the node's (as Karpenter). Events whose description EC2 has marked
//! `[Completed]` or `[Canceled]` are over and are not reported. What to do
//! about an unhealthy instance is the interruption controller's call.

use std::time::{Duration, SystemTime};

use aws_sdk_ec2::types::{InstanceStatus, InstanceStatusSummary, StatusType};

use super::errors::AwsError;

/// How long a status check must have failed before the instance counts as
/// unhealthy (Karpenter's `UnhealthyThreshold`): checks flap while an
/// instance boots or reboots.
pub const UNHEALTHY_THRESHOLD: Duration = Duration::from_secs(120);
/// Instance IDs one `DescribeInstanceStatus` call may name (the API's limit).
pub const IDS_PER_CALL: usize = 100;

/// The part of an instance's status that is failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// The instance's own status checks (its OS, network configuration).
    InstanceStatus,
    /// The host's status checks (hardware, power, network).
    SystemStatus,
    /// A scheduled event: EC2 will reboot, stop or retire the instance.
    EventStatus,
}

impl Category {
    /// Karpenter's metric label for the category.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::InstanceStatus => "InstanceStatus",
            Category::SystemStatus => "SystemStatus",
            Category::EventStatus => "EventStatus",
        }
    }
}

/// One unhealthy instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// `i-…`.
    pub instance_id: String,
    /// What is failing, each category once, in order.
    pub categories: Vec<Category>,
}

/// Reads instance statuses from EC2.
#[derive(Clone)]
pub struct InstanceStatusProvider {
    ec2: aws_sdk_ec2::Client,
}

impl InstanceStatusProvider {
    /// A provider calling `ec2`.
    pub fn new(ec2: aws_sdk_ec2::Client) -> Self {
        InstanceStatusProvider { ec2 }
    }

    /// The unhealthy ones among `instance_ids`, judged at `now`. Instances
    /// EC2 no longer knows are skipped (their NodeClaims are garbage
    /// collected elsewhere).
    pub async fn unhealthy(
        &self,
        instance_ids: &[String],
        now: SystemTime,
    ) -> Result<Vec<Unhealthy>, AwsError> {
        let mut out = Vec::new();
        for chunk in instance_ids.chunks(IDS_PER_CALL) {
            let mut token: Option<String> = None;
            loop {
                let answer = match self
                    .ec2
                    .describe_instance_status()
                    .set_instance_ids(Some(chunk.to_vec()))
                    .set_next_token(token.take())
                    .send()
                    .await
                {
                    Ok(answer) => answer,
                    // One terminated instance among the IDs fails the call:
                    // ask for the others one by one instead.
                    Err(error) if chunk.len() > 1 && is_unknown_id(&error) => {
                        for id in chunk {
                            out.extend(self.one(id, now).await?);
                        }
                        break;
                    }
                    Err(error) if is_unknown_id(&error) => break,
                    Err(error) => {
                        return Err(AwsError::from_sdk("ec2:DescribeInstanceStatus", &error));
                    }
                };
                out.extend(
                    answer
                        .instance_statuses()
                        .iter()
                        .filter_map(|s| unhealthy_of(s, now)),
                );
                match answer.next_token() {
                    Some(next) if !next.is_empty() => token = Some(next.to_string()),
                    _ => break,
                }
            }
        }
        Ok(out)
    }

    async fn one(&self, id: &str, now: SystemTime) -> Result<Option<Unhealthy>, AwsError> {
        match self
            .ec2
            .describe_instance_status()
            .instance_ids(id)
            .send()
            .await
        {
            Ok(answer) => Ok(answer
                .instance_statuses()
                .iter()
                .find_map(|s| unhealthy_of(s, now))),
            Err(error) if is_unknown_id(&error) => Ok(None),
            Err(error) => Err(AwsError::from_sdk("ec2:DescribeInstanceStatus", &error)),
        }
    }
}

/// Whether EC2 refused the call for an instance ID it does not know.
fn is_unknown_id<E, R>(error: &aws_sdk_ec2::error::SdkError<E, R>) -> bool
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata,
{
    matches!(
        aws_sdk_ec2::error::ProvideErrorMetadata::code(error),
        Some("InvalidInstanceID.NotFound" | "InvalidInstanceID.Malformed")
    )
}

/// What is unhealthy in one instance's status at `now`; `None` when nothing is.
pub fn unhealthy_of(status: &InstanceStatus, now: SystemTime) -> Option<Unhealthy> {
    let instance_id = status.instance_id()?.to_string();
    let mut categories = Vec::new();
    if failed_long_enough(status.instance_status(), now) {
        categories.push(Category::InstanceStatus);
    }
    if failed_long_enough(status.system_status(), now) {
        categories.push(Category::SystemStatus);
    }
    if status.events().iter().any(|event| {
        event.code().is_some()
            && !event.description().is_some_and(|d| {
                let d = d.trim_start();
                d.starts_with("[Completed]") || d.starts_with("[Canceled]")
            })
    }) {
        categories.push(Category::EventStatus);
    }
    (!categories.is_empty()).then_some(Unhealthy {
        instance_id,
        categories,
    })
}

/// Whether a check of `summary` has failed for [`UNHEALTHY_THRESHOLD`] by
/// `now`. A failed check without an `impairedSince` counts at once, as in
/// Karpenter (EC2 sets it on every failed check it reports).
fn failed_long_enough(summary: Option<&InstanceStatusSummary>, now: SystemTime) -> bool {
    let now_secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    summary.into_iter().flat_map(|s| s.details()).any(|detail| {
        detail.status() == Some(&StatusType::Failed)
            && detail
                .impaired_since()
                .is_none_or(|since| now_secs - since.secs() >= UNHEALTHY_THRESHOLD.as_secs() as i64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::primitives::DateTime;
    use aws_sdk_ec2::types::{
        EventCode, InstanceStatusDetails, InstanceStatusEvent, StatusName, SummaryStatus,
    };

    const NOW: u64 = 1_800_000_000;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(NOW)
    }

    fn summary(status: StatusType, since_secs_ago: Option<u64>) -> InstanceStatusSummary {
        let mut detail = InstanceStatusDetails::builder()
            .name(StatusName::Reachability)
            .status(status.clone());
        if let Some(ago) = since_secs_ago {
            detail = detail.impaired_since(DateTime::from_secs((NOW - ago) as i64));
        }
        InstanceStatusSummary::builder()
            .status(if status == StatusType::Failed {
                SummaryStatus::Impaired
            } else {
                SummaryStatus::Ok
            })
            .details(detail.build())
            .build()
    }

    fn event(description: &str) -> InstanceStatusEvent {
        InstanceStatusEvent::builder()
            .code(EventCode::InstanceRetirement)
            .description(description)
            .build()
    }

    // Karpenter's provider suite: "should return all impairment details".
    #[test]
    fn every_failing_category_is_reported_once() {
        let status = InstanceStatus::builder()
            .instance_id("i-1")
            .instance_status(summary(StatusType::Failed, Some(600)))
            .system_status(summary(StatusType::Failed, Some(600)))
            .events(event("The instance is running on degraded hardware"))
            .events(event("Scheduled reboot"))
            .build();
        assert_eq!(
            unhealthy_of(&status, now()),
            Some(Unhealthy {
                instance_id: "i-1".to_string(),
                categories: vec![
                    Category::InstanceStatus,
                    Category::SystemStatus,
                    Category::EventStatus
                ],
            })
        );
    }

    // "should not return healthy statuses".
    #[test]
    fn passed_checks_and_no_events_are_healthy() {
        let status = InstanceStatus::builder()
            .instance_id("i-1")
            .instance_status(summary(StatusType::Passed, None))
            .system_status(summary(StatusType::Passed, None))
            .build();
        assert_eq!(unhealthy_of(&status, now()), None);
    }

    // "should return scheduled maintenance events even when other statuses
    // are healthy": an event does not wait for the threshold.
    #[test]
    fn a_scheduled_event_counts_at_once_beside_healthy_checks() {
        let status = InstanceStatus::builder()
            .instance_id("i-1")
            .instance_status(summary(StatusType::Passed, None))
            .system_status(summary(StatusType::Passed, None))
            .events(event("The instance is scheduled for retirement"))
            .build();
        assert_eq!(
            unhealthy_of(&status, now()).map(|u| u.categories),
            Some(vec![Category::EventStatus])
        );
    }

    #[test]
    fn a_check_failing_for_less_than_two_minutes_is_not_yet_unhealthy_and_one_without_a_start_is() {
        let status = |ago| {
            InstanceStatus::builder()
                .instance_id("i-1")
                .instance_status(summary(StatusType::Failed, ago))
                .build()
        };
        assert_eq!(unhealthy_of(&status(Some(119)), now()), None);
        for long_enough in [Some(120), None] {
            assert_eq!(
                unhealthy_of(&status(long_enough), now()).map(|u| u.categories),
                Some(vec![Category::InstanceStatus])
            );
        }
    }

    #[test]
    fn completed_and_canceled_events_are_over() {
        let status = InstanceStatus::builder()
            .instance_id("i-1")
            .events(event(
                "[Completed] The instance is running on degraded hardware",
            ))
            .events(event("[Canceled] Scheduled reboot"))
            .build();
        assert_eq!(unhealthy_of(&status, now()), None);
    }
}
