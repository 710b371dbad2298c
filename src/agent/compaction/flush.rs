//! The flush before a compaction: facts the user stated in the turns about to be summarised are
//! saved to memory first, so a summary can't lose them.
//!
//! One model call with a strict answer format ([`FLUSH_PROMPT`]): each fact names the numbered
//! user turn that states it. The facts are recorded (`compaction_flushes`, a row per session and
//! range of events) before any is saved; each is then saved like any other memory — surprise-gated,
//! class `durable`, source `user_said`, its lineage the session event of that turn.
//!
//! Invariant: a fact is saved at most once. A compaction interrupted by a crash finds the recorded
//! rows of its events and redoes the saves from them without asking the model about those events
//! again (only events after them, if the conversation went on); a save of a text already
//! saved is answered `Duplicate` by the memory service (exact text, or the surprise gate), so the
//! redo links to the memory saved the first time.
//!
//! An answer that is not in the format saves nothing (recorded as an `error` step); the compaction
//! goes on, as it did before the flush existed.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::agent::run::RunCtx;
use crate::llm::{ChatMessage, ChatRequest, FallbackOutcome, chat_with_fallback};
use crate::protocol::memory::{MAX_TEXT_CHARS, Memory, SaveOutcome, SaveRequest};
use crate::store::StoreError;
use crate::store::runs::NewStep;
use crate::store::sessions::{self, EventKindRow, EventRow};

/// The system prompt of a flush request (the scripted test model recognises it).
pub const FLUSH_PROMPT: &str = "Before older turns of this conversation are summarised, list the \
durable facts the user stated in them: about themselves, their people, places, plans, dates and \
preferences. Skip small talk, questions and anything the assistant said. Answer with JSON only, \
exactly {\"facts\": [{\"turn\": <the number in brackets of the user turn that states it>, \
\"fact\": \"<one self-contained sentence>\"}]}, or {\"facts\": []} when there is none. Never \
include passwords, keys or other secrets.";

/// Most facts taken from one flush.
const MAX_FACTS: usize = 20;
/// Longest fact kept, in characters.
const MAX_FACT_CHARS: usize = 500;

/// A fact as recorded: the session event it came from and its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Flushed {
    event_id: i64,
    text: String,
}

/// The model's answer.
#[derive(Debug, Deserialize)]
struct Answer {
    facts: Vec<AnswerFact>,
}

#[derive(Debug, Deserialize)]
struct AnswerFact {
    turn: u32,
    fact: String,
}

/// A memory the flush saved (or found already saved), for the recap to link to.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    pub id: i64,
    pub text: String,
}

/// Saves the user's facts from `older` (the events about to be summarised) and returns the
/// memories they are in. Memory being off or unreachable saves nothing and is not an error.
///
/// Facts recorded by an interrupted flush of these events are taken as they are; only events
/// after the last recorded one go to the model.
pub async fn flush(ctx: &RunCtx, older: &[EventRow]) -> Result<Vec<Saved>, StoreError> {
    let (Some(first), Some(upto)) = (older.first(), older.last()) else {
        return Ok(Vec::new());
    };
    let (mut facts, flushed_upto) = recorded(ctx, first.id).await?;
    if flushed_upto < upto.id {
        let fresh: Vec<EventRow> = older
            .iter()
            .filter(|event| event.id > flushed_upto)
            .cloned()
            .collect();
        let new_facts = extract(ctx, &fresh).await;
        record(ctx, upto.id, &new_facts).await?;
        facts.extend(new_facts);
    }
    Ok(save_all(ctx, facts).await)
}

/// The facts recorded by earlier (interrupted) flushes of events from `from_event` on, and the
/// last event they covered (0: none).
async fn recorded(ctx: &RunCtx, from_event: i64) -> Result<(Vec<Flushed>, i64), StoreError> {
    let session_id = ctx.session_id;
    let rows = ctx
        .runtime
        .store
        .read(move |conn| sessions::flushes_from(conn, session_id, from_event))
        .await?;
    let mut facts = Vec::new();
    let mut upto = 0;
    for (covered, json) in rows {
        // A row that no longer parses (written by another version) counts as flushed with nothing.
        facts.extend(serde_json::from_str::<Vec<Flushed>>(&json).unwrap_or_default());
        upto = upto.max(covered);
    }
    Ok((facts, upto))
}

async fn record(ctx: &RunCtx, upto: i64, facts: &[Flushed]) -> Result<(), StoreError> {
    let session_id = ctx.session_id;
    let json =
        serde_json::to_string(facts).map_err(|error| StoreError::Invalid(error.to_string()))?;
    let now = crate::clock::now_ms();
    ctx.runtime
        .store
        .write(move |conn| sessions::record_flush(conn, session_id, upto, &json, now))
        .await
}

/// The numbered transcript the model reads: user turns as `[n] name: text`, the assistant's
/// turns unnumbered for context. Returns it with the event id of each number.
fn numbered(older: &[EventRow]) -> (String, Vec<i64>) {
    let mut transcript = String::new();
    let mut turns = Vec::new();
    for event in older {
        let content: String = event.content.chars().take(2_000).collect();
        match event.kind {
            EventKindRow::User => {
                turns.push(event.id);
                let who = event.sender.as_deref().unwrap_or("user");
                transcript.push_str(&format!("[{}] {who}: {content}\n", turns.len()));
            }
            EventKindRow::Assistant => transcript.push_str(&format!("assistant: {content}\n")),
            EventKindRow::ToolResult | EventKindRow::Notice => {}
        }
    }
    (transcript, turns)
}

/// Asks the model for the facts; a failed call or an answer out of format gives none (recorded
/// as an `error` step).
async fn extract(ctx: &RunCtx, older: &[EventRow]) -> Vec<Flushed> {
    let (transcript, turns) = numbered(older);
    if turns.is_empty() {
        return Vec::new();
    }
    let request = ChatRequest {
        model: String::new(),
        messages: vec![
            ChatMessage::system(FLUSH_PROMPT),
            ChatMessage::user(transcript),
        ],
        tools: Vec::new(),
        temperature: Some(0.0),
        max_tokens: Some(800),
    };
    let chain = ctx.settings.model_chain(&ctx.runtime.spec);
    let problem = match chat_with_fallback(&ctx.runtime.providers, &chain, request, None).await {
        Ok(outcome) => {
            let parsed = parse(&outcome.response.text, &turns);
            let count = parsed.as_ref().map(Vec::len).unwrap_or(0);
            if let Err(error) = record_call(ctx, &outcome, count).await {
                tracing::debug!(%error, "the compaction flush's step was not recorded");
            }
            match parsed {
                Ok(facts) => return facts,
                Err(problem) => problem,
            }
        }
        Err(error) => crate::secrets::redact(&error.to_string()).to_string(),
    };
    ctx.record_step(NewStep {
        kind: "error",
        name: Some("compaction_flush".into()),
        detail: json!({
            "error": format!("No facts were saved before this compaction: {problem}. The summary still keeps what it can."),
        }),
        ..NewStep::default()
    })
    .await;
    Vec::new()
}

/// Records the flush's model call as a `compaction_flush` step with its cost.
async fn record_call(
    ctx: &RunCtx,
    outcome: &FallbackOutcome,
    facts: usize,
) -> Result<(), StoreError> {
    let call = super::ModelCall::of(ctx, outcome);
    let now = crate::clock::now_ms();
    ctx.runtime
        .store
        .write(move |conn| call.record(conn, "compaction_flush", json!({"facts": facts}), now))
        .await
}

/// Reads the model's answer strictly: JSON of the asked shape (a code fence around it is
/// tolerated), each fact naming a user turn of this transcript. Facts naming no such turn, or
/// empty, are dropped; at most [`MAX_FACTS`] are kept.
fn parse(answer: &str, turns: &[i64]) -> Result<Vec<Flushed>, String> {
    let trimmed = answer.trim();
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(trimmed);
    let parsed: Answer = serde_json::from_str(body.trim())
        .map_err(|error| format!("the model's answer was not the expected JSON ({error})"))?;
    let mut facts: Vec<Flushed> = Vec::new();
    for fact in parsed.facts {
        let text: String = fact.fact.trim().chars().take(MAX_FACT_CHARS).collect();
        let event_id = (fact.turn as usize)
            .checked_sub(1)
            .and_then(|index| turns.get(index));
        if let (Some(&event_id), false) = (event_id, text.is_empty())
            && !facts.iter().any(|known| known.text == text)
        {
            facts.push(Flushed { event_id, text });
        }
        if facts.len() == MAX_FACTS {
            break;
        }
    }
    Ok(facts)
}

/// Saves each fact in order; a duplicate links to the memory already there.
async fn save_all(ctx: &RunCtx, facts: Vec<Flushed>) -> Vec<Saved> {
    let memory = Memory::new(&ctx.runtime.registry);
    let mut saved = Vec::new();
    for fact in facts {
        let text: String = fact.text.chars().take(MAX_TEXT_CHARS).collect();
        let request = SaveRequest {
            owner: ctx.agent().to_string(),
            class: "durable".into(),
            sensitivity: "normal".into(),
            source: "user_said".into(),
            chat: Some(ctx.chat.as_str().to_string()),
            text: text.clone(),
            run_id: Some(ctx.run_id),
            message_id: Some(fact.event_id),
        };
        match memory.save(request).await {
            Ok(SaveOutcome::Saved { id, .. }) | Ok(SaveOutcome::Duplicate { of: id, .. }) => {
                saved.push(Saved { id, text });
            }
            Err(error) => {
                tracing::debug!(%error, "a fact from the compaction flush was not saved");
            }
        }
    }
    saved
}

/// The line the recap ends with, linking the memories the flush saved.
pub fn recap_links(saved: &[Saved]) -> Option<String> {
    if saved.is_empty() {
        return None;
    }
    let links: Vec<String> = saved
        .iter()
        .map(|memory| format!("#{} {}", memory.id, memory.text))
        .collect();
    Some(format!(
        "Saved to memory from these turns: {}",
        links.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strict_answer_names_user_turns() {
        let turns = [11, 14, 17];
        let facts = parse(
            r#"{"facts": [{"turn": 2, "fact": "My sister Ana lives in Porto."}, {"turn": 9, "fact": "nowhere"}, {"turn": 0, "fact": "zero"}, {"turn": 3, "fact": "  "}]}"#,
            &turns,
        )
        .expect("parses");
        assert_eq!(
            facts,
            vec![Flushed {
                event_id: 14,
                text: "My sister Ana lives in Porto.".into()
            }]
        );
    }

    #[test]
    fn a_fenced_answer_is_read_and_prose_is_refused() {
        let fenced = "```json\n{\"facts\": [{\"turn\": 1, \"fact\": \"Likes tea.\"}]}\n```";
        assert_eq!(parse(fenced, &[5]).expect("fenced").len(), 1);
        for bad in ["Sure! The user likes tea.", "", "{\"facts\": 3}", "[1,2]"] {
            assert!(parse(bad, &[5]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn duplicates_and_too_many_facts_are_cut() {
        let many: Vec<String> = (0..30)
            .map(|i| format!(r#"{{"turn": 1, "fact": "fact {}"}}"#, i % 25))
            .collect();
        let answer = format!(r#"{{"facts": [{}]}}"#, many.join(","));
        let facts = parse(&answer, &[1]).expect("parses");
        assert_eq!(facts.len(), MAX_FACTS);
    }

    #[test]
    fn the_recap_links_each_saved_memory() {
        assert_eq!(recap_links(&[]), None);
        let line = recap_links(&[
            Saved {
                id: 3,
                text: "Likes tea.".into(),
            },
            Saved {
                id: 9,
                text: "Born in May.".into(),
            },
        ])
        .expect("a line");
        assert!(
            line.contains("#3 Likes tea.") && line.contains("#9 Born in May."),
            "{line}"
        );
    }
}
