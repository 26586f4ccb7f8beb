//! Test support: validation of an object against a CRD's structural
//! OpenAPI v3 schema and CEL rules, with the code the API server double
//! uses (`apiserver_double::validation`).
//!
//! Every error is `"<field path>: <message>"`.

pub use apiserver_double::validation::validate;
