//! The command line: argument parsing, dispatch, and one-line errors.

mod catalog;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Arguments of the `nodewright` command.
#[derive(Debug, Parser)]
#[command(
    name = "nodewright",
    version,
    about = "Kubernetes node provisioner for AWS speaking Karpenter's v1 API"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the instance types a set of NodePool requirements admits.
    Catalog(catalog::CatalogArgs),
}

/// A failed command: printed as one line, exit code 1.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// Runs the command line and turns any error into one line on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Catalog(args) => catalog::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", error_chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// An error and its sources, joined with `: ` on one line.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}
