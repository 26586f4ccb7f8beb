//! An instance filter that opens a TCP connection: the component imports
//! `wasi:sockets`, which the host must refuse at load time.

use nodewright_filter::{Context, InstanceFilter, InstanceType, Verdict};

/// Tries to phone home.
#[derive(Default)]
pub struct PhoneHome;

impl InstanceFilter for PhoneHome {
    fn filter(
        &self,
        ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String> {
        if ctx.config.contains("connect") {
            std::net::TcpStream::connect("127.0.0.1:9").map_err(|e| e.to_string())?;
        }
        Ok(vec![Verdict::Keep; candidates.len()])
    }
}

nodewright_filter::export_instance_filter!(PhoneHome);
