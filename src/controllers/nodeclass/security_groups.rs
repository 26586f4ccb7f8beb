//! `status.securityGroups` (by id) and `SecurityGroupsReady`: `False`
//! (`SecurityGroupsNotFound`) when the terms matched no group, naming each
//! term; a term that matched nothing while others did is named in the
//! `True` condition's message.

use crate::apis::EC2NodeClass;
use crate::apis::conditions::EC2_NODE_CLASS_SECURITY_GROUPS_READY as SECURITY_GROUPS_READY;
use crate::apis::ec2nodeclass::{SecurityGroupSelectorTerm, SecurityGroupStatus};
use crate::aws::filters::describe_tags;
use crate::aws::security_groups::SecurityGroupError;

use super::super::Context;
use super::conditions::{Resolved, Stamp, name_terms};

/// The class's security groups and `SecurityGroupsReady`.
pub async fn resolve(
    context: &Context,
    class: &EC2NodeClass,
    stamp: &Stamp,
) -> Resolved<Vec<SecurityGroupStatus>> {
    let terms = &class.spec.security_group_selector_terms;
    match context.security_groups.list(terms).await {
        Ok(selection) => {
            let unmatched = name_terms(
                "securityGroupSelectorTerms",
                &selection.unmatched_terms,
                |i| describe(&terms[i]),
            );
            if selection.security_groups.is_empty() && !terms.is_empty() {
                return Resolved::to(
                    Vec::new(),
                    stamp.not_ready(
                        SECURITY_GROUPS_READY,
                        "SecurityGroupsNotFound",
                        format!("{unmatched} matched no security group"),
                    ),
                );
            }
            let status = selection
                .security_groups
                .iter()
                .map(|g| SecurityGroupStatus {
                    id: g.id.clone(),
                    name: g.name.clone(),
                })
                .collect();
            let message = if unmatched.is_empty() {
                String::new()
            } else {
                format!("{unmatched} matched no security group")
            };
            Resolved::to(status, stamp.ready(SECURITY_GROUPS_READY, message))
        }
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "security group lookup failed; keeping the stored groups");
            Resolved::keep()
        }
        Err(e @ SecurityGroupError::EmptyTerm { .. }) => Resolved::to(
            Vec::new(),
            stamp.not_ready(
                SECURITY_GROUPS_READY,
                "InvalidSecurityGroupSelector",
                e.to_string(),
            ),
        ),
        Err(e) => Resolved::condition(stamp.not_ready(
            SECURITY_GROUPS_READY,
            "SecurityGroupLookupFailed",
            e.to_string(),
        )),
    }
}

/// `tags k=v`, `id sg-…` or `name …`.
fn describe(term: &SecurityGroupSelectorTerm) -> String {
    match (&term.id, &term.name, &term.tags) {
        (Some(id), _, _) => format!("id {id}"),
        (None, Some(name), _) => format!("name {name}"),
        (None, None, Some(tags)) => format!("tags {}", describe_tags(tags)),
        (None, None, None) => "empty".to_string(),
    }
}
