//! Integration tests, one crate so they link once. Each area adds a module here.
mod apis;
mod cli;
mod extensions;
mod simulate;
mod support;
