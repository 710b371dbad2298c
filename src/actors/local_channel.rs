//! LocalChannel: delivers agent output to in-process listeners — the terminal chat, Studio's chat
//! page and the OpenAI-compatible gateway — keyed by chat (`cli:`, `studio:`, `api:`).
//!
//! A listener subscribes to a chat and receives every `Outbound` for it on an unbounded channel
//! until it drops its receiver. Nothing here is durable: local chats are answered while someone
//! listens, and their transcript is in the session tables like any other.
//!
//! Restart policy: permanent (listeners resubscribe by calling `subscribe` again).

use std::collections::HashMap;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;

use crate::domain::{ChatKey, OutEvent, Outbound};
use crate::events::{EventBus, EventData, EventKind};
use crate::protocol::local::LocalChannelMsg;

#[derive(Clone)]
pub struct LocalChannelArgs {
    pub events: EventBus,
}

pub struct LocalChannel;

pub struct LocalChannelState {
    events: EventBus,
    listeners: HashMap<ChatKey, Vec<mpsc::UnboundedSender<Outbound>>>,
}

impl Actor for LocalChannel {
    type Msg = LocalChannelMsg;
    type State = LocalChannelState;
    type Arguments = LocalChannelArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: LocalChannelArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(LocalChannelState {
            events: args.events,
            listeners: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            LocalChannelMsg::Subscribe(chat, sender, reply) => {
                state.listeners.entry(chat).or_default().push(sender);
                let _ = reply.send(());
            }
            LocalChannelMsg::Deliver(outbound) => {
                if let OutEvent::Final { text, .. } = &outbound.event {
                    state.events.publish_data(
                        EventKind::MessageOut,
                        &outbound.chat.to_string(),
                        &text.chars().take(200).collect::<String>(),
                        EventData::MessageOut {
                            agent: outbound.agent.clone(),
                            chat: outbound.chat.as_str().to_string(),
                            run_id: outbound.run_id,
                        },
                    );
                }
                if let Some(listeners) = state.listeners.get_mut(&outbound.chat) {
                    listeners.retain(|listener| listener.send(outbound.clone()).is_ok());
                    if listeners.is_empty() {
                        state.listeners.remove(&outbound.chat);
                    }
                }
            }
        }
        Ok(())
    }
}
