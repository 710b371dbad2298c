//! Runs and Chat that explain themselves, clicked through in a real headless Chromium against the
//! real daemon (scripted model, fake Bot API), as an operator would:
//!
//! - Chat draws the agent's Markdown (bold, lists, code, an https link) and shows a `<script>` in
//!   the model's output as text: no element is made of it, no `javascript:` link;
//! - an approval in Chat is an inline card (the plain sentence, the exact action, the grant in
//!   the one wording); it is still there after going to Runs and back; approving it there
//!   completes the run, and the answer's tool card opens to show its arguments and output;
//! - a run whose action was denied is marked in the Runs list and explained in its detail
//!   (effect, risk, verdict, reason, who decided);
//! - Stop ends a slow answer ("Stopped.");
//! - a Telegram conversation is opened and continued from Studio: the answer is delivered into
//!   the Telegram chat by the bot (the fake Bot API receives it) and shows in Studio;
//! - with `[policy] allow_l3_once`, a blocked `rm -rf` is a card in Chat that allows it once
//!   only after the action is typed out; it runs once and is audited;
//! - desktop and phone (390×844) screenshots of Chat, Runs, a run and Approvals, none wider than
//!   the screen. Screenshots: `<target>/tmp/studio-screenshots/runs-*.png`, `phone-runs-*.png`.

mod browser;

use std::time::Duration;

use browser::{Browser, WAIT};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use fantoccini::Locator;
use serde_json::json;

const OWNER: i64 = 42;

const MARKDOWN_ANSWER: &str = "**Bold words** and a list:\n\n- one\n- two\n\nRun `make` then read [the docs](https://example.com/docs). <script>window.__xss = 1</script> [trap](javascript:window.__xss=2)";

fn script() -> Script {
    Script::new()
        .rule(Rule::text("I did not write it.").when_last_tool_result_contains("did not approve"))
        .rule(Rule::text("Cleaned up.").when_after_tool_result("shell"))
        .rule(Rule::text("The note is **written**.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call("shell", r#"{"command": "rm -rf old"}"#)
                .when_last_user_contains("clean up"),
        )
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "note.txt", "content": "milk and eggs", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("note"),
        )
        .rule(Rule::text(MARKDOWN_ANSWER).when_last_user_contains("format"))
        .rule(
            Rule::text("This took a very long time.")
                .delay(Duration::from_secs(120))
                .when_last_user_contains("slow"),
        )
        .rule(Rule::text("Noted, operator: all is well.").when_last_user_contains("operator here"))
        .rule(Rule::text("Hello from ada."))
}

async fn count(world: &World, sql: &'static str) -> i64 {
    world
        .store()
        .read(move |conn| Ok(conn.query_row(sql, [], |row| row.get(0))?))
        .await
        .unwrap()
}

/// Types `text` into Chat's box and sends it.
async fn say(browser: &Browser, text: &str) {
    let input = browser.wait_for("#chat-input").await;
    input.send_keys(text).await.unwrap();
    browser.wait_for("#chat-send").await.click().await.unwrap();
}

async fn js(browser: &Browser, script: &str) -> serde_json::Value {
    browser.client.execute(script, vec![]).await.unwrap()
}

/// A screenshot without the passing messages in the corner (they would hide the page), with
/// `css` scrolled into view when given.
async fn shot(browser: &Browser, name: &str, css: Option<&str>) {
    js(
        browser,
        "document.getElementById('toasts')?.replaceChildren(); return 1;",
    )
    .await;
    if let Some(css) = css {
        let script = format!(
            "document.querySelector('{css}')?.scrollIntoView({{block: 'center'}}); return 1;"
        );
        js(browser, &script).await;
    }
    // Drawn after the scroll: two animation frames.
    browser
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1]; requestAnimationFrame(() => requestAnimationFrame(() => done(1)));",
            vec![],
        )
        .await
        .unwrap();
    browser.screenshot(name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_and_runs_explain_themselves_in_the_browser() {
    let world = World::builder(script())
        .agent_with_bot(
            "ada",
            "tools = [\"write_file\", \"shell\"]\nallow_shell = true\nautonomy = \"require_approval\"\napproval_ttl = \"10m\"\n",
            "774:AAH-studio-runs-browser-token1",
            &[OWNER],
            &[OWNER],
        )
        .config_extra("[policy]\nallow_l3_once = true\n")
        .start()
        .await;
    let bot = world.bot("ada");
    let browser = Browser::launch().await;
    browser.log_in(&world.harness).await;

    // Markdown is drawn; a script in the model's output is only text.
    browser.open("chat").await;
    say(&browser, "format this for me").await;
    let done = browser.wait_for(".msg.assistant[data-done=\"true\"]").await;
    assert_eq!(
        done.find(Locator::Css("strong"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "Bold words"
    );
    assert_eq!(
        js(
            &browser,
            "return document.querySelectorAll('.chat-log .msg.assistant li').length;"
        )
        .await,
        json!(2)
    );
    assert_eq!(
        js(
            &browser,
            "return document.querySelectorAll('.chat-log script').length;"
        )
        .await,
        json!(0)
    );
    assert!(
        done.text()
            .await
            .unwrap()
            .contains("<script>window.__xss = 1</script>")
    );
    assert_eq!(
        js(&browser, "return [...document.querySelectorAll('.chat-log a')].map((a) => a.getAttribute('href')).filter((h) => !h.startsWith('#'));").await,
        json!(["https://example.com/docs"]),
        "only the https link is a link"
    );
    assert_eq!(
        js(&browser, "return window.__xss === undefined;").await,
        json!(true)
    );
    shot(&browser, "runs-chat-markdown", None).await;

    // An approval is an inline card in Chat, and stays after going elsewhere and back.
    say(&browser, "write the shopping note").await;
    let card = browser.wait_for("#chat-approvals [data-approval]").await;
    let text = card.text().await.unwrap();
    for said in [
        "Approval needed: ada wants to write a file in its workspace.",
        "note.txt",
        "Allow exactly this for 30 min",
        "same arguments",
    ] {
        assert!(
            text.contains(said),
            "`{said}` missing from the card: {text}"
        );
    }
    shot(&browser, "runs-chat-approval", None).await;
    browser.open("runs").await;
    browser.open("chat").await;
    let card = browser.wait_for("#chat-approvals [data-approval]").await;
    card.find(Locator::Css("button[data-action=\"approve\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "the answer shows after the approval",
            "[...document.querySelectorAll('.chat-log .msg')].some((m) => m.textContent.includes('The note is written.'))",
        )
        .await;
    browser
        .wait_until(
            "the card is gone",
            "!document.querySelector('#chat-approvals [data-approval]')",
        )
        .await;
    // The tool card opens to show what it was asked and what it answered.
    let tool = browser
        .wait_for(".chat-log details.tool-card[data-tool=\"write_file\"]")
        .await;
    tool.find(Locator::Css("summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "the tool card shows its arguments and output",
            "(() => { const c = document.querySelector('.chat-log details.tool-card[data-tool=\"write_file\"]'); return c.open && c.querySelector('.tool-args').textContent.includes('milk and eggs') && c.querySelector('.tool-output pre').textContent.length > 0; })()",
        )
        .await;
    shot(&browser, "runs-chat-tool-card", None).await;

    // A denied action: the run is marked and explained.
    say(&browser, "write the note again").await;
    browser
        .wait_for("#chat-approvals [data-approval] button[data-action=\"deny\"]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "the answer after the denial",
            "[...document.querySelectorAll('.chat-log .msg')].some((m) => m.textContent.includes('I did not write it.'))",
        )
        .await;
    // The turn's tool card says it was not run, and who decided.
    browser
        .wait_until(
            "the denied call's card says it was not run and who decided",
            "[...document.querySelectorAll('.msg.assistant[data-done=\"true\"] details.tool-card[data-status=\"refused\"]')].some((c) => c.textContent.includes('operator (studio)') && c.textContent.includes('denied'))",
        )
        .await;
    browser.open("runs").await;
    let marked = browser.wait_for("tr[data-run][data-refused=\"1\"]").await;
    assert!(marked.text().await.unwrap().contains("1 action not run"));
    shot(&browser, "runs-list", None).await;
    marked
        .find(Locator::Css("a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.wait_for(".refused-note").await;
    let decision = browser
        .wait_for(".step[data-kind=\"decision\"][data-verdict=\"require_approval\"]")
        .await;
    let text = decision.text().await.unwrap();
    for said in [
        "ada wants to write a file in its workspace.",
        "Effect",
        "changes something",
        "Risk",
        "Verdict",
        "asked a person",
        "Reason",
        "Decided by",
        "operator (studio)",
        "denied",
    ] {
        assert!(
            text.contains(said),
            "`{said}` missing from the decision: {text}"
        );
    }
    shot(&browser, "runs-run-detail", None).await;
    shot(
        &browser,
        "runs-run-decision",
        Some(".step[data-kind=\"decision\"][data-verdict=\"require_approval\"]"),
    )
    .await;

    // Stop ends a slow answer.
    browser.open("chat").await;
    say(&browser, "something slow please").await;
    wait_until(WAIT, "the slow run to be running", || async {
        count(&world, "SELECT COUNT(*) FROM runs WHERE status = 'running'").await == 1
    })
    .await;
    browser
        .wait_for("#chat-stop:not([hidden])")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "the answer says it was stopped",
            "[...document.querySelectorAll('.msg.assistant[data-done=\"true\"]')].some((m) => m.textContent.includes('Stopped.'))",
        )
        .await;
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM runs WHERE status = 'cancelled'"
        )
        .await,
        1
    );
    shot(&browser, "runs-chat-stopped", None).await;

    // A blocked action waits for the operator, who allows it once by typing it out.
    let old = world.harness.dir.path().join("data/workspaces/ada/old");
    std::fs::create_dir_all(&old).unwrap();
    say(&browser, "please clean up").await;
    let blocked = browser
        .wait_for("#chat-approvals [data-approval] [data-confirm]")
        .await;
    browser
        .wait_until(
            "the chat was told why it waits",
            "[...document.querySelectorAll('.chat-log .notice')].some((n) => n.textContent.includes('may not delete files in its workspace on its own'))",
        )
        .await;
    shot(&browser, "runs-chat-blocked", None).await;
    blocked.send_keys("shell: rm -rf ol").await.unwrap();
    browser
        .wait_for("#chat-approvals [data-action=\"allow-once\"]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "a wrong confirmation is refused and says so",
            "[...document.querySelectorAll('.toast')].some((t) => t.textContent.includes('does not match'))",
        )
        .await;
    assert!(old.exists());
    blocked.send_keys("d").await.unwrap();
    browser
        .wait_for("#chat-approvals [data-action=\"allow-once\"]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "the allowed action ran",
            "[...document.querySelectorAll('.chat-log .msg')].some((m) => m.textContent.includes('Cleaned up.'))",
        )
        .await;
    assert!(!old.exists());
    browser
        .wait_until(
            "the allowed call's card says who allowed it",
            "[...document.querySelectorAll('.msg.assistant[data-done=\"true\"] details.tool-card[data-tool=\"shell\"]')].some((c) => c.textContent.includes('operator (studio)') && c.textContent.includes('risk L3'))",
        )
        .await;
    browser
        .wait_for(
            ".msg.assistant[data-done=\"true\"] details.tool-card[data-tool=\"shell\"] summary",
        )
        .await
        .click()
        .await
        .unwrap();
    shot(
        &browser,
        "runs-chat-allowed-once",
        Some(".msg.assistant[data-done=\"true\"] details.tool-card[data-tool=\"shell\"]"),
    )
    .await;
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'approval.allowed_blocked_once'"
        )
        .await,
        1
    );

    // A Telegram conversation is opened and continued from Studio.
    world.fake.push_message(bot, OWNER, OWNER, "hi there");
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains("Hello from ada."),
            WAIT,
        )
        .await
        .expect("the Telegram answer");
    browser.open("runs").await;
    browser.open("chat").await;
    browser
        .wait_for(&format!("#chat-conversation option[value=\"tg:{OWNER}\"]"))
        .await;
    browser
        .wait_for("#chat-conversation")
        .await
        .select_by_value(&format!("tg:{OWNER}"))
        .await
        .unwrap();
    browser
        .wait_until(
            "the Telegram conversation's transcript is shown",
            "[...document.querySelectorAll('.chat-log .msg')].some((m) => m.textContent.includes('hi there'))",
        )
        .await;
    say(&browser, "operator here: how is it going?").await;
    browser
        .wait_until(
            "the answer shows in Studio",
            "[...document.querySelectorAll('.msg.assistant[data-done=\"true\"]')].some((m) => m.textContent.includes('Noted, operator'))",
        )
        .await;
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains("Noted, operator"),
            WAIT,
        )
        .await
        .expect("the bot delivered the answer into the Telegram chat");
    shot(&browser, "runs-chat-telegram", None).await;

    // The Approvals page words the past decisions in plain words.
    browser.open("approvals").await;
    browser
        .wait_until(
            "outcomes in plain words",
            "[...document.querySelectorAll('[data-decided-approval]')].some((r) => r.textContent.includes('approved and done'))",
        )
        .await;
    shot(&browser, "runs-approvals", None).await;

    // On a phone: no page wider than the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("chat").await;
    browser.wait_for(".chat-log .msg").await;
    browser.assert_no_sideways_scroll("chat").await;
    shot(&browser, "phone-runs-chat", None).await;
    browser.open("runs").await;
    browser.wait_for("tr[data-run][data-refused=\"1\"]").await;
    browser.assert_no_sideways_scroll("runs").await;
    shot(&browser, "phone-runs-list", Some("tr[data-refused=\"1\"]")).await;
    browser
        .wait_for("tr[data-run][data-refused=\"1\"] a")
        .await
        .click()
        .await
        .unwrap();
    browser.wait_for(".refused-note").await;
    browser.assert_no_sideways_scroll("run").await;
    shot(&browser, "phone-runs-run-detail", None).await;
    shot(
        &browser,
        "phone-runs-run-decision",
        Some(".step[data-kind=\"decision\"][data-verdict=\"require_approval\"]"),
    )
    .await;
    browser.open("approvals").await;
    browser.assert_no_sideways_scroll("approvals").await;
    shot(
        &browser,
        "phone-runs-approvals",
        Some("[data-decided-approval]"),
    )
    .await;
    // A pending approval on a phone: the inline card in Chat fits.
    browser.open("chat").await;
    browser
        .wait_for("#chat-conversation")
        .await
        .select_by_value("operator")
        .await
        .unwrap();
    say(&browser, "write the note once more").await;
    browser.wait_for("#chat-approvals [data-approval]").await;
    browser.assert_no_sideways_scroll("chat with a card").await;
    shot(
        &browser,
        "phone-runs-chat-approval",
        Some("#chat-approvals [data-approval]"),
    )
    .await;
    browser
        .wait_for("#chat-approvals [data-approval] button[data-action=\"deny\"]")
        .await
        .click()
        .await
        .unwrap();
    let errors = js(
        &browser,
        "return document.querySelectorAll('.error').length;",
    )
    .await;
    assert_eq!(errors, json!(0), "a page shows an error");

    browser.close().await;
    world.harness.stop().await;
}
