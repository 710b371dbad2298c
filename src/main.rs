//! The `clawvisor` binary: set how the process uses memory (glibc's malloc arenas capped at two,
//! unless `MALLOC_ARENA_MAX` says otherwise), parse the command line and hand over to the library
//! (`cli::main`).
//!
//! The memory setting lives here, not in the library, because it must come before any thread
//! exists and because it belongs to the daemon's process, not to the tests and benches that link
//! the library. BENCHMARKS.md ("#20: footprint") has its figures.

use std::process::ExitCode;

fn main() -> ExitCode {
    process_memory::configure();
    clawvisor::cli::main()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod process_memory {
    /// glibc's malloc arenas the daemon may use. glibc's default is eight per core, and each
    /// thread that allocates (tokio's workers, its blocking pool, the database writer) ends up
    /// with its own arena whose freed memory stays resident; two arenas keep the idle daemon
    /// smaller while the two threads that allocate most still rarely wait for each other.
    const MALLOC_ARENAS: i32 = 2;

    /// Runs while the process is still single-threaded.
    pub fn configure() {
        limit_malloc_arenas();
    }

    /// Caps glibc's malloc arenas, unless the operator chose a number with `MALLOC_ARENA_MAX`
    /// (glibc has already read it; the operator's choice wins).
    fn limit_malloc_arenas() {
        if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
            return;
        }
        // SAFETY: `mallopt` only changes a malloc tuning value. It is called before the process
        // has any other thread, so no allocation runs concurrently with the change.
        unsafe {
            nix::libc::mallopt(nix::libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod process_memory {
    /// Elsewhere the defaults stay.
    pub fn configure() {}
}
