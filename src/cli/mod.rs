//! The command line: argument parsing, dispatch, and one-line errors.

mod catalog;
mod controller;
mod crds;
mod filter;
mod sandbox;
mod simulate;
mod simulate_disruption;
mod table;

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
    /// Run the controllers against the cluster (kubeconfig or service account).
    Controller(Box<controller::ControllerArgs>),
    /// Print the CustomResourceDefinitions, or write them to a directory.
    Crds(crds::CrdsArgs),
    /// Run one provisioning round on YAML manifests or a cluster snapshot
    /// (`-` reads standard input) and print the plan.
    Simulate(simulate::SimulateArgs),
    /// Run a whole cluster on this machine (API server, simulated kubelet and
    /// cloud, the controllers) for kubectl, until Ctrl-C.
    Sandbox(sandbox::SandboxArgs),
    /// Test an extension component against the catalog, inspect one before
    /// pinning it, or scaffold a new one.
    Filter(filter::FilterArgs),
}

/// A failed command: printed as one line, exit code 1.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// Runs the command line and turns any error into one line on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Catalog(args) => catalog::run(&args),
        Command::Controller(args) => controller::run(&args),
        Command::Crds(args) => crds::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Sandbox(args) => sandbox::run(&args),
        Command::Filter(args) => filter::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", error_chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Writes command output to stdout; a closed pipe (`| head`) ends output quietly.
pub fn emit(text: &str) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
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
