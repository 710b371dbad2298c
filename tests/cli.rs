//! Operator commands of the real binary: `chat` through the same actors, `doctor` checking bot
//! tokens with getMe, `config check`.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{ScratchDir, agent_toml, config_toml, telegram_toml};
use clawvisor::testkit::process::write_config;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until_blocking;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

/// Runs the binary with `args` and types `turns` into it like a person: each line is written once
/// the answer to the previous one (the text after it, if any) is on stdout.
fn run_conversation(
    dir: &std::path::Path,
    args: &[&str],
    turns: &[(&str, Option<&str>)],
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
    let mut stdout = child.stdout.take().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(read) = stdout.read(&mut chunk) {
                if read == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&chunk[..read]);
            }
        })
    };
    for (line, answer) in turns {
        writeln!(input, "{line}").unwrap();
        if let Some(answer) = answer {
            wait_until_blocking(
                Duration::from_secs(60),
                &format!("`{answer}` after `{line}`"),
                || {
                    let text = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
                    if text.contains(answer) {
                        Ok(())
                    } else {
                        Err(text)
                    }
                },
            );
        }
    }
    drop(input);
    let mut output = child.wait_with_output().unwrap();
    reader.join().unwrap();
    output.stdout = std::mem::take(&mut *seen.lock().unwrap());
    output
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
        run_conversation(
            &path,
            &["chat", "ada"],
            &[
                ("hello there", Some("echo: hello there")),
                ("/new", Some("Started a new conversation")),
                ("second question", Some("echo: second question")),
                ("/quit", None),
            ],
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
        agent_toml("helper", &telegram_toml("GOOD", &fake.base_url(), &[], &[])),
        agent_toml("broken", &telegram_toml("BAD", &fake.base_url(), &[], &[])),
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
    assert!(
        stdout.contains("voice notes") && stdout.contains("saved but not transcribed"),
        "doctor says plainly that voice notes are not transcribed: {stdout}"
    );
    assert!(
        stdout.contains("no speech provider"),
        "doctor says whether replies can be spoken: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_asks_every_provider_and_names_the_variable_of_a_refused_key() {
    let refusing = ScriptedLlm::start(Script::new()).await.unwrap();
    refusing.require_api_key("the-right-key-123");
    let working = ScriptedLlm::start(Script::new()).await.unwrap();
    let dir = ScratchDir::new("clawvisor-cli-doctor-providers").unwrap();
    let providers = format!(
        "[providers.cloud]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"CLOUD_KEY\"\n\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
         [providers.unset]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\napi_key_env = \"UNSET_KEY_FOR_DOCTOR\"\n",
        refusing.base_url(),
        working.base_url()
    );
    write_config(
        dir.path(),
        &config_toml(&working.base_url(), &providers),
        &[agent_toml("helper", "")],
    )
    .unwrap();
    let path = dir.path().to_path_buf();
    let wrong = "sk-wrong-key-for-doctor-456";
    let output = tokio::task::spawn_blocking(move || {
        Command::new(BINARY)
            .args([
                "--config",
                path.join("clawvisor.toml").to_str().unwrap(),
                "doctor",
            ])
            .env("CLOUD_KEY", wrong)
            .env_remove("UNSET_KEY_FOR_DOCTOR")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("[FAIL] provider cloud: CLOUD_KEY is set but the provider answered 401"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[ ok ] provider local: http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[FAIL] provider unset: UNSET_KEY_FOR_DOCTOR is not set"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(wrong),
        "the key is never printed: {stdout}"
    );
    assert!(!output.status.success(), "a refused key fails doctor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_each_unpriced_model_its_agent_and_the_fix() {
    let model = ScriptedLlm::start(Script::new()).await.unwrap();
    let dir = ScratchDir::new("clawvisor-cli-doctor-prices").unwrap();
    let local = format!(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nfree = true\n",
        model.base_url()
    );
    write_config(
        dir.path(),
        &config_toml(&model.base_url(), &local),
        &[
            agent_toml("helper", "model = \"mystery-model\""),
            agent_toml("priced", "model = \"gpt-4.1-mini-2025-04-14\""),
            "name = \"homebody\"\nprovider = \"local\"\nmodel = \"llama3.1:8b\"\ninstructions = \"x\"\n"
                .to_string(),
        ],
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
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains("unpriced"))
        .collect();
    assert_eq!(lines.len(), 1, "one line per unpriced model: {stdout}");
    assert!(
        lines[0].starts_with(
            "[FAIL] next step: unpriced model `mystery-model` of provider `scripted` (agent `helper`) has no price"
        ) && lines[0].contains("add [pricing.\"mystery-model\"] with input_per_mtok and output_per_mtok")
            && lines[0].contains("free = true on [providers.scripted]"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("gpt-4.1-mini") && !stdout.contains("llama3.1"),
        "a priced model and a free provider's are not reported: {stdout}"
    );
    assert!(
        output.status.success(),
        "an unpriced model is a next step, not a failure: {stdout}"
    );
}
