//! A household set up from nothing, in a real Chromium, with only the binary: `clawvisor init` in an
//! empty directory, `clawvisor serve`, the login link from `clawvisor studio-link`, then Studio's
//! setup (the model provider checked against the scripted model server with its key, the agent,
//! the bot checked against the fake Bot API and claimed by a Telegram user with the link's code),
//! a conversation on Telegram, an approval decided inline in Studio's Chat, a schedule made with
//! the owner's Telegram chat as its target that delivers there when run, and the agent's
//! instructions changed in the editor with the next answer following them. No file is edited by
//! hand: the key and the token end up in the daemon's store (mode 0600), never in its log.
//! Screenshots of every page at desktop and phone size go to
//! `<target>/tmp/studio-screenshots/` (`setup-*` and `phone-setup-*`).
//!
//! Moving in from OpenClaw: with an OpenClaw installation in `~/.openclaw`, the Overview shows a
//! card with the exact commands (dry run first); the dry run works from the card's text while the
//! daemon runs, the import refuses until it is stopped, and after the import the card is gone
//! (`import-hint*` screenshots).

mod browser;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use browser::{Browser, WAIT};
use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const API_KEY: &str = "sk-household-e2e-0123456789abcdef";
const BOT_TOKEN: &str = "777001:AAE-household-e2e-token-abcdefghijkl";
const BOT_NAME: &str = "house_helper_bot";
/// The Telegram user who claims the bot.
const OWNER: i64 = 4242;
/// Every page in Studio's bar, for the screenshots.
const PAGES: [&str; 15] = [
    "overview",
    "agents",
    "chat",
    "runs",
    "approvals",
    "people",
    "schedules",
    "memory",
    "mcp",
    "handoffs",
    "audit",
    "costs",
    "skills",
    "logs",
    "secrets",
];

fn script() -> Script {
    Script::new()
        .rule(Rule::text("The note is written.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "note.txt", "content": "buy milk", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("note"),
        )
        .rule(Rule::text("Time to water the plants.").when_last_user_contains("water the plants"))
        .rule(Rule::text("Arr, ahoy from the house!").when_system_contains("like a pirate"))
        .rule(Rule::text("Hello from the house."))
}

/// `clawvisor <args>` in `dir`, with `dir` as `HOME` and nothing else in the environment.
fn clawvisor(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("TZ", "UTC")
        .env("RUST_LOG", "info");
    command
}

/// A screenshot without the passing messages in the corner.
async fn shot(browser: &Browser, name: &str) {
    browser
        .js("document.getElementById('toasts')?.replaceChildren(); return 1;")
        .await;
    browser.screenshot(name).await;
}

async fn goto_hash(browser: &Browser, hash: &str, page: &str) {
    browser
        .js(&format!("location.hash = {hash:?}; return 1;"))
        .await;
    browser
        .wait_for(&format!("[data-page=\"{page}\"][data-loaded=\"true\"]"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_household_is_set_up_from_an_empty_directory_without_editing_a_file() {
    let temp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(temp.path()).unwrap();
    let init = clawvisor(&dir, &["init"]).output().unwrap();
    assert!(init.status.success(), "{init:?}");
    let model = ScriptedLlm::start(script()).await.unwrap();
    model.require_api_key(API_KEY);
    let telegram = FakeTelegram::start().await;
    let bot = telegram.add_bot(BOT_TOKEN, BOT_NAME);
    telegram.set_user(OWNER, "Olivia", Some("olivia"));

    let command = clawvisor(
        &dir,
        &[
            "--studio-bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "serve",
        ],
    );
    let mut daemon = DaemonProcess::spawn(command).expect("the daemon starts");
    daemon
        .wait_for_line("clawvisor is up", Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the daemon did not come up:\n{}", daemon.log.join("\n")));
    let studio = daemon.studio.clone().expect("Studio's address in the log");
    let link = clawvisor(&dir, &["studio-link"]).output().unwrap();
    assert!(link.status.success(), "{link:?}");
    let link = String::from_utf8_lossy(&link.stdout).trim().to_string();
    let path = &link[link.find("/login").expect("a login link")..];

    // The login link opens Studio on the setup: the house cannot answer yet.
    let browser = Browser::launch().await;
    browser
        .client
        .goto(&format!("http://{studio}{path}"))
        .await
        .unwrap();
    browser
        .wait_for("[data-page=\"setup\"][data-loaded=\"true\"]")
        .await;
    assert_eq!(
        browser
            .js("return document.querySelector('#step-provider').dataset.done;")
            .await,
        json!("false")
    );
    shot(&browser, "setup-start").await;

    // 1. The model: a wrong key is refused by the check, the right one lists the models.
    browser
        .type_into("#step-provider input[name=\"base_url\"]", &model.base_url())
        .await;
    browser
        .type_into("#step-provider input[name=\"key\"]", "sk-wrong")
        .await;
    browser.click("[data-action=\"check-provider\"]").await;
    browser
        .wait_for("#step-provider [data-check=\"failed\"]")
        .await;
    assert_eq!(
        browser
            .js("return document.querySelector('[data-action=\"save-provider\"]').disabled;")
            .await,
        json!(true),
        "a provider that failed its check cannot be saved"
    );
    browser
        .type_into("#step-provider input[name=\"key\"]", API_KEY)
        .await;
    browser.click("[data-action=\"check-provider\"]").await;
    browser.wait_for("#step-provider [data-check=\"ok\"]").await;
    browser
        .wait_for("#step-provider select[name=\"model\"] option[value=\"scripted\"]")
        .await;
    shot(&browser, "setup-provider-checked").await;
    browser.click("[data-action=\"save-provider\"]").await;
    browser.wait_for("#step-provider[data-done=\"true\"]").await;

    // 2. The agent: the starter agent, with a preset of tools.
    browser
        .click("#step-agent [data-preset=\"hands-on\"] input")
        .await;
    // Each preset says what each of its tools does and how careful the daemon is with it.
    browser
        .click("#step-agent .preset:last-child details summary")
        .await;
    let careful = browser
        .wait_for("#step-agent .preset:last-child details[open] li .chip.warn")
        .await;
    assert!(!careful.text().await.unwrap().is_empty());
    shot(&browser, "setup-agent").await;
    browser.click("[data-action=\"save-agent\"]").await;
    wait_until(WAIT, "the agent's file has the preset's tools", || async {
        std::fs::read_to_string(dir.join("actors/assistant.toml"))
            .is_ok_and(|text| text.contains("model = \"scripted\"") && text.contains("shell"))
    })
    .await;
    browser.wait_for("#step-agent[data-done=\"true\"]").await;

    // 3. The bot: checked with (the fake) Telegram, kept, then claimed with the link's code.
    browser
        .type_into("#step-bot input[name=\"token\"]", BOT_TOKEN)
        .await;
    browser.click("#step-bot details summary").await;
    browser
        .type_into("#step-bot input[name=\"api_url\"]", &telegram.base_url())
        .await;
    browser.click("[data-action=\"connect-bot\"]").await;
    let claim_link = browser.wait_for("[data-claim-link]").await;
    let href = claim_link.attr("href").await.unwrap().unwrap();
    let prefix = format!("https://t.me/{BOT_NAME}?start=");
    let code = href
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("the claim link opens the bot: {href}"))
        .to_string();
    browser
        .wait_until(
            "the QR code is drawn",
            "document.querySelector('img.qr')?.complete && document.querySelector('img.qr').naturalWidth > 0",
        )
        .await;
    shot(&browser, "setup-claim").await;
    telegram.push_message(bot, OWNER, OWNER, &format!("/start {code}"));
    browser.wait_for("[data-claim=\"claimed\"]").await;
    browser.wait_for("#setup-done").await;
    shot(&browser, "setup-done").await;

    // A conversation on Telegram.
    telegram.push_message(bot, OWNER, OWNER, "hello there");
    telegram
        .wait_for_sent(
            bot,
            |sent| sent.chat_id == OWNER && sent.visible_text.contains("Hello from the house."),
            WAIT,
        )
        .await
        .expect("the agent answers on Telegram");

    // An approval decided inline in Studio's Chat.
    browser.open("chat").await;
    browser.type_into("#chat-input", "write a note").await;
    browser.click("#chat-send").await;
    let card = browser.wait_for("#chat-approvals [data-approval]").await;
    assert!(card.text().await.unwrap().contains("note.txt"));
    shot(&browser, "setup-chat-approval").await;
    browser
        .click("#chat-approvals [data-approval] button[data-action=\"approve\"]")
        .await;
    browser
        .wait_until(
            "the answer after the approval",
            "[...document.querySelectorAll('.chat-log .msg')].some((m) => m.textContent.includes('The note is written.'))",
        )
        .await;
    let written = dir.join("data/workspaces/assistant/note.txt");
    wait_until(WAIT, "the note in the agent's workspace", || async {
        std::fs::read_to_string(&written).is_ok_and(|text| text == "buy milk")
    })
    .await;

    // A schedule whose answer goes to the owner's Telegram chat, run now.
    browser.open("schedules").await;
    browser
        .wait_for(&format!("#sched-target option[value=\"tg:{OWNER}\"]"))
        .await;
    for (css, text) in [
        ("#sched-name", "plants"),
        ("#sched-prompt", "Remind me to water the plants"),
        ("#sched-expression", "0 9 * * *"),
    ] {
        browser.type_into(css, text).await;
    }
    browser.js(&format!("const s = document.querySelector('#sched-target'); s.value = 'tg:{OWNER}'; s.dispatchEvent(new Event('change')); return 1;"),
    )
    .await;
    browser.click("#sched-create").await;
    browser.wait_for("[data-job][data-status=\"active\"]").await;
    browser
        .click("[data-job] button[data-action=\"run\"]")
        .await;
    telegram
        .wait_for_sent(
            bot,
            |sent| sent.chat_id == OWNER && sent.visible_text.contains("Time to water the plants."),
            WAIT,
        )
        .await
        .expect("the job's answer reaches the owner's chat");

    // The instructions changed in the editor; the next answer follows them.
    goto_hash(&browser, "#/agents/assistant/edit", "agents").await;
    browser
        .type_into(
            "textarea[name=\"instructions\"]",
            "Talk like a pirate, always.",
        )
        .await;
    browser.click("form.editor button[type=\"submit\"]").await;
    browser.wait_for(".outcome .saved").await;
    telegram.push_message(bot, OWNER, OWNER, "hello again");
    telegram
        .wait_for_sent(
            bot,
            |sent| sent.chat_id == OWNER && sent.visible_text.contains("Arr, ahoy"),
            WAIT,
        )
        .await
        .expect("the next answer follows the new instructions");

    // Studio opened again and again in the same tab: each page left gives its live stream back
    // (a browser holds six connections per server; the seventh load would wait otherwise).
    for load in 0..8 {
        // A new query string: a whole new document, not a jump within the page.
        browser
            .client
            .goto(&format!("http://{studio}/?load={load}#/overview"))
            .await
            .unwrap();
        browser
            .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
            .await;
    }

    // Every page, at desktop and phone size.
    for (prefix, width, height) in [("setup", 1280, 900), ("phone-setup", 390, 844)] {
        browser.client.set_window_size(width, height).await.unwrap();
        goto_hash(&browser, "#/setup", "setup").await;
        shot(&browser, &format!("{prefix}-page-setup")).await;
        if width < 500 {
            browser.assert_no_sideways_scroll("setup").await;
        }
        for page in PAGES {
            browser.open(page).await;
            shot(&browser, &format!("{prefix}-page-{page}")).await;
            if width < 500 {
                browser.assert_no_sideways_scroll(page).await;
            }
        }
    }

    // The key and the token are in the daemon's store (its alone), never in its log or the files.
    let store = dir.join("data/secrets.toml");
    let kept = std::fs::read_to_string(&store).unwrap();
    assert!(kept.contains(API_KEY) && kept.contains(BOT_TOKEN));
    assert_eq!(
        std::fs::metadata(&store).unwrap().permissions().mode() & 0o777,
        0o600
    );
    for file in ["clawvisor.toml", "actors/assistant.toml"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(
            !text.contains(API_KEY) && !text.contains(BOT_TOKEN),
            "{file}"
        );
    }
    browser.close().await;
    let (_, log) = daemon.terminate(Duration::from_secs(30)).unwrap();
    let log = log.join("\n");
    assert!(
        !log.contains(API_KEY) && !log.contains("AAE-household"),
        "a secret reached the log"
    );
}

/// A small OpenClaw 2026.9 installation in `<home>/.openclaw`: one agent on an LM Studio-style
/// provider (the scripted model on loopback), a persona and two memories.
fn write_openclaw(home: &Path, model_url: &str) {
    let state = home.join(".openclaw");
    std::fs::create_dir_all(state.join("workspace/memory")).unwrap();
    let config = json!({
        "meta": {"lastTouchedVersion": "2026.9.6"},
        "models": {"providers": {"lmstudio": {
            "baseUrl": model_url, "api": "openai-completions", "apiKey": "${LMSTUDIO_API_KEY}",
            "models": [{"id": "scripted", "name": "Scripted"}],
        }}},
        "agents": {"entries": {"helper": {
            "name": "Helper", "workspace": "~/.openclaw/workspace", "model": "lmstudio/scripted",
        }}},
    });
    std::fs::write(state.join("openclaw.json"), config.to_string()).unwrap();
    std::fs::write(
        state.join("workspace/SOUL.md"),
        "# SOUL.md\n\nYou are calm and brief.\n",
    )
    .unwrap();
    std::fs::write(
        state.join("workspace/MEMORY.md"),
        "# MEMORY.md\n\n- The spare key is with the neighbour.\n",
    )
    .unwrap();
    std::fs::write(
        state.join("workspace/memory/2026-09-14.md"),
        "# 2026-09-14\n\n- The car's inspection is due in October.\n",
    )
    .unwrap();
}

/// `serve` in `dir` (Studio on a free loopback port), logged in through `studio-link` in a new
/// browser window size of the caller's choice.
async fn serve_and_log_in(dir: &Path, browser: &Browser) -> DaemonProcess {
    let command = clawvisor(
        dir,
        &[
            "--studio-bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "serve",
        ],
    );
    let daemon = tokio::task::spawn_blocking(move || DaemonProcess::spawn(command))
        .await
        .unwrap()
        .expect("the daemon starts");
    let studio = daemon.studio.clone().expect("Studio's address in the log");
    let link = clawvisor(dir, &["studio-link"]).output().unwrap();
    assert!(link.status.success(), "{link:?}");
    let link = String::from_utf8_lossy(&link.stdout).trim().to_string();
    let path = &link[link.find("/login").expect("a login link")..];
    browser
        .client
        .goto(&format!("http://{studio}{path}"))
        .await
        .unwrap();
    browser.wait_for("[data-page][data-loaded=\"true\"]").await;
    goto_hash(browser, "#/overview", "overview").await;
    browser
        .wait_for("#import-hint[data-checked=\"true\"]")
        .await;
    daemon
}

/// Runs a command as the card shows it (`clawvisor ...`, paths without spaces) with this binary.
fn run_card_command(dir: &Path, text: &str) -> std::process::Output {
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words[0], "clawvisor", "{text}");
    clawvisor(dir, &words[1..]).output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openclaw_installation_is_offered_on_the_overview_until_it_is_imported() {
    let temp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(temp.path()).unwrap();
    let model = ScriptedLlm::start(script()).await.unwrap();
    clawvisor::testkit::process::write_config(
        &dir,
        &clawvisor::testkit::harness::config_toml(&model.base_url(), ""),
        &[clawvisor::testkit::harness::agent_toml("ada", "")],
    )
    .unwrap();
    write_openclaw(&dir, &model.base_url());

    // The Overview offers the import, with the exact commands, dry run first.
    let browser = Browser::launch().await;
    browser.client.set_window_size(1280, 900).await.unwrap();
    let daemon = serve_and_log_in(&dir, &browser).await;
    let card = browser.wait_for("[data-import-hint=\"openclaw\"]").await;
    let text = card.text().await.unwrap();
    assert!(
        text.contains("Your OpenClaw setup can be moved here."),
        "{text}"
    );
    let config = dir.join("clawvisor.toml");
    let state = dir.join(".openclaw");
    let dry_run = browser
        .js("return document.querySelector('[data-command=\"dry-run\"]').textContent;")
        .await;
    let dry_run = dry_run.as_str().unwrap().to_string();
    assert_eq!(
        dry_run,
        format!(
            "clawvisor --config {} import openclaw {} --dry-run",
            config.display(),
            state.display()
        )
    );
    shot(&browser, "import-hint").await;
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.assert_no_sideways_scroll("overview").await;
    shot(&browser, "phone-import-hint").await;

    // The dry run, copied from the card, works while the daemon runs and writes nothing.
    let before = std::fs::read_to_string(&config).unwrap();
    let output = run_card_command(&dir, &dry_run);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains("+ agent helper (Helper)") && stdout.contains("+ 2 memories for helper"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
    // The import itself waits for the daemon to stop, as the card says.
    let import = browser
        .js("return document.querySelector('[data-command=\"import\"]').textContent;")
        .await;
    let import = import.as_str().unwrap().to_string();
    let refused = run_card_command(&dir, &import);
    assert!(!refused.status.success(), "{refused:?}");
    daemon.terminate(Duration::from_secs(30)).unwrap();
    let imported = run_card_command(&dir, &import);
    assert!(imported.status.success(), "{imported:?}");

    // Started again, the Overview no longer offers it.
    let daemon = serve_and_log_in(&dir, &browser).await;
    let cards = browser
        .js("return document.querySelectorAll('[data-import-hint]').length;")
        .await;
    assert_eq!(cards, json!(0), "the card is still there after the import");
    shot(&browser, "phone-import-hint-gone").await;
    browser.close().await;
    daemon.terminate(Duration::from_secs(30)).unwrap();
}
