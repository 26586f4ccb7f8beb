//! AMIs: which images an EC2NodeClass's `amiSelectorTerms` find (SSM and
//! `DescribeImages`), and how the AMI selector's choice is written to
//! `status.amis` with the instance-type requirements each image serves.

mod discover;
mod query;
mod status;
#[cfg(test)]
pub(crate) mod testing;

pub use discover::{AmiError, AmiProvider};
pub use query::{AmiQueries, DescribeQuery, ParameterQuery, QueryError, Variant, queries};
pub use status::status_amis;
