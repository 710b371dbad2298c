//! Context compaction: when a conversation outgrows the model's budget, older turns are summarised
//! into the session's recap and only the recent turns stay verbatim.
//!
//! The summary is written by the agent's own model (through the same fallback chain, recorded as a
//! `compaction` step with its cost). The cut always falls just before a user message, so a tool
//! call is never separated from its result. Before the summary, `flush` saves the facts the user
//! stated in the older turns to memory; the recap links to them.

mod flush;

use serde_json::json;

use super::run::RunCtx;
use crate::llm::{ChatMessage, ChatRequest, FallbackOutcome, chat_with_fallback};
use crate::store::StoreError;
use crate::store::runs::{self, NewStep};
use crate::store::sessions::{self, EventKindRow};
pub use flush::FLUSH_PROMPT;

/// The system prompt of a compaction request (the scripted test model recognises it).
pub const COMPACTION_PROMPT: &str = "Summarise the conversation so far for your future self. Keep facts about \
the user, decisions, promises, open tasks and names; drop small talk. Write at most 250 words.";

/// Recent events kept verbatim after a compaction.
const KEEP_RECENT: usize = 6;

/// Compacts the session's older events into its recap. Returns the new recap, or `None` when there
/// was nothing worth compacting or the model could not be reached (the run goes on uncompacted).
pub async fn compact(ctx: &RunCtx) -> Result<Option<String>, StoreError> {
    let (recap, events) = recap_and_events(ctx).await?;
    let Some(cut) = cut_point(&events) else {
        return Ok(None);
    };
    let older = &events[..cut];
    // What the user stated is saved to memory before the summary can drop it (`flush`).
    let saved = flush::flush(ctx, older).await?;
    let Some(outcome) = summarise(ctx, summary_input(recap.as_deref(), older)).await else {
        return Ok(None);
    };
    let mut summary = outcome.response.text.trim().to_string();
    if summary.is_empty() {
        return Ok(None);
    }
    if let Some(links) = flush::recap_links(&saved) {
        summary = format!("{summary}\n\n{links}");
    }
    store_recap(ctx, &outcome, &summary, older).await?;
    remember_recap(ctx, &summary);
    Ok(Some(summary))
}

/// The session's recap and every event after it.
async fn recap_and_events(
    ctx: &RunCtx,
) -> Result<(Option<String>, Vec<sessions::EventRow>), StoreError> {
    let session_id = ctx.session_id;
    ctx.runtime
        .store
        .read(move |conn| {
            let session = sessions::get(conn, session_id)?
                .ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
            Ok((
                session.recap,
                sessions::events_after(conn, session_id, session.recap_upto, 10_000)?,
            ))
        })
        .await
}

/// Where the older events end: at the last user message at or before the last `KEEP_RECENT`
/// events (`None`: nothing to compact).
fn cut_point(events: &[sessions::EventRow]) -> Option<usize> {
    if events.len() <= KEEP_RECENT {
        return None;
    }
    // The cut: the last user message at or before len - KEEP_RECENT.
    let limit = events.len() - KEEP_RECENT;
    (1..=limit)
        .rev()
        .find(|&i| events[i].kind == EventKindRow::User)
}

/// The text the model summarises: the earlier summary, then the older events (notices left out,
/// each event cut to 2,000 characters).
fn summary_input(recap: Option<&str>, older: &[sessions::EventRow]) -> String {
    let mut transcript = String::new();
    if let Some(recap) = recap {
        transcript.push_str(&format!("Earlier summary:\n{recap}\n\n"));
    }
    for event in older {
        let who = match event.kind {
            EventKindRow::User => event.sender.as_deref().unwrap_or("user"),
            EventKindRow::Assistant => "assistant",
            EventKindRow::ToolResult => "tool",
            EventKindRow::Notice => continue,
        };
        let content: String = event.content.chars().take(2_000).collect();
        transcript.push_str(&format!("{who}: {content}\n"));
    }
    transcript
}

/// Asks the agent's model chain for the summary; a failure is recorded as an `error` step and
/// gives `None`.
async fn summarise(ctx: &RunCtx, transcript: String) -> Option<FallbackOutcome> {
    let request = ChatRequest {
        model: String::new(),
        messages: vec![
            ChatMessage::system(COMPACTION_PROMPT),
            ChatMessage::user(transcript),
        ],
        tools: Vec::new(),
        temperature: None,
        max_tokens: Some(600),
    };
    let chain = ctx.settings.model_chain(&ctx.runtime.spec);
    match chat_with_fallback(&ctx.runtime.providers, &chain, request, None).await {
        Ok(outcome) => Some(outcome),
        Err(error) => {
            ctx.record_step(NewStep {
                kind: "error",
                name: Some("compaction".into()),
                detail: json!({"error": crate::secrets::redact(&error.to_string())}),
                ..NewStep::default()
            })
            .await;
            None
        }
    }
}

/// A model call of a compaction (the flush's or the summary's), priced, ready to be recorded as
/// a step of the run with its cost row.
struct ModelCall {
    run_id: i64,
    agent: String,
    provider: String,
    model: String,
    usage: crate::llm::Usage,
    call: runs::CallUsage,
}

impl ModelCall {
    fn of(ctx: &RunCtx, outcome: &FallbackOutcome) -> ModelCall {
        ModelCall {
            run_id: ctx.run_id,
            agent: ctx.agent().to_string(),
            provider: outcome.model.provider.clone(),
            model: outcome.model.model.clone(),
            usage: outcome.response.usage,
            call: super::run::priced_usage(&ctx.runtime, outcome),
        }
    }

    /// Adds the step `kind` (its `detail` gains `unpriced`) and the cost row, in the caller's
    /// transaction.
    fn record(
        &self,
        conn: &rusqlite::Connection,
        kind: &'static str,
        mut detail: serde_json::Value,
        now: i64,
    ) -> Result<(), StoreError> {
        detail["unpriced"] = json!(self.call.unpriced);
        runs::add_step(
            conn,
            self.run_id,
            &NewStep {
                kind,
                name: Some(format!("{}/{}", self.provider, self.model)),
                detail,
                tokens_in: Some(self.usage.input_tokens),
                tokens_out: Some(self.usage.output_tokens),
                cost_usd: Some(self.call.cost_usd),
                duration_ms: None,
            },
            now,
        )?;
        let site = runs::CallSite {
            at_ms: now,
            agent: &self.agent,
            provider: &self.provider,
            model: &self.model,
            run_id: Some(self.run_id),
        };
        runs::record_cost(conn, &site, &self.call)
    }
}

/// Stores the summary as the session's recap of `older`, with the `compaction` step and the
/// call's cost, in one transaction.
async fn store_recap(
    ctx: &RunCtx,
    outcome: &FallbackOutcome,
    summary: &str,
    older: &[sessions::EventRow],
) -> Result<(), StoreError> {
    let session_id = ctx.session_id;
    let upto = older.last().map(|event| event.id).unwrap_or(0);
    let call = ModelCall::of(ctx, outcome);
    let stored = summary.to_string();
    let compacted = older.len();
    let now = crate::clock::now_ms();
    ctx.runtime
        .store
        .write(move |conn| {
            sessions::set_recap(conn, session_id, &stored, upto, now)?;
            let detail = json!({"events_compacted": compacted, "recap_upto": upto, "recap_chars": stored.len()});
            call.record(conn, "compaction", detail, now)
        })
        .await
}

/// The recap becomes a memory of this conversation (class `session_recap`: recalled only in this
/// chat), so that what was summarised away stays searchable. Best effort: memory may be off.
fn remember_recap(ctx: &RunCtx, summary: &str) {
    use crate::protocol::memory::{MAX_TEXT_CHARS, Memory, SaveRequest};
    let text: String = summary.chars().take(MAX_TEXT_CHARS).collect();
    let request = SaveRequest {
        owner: ctx.agent().to_string(),
        class: "session_recap".into(),
        sensitivity: "normal".into(),
        source: "recap".into(),
        chat: Some(ctx.chat.as_str().to_string()),
        text,
        run_id: Some(ctx.run_id),
        message_id: None,
    };
    let memory = Memory::new(&ctx.runtime.registry);
    tokio::spawn(async move {
        if let Err(error) = memory.save(request).await {
            tracing::debug!(%error, "the recap was not saved to memory");
        }
    });
}
