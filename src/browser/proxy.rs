//! The browser's egress proxy: one small HTTP proxy per Chromium, on 127.0.0.1 at a port the
//! kernel picks, started with the browser and stopped with it. Chromium is told to send
//! everything through it (`--proxy-server`, loopback included), and its sandbox lets it open TCP
//! connections to that port only (`super::launch`), so every connection a page makes — pages,
//! scripts, `fetch()`/XHR, WebSockets (`ws:`/`wss:` go through CONNECT), WebRTC's TCP relays —
//! is decided here, at the address it really uses.
//!
//! What it serves: `CONNECT host:port` tunnels and absolute-form plain HTTP requests
//! (`GET http://host/path`), through hyper (it parses the requests; this file only reads the
//! target out of the parsed request line, [`target_of`]). For each, the host is resolved ONCE
//! and every address checked with `web_fetch`'s rule (`tool::address::resolve_pinned`: public
//! addresses only, unless `[tools] web_fetch_allow_private` or a `[browser] allow_private`
//! entry allows it); the connection goes to exactly an address that was checked, never to a
//! second lookup's answer (no DNS rebinding window). A refused destination gets `403` with the
//! reason in words, and the same sentence is kept for the model (`guard::RefusalLog`).
//!
//! Invariants: the proxy never panics on what a client sends (a bad request line is a `400`
//! naming what is wrong); it only listens on loopback; dropping it stops the listener and every
//! tunnel and forwarded exchange it started.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, PROXY_AUTHORIZATION};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::guard::{GuardRules, RefusalLog, refusal_reason};
use crate::tool::address::{FetchRefusal, resolve_pinned};

/// How long a client may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to one checked address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head the proxy reads.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What goes back to Chromium: an upstream response, or the proxy's own short answer.
type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Where one request goes, read from its request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// A name, an IPv4 address, or an IPv6 address in brackets (as written in the request).
    pub host: String,
    pub port: u16,
    /// A `CONNECT` tunnel (TLS, a WebSocket, anything); else a plain HTTP request.
    pub tunnel: bool,
}

/// The target of a request the proxy received, or why it cannot be served (for a `400`).
/// `CONNECT` needs `host:port`; any other method an absolute `http://` URI.
pub fn target_of(method: &Method, uri: &Uri) -> Result<Target, String> {
    let tunnel = method == Method::CONNECT;
    if !tunnel {
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(format!(
                    "the scheme `{other}:` is not proxied; only http requests and CONNECT tunnels are"
                ));
            }
            None => {
                return Err(
                    "a request to a proxy names the whole URL (`GET http://host/path`)".to_string(),
                );
            }
        }
    }
    let Some(authority) = uri.authority() else {
        return Err("the request names no host".to_string());
    };
    let host = authority.host().to_string();
    if host.is_empty() {
        return Err("the request names no host".to_string());
    }
    let port = match (authority.port_u16(), tunnel) {
        (Some(port), _) => port,
        (None, false) => 80,
        (None, true) => return Err("a CONNECT request names the port (`host:443`)".to_string()),
    };
    if port == 0 {
        return Err("port 0 cannot be reached".to_string());
    }
    Ok(Target { host, port, tunnel })
}

/// One browser's running proxy. Dropping it stops it.
pub struct EgressProxy {
    address: SocketAddr,
    stop: CancellationToken,
}

impl EgressProxy {
    /// Listens on 127.0.0.1 (a port the kernel picks) and serves until dropped. Refusals are
    /// kept in `log`.
    pub async fn start(rules: GuardRules, log: RefusalLog) -> std::io::Result<EgressProxy> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let address = listener.local_addr()?;
        let stop = CancellationToken::new();
        let context = Arc::new(Context {
            rules,
            log,
            stop: stop.clone(),
        });
        tokio::spawn(accept_loop(listener, context));
        Ok(EgressProxy { address, stop })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Its address as Chromium's `--proxy-server` takes it.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What every connection of one proxy shares.
struct Context {
    rules: GuardRules,
    log: RefusalLog,
    stop: CancellationToken,
}

async fn accept_loop(listener: TcpListener, context: Arc<Context>) {
    loop {
        let accepted = tokio::select! {
            () = context.stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(serve_connection(stream, context.clone()));
            }
            Err(error) => {
                // Out of descriptors, or a connection reset before it was accepted: go on.
                tracing::debug!(%error, "the browser's proxy could not accept a connection");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

async fn serve_connection(stream: TcpStream, context: Arc<Context>) {
    let service_context = context.clone();
    let service = hyper::service::service_fn(move |request| {
        let context = service_context.clone();
        async move { Ok::<_, Infallible>(handle(request, context).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        // A client that stops sending after its request still gets the answer.
        .half_close(true);
    let connection = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::select! {
        () = context.stop.cancelled() => {}
        served = connection => {
            if let Err(error) = served {
                tracing::debug!(%error, "a browser proxy connection ended with an error");
            }
        }
    }
}

/// Decides one request: refused (403), unserviceable (400/502), tunnelled or forwarded.
async fn handle(request: Request<Incoming>, context: Arc<Context>) -> Response<ProxyBody> {
    let target = match target_of(request.method(), request.uri()) {
        Ok(target) => target,
        Err(reason) => {
            return answer(
                StatusCode::BAD_REQUEST,
                format!("The browser's proxy could not serve this request: {reason}."),
            );
        }
    };
    let checking = context.log.checking();
    let pinned = resolve_pinned(
        &target.host,
        target.port,
        context.rules.policy,
        &context.rules.allow_private,
    )
    .await;
    let addresses = match pinned {
        Ok(addresses) => addresses,
        // A name that does not resolve is the network's answer, not a refusal: Chromium shows
        // the page's error as usual (and its own background lookups stay out of the model's
        // way); nothing is kept for the model.
        Err(FetchRefusal::NoAddress { host }) => {
            tracing::debug!(%host, port = target.port, "the browser's proxy found no address");
            return answer(
                StatusCode::BAD_GATEWAY,
                format!("{host} does not resolve to any address."),
            );
        }
        Err(refusal) => {
            let sentence = refusal_sentence(&target, request.uri(), &refusal);
            tracing::info!(host = %target.host, port = target.port, %refusal, "the browser's proxy refused a connection");
            context.log.keep(sentence.clone());
            return answer(StatusCode::FORBIDDEN, sentence);
        }
    };
    tracing::debug!(host = %target.host, port = target.port, addresses = ?addresses, "the browser's proxy allowed a connection");
    drop(checking);
    let upstream = match connect_first(&addresses).await {
        Ok(upstream) => upstream,
        Err(error) => {
            return answer(
                StatusCode::BAD_GATEWAY,
                format!(
                    "The browser could not connect to {}:{} ({error}); the site may be down.",
                    target.host, target.port
                ),
            );
        }
    };
    if target.tunnel {
        tunnel(request, upstream, context.stop.clone())
    } else {
        forward(request, upstream, &target, context.stop.clone()).await
    }
}

/// Connects to the first of `addresses` (all checked) that answers.
async fn connect_first(addresses: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address to connect to");
    for address in addresses {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(error)) => last = error,
            Err(_) => {
                last = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{address} did not answer within {CONNECT_TIMEOUT:?}"),
                );
            }
        }
    }
    Err(last)
}

/// Answers `200` and, once hyper hands the client's connection over, copies bytes both ways
/// between it and `upstream` until either side closes or the proxy stops.
fn tunnel(
    request: Request<Incoming>,
    mut upstream: TcpStream,
    stop: CancellationToken,
) -> Response<ProxyBody> {
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(request).await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(%error, "a CONNECT tunnel was not taken up by the browser");
                return;
            }
        };
        let mut client = TokioIo::new(upgraded);
        tokio::select! {
            () = stop.cancelled() => {}
            _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        }
    });
    Response::new(empty())
}

/// Sends a plain HTTP request on to the checked `upstream` (in origin form, without the
/// proxy's own headers) and returns its response.
async fn forward(
    request: Request<Incoming>,
    upstream: TcpStream,
    target: &Target,
    stop: CancellationToken,
) -> Response<ProxyBody> {
    let failed = |error: hyper::Error| {
        answer(
            StatusCode::BAD_GATEWAY,
            format!(
                "The browser's request to {}:{} failed ({error}); the site may be down.",
                target.host, target.port
            ),
        )
    };
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(error) => return failed(error),
        };
    tokio::spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            _ = connection => {}
        }
    });
    let (mut parts, body) = request.into_parts();
    let origin_form = parts
        .uri
        .path_and_query()
        .map(|path| path.as_str())
        .unwrap_or("/");
    parts.uri = origin_form
        .parse()
        .unwrap_or_else(|_| Uri::from_static("/"));
    parts.headers.remove(PROXY_AUTHORIZATION);
    parts.headers.remove("proxy-connection");
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(response) => response.map(|body| body.boxed()),
        Err(error) => failed(error),
    }
}

/// "The page tried to connect to 127.0.0.1:9000 (…); the browser refused it: …".
fn refusal_sentence(target: &Target, uri: &Uri, refusal: &FetchRefusal) -> String {
    let what = if target.tunnel {
        format!(
            "{}:{} (an encrypted page, a WebSocket or another direct connection)",
            target.host, target.port
        )
    } else {
        let shown = crate::secrets::redact(&uri.to_string()).into_owned();
        shown.chars().take(160).collect()
    };
    format!(
        "The page tried to connect to {what}; the browser refused it: {}.",
        refusal_reason(refusal)
    )
}

/// The proxy's own short plain-text answer.
fn answer(status: StatusCode, text: String) -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(Bytes::from(text))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn empty() -> ProxyBody {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(method: &str, uri: &str) -> Result<Target, String> {
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        let uri: Uri = uri.parse().expect("a URI");
        target_of(&method, &uri)
    }

    #[test]
    fn targets_are_read_from_the_request_line() {
        let tunnel = target("CONNECT", "example.com:443").expect("a tunnel");
        assert_eq!(
            (tunnel.host.as_str(), tunnel.port, tunnel.tunnel),
            ("example.com", 443, true)
        );
        let plain = target("GET", "http://example.com/a?b").expect("a request");
        assert_eq!(
            (plain.host.as_str(), plain.port, plain.tunnel),
            ("example.com", 80, false)
        );
        let v6 = target("CONNECT", "[::1]:8080").expect("a tunnel");
        assert_eq!(v6.host, "[::1]");
        assert!(target("CONNECT", "example.com").is_err());
        assert!(target("GET", "/origin-form").is_err());
        assert!(target("GET", "https://example.com/").is_err());
        assert!(target("GET", "http://example.com:0/").is_err());
    }
}
