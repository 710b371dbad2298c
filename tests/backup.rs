//! Backup and restore, end to end: the real binary backs up a daemon's data directory while the
//! daemon answers a stream of Telegram messages and saves memories; the archive restored into a
//! fresh directory passes `integrity_check`, its audit chain verifies, and every message, memory
//! and workspace file present at the snapshot is there. Damaged archives (cut short, an entry
//! altered, another format or a newer schema, a path leaving the target) are refused with the
//! reason and write nothing; a data directory a daemon has open is never restored into; scheduled
//! backups keep only `keep` archives (never one made by hand) and show in Studio. A file growing
//! while it is archived does not fail a backup; a restore whose audit chain breaks, or that cannot
//! tell whether a daemon runs, leaves the data directory as it was; restored files keep their
//! executable bits and the previous owner; a scheduled run sweeps what killed backups left.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clawvisor::backup::{self, BackupError, Manifest};
use clawvisor::store::{Store, StoreOptions};
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::{Staged, World};
use rusqlite::{Connection, OpenFlags};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const USER: i64 = 4242;
/// Memory-saving requests in the load, each with its own fact.
const FACTS: u64 = 40;

/// Runs the binary with the staged config; returns (success, stdout, stderr).
fn cli(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(BINARY)
        .arg("--config")
        .arg(dir.join("clawvisor.toml"))
        .args(args)
        .env("TZ", "UTC")
        .output()
        .expect("the binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn read_only(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// The `columns` (those that never change once written) of every row of `table` with
/// `id <= max_id`, each as text, by id.
fn rows(conn: &Connection, table: &str, columns: &str, max_id: i64) -> BTreeMap<i64, Vec<String>> {
    let mut statement = conn
        .prepare(&format!(
            "SELECT {columns} FROM {table} WHERE id <= ?1 ORDER BY id"
        ))
        .unwrap();
    let columns = statement.column_count();
    statement
        .query_map([max_id], |row| {
            let values = (0..columns)
                .map(|index| {
                    let value: rusqlite::types::Value = row.get(index)?;
                    Ok(format!("{value:?}"))
                })
                .collect::<rusqlite::Result<Vec<String>>>()?;
            Ok((row.get::<_, i64>("id")?, values))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn max_id(conn: &Connection, table: &str) -> i64 {
    conn.query_row(
        &format!("SELECT COALESCE(MAX(id), 0) FROM {table}"),
        [],
        |row| row.get(0),
    )
    .unwrap()
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// The regular files under `dir`, by path relative to it.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(listing) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in listing.map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, into);
            } else {
                let relative = path.strip_prefix(root).unwrap().to_path_buf();
                into.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut all = BTreeMap::new();
    walk(dir, dir, &mut all);
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_under_load_restores_every_message_memory_and_file() {
    let dir = ScratchDir::new("clawvisor-backup-load").unwrap();
    let mut script =
        Script::new().rule(Rule::text("noted.").when_after_tool_result("save_to_memory"));
    for number in 0..FACTS {
        script = script.rule(
            Rule::tool_call(
                "save_to_memory",
                json!({"text": format!("fact number {number}: the sky has {number} clouds")})
                    .to_string(),
            )
            .when_last_user_contains(format!("remember fact #{number}.")),
        );
    }
    let script = script.rule(Rule::echo().delay(Duration::from_millis(30)));
    // The scripted model must outlive the daemon: keep `_llm` bound.
    let Staged {
        fake,
        bots,
        env,
        llm: _llm,
    } = World::builder(script)
        .agent_with_bot(
            "ada",
            "tools = [\"save_to_memory\"]",
            "900:AAH-backup-token-ada-0123456789",
            &[USER],
            &[USER],
        )
        .stage(dir.path())
        .await;
    let bot = bots[0].id;
    // Workspace and installed-skill files, to be found byte for byte after the restore.
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("workspaces/ada/notes")).unwrap();
    std::fs::write(
        data.join("workspaces/ada/notes/plan.md"),
        "# plan\nstep one\n",
    )
    .unwrap();
    std::fs::write(data.join("workspaces/ada/blob.bin"), vec![7u8; 300_000]).unwrap();
    std::fs::create_dir_all(data.join("skills/greeter")).unwrap();
    std::fs::write(
        data.join("skills/greeter/SKILL.md"),
        "---\nname: greeter\ndescription: says hello\n---\nSay hello.\n",
    )
    .unwrap();
    let daemon = {
        let (dir, env) = (dir.path().to_path_buf(), env.clone());
        tokio::task::spawn_blocking(move || DaemonProcess::start(BINARY, &dir, &env))
            .await
            .unwrap()
            .expect("the daemon starts")
    };

    // The load: questions and memory requests, about fifteen a second, until told to stop.
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let fake = std::sync::Arc::new(fake);
    let load = {
        let fake = fake.clone();
        tokio::spawn(async move {
            let mut number = 0u64;
            while !*stopped.borrow() {
                let text = if number.is_multiple_of(3) && number / 3 < FACTS {
                    format!("remember fact #{}.", number / 3)
                } else {
                    format!("question #{number}.")
                };
                fake.push_message(bot, USER, USER, &text);
                number += 1;
                // The stream's pace (not a wait for a state).
                let _ = tokio::time::timeout(Duration::from_millis(60), stopped.changed()).await;
            }
            number
        })
    };
    let database = data.join("clawvisor.db");
    wait_until(Duration::from_secs(60), "some memories and answers", || {
        let database = database.clone();
        async move {
            let conn = read_only(&database);
            let memories = count(&conn, "SELECT COUNT(*) FROM memory_facts");
            let events = count(&conn, "SELECT COUNT(*) FROM session_events");
            if memories >= 8 && events >= 60 {
                Ok(())
            } else {
                let sample: String = conn
                    .query_row(
                        "SELECT group_concat(kind || ': ' || substr(content, 1, 120), ' | ') FROM \
                         (SELECT kind, content FROM session_events WHERE kind != 'user' ORDER BY id LIMIT 6)",
                        [],
                        |row| row.get::<_, Option<String>>(0),
                    )
                    .unwrap()
                    .unwrap_or_default();
                Err(format!("{memories} memories, {events} session events: {sample}"))
            }
        }
    })
    .await;

    let archive = dir.path().join("backups/first.tar.gz");
    std::fs::create_dir_all(archive.parent().unwrap()).unwrap();
    let (ok, stdout, stderr) = {
        let (dir, archive) = (dir.path().to_path_buf(), archive.clone());
        tokio::task::spawn_blocking(move || cli(&dir, &["backup", archive.to_str().unwrap()]))
            .await
            .unwrap()
    };
    assert!(ok, "backup failed: {stderr}");
    assert!(
        stdout.contains("wrote ") && stdout.contains("clawvisor.db"),
        "{stdout}"
    );
    assert!(stdout.contains("workspaces/ada/notes/plan.md"), "{stdout}");
    assert!(!stdout.contains("studio.token"), "{stdout}");
    eprintln!("under load: {}", stdout.lines().next().unwrap_or_default());
    let mut partial = archive.as_os_str().to_owned();
    partial.push(".partial");
    assert!(!Path::new(&partial).exists());

    // The load goes on a little after the snapshot, so the source outgrows the archive.
    let at_backup = count(&read_only(&database), "SELECT COUNT(*) FROM session_events");
    wait_until(
        Duration::from_secs(60),
        "more answers after the backup",
        || {
            let database = database.clone();
            async move {
                count(&read_only(&database), "SELECT COUNT(*) FROM session_events") > at_backup + 20
            }
        },
    )
    .await;

    // A data directory the daemon has open is never restored into, not even with --force.
    for args in [
        vec!["restore", archive.to_str().unwrap()],
        vec!["restore", archive.to_str().unwrap(), "--force"],
    ] {
        let (ok, _, stderr) = cli(dir.path(), &args);
        assert!(!ok);
        assert!(
            stderr.contains(&format!("a daemon (pid {})", daemon.pid())),
            "{stderr}"
        );
    }

    stop.send(true).unwrap();
    let pushed = load.await.unwrap();
    daemon
        .terminate(Duration::from_secs(60))
        .expect("the daemon stops");

    let fresh = dir.path().join("restored");
    let (ok, stdout, stderr) = cli(
        dir.path(),
        &[
            "restore",
            archive.to_str().unwrap(),
            "--data-dir",
            fresh.to_str().unwrap(),
        ],
    );
    assert!(ok, "restore failed: {stdout}\n{stderr}");
    assert!(stdout.contains("integrity_check: ok"), "{stdout}");
    let (ok, stdout, stderr) = cli(
        dir.path(),
        &["audit", "verify", "--data-dir", fresh.to_str().unwrap()],
    );
    assert!(
        ok,
        "the restored audit chain does not verify: {stdout}\n{stderr}"
    );

    let source = read_only(&database);
    let restored = read_only(&fresh.join("clawvisor.db"));
    let integrity: String = restored
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    for (table, columns) in [
        (
            "session_events",
            "id, session_id, kind, sender, content, inbound_id, created_ms",
        ),
        ("memory_facts", "id, owner, class, source, text, created_ms"),
        (
            "inbound_updates",
            "id, bot_id, update_id, payload, received_ms",
        ),
        ("audit_log", "*"),
        ("runs", "id, session_id, agent"),
    ] {
        let snapshot = max_id(&restored, table);
        assert!(snapshot > 0, "the archive holds no {table}");
        assert_eq!(
            rows(&restored, table, columns, snapshot),
            rows(&source, table, columns, snapshot),
            "{table} up to id {snapshot} differs"
        );
        assert!(
            max_id(&source, table) >= snapshot,
            "{table}: the archive has rows the source lacks"
        );
    }
    let memories = count(&restored, "SELECT COUNT(*) FROM memory_facts");
    assert!(memories >= 8, "{memories} memories restored");
    assert!(
        max_id(&source, "session_events") > max_id(&restored, "session_events"),
        "the load went on after the snapshot"
    );
    for folder in ["workspaces", "skills"] {
        assert_eq!(
            files(&fresh.join(folder)),
            files(&data.join(folder)),
            "{folder} differs"
        );
    }
    assert!(!fresh.join("studio.token").exists());
    eprintln!(
        "backup under load: {pushed} messages pushed, {} session events and {memories} memories \
         in the archive",
        max_id(&restored, "session_events")
    );
}

/// A small data directory without a daemon: a migrated database with keyed audit rows, and files.
fn small_data_dir(root: &Path) -> PathBuf {
    let data = root.join("data");
    let store = Store::open(&Store::path_in(&data), StoreOptions::default()).unwrap();
    for number in 0..5 {
        store
            .write_blocking(move |conn| {
                clawvisor::audit::append(conn, "test", "note", &format!("n{number}"), &json!({}))
            })
            .unwrap();
    }
    store.stop_writer();
    std::fs::create_dir_all(data.join("workspaces/ada")).unwrap();
    std::fs::write(data.join("workspaces/ada/a.txt"), "alpha").unwrap();
    std::fs::create_dir_all(data.join("memory")).unwrap();
    std::fs::write(data.join("memory/vector-index.json"), "{}").unwrap();
    data
}

/// Rewrites an archive entry by entry (`edit` may change a path's bytes, or drop the entry).
fn rewrite(
    archive: &Path,
    target: &Path,
    mut edit: impl FnMut(&str, Vec<u8>) -> Option<(String, Vec<u8>)>,
) {
    let mut input = tar::Archive::new(flate2::read::GzDecoder::new(
        std::fs::File::open(archive).unwrap(),
    ));
    let mut output = tar::Builder::new(flate2::write::GzEncoder::new(
        std::fs::File::create(target).unwrap(),
        flate2::Compression::fast(),
    ));
    for entry in input.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        if let Some((name, bytes)) = edit(&name, bytes) {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o600);
            header.set_entry_type(tar::EntryType::Regular);
            // Written raw, so that the test can make paths the builder would refuse.
            let field = &mut header.as_old_mut().name;
            field.fill(0);
            field[..name.len()].copy_from_slice(name.as_bytes());
            header.set_cksum();
            output.append(&header, bytes.as_slice()).unwrap();
        }
    }
    output.into_inner().unwrap().finish().unwrap();
}

/// How a test case changes an archive's entries (see [`rewrite`]).
type Edit = Box<dyn Fn(&str, Vec<u8>) -> Option<(String, Vec<u8>)>>;

fn edit_manifest(bytes: Vec<u8>, change: impl FnOnce(&mut Manifest)) -> Vec<u8> {
    let mut manifest: Manifest = serde_json::from_slice(&bytes).unwrap();
    change(&mut manifest);
    serde_json::to_vec(&manifest).unwrap()
}

/// Restores `archive` into a new directory and expects a refusal containing `reason`, with nothing
/// written beside the archives.
fn assert_refused(root: &Path, archive: &Path, reason: &str) {
    let before: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let target = root.join("target");
    let error = backup::restore(archive, &target, false).expect_err("the archive is refused");
    assert!(
        matches!(error, BackupError::Refused(_)),
        "{}: {error}",
        archive.display()
    );
    let text = error.to_string();
    assert!(text.contains(reason), "expected {reason:?} in: {text}");
    assert!(text.contains("nothing was written"), "{text}");
    assert!(!target.exists(), "{} was created", target.display());
    let after: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(before, after, "something was left beside the target");
}

#[test]
fn damaged_mismatched_and_escaping_archives_are_refused_and_write_nothing() {
    let scratch = ScratchDir::new("clawvisor-backup-refusals").unwrap();
    let data = small_data_dir(scratch.path());
    let archives = scratch.path().join("archives");
    std::fs::create_dir_all(&archives).unwrap();
    let good = archives.join("good.tar.gz");
    let report = backup::create_backup(&data, &good).unwrap();
    let names: Vec<&str> = report
        .entries
        .iter()
        .map(|entry| entry.path.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "clawvisor.db",
            "audit.key",
            "audit.head",
            "workspaces/ada/a.txt",
            "memory/vector-index.json"
        ]
    );
    let bytes = std::fs::read(&good).unwrap();

    // Cut short at several points, down to a single byte short.
    let length = bytes.len();
    for cut in [
        0,
        1,
        10,
        length / 4,
        length / 2,
        length * 3 / 4,
        length - 9,
        length - 1,
    ] {
        let truncated = archives.join(format!("cut-{cut}.tar.gz"));
        std::fs::write(&truncated, &bytes[..cut]).unwrap();
        let reason = if cut == 0 { "" } else { "truncated" };
        assert_refused(&archives, &truncated, reason);
    }

    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "tampered",
            Box::new(|name, bytes| {
                let bytes = if name == "workspaces/ada/a.txt" {
                    b"alphA".to_vec()
                } else {
                    bytes
                };
                Some((name.to_string(), bytes))
            }),
            "does not match its checksum",
        ),
        (
            "missing",
            Box::new(|name, bytes| (name != "audit.key").then(|| (name.to_string(), bytes))),
            "audit.key is missing",
        ),
        (
            "extra",
            Box::new(|name, bytes| {
                let name = if name == "audit.head" {
                    "skills/x/SKILL.md"
                } else {
                    name
                };
                Some((name.to_string(), bytes))
            }),
            "not in the manifest",
        ),
        (
            "escaping",
            Box::new(|name, bytes| {
                let name = if name == "workspaces/ada/a.txt" {
                    "workspaces/../../evil.txt"
                } else {
                    name
                };
                Some((name.to_string(), bytes))
            }),
            "outside what a backup holds",
        ),
        (
            "absolute",
            Box::new(|name, bytes| {
                let name = if name == "audit.head" {
                    "/tmp/evil"
                } else {
                    name
                };
                Some((name.to_string(), bytes))
            }),
            "outside what a backup holds",
        ),
        (
            "format",
            Box::new(|name, bytes| {
                let bytes = if name == "manifest.json" {
                    edit_manifest(bytes, |manifest| manifest.format_version = 2)
                } else {
                    bytes
                };
                Some((name.to_string(), bytes))
            }),
            "archive format version 2",
        ),
        (
            "schema",
            Box::new(|name, bytes| {
                let bytes = if name == "manifest.json" {
                    edit_manifest(bytes, |manifest| manifest.schema_version += 1)
                } else {
                    bytes
                };
                Some((name.to_string(), bytes))
            }),
            "newer than this clawvisor knows",
        ),
        (
            "no-manifest",
            Box::new(|name, bytes| (name != "manifest.json").then(|| (name.to_string(), bytes))),
            "no manifest.json",
        ),
    ];
    for (label, edit, reason) in cases {
        let altered = archives.join(format!("{label}.tar.gz"));
        rewrite(&good, &altered, edit);
        assert_refused(&archives, &altered, reason);
    }

    // A symbolic link entry is refused too.
    let linked = archives.join("link.tar.gz");
    {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            std::fs::File::create(&linked).unwrap(),
            flate2::Compression::fast(),
        ));
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        builder
            .append_link(&mut header, "workspaces/ada/link", "/etc/passwd")
            .unwrap();
        builder.into_inner().unwrap().finish().unwrap();
    }
    assert_refused(&archives, &linked, "not a regular file");

    // The good archive restores; a second time into the same (now non-empty) directory it needs
    // --force, and then the old directory is kept aside.
    let target = scratch.path().join("restored");
    let restored = backup::restore(&good, &target, false).unwrap();
    assert_eq!(restored.integrity, ["ok"]);
    assert!(restored.audit_valid, "{:?}", restored.audit);
    assert_eq!(
        std::fs::read(target.join("workspaces/ada/a.txt")).unwrap(),
        b"alpha"
    );
    let error = backup::restore(&good, &target, false).unwrap_err();
    assert!(matches!(error, BackupError::NotEmpty(_)), "{error}");
    let again = backup::restore(&good, &target, true).unwrap();
    let aside = again.replaced.expect("the old directory is kept");
    assert!(aside.join("clawvisor.db").exists());
    assert!(target.join("clawvisor.db").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_backups_keep_only_the_newest_and_show_in_studio() {
    let world = World::builder(Script::new().rule(Rule::echo()))
        .config_extra("[backup]\nschedule = \"every 1s\"\nkeep = 2\ndir = \"../scheduled\"\n")
        .start()
        .await;
    let store = world.harness.store().clone();
    let data_dir = store.path().parent().unwrap().to_path_buf();
    let dir = data_dir.join("../scheduled");
    let recorded = wait_until(Duration::from_secs(60), "four recorded backups", || {
        let store = store.clone();
        async move {
            let rows = store
                .read(|conn| clawvisor::backup::record::recent(conn, 50))
                .await
                .unwrap();
            (rows.len() >= 4).then_some(rows)
        }
    })
    .await;
    assert!(
        recorded.iter().all(|row| row.status == "ok"),
        "{recorded:?}"
    );
    let archives = clawvisor::backup::schedule::list_archives(&dir);
    assert!(archives.len() <= 2, "{archives:?}");
    // The oldest recorded runs' archives were pruned, and their rows say so.
    let oldest = recorded.last().unwrap();
    assert!(!Path::new(&oldest.file).exists());
    let (base, client) = world.harness.studio_http().await;
    let body: serde_json::Value = client
        .get(format!("{base}/api/v1/backups"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["schedule"], "every 1s");
    assert_eq!(body["keep"], 2);
    assert!(body["next_run_ms"].as_i64().is_some(), "{body}");
    assert!(body["recent"].as_array().unwrap().len() >= 4, "{body}");
    assert!(
        body["recent"]
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["pruned"] == true),
        "{body}"
    );
    // Each kept archive verifies.
    for (name, _) in archives {
        let file = std::fs::File::open(dir.join(&name)).unwrap();
        backup::verify_archive(file).unwrap_or_else(|error| panic!("{name}: {error}"));
    }
    world.harness.stop().await;
}

/// Writes the staged config (data directory `data`) and a small data directory under `root`.
fn configured_data_dir(root: &Path) -> PathBuf {
    clawvisor::testkit::process::write_config(
        root,
        &clawvisor::testkit::harness::config_toml("http://127.0.0.1:9/v1", ""),
        &[clawvisor::testkit::harness::agent_toml("ada", "")],
    )
    .unwrap();
    small_data_dir(root)
}

/// The names beside `path` (in its parent directory), sorted.
fn siblings(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn a_file_growing_while_it_is_archived_does_not_fail_the_backup() {
    use std::io::Write as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    let scratch = ScratchDir::new("clawvisor-backup-growing").unwrap();
    let data = small_data_dir(scratch.path());
    let log = data.join("workspaces/ada/log.txt");
    // Large enough that reading and compressing it takes a while.
    std::fs::write(&log, vec![b'x'; 8 << 20]).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (started, appending) = std::sync::mpsc::channel();
    let writer = {
        let stop = stop.clone();
        let log = log.clone();
        std::thread::spawn(move || {
            let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            while !stop.load(Ordering::SeqCst) {
                file.write_all(&[b'y'; 4096]).unwrap();
                let _ = started.send(());
                // Paced like an agent's log, so the backup's copy is never outrun.
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    appending.recv().expect("the writer appends");
    let archive = scratch.path().join("growing.tar.gz");
    let result = backup::create_backup(&data, &archive);
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let report = result.expect("a file growing during the backup does not fail it");
    let entry = report
        .entries
        .iter()
        .find(|entry| entry.path == "workspaces/ada/log.txt")
        .expect("the growing file is archived");
    assert!(entry.size >= 8 << 20, "{entry:?}");
    let target = scratch.path().join("restored");
    backup::restore(&archive, &target, false).unwrap();
    let restored = std::fs::read(target.join("workspaces/ada/log.txt")).unwrap();
    assert_eq!(restored.len() as u64, entry.size);
    assert!(
        std::fs::read(&log).unwrap().starts_with(&restored),
        "the archived copy is a prefix of the file"
    );
    assert!(
        !siblings(&archive)
            .iter()
            .any(|name| name.starts_with(".clawvisor-backup-") || name.ends_with(".partial")),
        "{:?}",
        siblings(&archive)
    );
}

#[test]
fn a_restore_whose_audit_chain_breaks_leaves_the_data_directory_unless_accepted() {
    use sha2::Digest as _;
    let scratch = ScratchDir::new("clawvisor-backup-broken-audit").unwrap();
    let data = configured_data_dir(scratch.path());
    let good = scratch.path().join("good.tar.gz");
    backup::create_backup(&data, &good).unwrap();
    // Another key of the same length: every MAC of the chain stops verifying, while every
    // checksum of the archive still matches.
    let key = std::fs::read(data.join("audit.key")).unwrap();
    let other_key: Vec<u8> = key
        .iter()
        .map(|byte| if *byte == b'a' { b'b' } else { b'a' })
        .collect();
    let other_sha = hex::encode(sha2::Sha256::digest(&other_key));
    let broken = scratch.path().join("broken.tar.gz");
    rewrite(&good, &broken, |name, bytes| match name {
        "audit.key" => Some((name.to_string(), other_key.clone())),
        "manifest.json" => Some((
            name.to_string(),
            edit_manifest(bytes, |manifest| {
                for entry in &mut manifest.entries {
                    if entry.path == "audit.key" {
                        entry.sha256 = other_sha.clone();
                    }
                }
            }),
        )),
        _ => Some((name.to_string(), bytes)),
    });
    backup::verify_archive(std::fs::File::open(&broken).unwrap()).expect("checksums match");

    let before = files(&data);
    let names_before = siblings(&data);
    let (ok, stdout, stderr) = cli(
        scratch.path(),
        &["restore", broken.to_str().unwrap(), "--force"],
    );
    assert!(!ok, "{stdout}\n{stderr}");
    assert!(stderr.contains("--accept-broken-audit"), "{stderr}");
    assert!(stderr.contains("left as it was"), "{stderr}");
    assert_eq!(files(&data), before, "the data directory was changed");
    assert_eq!(
        siblings(&data),
        names_before,
        "something was left beside it"
    );

    let (ok, stdout, stderr) = cli(
        scratch.path(),
        &[
            "restore",
            broken.to_str().unwrap(),
            "--force",
            "--accept-broken-audit",
        ],
    );
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stderr.contains("does not verify"), "{stderr}");
    assert_eq!(std::fs::read(data.join("audit.key")).unwrap(), other_key);
    assert!(
        siblings(&data)
            .iter()
            .any(|name| name.starts_with("data.replaced-")),
        "{:?}",
        siblings(&data)
    );
}

#[test]
fn a_restore_refuses_a_database_it_cannot_read_for_a_running_daemon() {
    let scratch = ScratchDir::new("clawvisor-backup-unreadable").unwrap();
    let data = small_data_dir(scratch.path());
    let good = scratch.path().join("good.tar.gz");
    backup::create_backup(&data, &good).unwrap();
    let target = scratch.path().join("damaged");
    std::fs::create_dir(&target).unwrap();
    let garbage = vec![b'#'; 4096];
    std::fs::write(target.join("clawvisor.db"), &garbage).unwrap();
    let error = backup::restore(&good, &target, true).expect_err("an unreadable database refuses");
    assert!(
        matches!(error, BackupError::DaemonUnknown { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("move that database"), "{error}");
    assert_eq!(std::fs::read(target.join("clawvisor.db")).unwrap(), garbage);
    assert!(
        !siblings(&target)
            .iter()
            .any(|name| name.starts_with("damaged.replaced-")),
        "{:?}",
        siblings(&target)
    );
    // With the database moved away, the same restore goes ahead.
    std::fs::rename(
        target.join("clawvisor.db"),
        scratch.path().join("damaged.db"),
    )
    .unwrap();
    backup::restore(&good, &target, true).unwrap();
}

#[test]
fn a_restore_keeps_executable_bits_and_the_previous_owner() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let scratch = ScratchDir::new("clawvisor-backup-modes").unwrap();
    let data = small_data_dir(scratch.path());
    std::fs::create_dir_all(data.join("skills/tool")).unwrap();
    let script = data.join("skills/tool/run.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o775)).unwrap();
    let secret = data.join("workspaces/ada/secret.txt");
    std::fs::write(&secret, "mine").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let archive = scratch.path().join("modes.tar.gz");
    backup::create_backup(&data, &archive).unwrap();

    let target = scratch.path().join("restored");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("old.txt"), "old").unwrap();
    let root = std::fs::metadata(&target).unwrap().uid() == 0;
    // As root (a restore under sudo), the previous directory belongs to the daemon's user.
    let (owner, group) = if root {
        (65_534, 65_534)
    } else {
        let metadata = std::fs::metadata(&target).unwrap();
        (metadata.uid(), metadata.gid())
    };
    std::os::unix::fs::chown(&target, Some(owner), Some(group)).unwrap();
    let report = backup::restore(&archive, &target, true).unwrap();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&target.join("skills/tool/run.sh")), 0o755);
    assert_eq!(mode(&target.join("workspaces/ada/secret.txt")), 0o600);
    for path in [
        target.clone(),
        target.join("clawvisor.db"),
        target.join("skills/tool"),
        target.join("skills/tool/run.sh"),
        target.join("workspaces/ada/secret.txt"),
    ] {
        let metadata = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (metadata.uid(), metadata.gid()),
            (owner, group),
            "{}",
            path.display()
        );
    }
}

#[test]
fn a_scheduled_run_sweeps_what_killed_backups_left_but_not_a_running_one() {
    let scratch = ScratchDir::new("clawvisor-backup-sweep").unwrap();
    let data = small_data_dir(scratch.path());
    let dir = scratch.path().join("backups");
    std::fs::create_dir(&dir).unwrap();
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(600);
    let age = |path: &Path| {
        std::fs::File::open(path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    };
    // What a killed backup leaves: a scratch directory with a plaintext database, and a partial.
    let dead = dir.join(".clawvisor-backup-dead");
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(dead.join("clawvisor.db"), "plaintext").unwrap();
    age(&dead);
    let dead_partial = dir.join("clawvisor-20260101T000000.000Z.tar.gz.partial");
    std::fs::write(&dead_partial, "half").unwrap();
    age(&dead_partial);
    // What a running backup (here: this test, holding the locks) is writing, however old.
    let live = dir.join(".clawvisor-backup-live");
    std::fs::create_dir(&live).unwrap();
    age(&live);
    let live_partial = dir.join("by-hand.tar.gz.partial");
    std::fs::write(&live_partial, "writing").unwrap();
    age(&live_partial);
    let live_lock = std::fs::File::open(&live).unwrap();
    live_lock.lock().unwrap();
    let live_partial_lock = std::fs::File::open(&live_partial).unwrap();
    live_partial_lock.lock().unwrap();

    let plan = clawvisor::backup::schedule::BackupPlan {
        schedule_text: String::new(),
        schedule: None,
        data_dir: data.clone(),
        dir: dir.clone(),
        keep: 5,
        zone: chrono_tz::UTC,
    };
    let (report, _) = plan.run_once(clawvisor::clock::now_ms()).unwrap();
    assert!(report.path.is_file());
    assert!(!dead.exists(), "the dead scratch directory is left");
    assert!(!dead_partial.exists(), "the dead partial is left");
    assert!(
        live.exists() && live_partial.exists(),
        "a running backup's files were removed"
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let archive = report
        .path
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let mut expected = vec![
        ".clawvisor-backup-live".to_string(),
        archive,
        "by-hand.tar.gz.partial".to_string(),
    ];
    expected.sort();
    assert_eq!(names, expected);
}
