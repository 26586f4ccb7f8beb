//! Integration tests, one crate so they link once. Each area adds a module here.
mod amis;
mod apis;
mod apiserver;
mod cli;
mod controller;
mod extensions;
mod kubectl;
mod moto;
mod simulate;
mod support;
