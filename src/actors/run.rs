//! Run: one turn of an agent — the agent loop (`agent::run::execute`) from the session's pending
//! messages to a final answer.
//!
//! Temporary child of its Session: it executes once and stops. A panic inside the loop is a
//! supervision event for the session, which records the run as failed and tells the user; it is
//! never retried blindly (the loop may have had effects). Cancellation (`/stop`) goes through the
//! run's `CancellationToken`, which the session holds.

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::session::SessionMsg;
use crate::agent::run::{RunRequest, execute};

pub enum RunMsg {
    /// Sent to itself once started: execute the loop.
    Execute,
}

pub struct RunArgs {
    pub request: RunRequest,
    pub session: ActorRef<SessionMsg>,
}

pub struct RunActor;

pub struct RunState {
    request: Option<RunRequest>,
    session: ActorRef<SessionMsg>,
}

impl Actor for RunActor {
    type Msg = RunMsg;
    type State = RunState;
    type Arguments = RunArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: RunArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.cast(RunMsg::Execute)?;
        Ok(RunState {
            request: Some(args.request),
            session: args.session,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RunMsg::Execute => {
                if let Some(request) = state.request.take() {
                    let report = execute(request).await;
                    let _ = state.session.cast(SessionMsg::RunFinished(report));
                }
                myself.stop(None);
            }
        }
        Ok(())
    }
}
