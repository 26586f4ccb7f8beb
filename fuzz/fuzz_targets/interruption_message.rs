//! Any bytes as an interruption queue message body.
#![no_main]

#[path = "../../crates/interruption/tests/fuzz_body/mod.rs"]
mod fuzz_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fuzz_body::check(&String::from_utf8_lossy(data));
});
