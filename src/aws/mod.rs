//! The AWS side: the EC2 catalog and the instance-type resolver that turns it
//! into the scheduler's instance types.

pub mod catalog;
pub mod instance_types;
