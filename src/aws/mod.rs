//! The AWS side: the EC2 catalog and the instance-type resolver that turns it
//! into the scheduler's instance types, AMI discovery, and the SDK clients.

pub mod amis;
pub mod catalog;
pub mod clients;
pub mod instance_types;
