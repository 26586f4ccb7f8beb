//! `status.subnets` and `SubnetsReady`.
//!
//! `status.subnets` lists the selected subnets most available IPv4
//! addresses first (ties by id): the launch path takes the first subnet of
//! each zone from it, so this order is part of the status's meaning.
//! `SubnetsReady` is `False` (`SubnetsNotFound`) when the terms matched no
//! subnet, naming each term; a term that matched nothing while others did is
//! named in the `True` condition's message.

use crate::apis::EC2NodeClass;
use crate::apis::conditions::EC2_NODE_CLASS_SUBNETS_READY as SUBNETS_READY;
use crate::apis::ec2nodeclass::{SubnetSelectorTerm, SubnetStatus};
use crate::aws::filters::describe_tags;
use crate::aws::subnets::SubnetError;

use super::super::Context;
use super::conditions::{Resolved, Stamp, name_terms};

/// The class's subnets and `SubnetsReady`.
pub async fn resolve(
    context: &Context,
    class: &EC2NodeClass,
    stamp: &Stamp,
) -> Resolved<Vec<SubnetStatus>> {
    let terms = &class.spec.subnet_selector_terms;
    match context.subnets.list(terms).await {
        Ok(selection) => {
            let unmatched = name_terms("subnetSelectorTerms", &selection.unmatched_terms, |i| {
                describe(&terms[i])
            });
            if selection.subnets.is_empty() {
                let message = if terms.is_empty() {
                    "subnetSelectorTerms is empty: select subnets by tags or id".to_string()
                } else {
                    format!("{unmatched} matched no subnet")
                };
                return Resolved::to(
                    Vec::new(),
                    stamp.not_ready(SUBNETS_READY, "SubnetsNotFound", message),
                );
            }
            let status = selection
                .subnets
                .iter()
                .map(|s| SubnetStatus {
                    id: s.id.clone(),
                    zone: s.zone.clone(),
                    zone_id: s.zone_id.clone(),
                })
                .collect();
            let message = if unmatched.is_empty() {
                String::new()
            } else {
                format!("{unmatched} matched no subnet")
            };
            Resolved::to(status, stamp.ready(SUBNETS_READY, message))
        }
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "subnet lookup failed; keeping the stored subnets");
            Resolved::keep()
        }
        Err(e @ SubnetError::EmptyTerm { .. }) => Resolved::to(
            Vec::new(),
            stamp.not_ready(SUBNETS_READY, "InvalidSubnetSelector", e.to_string()),
        ),
        Err(e) => {
            Resolved::condition(stamp.not_ready(SUBNETS_READY, "SubnetLookupFailed", e.to_string()))
        }
    }
}

/// `tags k=v` or `id subnet-…`.
fn describe(term: &SubnetSelectorTerm) -> String {
    match (&term.id, &term.tags) {
        (Some(id), _) => format!("id {id}"),
        (None, Some(tags)) => format!("tags {}", describe_tags(tags)),
        (None, None) => "empty".to_string(),
    }
}
