//! Streaming a model call's partial answer to the channel while the call runs (Telegram and the
//! local console show it as it grows; the final answer replaces it).

use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;

use super::RunCtx;
use crate::domain::{OutEvent, Outbound};
use crate::llm::StreamDelta;
use crate::reply_latency::Stage;

/// The streaming of one model call's partial answers to the channel, when the run streams.
pub(super) struct PartialStream {
    sender: Option<UnboundedSender<StreamDelta>>,
    forwarder: Option<JoinHandle<()>>,
}

impl PartialStream {
    /// Starts forwarding partial answers to `ctx`'s chat when `streaming`; otherwise streams nothing.
    pub(super) fn start(ctx: &RunCtx, streaming: bool) -> PartialStream {
        if !streaming {
            return PartialStream {
                sender: None,
                forwarder: None,
            };
        }
        let (sender, deltas) = unbounded_channel();
        PartialStream {
            sender: Some(sender),
            forwarder: Some(tokio::spawn(forward_partials(ctx_outbound(ctx), deltas))),
        }
    }

    /// Where the model call sends its deltas (`None` when the run does not stream).
    pub(super) fn sender(&self) -> Option<&UnboundedSender<StreamDelta>> {
        self.sender.as_ref()
    }

    /// Ends the stream of a call that returned: the text not yet sent still goes out.
    pub(super) async fn finish(self) {
        drop(self.sender);
        if let Some(forwarder) = self.forwarder {
            let _ = forwarder.await;
        }
    }

    /// Ends the stream of a cancelled call: nothing more is sent.
    pub(super) fn abort(self) {
        drop(self.sender);
        if let Some(forwarder) = self.forwarder {
            forwarder.abort();
        }
    }
}

/// Where streamed partial answers go.
struct PartialSink {
    registry: crate::registry::Registry,
    template: Outbound,
}

/// The sink for partial answers of `ctx`'s run.
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
async fn forward_partials(sink: PartialSink, mut deltas: UnboundedReceiver<StreamDelta>) {
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
                if text.is_empty()
                    && let Some(run_id) = sink.template.run_id
                {
                    crate::reply_latency::run_reached(run_id, Stage::FirstToken);
                }
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
