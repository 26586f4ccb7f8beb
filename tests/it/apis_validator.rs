//! Test support: validation of an object against a CRD's structural
//! OpenAPI v3 schema and CEL rules, with the code the API server double
//! uses (`nodewright::sim::apiserver::validation`).
//!
//! Every error is `"<field path>: <message>"`.

pub use nodewright::sim::apiserver::validation::validate;
