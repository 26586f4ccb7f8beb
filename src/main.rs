//! The `nodewright` command.

/// mimalloc instead of the C library's allocator: the scheduler allocates
/// and frees many small vectors per pod, and the container image's static
/// musl binary would otherwise run on musl's much slower malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    nodewright::cli::main()
}
