//! Integration tests, one crate so they link once. Each area adds a module here.
mod amis;
mod apis;
mod cli;
mod controller;
mod extensions;
mod filter_cli;
mod moto;
mod simulate;
mod support;
