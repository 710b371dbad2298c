//! The agent editor in a real Chromium, as an operator uses it: a new agent made from a preset
//! (its file written under actors/, the agent running at once), its instructions changed in the
//! editor and the next answer following them, and the agent deleted with its workspace. Desktop
//! and phone screenshots of the list, the editor and the delete dialog go to
//! `<target>/tmp/studio-screenshots/`.

mod browser;

use std::time::Duration;

use browser::Browser;
use clawvisor::domain::ChatKey;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use fantoccini::Locator;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_makes_changes_and_deletes_an_agent_without_touching_a_file() {
    let script = Script::new()
        .rule(Rule::text("Arr, the list is ready.").when_system_contains("like a pirate"))
        .rule(Rule::text("The list is ready."));
    let world = World::builder(script).agent("ada", "").start().await;
    let browser = Browser::launch().await;
    browser.log_in(&world.harness).await;

    // The list says what it is for and offers a new agent.
    browser.open("agents").await;
    let lead = browser.wait_for("[data-page=\"agents\"] .lead").await;
    assert!(lead.text().await.unwrap().contains("what each is for"));
    browser.screenshot("agents-list").await;
    browser.click("[data-action=\"new-agent\"]").await;
    browser.wait_for("[data-editor=\"new\"] form.editor").await;
    browser.type_into("input[name=\"name\"]", "helper").await;
    browser
        .type_into("input[name=\"description\"]", "Keeps the shopping list")
        .await;
    browser
        .type_into(
            "textarea[name=\"instructions\"]",
            "You keep the family's shopping list.",
        )
        .await;
    browser.click("[data-preset=\"helper\"]").await;
    browser
        .wait_until(
            "the preset ticked the helper's tools",
            "document.querySelector('input[name=\"tool\"][value=\"write_file\"]').checked && !document.querySelector('input[name=\"tool\"][value=\"shell\"]').checked",
        )
        .await;
    browser
        .type_into("input[name=\"model\"]", "scripted-model")
        .await;
    browser.screenshot("agent-new").await;
    browser.click("form.editor button[type=\"submit\"]").await;
    browser
        .wait_until(
            "the new agent's page opens",
            "location.hash === '#/agents/helper'",
        )
        .await;
    let file = world.harness.dir.path().join("actors/helper.toml");
    let text = wait_until(Duration::from_secs(10), "the agent's file", || async {
        std::fs::read_to_string(&file).map_err(|error| error.to_string())
    })
    .await;
    assert!(
        text.contains("description = \"Keeps the shopping list\""),
        "{text}"
    );
    assert!(text.contains("\"write_file\""), "{text}");
    let reply = world
        .harness
        .ask("helper", &ChatKey::cli("b1"), "the list?")
        .await
        .unwrap();
    assert_eq!(reply.text, "The list is ready.");

    // The instructions changed in the editor: the file changes, the next answer follows them.
    browser
        .client
        .goto(&format!(
            "{}#/agents/helper/edit",
            world.harness.studio_http().await.0
        ))
        .await
        .unwrap();
    browser
        .wait_for("[data-editor=\"helper\"] form.editor")
        .await;
    browser
        .type_into(
            "textarea[name=\"instructions\"]",
            "You talk like a pirate and keep the shopping list.",
        )
        .await;
    browser.click("form.editor button[type=\"submit\"]").await;
    browser.wait_for(".outcome .saved").await;
    browser.screenshot("agent-edited").await;
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("like a pirate"), "{text}");
    let reply = world
        .harness
        .ask("helper", &ChatKey::cli("b2"), "the list?")
        .await
        .unwrap();
    assert_eq!(reply.text, "Arr, the list is ready.");

    // On a phone the editor fits the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.assert_no_sideways_scroll("agent editor").await;
    browser.screenshot("phone-agent-edit").await;
    browser.client.set_window_size(1280, 900).await.unwrap();

    // Deleting asks what happens to its files; removing them removes the workspace.
    let workspace = world.harness.dir.path().join("data/workspaces/helper");
    assert!(workspace.is_dir());
    browser.click("[data-action=\"delete\"]").await;
    browser.wait_for("[data-confirm=\"delete\"]").await;
    browser
        .client
        .find(Locator::Css(
            "[data-confirm=\"delete\"] input[value=\"remove\"]",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.screenshot("agent-delete").await;
    browser.click("[data-action=\"confirm-delete\"]").await;
    browser
        .wait_until("back on the list", "location.hash === '#/agents'")
        .await;
    assert!(!file.exists());
    assert!(!workspace.exists());
    browser.open("agents").await;
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.assert_no_sideways_scroll("agents").await;
    browser.screenshot("phone-agents-list").await;
    browser.close().await;
    world.harness.stop().await;
}
