//! The routes Studio's setup is made of, against the real daemon: `/api/v1/setup` says what is
//! done and follows the provider's key as it is stored; a provider is checked before it is saved
//! (a wrong key is told, the right one lists the models) and written into the config file with
//! the variable's name only; a bot token is checked with (the fake) Telegram before it is kept,
//! and its bot's @name is known once it is online; the tool presets name real tools; a claim
//! link becomes a QR code. No answer ever holds a key or a token.

use std::time::Duration;

use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use serde_json::{Value, json};

const KEY: &str = "sk-wizard-right-key-0123456789";
const TOKEN: &str = "555001:AAE-wizard-token-abcdefghijklmnop";

async fn call(harness: &Harness, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (base, http) = harness.studio_http().await;
    let request = http.request(method.parse().unwrap(), format!("{base}{path}"));
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert!(
        !text.contains(KEY) && !text.contains(TOKEN),
        "{method} {path} answered a secret"
    );
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn start(llm: &ScriptedLlm) -> Harness {
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", "")];
    Harness::start(options).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_follows_the_providers_key_from_check_to_store() {
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("Hi.")))
        .await
        .unwrap();
    let harness = start(&llm).await;

    // A keyless provider and an agent: nothing is needed.
    let (status, setup) = call(&harness, "GET", "/api/v1/setup", None).await;
    assert_eq!(status, 200, "{setup}");
    assert_eq!(setup["needed"], json!(false), "{setup}");
    assert_eq!(setup["agent"]["name"], json!("ada"));
    assert_eq!(setup["agent"]["bot"], Value::Null);
    let provider = setup["provider"]["name"].as_str().unwrap().to_string();
    assert_eq!(setup["provider"]["key_set"], json!(true));

    // The check: no key and a wrong key are told apart from the right one, which lists models.
    llm.require_api_key(KEY);
    for key in ["", "sk-wrong"] {
        let (status, checked) = call(
            &harness,
            "POST",
            "/api/v1/providers/check",
            Some(json!({"kind": "openai", "base_url": llm.base_url(), "key": key})),
        )
        .await;
        assert_eq!(status, 200, "{checked}");
        assert_eq!(checked["ok"], json!(false), "{checked}");
        assert!(
            checked["detail"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains("key"),
            "the refusal says it is the key: {checked}"
        );
    }
    let (_, checked) = call(
        &harness,
        "POST",
        "/api/v1/providers/check",
        Some(json!({"kind": "openai", "base_url": llm.base_url(), "key": KEY})),
    )
    .await;
    assert_eq!(checked["ok"], json!(true), "{checked}");
    assert_eq!(checked["models"], json!(["scripted"]));
    let (status, refused) = call(
        &harness,
        "POST",
        "/api/v1/providers/check",
        Some(json!({"kind": "cohere", "key": KEY})),
    )
    .await;
    assert_eq!(status, 400);
    assert!(refused.to_string().contains("`kind`"), "{refused}");

    // The provider now names a variable nobody set: the house cannot answer, the setup says so.
    let (status, saved) = call(
        &harness,
        "PUT",
        &format!("/api/v1/providers/{provider}"),
        Some(json!({"kind": "openai", "base_url": llm.base_url(), "api_key_env": "WIZARD_KEY"})),
    )
    .await;
    assert_eq!(status, 200, "{saved}");
    let config = std::fs::read_to_string(saved["file"].as_str().unwrap()).unwrap();
    assert!(config.contains("api_key_env = \"WIZARD_KEY\""), "{config}");
    let (_, setup) = call(&harness, "GET", "/api/v1/setup", None).await;
    assert_eq!(setup["needed"], json!(true), "{setup}");
    assert_eq!(setup["provider"]["key_set"], json!(false));
    let (_, overview) = call(&harness, "GET", "/api/v1/overview", None).await;
    assert!(
        overview["needs_you"]
            .as_array()
            .unwrap()
            .iter()
            .any(|item| item["kind"] == "setup" && item["href"] == "#/setup"),
        "{}",
        overview["needs_you"]
    );

    // The key kept in the store: the provider takes it at once, and the agent answers with it.
    let (status, kept) = call(
        &harness,
        "PUT",
        "/api/v1/secrets/WIZARD_KEY",
        Some(json!({"value": KEY})),
    )
    .await;
    assert_eq!(status, 200, "{kept}");
    let (_, setup) = call(&harness, "GET", "/api/v1/setup", None).await;
    assert_eq!(setup["needed"], json!(false), "{setup}");
    assert_eq!(setup["provider"]["key_set"], json!(true));
    let (_, models) = call(
        &harness,
        "GET",
        &format!("/api/v1/providers/{provider}/models"),
        None,
    )
    .await;
    assert_eq!(models["ok"], json!(true), "{models}");
    assert!(
        !std::fs::read_to_string(saved["file"].as_str().unwrap())
            .unwrap()
            .contains(KEY)
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_token_is_checked_kept_and_its_bot_named_once_online() {
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("Hi.")))
        .await
        .unwrap();
    let harness = start(&llm).await;
    let telegram = FakeTelegram::start().await;
    telegram.add_bot(TOKEN, "wizard_bot");

    let (status, refused) = call(
        &harness,
        "POST",
        "/api/v1/telegram/check",
        Some(json!({"token": "not a token", "api_url": telegram.base_url()})),
    )
    .await;
    assert_eq!(status, 400);
    assert!(refused.to_string().contains("BotFather"), "{refused}");
    let (_, unknown) = call(
        &harness,
        "POST",
        "/api/v1/telegram/check",
        Some(json!({"token": "555002:AAE-nobody-has-this-token-xyzxyzxyz", "api_url": telegram.base_url()})),
    )
    .await;
    assert_eq!(unknown["ok"], json!(false), "{unknown}");
    assert!(
        unknown["detail"]
            .as_str()
            .unwrap()
            .starts_with("Telegram did not accept the token")
    );
    let (_, known) = call(
        &harness,
        "POST",
        "/api/v1/telegram/check",
        Some(json!({"token": TOKEN, "api_url": telegram.base_url()})),
    )
    .await;
    assert_eq!(known, json!({"ok": true, "username": "wizard_bot"}));

    // Kept, then the agent's file points at it: the bot comes online and is waiting for its owner.
    let (status, _) = call(
        &harness,
        "PUT",
        "/api/v1/secrets/ADA_TELEGRAM_TOKEN",
        Some(json!({"value": TOKEN})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, patched) = call(
        &harness,
        "PATCH",
        "/api/v1/agents/ada",
        Some(json!({"telegram": {"token_env": "ADA_TELEGRAM_TOKEN", "api_url": telegram.base_url()}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    wait_until(
        Duration::from_secs(20),
        "the setup names the bot",
        || async {
            let (_, setup) = call(&harness, "GET", "/api/v1/setup", None).await;
            setup["agent"]["bot"]["username"] == json!("wizard_bot")
                && setup["agent"]["bot"]["token_set"] == json!(true)
        },
    )
    .await;
    wait_until(
        Duration::from_secs(20),
        "a claim code for the bot",
        || async {
            let (_, people) = call(&harness, "GET", "/api/v1/people", None).await;
            people["agents"][0]["claim"]["state"] == json!("unclaimed")
        },
    )
    .await;
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presets_name_real_tools_and_a_link_becomes_a_qr_code() {
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    let harness = start(&llm).await;
    let (_, catalogue) = call(&harness, "GET", "/api/v1/tools", None).await;
    let names: Vec<&str> = catalogue["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    let presets = catalogue["presets"].as_array().unwrap();
    let ids: Vec<&str> = presets.iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["chat", "helper", "researcher", "hands-on"]);
    for preset in presets {
        for tool in preset["tools"].as_array().unwrap() {
            assert!(
                names.contains(&tool.as_str().unwrap()),
                "{tool} in {preset}"
            );
        }
    }

    let (base, http) = harness.studio_http().await;
    let link = "https://t.me/wizard_bot?start=ABCDEFGH";
    let response = http
        .get(format!(
            "{base}/api/v1/qr.svg?text={}",
            url::form_urlencoded::byte_serialize(link.as_bytes()).collect::<String>()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "image/svg+xml");
    let svg = response.text().await.unwrap();
    assert!(svg.contains("<svg") && svg.contains("<path"), "{svg}");
    assert!(!svg.contains("<script"));
    let (status, empty) = call(&harness, "GET", "/api/v1/qr.svg?text=", None).await;
    assert_eq!(status, 400);
    assert!(empty.to_string().contains("`text`"), "{empty}");
    harness.stop().await;
}
