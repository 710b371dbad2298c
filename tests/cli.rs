//! Operator commands of the real binary: `chat` through the same actors, `doctor` checking bot
//! tokens with getMe, `config check`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::write_config;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

fn run_with_stdin(
    dir: &std::path::Path,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut command = Command::new(BINARY);
    command
        .args(["--config", dir.join("clawvisor.toml").to_str().unwrap()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_string();
    // Lines are fed slowly, like a person typing, so each answer comes before the next line.
    std::thread::spawn(move || {
        for line in stdin.lines() {
            std::thread::sleep(Duration::from_millis(1_500));
            let _ = writeln!(input, "{line}");
        }
    });
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_talks_to_an_agent_in_the_terminal_with_streaming_and_commands() {
    let llm =
        ScriptedLlm::start(Script::new().rule(Rule::echo().chunk_delay(Duration::from_millis(20))))
            .await
            .unwrap();
    let dir = ScratchDir::new("clawvisor-cli-chat").unwrap();
    write_config(
        dir.path(),
        &config_toml(&llm.base_url(), ""),
        &[agent_toml("ada", "")],
    )
    .unwrap();
    let path = dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        run_with_stdin(
            &path,
            &["chat", "ada"],
            "hello there\n/new\nsecond question\n/quit\n",
            &[],
        )
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("Chatting with ada"), "{stdout}");
    assert!(stdout.contains("echo: hello there"), "{stdout}");
    assert!(stdout.contains("Started a new conversation"), "{stdout}");
    assert!(stdout.contains("echo: second question"), "{stdout}");
    // The conversation is in the same tables as every channel's.
    let conn = rusqlite::Connection::open(dir.path().join("data/clawvisor.db")).unwrap();
    let sessions: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sessions WHERE chat LIKE 'cli:%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        sessions, 2,
        "/new archived the first session and opened a second"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_each_bot_token_and_names_the_agent_it_serves() {
    let fake = FakeTelegram::start().await;
    let good = "611:AAH-doctor-good-token-123456";
    let bad = "612:AAH-doctor-bad-token-654321";
    fake.add_bot(good, "helpful_bot");
    let revoked = fake.add_bot(bad, "broken_bot");
    fake.revoke_token(revoked);
    let dir = ScratchDir::new("clawvisor-cli-doctor").unwrap();
    let agents = [
        agent_toml(
            "helper",
            &format!(
                "[telegram]\ntoken_env = \"GOOD\"\napi_url = \"{}\"\n",
                fake.base_url()
            ),
        ),
        agent_toml(
            "broken",
            &format!(
                "[telegram]\ntoken_env = \"BAD\"\napi_url = \"{}\"\n",
                fake.base_url()
            ),
        ),
    ];
    write_config(
        dir.path(),
        &config_toml("http://127.0.0.1:9/v1", ""),
        &agents,
    )
    .unwrap();
    let path = dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(BINARY)
            .args([
                "--config",
                path.join("clawvisor.toml").to_str().unwrap(),
                "doctor",
            ])
            .env("GOOD", good)
            .env("BAD", bad)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("@helpful_bot serves agent `helper`"),
        "{stdout}"
    );
    assert!(
        stdout.contains("telegram (broken)") && stdout.contains("401"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(bad) && !stdout.contains(good),
        "tokens never printed: {stdout}"
    );
    assert!(!output.status.success(), "a failing check fails doctor");
    assert!(
        stdout.contains("full-text search only"),
        "doctor says plainly that memory has no embeddings: {stdout}"
    );
}
