//! An instance filter that reads a file: the component imports
//! `wasi:filesystem`, which the host must refuse at load time.

use nodewright_filter::{Context, InstanceFilter, InstanceType, Verdict};

/// Tries to read the host's files.
#[derive(Default)]
pub struct ReadFiles;

impl InstanceFilter for ReadFiles {
    fn filter(
        &self,
        ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String> {
        if ctx.config.contains("read") {
            let secret = std::fs::read_to_string("/etc/passwd").map_err(|e| e.to_string())?;
            return Ok(vec![Verdict::drop(secret); candidates.len()]);
        }
        Ok(vec![Verdict::Keep; candidates.len()])
    }
}

nodewright_filter::export_instance_filter!(ReadFiles);
