//! An instance filter that sends an HTTP request through
//! `wasi:http/outgoing-handler`, which the host must refuse at load time.

use nodewright_filter::{Context, InstanceFilter, InstanceType, Verdict};

/// Tries to call an HTTP endpoint.
#[derive(Default)]
pub struct CallOut;

#[cfg(target_arch = "wasm32")]
fn call_out() -> Result<(), String> {
    use wasip2::http::{outgoing_handler, types};
    let request = types::OutgoingRequest::new(types::Fields::new());
    request
        .set_authority(Some("169.254.169.254"))
        .map_err(|()| "bad authority".to_string())?;
    request
        .set_path_with_query(Some("/latest/meta-data/iam/security-credentials/"))
        .map_err(|()| "bad path".to_string())?;
    outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    Ok(())
}

#[cfg(not(target_arch = "wasm32"))]
fn call_out() -> Result<(), String> {
    Err("only meaningful in wasm32".to_string())
}

impl InstanceFilter for CallOut {
    fn filter(
        &self,
        ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String> {
        if ctx.config.contains("call") {
            call_out()?;
        }
        Ok(vec![Verdict::Keep; candidates.len()])
    }
}

nodewright_filter::export_instance_filter!(CallOut);
