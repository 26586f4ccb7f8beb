//! Any bytes as text a component wrote, with the cap and side from the
//! first two bytes.
#![no_main]

#[path = "../../filters/host/tests/fuzz_body/mod.rs"]
mod fuzz_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (max, tail, rest) = match data {
        [a, b, rest @ ..] => (usize::from(*a), b % 2 == 1, rest),
        _ => (0, false, data),
    };
    fuzz_body::check(&String::from_utf8_lossy(rest), max, tail);
});
