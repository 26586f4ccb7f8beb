//! The AWS side: the EC2 catalog and the instance-type resolver that turns it
//! into the scheduler's instance types, AMI discovery, launch templates and
//! instances, the AWS cloud provider, and the SDK clients.

pub mod amis;
pub mod catalog;
pub mod clients;
pub mod cloudprovider;
pub mod instance;
pub mod instance_types;
pub mod launch_template;
