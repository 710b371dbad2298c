//! Shared by the benchmarks: percentile reports printed next to criterion's own figures.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Prints `name: median … p99 … (n samples)` and returns (median, p99).
pub fn report(name: &str, samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    let (median, p99) = (at(0.5), at(0.99));
    println!(
        "{name}: median {median:?}  p99 {p99:?}  ({} samples)",
        samples.len()
    );
    (median, p99)
}

/// Resident set size of this process in KiB (Linux), for memory figures.
pub fn rss_kib() -> u64 {
    rss_kib_of("self")
}

/// Resident set size in KiB of the process `/proc/<pid>` names (`self`, or a child's pid).
pub fn rss_kib_of(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `RssAnon:`, `RssFile:`; `Threads:` is a plain
/// count), 0 when absent.
pub fn status_kib_of(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with(field))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// Resident KiB of the mappings of `file` in `/proc/<pid>/smaps` (a binary's text, read-only data
/// and relocated data), 0 when none.
pub fn mapped_kib_of(pid: &str, file: &str) -> u64 {
    let Ok(smaps) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return 0;
    };
    let mut in_file = false;
    let mut total = 0;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            in_file = line.ends_with(file);
        } else if in_file && first == "Rss:" {
            total += words.next().and_then(|kib| kib.parse().ok()).unwrap_or(0);
        }
    }
    total
}

/// Where a process's resident set is, in KiB, by kind of mapping (from `/proc/<pid>/smaps`):
/// `(kind, Rss, of which Anonymous)`, largest first. Kinds: the binary's mappings by permission
/// (`binary r-x` is code, `binary rw-`/`binary r--` with anonymous pages are the relocated
/// data), `[heap]`, `[stack]`, other files by name (libc, the loader), and `anonymous` (malloc's
/// other arenas and the threads' stacks).
pub fn smaps_breakdown(pid: &str, binary: &str) -> Vec<(String, u64, u64)> {
    let Ok(smaps) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return Vec::new();
    };
    let mut totals: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let mut kind = String::new();
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            let perms = words.next().unwrap_or("");
            let path = words.nth(3).unwrap_or("");
            kind = if path.is_empty() {
                "anonymous".to_string()
            } else if path == binary {
                format!("binary {}", &perms[..3.min(perms.len())])
            } else {
                path.rsplit('/').next().unwrap_or(path).to_string()
            };
            continue;
        }
        let kib = words.next().and_then(|kib| kib.parse().ok()).unwrap_or(0);
        let entry = totals.entry(kind.clone()).or_default();
        match first {
            "Rss:" => entry.0 += kib,
            "Anonymous:" => entry.1 += kib,
            _ => {}
        }
    }
    let mut rows: Vec<(String, u64, u64)> = totals
        .into_iter()
        .map(|(kind, (rss, anon))| (kind, rss, anon))
        .filter(|(_, rss, _)| *rss > 0)
        .collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.1));
    rows
}

/// [`smaps_breakdown`] in one line: `kind MiB (anon MiB)`, largest first, `; `-separated.
pub fn where_it_is(pid: &str, binary: &str) -> String {
    let mib = |kib: u64| kib as f64 / 1024.0;
    smaps_breakdown(pid, binary)
        .into_iter()
        .map(|(kind, rss, anon)| format!("{kind} {:.2} (anon {:.2})", mib(rss), mib(anon)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Where cargo puts this package's builds: `CARGO_TARGET_DIR` when set (relative to the package,
/// where cargo runs), else the package's `target/`.
pub fn target_dir() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| manifest_dir.join("target"), |dir| manifest_dir.join(dir))
}

/// The daemon users run: the binary named by the environment variable `given`, else
/// `cargo build --release --bin clawvisor` built now. Refuses a build that contains the testkit
/// (its tracing events carry their module path; a build without the feature has none), and copies
/// it into `scratch` as `name`, so that a later build cannot swap it mid-run. Returns the copy and
/// the binary's size in bytes.
pub fn daemon_binary(scratch: &Path, given: &str, name: &str) -> (PathBuf, usize) {
    let built = match std::env::var_os(given) {
        Some(path) => PathBuf::from(path),
        None => {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = std::process::Command::new(cargo)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .args(["build", "--release", "--bin", "clawvisor"])
                .status()
                .expect("cannot run cargo to build the daemon binary");
            assert!(
                status.success(),
                "`cargo build --release --bin clawvisor` failed; build it yourself and set \
                 {given}=<path to the binary>"
            );
            target_dir().join("release/clawvisor")
        }
    };
    let bytes = std::fs::read(&built).unwrap_or_else(|error| {
        panic!(
            "cannot read the daemon binary {}: {error} (set {given} to a binary from \
             `cargo build --release --bin clawvisor`)",
            built.display()
        )
    });
    let probe = b"clawvisor::testkit::";
    assert!(
        !bytes.windows(probe.len()).any(|window| window == probe),
        "{} contains the testkit: it is a bench or test build, not the daemon users run; build \
         it with `cargo build --release --bin clawvisor` (no --features) and measure that",
        built.display()
    );
    let copy = scratch.join(name);
    std::fs::write(&copy, &bytes).expect("copy of the binary");
    std::fs::set_permissions(
        &copy,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .expect("the copy made executable");
    println!(
        "binary {} — {:.1} MiB, testkit absent (no `clawvisor::testkit::` in it)",
        built.display(),
        bytes.len() as f64 / 1_048_576.0
    );
    (copy, bytes.len())
}
