//! Studio: the axum server as a supervised actor.
//!
//! `post_start` binds the listener and spawns the server task (a bind failure is a supervision
//! event, not a boot failure: agents keep running while Studio retries). When the server task
//! ends by itself the actor fails, and the root restarts it. `post_stop` asks the server to stop
//! gracefully and waits a bounded time.
//!
//! Restart policy: permanent.

use std::net::SocketAddr;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::{oneshot, watch};

use crate::studio::{GRACEFUL_STOP, StudioState, router};

pub enum StudioMsg {
    /// The server task ended (with its error text).
    ServerExited(String),
}

#[derive(Clone)]
pub struct StudioArgs {
    pub bind: SocketAddr,
    pub state: StudioState,
    /// Receives the bound address (the port is chosen by the OS when `bind` ends in `:0`).
    pub bound: watch::Sender<Option<SocketAddr>>,
}

pub struct StudioActor;

pub struct StudioRunState {
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Actor for StudioActor {
    type Msg = StudioMsg;
    type State = StudioRunState;
    type Arguments = StudioArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: StudioArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let _ = myself;
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .map_err(|error| format!("studio cannot listen on {}: {error}", args.bind))?;
        let local = listener.local_addr()?;
        tracing::info!("studio listening on http://{local}");
        args.bound.send_replace(Some(local));
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let app = router(args.state);
        let notify = myself.clone();
        let server = tokio::spawn(async move {
            // The peer address lets the guard refuse credentials sent over plain HTTP from afar.
            let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
            let result = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .await;
            let text = match result {
                Ok(()) => "server stopped".to_string(),
                Err(error) => error.to_string(),
            };
            let _ = notify.cast(StudioMsg::ServerExited(text));
        });
        Ok(StudioRunState {
            stop: Some(stop_tx),
            server: Some(server),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            StudioMsg::ServerExited(text) => {
                state.server = None;
                Err(format!("studio server exited: {text}").into())
            }
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(stop) = state.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = state.server.take()
            && tokio::time::timeout(GRACEFUL_STOP, server).await.is_err()
        {
            tracing::warn!("studio did not stop in time");
        }
        Ok(())
    }
}
