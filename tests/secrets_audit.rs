//! Secrets out of the tools' reach, and an audit chain that cannot be cut or rewritten unnoticed.
//!
//! - The real binary with a bot token and an API key in its environment: `/proc/<pid>/environ`
//!   no longer shows them, and the process is not dumpable.
//! - A scripted run: a tool's successful output holding a registered secret reaches neither the
//!   model's next request nor the stored steps and transcript; a `web_fetch` whose URL carries the
//!   secret is refused (recorded as a decision, audited) and no request reaches the target.
//! - `audit verify`: a valid keyed chain passes; a deleted tail, a rewritten chain and a moved
//!   keying boundary are detected; a head left one commit behind (a crash) still verifies.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use clawvisor::audit::{self, Verification};
use clawvisor::domain::ChatKey;
use clawvisor::store::{Store, StoreOptions};
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use sha2::Digest as _;

// ---------------------------------------------------------------------------------------------
// The daemon process

const BOT_TOKEN: &str = "7766554433:AAHprocess-test-bot-token-value";
const API_KEY: &str = "sk-process-test-api-key-0123456789";

#[test]
fn the_daemon_process_hides_its_secrets_and_is_not_dumpable() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("actors")).unwrap();
    std::fs::write(
        root.join("clawvisor.toml"),
        "data_dir = \"data\"\n[agents]\ndir = \"actors\"\n[telegram]\nboot_stagger = \"50ms\"\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"SA_PROVIDER_KEY\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("actors/helper.toml"),
        "name = \"helper\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"Be brief.\"\n\
         [telegram]\ntoken_env = \"SA_BOT_TOKEN\"\napi_url = \"http://127.0.0.1:9\"\nallow_users = [1]\napprovers = [1]\n",
    )
    .unwrap();
    // As root, the daemon runs as `nobody`: then "not dumpable" is visible from outside as
    // /proc/<pid>/* owned by root instead of the process's user.
    let as_root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    if as_root {
        for entry in walk(root) {
            std::os::unix::fs::chown(&entry, Some(65534), Some(65534)).unwrap();
        }
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawvisor"));
    command
        .args(["--config", root.join("clawvisor.toml").to_str().unwrap()])
        .args([
            "--studio-bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "serve",
        ])
        .env("RUST_LOG", "info")
        .env("SA_BOT_TOKEN", BOT_TOKEN)
        .env("SA_PROVIDER_KEY", API_KEY)
        .current_dir(root)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if as_root {
        use std::os::unix::process::CommandExt;
        command.uid(65534).gid(65534);
    }
    let mut child = command.spawn().expect("the binary starts");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stderr = child.stderr.take().unwrap();
    let mut child = Kill(child);
    let pid = child.0.id();
    let mut log = Vec::new();
    let mut lines = BufReader::new(stderr).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the daemon exited; log:\n{}", log.join("\n")))
            .unwrap();
        let up = line.contains("clawvisor is up");
        log.push(line);
        if up {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not up in time:\n{}",
            log.join("\n")
        );
    }
    assert!(
        log.iter().any(|line| line.contains("process hardened")),
        "{}",
        log.join("\n")
    );
    assert!(
        !log.iter()
            .any(|line| line.contains(BOT_TOKEN) || line.contains(API_KEY)),
        "a secret reached the log"
    );

    let environ_path = format!("/proc/{pid}/environ");
    match std::fs::read(&environ_path) {
        Ok(environ) => {
            let text = String::from_utf8_lossy(&environ);
            assert!(
                !text.contains(BOT_TOKEN),
                "the bot token is in {environ_path}"
            );
            assert!(!text.contains(API_KEY), "the API key is in {environ_path}");
            // The variables were there and were overwritten in place (the block keeps its size).
            assert!(text.contains("SA_BOT_TOKEN=*"), "{text}");
            assert!(text.contains("SA_PROVIDER_KEY=*"), "{text}");
            assert!(text.contains("RUST_LOG=info"), "{text}");
        }
        // Not root: a non-dumpable process's environ is closed to its own user.
        Err(error) => {
            assert!(!as_root, "root cannot read {environ_path}: {error}");
            assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
        }
    }
    if as_root {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let uid_line = status
            .lines()
            .find(|line| line.starts_with("Uid:"))
            .unwrap();
        assert!(uid_line.contains("65534"), "{uid_line}");
        // A dumpable process's /proc files belong to its user; a non-dumpable one's to root.
        let owner = std::fs::metadata(&environ_path).unwrap().uid();
        assert_eq!(
            owner, 0,
            "/proc/{pid}/environ belongs to {owner}: the process is dumpable"
        );
        // And the process's own user cannot read it.
        use std::os::unix::process::CommandExt;
        let as_nobody = Command::new("cat")
            .arg(&environ_path)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        assert!(!as_nobody.status.success(), "{as_nobody:?}");
        assert!(!String::from_utf8_lossy(&as_nobody.stdout).contains(BOT_TOKEN));
    }
    let _ = child.0.kill();
}

fn walk(root: &Path) -> Vec<std::path::PathBuf> {
    let mut found = vec![root.to_path_buf()];
    let mut index = 0;
    while index < found.len() {
        if found[index].is_dir() {
            let children: Vec<_> = std::fs::read_dir(&found[index])
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .collect();
            found.extend(children);
        }
        index += 1;
    }
    found
}

// ---------------------------------------------------------------------------------------------
// A scripted run

const RUN_SECRET: &str = "sk-run-test-secret-9f8e7d6c5b4a";

/// A loopback server that counts the requests it gets.
async fn counting_server() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            "a page"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{address}"), hits)
}

fn everything_stored(harness: &Harness) -> Vec<String> {
    harness
        .store()
        .read_blocking(|conn| {
            let mut texts = Vec::new();
            for query in [
                "SELECT detail FROM run_steps",
                "SELECT content || ' ' || COALESCE(data, '') FROM session_events",
                "SELECT actor || subject || details FROM audit_log",
                "SELECT action FROM approvals",
            ] {
                let mut statement = conn.prepare(query)?;
                let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
                for row in rows {
                    texts.push(row?);
                }
            }
            Ok(texts)
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_tool_output_and_arguments_never_reach_the_model_a_tool_or_the_store() {
    let (server, hits) = counting_server().await;
    let leaking_url = format!("{server}/collect?k={RUN_SECRET}");
    let encoded_url = format!(
        "{server}/collect?b={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("key={RUN_SECRET}"))
    );
    let script = Script::new()
        .rule(Rule::text("Read it.").when_after_tool_result("read_file"))
        .rule(Rule::text("Fetched.").when_after_tool_result("web_fetch"))
        .rule(
            Rule::tool_call("read_file", r#"{"path": "notes.txt"}"#)
                .when_last_user_contains("read the notes"),
        )
        .rule(
            Rule::tool_call(
                "web_fetch",
                serde_json::json!({"url": leaking_url}).to_string(),
            )
            .when_last_user_contains("send the key"),
        )
        .rule(
            Rule::tool_call(
                "web_fetch",
                serde_json::json!({"url": encoded_url}).to_string(),
            )
            .when_last_user_contains("send it encoded"),
        )
        .rule(
            Rule::tool_call(
                "web_fetch",
                serde_json::json!({"url": format!("{server}/plain")}).to_string(),
            )
            .when_last_user_contains("fetch the plain page"),
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "ada",
        // The loopback test server may always be reached: this test is about secrets, not about
        // a run that read private data sending new text out (tests/egress.rs).
        "tools = [\"read_file\", \"web_fetch\"]\nautonomy = \"trust_first\"\nweb_fetch_allow = [\"127.0.0.1\"]",
    )];
    // A second provider whose key is the secret: loading the config registers it.
    options.config_extra = "[providers.other]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"SA_RUN_SECRET\"\n[tools]\nweb_fetch_allow_private = true\n".into();
    options.env = BTreeMap::from([("SA_RUN_SECRET".to_string(), RUN_SECRET.to_string())]);
    let harness = Harness::start(options).await.unwrap();
    let workspace = harness.dir.path().join("data/workspaces/ada");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("notes.txt"),
        format!("deploy notes\nAPI_KEY={RUN_SECRET}\nend of notes\n"),
    )
    .unwrap();
    let chat = ChatKey::cli("secrets");

    // 1. A successful tool output holding the secret.
    let reply = harness.ask("ada", &chat, "read the notes").await.unwrap();
    assert_eq!(reply.text, "Read it.");
    let requests = llm.requests();
    let after_tool = requests.last().unwrap().to_string();
    assert!(
        after_tool.contains("deploy notes"),
        "the tool output did not reach the model: {after_tool}"
    );
    assert!(after_tool.contains("API_KEY=***"), "{after_tool}");
    assert!(!after_tool.contains(RUN_SECRET), "the model saw the secret");

    // 2. web_fetch carrying the secret, raw and base64-encoded: refused, nothing sent.
    for ask in ["send the key", "send it encoded"] {
        let reply = harness.ask("ada", &chat, ask).await.unwrap();
        assert_eq!(reply.text, "Fetched.");
        let last = llm.requests().last().unwrap().to_string();
        assert!(last.contains("carry a secret of this daemon"), "{last}");
        assert!(!last.contains(RUN_SECRET), "{last}");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a request carrying the secret reached the server"
    );
    // The same server is reachable: the refusal, not the setup, kept the requests out.
    harness
        .ask("ada", &chat, "fetch the plain page")
        .await
        .unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // 3. Nothing stored holds the secret; the refusals are recorded decisions and audit rows.
    let stored = everything_stored(&harness);
    for text in &stored {
        assert!(!text.contains(RUN_SECRET), "stored: {text}");
        assert!(!text.contains("a2V5PXNr"), "stored in base64: {text}");
    }
    let (decisions, audited) = harness
        .store()
        .read_blocking(|conn| {
            let decisions: i64 = conn.query_row(
                "SELECT COUNT(*) FROM run_steps WHERE kind = 'decision' AND json_extract(detail, '$.envelope.source') = 'secrets' AND json_extract(detail, '$.envelope.decision') = 'deny'",
                [],
                |row| row.get(0),
            )?;
            let audited: i64 = conn.query_row(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'tool.refused_secret'",
                [],
                |row| row.get(0),
            )?;
            Ok((decisions, audited))
        })
        .unwrap();
    assert_eq!((decisions, audited), (2, 2));
    harness.stop().await;
}

#[test]
fn web_fetch_refuses_a_url_carrying_a_secret_on_its_own() {
    use clawvisor::tools::web_fetch::{AddressPolicy, FetchRefusal, parse_and_check_url};
    let secret = clawvisor::secrets::Secret::new("tok-web-fetch-own-check-4242");
    for url in [
        format!("https://example.com/?q={}", secret.expose()),
        format!("https://{}.example.com/", secret.expose()),
        format!(
            "https://example.com/{}",
            secret.expose().replace('-', "%2D")
        ),
    ] {
        let refusal = parse_and_check_url(&url, AddressPolicy::AllowPrivate).unwrap_err();
        assert_eq!(refusal, FetchRefusal::CarriesSecret, "{url}");
        assert!(!refusal.to_string().contains(secret.expose()));
    }
    assert!(
        parse_and_check_url(
            "https://example.com/?q=ordinary",
            AddressPolicy::AllowPrivate
        )
        .is_ok()
    );
}

// ---------------------------------------------------------------------------------------------
// The audit chain

/// A store with `commits` commits of two audit rows each, stopped; returns the directory.
fn audited_dir(commits: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("clawvisor.db"), StoreOptions::default()).unwrap();
    for commit in 0..commits {
        store
            .write_blocking(move |conn| {
                for row in 0..2 {
                    audit::append(
                        conn,
                        "operator",
                        "policy.changed",
                        &format!("rule:{commit}.{row}"),
                        &serde_json::json!({"n": row}),
                    )?;
                }
                Ok(())
            })
            .unwrap();
    }
    store.stop_writer();
    dir
}

/// A copy of `dir`'s database and anchors in a new directory, for one tampering.
fn copy_of(dir: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    for name in ["clawvisor.db", audit::KEY_FILE, audit::HEAD_FILE] {
        if dir.join(name).exists() {
            std::fs::copy(dir.join(name), copy.path().join(name)).unwrap();
        }
    }
    copy
}

fn report(dir: &Path) -> audit::AuditReport {
    let conn = rusqlite::Connection::open(dir.join("clawvisor.db")).unwrap();
    audit::verify_report(&conn, None).unwrap()
}

fn tamper(dir: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(dir.join("clawvisor.db")).unwrap();
    conn.execute_batch("DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete;")
        .unwrap();
    conn.execute_batch(sql).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
         CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;",
    )
    .unwrap();
}

/// Recomputes the unkeyed SHA-256 chain from row `from` on, as someone without the key would.
fn rechain_unkeyed(dir: &Path, from: i64) {
    let conn = rusqlite::Connection::open(dir.join("clawvisor.db")).unwrap();
    conn.execute_batch("DROP TRIGGER audit_log_no_update;")
        .unwrap();
    let rows: Vec<(i64, i64, String, String, String, String)> = conn
        .prepare("SELECT id, at_ms, actor, action, subject, details FROM audit_log WHERE id >= ?1 ORDER BY id")
        .unwrap()
        .query_map([from], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut prev: String = conn
        .query_row(
            "SELECT COALESCE((SELECT hash FROM audit_log WHERE id = ?1 - 1), ?2)",
            rusqlite::params![from, audit::GENESIS],
            |row| row.get(0),
        )
        .unwrap();
    for (id, at_ms, actor, action, subject, details) in rows {
        let canonical =
            format!("{id}\u{1f}{at_ms}\u{1f}{actor}\u{1f}{action}\u{1f}{subject}\u{1f}{details}");
        let mut hasher = sha2::Sha256::new();
        hasher.update(prev.as_bytes());
        hasher.update(canonical.as_bytes());
        let hash = hex::encode(hasher.finalize());
        conn.execute(
            "UPDATE audit_log SET prev_hash = ?1, hash = ?2 WHERE id = ?3",
            rusqlite::params![prev, hash, id],
        )
        .unwrap();
        prev = hash;
    }
}

#[test]
fn a_valid_keyed_chain_verifies_with_its_anchors() {
    let dir = audited_dir(3);
    let key = dir.path().join(audit::KEY_FILE);
    assert_eq!(std::fs::read(&key).unwrap().len(), 32);
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let report = report(dir.path());
    assert_eq!(report.verification, Verification::Valid { rows: 6 });
    let anchors = report.anchors.join("\n");
    assert!(
        anchors.contains("keying marker: rows from 1 on"),
        "{anchors}"
    );
    assert!(
        anchors.contains("6 rows") && anchors.contains("matches the table"),
        "{anchors}"
    );
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn deleting_the_newest_rows_is_detected() {
    let dir = audited_dir(3);
    let copy = copy_of(dir.path());
    tamper(copy.path(), "DELETE FROM audit_log WHERE id > 4;");
    match report(copy.path()).verification {
        Verification::Broken { row, reason } => {
            assert_eq!(row, 5, "{reason}");
            assert!(
                reason.contains("rows 5 to 6 are missing (deleted)"),
                "{reason}"
            );
        }
        valid => panic!("a cut tail went unnoticed: {valid:?}"),
    }
    // The binary says the same and fails, naming the anchors it checked.
    let config = copy.path().join("cli.toml");
    std::fs::write(&config, format!("data_dir = \"{}\"\n[providers.openai]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n", copy.path().display())).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_clawvisor"))
        .args(["--config", config.to_str().unwrap(), "audit", "verify"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stdout.contains("BROKEN at row 5"), "{stdout}");
    assert!(stdout.contains("checked: keying marker"), "{stdout}");
    // A further append does not launder the cut: the writer refuses to append over a head the
    // table no longer extends (fail closed), and writes no head.
    let head_before = std::fs::read(copy.path().join(audit::HEAD_FILE)).unwrap();
    let store = Store::open(&copy.path().join("clawvisor.db"), StoreOptions::default()).unwrap();
    let refused = store
        .write_blocking(|conn| {
            audit::append(
                conn,
                "operator",
                "policy.changed",
                "rule:x",
                &serde_json::json!({}),
            )
            .map(|_| ())
        })
        .unwrap_err()
        .to_string();
    assert!(refused.contains("no longer holds row 6"), "{refused}");
    store.stop_writer();
    assert_eq!(
        std::fs::read(copy.path().join(audit::HEAD_FILE)).unwrap(),
        head_before
    );
    assert!(matches!(
        report(copy.path()).verification,
        Verification::Broken { .. }
    ));
}

#[test]
fn rewriting_the_chain_without_the_key_is_detected() {
    let dir = audited_dir(3);
    // Edit row 3 and recompute the unkeyed chain from there on.
    let copy = copy_of(dir.path());
    tamper(
        copy.path(),
        "UPDATE audit_log SET details = '{\"n\":99}' WHERE id = 3;",
    );
    rechain_unkeyed(copy.path(), 3);
    match report(copy.path()).verification {
        Verification::Broken { row, reason } => {
            assert_eq!(row, 3, "{reason}");
            assert!(reason.contains("MAC"), "{reason}");
        }
        valid => panic!("a rewritten chain went unnoticed: {valid:?}"),
    }
    // Moving the keying boundary past the end, to pass the rewritten rows off as old unkeyed ones.
    let copy = copy_of(dir.path());
    rechain_unkeyed(copy.path(), 1);
    let conn = rusqlite::Connection::open(copy.path().join("clawvisor.db")).unwrap();
    conn.execute_batch(
        "DROP TRIGGER audit_keying_no_update; UPDATE audit_keying SET first_keyed_id = 100;",
    )
    .unwrap();
    drop(conn);
    assert!(matches!(
        report(copy.path()).verification,
        Verification::Broken { reason, .. } if reason.contains("keying marker does not verify")
    ));
    // Or deleting the marker altogether.
    let copy = copy_of(dir.path());
    rechain_unkeyed(copy.path(), 1);
    let conn = rusqlite::Connection::open(copy.path().join("clawvisor.db")).unwrap();
    conn.execute_batch("DROP TRIGGER audit_keying_no_delete; DELETE FROM audit_keying;")
        .unwrap();
    drop(conn);
    assert!(matches!(
        report(copy.path()).verification,
        Verification::Broken { reason, .. } if reason.contains("no keying marker")
    ));
}

#[test]
fn a_head_one_commit_behind_still_verifies_and_missing_anchors_are_named() {
    let dir = audited_dir(2);
    let behind = std::fs::read(dir.path().join(audit::HEAD_FILE)).unwrap();
    // One more commit, then the head of the commit before it is put back (a crash between the
    // commit and the head's update).
    let store = Store::open(&dir.path().join("clawvisor.db"), StoreOptions::default()).unwrap();
    store
        .write_blocking(|conn| {
            audit::append(
                conn,
                "operator",
                "policy.changed",
                "rule:last",
                &serde_json::json!({}),
            )
            .map(|_| ())
        })
        .unwrap();
    store.stop_writer();
    assert_ne!(
        std::fs::read(dir.path().join(audit::HEAD_FILE)).unwrap(),
        behind
    );
    std::fs::write(dir.path().join(audit::HEAD_FILE), &behind).unwrap();
    let report_behind = report(dir.path());
    assert_eq!(report_behind.verification, Verification::Valid { rows: 5 });
    assert!(
        report_behind
            .anchors
            .join("\n")
            .contains("a prefix of the table's 5 rows"),
        "{:?}",
        report_behind.anchors
    );

    // A missing head is a break naming the fix (it fails closed); a missing key too.
    let copy = copy_of(dir.path());
    std::fs::remove_file(copy.path().join(audit::HEAD_FILE)).unwrap();
    match report(copy.path()).verification {
        Verification::Broken { reason, .. } => {
            assert!(reason.contains("audit.head is missing"), "{reason}");
            assert!(reason.contains("audit rekey --confirm"), "{reason}");
        }
        valid => panic!("a missing head went unnoticed: {valid:?}"),
    }
    std::fs::remove_file(copy.path().join(audit::KEY_FILE)).unwrap();
    match report(copy.path()).verification {
        Verification::Broken { reason, .. } => {
            assert!(reason.contains("audit.key is missing"), "{reason}")
        }
        valid => panic!("a missing key went unnoticed: {valid:?}"),
    }
}

#[test]
fn an_old_unkeyed_chain_is_keyed_only_by_the_operator_and_stays_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clawvisor.db");
    // A database from before keying: the schema at version 9 (the repository's first nine
    // migrations, as a binary of that time applied them) with SHA-256-chained rows.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let dir_of_migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<_> = std::fs::read_dir(&dir_of_migrations)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .and_then(|name| name.get(..4))
                    .and_then(|number| number.parse::<u32>().ok())
                    .is_some_and(|number| (1..=9).contains(&number))
            })
            .collect();
        files.sort();
        assert_eq!(files.len(), 9, "{files:?}");
        for file in files {
            conn.execute_batch(&std::fs::read_to_string(&file).unwrap())
                .unwrap();
        }
        conn.execute_batch("PRAGMA user_version = 9;").unwrap();
        let mut prev = audit::GENESIS.to_string();
        for id in 1..=3i64 {
            let canonical = format!("{id}\u{1f}1000\u{1f}operator\u{1f}old\u{1f}s\u{1f}{{}}");
            let mut hasher = sha2::Sha256::new();
            hasher.update(prev.as_bytes());
            hasher.update(canonical.as_bytes());
            let hash = hex::encode(hasher.finalize());
            conn.execute(
                "INSERT INTO audit_log (id, at_ms, actor, action, subject, details, prev_hash, hash) VALUES (?1, 1000, 'operator', 'old', 's', '{}', ?2, ?3)",
                rusqlite::params![id, prev, hash],
            )
            .unwrap();
            prev = hash;
        }
    }
    // Rows without anchors are not keyed behind the operator's back: nothing is appended, no
    // key is written, and verify says why.
    let append_one = || {
        let store = Store::open(&path, StoreOptions::default()).unwrap();
        let appended = store.write_blocking(|conn| {
            audit::append(conn, "operator", "new", "s", &serde_json::json!({})).map(|_| ())
        });
        store.stop_writer();
        appended
    };
    let refused = append_one().unwrap_err().to_string();
    assert!(
        refused.contains("holds 3 rows but has no keying marker"),
        "{refused}"
    );
    assert!(!dir.path().join(audit::KEY_FILE).exists());
    assert!(matches!(
        report_of(dir.path()),
        Verification::Broken { row: 1, .. }
    ));
    // The operator keys it explicitly; the re-key row is the first keyed one.
    let outcome = audit::rekey(&mut rusqlite::Connection::open(&path).unwrap(), "tester").unwrap();
    assert_eq!(outcome.row, 4);
    append_one().unwrap();
    let report = report(dir.path());
    assert_eq!(report.verification, Verification::Valid { rows: 5 });
    let anchors = report.anchors.join("\n");
    assert!(
        anchors.contains("rows from 4 on are HMAC-SHA256-keyed"),
        "{anchors}"
    );
    assert!(anchors.contains("re-keyed at row 4 by tester"), "{anchors}");
    assert!(anchors.contains("the 3 rows before it match"), "{anchors}");
    // The old prefix is pinned by the first keyed row: rewriting it is detected.
    let copy = copy_of(dir.path());
    tamper(
        copy.path(),
        "UPDATE audit_log SET subject = 'forged' WHERE id = 2;",
    );
    rechain_unkeyed(copy.path(), 2);
    assert!(matches!(
        report_of(copy.path()),
        Verification::Broken { row: 4, .. }
    ));
}

fn report_of(dir: &Path) -> Verification {
    report(dir).verification
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_refuses_to_boot_on_a_keyed_log_without_its_key() {
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.start = clawvisor::domain::StartOptions::local_only();
    let harness = Harness::start(options.clone()).await.unwrap();
    let dir = harness.stop().await;
    let key = dir.path().join("data").join(audit::KEY_FILE);
    std::fs::remove_file(&key).unwrap();
    match Harness::start_in(dir, options).await {
        Ok(_) => panic!("the daemon booted without {}", key.display()),
        Err(error) => {
            assert!(error.contains("audit.key is missing"), "{error}");
            assert!(error.contains("from your latest backup"), "{error}");
        }
    }
}
