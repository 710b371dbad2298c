//! One run: from the session's pending messages to a final answer (or a recorded reason why not).
//!
//! [`execute`] decides the run's zone (`agent::zone`) and then drives it: a paused agent or a
//! spent daily budget (`run/budget.rs`) stops it before anything runs; the run waits for its MCP
//! servers (`run/mcp_wait.rs`), opens its conversation (a resumed one through `run/resume.rs`;
//! compacted when too long) and then takes turns: prepare the turn (the budget again before each
//! further model call, the prompt's layers from `run/layers.rs`), call the model through the
//! fallback chain (`run/model.rs`, streamed by `run/streaming.rs` unless the answer is to be
//! spoken, `run/spoken.rs`), record the request for tools, and pass every call through the gate
//! and the dispatcher (`agent::dispatch`), with the loop guard watching — until a final answer,
//! a stop or a failure.
//!
//! Durability: the run row exists before the first model call; every model call, decision, tool
//! call and result is recorded as it happens; an assistant message that asks for tools is stored
//! before any of them runs. A run interrupted by a crash is therefore resumed from its last
//! recorded step (`RunRequest::resume`): calls without a recorded result are not run again (they
//! may have had effects); the model is told they were interrupted and carries on.
//!
//! The final answer, the run's end and the reply's outbox row are written in one transaction;
//! only then is the reply handed to the channel.

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::compaction;
use super::dispatch;
use super::loop_guard::{GuardStop, LoopGuard};
use super::transcript::{self, message_tokens};
use super::{AgentRuntime, AgentSettings};
use crate::domain::{ChatKey, ChatKind, OutEvent, Outbound};
use crate::events::{EventData, EventKind};
use crate::llm::{ChatMessage, ChatResponse, ToolCall};
use crate::policy::rate_limit::RateLimiter;
use crate::store::StoreError;
use crate::store::outbox;
use crate::store::runs::{self, NewStep, RunStatus};
use crate::store::sessions::{self, EventKindRow, NewEvent};
use crate::tool::ToolContext;

mod budget;
mod layers;
mod mcp_wait;
mod model;
mod resume;
mod spoken;
mod streaming;

use model::ModelSetup;

/// A model call's usage priced for the agent: what a run's model step and a compaction record.
pub(crate) fn priced_usage(
    runtime: &AgentRuntime,
    outcome: &crate::llm::FallbackOutcome,
) -> runs::CallUsage {
    let usage = outcome.response.usage;
    let cost = runtime
        .prices
        .cost(&outcome.model.provider, &outcome.model.model, &usage);
    runs::CallUsage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cost_usd: cost.usd,
        unpriced: cost.unpriced,
    }
}
use spoken::spoken_to;

/// What started the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Message,
    Schedule,
    Handoff,
    /// A webhook trigger's delivery (`trigger:<name>`).
    Webhook,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Message => "message",
            Trigger::Schedule => "schedule",
            Trigger::Handoff => "handoff",
            Trigger::Webhook => "webhook",
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

impl Ending {
    /// The ending of a run stopped by `/stop`.
    fn cancelled() -> Ending {
        Ending::Stopped(RunStatus::Cancelled, "Stopped.".into())
    }
}

/// Executes one run, from its pending messages to its ending (a `debug` span per run).
#[tracing::instrument(level = "debug", name = "run", skip_all, fields(run_id = request.run_id))]
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
        egress: Default::default(),
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
    if !matches!(
        ctx.chat.kind(),
        ChatKind::Schedule | ChatKind::Handoff | ChatKind::Trigger
    ) {
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

/// Takes the run from its conversation to its ending: it does not start when the agent is paused
/// or over budget; otherwise it waits for the MCP servers, opens the conversation and takes turns
/// with the model.
async fn drive(
    ctx: &mut RunCtx,
    limiter: &mut RateLimiter,
    context: Option<Vec<ChatMessage>>,
    resume: bool,
) -> Result<Ending, StoreError> {
    if let Some(ending) = refusal_to_start(ctx, resume).await? {
        return Ok(ending);
    }
    // Before anything uses the tools (a resumed run's waiting calls included).
    mcp_wait::wait_for_servers(ctx).await;
    let ctx: &RunCtx = ctx;
    let guard = LoopGuard::new(ctx.settings.autonomy);
    let (recap, conversation) = open_conversation(ctx, &guard, limiter, context, resume).await?;
    let turns = Turns {
        ctx,
        limiter,
        guard,
        model: ModelSetup::for_run(ctx).await,
        recap,
        conversation,
        model_calls: 0,
    };
    turns.run().await
}

/// Why the run does not start at all: its agent is paused, or (a new run only) a budget is spent.
async fn refusal_to_start(ctx: &RunCtx, resume: bool) -> Result<Option<Ending>, StoreError> {
    if ctx.settings.paused {
        return Ok(Some(Ending::Stopped(
            RunStatus::Cancelled,
            format!(
                "{} is paused by the operator, so nothing was run; try again when it is resumed.",
                ctx.runtime.spec.name
            ),
        )));
    }
    if resume {
        return Ok(None);
    }
    budget::check(ctx, budget::When::BeforeRun).await
}

/// The recap and conversation the run starts from: the caller's, or the stored one — taken up
/// again after a restart, and compacted when it has grown too long.
async fn open_conversation(
    ctx: &RunCtx,
    guard: &LoopGuard,
    limiter: &mut RateLimiter,
    context: Option<Vec<ChatMessage>>,
    resume: bool,
) -> Result<(Option<String>, Vec<ChatMessage>), StoreError> {
    let stateless = context.is_some();
    let (mut recap, mut conversation) = match context {
        Some(messages) => (None, messages),
        None => load_conversation(ctx).await?,
    };
    if resume {
        (recap, conversation) = resume::resume_run(ctx, guard, limiter).await?;
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
    Ok((recap, conversation))
}

/// The state of a run's turns with the model: the conversation so far and what each turn needs.
struct Turns<'a> {
    ctx: &'a RunCtx,
    limiter: &'a mut RateLimiter,
    guard: LoopGuard,
    model: ModelSetup,
    recap: Option<String>,
    conversation: Vec<ChatMessage>,
    model_calls: u32,
}

impl Turns<'_> {
    /// Takes turns — prepare, call the model, record its request for tools, dispatch them — until
    /// the model answers without tools or something stops the run.
    async fn run(mut self) -> Result<Ending, StoreError> {
        loop {
            if let ControlFlow::Break(ending) = self.prepare_turn().await? {
                return Ok(ending);
            }
            // What the model has seen so far decides whether a fetch could carry private data.
            (self.ctx.tools.egress).observe(&self.conversation, self.recap.is_some());
            let asked = self
                .model
                .ask(self.ctx, self.recap.as_deref(), &self.conversation);
            let response = match asked.await? {
                ControlFlow::Continue(response) => response,
                ControlFlow::Break(ending) => return Ok(ending),
            };
            if response.tool_calls.is_empty() {
                return Ok(final_answer(response));
            }
            self.record_tool_request(&response).await?;
            if let ControlFlow::Break(ending) = self.dispatch_tools(&response.tool_calls).await? {
                return Ok(ending);
            }
        }
    }

    /// The checks before a model call: `/stop`, the budgets (from the second call on) and the
    /// loop guard's turn limit.
    async fn prepare_turn(&mut self) -> Result<ControlFlow<Ending>, StoreError> {
        if self.ctx.cancel.is_cancelled() {
            return Ok(ControlFlow::Break(Ending::cancelled()));
        }
        // A run that used up a budget stops at its next model call, not only the next run.
        if self.model_calls > 0
            && let Some(ending) = budget::check(self.ctx, budget::When::MidRun).await?
        {
            return Ok(ControlFlow::Break(ending));
        }
        self.model_calls += 1;
        if let Err(stop) = self.guard.before_turn() {
            return Ok(ControlFlow::Break(guard_stop(self.ctx, stop).await));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Stores the model's request for tools in the transcript and adds it to the conversation.
    async fn record_tool_request(&mut self, response: &ChatResponse) -> Result<(), StoreError> {
        let ctx = self.ctx;
        // Store the request for tools before any of them runs (secrets in it redacted; the
        // dispatcher refuses the calls that carry one).
        let recorded_calls = dispatch::redacted_calls(&response.tool_calls);
        let content = crate::secrets::redact(&response.text).into_owned();
        let assistant = ChatMessage::assistant_tool_calls(content.clone(), recorded_calls.clone());
        let data = transcript::tool_calls_data(&recorded_calls);
        let (session_id, run_id) = (ctx.session_id, ctx.run_id);
        let now = crate::clock::now_ms();
        // A busy or holding store makes the run wait here rather than fail.
        let what = format!("the tool request of run {run_id}");
        ctx.runtime
            .store
            .write_until_committed(&what, || {
                let (content, data) = (content.clone(), data.clone());
                move |conn: &rusqlite::Connection| {
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
                }
            })
            .await?;
        self.conversation.push(assistant);
        Ok(())
    }

    /// Runs the requested calls and adds their results to the conversation; stops the run when it
    /// was cancelled meanwhile or the loop guard says so.
    async fn dispatch_tools(
        &mut self,
        calls: &[ToolCall],
    ) -> Result<ControlFlow<Ending>, StoreError> {
        let results = dispatch::dispatch(self.ctx, &self.guard, self.limiter, calls).await?;
        let failed = results
            .iter()
            .filter(|result| result.output.is_error)
            .count();
        for result in &results {
            self.conversation.push(ChatMessage::tool_result(
                &result.call,
                transcript::wrap_tool_output(
                    &result.call.name,
                    &result.output.text,
                    result.output.is_error,
                ),
            ));
        }
        if self.ctx.cancel.is_cancelled() {
            return Ok(ControlFlow::Break(Ending::cancelled()));
        }
        if let Err(stop) = self.guard.after_calls(calls, failed) {
            return Ok(ControlFlow::Break(guard_stop(self.ctx, stop).await));
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// The run's answer from a response without tool calls (a note in its place when it is empty).
fn final_answer(response: ChatResponse) -> Ending {
    let text = response.text.trim().to_string();
    if !text.is_empty() {
        return Ending::Answer(text);
    }
    Ending::Answer(match response.finish {
        crate::llm::FinishReason::Length => {
            "(The answer was cut off by the model's length limit.)".into()
        }
        _ => "(The model returned an empty answer.)".into(),
    })
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
    let needs_outbox = ctx.chat.kind().has_outbox();
    let voice_replies = ctx.runtime.spec.voice_replies;
    let now = crate::clock::now_ms();
    // The answer, the run's end and the outbox row land together or the run waits: a store that
    // cannot commit (disk full, read-only) holds the answer here until it can, never drops it.
    let record = || {
        let (agent, chat, stored_text) = (agent.clone(), chat.clone(), text.clone());
        move |conn: &rusqlite::Connection| {
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
        }
    };
    let written = ctx
        .runtime
        .store
        .write_until_committed(&format!("the end of run {run_id}"), record)
        .await;
    let outbox_id = match written {
        Ok(outbox_id) => {
            crate::reply_latency::run_reached(run_id, crate::reply_latency::Stage::Queued);
            outbox_id
        }
        Err(error) => {
            // The run stays open in the database and is resumed after the next start.
            tracing::error!(run_id, %error, "could not record the end of a run; it is resumed after the next start");
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
