//! Integration tests, one crate so they link once. Each area adds a module here.
mod amis;
mod apis;
mod apiserver;
mod cli;
mod cloudprovider;
mod cluster;
mod cluster_state;
mod controller;
mod extensions;
mod kubectl;
mod moto;
mod nodeclaim_lifecycle;
mod nodepool;
mod provisioning;
mod sandbox;
mod simulate;
mod support;
