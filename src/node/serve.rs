//! `clawvisor node serve`: the node's HTTPS server. One axum router behind a TLS listener that
//! requires a client certificate:
//!
//! - `POST /pair` — the daemon proves the pairing code (`pairing::accept_pairing`);
//! - `/mcp` — the MCP server (streamable HTTP, `handler::NodeHandler`);
//! - `GET /health` — version, the kernel protections this machine enforces, how many roots and
//!   connected MCP servers it lends;
//! - `POST /revoke` — the daemon forgets this node (`clawvisor nodes remove`).
//!
//! Invariant: the handshake accepts only the paired daemon's certificate, or, while a pairing
//! code is pending, any certificate — and then such a connection reaches `/pair` only: every
//! other route answers 403 unless the connection's certificate is the pinned one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::handler::{NodeHandler, NodeTools};
use super::keys::{Identity, fingerprint};
use super::pairing::{self, PairRequest};

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is on the other end of a connection.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub address: SocketAddr,
    /// The SHA-256 fingerprint of the certificate it presented.
    pub fingerprint: String,
}

/// Accepted, handshaken TLS connections, for `axum::serve`.
pub struct TlsListener {
    incoming: mpsc::Receiver<(TlsStream<TcpStream>, PeerInfo)>,
    local: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = PeerInfo;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(accepted) => accepted,
            // The accept task ended (its listener failed): serve nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(PeerInfo {
            address: self.local,
            fingerprint: String::new(),
        })
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>>
    for PeerInfo
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// Accepts TCP connections and completes their TLS handshakes concurrently; refused ones are
/// logged with their address and reason.
pub fn tls_listener(listener: TcpListener, config: rustls::ServerConfig) -> TlsListener {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let (sender, incoming) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let (tcp, address) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "node: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let (acceptor, sender) = (acceptor.clone(), sender.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let fingerprint = stream
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|chain| chain.first())
                            .map(|certificate| fingerprint(certificate.as_ref()))
                            .unwrap_or_default();
                        let peer = PeerInfo {
                            address,
                            fingerprint,
                        };
                        let _ = sender.send((stream, peer)).await;
                    }
                    Ok(Err(error)) => {
                        tracing::info!(%address, %error, "node: refused a connection at the TLS handshake");
                    }
                    Err(_) => tracing::info!(%address, "node: a TLS handshake timed out"),
                }
            });
        }
    });
    TlsListener { incoming, local }
}

/// What the routes share.
#[derive(Clone)]
struct NodeState {
    data_dir: PathBuf,
    identity: Arc<Identity>,
    tools: Arc<NodeTools>,
}

/// The handshake's rule: the paired daemon, or anyone while a pairing code is pending.
pub fn handshake_acceptor(data_dir: PathBuf) -> super::tls::Acceptor {
    Arc::new(move |seen: &str| {
        let pinned = pairing::daemon_pin(&data_dir)
            .ok()
            .flatten()
            .is_some_and(|pin| pin.fingerprint == seen);
        pinned || pairing::pending_code(&data_dir, crate::clock::now_ms()).is_some()
    })
}

/// The router of a node.
pub fn router(data_dir: PathBuf, identity: Arc<Identity>, tools: Arc<NodeTools>) -> axum::Router {
    let state = NodeState {
        data_dir,
        identity,
        tools: tools.clone(),
    };
    let mcp: StreamableHttpService<NodeHandler, LocalSessionManager> = StreamableHttpService::new(
        move || {
            Ok(NodeHandler {
                shared: tools.clone(),
            })
        },
        Default::default(),
        StreamableHttpServerConfig::default().with_sse_keep_alive(Some(Duration::from_secs(15))),
    );
    let daemon_only = axum::Router::new()
        .route("/health", get(health))
        .route("/revoke", post(revoke))
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_daemon,
        ));
    axum::Router::new()
        .route("/pair", post(pair))
        .merge(daemon_only)
        .with_state(state)
}

/// Serves until the listener fails.
pub async fn serve(listener: TlsListener, router: axum::Router) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<PeerInfo>(),
    )
    .await
}

async fn require_daemon(
    State(state): State<NodeState>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    request: Request,
    next: Next,
) -> Response {
    let paired = pairing::daemon_pin(&state.data_dir)
        .ok()
        .flatten()
        .is_some_and(|pin| pin.fingerprint == peer.fingerprint);
    if !paired {
        return (
            StatusCode::FORBIDDEN,
            "this node serves only the daemon it is paired with",
        )
            .into_response();
    }
    next.run(request).await
}

async fn pair(
    State(state): State<NodeState>,
    ConnectInfo(peer): ConnectInfo<PeerInfo>,
    Json(request): Json<PairRequest>,
) -> Response {
    let own = state.identity.fingerprint();
    match pairing::accept_pairing(
        &state.data_dir,
        &request,
        &peer.fingerprint,
        &own,
        crate::clock::now_ms(),
    ) {
        Ok(answer) => {
            tracing::info!(daemon = %peer.fingerprint, name = %request.node_name, "node: paired with a daemon");
            Json(answer).into_response()
        }
        Err(refusal) => {
            tracing::info!(address = %peer.address, %refusal, "node: refused a pairing");
            (StatusCode::FORBIDDEN, refusal).into_response()
        }
    }
}

async fn health(State(state): State<NodeState>) -> Response {
    let protections = crate::sandbox::protections();
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "fingerprint": state.identity.fingerprint(),
        "protections": protections.summary(),
        "complete": protections.complete(),
        "roots": state.tools.roots.len(),
        "mcp_servers": state.tools.upstream.connected(),
    }))
    .into_response()
}

async fn revoke(State(state): State<NodeState>) -> Response {
    match pairing::forget_daemon(&state.data_dir) {
        Ok(()) => {
            tracing::info!("node: the daemon revoked this pairing");
            (StatusCode::OK, "forgotten").into_response()
        }
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error).into_response(),
    }
}
