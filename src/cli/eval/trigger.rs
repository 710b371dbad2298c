//! Turns that are webhook deliveries. A turn `trigger = { name, body, delivery_id }` POSTs the
//! body to `/hooks/trigger/<name>` on Studio's port, signed as a sender would (`X-Signature-256`,
//! HMAC-SHA256 of the body under the trigger's secret; the runner sets every trigger's secret
//! variable to [`SECRET`]), with `X-Delivery-Id` when the turn gives one. The turn's `chat` is
//! where the answer is expected (the owner's Telegram chat, `tg:1001`): what the turn heard is
//! what the bot sent there until the delivery ended and nothing else was under way. The hook's
//! one-line answer is a notice of the turn (`accepted: delivery 1`, `already received: …`), so a
//! redelivery is judged with `notices_contain` and `trigger_deliveries`.

use std::time::Duration;

use serde::Deserialize;

use crate::config::TriggerConfig;
use crate::store::Store;
use crate::testkit::harness::OPEN_WORK_SQL;
use crate::testkit::wait::poll_until;

use super::judge::Heard;
use super::telegram::TelegramSide;

/// The secret every trigger of an eval has.
pub(super) const SECRET: &str = "eval-trigger-secret-0123456789";

/// A turn's webhook delivery.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerTurn {
    /// The trigger (`[[triggers]] name` in the scenario's `config`).
    pub name: String,
    /// The request's body, as the other system sends it.
    pub body: String,
    /// `X-Delivery-Id`; without it the body's hash is the delivery's id.
    #[serde(default)]
    pub delivery_id: Option<String>,
}

/// The `[[triggers]]` of a scenario's `config` (empty when it has none or does not parse; the
/// daemon's own load names what is wrong).
pub(super) fn configured(config: &str) -> Vec<TriggerConfig> {
    #[derive(Deserialize)]
    struct Triggers {
        #[serde(default)]
        triggers: Vec<TriggerConfig>,
    }
    let table: toml::Table = toml::from_str(config).unwrap_or_default();
    toml::Value::Table(table)
        .try_into::<Triggers>()
        .map(|parsed| parsed.triggers)
        .unwrap_or_default()
}

/// The secret variables of the scenario's triggers, each set to [`SECRET`].
pub(super) fn env(config: &str) -> Vec<(String, String)> {
    configured(config)
        .iter()
        .map(|trigger| (trigger.secret_var(), SECRET.to_string()))
        .collect()
}

/// Sends the delivery and listens on the bot's chat `chat_id` until the delivery ended and
/// nothing is under way (or, for a redelivery, at once: it runs nothing).
pub(super) async fn deliver(
    store: &Store,
    base: &str,
    telegram: &TelegramSide,
    chat_id: i64,
    delivery: &TriggerTurn,
    limit: Duration,
) -> Result<Heard, String> {
    let already = telegram.fake.sent(telegram.bot).len();
    let mut request = reqwest::Client::new()
        .post(format!("{base}/hooks/trigger/{}", delivery.name))
        .header(
            "x-signature-256",
            crate::triggers::sign(delivery.body.as_bytes(), SECRET.as_bytes()),
        )
        .body(delivery.body.clone());
    if let Some(id) = &delivery.delivery_id {
        request = request.header("x-delivery-id", id);
    }
    let response = request
        .send()
        .await
        .map_err(|error| format!("the hook did not answer: {error}"))?;
    let status = response.status().as_u16();
    let line = response.text().await.unwrap_or_default().trim().to_string();
    let mut heard = Heard {
        notices: vec![line.clone()],
        ..Heard::default()
    };
    match status {
        202 => {}
        200 => return Ok(heard),
        _ => return Err(format!("the hook answered {status}: {line}")),
    }
    let id: i64 = line
        .rsplit(' ')
        .next()
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| format!("the hook's answer names no delivery: {line}"))?;
    let run_id = poll_until(limit, || async { ended(store, id).await.ok().flatten() })
        .await
        .map_err(|_| format!("delivery {id} did not end within {} s", limit.as_secs()))?;
    heard.run_id = run_id;
    for message in telegram
        .fake
        .sent(telegram.bot)
        .into_iter()
        .skip(already)
        .filter(|message| message.chat_id == chat_id)
    {
        if message.buttons.is_empty() {
            if !heard.text.is_empty() {
                heard.text.push('\n');
            }
            heard.text.push_str(&message.visible_text);
        } else {
            heard.notices.push(message.visible_text);
        }
    }
    Ok(heard)
}

/// `Some(run)` once delivery `id` ended (succeeded or failed, its run if it had one) and
/// nothing else is under way (`harness::OPEN_WORK_SQL`: its answer left the outbox).
async fn ended(store: &Store, id: i64) -> Result<Option<Option<i64>>, String> {
    store
        .read(move |conn| {
            let (status, run_id): (String, Option<i64>) = conn.query_row(
                "SELECT status, run_id FROM trigger_deliveries WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            let open: i64 = conn.query_row(OPEN_WORK_SQL, [], |row| row.get(0))?;
            Ok((matches!(status.as_str(), "succeeded" | "failed") && open == 0).then_some(run_id))
        })
        .await
        .map_err(|error| format!("cannot read the delivery: {error}"))
}
