//! The `nodewright` command.

fn main() -> std::process::ExitCode {
    nodewright::cli::main()
}
