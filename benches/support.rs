//! Shared by the benchmarks: percentile reports printed next to criterion's own figures.

#![allow(dead_code)]

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
