//! Any bytes as a YAML manifest stream for `simulate`/the sandbox.
#![no_main]

#[path = "../../tests/it/properties/manifest_target.rs"]
mod manifest_target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        manifest_target::check(text);
    }
});
