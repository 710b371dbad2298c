//! `clawvisor triggers list | test <name>`: the webhook triggers of `[[triggers]]` from the
//! terminal (issue #32).
//!
//! `list` prints each trigger (its address, agent, where answers go, whether its secret is set)
//! with its last deliveries: through the running daemon's API, else from the config and the
//! database. `test` sends a test event through the running daemon (`POST
//! /api/v1/triggers/{name}/test`: stored, audited and run once like a webhook delivery); with
//! the daemon stopped it says so, since only the daemon runs a delivery.

use std::process::ExitCode;

use serde_json::{Value, json};

use super::daemon_link::{self, Daemon};
use super::{TriggersCommand, open_existing};
use crate::config::LoadedConfig;
use crate::triggers::TriggerBook;

/// Deliveries printed per trigger by `list` with the daemon stopped.
const RECENT: u32 = 5;

pub(super) async fn run(loaded: &LoadedConfig, command: TriggersCommand) -> ExitCode {
    let daemon = match daemon_link::find(loaded).await {
        Ok(daemon) => daemon,
        Err(error) => return fail(&error.to_string()),
    };
    let result = match (daemon, command) {
        (Daemon::Running(api), TriggersCommand::List) => api
            .get("/api/v1/triggers")
            .await
            .map(|answer| print_list(&answer))
            .map_err(|error| error.to_string()),
        (Daemon::Stopped, TriggersCommand::List) => offline_list(loaded).await,
        (Daemon::Running(api), TriggersCommand::Test { name, body }) => {
            let path = format!("/api/v1/triggers/{}/test", daemon_link::segment(&name));
            let request = match body {
                Some(body) => json!({ "body": body }),
                None => json!({}),
            };
            api.post(&path, request)
                .await
                .map(|answer| {
                    println!(
                        "Test event sent to {name}: delivery {}. Its outcome is in `clawvisor triggers list` and Studio's Triggers page.",
                        answer["delivery"]
                    );
                })
                .map_err(|error| error.to_string())
        }
        (Daemon::Stopped, TriggersCommand::Test { .. }) => Err(
            "The daemon is not running, and only the daemon runs a trigger's delivery: start it (clawvisor serve), then send the test event again."
                .to_string(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::FAILURE
}

/// `list` from the config and the database (the daemon is stopped).
async fn offline_list(loaded: &LoadedConfig) -> Result<(), String> {
    let book = TriggerBook::new(loaded);
    let names: Vec<String> = book
        .entries()
        .map(|entry| entry.config.name.clone())
        .collect();
    let recent = if names.is_empty() || !loaded.config.db_path().exists() {
        vec![Vec::new(); names.len()]
    } else {
        let store = open_existing(loaded)
            .await
            .map_err(|_| "the database could not be opened".to_string())?;
        let read = store
            .read(move |conn| {
                names
                    .iter()
                    .map(|name| crate::store::triggers::latest(conn, name, RECENT))
                    .collect::<crate::store::Result<Vec<_>>>()
            })
            .await;
        store.stop_writer();
        read.map_err(|error| error.to_string())?
    };
    let triggers: Vec<Value> = book
        .entries()
        .zip(recent)
        .map(|(entry, deliveries)| {
            let config = &entry.config;
            json!({
                "name": config.name, "agent": config.agent,
                "address": format!("/hooks/trigger/{}", config.name),
                "deliver_to": config.deliver_to, "secret_var": config.secret_var(),
                "secret_set": entry.secret.is_some(), "deliveries": deliveries,
            })
        })
        .collect();
    print_list(&json!({ "triggers": triggers }));
    Ok(())
}

/// Prints the answer of `GET /api/v1/triggers`.
fn print_list(answer: &Value) {
    let triggers = answer["triggers"].as_array().cloned().unwrap_or_default();
    if triggers.is_empty() {
        println!("No triggers: add a [[triggers]] entry to the config (see the README's recipes).");
        return;
    }
    for trigger in triggers {
        let text = |key: &str| trigger[key].as_str().unwrap_or_default().to_string();
        let secret = if trigger["secret_set"].as_bool().unwrap_or(false) {
            "secret set".to_string()
        } else {
            format!(
                "NO SECRET: set {} (it accepts nothing until then)",
                text("secret_var")
            )
        };
        println!(
            "{}  POST {}  agent {}  answers to {}  ({secret})",
            text("name"),
            text("address"),
            text("agent"),
            text("deliver_to")
        );
        let deliveries = trigger["deliveries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if deliveries.is_empty() {
            println!("    nothing received yet");
        }
        for delivery in deliveries {
            let at = delivery["received_ms"]
                .as_i64()
                .map(|ms| {
                    crate::clock::to_datetime(ms)
                        .format("%Y-%m-%d %H:%M:%S UTC")
                        .to_string()
                })
                .unwrap_or_default();
            let outcome = delivery["answer"]
                .as_str()
                .or_else(|| delivery["detail"].as_str())
                .unwrap_or_default();
            let outcome: String = outcome.chars().take(100).collect();
            println!(
                "    #{} {at} {} {}: {outcome}",
                delivery["id"],
                delivery["origin"].as_str().unwrap_or_default(),
                delivery["status"].as_str().unwrap_or_default()
            );
        }
    }
}
