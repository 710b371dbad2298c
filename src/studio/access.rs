//! Who may use Studio: the Host check, the login (one-time link → session cookie), the access
//! tokens, and the CSRF rules. Nothing is granted by position: not by a loopback peer address,
//! not by a missing `Origin`, not by `X-Forwarded-For`, `Forwarded` or `X-Real-IP` (none of
//! them is read). Any local user, MCP server or agent shell can open a TCP connection to a
//! loopback port, and behind a reverse proxy every caller arrives from loopback.
//!
//! - Host: the `Host` header must name loopback or one of the configured names (the bind address,
//!   `public_url`'s host) — a page on another site cannot reach a loopback daemon through DNS
//!   rebinding. Checked on every route but the health probes, `/metrics` included.
//! - Who is calling ([`Caller`]), on every API route (the OpenAI-compatible gateway and the event
//!   stream included):
//!   - a browser session: the `clawvisor_session` cookie, set by `/login?token=...` from a one-time
//!     link (`clawvisor studio-link`, or printed at boot when the daemon runs in a terminal);
//!     only the SHA-256 of links and cookies is stored (`store::studio`);
//!   - a client with an access token (`Authorization: Bearer <token>`, constant-time compared):
//!     the local token in `<data_dir>/studio.token` ([`super::token_file`], what commands on the
//!     server use), or the one configured with `[studio] token_env`;
//!   - anything else is refused with 401.
//! - Mutations (anything but GET/HEAD): an `Origin` must be one of the allowed hosts and
//!   `Sec-Fetch-Site: cross-site` is refused; a session's mutation must also carry its CSRF token
//!   in `X-CSRF-Token`.
//! - `/metrics` ([`metrics_guard`]): with `[studio] metrics_token_env` set, its token (or an access
//!   token) as Bearer; without it, open only on a loopback bind with no `public_url` (a local
//!   Prometheus scraper needs nothing), else an access token.
//!
//! - Plain HTTP from afar ([`Access::exposed`]): a request carrying a credential — a Bearer
//!   token, the session cookie or a login link — is refused when its peer is not loopback,
//!   unless TLS is terminated in front: `public_url` is `https://...` and the peer is one of the
//!   TLS proxies the operator listed in `[studio] tls_proxies` (addresses or networks). Studio
//!   itself speaks only plain HTTP, so a credential that reached it from another machine any other
//!   way crossed the network readable by anyone on the path. The operator may name peers whose
//!   hop crosses no network (`[studio] plain_http_peers`, e.g. Docker's bridge gateway for a port
//!   published on the host's loopback); they are accepted like loopback. The refusal says how to reach Studio
//!   safely; a session cookie that arrived that way is ended. A proxy on the same machine connects
//!   from loopback and needs no entry. The peer is the TCP peer (`ConnectInfo`), never a header.
//!
//! `/healthz` and `/readyz` are outside the guard: probes carry no credentials, and they say only
//! "ok", "starting" or which actor is not ready. The console's static files are public (they hold
//! no data).

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::StudioState;
use crate::secrets::Secret;
use crate::store::studio as queries;

/// The name of Studio's session cookie.
pub const SESSION_COOKIE: &str = "clawvisor_session";
/// The header a session's mutations carry their CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

pub use super::token_file::{TokenFileError, local_token};

/// What the guard checks against. Built once from the config.
#[derive(Debug, Default)]
pub struct Access {
    /// Every token accepted as `Authorization: Bearer`: the token file's and the configured one.
    pub tokens: Vec<Secret>,
    /// The token `/metrics` accepts besides the access tokens (`[studio] metrics_token_env`).
    pub metrics_token: Option<Secret>,
    /// Host names (without port) accepted besides loopback.
    pub hosts: Vec<String>,
    /// Studio is reached over https (`public_url`): cookies are marked `Secure`.
    pub secure_cookies: bool,
    /// `/metrics` answers without a token: Studio binds to loopback, no `public_url` says a proxy
    /// forwards to it, and no metrics token is configured.
    pub metrics_open: bool,
    /// Peers that terminate TLS in front of Studio (`[studio] tls_proxies`); they count only
    /// with an `https://` `public_url`.
    pub tls_proxies: Vec<ipnet::IpNet>,
    /// Peers the operator lets send credentials over plain HTTP though they are not loopback
    /// (`[studio] plain_http_peers`: a hop that crosses no network, like Docker's bridge gateway
    /// for a port published on the host's loopback).
    pub plain_http_peers: Vec<ipnet::IpNet>,
}

/// Who a request comes from (put in the request's extensions by the guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A logged-in browser; its CSRF token.
    Session { csrf: String },
    /// A client with an access token.
    Token,
}

impl Caller {
    pub fn via(&self) -> &'static str {
        match self {
            Caller::Session { .. } => "cookie",
            Caller::Token => "token",
        }
    }
}

impl Access {
    /// From the accepted access tokens, the metrics token, the bind address and the public URL
    /// (either may add a host name).
    pub fn new(
        tokens: Vec<Secret>,
        metrics_token: Option<Secret>,
        bind: std::net::SocketAddr,
        public_url: &str,
    ) -> Access {
        let mut hosts = Vec::new();
        if !bind.ip().is_unspecified() && !bind.ip().is_loopback() {
            hosts.push(bind.ip().to_string());
        }
        let public = url::Url::parse(public_url).ok();
        if let Some(host) = public
            .as_ref()
            .and_then(|url| url.host_str().map(str::to_string))
        {
            hosts.push(host.trim_matches(['[', ']']).to_ascii_lowercase());
        }
        let metrics_open =
            metrics_token.is_none() && bind.ip().is_loopback() && public_url.trim().is_empty();
        Access {
            tokens,
            metrics_token,
            hosts,
            secure_cookies: public.is_some_and(|url| url.scheme() == "https"),
            metrics_open,
            tls_proxies: Vec::new(),
            plain_http_peers: Vec::new(),
        }
    }

    /// The same, with the TLS proxies of `[studio] tls_proxies`.
    pub fn with_tls_proxies(mut self, tls_proxies: Vec<ipnet::IpNet>) -> Access {
        self.tls_proxies = tls_proxies;
        self
    }

    /// The same, with the peers of `[studio] plain_http_peers`.
    pub fn with_plain_http_peers(mut self, peers: Vec<ipnet::IpNet>) -> Access {
        self.plain_http_peers = peers;
        self
    }

    /// Whether a credential from `peer` crossed a network in plain text: the peer is not
    /// loopback, and it is not a listed TLS proxy of an `https://` `public_url`. A request without
    /// a peer address (an in-process call of the router) crossed no network.
    pub fn exposed(&self, peer: Option<SocketAddr>) -> bool {
        let Some(peer) = peer else {
            return false;
        };
        let ip = match peer.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        if ip.is_loopback() || self.plain_http_peers.iter().any(|net| net.contains(&ip)) {
            return false;
        }
        let behind_tls =
            self.secure_cookies && self.tls_proxies.iter().any(|net| net.contains(&ip));
        !behind_tls
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1") || self.hosts.contains(&name)
    }

    /// `Some(true)`: an accepted token; `Some(false)`: a wrong one; `None`: none given.
    fn bearer(&self, headers: &HeaderMap, also: Option<&Secret>) -> Option<bool> {
        let given = bearer_token(headers)?;
        Some(
            self.tokens
                .iter()
                .chain(also)
                .any(|token| constant_time_eq(given.as_bytes(), token.expose().as_bytes())),
        )
    }

    /// The `Set-Cookie` value for a new session.
    pub fn session_cookie(&self, secret: &str, max_age_secs: i64) -> String {
        let secure = if self.secure_cookies { "; Secure" } else { "" };
        format!(
            "{SESSION_COOKIE}={secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_secs}{secure}"
        )
    }
}

/// `example.com:7070` → `example.com`; `[::1]:7070` → `::1`.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(host, |(name, _)| name)
    };
    name.to_ascii_lowercase()
}

/// The token of an `Authorization: Bearer <token>` header, if the request has one.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(serde_json::json!({"error": {"message": message}})),
    )
        .into_response()
}

fn request_host(request: &Request) -> &str {
    request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        })
        .unwrap_or("")
}

const WRONG_HOST: &str = "this Host is not served here; use the address Studio is configured with";
const LOG_IN: &str =
    "not logged in: run `clawvisor studio-link` on the server and open the login link it prints";
const NO_TOKEN: &str = "missing access token: send `Authorization: Bearer <token>` with the token in <data_dir>/studio.token (or the one in [studio] token_env), or log in with `clawvisor studio-link`";
const WRONG_TOKEN: &str = "wrong access token (Authorization: Bearer ...)";
/// The refusal of a credential sent over plain HTTP from another machine.
const PLAIN_HTTP: &str = "refused: this request carried a Studio token, session or login link over plain HTTP from another machine, where anyone on the way can read it. Reach Studio over HTTPS: put a TLS-terminating proxy in front, set [studio] public_url to its https:// address and, unless the proxy runs on this machine, list its address in [studio] tls_proxies; or use an SSH tunnel to 127.0.0.1 (in a container whose port is published on the host's loopback only, list the bridge gateway in [studio] plain_http_peers). A session sent this way has been ended (log in again); a token sent this way should be replaced (delete <data_dir>/studio.token and restart, or change the value of [studio] token_env).";

/// The TCP peer of a request (set by the server's `ConnectInfo`).
fn peer(request: &Request) -> Option<SocketAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(address)| *address)
}

/// Refuses a request whose credential came over plain HTTP from afar, ending the session its
/// cookie names (the cookie is no longer a secret).
async fn refuse_exposed(
    state: &StudioState,
    headers: &HeaderMap,
    from: Option<SocketAddr>,
) -> Response {
    tracing::warn!(
        peer = ?from,
        "studio: refused a credential sent over plain HTTP from another machine"
    );
    if let Some(cookie) = cookie(headers, SESSION_COOKIE).map(str::to_string) {
        let now = crate::clock::now_ms();
        if let Err(error) = state
            .store
            .write(move |conn| queries::end_session(conn, &cookie, now))
            .await
        {
            tracing::warn!(%error, "studio: ending an exposed session failed");
        }
    }
    refuse(StatusCode::FORBIDDEN, PLAIN_HTTP)
}

/// Whether the request carries a credential: a Bearer token or the session cookie.
fn carries_credential(headers: &HeaderMap) -> bool {
    bearer_token(headers).is_some() || cookie(headers, SESSION_COOKIE).is_some()
}

/// The middleware in front of every API route.
pub async fn guard(State(state): State<StudioState>, mut request: Request, next: Next) -> Response {
    let access = &state.access;
    if !access.host_allowed(request_host(&request)) {
        return refuse(StatusCode::MISDIRECTED_REQUEST, WRONG_HOST);
    }
    if carries_credential(request.headers()) && access.exposed(peer(&request)) {
        return refuse_exposed(&state, request.headers(), peer(&request)).await;
    }
    let headers = request.headers();
    let mutation = !matches!(*request.method(), Method::GET | Method::HEAD);
    let from_browser =
        headers.contains_key("sec-fetch-site") || headers.contains_key(header::ORIGIN);
    if mutation {
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|site| site == "cross-site");
        let foreign_origin = headers
            .get(header::ORIGIN)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|origin| {
                let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest);
                !access.host_allowed(authority)
            });
        if cross_site || foreign_origin {
            return refuse(
                StatusCode::FORBIDDEN,
                "cross-site request refused (CSRF protection)",
            );
        }
    }
    let caller = match access.bearer(headers, None) {
        Some(true) => Caller::Token,
        Some(false) => return refuse(StatusCode::UNAUTHORIZED, WRONG_TOKEN),
        None => match session(&state, headers).await {
            Ok(Some(csrf)) => Caller::Session { csrf },
            Ok(None) if from_browser => return refuse(StatusCode::UNAUTHORIZED, LOG_IN),
            Ok(None) => return refuse(StatusCode::UNAUTHORIZED, NO_TOKEN),
            Err(response) => return response,
        },
    };
    if mutation && let Caller::Session { csrf } = &caller {
        let given = request
            .headers()
            .get(CSRF_HEADER)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), csrf.as_bytes()) {
            return refuse(
                StatusCode::FORBIDDEN,
                "missing or wrong X-CSRF-Token: reload the page and try again",
            );
        }
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// The middleware in front of `/metrics`: the Host check, then the metrics token or an access
/// token, unless metrics are open (loopback bind, no `public_url`, no metrics token).
pub async fn metrics_guard(
    State(state): State<StudioState>,
    request: Request,
    next: Next,
) -> Response {
    let access = &state.access;
    if !access.host_allowed(request_host(&request)) {
        return refuse(StatusCode::MISDIRECTED_REQUEST, WRONG_HOST);
    }
    if carries_credential(request.headers()) && access.exposed(peer(&request)) {
        return refuse_exposed(&state, request.headers(), peer(&request)).await;
    }
    match access.bearer(request.headers(), access.metrics_token.as_ref()) {
        Some(true) => next.run(request).await,
        Some(false) => refuse(StatusCode::UNAUTHORIZED, WRONG_TOKEN),
        None if access.metrics_open => next.run(request).await,
        None if access.metrics_token.is_some() => refuse(
            StatusCode::UNAUTHORIZED,
            "missing metrics token: send `Authorization: Bearer <token>` with the token in [studio] metrics_token_env",
        ),
        None => refuse(
            StatusCode::UNAUTHORIZED,
            "missing token: /metrics is open only on a loopback Studio without public_url; set [studio] metrics_token_env and send it as `Authorization: Bearer <token>`",
        ),
    }
}

/// The CSRF token of the request's live session, if it has one.
async fn session(state: &StudioState, headers: &HeaderMap) -> Result<Option<String>, Response> {
    let Some(cookie) = cookie(headers, SESSION_COOKIE).map(str::to_string) else {
        return Ok(None);
    };
    let now = crate::clock::now_ms();
    state
        .store
        .read(move |conn| queries::session_csrf(conn, &cookie, now))
        .await
        .map_err(|error| {
            tracing::warn!(%error, "studio: session lookup failed");
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database could not answer; see the daemon's log",
            )
        })
}

/// The address operators reach Studio at: `public_url` when set, else the bound address
/// (a wildcard bind is shown as loopback).
pub fn base_url(public_url: &str, bound: std::net::SocketAddr) -> String {
    let public_url = public_url.trim().trim_end_matches('/');
    if !public_url.is_empty() {
        return public_url.to_string();
    }
    let ip = match bound.ip() {
        ip if ip.is_unspecified() => std::net::IpAddr::from([127, 0, 0, 1]),
        ip => ip,
    };
    format!("http://{}", std::net::SocketAddr::new(ip, bound.port()))
}

/// Creates a one-time login link (valid for 15 minutes) under `base`.
pub async fn login_link(
    store: &crate::store::Store,
    base: &str,
    created_by: &'static str,
) -> crate::store::Result<String> {
    let now = crate::clock::now_ms();
    let secret = store
        .write(move |conn| queries::create_login_link(conn, created_by, now))
        .await?;
    Ok(format!("{base}/login?token={secret}"))
}

#[derive(Deserialize)]
pub struct LoginQuery {
    token: Option<String>,
}

/// `GET /login?token=...`: redeems a one-time login link, sets the session cookie and goes to the
/// console.
pub async fn login(
    State(state): State<StudioState>,
    Query(query): Query<LoginQuery>,
    request: Request,
) -> Response {
    if !state.access.host_allowed(request_host(&request)) {
        return refuse(StatusCode::MISDIRECTED_REQUEST, WRONG_HOST);
    }
    let given = query
        .token
        .as_deref()
        .is_some_and(|token| !token.is_empty());
    if (given || carries_credential(request.headers())) && state.access.exposed(peer(&request)) {
        return refuse_exposed(&state, request.headers(), peer(&request)).await;
    }
    let token = query.token.unwrap_or_default();
    let now = crate::clock::now_ms();
    let redeemed = if token.is_empty() {
        Ok(None)
    } else {
        state
            .store
            .write(move |conn| queries::redeem_login_link(conn, &token, now))
            .await
    };
    match redeemed {
        Ok(Some(session)) => {
            let cookie = state
                .access
                .session_cookie(&session.cookie, (session.expires_ms - now) / 1000);
            let mut response = Redirect::to("/").into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Ok(None) => (
            StatusCode::UNAUTHORIZED,
            Html(
                "<!doctype html><meta charset=utf-8><title>clawvisor Studio</title>\
                 <body style=\"font-family:system-ui;max-width:40em;margin:3em auto;padding:0 1em\">\
                 <h1>This login link does not work</h1>\
                 <p>Login links work once and for 15 minutes. Run <code>clawvisor studio-link</code> \
                 on the server and open the new link it prints.</p>",
            ),
        )
            .into_response(),
        Err(error) => {
            tracing::warn!(%error, "studio: login failed");
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database could not answer; see the daemon's log",
            )
        }
    }
}

/// `GET /api/v1/session`: who the caller is, and the CSRF token the console sends with mutations.
pub async fn whoami(axum::Extension(caller): axum::Extension<Caller>) -> Response {
    let csrf = match &caller {
        Caller::Session { csrf } => csrf.as_str(),
        _ => "",
    };
    axum::Json(serde_json::json!({"csrf": csrf, "via": caller.via()})).into_response()
}

/// What `GET /api/v1/session` answers.
pub fn whoami_schema() -> serde_json::Value {
    use super::openapi::{described, object, one_of, string};
    object([
        (
            "csrf",
            described(
                "sent as `X-CSRF-Token` with every mutation of a browser session (empty for a token)",
                string(),
            ),
        ),
        ("via", one_of(&["cookie", "token"])),
    ])
}

/// `POST /api/v1/session/logout`: ends the browser session.
pub async fn logout(State(state): State<StudioState>, headers: HeaderMap) -> Response {
    if let Some(cookie) = cookie(&headers, SESSION_COOKIE).map(str::to_string) {
        let now = crate::clock::now_ms();
        if let Err(error) = state
            .store
            .write(move |conn| queries::end_session(conn, &cookie, now))
            .await
        {
            tracing::warn!(%error, "studio: logout failed");
        }
    }
    let mut response = axum::Json(serde_json::json!({"ok": true})).into_response();
    if let Ok(value) = HeaderValue::from_str(&state.access.session_cookie("", 0)) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// What `POST /api/v1/session/logout` answers.
pub fn logout_schema() -> serde_json::Value {
    super::openapi::object([("ok", super::openapi::boolean())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_read_without_their_port() {
        for (host, expected) in [
            ("127.0.0.1:7070", "127.0.0.1"),
            ("localhost", "localhost"),
            ("[::1]:80", "::1"),
            ("Example.COM:7070", "example.com"),
            ("evil.example", "evil.example"),
        ] {
            assert_eq!(host_name(host), expected, "{host}");
        }
    }

    #[test]
    fn loopback_and_configured_hosts_are_allowed_others_not() {
        let access = Access::new(
            Vec::new(),
            None,
            "0.0.0.0:7070".parse().unwrap(),
            "https://home.example:8443/",
        );
        assert!(access.host_allowed("127.0.0.1:7070"));
        assert!(access.host_allowed("home.example:8443"));
        assert!(!access.host_allowed("rebind.attacker.example:7070"));
        assert!(!access.host_allowed(""));
    }

    #[test]
    fn credentials_count_as_exposed_only_from_afar_without_a_tls_proxy() {
        let peer = |text: &str| Some(text.parse::<SocketAddr>().unwrap());
        let plain = Access::new(Vec::new(), None, "0.0.0.0:7070".parse().unwrap(), "");
        assert!(!plain.exposed(None));
        assert!(!plain.exposed(peer("127.0.0.1:5000")));
        assert!(!plain.exposed(peer("[::1]:5000")));
        assert!(!plain.exposed(peer("[::ffff:127.0.0.1]:5000")));
        assert!(plain.exposed(peer("192.168.1.20:5000")));
        let proxies = vec!["10.0.0.0/24".parse().unwrap()];
        let https = Access::new(
            Vec::new(),
            None,
            "0.0.0.0:7070".parse().unwrap(),
            "https://home.example",
        )
        .with_tls_proxies(proxies.clone());
        assert!(!https.exposed(peer("10.0.0.7:5000")));
        assert!(https.exposed(peer("10.0.1.7:5000")));
        // A proxy counts only when the public address is https.
        let http_public = Access::new(
            Vec::new(),
            None,
            "0.0.0.0:7070".parse().unwrap(),
            "http://home.example",
        )
        .with_tls_proxies(proxies);
        assert!(http_public.exposed(peer("10.0.0.7:5000")));
        // A peer the operator accepts plain HTTP from (Docker's bridge gateway).
        let bridge = Access::new(Vec::new(), None, "0.0.0.0:7070".parse().unwrap(), "")
            .with_plain_http_peers(vec!["172.17.0.1".parse::<IpAddr>().unwrap().into()]);
        assert!(!bridge.exposed(peer("172.17.0.1:5000")));
        assert!(bridge.exposed(peer("172.17.0.2:5000")));
    }

    #[test]
    fn metrics_are_open_only_on_a_loopback_bind_without_a_proxy_or_a_metrics_token() {
        let open = |bind: &str, public_url: &str, token: Option<Secret>| {
            Access::new(Vec::new(), token, bind.parse().unwrap(), public_url).metrics_open
        };
        assert!(open("127.0.0.1:7070", "", None));
        assert!(!open("127.0.0.1:7070", "https://home.example", None));
        assert!(!open("0.0.0.0:7070", "", None));
        assert!(!open(
            "127.0.0.1:7070",
            "",
            Some(Secret::new("a-metrics-token-0123456789"))
        ));
    }
}
