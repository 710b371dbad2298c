//! The audit log fails closed, tested against the real binary on real data directories: the
//! attacks of issue #29 (a deleted head with a cut tail; key, head and keying row deleted and the
//! chain re-hashed; a replaced key; a moved or foreign head) make `clawvisor serve` exit 78 with
//! what to do and `clawvisor audit verify` fail — and `verify` writes nothing (the files' bytes
//! and times and the database are the same after it). A fresh data directory boots; after
//! `clawvisor audit rekey --confirm` boot and verify pass and the chain shows the re-key row, and
//! the rows before it stay pinned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use clawvisor::audit;
use clawvisor::testkit::harness::{ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::wait_until_blocking;
use sha2::Digest as _;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
/// `EX_CONFIG`: the daemon's exit code when the operator must act.
const EXIT_CONFIG: i32 = 78;

/// Runs the binary on `dir`'s config with `args`.
fn clawvisor(dir: &Path, args: &[&str]) -> Output {
    Command::new(BINARY)
        .args(["--config", dir.join("clawvisor.toml").to_str().unwrap()])
        .args(args)
        .env("TZ", "UTC")
        .output()
        .expect("the binary runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A configured directory whose data directory holds a keyed log of a few rows, written the
/// way an operator's commands write them on a stopped daemon (`jobs add`, each audited).
fn audited_dir(name: &str) -> ScratchDir {
    let dir = ScratchDir::new(name).unwrap();
    write_config(
        dir.path(),
        &config_toml("http://127.0.0.1:9/v1", ""),
        &[agent_toml("ada", "")],
    )
    .unwrap();
    let migrated = clawvisor(dir.path(), &["migrate"]);
    assert!(migrated.status.success(), "{}", text(&migrated));
    for hour in [
        "2099-01-01 09:00:00",
        "2099-01-02 09:00:00",
        "2099-01-03 09:00:00",
    ] {
        let added = clawvisor(
            dir.path(),
            &["jobs", "add", "ada", hour, "--tz", "UTC", "--", "say hello"],
        );
        assert!(added.status.success(), "{}", text(&added));
    }
    assert!(rows(dir.path()) >= 3);
    let verified = clawvisor(dir.path(), &["audit", "verify"]);
    assert!(verified.status.success(), "{}", text(&verified));
    dir
}

fn data(dir: &Path) -> PathBuf {
    dir.join("data")
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(data(dir).join("clawvisor.db")).unwrap()
}

fn rows(dir: &Path) -> i64 {
    db(dir)
        .query_row("SELECT COUNT(*) FROM audit_log", [], |row| row.get(0))
        .unwrap()
}

/// Runs `sql` with the append-only triggers out of the way, as someone with the file would.
fn tamper(dir: &Path, sql: &str) {
    let conn = db(dir);
    conn.execute_batch(
        "DROP TRIGGER IF EXISTS audit_log_no_update; DROP TRIGGER IF EXISTS audit_log_no_delete;
         DROP TRIGGER IF EXISTS audit_keying_no_update; DROP TRIGGER IF EXISTS audit_keying_no_delete;",
    )
    .unwrap();
    conn.execute_batch(sql).unwrap();
}

/// Recomputes the whole chain as plain SHA-256, as someone without the key would.
fn rehash_unkeyed(dir: &Path) {
    let conn = db(dir);
    let rows: Vec<(i64, i64, String, String, String, String)> = conn
        .prepare("SELECT id, at_ms, actor, action, subject, details FROM audit_log ORDER BY id")
        .unwrap()
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut prev = audit::GENESIS.to_string();
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

/// Every file of the data directory: its bytes and modification time. SQLite's shared-memory
/// index (`clawvisor.db-shm`) is listed by name only: every reader of a WAL database records its
/// read mark there; it holds no data (SQLite rebuilds it from the WAL).
fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    std::fs::read_dir(data(dir))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with("-shm") {
                return (name, (Vec::new(), SystemTime::UNIX_EPOCH));
            }
            let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
            (name, (std::fs::read(&path).unwrap(), modified))
        })
        .collect()
}

/// What the database says, table by table, for the audit and its anchors.
fn database_state(dir: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(
        data(dir).join("clawvisor.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut state = Vec::new();
    for sql in [
        "SELECT id || ':' || action || ':' || hash FROM audit_log ORDER BY id",
        "SELECT first_keyed_id || ':' || mac FROM audit_keying",
        "SELECT id || ':' || started_ms FROM daemon_boots ORDER BY id",
        "SELECT name FROM sqlite_master ORDER BY name",
    ] {
        let mut statement = conn.prepare(sql).unwrap();
        let lines = statement
            .query_map([], |row| row.get::<_, String>(0))
            .unwrap()
            .map(Result::unwrap);
        state.extend(lines);
    }
    state
}

/// `audit verify` fails, says `expected`, and writes nothing.
fn verify_fails_without_writing(dir: &Path, expected: &str) -> String {
    let state = database_state(dir);
    let before = snapshot(dir);
    let output = clawvisor(dir, &["audit", "verify"]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("BROKEN"), "{said}");
    assert!(said.contains(expected), "{said}");
    assert!(said.contains("audit rekey --confirm"), "{said}");
    let after = snapshot(dir);
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|name| before.get(*name) != after.get(*name))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(changed.is_empty(), "verify wrote {changed:?}");
    assert_eq!(state, database_state(dir));
    said
}

/// `serve` on `dir`: its exit code and what it said (killed after a minute if it stays up).
fn serve_exit(dir: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(BINARY)
        .args(["--config", dir.join("clawvisor.toml").to_str().unwrap()])
        .arg("serve")
        .env("TZ", "UTC")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_until_blocking(Duration::from_secs(60), "serve exits", || {
        child
            .try_wait()
            .map_err(|error| error.to_string())?
            .ok_or("still running".to_string())
    });
    let output = child.wait_with_output().unwrap();
    (status.code(), text(&output))
}

/// `serve` refuses to start with 78 and a message that leads with what happened and what to do.
fn boot_refused(dir: &Path, expected: &str) {
    let boots = db(dir)
        .query_row("SELECT COUNT(*) FROM daemon_boots", [], |row| {
            row.get::<_, i64>(0)
        })
        .unwrap();
    let (code, said) = serve_exit(dir);
    assert_eq!(code, Some(EXIT_CONFIG), "{said}");
    assert!(said.contains("refusing to start"), "{said}");
    assert!(said.contains(expected), "{said}");
    assert!(said.contains("clawvisor restore"), "{said}");
    assert!(said.contains("clawvisor audit rekey --confirm"), "{said}");
    // Refused before anything was written: not even the boot row.
    let boots_after = db(dir)
        .query_row("SELECT COUNT(*) FROM daemon_boots", [], |row| {
            row.get::<_, i64>(0)
        })
        .unwrap();
    assert_eq!(boots, boots_after, "{said}");
}

/// A daemon starts on `dir` and stops cleanly.
fn boots(dir: &Path) {
    let daemon = DaemonProcess::start(BINARY, dir, &BTreeMap::new()).unwrap();
    let (status, log) = daemon.terminate(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "{}", log.join("\n"));
}

#[test]
fn a_fresh_data_directory_is_keyed_and_boots_and_verifies() {
    let dir = ScratchDir::new("clawvisor-audit-fresh").unwrap();
    write_config(
        dir.path(),
        &config_toml("http://127.0.0.1:9/v1", ""),
        &[agent_toml("ada", "")],
    )
    .unwrap();
    boots(dir.path());
    assert_eq!(
        std::fs::read(data(dir.path()).join(audit::KEY_FILE))
            .unwrap()
            .len(),
        32
    );
    assert!(data(dir.path()).join(audit::HEAD_FILE).exists());
    let verified = clawvisor(dir.path(), &["audit", "verify"]);
    let said = text(&verified);
    assert!(verified.status.success(), "{said}");
    assert!(said.contains("checked: head"), "{said}");
    // A valid chain: verify writes nothing either.
    let (state, before) = (database_state(dir.path()), snapshot(dir.path()));
    assert!(clawvisor(dir.path(), &["audit", "verify"]).status.success());
    assert!(before == snapshot(dir.path()));
    assert_eq!(state, database_state(dir.path()));
    boots(dir.path());
}

#[test]
fn a_deleted_head_with_a_cut_tail_refuses_the_boot_and_fails_verify() {
    let dir = audited_dir("clawvisor-audit-cut");
    let last = rows(dir.path());
    tamper(
        dir.path(),
        &format!("DELETE FROM audit_log WHERE id > {};", last - 2),
    );
    std::fs::remove_file(data(dir.path()).join(audit::HEAD_FILE)).unwrap();
    verify_fails_without_writing(dir.path(), "audit.head is missing");
    boot_refused(dir.path(), "audit.head is missing");
    // Still refused, and nothing laundered the cut: no head was written by the attempts.
    assert!(!data(dir.path()).join(audit::HEAD_FILE).exists());
    verify_fails_without_writing(dir.path(), "audit.head is missing");
}

#[test]
fn a_cut_tail_under_its_head_or_a_moved_or_replaced_anchor_refuses_the_boot() {
    let dir = audited_dir("clawvisor-audit-anchors");
    let other = audited_dir("clawvisor-audit-other");
    let key = data(dir.path()).join(audit::KEY_FILE);
    let head = data(dir.path()).join(audit::HEAD_FILE);
    let (key_bytes, head_bytes) = (std::fs::read(&key).unwrap(), std::fs::read(&head).unwrap());
    let put_back = || {
        std::fs::write(&key, &key_bytes).unwrap();
        std::fs::write(&head, &head_bytes).unwrap();
    };

    // The key moved away.
    std::fs::rename(&key, data(dir.path()).join("elsewhere.key")).unwrap();
    verify_fails_without_writing(dir.path(), "audit.key is missing");
    boot_refused(dir.path(), "audit.key is missing");
    assert!(!key.exists(), "no key was written in its place");
    put_back();

    // The key replaced by another data directory's.
    std::fs::copy(data(other.path()).join(audit::KEY_FILE), &key).unwrap();
    verify_fails_without_writing(dir.path(), "keying marker does not verify");
    boot_refused(dir.path(), "keying marker does not verify");
    put_back();

    // The head replaced by another data directory's.
    std::fs::copy(data(other.path()).join(audit::HEAD_FILE), &head).unwrap();
    verify_fails_without_writing(dir.path(), "does not verify with");
    boot_refused(dir.path(), "does not verify with");
    put_back();

    // The head kept, the tail cut.
    assert!(clawvisor(dir.path(), &["audit", "verify"]).status.success());
    let last = rows(dir.path());
    tamper(
        dir.path(),
        &format!("DELETE FROM audit_log WHERE id = {last};"),
    );
    verify_fails_without_writing(dir.path(), "are missing (deleted)");
    boot_refused(dir.path(), "no longer holds row");
}

#[test]
fn a_rehashed_chain_without_key_head_or_marker_is_refused_until_the_operator_rekeys() {
    let dir = audited_dir("clawvisor-audit-rekey");
    let before_rows = rows(dir.path());
    tamper(
        dir.path(),
        "UPDATE audit_log SET subject = 'forged' WHERE id = 2; DELETE FROM audit_keying;",
    );
    rehash_unkeyed(dir.path());
    std::fs::remove_file(data(dir.path()).join(audit::KEY_FILE)).unwrap();
    std::fs::remove_file(data(dir.path()).join(audit::HEAD_FILE)).unwrap();

    verify_fails_without_writing(dir.path(), "no keying marker");
    assert!(
        !data(dir.path()).join(audit::KEY_FILE).exists(),
        "verify wrote itself a key"
    );
    boot_refused(dir.path(), "no keying marker");
    assert!(!data(dir.path()).join(audit::KEY_FILE).exists());

    // Without --confirm, rekey says what it would do and changes nothing.
    let (state, before) = (database_state(dir.path()), snapshot(dir.path()));
    let unconfirmed = clawvisor(dir.path(), &["audit", "rekey"]);
    assert_eq!(unconfirmed.status.code(), Some(2), "{}", text(&unconfirmed));
    assert!(text(&unconfirmed).contains("Nothing was changed"));
    assert!(before == snapshot(dir.path()));
    assert_eq!(state, database_state(dir.path()));

    // The operator re-keys: the chain records it, verify and boot pass.
    let rekeyed = clawvisor(
        dir.path(),
        &["audit", "rekey", "--confirm", "--by", "Ada Operator"],
    );
    let said = text(&rekeyed);
    assert!(rekeyed.status.success(), "{said}");
    assert!(said.contains("Re-keyed: row"), "{said}");
    assert!(said.contains("re-keyed at row"), "{said}");
    let (action, details): (String, String) = db(dir.path())
        .query_row(
            "SELECT action, details FROM audit_log ORDER BY id DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(action, audit::REKEY_ACTION);
    let details: serde_json::Value = serde_json::from_str(&details).unwrap();
    assert_eq!(details["by"], "Ada Operator");
    assert_eq!(details["rows_before"], before_rows);
    let found = details["found"].to_string();
    assert!(
        found.contains("BROKEN") && found.contains("no keying marker"),
        "{found}"
    );
    let verified = clawvisor(dir.path(), &["audit", "verify"]);
    let said = text(&verified);
    assert!(verified.status.success(), "{said}");
    assert!(
        said.contains("re-keyed at row") && said.contains("Ada Operator"),
        "{said}"
    );
    // The append-only triggers the attacker dropped are back.
    let triggers: i64 = db(dir.path())
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('audit_log', 'audit_keying')",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(triggers, 4);
    boots(dir.path());
    let verified = clawvisor(dir.path(), &["audit", "verify"]);
    assert!(verified.status.success(), "{}", text(&verified));
    let export = text(&clawvisor(dir.path(), &["audit", "export"]));
    assert!(export.contains("\"action\":\"audit.rekey\""), "{export}");

    // The rows before the re-key are pinned by its digest: editing one now is detected.
    tamper(
        dir.path(),
        "UPDATE audit_log SET subject = 'forged again' WHERE id = 1;",
    );
    verify_fails_without_writing(dir.path(), "were changed after it");
}
