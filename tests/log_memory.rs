//! What keeping the recent log lines costs in memory, measured: the heap a full ring holds (counted
//! by this binary's allocator, every allocation and free) for typical, longer and oversized lines,
//! checked against the ring's bounds; and how much of it an idle daemon with one bot uses after
//! boot. Figures are printed (`cargo test --test log_memory -- --nocapture`) for BENCHMARKS.md.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use clawvisor::logging::recent::{self, MAX_BYTES, MAX_LINES, RecentLines, Severity};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static ALLOCATED: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The heap a ring holds after `count` lines made by `line`: (bytes, lines kept, its own count).
fn heap_of(
    count: usize,
    line: impl Fn(usize) -> (String, Vec<(&'static str, String)>),
) -> (isize, usize, usize) {
    // The lines are made before the measurement starts, so only what the ring keeps is counted.
    let lines: Vec<_> = (0..count).map(line).collect();
    let before = ALLOCATED.load(Ordering::SeqCst);
    let ring = RecentLines::default();
    for (message, fields) in &lines {
        // The clone is the caller's and is freed inside `push`.
        ring.push(
            Severity::Info,
            "clawvisor::telegram::poller",
            message,
            fields.clone(),
        );
    }
    let held = ALLOCATED.load(Ordering::SeqCst) - before;
    let stats = ring.stats();
    drop(ring);
    drop(lines);
    (held, stats.lines, stats.bytes)
}

fn kib(bytes: isize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// One test, so that nothing else in this binary allocates while a ring is measured (the
/// allocator's count is the whole process's); the daemon is started only after.
#[test]
fn a_full_ring_stays_within_its_bounds_and_an_idle_daemon_keeps_little() {
    measure_full_rings();
    measure_a_search_of_a_full_ring();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(measure_an_idle_daemon());
}

fn measure_full_rings() {
    // The deque's slots (grown by doubling, so at most the next power of two past MAX_LINES) are
    // the only memory the ring's own count leaves out.
    let slots = MAX_LINES.next_power_of_two() * std::mem::size_of::<recent::LogLine>();
    let bound = (MAX_BYTES + slots) as isize;
    let typical = |index: usize| {
        (
            format!("ada: answered chat 81234567 in {index} ms (2 tool calls, model gpt-4o-mini)"),
            vec![
                ("agent", "ada".to_string()),
                ("run_id", index.to_string()),
                ("chat", "tg:81234567".to_string()),
            ],
        )
    };
    let longer = |index: usize| {
        (
            format!("{index} {}", "provider error body ".repeat(30)),
            Vec::new(),
        )
    };
    let oversized = |index: usize| {
        (
            format!("{index} {}", "y".repeat(20_000)),
            vec![("body", "z".repeat(5_000))],
        )
    };
    for (name, count, (held, lines, counted)) in [
        (
            "typical lines (~80 B + 3 fields)",
            MAX_LINES * 2,
            heap_of(MAX_LINES * 2, typical),
        ),
        (
            "longer lines (~600 B)",
            MAX_LINES * 2,
            heap_of(MAX_LINES * 2, longer),
        ),
        (
            "oversized lines (20 KB + a 5 KB field)",
            MAX_LINES,
            heap_of(MAX_LINES, oversized),
        ),
    ] {
        println!(
            "{name}: {count} written, {lines} kept, heap {} (the ring counts {}; bound {})",
            kib(held),
            kib(counted as isize),
            kib(bound)
        );
        assert!(
            held <= bound,
            "{name}: {held} bytes held, more than {bound}"
        );
        assert!(counted <= MAX_BYTES, "{name}: counted {counted}");
        assert!((1..=MAX_LINES).contains(&lines));
    }
}

/// How long a search over a full ring takes (the Logs page's worst case: a word no line holds,
/// so every line is redacted and searched); the median of 21 reads is printed.
fn measure_a_search_of_a_full_ring() {
    let ring = RecentLines::default();
    for index in 0..MAX_LINES {
        ring.push(
            Severity::Info,
            "clawvisor::agent::run",
            &format!("ada: answered chat 81234567 in {index} ms (2 tool calls, model gpt-4o-mini)"),
            vec![("agent", "ada".to_string()), ("run_id", index.to_string())],
        );
    }
    let filter = recent::LineFilter::new(Severity::Trace, "no line says this");
    let mut took: Vec<Duration> = (0..21)
        .map(|_| {
            let started = std::time::Instant::now();
            assert!(ring.page(&filter, None, 200).is_empty());
            started.elapsed()
        })
        .collect();
    took.sort();
    println!(
        "a search through {MAX_LINES} lines that matches none: median {:?}",
        took[10]
    );
}

/// What the ring holds once a daemon with one bot has booted and is ready: the boot's lines.
async fn measure_an_idle_daemon() {
    let _ = clawvisor::logging::init("info", clawvisor::config::LogFormat::Text);
    let before = recent::recent().stats();
    let world = World::builder(Script::new().rule(Rule::text("hi")))
        .agent_with_bot("ada", "", "5150:AAH-log-memory-token-0001", &[], &[])
        .start()
        .await;
    let (base, http) = world.harness.studio_http().await;
    wait_until(Duration::from_secs(20), "the daemon is ready", || {
        let (http, url) = (http.clone(), format!("{base}/readyz"));
        async move {
            http.get(url)
                .send()
                .await
                .is_ok_and(|answer| answer.status().is_success())
        }
    })
    .await;
    let after = recent::recent().stats();
    let lines = after.lines - before.lines;
    let bytes = after.bytes - before.bytes;
    println!(
        "idle daemon, 1 bot, after boot: {lines} lines kept, {}",
        kib(bytes as isize)
    );
    assert!(lines > 0, "the boot wrote lines");
    assert!(bytes < 64 * 1024, "{bytes} bytes after boot");
    world.harness.stop().await;
}
