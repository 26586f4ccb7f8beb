//! The AWS side: the EC2 catalog (embedded, or live from the EC2 API and
//! refreshed) and the instance-type resolver that turns it into the
//! scheduler's instance types, prices, the providers an EC2NodeClass's
//! status comes from (AMIs, subnets, security groups, instance profiles,
//! capacity reservations, dry-run permission checks), and the SDK clients.

pub mod amis;
pub mod capacity_reservations;
pub mod catalog;
pub mod clients;
pub mod dry_run;
pub mod errors;
pub mod filters;
pub mod instance_profile;
pub mod instance_types;
pub mod pricing;
pub mod security_groups;
pub mod subnets;
pub mod ttl_cache;
