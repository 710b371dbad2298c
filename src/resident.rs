//! Keeps the daemon's resident memory to the code it actually runs, and its heap to what it holds.
//!
//! Most of an idle daemon's resident set used to be pages of its own binary that it had not used
//! since boot (BENCHMARKS.md, "#20: footprint"). The kernel reads an executable with large
//! read-ahead and maps what the loader and boot touched: some 17 MiB of a 22 MiB binary, while
//! the idle daemon's code sits on about 8 MiB of it.
//!
//! `release_binary_pages` unmaps (`MADV_DONTNEED`), for each read-only mapping of a file (the
//! executable and the shared libraries: libc's boot-time pages count in our resident set too)
//! that holds no private (copy-on-write) page, what is mapped now, and asks the kernel not to read
//! ahead for it (`MADV_RANDOM`; Linux honours it for the read-only data, not for code). The pages
//! stay in the page cache, and the next use of a page maps it back with the kernel's fault-around
//! (up to 64 KiB of cached neighbours). Dropping a read-only, never-written file mapping loses
//! nothing: its pages are the file's. Mappings with private pages (the relocated `.data.rel.ro`,
//! writable data) are never touched, which is why the check reads `Anonymous` from
//! `/proc/self/smaps` instead of trusting the permissions.
//!
//! `trim_heap` hands the allocator's free pages back (glibc's `malloc_trim`).
//!
//! `serve` calls both [`RELEASE_AFTER_START`] (20 s) after start and then every
//! [`RELEASE_EVERY`] (6 h) (`cli/serve.rs`). Elsewhere than Linux they do nothing.

use std::time::Duration;

/// When `serve` first releases the binary's unused pages: boot (migrations, the tree, the first
/// long polls, the MCP handshakes) is over by then.
pub const RELEASE_AFTER_START: Duration = Duration::from_secs(20);
/// And again this often, for code that rare work mapped in since.
pub const RELEASE_EVERY: Duration = Duration::from_secs(6 * 3600);

/// What one call released.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// Mappings of the executable advised.
    pub mappings: usize,
    /// Their resident size before, in KiB.
    pub resident_kib: u64,
}

/// One mapping of `/proc/self/smaps`, as far as this module needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    writable: bool,
    path: String,
    resident_kib: u64,
    anonymous_kib: u64,
}

/// Parses `/proc/<pid>/smaps`: a header line per mapping (`start-end perms offset dev inode
/// path`), then `Key: value kB` lines.
fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut mappings: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else {
            continue;
        };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            let perms = fields.next().unwrap_or("");
            // Offset, device and inode, then the path, which may hold spaces.
            let path = fields.skip(3).collect::<Vec<_>>().join(" ");
            mappings.push(Mapping {
                start,
                end,
                writable: perms.contains('w'),
                path,
                resident_kib: 0,
                anonymous_kib: 0,
            });
            continue;
        }
        let Some(current) = mappings.last_mut() else {
            continue;
        };
        let value = fields.next().and_then(|value| value.parse::<u64>().ok());
        match (first, value) {
            ("Rss:", Some(kib)) => current.resident_kib = kib,
            ("Anonymous:", Some(kib)) => current.anonymous_kib = kib,
            _ => {}
        }
    }
    mappings
}

/// The mappings that may be released: read-only mappings of a file — the executable's and the
/// shared libraries' (libc, libm, the loader) — without a private page.
fn releasable(mappings: &[Mapping]) -> Vec<&Mapping> {
    mappings
        .iter()
        .filter(|mapping| {
            mapping.path.starts_with('/')
                && !mapping.writable
                && mapping.anonymous_kib == 0
                && mapping.end > mapping.start
        })
        .collect()
}

/// Unmaps the read-only pages of the executable and its libraries that the daemon is not using
/// (see the module docs).
#[cfg(target_os = "linux")]
pub fn release_binary_pages() -> std::io::Result<Released> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mappings = parse_smaps(&smaps);
    let mut released = Released::default();
    for mapping in releasable(&mappings) {
        let address = mapping.start as *mut nix::libc::c_void;
        let length = mapping.end - mapping.start;
        // SAFETY: the range is a whole mapping the kernel listed for this process (page-aligned),
        // of a file, read-only and without a private page: its contents are the
        // file's, so `MADV_DONTNEED` only unmaps pages that fault back in unchanged on the next
        // access. Nothing can write it meanwhile (it is not writable), so no private page can
        // appear between the smaps read and the advice.
        let outcome = unsafe {
            if nix::libc::madvise(address, length, nix::libc::MADV_RANDOM) != 0 {
                -1
            } else {
                nix::libc::madvise(address, length, nix::libc::MADV_DONTNEED)
            }
        };
        if outcome != 0 {
            return Err(std::io::Error::last_os_error());
        }
        released.mappings += 1;
        released.resident_kib += mapping.resident_kib;
    }
    Ok(released)
}

#[cfg(not(target_os = "linux"))]
pub fn release_binary_pages() -> std::io::Result<Released> {
    Ok(Released::default())
}

/// glibc's malloc arenas the daemon may use. glibc's default is eight per core, and each thread
/// that allocates (tokio's workers, its blocking pool, the database writer) ends up with its own
/// arena whose freed memory stays resident; two arenas keep the idle daemon smaller while the two
/// threads that allocate most still rarely wait for each other.
const MALLOC_ARENAS: i32 = 2;

/// Allocations this large get their own mapping, which goes back to the kernel when freed.
/// glibc's default starts at 128 KiB too but raises itself after each large free (up to 32 MiB);
/// after that, large buffers (a local embedding model's weights and activations, a big HTTP body)
/// are carved from an arena, and `malloc_trim` never gives back the top of a thread's arena: a
/// local model's batches left +58 MiB resident after it was unloaded (BENCHMARKS.md, #33).
/// Setting the threshold turns the raising off.
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Sets how the daemon's process uses memory: arenas capped at [`MALLOC_ARENAS`], large buffers
/// in their own mappings from [`MMAP_THRESHOLD`] up. The operator's `MALLOC_ARENA_MAX` or
/// `MALLOC_MMAP_THRESHOLD_` wins (glibc has read them already). Call it while the process is
/// still single-threaded: `main` does, and the benches that measure the daemon's memory.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn configure_malloc() {
    let settings = [
        ("MALLOC_ARENA_MAX", nix::libc::M_ARENA_MAX, MALLOC_ARENAS),
        (
            "MALLOC_MMAP_THRESHOLD_",
            nix::libc::M_MMAP_THRESHOLD,
            MMAP_THRESHOLD,
        ),
    ];
    for (variable, parameter, value) in settings {
        if std::env::var_os(variable).is_some() {
            continue;
        }
        // SAFETY: `mallopt` only changes a malloc tuning value; the caller runs it before the
        // process has another thread, so no allocation runs concurrently with the change.
        unsafe {
            nix::libc::mallopt(parameter, value);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn configure_malloc() {}

/// After large, rare work (a local model unloaded): the heap's free pages and the code that work
/// mapped in go back, so the idle daemon's footprint is what it was before.
pub fn release_after_large_work() {
    trim_heap();
    if let Err(error) = release_binary_pages() {
        tracing::debug!(error = %error, "resident: the binary's pages were not released");
    }
}

/// Hands the heap's free pages back to the kernel. glibc keeps freed memory in its arenas for
/// reuse and only returns the top of each one; after boot's burst of allocations (the migrations,
/// the config, the first replies) most of an idle daemon's heap is free chunks in the middle,
/// which `malloc_trim` releases page by page. Returns whether anything was released.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim_heap() -> bool {
    // SAFETY: `malloc_trim` takes each arena's lock itself; it only gives back whole free pages.
    unsafe { nix::libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim_heap() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0906000 r--p 00000000 fd:01 123 /usr/local/bin/clawvisor
Size:               9240 kB
Rss:                8200 kB
Anonymous:             0 kB
55d0c0906000-55d0c20fb000 r-xp 00905000 fd:01 123 /usr/local/bin/clawvisor
Size:              24532 kB
Rss:               12000 kB
Anonymous:             0 kB
55d0c20fb000-55d0c22df000 r--p 020fa000 fd:01 123 /usr/local/bin/clawvisor
Size:               1936 kB
Rss:                1936 kB
Anonymous:          1900 kB
55d0c22df000-55d0c22e8000 rw-p 022dc000 fd:01 123 /usr/local/bin/clawvisor
Size:                 36 kB
Rss:                  36 kB
Anonymous:            30 kB
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
Rss:                 132 kB
Anonymous:           132 kB
7f0000100000-7f0000128000 r--p 00000000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 160 kB
Anonymous:             0 kB
7f0000200000-7f0000201000 r--p 00000000 fd:01 78 /home/me/my bin/clawvisor
Rss:                   4 kB
Anonymous:             0 kB
";

    #[test]
    fn only_read_only_file_pages_without_private_copies_are_released() {
        let mappings = parse_smaps(SMAPS);
        assert_eq!(mappings.len(), 7);
        assert_eq!(mappings[6].path, "/home/me/my bin/clawvisor");
        let chosen = releasable(&mappings);
        let starts: Vec<usize> = chosen.iter().map(|mapping| mapping.start).collect();
        // The headers and rodata, and the code, and the library's and the other file's read-only
        // pages; not the relocated relro (private pages), not the writable data, not anonymous
        // memory.
        assert_eq!(
            starts,
            vec![
                0x55d0c0000000,
                0x55d0c0906000,
                0x7f0000100000,
                0x7f0000200000
            ]
        );
        assert_eq!(chosen[0].resident_kib, 8200);
    }

    #[test]
    fn garbage_parses_to_nothing_releasable() {
        for text in [
            "",
            "Rss: 12 kB\n",
            "zz-yy r-xp 0 0 0 /x\nRss: 4 kB\n",
            "-\n\n  \n",
        ] {
            let mappings = parse_smaps(text);
            assert!(releasable(&mappings).is_empty(), "{text:?}");
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn trimming_gives_the_pages_of_freed_memory_back() {
        // 4 MiB of small blocks, then one kept above them: freeing the blocks leaves a free
        // stretch in the middle of the heap, which glibc keeps until it is trimmed.
        let blocks: Vec<Vec<u8>> = (0..4096).map(|i| vec![i as u8; 1024]).collect();
        let kept = vec![7u8; 1024];
        drop(blocks);
        assert!(trim_heap(), "malloc_trim released nothing");
        assert_eq!(kept[1023], 7);
    }

    #[test]
    fn releasing_this_test_binarys_pages_keeps_it_running() {
        let released = release_binary_pages().expect("madvise on our own read-only mappings");
        assert!(released.mappings >= 1, "{released:?}");
        // Code and read-only data are still there: fault them back in by running and reading.
        let again = parse_smaps(&std::fs::read_to_string("/proc/self/smaps").unwrap());
        assert!(!again.is_empty());
        assert_eq!(format!("{}", 6 * 7), "42");
    }
}
