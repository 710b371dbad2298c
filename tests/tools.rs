//! The built-in tools against real directories, a real local HTTP server and real processes:
//! workspace confinement (hostile paths, symlinks, a symlink swapped in after the check), the file
//! tools' edge cases, web_fetch's address vetting and limits, shell's isolation and clean-up.

use std::collections::HashSet;
use std::convert::Infallible;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use clawvisor::domain::ChatKey;
use clawvisor::policy::Effect;
use clawvisor::policy::RiskLevel;
use clawvisor::registry::Registry;
use clawvisor::store::{Store, StoreOptions};
use clawvisor::testkit::wait_until;
use clawvisor::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSettings};
use clawvisor::tools::builtin_tools;
use clawvisor::tools::files::{ListDirTool, ReadFileTool, WriteFileTool};
use clawvisor::tools::shell::ShellTool;
use clawvisor::tools::time::{CurrentTimeTool, describe_time};
use clawvisor::tools::web_fetch::{
    AddressPolicy, FetchRefusal, WebFetchTool, check_url, html_to_text, non_public_kind,
};
use clawvisor::tools::workspace::{ConfinementError, MissingParents, Purpose, Workspace};

// ---------------------------------------------------------------------------------------------
// Fixture

struct Fixture {
    dir: tempfile::TempDir,
    ctx: ToolContext,
}

impl Fixture {
    fn new(settings: ToolSettings) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        let store = Store::open(&dir.path().join("clawvisor.db"), StoreOptions::default()).unwrap();
        let ctx = ToolContext {
            agent: "tester".to_string(),
            chat: ChatKey::cli("test"),
            run_id: 1,
            workspace,
            settings: Arc::new(settings),
            registry: Registry::new(),
            store,
            cancel: CancellationToken::new(),
            timezone: chrono_tz::Tz::UTC,
            egress: Default::default(),
        };
        Fixture { dir, ctx }
    }

    fn workspace(&self) -> &Path {
        &self.ctx.workspace
    }

    fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    /// Calls the tool; a call that never returns fails the test instead of hanging it.
    async fn call(&self, tool: &dyn Tool, args: Value) -> Result<ToolOutput, ToolError> {
        tokio::time::timeout(Duration::from_secs(30), tool.call(args, &self.ctx))
            .await
            .expect("the tool call did not return within 30 s")
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.ctx.store.stop_writer();
    }
}

fn shell_settings(timeout: Duration) -> ToolSettings {
    ToolSettings {
        shell_enabled: true,
        shell_timeout: timeout,
        ..ToolSettings::default()
    }
}

fn ok_text(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Ok(output) => {
            assert!(
                !output.is_error,
                "expected success, got an error output: {}",
                output.text
            );
            output.text
        }
        Err(error) => panic!("expected success, got {error:?}"),
    }
}

fn refusal(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::Refused(reason)) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn failure(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::Failed(reason)) => reason,
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn invalid(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::InvalidArguments(reason)) => reason,
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Workspace confinement

#[test]
fn hostile_paths_are_refused_with_a_reason_and_ordinary_paths_resolve() {
    let fixture = Fixture::new(ToolSettings::default());
    let root = fixture.workspace().to_path_buf();
    let outside = fixture.outside();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    std::fs::create_dir_all(root.join("notes/sub")).unwrap();
    std::fs::write(root.join("notes/a.txt"), "a").unwrap();
    symlink(outside.join("secret.txt"), root.join("leak")).unwrap();
    symlink(&outside, root.join("outdir")).unwrap();
    symlink(outside.join("missing.txt"), root.join("dangling_out")).unwrap();
    symlink("notes/nothing-here.txt", root.join("dangling_in")).unwrap();
    symlink("notes/a.txt", root.join("inner_link")).unwrap();
    symlink("notes", root.join("inner_dir_link")).unwrap();
    symlink("/proc/self", root.join("proc_link")).unwrap();
    let workspace = Workspace::new(&root).unwrap();
    let real_root = std::fs::canonicalize(&root).unwrap();

    let long_path = "a/".repeat(2100);
    let long_name = "n".repeat(300);
    let absolute_inside = format!("{}/notes/a.txt", root.display());
    let absolute_outside_via_dots = format!("{}/../outside/secret.txt", root.display());
    let refused: &[(&str, Purpose, &str)] = &[
        ("../x", Purpose::Read, "climbs out of the workspace"),
        ("a/../../x", Purpose::Write, "climbs out of the workspace"),
        (
            "notes/../../outside/secret.txt",
            Purpose::Read,
            "climbs out",
        ),
        ("/etc/passwd", Purpose::Read, "outside the workspace"),
        (
            &absolute_outside_via_dots,
            Purpose::Read,
            "outside the workspace",
        ),
        ("/proc/self/environ", Purpose::Read, "/proc"),
        ("proc_link/environ", Purpose::Read, "/proc"),
        ("leak", Purpose::Read, "is a symlink to"),
        ("leak", Purpose::Write, "outside the workspace"),
        (
            "outdir/secret.txt",
            Purpose::Read,
            "`outdir` is a symlink to",
        ),
        ("outdir/new.txt", Purpose::Write, "outside the workspace"),
        ("dangling_out", Purpose::Write, "outside the workspace"),
        ("dangling_in", Purpose::Write, "dangling symlink"),
        ("bad\0name", Purpose::Read, "NUL byte"),
        ("", Purpose::Read, "empty"),
        ("   ", Purpose::Write, "empty"),
        ("C:\\x", Purpose::Read, "Windows path"),
        ("C:/x", Purpose::Read, "Windows path"),
        ("\\\\server\\share", Purpose::Read, "Windows path"),
        (&long_path, Purpose::Write, "too long"),
        (&long_name, Purpose::Write, "too long"),
        (".", Purpose::Write, "the workspace itself"),
    ];
    for (path, purpose, expected) in refused {
        match workspace.resolve(path, *purpose) {
            Ok(resolved) => panic!("{path:?} ({purpose:?}) resolved to {resolved:?}"),
            Err(error) => {
                let message = error.to_string();
                assert!(
                    message.contains(expected),
                    "{path:?}: expected {expected:?} in {message:?}"
                );
            }
        }
    }

    let allowed: &[(&str, Purpose, &str)] = &[
        ("notes/a.txt", Purpose::Read, "notes/a.txt"),
        ("./notes/../notes/a.txt", Purpose::Read, "notes/a.txt"),
        (&absolute_inside, Purpose::Read, "notes/a.txt"),
        (
            "notes/sub/deeper/new.txt",
            Purpose::Write,
            "notes/sub/deeper/new.txt",
        ),
        ("inner_link", Purpose::Read, "notes/a.txt"),
        ("inner_link", Purpose::Write, "notes/a.txt"),
        ("inner_dir_link/a.txt", Purpose::Read, "notes/a.txt"),
        (".", Purpose::Read, ""),
        (
            "name with spaces & ünïcode.txt",
            Purpose::Write,
            "name with spaces & ünïcode.txt",
        ),
    ];
    for (path, purpose, expected) in allowed {
        let resolved = workspace
            .resolve(path, *purpose)
            .unwrap_or_else(|error| panic!("{path:?} ({purpose:?}) refused: {error}"));
        assert_eq!(resolved, real_root.join(expected), "{path:?}");
    }
}

#[test]
fn a_symlink_swapped_in_after_the_check_is_not_followed() {
    let fixture = Fixture::new(ToolSettings::default());
    let root = fixture.workspace().to_path_buf();
    let outside = fixture.outside();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::write(root.join("dir/secret.txt"), "harmless").unwrap();
    std::fs::write(root.join("plain.txt"), "harmless").unwrap();
    let workspace = Workspace::new(&root).unwrap();

    // The check passes on real directories and files...
    let through_directory = workspace.resolve("dir/secret.txt", Purpose::Read).unwrap();
    let final_component = workspace.resolve("plain.txt", Purpose::Read).unwrap();
    let for_writing = workspace.resolve("dir/new.txt", Purpose::Write).unwrap();
    // ...then both are replaced by symlinks to the outside before the open.
    std::fs::remove_dir_all(root.join("dir")).unwrap();
    symlink(&outside, root.join("dir")).unwrap();
    std::fs::remove_file(root.join("plain.txt")).unwrap();
    symlink(outside.join("secret.txt"), root.join("plain.txt")).unwrap();

    for resolved in [&through_directory, &final_component] {
        match workspace.open_read(resolved) {
            Err(ConfinementError::ChangedDuringCall { .. }) => {}
            Err(other) => panic!("{resolved:?}: unexpected error {other}"),
            Ok(_) => panic!("{resolved:?}: a swapped-in symlink was followed"),
        }
    }
    match workspace.open_parent(&for_writing, MissingParents::Create) {
        Err(ConfinementError::ChangedDuringCall { component, .. }) => assert_eq!(component, "dir"),
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("a swapped-in directory symlink was followed for writing"),
    }
    assert!(!outside.join("new.txt").exists());
}

#[tokio::test]
async fn file_tools_refuse_symlinks_leading_outside_and_touch_nothing_there() {
    let fixture = Fixture::new(ToolSettings::default());
    let root = fixture.workspace().to_path_buf();
    let outside = fixture.outside();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    symlink(outside.join("secret.txt"), root.join("leak")).unwrap();
    symlink(&outside, root.join("outdir")).unwrap();
    symlink(outside.join("created-by-agent.txt"), root.join("dangling")).unwrap();

    let reason = refusal(fixture.call(&ReadFileTool, json!({"path": "leak"})).await);
    assert!(reason.contains("outside the workspace"), "{reason}");
    assert!(!reason.contains("top secret"));
    for mode in ["create", "overwrite", "append"] {
        for path in ["leak", "outdir/secret.txt", "outdir/new.txt", "dangling"] {
            let result = fixture
                .call(
                    &WriteFileTool,
                    json!({"path": path, "content": "pwned", "mode": mode}),
                )
                .await;
            let reason = refusal(result);
            assert!(
                reason.contains("outside the workspace"),
                "{path} {mode}: {reason}"
            );
        }
    }
    let reason = refusal(fixture.call(&ListDirTool, json!({"path": "outdir"})).await);
    assert!(reason.contains("outside"), "{reason}");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "top secret"
    );
    let mut outside_entries: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside_entries.sort();
    assert_eq!(outside_entries, vec!["secret.txt".to_string()]);
}

// ---------------------------------------------------------------------------------------------
// read_file, write_file, list_dir

#[tokio::test]
async fn read_file_shows_invalid_utf8_lossily_with_a_note() {
    let fixture = Fixture::new(ToolSettings::default());
    std::fs::write(fixture.workspace().join("latin1.txt"), b"caf\xe9 au lait").unwrap();
    let text = ok_text(
        fixture
            .call(&ReadFileTool, json!({"path": "latin1.txt"}))
            .await,
    );
    assert!(text.starts_with("caf\u{FFFD} au lait"), "{text}");
    assert!(
        text.contains("not valid UTF-8 (first invalid byte at offset 3)"),
        "{text}"
    );
}

#[tokio::test]
async fn read_file_truncates_large_files_and_continues_from_an_offset() {
    let settings = ToolSettings {
        read_max_bytes: 1001,
        ..ToolSettings::default()
    };
    let fixture = Fixture::new(settings);
    // 2-byte characters: a cut at 1001 bytes would split one, so the tool stops at 1000.
    let content = "é".repeat(1500);
    std::fs::write(fixture.workspace().join("big.txt"), &content).unwrap();

    let first = ok_text(
        fixture
            .call(&ReadFileTool, json!({"path": "big.txt"}))
            .await,
    );
    let (shown, note) = first.split_once("\n\n").unwrap();
    assert_eq!(shown, "é".repeat(500));
    assert!(
        note.contains("showing bytes 0..1000 of 3000") && note.contains("offset=1000"),
        "{note}"
    );

    let second = ok_text(
        fixture
            .call(&ReadFileTool, json!({"path": "big.txt", "offset": 1000}))
            .await,
    );
    assert!(second.starts_with(&"é".repeat(500)));
    assert!(second.contains("offset=2000"), "{second}");

    let last = ok_text(
        fixture
            .call(&ReadFileTool, json!({"path": "big.txt", "offset": 2000.0}))
            .await,
    );
    assert_eq!(last, "é".repeat(500));

    let past_end = invalid(
        fixture
            .call(&ReadFileTool, json!({"path": "big.txt", "offset": 5000}))
            .await,
    );
    assert!(past_end.contains("past the end"), "{past_end}");
}

#[tokio::test]
async fn read_file_refuses_directories_binaries_and_missing_files_clearly() {
    let fixture = Fixture::new(ToolSettings::default());
    std::fs::create_dir_all(fixture.workspace().join("notes")).unwrap();
    std::fs::write(
        fixture.workspace().join("image.bin"),
        b"\x89PNG\r\n\x1a\n\0\0\0",
    )
    .unwrap();
    std::fs::write(fixture.workspace().join("empty.txt"), b"").unwrap();

    let directory = failure(fixture.call(&ReadFileTool, json!({"path": "notes"})).await);
    assert!(
        directory.contains("is a directory") && directory.contains("list_dir"),
        "{directory}"
    );
    let binary = ok_text(
        fixture
            .call(&ReadFileTool, json!({"path": "image.bin"}))
            .await,
    );
    assert!(binary.contains("binary file"), "{binary}");
    let missing = failure(
        fixture
            .call(&ReadFileTool, json!({"path": "nope.txt"}))
            .await,
    );
    assert!(missing.contains("`nope.txt` does not exist"), "{missing}");
    let empty = ok_text(
        fixture
            .call(&ReadFileTool, json!({"path": "empty.txt"}))
            .await,
    );
    assert_eq!(empty, "(empty file)");
    let fifo = fixture.workspace().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Opening a FIFO without a writer would block forever without O_NONBLOCK.
    let started = Instant::now();
    let reason = refusal(fixture.call(&ReadFileTool, json!({"path": "pipe"})).await);
    assert!(reason.contains("not a regular file"), "{reason}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn write_file_create_overwrite_and_append_semantics() {
    let fixture = Fixture::new(ToolSettings::default());
    let file = fixture.workspace().join("deep/nested/notes.txt");

    let created = ok_text(
        fixture
            .call(
                &WriteFileTool,
                json!({"path": "deep/nested/notes.txt", "content": "one\n"}),
            )
            .await,
    );
    assert!(
        created.contains("created `deep/nested/notes.txt` (4 bytes)"),
        "{created}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n");

    let again = failure(
        fixture
            .call(
                &WriteFileTool,
                json!({"path": "deep/nested/notes.txt", "content": "x", "mode": "create"}),
            )
            .await,
    );
    assert!(
        again.contains("already exists") && again.contains("overwrite"),
        "{again}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n");

    ok_text(
        fixture
            .call(
                &WriteFileTool,
                json!({"path": "deep/nested/notes.txt", "content": "two\n", "mode": "append"}),
            )
            .await,
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\ntwo\n");

    let overwritten = ok_text(
        fixture
            .call(
                &WriteFileTool,
                json!({"path": "deep/nested/notes.txt", "content": "fresh", "mode": "overwrite"}),
            )
            .await,
    );
    assert!(
        overwritten.contains("5 bytes; it had 8 bytes"),
        "{overwritten}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "fresh");

    ok_text(
        fixture
            .call(
                &WriteFileTool,
                json!({"path": "new-by-append.txt", "content": "hi", "mode": "append"}),
            )
            .await,
    );
    assert_eq!(
        std::fs::read_to_string(fixture.workspace().join("new-by-append.txt")).unwrap(),
        "hi"
    );

    let directory = failure(
        fixture
            .call(
                &WriteFileTool,
                json!({"path": "deep", "content": "x", "mode": "overwrite"}),
            )
            .await,
    );
    assert!(directory.contains("is a directory"), "{directory}");
    let bad_mode = invalid(
        fixture
            .call(
                &WriteFileTool,
                json!({"path": "a.txt", "content": "x", "mode": "truncate"}),
            )
            .await,
    );
    assert!(
        bad_mode.contains("`mode` must be one of create, overwrite, append"),
        "{bad_mode}"
    );
}

#[tokio::test]
async fn overwrite_replaces_the_file_atomically_and_keeps_its_permissions() {
    let fixture = Fixture::new(ToolSettings::default());
    let file = fixture.workspace().join("state.txt");
    let first = "a".repeat(256 * 1024);
    let second = "b".repeat(256 * 1024);
    std::fs::write(&file, &first).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Held open, the first file's inode stays in use, so a later file cannot be given its number
    // (ext4 reuses a freed inode at once) and the comparison below means "a new file".
    let original = std::fs::File::open(&file).unwrap();
    let inode_before = original.metadata().unwrap().ino();

    // A reader polls the file while it is overwritten back and forth: it must only ever see one
    // whole version, never a truncated or mixed file.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reads_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reader = {
        let stop = Arc::clone(&stop);
        let reads_seen = Arc::clone(&reads_seen);
        let file = file.clone();
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let content = std::fs::read(&file).unwrap();
                assert_eq!(content.len(), 256 * 1024, "a partial file was visible");
                assert!(
                    content.iter().all(|byte| *byte == content[0]),
                    "a mixed file was visible"
                );
                reads += 1;
                reads_seen.store(reads, Ordering::Relaxed);
            }
            reads
        })
    };
    // On a loaded machine the reader thread may start late: overwrite until it has read a few times.
    let mut round = 0;
    while round < 20 || (reads_seen.load(Ordering::Relaxed) < 5 && round < 2_000) {
        round += 1;
        let content = if round % 2 == 1 { &second } else { &first };
        ok_text(
            fixture
                .call(
                    &WriteFileTool,
                    json!({"path": "state.txt", "content": content, "mode": "overwrite"}),
                )
                .await,
        );
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("the reader saw a torn write");
    assert!(reads > 0);

    let metadata = std::fs::metadata(&file).unwrap();
    assert_ne!(
        metadata.ino(),
        inode_before,
        "overwrite must rename a new file into place"
    );
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
    let last_written = if round % 2 == 1 { &second } else { &first };
    assert_eq!(&std::fs::read_to_string(&file).unwrap(), last_written);
    let leftovers: Vec<String> = std::fs::read_dir(fixture.workspace())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        leftovers,
        vec!["state.txt".to_string()],
        "temporary files were left behind"
    );
}

#[tokio::test]
async fn list_dir_lists_sorted_entries_with_kinds_and_sizes_and_caps_the_count() {
    let fixture = Fixture::new(ToolSettings::default());
    let root = fixture.workspace();
    std::fs::create_dir_all(root.join("b_dir")).unwrap();
    std::fs::write(root.join("c.txt"), "12345").unwrap();
    std::fs::write(root.join("a.txt"), "").unwrap();
    symlink("c.txt", root.join("d_link")).unwrap();

    let text = ok_text(fixture.call(&ListDirTool, json!({})).await);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "`.`: 4 entries",
            "a.txt  (file, 0 bytes)",
            "b_dir/  (directory)",
            "c.txt  (file, 5 bytes)",
            "d_link -> c.txt  (symlink)",
        ]
    );

    let many = root.join("b_dir");
    for index in 0..510 {
        std::fs::write(many.join(format!("f{index:04}")), "x").unwrap();
    }
    let text = ok_text(fixture.call(&ListDirTool, json!({"path": "b_dir"})).await);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "`b_dir`: 510 entries");
    assert_eq!(lines[1], "f0000  (file, 1 bytes)");
    assert_eq!(lines[500], "f0499  (file, 1 bytes)");
    assert!(
        lines[501].contains("10 more entries not shown"),
        "{}",
        lines[501]
    );
    assert_eq!(lines.len(), 502);

    let file = failure(fixture.call(&ListDirTool, json!({"path": "c.txt"})).await);
    assert!(file.contains("use read_file"), "{file}");
}

#[tokio::test]
async fn arguments_are_validated_naming_the_field() {
    let fixture = Fixture::new(shell_settings(Duration::from_secs(5)));
    let web_fetch = WebFetchTool::new();
    let cases: Vec<(&dyn Tool, Value, &str)> = vec![
        (&ReadFileTool, json!({}), "read_file: `path` is required"),
        (
            &ReadFileTool,
            json!({"path": 5}),
            "`path` must be a string, got a number",
        ),
        (
            &ReadFileTool,
            json!({"path": "a", "offset": -1}),
            "`offset` must be a non-negative integer",
        ),
        (
            &ReadFileTool,
            json!({"path": "a", "offset": "3"}),
            "`offset` must be a non-negative integer, got a string",
        ),
        (
            &ReadFileTool,
            json!({"file_path": "a"}),
            "unknown field `file_path`",
        ),
        (
            &ReadFileTool,
            json!("a.txt"),
            "arguments must be a JSON object",
        ),
        (
            &WriteFileTool,
            json!({"path": "a"}),
            "`content` is required",
        ),
        (
            &WriteFileTool,
            json!({"path": "a", "content": ["x"]}),
            "`content` must be a string, got an array",
        ),
        (
            &ListDirTool,
            json!({"path": null, "recursive": true}),
            "unknown field `recursive`",
        ),
        (&ShellTool, json!({}), "shell: `command` is required"),
        (&ShellTool, json!({"command": "  "}), "`command` is empty"),
        (&web_fetch, json!({"url": "not a url"}), "`url`"),
        (
            &CurrentTimeTool,
            json!({"timezone": "Mars/Olympus"}),
            "not an IANA timezone",
        ),
    ];
    for (tool, args, expected) in cases {
        let message = invalid(fixture.call(tool, args.clone()).await);
        assert!(
            message.contains(expected),
            "{args}: expected {expected:?} in {message:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// web_fetch

#[derive(Clone, Default)]
struct Hits(Arc<AtomicUsize>);

async fn start_server() -> (String, Hits) {
    let hits = Hits::default();
    let app = Router::new()
        .route("/page", get(page))
        .route("/big", get(|| async { "x".repeat(100_000) }))
        .route("/endless", get(endless))
        .route("/slow", get(slow))
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "no such page") }),
        )
        .route(
            "/image",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0u8, 1, 2, 3]) }),
        )
        .route(
            "/to-file",
            get(|| async { redirect_to("file:///etc/passwd") }),
        )
        .route("/to-page", get(|| async { redirect_to("/page") }))
        .route("/chain/{remaining}", get(chain))
        .layer(axum::middleware::from_fn_with_state(
            hits.clone(),
            count_hit,
        ))
        .with_state(hits.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{address}"), hits)
}

async fn count_hit(
    State(hits): State<Hits>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    hits.0.fetch_add(1, Ordering::SeqCst);
    next.run(request).await
}

async fn page() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "<!doctype html><html><head><title>Test &amp; Page</title>\
         <style>body { color: red }</style><script>var secret = 'do not show';</script></head>\
         <body><!-- a comment --><h1>Hello   world</h1><p>First&nbsp;paragraph with <b>bold</b> \
         text &lt;ok&gt;.</p><ul><li>one</li><li>two</li></ul><noscript>enable js</noscript></body></html>",
    )
}

async fn endless() -> impl IntoResponse {
    let chunk = Bytes::from(vec![b'y'; 16 * 1024]);
    let stream = futures::stream::repeat_with(move || Ok::<_, Infallible>(chunk.clone()));
    (
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(stream),
    )
}

async fn slow() -> &'static str {
    // A deliberately slow page: the client must give up first.
    tokio::time::sleep(Duration::from_secs(30)).await;
    "too late"
}

fn redirect_to(location: &str) -> Response {
    (
        StatusCode::FOUND,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

async fn chain(UrlPath(remaining): UrlPath<u32>) -> Response {
    if remaining == 0 {
        return "end of chain".into_response();
    }
    redirect_to(&format!("/chain/{}", remaining - 1))
}

fn private_allowed(fetch_timeout: Duration, max_bytes: u64) -> ToolSettings {
    ToolSettings {
        web_fetch_allow_private: true,
        web_fetch_timeout: fetch_timeout,
        web_fetch_max_bytes: max_bytes,
        ..ToolSettings::default()
    }
}

#[tokio::test]
async fn web_fetch_refuses_local_private_and_non_http_destinations_by_default() {
    let (base, hits) = start_server().await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let fixture = Fixture::new(ToolSettings::default());
    let tool = WebFetchTool::new();
    let cases = [
        (format!("{base}/page"), "a loopback address"),
        (
            format!("http://localhost:{port}/page"),
            "localhost is a loopback address",
        ),
        ("http://10.0.0.1/".to_string(), "a private address"),
        ("http://192.168.1.1/admin".to_string(), "a private address"),
        ("http://172.20.0.5/".to_string(), "a private address"),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "metadata",
        ),
        ("http://100.64.1.1/".to_string(), "carrier-grade NAT"),
        ("http://0.0.0.0/".to_string(), "unspecified"),
        ("http://[::1]/".to_string(), "a loopback address"),
        (
            "http://[::ffff:127.0.0.1]/".to_string(),
            "a loopback address",
        ),
        ("http://[fd00::1]/".to_string(), "unique local"),
        ("http://[fe80::1]/".to_string(), "link-local"),
        ("http://2130706433/".to_string(), "a loopback address"),
        (
            "file:///etc/passwd".to_string(),
            "scheme `file:` is not allowed",
        ),
        (
            "ftp://example.com/file".to_string(),
            "scheme `ftp:` is not allowed",
        ),
        (
            "data:text/plain,hello".to_string(),
            "scheme `data:` is not allowed",
        ),
    ];
    for (url, expected) in &cases {
        let reason = refusal(fixture.call(&tool, json!({"url": url})).await);
        assert!(
            reason.contains(expected),
            "{url}: expected {expected:?} in {reason:?}"
        );
        let assessment = tool.assess(&json!({"url": url}), &fixture.ctx);
        if !url.contains("localhost") {
            // Names are only resolved when fetching; literals are judged at assessment already.
            assert_eq!(assessment.level, RiskLevel::L3, "{url}: {assessment:?}");
        }
    }
    assert_eq!(
        hits.0.load(Ordering::SeqCst),
        0,
        "a refused URL reached the server"
    );
}

#[test]
fn address_vetting_table() {
    let cases: &[(&str, Option<&str>)] = &[
        ("127.0.0.1", Some("a loopback")),
        ("127.255.0.9", Some("a loopback")),
        ("10.1.2.3", Some("a private")),
        ("172.16.0.1", Some("a private")),
        ("172.31.255.255", Some("a private")),
        ("192.168.0.1", Some("a private")),
        (
            "169.254.169.254",
            Some("a link-local (cloud metadata service range)"),
        ),
        ("100.64.0.1", Some("a shared (carrier-grade NAT)")),
        ("0.0.0.0", Some("an unspecified")),
        ("224.0.0.1", Some("a multicast")),
        ("255.255.255.255", Some("a reserved")),
        ("::1", Some("a loopback")),
        ("::", Some("an unspecified")),
        ("::ffff:10.0.0.1", Some("a private")),
        ("fc00::1", Some("a private (unique local)")),
        ("fe80::1", Some("a link-local")),
        ("ff02::1", Some("a multicast")),
        (
            "64:ff9b::a9fe:a9fe",
            Some("a link-local (cloud metadata service range)"),
        ),
        ("2002:c0a8:0101::1", Some("a private")),
        ("::127.0.0.1", Some("a reserved (IPv4-compatible)")),
        ("172.32.0.1", None),
        ("100.128.0.1", None),
        ("1.1.1.1", None),
        ("93.184.216.34", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ];
    for (address, expected) in cases {
        let parsed: std::net::IpAddr = address.parse().unwrap();
        assert_eq!(non_public_kind(parsed), *expected, "{address}");
    }
}

#[test]
fn every_redirect_target_goes_through_the_same_check() {
    // The fetch loop applies `check_url` to each Location; a public page redirecting to a private
    // address cannot be built on loopback, so the check is exercised here directly.
    let from = reqwest::Url::parse("https://example.com/start").unwrap();
    let refused = [
        ("http://10.0.0.1/admin", "a private address"),
        ("http://[::1]:8080/", "a loopback address"),
        ("//169.254.169.254/latest", "metadata"),
        ("file:///etc/passwd", "scheme `file:`"),
        ("gopher://example.com/", "scheme `gopher:`"),
    ];
    for (location, expected) in refused {
        let next = from.join(location).unwrap();
        let reason = check_url(&next, AddressPolicy::PublicOnly)
            .unwrap_err()
            .to_string();
        assert!(reason.contains(expected), "{location}: {reason}");
    }
    let next = from.join("/elsewhere").unwrap();
    assert_eq!(check_url(&next, AddressPolicy::PublicOnly), Ok(()));
    assert_eq!(
        check_url(
            &reqwest::Url::parse("http://10.0.0.1/").unwrap(),
            AddressPolicy::AllowPrivate
        ),
        Ok(())
    );
    assert!(matches!(
        check_url(
            &reqwest::Url::parse("file:///x").unwrap(),
            AddressPolicy::AllowPrivate
        ),
        Err(FetchRefusal::Scheme { .. })
    ));
}

#[tokio::test]
async fn web_fetch_reduces_html_to_text_and_reports_status() {
    let (base, _hits) = start_server().await;
    let fixture = Fixture::new(private_allowed(Duration::from_secs(10), 1024 * 1024));
    let tool = WebFetchTool::new();

    let text = ok_text(
        fixture
            .call(&tool, json!({"url": format!("{base}/page")}))
            .await,
    );
    let (head, body) = text.split_once("\n\n").unwrap();
    assert!(head.contains("Status: 200 OK"), "{head}");
    assert!(
        head.contains("Content-Type: text/html; charset=utf-8"),
        "{head}"
    );
    assert_eq!(
        body,
        "Test & Page\nHello world\nFirst paragraph with bold text <ok>.\none\ntwo"
    );

    let redirected = ok_text(
        fixture
            .call(&tool, json!({"url": format!("{base}/to-page")}))
            .await,
    );
    assert!(
        redirected.contains(&format!("URL: {base}/page")),
        "{redirected}"
    );
    assert!(redirected.contains("Redirected from"), "{redirected}");
    assert!(redirected.ends_with("one\ntwo"), "{redirected}");

    let missing = fixture
        .call(&tool, json!({"url": format!("{base}/missing")}))
        .await
        .unwrap();
    assert!(missing.is_error);
    assert!(
        missing.text.contains("Status: 404 Not Found") && missing.text.ends_with("no such page")
    );

    let image = ok_text(
        fixture
            .call(&tool, json!({"url": format!("{base}/image")}))
            .await,
    );
    assert!(
        image.contains("(binary content, image/png, 4 bytes: not shown)"),
        "{image}"
    );
}

#[tokio::test]
async fn web_fetch_rechecks_redirects_and_limits_their_number() {
    let (base, _hits) = start_server().await;
    let fixture = Fixture::new(private_allowed(Duration::from_secs(10), 1024 * 1024));
    let tool = WebFetchTool::new();

    let reason = refusal(
        fixture
            .call(&tool, json!({"url": format!("{base}/to-file")}))
            .await,
    );
    assert!(
        reason.contains("redirected to file:///etc/passwd"),
        "{reason}"
    );
    assert!(reason.contains("scheme `file:` is not allowed"), "{reason}");

    let five = ok_text(
        fixture
            .call(&tool, json!({"url": format!("{base}/chain/5")}))
            .await,
    );
    assert!(
        five.contains("(5 redirects)") && five.ends_with("end of chain"),
        "{five}"
    );
    let six = refusal(
        fixture
            .call(&tool, json!({"url": format!("{base}/chain/6")}))
            .await,
    );
    assert!(six.contains("too many redirects (more than 5)"), "{six}");
}

#[tokio::test]
async fn web_fetch_stops_reading_at_the_size_limit() {
    let (base, _hits) = start_server().await;
    let fixture = Fixture::new(private_allowed(Duration::from_secs(10), 1000));
    let tool = WebFetchTool::new();

    let big = ok_text(
        fixture
            .call(&tool, json!({"url": format!("{base}/big")}))
            .await,
    );
    assert!(
        big.contains("[the body was cut at 1000 bytes (web_fetch_max_bytes)]"),
        "{big}"
    );
    assert!(big.ends_with(&format!("\n\n{}", "x".repeat(1000))), "{big}");

    // An endless body: the call returns as soon as the limit is reached, not at the timeout.
    let started = Instant::now();
    let endless = ok_text(
        fixture
            .call(&tool, json!({"url": format!("{base}/endless")}))
            .await,
    );
    assert!(endless.contains("cut at 1000 bytes"));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn web_fetch_gives_up_at_its_timeout_and_on_cancellation() {
    let (base, hits) = start_server().await;
    let fixture = Fixture::new(private_allowed(Duration::from_millis(300), 1024));
    let tool = WebFetchTool::new();

    let started = Instant::now();
    match fixture
        .call(&tool, json!({"url": format!("{base}/slow")}))
        .await
    {
        Err(ToolError::Timeout(limit)) => assert_eq!(limit, Duration::from_millis(300)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));

    let patient = Fixture::new(private_allowed(Duration::from_secs(60), 1024));
    let cancel = patient.ctx.cancel.clone();
    let (counter, before) = (hits.0.clone(), hits.0.load(Ordering::SeqCst));
    tokio::spawn(async move {
        // Cancelled once the request reached the server, i.e. in the middle of the fetch.
        wait_until(Duration::from_secs(10), "the slow request", || async {
            counter.load(Ordering::SeqCst) > before
        })
        .await;
        cancel.cancel();
    });
    let started = Instant::now();
    let result = patient
        .call(&tool, json!({"url": format!("{base}/slow")}))
        .await;
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn html_reduction_survives_malformed_input() {
    let inputs = [
        "<",
        "<<<>>>",
        "<script>never closed",
        "<!-- never closed",
        "text &amp",
        "&#xFFFFFFFF; &#99999999999; &bogus; &",
        "<p>ünïcødé &eacute; <b>ok</b>",
        "<div\nclass=\"x\"\n>multi-line tag</div>",
        "é<",
    ];
    for input in inputs {
        // Must not panic; spot-check a few outputs.
        let _ = html_to_text(input);
    }
    assert_eq!(html_to_text("<p>ünïcødé <b>ok</b>"), "ünïcødé ok");
    assert_eq!(html_to_text("<script>never closed"), "");
    assert_eq!(html_to_text("a<br>b<br/>c"), "a\nb\nc");
    assert_eq!(html_to_text("x &#65;&#x42; y"), "x AB y");
    // `</head>` may be omitted: the body is still text.
    assert_eq!(
        html_to_text("<html><head><title>T</title><style>p{}</style><body><p>kept</p>"),
        "T\nkept"
    );
}

// ---------------------------------------------------------------------------------------------
// shell

/// Processes of `group` that are alive (zombies excluded: PID 1 in some containers never reaps
/// re-parented children, and a zombie runs nothing).
fn live_members_of_group(group: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may contain spaces) start after the last ')'.
        let Some((_, after)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let (state, process_group) = (fields[0], fields[2].parse::<i32>().unwrap_or(-1));
        if process_group == group && state != "Z" && state != "X" {
            members.push(pid);
        }
    }
    members
}

async fn assert_group_gone(group: i32) {
    wait_until(
        Duration::from_secs(3),
        &format!("the processes of group {group} to end"),
        || async {
            let members = live_members_of_group(group);
            if members.is_empty() {
                Ok(())
            } else {
                Err(format!("processes of group {group} survived: {members:?}"))
            }
        },
    )
    .await
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn shell_is_disabled_by_default() {
    let fixture = Fixture::new(ToolSettings::default());
    let reason = refusal(
        fixture
            .call(&ShellTool, json!({"command": "touch ran"}))
            .await,
    );
    assert!(
        reason.contains("shell is disabled") && reason.contains("shell_enabled"),
        "{reason}"
    );
    assert!(!fixture.workspace().join("ran").exists());
    let assessment = ShellTool.assess(&json!({"command": "ls"}), &fixture.ctx);
    assert_eq!(assessment.level, RiskLevel::L3);
}

#[tokio::test]
async fn shell_captures_output_and_exit_code_in_the_workspace() {
    let fixture = Fixture::new(shell_settings(Duration::from_secs(10)));
    let text = ok_text(
        fixture
            .call(
                &ShellTool,
                json!({"command": "echo hello; echo oops >&2; pwd; [ \"$HOME\" != \"$PWD\" ] && echo home=elsewhere; cat; exit 3"}),
            )
            .await,
    );
    let real_workspace = std::fs::canonicalize(fixture.workspace()).unwrap();
    assert_eq!(
        text,
        format!(
            "exit code: 3\n--- stdout ---\nhello\n{0}\nhome=elsewhere\n\n--- stderr ---\noops\n",
            real_workspace.display()
        )
    );
    let quiet = ok_text(fixture.call(&ShellTool, json!({"command": "true"})).await);
    assert_eq!(quiet, "exit code: 0\n(no output)");
    let signalled = ok_text(
        fixture
            .call(&ShellTool, json!({"command": "kill -TERM $$"}))
            .await,
    );
    assert!(signalled.starts_with("killed by SIGTERM"), "{signalled}");
}

#[tokio::test]
async fn shell_does_not_see_the_daemons_environment() {
    // SAFETY: no other thread of this test binary reads or writes this variable.
    unsafe { std::env::set_var("CLAWVISOR_TEST_SECRET", "sk-test-should-not-leak") };
    let fixture = Fixture::new(shell_settings(Duration::from_secs(10)));
    let text = ok_text(fixture.call(&ShellTool, json!({"command": "env"})).await);
    assert!(!text.contains("CLAWVISOR_TEST_SECRET"), "{text}");
    assert!(!text.contains("sk-test-should-not-leak"), "{text}");
    let names: HashSet<&str> = text
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    // bash itself adds PWD, SHLVL and _; the rest point at the call's private HOME.
    let allowed: HashSet<&str> = [
        "PATH",
        "HOME",
        "LANG",
        "PWD",
        "SHLVL",
        "_",
        "OLDPWD",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "TMPDIR",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_GLOBAL",
    ]
    .into();
    // Git's hardening settings: GIT_CONFIG_COUNT and its numbered keys and values.
    let names: HashSet<&str> = names
        .into_iter()
        .filter(|name| {
            *name != "GIT_CONFIG_COUNT"
                && !name.starts_with("GIT_CONFIG_KEY_")
                && !name.starts_with("GIT_CONFIG_VALUE_")
        })
        .collect();
    assert!(names.is_subset(&allowed), "unexpected variables: {names:?}");
    assert!(names.contains("PATH") && names.contains("HOME") && names.contains("LANG"));
}

#[tokio::test]
async fn shell_timeout_kills_the_whole_process_group() {
    let fixture = Fixture::new(shell_settings(Duration::from_millis(500)));
    let started = Instant::now();
    let output = fixture
        .call(
            &ShellTool,
            json!({"command": "echo $$ > group; sleep 100 & echo started; sleep 100"}),
        )
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(output.is_error);
    assert!(
        output.text.starts_with("timed out after 500ms"),
        "{}",
        output.text
    );
    assert!(
        output.text.contains("started"),
        "partial output is kept: {}",
        output.text
    );
    assert_group_gone(read_pid(&fixture.workspace().join("group"))).await;
}

#[tokio::test]
async fn shell_background_jobs_do_not_outlive_the_call() {
    let fixture = Fixture::new(shell_settings(Duration::from_secs(30)));
    let started = Instant::now();
    let text = ok_text(
        fixture
            .call(
                &ShellTool,
                json!({"command": "echo $$ > group; sleep 100 & echo done"}),
            )
            .await,
    );
    assert!(
        text.starts_with("exit code: 0") && text.contains("done"),
        "{text}"
    );
    // The background sleep holds the output pipe; the call must not wait for it.
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_group_gone(read_pid(&fixture.workspace().join("group"))).await;
}

#[tokio::test]
async fn shell_cancellation_and_a_dropped_call_kill_the_process_group() {
    let fixture = Fixture::new(shell_settings(Duration::from_secs(60)));
    let cancel = fixture.ctx.cancel.clone();
    let group_file = fixture.workspace().join("group");
    tokio::spawn(async move {
        // Cancelled once the shell runs (it wrote its process group).
        wait_until(Duration::from_secs(10), "the shell to start", || async {
            std::fs::read_to_string(&group_file)
                .is_ok_and(|text| text.trim().parse::<i32>().is_ok())
        })
        .await;
        cancel.cancel();
    });
    let started = Instant::now();
    let result = fixture
        .call(
            &ShellTool,
            json!({"command": "echo $$ > group; sleep 100 & sleep 100"}),
        )
        .await;
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_group_gone(read_pid(&fixture.workspace().join("group"))).await;

    // The dispatcher may also give up on a call by dropping its future.
    let fixture = Fixture::new(shell_settings(Duration::from_secs(60)));
    let abandoned = tokio::time::timeout(
        Duration::from_millis(500),
        fixture.call(
            &ShellTool,
            json!({"command": "echo $$ > group; sleep 100 & sleep 100"}),
        ),
    )
    .await;
    assert!(abandoned.is_err());
    assert_group_gone(read_pid(&fixture.workspace().join("group"))).await;
}

#[tokio::test]
async fn shell_output_is_shortened_keeping_both_ends() {
    let settings = ToolSettings {
        shell_max_output: 1000,
        ..shell_settings(Duration::from_secs(10))
    };
    let fixture = Fixture::new(settings);
    let text = ok_text(
        fixture
            .call(
                &ShellTool,
                json!({"command": "echo FIRST; yes filler | head -n 50000; echo LAST; echo warning >&2"}),
            )
            .await,
    );
    assert!(text.contains("FIRST") && text.contains("LAST\n"), "{text}");
    assert!(text.contains("bytes omitted"), "{text}");
    assert!(text.ends_with("--- stderr ---\nwarning\n"), "{text}");
    assert!(text.len() < 1200, "{} bytes", text.len());

    // Endless output until the timeout: bounded memory, and the call still ends.
    let fixture = Fixture::new(ToolSettings {
        shell_max_output: 1000,
        ..shell_settings(Duration::from_millis(500))
    });
    let output = fixture
        .call(&ShellTool, json!({"command": "yes"}))
        .await
        .unwrap();
    assert!(output.is_error && output.text.contains("timed out"));
    assert!(output.text.len() < 1200);
}

// ---------------------------------------------------------------------------------------------
// current_time, the tool list, assessment and descriptions

#[test]
fn time_is_described_in_utc_and_in_the_requested_timezone() {
    let instant = Utc.with_ymd_and_hms(2024, 3, 10, 12, 0, 0).unwrap();
    let text = describe_time(instant, Some(chrono_tz::America::New_York));
    assert_eq!(
        text,
        "UTC: 2024-03-10T12:00:00Z (Sunday)\n\
         America/New_York: 2024-03-10T08:00:00-04:00 (Sunday, EDT)\n\
         Unix time: 1710072000"
    );
}

#[tokio::test]
async fn current_time_tool_answers() {
    let fixture = Fixture::new(ToolSettings::default());
    let text = ok_text(
        fixture
            .call(&CurrentTimeTool, json!({"timezone": "Europe/Paris"}))
            .await,
    );
    assert!(
        text.starts_with("UTC: ") && text.contains("\nEurope/Paris: "),
        "{text}"
    );
    let utc_only = ok_text(fixture.call(&CurrentTimeTool, Value::Null).await);
    assert_eq!(utc_only.lines().count(), 2, "{utc_only}");
}

#[test]
fn builtin_tools_have_unique_names_and_strict_schemas() {
    let tools = builtin_tools();
    let names: Vec<String> = tools.iter().map(|tool| tool.name().to_string()).collect();
    assert_eq!(
        names,
        vec![
            "read_file",
            "write_file",
            "list_dir",
            "web_fetch",
            "shell",
            "current_time",
            "save_to_memory",
            "search_memory",
            "list_memory_facts",
            "forget",
            "handoff_task",
            "handoff_status",
            "handoff_cancel",
            "handoff_progress",
            "handoff_return",
            "send_file"
        ]
    );
    for tool in &tools {
        let spec = tool.spec();
        assert_eq!(spec.name, tool.name());
        assert!(!spec.description.is_empty());
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        assert_eq!(
            spec.parameters["additionalProperties"], false,
            "{}",
            spec.name
        );
        let properties = spec.parameters["properties"].as_object().unwrap();
        for required in spec.parameters["required"].as_array().into_iter().flatten() {
            assert!(
                properties.contains_key(required.as_str().unwrap()),
                "{}",
                spec.name
            );
        }
        assert!(tool.timeout() > Duration::ZERO);
    }
    let effects: Vec<Effect> = tools.iter().map(|tool| tool.effect()).collect();
    assert_eq!(
        effects,
        vec![
            Effect::ReadOnly,
            Effect::Write,
            Effect::ReadOnly,
            Effect::ReadOnly,
            Effect::Destructive,
            Effect::ReadOnly,
            // save_to_memory is a write only for platform memory (`effect_for`).
            Effect::Write,
            Effect::ReadOnly,
            Effect::ReadOnly,
            Effect::ReadOnly,
            Effect::ReadOnly,
            Effect::ReadOnly,
            Effect::ReadOnly,
            Effect::ReadOnly,
            Effect::ReadOnly,
            // send_file speaks only in the run's own conversation.
            Effect::ReadOnly
        ]
    );
}

#[test]
fn calls_are_assessed_described_and_targeted() {
    let fixture = Fixture::new(shell_settings(Duration::from_secs(5)));
    let ctx = &fixture.ctx;
    let absolute_inside = format!("{}/a.txt", fixture.workspace().display());
    let web_fetch = WebFetchTool::new();
    let cases: Vec<(&dyn Tool, Value, RiskLevel, &str, &str)> = vec![
        (
            &ReadFileTool,
            json!({"path": "notes/a.txt"}),
            RiskLevel::L0,
            "read_file: notes/a.txt",
            "notes/a.txt",
        ),
        (
            &ReadFileTool,
            json!({"path": &absolute_inside}),
            RiskLevel::L0,
            "read_file: /",
            &absolute_inside,
        ),
        (
            &ReadFileTool,
            json!({"path": "../secret"}),
            RiskLevel::L3,
            "read_file: ../secret",
            "../secret",
        ),
        (&ListDirTool, json!({}), RiskLevel::L0, "list_dir: .", "."),
        (
            &ListDirTool,
            json!({"path": "/etc"}),
            RiskLevel::L3,
            "list_dir: /etc",
            "/etc",
        ),
        (
            &WriteFileTool,
            json!({"path": "out.txt", "content": "hello", "mode": "append"}),
            RiskLevel::L1,
            "write_file (append): out.txt, 5 bytes:\nhello",
            "out.txt",
        ),
        (
            &ShellTool,
            json!({"command": "ls -la notes"}),
            RiskLevel::L0,
            "shell: ls -la notes",
            "ls",
        ),
        (
            &web_fetch,
            json!({"url": "https://Example.com/a?b=c"}),
            RiskLevel::L1,
            // Shown as it will be fetched (the host lowercased), decoded.
            "web_fetch: GET https://example.com/a?b=c",
            "example.com",
        ),
        (
            &CurrentTimeTool,
            json!({"timezone": "UTC"}),
            RiskLevel::L0,
            "current_time: UTC",
            "UTC",
        ),
        // Malformed arguments never panic the describers.
        (
            &ReadFileTool,
            json!([1, 2]),
            RiskLevel::L0,
            "read_file: (invalid arguments)",
            "",
        ),
        (
            &ShellTool,
            json!({"command": 7}),
            RiskLevel::L2,
            "shell: (invalid arguments)",
            "",
        ),
    ];
    for (tool, args, level, description, target) in cases {
        let assessment = tool.assess(&args, ctx);
        assert_eq!(assessment.level, level, "{args}: {assessment:?}");
        assert!(!assessment.reasons.is_empty());
        let described = tool.describe_call(&args);
        assert!(described.starts_with(description), "{args}: {described:?}");
        assert_eq!(tool.target(&args), target, "{args}");
    }
}

#[tokio::test]
async fn send_file_is_judged_like_reading_its_file_and_stays_in_the_workspace() {
    use clawvisor::tools::send_file::SendFileTool;
    let fixture = Fixture::new(ToolSettings::default());
    let ctx = &fixture.ctx;
    let level = |path: &str| SendFileTool.assess(&json!({"path": path}), ctx).level;
    assert_eq!(level("reports/march.pdf"), RiskLevel::L0);
    assert_eq!(level("../outside/secret.txt"), RiskLevel::L3);
    assert_eq!(level("/etc/passwd"), RiskLevel::L3);
    assert!(
        level(".env") > RiskLevel::L0,
        "a sensitive file is not sent freely"
    );
    assert_eq!(
        SendFileTool.effect_for(&json!({"path": "a.pdf"}), ctx),
        Effect::ReadOnly
    );

    // A symlink to a file outside is refused at open time, whatever the chat.
    std::fs::write(fixture.outside().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(
        fixture.outside().join("secret.txt"),
        fixture.workspace().join("link.txt"),
    )
    .unwrap();
    let refused = fixture
        .call(&SendFileTool, json!({"path": "link.txt"}))
        .await
        .unwrap_err();
    assert!(matches!(refused, ToolError::Refused(_)), "{refused}");

    // A terminal chat cannot carry a file: the call says so and where the file is.
    std::fs::write(fixture.workspace().join("a.pdf"), "%PDF-1.4").unwrap();
    let output = fixture
        .call(&SendFileTool, json!({"path": "a.pdf", "caption": "March"}))
        .await
        .unwrap();
    assert!(output.is_error);
    assert!(
        output.text.contains("cannot carry files") && output.text.contains("a.pdf"),
        "{}",
        output.text
    );
    let unknown = fixture
        .call(&SendFileTool, json!({"path": "a.pdf", "as": "sticker"}))
        .await
        .unwrap_err();
    assert!(unknown.to_string().contains("`as`"), "{unknown}");
}
