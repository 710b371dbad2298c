//! One run: from the session's pending messages to a final answer (or a recorded reason why not).
//!
//! Durability: the run row exists before the first model call; every model call, decision, tool
//! call and result is recorded as it happens; an assistant message that asks for tools is stored
//! before any of them runs. A run interrupted by a crash is therefore resumed from its last
//! recorded step (`RunRequest::resume`): calls without a recorded result are not run again (they
//! may have had effects); the model is told they were interrupted and carries on.
//!
//! The final answer, the run's end and the reply's outbox row are written in one transaction;
//! only then is the reply handed to the channel.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::compaction;
use super::composer::compose;
use super::dispatch;
use super::loop_guard::{GuardStop, LoopGuard};
use super::transcript::{self, estimate_tokens, message_tokens};
use super::{AgentRuntime, AgentSettings};
use crate::domain::{ChatKey, ChatKind, OutEvent, Outbound};
use crate::events::{EventData, EventKind};
use crate::llm::{ChatMessage, ChatRequest, StreamDelta, chat_with_fallback};
use crate::policy::rate_limit::RateLimiter;
use crate::store::StoreError;
use crate::store::approvals::ApprovalStatus;
use crate::store::outbox;
use crate::store::runs::{self, NewStep, RunStatus};
use crate::store::sessions::{self, EventKindRow, NewEvent};
use crate::tool::ToolContext;

mod budget;
mod layers;
mod mcp_wait;
mod spoken;

use spoken::{answer_is_spoken, spoken_to};

/// What started the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Message,
    Schedule,
    Handoff,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Message => "message",
            Trigger::Schedule => "schedule",
            Trigger::Handoff => "handoff",
        }
    }
}

pub struct RunRequest {
    pub run_id: i64,
    pub session_id: i64,
    pub chat: ChatKey,
    pub runtime: Arc<AgentRuntime>,
    pub settings: AgentSettings,
    /// Cancelled by `/stop` (the run ends as `cancelled` and says so).
    pub cancel: CancellationToken,
    pub limiter: RateLimiter,
    pub correlation: Option<String>,
    /// Stateless callers (the gateway) bring the conversation; the stored transcript is not used.
    pub context: Option<Vec<ChatMessage>>,
    /// The run was found open after a restart and continues from its last recorded step.
    pub resume: bool,
}

/// How a run ended, for its session.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub run_id: i64,
    pub status: RunStatus,
    pub answer: String,
    pub limiter: RateLimiter,
}

/// What a run shares with the dispatcher and compaction.
pub struct RunCtx {
    pub run_id: i64,
    pub session_id: i64,
    pub chat: ChatKey,
    pub runtime: Arc<AgentRuntime>,
    pub settings: AgentSettings,
    pub cancel: CancellationToken,
    pub tools: ToolContext,
    pub correlation: Option<String>,
    /// The run's time zone (`agent::zone`): the prompt's local time and the tools' default.
    pub zone: super::zone::ResolvedZone,
    /// The agent's MCP servers that were not published when the run went ahead (`mcp_wait`).
    pub mcp_unavailable: Vec<mcp_wait::UnavailableServer>,
}

impl RunCtx {
    pub fn agent(&self) -> &str {
        &self.runtime.spec.name
    }

    /// Records a step; a storage failure is logged, not fatal (the run's outcome still lands).
    pub async fn record_step(&self, step: NewStep) {
        let run_id = self.run_id;
        let kind = step.kind;
        let name = step.name.clone().unwrap_or_default();
        let now = crate::clock::now_ms();
        if let Err(error) = self
            .runtime
            .store
            .write(move |conn| runs::add_step(conn, run_id, &step, now).map(|_| ()))
            .await
        {
            tracing::warn!(run_id, %error, "could not record a run step");
        }
        self.runtime.events.publish_data(
            EventKind::RunStep,
            &format!("run:{run_id}"),
            &format!("{kind} {name}"),
            EventData::RunStep {
                run_id,
                agent: self.agent().to_string(),
                kind: kind.to_string(),
                name,
            },
        );
    }

    pub fn deliver(&self, event: OutEvent) {
        crate::channels::deliver(
            &self.runtime.registry,
            Outbound {
                agent: self.agent().to_string(),
                chat: self.chat.clone(),
                run_id: Some(self.run_id),
                correlation: self.correlation.clone(),
                event,
            },
        );
    }
}

enum Ending {
    Answer(String),
    /// Ended without a model answer; the text tells the user why.
    Stopped(RunStatus, String),
}

pub async fn execute(request: RunRequest) -> RunReport {
    let runtime = request.runtime.clone();
    let zone = super::zone::zone_for_run(&runtime, request.session_id, &request.chat).await;
    let tools = ToolContext {
        agent: runtime.spec.name.clone(),
        chat: request.chat.clone(),
        run_id: request.run_id,
        workspace: runtime.workspace.clone(),
        settings: runtime.tool_settings.clone(),
        registry: runtime.registry.clone(),
        store: runtime.store.clone(),
        cancel: request.cancel.clone(),
        timezone: zone.zone,
    };
    let mut ctx = RunCtx {
        run_id: request.run_id,
        session_id: request.session_id,
        chat: request.chat.clone(),
        runtime,
        settings: request.settings.clone(),
        cancel: request.cancel.clone(),
        tools,
        correlation: request.correlation.clone(),
        zone,
        mcp_unavailable: Vec::new(),
    };
    let mut limiter = request.limiter;
    ctx.runtime.events.publish_data(
        EventKind::RunStarted,
        &format!("run:{}", ctx.run_id),
        &format!("{} in {}", ctx.agent(), ctx.chat),
        EventData::RunStarted {
            run_id: ctx.run_id,
            agent: ctx.agent().to_string(),
            chat: ctx.chat.as_str().to_string(),
            resume: request.resume,
        },
    );
    if ctx.chat.kind() != ChatKind::Schedule && ctx.chat.kind() != ChatKind::Handoff {
        ctx.deliver(OutEvent::Working);
    }
    let ending = match drive(&mut ctx, &mut limiter, request.context, request.resume).await {
        Ok(ending) => ending,
        Err(error) => Ending::Stopped(
            RunStatus::Failed,
            format!(
                "Something went wrong on my side and this request was not completed ({error})."
            ),
        ),
    };
    finish(&ctx, ending, limiter).await
}

async fn drive(
    ctx: &mut RunCtx,
    limiter: &mut RateLimiter,
    context: Option<Vec<ChatMessage>>,
    resume: bool,
) -> Result<Ending, StoreError> {
    if ctx.settings.paused {
        return Ok(Ending::Stopped(
            RunStatus::Cancelled,
            format!(
                "{} is paused by the operator, so nothing was run; try again when it is resumed.",
                ctx.runtime.spec.name
            ),
        ));
    }
    if !resume && let Some(ending) = budget::check(ctx, budget::When::BeforeRun).await? {
        return Ok(ending);
    }
    // Before anything uses the tools (a resumed run's waiting calls included).
    mcp_wait::wait_for_servers(ctx).await;
    let ctx: &RunCtx = ctx;
    let spec = &ctx.runtime.spec;

    let stateless = context.is_some();
    let (mut recap, mut conversation) = match context {
        Some(messages) => (None, messages),
        None => load_conversation(ctx).await?,
    };
    let mut guard = LoopGuard::new(ctx.settings.autonomy);
    if resume {
        let waiting = close_interrupted_calls(ctx).await?;
        if !waiting.is_empty() {
            // Calls that were waiting for a decision go through the gate again and find their
            // stored approval: they run once it is granted, or are reported denied.
            dispatch::dispatch(ctx, &guard, limiter, &waiting).await?;
        }
        (recap, conversation) = load_conversation(ctx).await?;
        ctx.record_step(NewStep {
            kind: "note",
            name: Some("resume".into()),
            detail: json!({"reason": "the daemon restarted while this run was open"}),
            ..NewStep::default()
        })
        .await;
    }
    if !stateless
        && should_compact(ctx, &conversation)
        && let Some(summary) = compaction::compact(ctx).await?
    {
        tracing::debug!(
            run_id = ctx.run_id,
            chars = summary.len(),
            "conversation compacted"
        );
        (recap, conversation) = load_conversation(ctx).await?;
    }

    let tool_specs: Vec<_> = ctx.settings.tools.iter().map(|tool| tool.spec()).collect();
    let reserved = tool_specs
        .iter()
        .map(|spec| estimate_tokens(&spec.description) + estimate_tokens(&spec.parameters.to_string()) + 8)
        .sum::<usize>()
        // Room for the answer: a quarter of the budget, at most a thousand tokens.
        + (spec.context_tokens as usize / 4).min(1_000);
    let chain = ctx.settings.model_chain(spec);
    // A spoken answer is not shown as streamed text first.
    let streaming = matches!(ctx.chat.kind(), ChatKind::Telegram | ChatKind::Local)
        && !answer_is_spoken(ctx).await;
    let mut model_calls = 0_u32;
    loop {
        if ctx.cancel.is_cancelled() {
            return Ok(Ending::Stopped(RunStatus::Cancelled, "Stopped.".into()));
        }
        // A run that used up a budget stops at its next model call, not only the next run.
        if model_calls > 0
            && let Some(ending) = budget::check(ctx, budget::When::MidRun).await?
        {
            return Ok(ending);
        }
        model_calls += 1;
        if let Err(stop) = guard.before_turn() {
            return Ok(guard_stop(ctx, stop).await);
        }
        let layers = layers::layers(ctx, recap.as_deref(), &conversation).await;
        let composed = compose(
            &layers,
            &conversation,
            spec.context_tokens as usize,
            reserved,
        );
        let request = ChatRequest {
            model: String::new(),
            messages: composed.messages,
            tools: tool_specs.clone(),
            temperature: None,
            max_tokens: None,
        };
        let started = Instant::now();
        let (stream_tx, forwarder) = if streaming {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            (
                Some(tx),
                Some(tokio::spawn(forward_partials(ctx_outbound(ctx), rx))),
            )
        } else {
            (None, None)
        };
        let call = chat_with_fallback(&ctx.runtime.providers, &chain, request, stream_tx.as_ref());
        let result = tokio::select! {
            result = call => result,
            _ = ctx.cancel.cancelled() => {
                drop(stream_tx);
                if let Some(forwarder) = forwarder { forwarder.abort(); }
                return Ok(Ending::Stopped(RunStatus::Cancelled, "Stopped.".into()));
            }
        };
        drop(stream_tx);
        if let Some(forwarder) = forwarder {
            let _ = forwarder.await;
        }
        let duration_ms = started.elapsed().as_millis() as u64;
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => {
                let text = crate::secrets::redact(&error.to_string()).into_owned();
                ctx.record_step(NewStep {
                    kind: "error",
                    name: Some("llm".into()),
                    detail: json!({"error": text, "models": chain.iter().map(|m| format!("{}/{}", m.provider, m.model)).collect::<Vec<_>>()}),
                    duration_ms: Some(duration_ms),
                    ..NewStep::default()
                })
                .await;
                return Ok(Ending::Stopped(
                    RunStatus::Failed,
                    format!(
                        "I could not reach the model right now ({text}). Your message is saved; please try again later."
                    ),
                ));
            }
        };
        for (model, error) in &outcome.failed {
            ctx.record_step(NewStep {
                kind: "error",
                name: Some(format!("{}/{}", model.provider, model.model)),
                detail: json!({"error": crate::secrets::redact(&error.to_string()), "fallback": true}),
                ..NewStep::default()
            })
            .await;
        }
        record_model_call(
            ctx,
            &outcome,
            composed.estimated_tokens,
            composed.dropped_layers.clone(),
            duration_ms,
        )
        .await?;
        let response = outcome.response;
        if response.tool_calls.is_empty() {
            let text = response.text.trim().to_string();
            if text.is_empty() {
                return Ok(Ending::Answer(match response.finish {
                    crate::llm::FinishReason::Length => {
                        "(The answer was cut off by the model's length limit.)".into()
                    }
                    _ => "(The model returned an empty answer.)".into(),
                }));
            }
            return Ok(Ending::Answer(text));
        }

        // Store the request for tools before any of them runs (secrets in it redacted; the
        // dispatcher refuses the calls that carry one).
        let recorded_calls = dispatch::redacted_calls(&response.tool_calls);
        let content = crate::secrets::redact(&response.text).into_owned();
        let assistant = ChatMessage::assistant_tool_calls(content.clone(), recorded_calls.clone());
        let data = transcript::tool_calls_data(&recorded_calls);
        let (session_id, run_id) = (ctx.session_id, ctx.run_id);
        let now = crate::clock::now_ms();
        ctx.runtime
            .store
            .write(move |conn| {
                sessions::append(
                    conn,
                    session_id,
                    &NewEvent {
                        kind: EventKindRow::Assistant,
                        sender: None,
                        content: &content,
                        data: Some(&data),
                        run_id: Some(run_id),
                        inbound_id: None,
                    },
                    now,
                )
            })
            .await?;
        conversation.push(assistant);
        let results = dispatch::dispatch(ctx, &guard, limiter, &response.tool_calls).await?;
        let failed = results
            .iter()
            .filter(|result| result.output.is_error)
            .count();
        for result in &results {
            conversation.push(ChatMessage::tool_result(
                &result.call,
                transcript::wrap_tool_output(
                    &result.call.name,
                    &result.output.text,
                    result.output.is_error,
                ),
            ));
        }
        if ctx.cancel.is_cancelled() {
            return Ok(Ending::Stopped(RunStatus::Cancelled, "Stopped.".into()));
        }
        if let Err(stop) = guard.after_calls(&response.tool_calls, failed) {
            return Ok(guard_stop(ctx, stop).await);
        }
    }
}

async fn guard_stop(ctx: &RunCtx, stop: GuardStop) -> Ending {
    ctx.record_step(NewStep {
        kind: "note",
        name: Some("loop_guard".into()),
        detail: json!({"stop": stop.kind(), "explanation": stop.explain()}),
        ..NewStep::default()
    })
    .await;
    Ending::Stopped(RunStatus::Failed, stop.explain())
}

fn should_compact(ctx: &RunCtx, conversation: &[ChatMessage]) -> bool {
    let tokens: usize = conversation.iter().map(message_tokens).sum();
    conversation.len() >= 8 && tokens * 10 > ctx.runtime.spec.context_tokens as usize * 6
}

/// The session's recap and its transcript after the recap, as messages.
pub async fn load_conversation(
    ctx: &RunCtx,
) -> Result<(Option<String>, Vec<ChatMessage>), StoreError> {
    let session_id = ctx.session_id;
    let limit = ctx.runtime.limits.history_events * 2;
    let workspace = ctx
        .runtime
        .spec
        .vision
        .then(|| ctx.runtime.workspace.clone());
    ctx.runtime
        .store
        .read(move |conn| {
            let session = sessions::get(conn, session_id)?
                .ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
            let events = sessions::events_after(conn, session_id, session.recap_upto, limit)?;
            // On the blocking pool already: images are read from the workspace here.
            let messages = transcript::to_messages_with_images(&events, workspace.as_deref());
            Ok((session.recap, messages))
        })
        .await
}

/// After a restart: calls this run asked for whose results were never recorded get a result that
/// says so. They are not run again — they may have had effects before the crash. The exception are
/// calls that were waiting for (or had just received) an approval: they never started, so they are
/// returned to be dispatched again, which re-attaches them to their stored approval.
async fn close_interrupted_calls(ctx: &RunCtx) -> Result<Vec<crate::llm::ToolCall>, StoreError> {
    let (session_id, run_id) = (ctx.session_id, ctx.run_id);
    ctx.runtime
        .store
        .write(move |conn| {
            let events = sessions::run_events(conn, run_id)?;
            let mut open: Vec<crate::llm::ToolCall> = Vec::new();
            for event in &events {
                match event.kind {
                    EventKindRow::Assistant => open.extend(transcript::parse_tool_calls(event.data.as_deref())),
                    EventKindRow::ToolResult => {
                        let data: serde_json::Value =
                            event.data.as_deref().and_then(|d| serde_json::from_str(d).ok()).unwrap_or_default();
                        open.retain(|call| Some(call.id.as_str()) != data["call_id"].as_str());
                    }
                    _ => {}
                }
            }
            let now = crate::clock::now_ms();
            let mut waiting = Vec::new();
            for call in &open {
                let approval = crate::store::approvals::for_call(conn, run_id, &call.id)?;
                if approval.is_some_and(|row| {
                    matches!(row.status, ApprovalStatus::Pending | ApprovalStatus::Approved)
                }) {
                    waiting.push(call.clone());
                    continue;
                }
                let data = transcript::tool_result_data(call, true);
                sessions::append(
                    conn,
                    session_id,
                    &NewEvent {
                        kind: EventKindRow::ToolResult,
                        sender: None,
                        content: "This call was interrupted by a restart of the daemon and was not run again, \
                                  because it may already have taken effect. Check before repeating it.",
                        data: Some(&data),
                        run_id: Some(run_id),
                        inbound_id: None,
                    },
                    now,
                )?;
            }
            Ok(waiting)
        })
        .await
}

async fn record_model_call(
    ctx: &RunCtx,
    outcome: &crate::llm::FallbackOutcome,
    prompt_tokens: usize,
    dropped_layers: Vec<&'static str>,
    duration_ms: u64,
) -> Result<(), StoreError> {
    let usage = outcome.response.usage;
    let model = outcome.model.model.clone();
    let provider = outcome.model.provider.clone();
    let cost = ctx.runtime.prices.cost(&provider, &model, &usage);
    let call = runs::CallUsage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cost_usd: cost.usd,
        unpriced: cost.unpriced,
    };
    let step = NewStep {
        kind: "llm",
        name: Some(format!("{provider}/{model}")),
        detail: json!({
            "prompt_tokens_estimated": prompt_tokens,
            "dropped_layers": dropped_layers,
            "finish": format!("{:?}", outcome.response.finish),
            "tool_calls": outcome.response.tool_calls.iter().map(|call| &call.name).collect::<Vec<_>>(),
            "unpriced": cost.unpriced,
        }),
        tokens_in: Some(usage.input_tokens),
        tokens_out: Some(usage.output_tokens),
        cost_usd: Some(cost.usd),
        duration_ms: Some(duration_ms),
    };
    let (run_id, agent) = (ctx.run_id, ctx.agent().to_string());
    let now = crate::clock::now_ms();
    ctx.runtime
        .store
        .write(move |conn| {
            runs::add_step(conn, run_id, &step, now)?;
            runs::add_usage(conn, run_id, &model, &call)?;
            let site = runs::CallSite {
                at_ms: now,
                agent: &agent,
                provider: &provider,
                model: &model,
                run_id: Some(run_id),
            };
            runs::record_cost(conn, &site, &call)
        })
        .await?;
    ctx.runtime.events.publish_data(
        EventKind::CostRecorded,
        &format!("run:{}", ctx.run_id),
        &format!(
            "{} {}+{} tokens {}",
            outcome.model.model,
            usage.input_tokens,
            usage.output_tokens,
            if cost.unpriced {
                "unpriced".to_string()
            } else {
                format!("${:.5}", cost.usd)
            }
        ),
        EventData::CostRecorded {
            agent: ctx.agent().to_string(),
            model: outcome.model.model.clone(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cost_usd: cost.usd,
        },
    );
    Ok(())
}

/// Where streamed partial answers go.
struct PartialSink {
    registry: crate::registry::Registry,
    template: Outbound,
}

fn ctx_outbound(ctx: &RunCtx) -> PartialSink {
    PartialSink {
        registry: ctx.runtime.registry.clone(),
        template: Outbound {
            agent: ctx.agent().to_string(),
            chat: ctx.chat.clone(),
            run_id: Some(ctx.run_id),
            correlation: ctx.correlation.clone(),
            event: OutEvent::Working,
        },
    }
}

/// Forwards the streamed text to the channel, at most every 150 ms (channels pace their own edits).
async fn forward_partials(
    sink: PartialSink,
    mut deltas: tokio::sync::mpsc::UnboundedReceiver<StreamDelta>,
) {
    const EVERY: Duration = Duration::from_millis(150);
    let mut text = String::new();
    let mut last_sent = Instant::now() - EVERY;
    let mut dirty = false;
    let send = |text: &str| {
        let mut outbound = sink.template.clone();
        outbound.event = OutEvent::Partial {
            text: text.to_string(),
        };
        crate::channels::deliver(&sink.registry, outbound);
    };
    while let Some(delta) = deltas.recv().await {
        match delta {
            StreamDelta::Text(piece) => {
                text.push_str(&piece);
                dirty = true;
            }
            StreamDelta::Reset => {
                text.clear();
                dirty = false;
            }
        }
        if dirty && last_sent.elapsed() >= EVERY {
            send(&text);
            last_sent = Instant::now();
            dirty = false;
        }
    }
    if dirty && !text.is_empty() {
        send(&text);
    }
}

/// Writes the run's end, the answer and (for Telegram) its outbox row in one transaction, then
/// hands the answer to the channel.
async fn finish(ctx: &RunCtx, ending: Ending, limiter: RateLimiter) -> RunReport {
    let (status, text, kind) = match ending {
        Ending::Answer(text) => (RunStatus::Succeeded, text, EventKindRow::Assistant),
        Ending::Stopped(status, text) => (status, text, EventKindRow::Notice),
    };
    let (session_id, run_id) = (ctx.session_id, ctx.run_id);
    let agent = ctx.agent().to_string();
    let chat = ctx.chat.as_str().to_string();
    let needs_outbox = ctx.chat.kind() == ChatKind::Telegram;
    let voice_replies = ctx.runtime.spec.voice_replies;
    let stored_text = text.clone();
    let now = crate::clock::now_ms();
    let written = ctx
        .runtime
        .store
        .write(move |conn| {
            sessions::append(
                conn,
                session_id,
                &NewEvent {
                    kind,
                    sender: None,
                    content: &stored_text,
                    data: None,
                    run_id: Some(run_id),
                    inbound_id: None,
                },
                now,
            )?;
            runs::finish(conn, run_id, status, &stored_text, now)?;
            if !needs_outbox {
                return Ok(None);
            }
            let answered = sessions::run_events(conn, run_id)?;
            let inbound_ids: Vec<i64> = answered
                .iter()
                .filter_map(|event| event.inbound_id)
                .collect();
            let id = outbox::enqueue_reply(
                conn,
                &agent,
                &chat,
                Some(run_id),
                &stored_text,
                &inbound_ids,
                now,
            )?;
            if status == RunStatus::Succeeded && spoken_to(voice_replies, &answered) {
                outbox::mark_spoken(conn, id)?;
            }
            Ok(Some(id))
        })
        .await;
    let outbox_id = match written {
        Ok(outbox_id) => outbox_id,
        Err(error) => {
            // The run stays open in the database and is resumed after the next start.
            tracing::error!(run_id, %error, "could not record the end of a run");
            None
        }
    };
    ctx.runtime.events.publish_data(
        EventKind::RunFinished,
        &format!("run:{run_id}"),
        status.as_str(),
        EventData::RunFinished {
            run_id,
            agent: ctx.agent().to_string(),
            chat: ctx.chat.as_str().to_string(),
            status: status.as_str().to_string(),
        },
    );
    ctx.deliver(OutEvent::Final {
        text: text.clone(),
        outbox_id,
    });
    RunReport {
        run_id,
        status,
        answer: text,
        limiter,
    }
}
