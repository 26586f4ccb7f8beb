//! EC2 `Describe*` filters from the tag part of a selector term, shared by
//! subnets, security groups and capacity reservations. A tag value `*` means
//! only that the key exists (`tag-key`), as in Karpenter.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;

/// A filter `name` matching any of `values`.
pub fn filter(name: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values.into_iter().map(Into::into).collect()))
        .build()
}

/// One filter per tag, all of which a resource must match: `tag:KEY=VALUE`,
/// or `tag-key=KEY` for the value `*`.
pub fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(key, value)| {
            if value == "*" {
                filter("tag-key", [key.as_str()])
            } else {
                filter(&format!("tag:{key}"), [value.as_str()])
            }
        })
        .collect()
}

/// `key=value, key2=*` for messages that name a term's tags.
pub fn describe_tags(tags: &BTreeMap<String, String>) -> String {
    tags.iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_value_only_asks_for_the_key() {
        let tags = BTreeMap::from([
            ("karpenter.sh/discovery".to_string(), "demo".to_string()),
            ("team".to_string(), "*".to_string()),
        ]);
        let filters = tag_filters(&tags);
        let pairs: Vec<(&str, Vec<&str>)> = filters
            .iter()
            .map(|f| {
                (
                    f.name().unwrap(),
                    f.values().iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("tag:karpenter.sh/discovery", vec!["demo"]),
                ("tag-key", vec!["team"]),
            ]
        );
        assert_eq!(describe_tags(&tags), "karpenter.sh/discovery=demo, team=*");
    }
}
