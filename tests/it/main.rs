//! Integration tests, one crate so they link once. Each area adds a module here.
mod amis;
mod apis;
mod aws_launch;
mod cli;
mod cloudprovider;
mod cluster;
mod controller;
mod extensions;
mod moto;
mod simulate;
mod support;
