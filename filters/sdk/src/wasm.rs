//! The component side: the `log` import and the conversions the export
//! macros expand to. Only compiled for `wasm32`.

use crate::LogLevel;

#[link(wasm_import_module = "nodewright:filters/host@0.2.0")]
unsafe extern "C" {
    #[link_name = "log"]
    fn host_log(level: i32, ptr: *const u8, len: usize);
}

/// Calls the host's `log` import (canonical ABI: enum discriminant, then the
/// string as pointer and length).
pub fn log(level: LogLevel, message: &str) {
    let level = match level {
        LogLevel::Debug => 0,
        LogLevel::Info => 1,
        LogLevel::Warn => 2,
        LogLevel::Error => 3,
    };
    // SAFETY: the host reads `len` bytes at `ptr`, which `message` owns for
    // the duration of the call.
    unsafe { host_log(level, message.as_ptr(), message.len()) }
}
