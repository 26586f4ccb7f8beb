//! Any bytes, split at newlines into method, URI, content type, accept and
//! body, as a request to the API server double.
#![no_main]

#[path = "../../crates/apiserver-double/tests/fuzz_body/mod.rs"]
mod fuzz_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = apiserver_double::ApiServer::new("1", "33").client();
        fuzz_body::check(&client, &fuzz_body::Req::from_bytes(data)).await;
    });
});
