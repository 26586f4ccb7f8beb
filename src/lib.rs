//! nodewright: a Kubernetes node provisioner for AWS that speaks Karpenter's v1 API.

pub mod apis;
pub mod aws;
pub mod cli;
pub mod cloudprovider;
pub mod cluster;
pub mod controllers;
pub mod extensions;
pub mod metrics;
pub mod operator;
pub mod scheduling;
pub mod sim;
pub mod yaml;
