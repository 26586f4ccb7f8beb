//! `nodewright crds`: the CRDs generated from the Rust types.

use std::path::PathBuf;

use clap::Args;

use super::{CliError, emit};

/// Arguments of `nodewright crds`.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Write one file per CRD into this directory instead of printing them.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
}

/// Prints the CRDs as one multi-document YAML stream, or writes them as files.
pub fn run(args: &CrdsArgs) -> Result<(), CliError> {
    let crds = crate::apis::crds::generate()?;
    match &args.output_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            for (file_name, yaml) in &crds {
                let path = dir.join(file_name);
                std::fs::write(&path, yaml)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
        }
        None => {
            let docs: Vec<&str> = crds.iter().map(|(_, yaml)| yaml.as_str()).collect();
            emit(&docs.join("---\n"))?;
        }
    }
    Ok(())
}
