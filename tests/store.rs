//! The store on real SQLite files: migrations, the newer-schema refusal, the writer's atomicity.

use clawvisor::store::{Store, StoreError, StoreOptions, latest_version};
use rusqlite::Connection;

fn open(dir: &tempfile::TempDir) -> Result<Store, StoreError> {
    Store::open(&dir.path().join("clawvisor.db"), StoreOptions::default())
}

#[test]
fn migrations_apply_to_an_empty_database_and_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).unwrap();
    store.stop_writer();
    let conn = Connection::open(dir.path().join("clawvisor.db")).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, latest_version());
    assert!(version >= 1);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    // A second open applies nothing and keeps the version.
    let store = open(&dir).unwrap();
    store.stop_writer();
}

#[test]
fn a_database_stamped_newer_than_the_binary_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clawvisor.db");
    let newer = latest_version() + 7;
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future_things (x INTEGER)")
            .unwrap();
        conn.pragma_update(None, "user_version", newer).unwrap();
    }
    let error = open(&dir).unwrap_err();
    match &error {
        StoreError::NewerSchema {
            db_version,
            binary_version,
            ..
        } => {
            assert_eq!(*db_version, newer);
            assert_eq!(*binary_version, latest_version());
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    let text = error.to_string();
    assert!(text.contains("newer than this binary"), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    let conn = Connection::open(&path).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, newer, "the refused database is not modified");
}

#[tokio::test]
async fn a_failing_write_rolls_back_alone_and_others_in_the_batch_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).unwrap();
    store
        .write(|conn| {
            conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")?;
            Ok(())
        })
        .await
        .unwrap();
    let mut writes = Vec::new();
    for i in 0..50 {
        let store = store.clone();
        writes.push(tokio::spawn(async move {
            store
                .write(move |conn| {
                    conn.execute("INSERT INTO t (id, v) VALUES (?1, 'x')", [i])?;
                    if i % 10 == 3 {
                        // Half-written, then failing: must leave nothing behind.
                        conn.execute("INSERT INTO t (id, v) VALUES (?1, 'y')", [1000 + i])?;
                        return Err(StoreError::Invalid(format!("job {i} refuses")));
                    }
                    Ok(i)
                })
                .await
        }));
    }
    let mut ok = 0;
    for write in writes {
        match write.await.unwrap() {
            Ok(_) => ok += 1,
            Err(StoreError::Invalid(text)) => assert!(text.contains("refuses")),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(ok, 45);
    let rows: i64 = store
        .read(|conn| Ok(conn.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(rows, 45);
    let stray: i64 = store
        .read(|conn| {
            Ok(conn.query_row("SELECT COUNT(*) FROM t WHERE id >= 1000", [], |r| r.get(0))?)
        })
        .await
        .unwrap();
    assert_eq!(stray, 0);
    // A panicking job is rolled back and reported; the writer keeps working.
    let panicked = store
        .write(|conn| -> Result<(), StoreError> {
            conn.execute("INSERT INTO t (id, v) VALUES (5000, 'p')", [])?;
            panic!("a bug inside a write job");
        })
        .await;
    assert!(matches!(panicked, Err(StoreError::WriterGone)));
    let after: i64 = store
        .write(|conn| Ok(conn.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(after, 45);
    assert_eq!(
        store.integrity_check().await.unwrap(),
        vec!["ok".to_string()]
    );
    store.stop_writer();
}

/// Typed statuses and risk levels are stored as the same words as before (no migration), read
/// back as the same values, and a word this binary does not know fails the read with an error
/// naming it instead of being guessed.
#[tokio::test]
async fn statuses_are_stored_as_their_exact_words_and_an_unknown_word_is_an_error_naming_it() {
    use clawvisor::policy::RiskLevel;
    use clawvisor::store::approvals::{self, ApprovalRow, ApprovalStatus};

    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).unwrap();
    let row = ApprovalRow {
        id: "ab12cd".into(),
        agent: "ada".into(),
        chat: "local:main".into(),
        run_id: 1,
        call_id: "call-1".into(),
        tool: "write_file".into(),
        action: "write notes.md".into(),
        action_hash: "hash".into(),
        target: "notes.md".into(),
        risk: RiskLevel::L2,
        reason: "writes a file".into(),
        requested_ms: 10,
        expires_ms: 1_000,
        status: ApprovalStatus::Pending,
        decided_ms: None,
        decided_by: None,
        consumed_ms: None,
        tg_chat_id: None,
        tg_message_id: None,
    };
    let inserted = row.clone();
    store
        .write(move |conn| approvals::insert(conn, &inserted))
        .await
        .unwrap();
    let decided = store
        .write(|conn| {
            approvals::decide(conn, "ab12cd", ApprovalStatus::DeniedTimeout, "system", 20)
        })
        .await
        .unwrap();
    assert!(decided);
    let words: (String, String) = store
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT status, risk FROM approvals WHERE id = 'ab12cd'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(words, ("denied_timeout".to_string(), "L2".to_string()));
    let read = store
        .read(|conn| approvals::get(conn, "ab12cd"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (read.status, read.risk),
        (ApprovalStatus::DeniedTimeout, RiskLevel::L2)
    );
    let filtered = store
        .read(|conn| approvals::list(conn, Some(ApprovalStatus::DeniedTimeout), 10))
        .await
        .unwrap();
    assert_eq!(filtered.len(), 1);

    store
        .write(|conn| {
            conn.execute(
                "UPDATE approvals SET status = 'half_approved' WHERE id = 'ab12cd'",
                [],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    let error = store
        .read(|conn| approvals::get(conn, "ab12cd"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("ApprovalStatus"), "{error}");
    assert!(error.contains("`half_approved`"), "{error}");
    store.stop_writer();
}

/// The `synchronous` level the writer's connection has while a job runs (2 FULL, 1 NORMAL).
fn synchronous_level(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("PRAGMA synchronous", [], |row| row.get(0))?)
}

#[tokio::test]
async fn a_recoverable_write_skips_its_own_sync_and_every_other_write_is_synced() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).unwrap();
    store
        .write(|conn| Ok(conn.execute_batch("CREATE TABLE t (v TEXT NOT NULL)")?))
        .await
        .unwrap();
    // A durable write runs (and commits) under FULL, the default.
    assert_eq!(store.write(synchronous_level).await.unwrap(), 2);
    // A recoverable one alone commits without a sync of its own, and its rows are there.
    let level = store
        .write_recoverable(|conn| {
            conn.execute("INSERT INTO t (v) VALUES ('recoverable')", [])?;
            synchronous_level(conn)
        })
        .await
        .unwrap();
    assert_eq!(
        level, 1,
        "a recoverable batch commits with synchronous = NORMAL"
    );
    let kept: String = store
        .read(|conn| Ok(conn.query_row("SELECT v FROM t", [], |row| row.get(0))?))
        .await
        .unwrap();
    assert_eq!(kept, "recoverable");
    // The next durable write is synced again (and its sync covers the recoverable commit).
    assert_eq!(store.write(synchronous_level).await.unwrap(), 2);
    // Batched together, a durable job makes the whole batch durable.
    let (durable, recoverable) = tokio::join!(
        store.write(synchronous_level),
        store.write_recoverable(synchronous_level)
    );
    assert_eq!(durable.unwrap(), 2);
    assert!(matches!(recoverable, Ok(1 | 2)));
}

#[tokio::test]
async fn a_store_opened_without_full_sync_stays_so_for_recoverable_writes() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        synchronous: clawvisor::store::Synchronous::Normal,
        ..StoreOptions::default()
    };
    let store = Store::open(&dir.path().join("clawvisor.db"), options).unwrap();
    assert_eq!(store.write_recoverable(synchronous_level).await.unwrap(), 1);
    assert_eq!(store.write(synchronous_level).await.unwrap(), 1);
}

/// Issue #30: a run that crashed before its notice was queued left its updates `dispatched`
/// forever (nothing at boot or in the sweep finished them). The recovery queues the notice once,
/// answering exactly those updates, and never again.
#[tokio::test]
async fn a_crashed_run_without_a_reply_gets_its_notice_queued_once() {
    use clawvisor::store::outbox;
    use clawvisor::store::runs::{self, RunStatus};
    use clawvisor::store::sessions::{self, EventKindRow, NewEvent};
    use clawvisor::store::telegram::{self, NewUpdate, UpdateStatus};
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).unwrap();
    let update = |update_id| NewUpdate {
        update_id,
        kind: "message".into(),
        chat_id: Some(5),
        thread_id: None,
        user_id: Some(5),
        payload: "{}".into(),
        sent_ms: Some(1),
    };
    let ids = store
        .write(move |conn| {
            let stored = telegram::store_batch(conn, 1, "ada", &[update(10), update(11)], 2)?;
            let session = sessions::active_or_create(conn, "ada", "tg:5", 2)?;
            let run = runs::create(conn, session.id, "ada", "tg:5", "message", None, 3)?;
            for row in &stored {
                telegram::set_status(conn, row.id, UpdateStatus::Dispatched, None, 3)?;
                let event = sessions::append(
                    conn,
                    session.id,
                    &NewEvent {
                        kind: EventKindRow::User,
                        sender: Some("Ada"),
                        content: "hello",
                        data: None,
                        run_id: None,
                        inbound_id: Some(row.id),
                    },
                    3,
                )?;
                let event = event.expect("a new update id is a new event");
                sessions::claim_events(conn, &[event], run)?;
            }
            // The crash as versions before #30 recorded it: failed, no outbox row.
            runs::finish(conn, run, RunStatus::Failed, "crashed", 4)?;
            Ok(stored.iter().map(|row| row.id).collect::<Vec<i64>>())
        })
        .await
        .unwrap();
    let first = store
        .write(|conn| telegram::answer_crashed_runs(conn, "ada", 5))
        .await
        .unwrap();
    let again = store
        .write(|conn| telegram::answer_crashed_runs(conn, "ada", 6))
        .await
        .unwrap();
    assert_eq!((first, again), (1, 0), "one notice for the run, then none");
    let pending = store
        .read(|conn| outbox::outbox_pending(conn, "ada"))
        .await
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].inbound_ids, ids);
    assert_eq!(pending[0].text, telegram::CRASHED_RUN_NOTICE);
}
