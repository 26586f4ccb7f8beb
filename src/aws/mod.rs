//! The AWS side: the EC2 catalog (embedded, or live from the EC2 API and
//! refreshed) and the instance-type resolver that turns it into the
//! scheduler's instance types, prices, AMI discovery, and the SDK clients.

pub mod amis;
pub mod catalog;
pub mod clients;
pub mod instance_types;
pub mod pricing;
