//! The `clawvisor` binary: set how the process uses memory (`resident::configure_malloc`: before
//! any thread exists, so here and not in the library's entry), parse the command line and hand
//! over to the library (`cli::main`). Tests keep glibc's defaults; the benches that measure the
//! daemon's memory call the same function. BENCHMARKS.md ("#20: footprint") has its figures.

use std::process::ExitCode;

fn main() -> ExitCode {
    clawvisor::resident::configure_malloc();
    clawvisor::cli::main()
}
