//! `clawvisor import openclaw` against the state directory in `tests/fixtures/openclaw-2026.9`
//! (laid out as OpenClaw 2026.9 keeps it; its README says how each file was made), through the
//! real binary: agents, personas, Telegram allowlists, a schedule, dated memories and a skill come
//! across; the config loads with clawvisor's own loader and the daemon boots on it; a second run
//! changes nothing; a dry run writes nothing; no key or token appears in what it prints.
//! The same against `tests/fixtures/openclaw-2026.9-real`, made by a real OpenClaw 2026.9.6 with
//! its own CLI (its README says how, and how it differs from the hand-written one).
//! Imported memories are embedded at the daemon's next start like any saved memory: with local
//! embeddings (the real small model, `testkit::test_model`) a paraphrase finds one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use clawvisor::config::{self, Overrides};
use clawvisor::domain::StartOptions;
use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{Harness, ScratchDir};
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::test_model::minilm_dir;
use clawvisor::testkit::wait_until;
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

/// The fake keys and tokens of the fixture's `openclaw.json`.
const FIXTURE_SECRETS: [&str; 4] = [
    "sk-ant-FAKE-fixture-key-0000000000",
    "123456789:FAKE-fixture-main-bot-token-AAAAAAAAAA",
    "987654321:FAKE-fixture-family-bot-token-BBBBBBBBB",
    "FAKE-gateway-token-not-imported",
];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9")
}

/// `clawvisor --config <dir>/clawvisor.toml <args>` run in `dir`, with no provider keys in its
/// environment.
fn clawvisor(dir: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(BINARY);
    command
        .current_dir(dir)
        .env("HOME", dir)
        .env("TZ", "UTC")
        .env_remove("LMSTUDIO_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .arg("--config")
        .arg(dir.join("clawvisor.toml"))
        .args(args);
    command.output().expect("the binary runs")
}

fn import(dir: &Path, extra: &[&str]) -> (String, String) {
    let source = fixture().display().to_string();
    let mut args = vec!["import", "openclaw", source.as_str()];
    args.extend_from_slice(extra);
    let output = clawvisor(dir, &args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "import failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    for secret in FIXTURE_SECRETS {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "a secret value was printed:\n{stdout}\n{stderr}"
        );
    }
    (stdout, stderr)
}

/// Every file under `dir` but the database's, with its content.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if !path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("clawvisor.db")
            {
                found.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

fn row_counts(database: &Path) -> Vec<(String, i64)> {
    let conn = rusqlite::Connection::open(database).unwrap();
    ["memory_facts", "jobs", "audit_log"]
        .iter()
        .map(|table| {
            let count: i64 = conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                    row.get(0)
                })
                .unwrap();
            (table.to_string(), count)
        })
        .collect()
}

#[test]
fn a_dry_run_writes_nothing_and_says_what_cannot_come_across() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, _) = import(dir.path(), &["--dry-run"]);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the dry run wrote something:\n{stdout}"
    );
    for expected in [
        "+ agent main (Ada)",
        "+ agent family (Family Helper)",
        "+ provider anthropic",
        "key kept in the secrets store as ANTHROPIC_API_KEY",
        "token kept in the secrets store as TELEGRAM_MAIN_BOT_TOKEN), 1 person allowed",
        "LMSTUDIO_API_KEY",
        "+ schedule \"Morning brief\" for main: cron 0 7 * * 1-5 (Europe/Berlin), answers to tg:111111111",
        "+ skill grocery-list",
        "+ 5 memories for main",
        "+ 1 memory for family",
        "Not carried over:",
        "schedule \"Queue depth probe\": it runs a `command` payload directly",
        "Dry run: nothing was written.",
    ] {
        assert!(stdout.contains(expected), "no `{expected}` in:\n{stdout}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_personas_schedule_memories_and_skill_come_across_once_and_the_daemon_boots() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("clawvisor.toml");
    let (stdout, _) = import(dir.path(), &[]);
    assert!(
        stdout.contains("Imported 2 agents, 1 skill, 6 memories and 1 schedule"),
        "{stdout}"
    );

    // The config loads with clawvisor's own loader, as the daemon loads it.
    let overrides = Overrides {
        config: Some(config_path.clone()),
        ..Overrides::default()
    };
    let loaded = config::load(&overrides).expect("the imported config loads");
    let main = loaded.agent("main").expect("agent main");
    assert_eq!(
        (main.provider.as_str(), main.model.as_str()),
        ("anthropic", "claude-sonnet-4-5")
    );
    assert!(
        main.instructions.contains("calm, warm and precise"),
        "SOUL.md: {}",
        main.instructions
    );
    assert!(
        main.instructions.contains("ask first"),
        "AGENTS.md: {}",
        main.instructions
    );
    assert!(
        main.instructions.contains("Prefers metric units"),
        "USER.md: {}",
        main.instructions
    );
    assert_eq!(main.description, "Ada");
    assert_eq!(main.skills, vec!["grocery-list".to_string()]);
    let main_bot = main.telegram.as_ref().expect("main's bot");
    assert_eq!(main_bot.allow_users, vec![111_111_111]);
    let family = loaded.agent("family").expect("agent family");
    assert_eq!(
        (family.provider.as_str(), family.model.as_str()),
        ("lmstudio", "qwen3-8b")
    );
    assert_eq!(family.fallback.len(), 1, "the fallback model comes across");
    let family_bot = family.telegram.as_ref().expect("family's bot");
    assert_eq!(
        family_bot.allow_users,
        vec![111_111_111, 222_222_222, 333_333_333]
    );
    assert_eq!(
        loaded.config.providers["lmstudio"].api_key_env,
        "LMSTUDIO_API_KEY"
    );
    // Keys and tokens are in the secrets store, under the names the config uses.
    for var in [
        "ANTHROPIC_API_KEY",
        &main_bot.token_env,
        &family_bot.token_env,
    ] {
        assert!(
            loaded.secret_from_store(var),
            "{var} is not in the secrets store"
        );
    }
    let data_dir = loaded.config.data_dir.clone();
    assert!(data_dir.join("skills/grocery-list/SKILL.md").is_file());

    // Memories with their dates, and the schedule in its zone.
    let database = loaded.config.db_path();
    {
        let conn = rusqlite::Connection::open(&database).unwrap();
        let created: i64 = conn
            .query_row(
                "SELECT created_ms FROM memory_facts WHERE owner = 'main' AND source = 'imported' \
                 AND text LIKE '%Mia is visiting%'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(
            chrono::DateTime::from_timestamp_millis(created)
                .unwrap()
                .date_naive()
                .to_string(),
            "2026-09-14"
        );
        let imported: i64 = conn
            .query_row(
                "SELECT count(*) FROM memory_facts WHERE source = 'imported'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(imported, 6);
        let job: (String, String, String, Option<String>) = conn
            .query_row(
                "SELECT agent, expression, timezone, target_chat FROM jobs WHERE name = 'Morning brief'",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .unwrap();
        assert_eq!(
            job,
            (
                "main".into(),
                "0 7 * * 1-5".into(),
                "Europe/Berlin".into(),
                Some("tg:111111111".into())
            )
        );
    }

    // A second run creates nothing: the same files, the same rows.
    let files_before = files(dir.path());
    let rows_before = row_counts(&database);
    let (again, _) = import(dir.path(), &[]);
    assert!(again.contains("Nothing new to import"), "{again}");
    assert!(
        !again.contains("\n  + "),
        "the second run plans to create something:\n{again}"
    );
    assert_eq!(
        files(dir.path()),
        files_before,
        "the second run changed a file"
    );
    assert_eq!(
        row_counts(&database),
        rows_before,
        "the second run added rows"
    );

    // The real daemon boots on what was written (its bots talk to a fake Bot API).
    let telegram = FakeTelegram::start().await;
    for name in ["main", "family"] {
        let path = config::edit::find_agent_file(&loaded.config.agents.dir, name).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let changes = [(
            "telegram.api_url".to_string(),
            config::edit::Setting::Text(telegram.base_url()),
        )];
        std::fs::write(&path, config::edit::edit_agent(&text, &changes).unwrap()).unwrap();
    }
    let mut command = Command::new(BINARY);
    command
        .current_dir(dir.path())
        .env("TZ", "UTC")
        .arg("--config")
        .arg(&config_path)
        .args([
            "--studio-bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "serve",
        ]);
    let daemon = tokio::task::spawn_blocking(move || DaemonProcess::spawn(command))
        .await
        .unwrap()
        .expect("the daemon boots on the imported config");
    // While it runs, the import refuses to write behind its back.
    let source = fixture().display().to_string();
    let refused = clawvisor(dir.path(), &["import", "openclaw", &source]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "the import ran beside the daemon"
    );
    assert!(stderr.contains("a daemon (pid"), "{stderr}");
    let log = daemon.kill();
    for secret in FIXTURE_SECRETS {
        assert!(
            !log.iter().any(|line| line.contains(secret)),
            "a secret reached the log"
        );
    }
}

#[test]
fn a_broken_openclaw_json_is_named_and_nothing_is_written() {
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("openclaw.json"), "{ agents: { entries: ").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = source.path().display().to_string();
    let output = clawvisor(dir.path(), &["import", "openclaw", &path]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("openclaw.json") && stderr.contains("not valid JSON5"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let missing = clawvisor(
        dir.path(),
        &["import", "openclaw", "/nonexistent/.openclaw"],
    );
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("no OpenClaw installation at /nonexistent/.openclaw"),
        "{stderr}"
    );
}

/// Imported memories have no vector when they are written (the import runs with the daemon
/// stopped and loads no model); the daemon's start embeds every live memory without one, so they
/// reach the vector index like saved ones and a question that shares no word with an imported
/// memory finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_memories_are_embedded_at_the_next_start_and_found_by_a_paraphrase() {
    let scratch = ScratchDir::new("clawvisor-import-embeddings").unwrap();
    let dir = scratch.path().to_path_buf();
    import(&dir, &[]);
    let config_path = dir.join("clawvisor.toml");
    // Local embeddings, set in the starter config's `[memory]` table the import wrote.
    let text = std::fs::read_to_string(&config_path).unwrap();
    let text = text
        .replacen("embeddings = \"auto\"", "embeddings = \"local\"", 1)
        .replacen(
            "local_model = \"\"",
            &format!("local_model = \"{}\"", minilm_dir().display()),
            1,
        );
    assert!(text.contains("embeddings = \"local\""), "{text}");
    std::fs::write(&config_path, text).unwrap();
    let overrides = Overrides {
        config: Some(config_path),
        studio_bind: Some("127.0.0.1:0".into()),
        ..Overrides::default()
    };
    let env = [("TZ".to_string(), "UTC".to_string())].into();
    let loaded = config::load_in(&overrides, env, &dir).expect("the imported config loads");
    {
        let conn = rusqlite::Connection::open(loaded.config.db_path()).unwrap();
        let unembedded: i64 = conn
            .query_row(
                "SELECT count(*) FROM memory_facts WHERE source = 'imported' AND embedding IS NULL",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(
            unembedded, 6,
            "the import writes the memories without vectors"
        );
    }
    let options = StartOptions {
        studio: true,
        channels: false,
        scheduler: false,
    };
    let daemon = clawvisor::daemon::start_with(loaded, options)
        .await
        .expect("the daemon starts on the imported config");
    let harness = Harness {
        daemon: Some(daemon),
        dir: scratch,
    };
    let (base, http) = harness.studio_http().await;
    let get = |path: String| {
        let (base, http) = (base.clone(), http.clone());
        async move {
            let response = http.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(response.status().as_u16(), 200, "GET {path}");
            response.json::<Value>().await.unwrap()
        }
    };
    let stats = wait_until(
        Duration::from_secs(60),
        "the imported memories are embedded",
        || async {
            let stats = get("/api/v1/memory/stats".into()).await;
            let reindex = &stats["embeddings"]["reindex"];
            (reindex["running"] == false && reindex["done"] == 6).then_some(stats)
        },
    )
    .await;
    assert_eq!(stats["embeddings"]["mode"], "local", "{stats}");
    assert_eq!(stats["indexed"], 6, "{stats}");
    // No word in common with the memories they are about.
    for (query, expected) in [
        ("Who takes care of our teeth?", "Dr. Weber"),
        ("heating maintenance appointment", "boiler service"),
    ] {
        let query_text: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
        let answer = get(format!("/api/v1/memory/search?q={query_text}")).await;
        let top: Vec<&str> = answer["hits"]
            .as_array()
            .unwrap()
            .iter()
            .take(3)
            .map(|hit| hit["memory"]["text"].as_str().unwrap())
            .collect();
        assert!(
            top.iter().any(|text| text.contains(expected)),
            "{query:?} did not find the imported memory about {expected:?} in its top 3: {top:?}"
        );
    }
    harness.stop().await;
}

/// The state directory a real OpenClaw 2026.9.6 made with its own CLI (its README says how), with
/// OpenClaw's absolute paths, its own declared jobs and `identity.name`.
#[test]
fn a_state_directory_made_by_openclaw_itself_comes_across_once() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9-real");
    let source = source.display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["import", "openclaw", source.as_str()];
        args.extend_from_slice(extra);
        let output = clawvisor(dir.path(), &args);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stdout}\n{stderr}");
        assert!(
            !stdout.contains("FAKE-real-fixture") && !stderr.contains("FAKE-real-fixture"),
            "a token was printed:\n{stdout}"
        );
        stdout
    };
    let dry = run(&["--dry-run"]);
    for expected in [
        "+ agent ada (Ada)",
        "+ agent family (Family Helper)",
        "+ schedule \"Morning brief\" for ada: cron 0 7 * * 1-5 (Europe/Berlin)",
        "schedule \"heartbeat-ada\": OpenClaw's own upkeep (heartbeat:ada)",
        "schedule \"skill-collection-review-ada\": OpenClaw's own upkeep",
        "schedule \"Disk check\": it runs a `command` payload directly",
        "ANTHROPIC_API_KEY",
    ] {
        assert!(dry.contains(expected), "no `{expected}` in:\n{dry}");
    }
    let stdout = run(&[]);
    assert!(
        stdout.contains("Imported 2 agents, 1 skill, 5 memories and 1 schedule"),
        "{stdout}"
    );
    let overrides = Overrides {
        config: Some(dir.path().join("clawvisor.toml")),
        ..Overrides::default()
    };
    let loaded = config::load(&overrides).expect("the imported config loads");
    let ada = loaded.agent("ada").expect("agent ada");
    assert!(ada.instructions.contains("calm, warm and precise"));
    assert_eq!(ada.skills, vec!["grocery-list".to_string()]);
    assert_eq!(
        ada.telegram.as_ref().expect("ada's bot").allow_users,
        vec![111_111_111]
    );
    let family = loaded.agent("family").expect("agent family");
    assert_eq!(family.description, "Family Helper");
    assert!(family.instructions.contains("kind to the kids"));
    assert!(
        loaded
            .config
            .data_dir
            .join("skills/grocery-list/SKILL.md")
            .is_file()
    );
    let conn = rusqlite::Connection::open(loaded.config.db_path()).unwrap();
    let jobs: Vec<(String, String)> = conn
        .prepare("SELECT agent, name FROM jobs")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(jobs, vec![("ada".to_string(), "Morning brief".to_string())]);
    let memories: i64 = conn
        .query_row(
            "SELECT count(*) FROM memory_facts WHERE source = 'imported'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(memories, 5);
    let again = run(&[]);
    assert!(again.contains("Nothing new to import"), "{again}");
}
