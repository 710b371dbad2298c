//! One model call of a run: the prompt composed from the layers and the conversation, the call
//! through the fallback chain (streamed to the channel when the run streams, cut short by
//! `/stop`), and its record — the failed fallbacks, the answering model's step, usage and cost.

use std::ops::ControlFlow;
use std::time::Instant;

use serde_json::json;

use super::streaming::PartialStream;
use super::{Ending, RunCtx, layers};
use crate::agent::composer::compose;
use crate::agent::transcript::estimate_tokens;
use crate::domain::ChatKind;
use crate::events::{EventData, EventKind};
use crate::llm::{
    ChatMessage, ChatRequest, ChatResponse, FallbackOutcome, LlmError, ModelRef, ToolSpec,
    chat_with_fallback,
};
use crate::store::StoreError;
use crate::store::runs::{self, NewStep, RunStatus};

/// What every model call of a run shares: the tools offered, the tokens kept free of the prompt,
/// the fallback chain and whether partial answers are streamed.
pub(super) struct ModelSetup {
    tool_specs: Vec<ToolSpec>,
    reserved: usize,
    chain: Vec<ModelRef>,
    streaming: bool,
}

impl ModelSetup {
    /// The setup of `ctx`'s run (whether its answer is spoken is read from the store).
    pub(super) async fn for_run(ctx: &RunCtx) -> ModelSetup {
        let spec = &ctx.runtime.spec;
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
            && !super::spoken::answer_is_spoken(ctx).await;
        ModelSetup {
            tool_specs,
            reserved,
            chain,
            streaming,
        }
    }

    /// Asks the model for the next turn of the conversation and records the call. Breaks with the
    /// run's ending when the run is cancelled meanwhile or no model of the chain answered.
    pub(super) async fn ask(
        &self,
        ctx: &RunCtx,
        recap: Option<&str>,
        conversation: &[ChatMessage],
    ) -> Result<ControlFlow<Ending, ChatResponse>, StoreError> {
        let layers = layers::layers(ctx, recap, conversation).await;
        let composed = compose(
            &layers,
            conversation,
            ctx.runtime.spec.context_tokens as usize,
            self.reserved,
        );
        let request = ChatRequest {
            model: String::new(),
            messages: composed.messages,
            tools: self.tool_specs.clone(),
            temperature: None,
            max_tokens: None,
        };
        let started = Instant::now();
        let Some(result) = self.call_chain(ctx, request).await else {
            return Ok(ControlFlow::Break(Ending::cancelled()));
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => {
                return Ok(ControlFlow::Break(
                    self.unreachable(ctx, error, duration_ms).await,
                ));
            }
        };
        record_fallbacks(ctx, &outcome.failed).await;
        record_model_call(
            ctx,
            &outcome,
            composed.estimated_tokens,
            composed.dropped_layers,
            duration_ms,
        )
        .await?;
        Ok(ControlFlow::Continue(outcome.response))
    }

    /// Calls the chain, streaming the partial answer when the run streams; `None` when the run is
    /// cancelled before the call returns.
    async fn call_chain(
        &self,
        ctx: &RunCtx,
        request: ChatRequest,
    ) -> Option<Result<FallbackOutcome, LlmError>> {
        // A turn first (`[sessions] max_model_calls`): under a burst, runs queue here.
        let _turn = tokio::select! {
            turn = ctx.runtime.model_calls.turn() => turn,
            _ = ctx.cancel.cancelled() => return None,
        };
        let stream = PartialStream::start(ctx, self.streaming);
        let call = chat_with_fallback(
            &ctx.runtime.providers,
            &self.chain,
            request,
            stream.sender(),
        );
        let result = tokio::select! {
            result = call => result,
            _ = ctx.cancel.cancelled() => {
                stream.abort();
                return None;
            }
        };
        stream.finish().await;
        // A call that did not stream: its whole answer is its first token.
        crate::reply_latency::run_reached(ctx.run_id, crate::reply_latency::Stage::FirstToken);
        Some(result)
    }

    /// Records that no model of the chain could be reached; the run's ending says so.
    async fn unreachable(&self, ctx: &RunCtx, error: LlmError, duration_ms: u64) -> Ending {
        let text = crate::secrets::redact(&error.to_string()).into_owned();
        ctx.record_step(NewStep {
            kind: "error",
            name: Some("llm".into()),
            detail: json!({"error": text, "models": self.chain.iter().map(|m| format!("{}/{}", m.provider, m.model)).collect::<Vec<_>>()}),
            duration_ms: Some(duration_ms),
            ..NewStep::default()
        })
        .await;
        Ending::Stopped(
            RunStatus::Failed,
            format!(
                "I could not reach the model right now ({text}). Your message is saved; please try again later."
            ),
        )
    }
}

/// Records each model of the chain that failed before one answered.
async fn record_fallbacks(ctx: &RunCtx, failed: &[(ModelRef, LlmError)]) {
    for (model, error) in failed {
        ctx.record_step(NewStep {
            kind: "error",
            name: Some(format!("{}/{}", model.provider, model.model)),
            detail: json!({"error": crate::secrets::redact(&error.to_string()), "fallback": true}),
            ..NewStep::default()
        })
        .await;
    }
}

/// Records the answering model's call: its step, the run's usage and the cost, in one
/// transaction; then announces the cost.
async fn record_model_call(
    ctx: &RunCtx,
    outcome: &FallbackOutcome,
    prompt_tokens: usize,
    dropped_layers: Vec<&'static str>,
    duration_ms: u64,
) -> Result<(), StoreError> {
    let usage = outcome.response.usage;
    let model = outcome.model.model.clone();
    let provider = outcome.model.provider.clone();
    let call = super::priced_usage(&ctx.runtime, outcome);
    let step = NewStep {
        kind: "llm",
        name: Some(format!("{provider}/{model}")),
        detail: json!({
            "prompt_tokens_estimated": prompt_tokens,
            "dropped_layers": dropped_layers,
            "finish": format!("{:?}", outcome.response.finish),
            "tool_calls": outcome.response.tool_calls.iter().map(|call| &call.name).collect::<Vec<_>>(),
            "unpriced": call.unpriced,
        }),
        tokens_in: Some(usage.input_tokens),
        tokens_out: Some(usage.output_tokens),
        cost_usd: Some(call.cost_usd),
        duration_ms: Some(duration_ms),
    };
    let (run_id, agent) = (ctx.run_id, ctx.agent().to_string());
    let now = crate::clock::now_ms();
    // Recoverable: a power cut that loses it loses the run's progress since its last durable
    // step too, and the call is made (and recorded) again. A busy or holding store makes the run
    // wait here rather than fail (another process may hold the database for a moment).
    let what = format!("the model call of run {run_id}");
    ctx.runtime
        .store
        .write_recoverable_until_committed(&what, || {
            let (step, model, provider, agent) =
                (step.clone(), model.clone(), provider.clone(), agent.clone());
            move |conn: &rusqlite::Connection| {
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
            }
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
            if call.unpriced {
                "unpriced".to_string()
            } else {
                format!("${:.5}", call.cost_usd)
            }
        ),
        EventData::CostRecorded {
            agent: ctx.agent().to_string(),
            model: outcome.model.model.clone(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cost_usd: call.cost_usd,
        },
    );
    Ok(())
}
