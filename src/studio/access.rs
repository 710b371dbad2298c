//! Who may use Studio: the Host check, the login (one-time link → session cookie), the access
//! token, and the CSRF rules.
//!
//! - Host: the `Host` header must name loopback or one of the configured names (the bind address,
//!   `public_url`'s host) — a page on another site cannot reach a loopback daemon through DNS
//!   rebinding. Checked on every route but the health probes.
//! - Who is calling ([`Caller`]):
//!   - a browser session: the `clawvisor_session` cookie, set by `/login?token=...` from a one-time
//!     link (printed at boot and by `clawvisor studio-link`);
//!   - a script with the access token (`Authorization: Bearer <token>`, constant-time compared);
//!   - on loopback with no token configured, a non-browser client (no `Origin`, no
//!     `Sec-Fetch-Site`: curl, an OpenAI SDK) is let in as `open`. A browser request without a
//!     session is always refused, so a page the operator happens to visit cannot use the API.
//! - Mutations (anything but GET/HEAD): an `Origin` must be one of the allowed hosts and
//!   `Sec-Fetch-Site: cross-site` is refused; a session's mutation must also carry its CSRF token
//!   in `X-CSRF-Token`.
//!
//! `/healthz`, `/readyz` and `/metrics` are outside the guard: probes carry no credentials. The
//! console's static files are public (they hold no data).

use axum::extract::{Query, Request, State};
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

/// What the guard checks against. Built once from the config.
#[derive(Debug, Default)]
pub struct Access {
    /// The Studio access token, when one is configured.
    pub token: Option<Secret>,
    /// Host names (without port) accepted besides loopback.
    pub hosts: Vec<String>,
    /// Studio is reached over https (`public_url`): cookies are marked `Secure`.
    pub secure_cookies: bool,
    /// Studio listens on loopback only: without a token, local non-browser clients may call
    /// the API. Off loopback every call needs the token or a session, whatever the config says.
    pub loopback_bind: bool,
}

/// Who a request comes from (put in the request's extensions by the guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A logged-in browser; its CSRF token.
    Session { csrf: String },
    /// A client with the access token.
    Token,
    /// A local non-browser client on a loopback Studio without a token.
    Open,
}

impl Caller {
    pub fn via(&self) -> &'static str {
        match self {
            Caller::Session { .. } => "cookie",
            Caller::Token => "token",
            Caller::Open => "open",
        }
    }
}

impl Access {
    /// From the bind address and the public URL (either may add a host name).
    pub fn new(token: Option<Secret>, bind: std::net::SocketAddr, public_url: &str) -> Access {
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
        Access {
            token,
            hosts,
            secure_cookies: public.is_some_and(|url| url.scheme() == "https"),
            loopback_bind: bind.ip().is_loopback(),
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1") || self.hosts.contains(&name)
    }

    /// `Some(true)`: the right token; `Some(false)`: a wrong one; `None`: none given.
    fn bearer(&self, headers: &HeaderMap) -> Option<bool> {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))?;
        Some(self.token.as_ref().is_some_and(|token| {
            constant_time_eq(given.trim().as_bytes(), token.expose().as_bytes())
        }))
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
const LOG_IN: &str = "not logged in: open the login link printed when the daemon started, or run `clawvisor studio-link` on the server for a new one";

/// The middleware in front of every API route.
pub async fn guard(State(state): State<StudioState>, mut request: Request, next: Next) -> Response {
    let access = &state.access;
    if !access.host_allowed(request_host(&request)) {
        return refuse(StatusCode::MISDIRECTED_REQUEST, WRONG_HOST);
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
    let caller = match access.bearer(headers) {
        Some(true) => Caller::Token,
        Some(false) => {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "wrong access token (Authorization: Bearer ...)",
            );
        }
        None => match session(&state, headers).await {
            Ok(Some(csrf)) => Caller::Session { csrf },
            Ok(None) if access.token.is_none() && access.loopback_bind && !from_browser => {
                Caller::Open
            }
            Ok(None) if from_browser => return refuse(StatusCode::UNAUTHORIZED, LOG_IN),
            Ok(None) => {
                return refuse(
                    StatusCode::UNAUTHORIZED,
                    "missing access token (Authorization: Bearer ...), or log in with `clawvisor studio-link`",
                );
            }
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
            None,
            "0.0.0.0:7070".parse().unwrap(),
            "https://home.example:8443/",
        );
        assert!(access.host_allowed("127.0.0.1:7070"));
        assert!(access.host_allowed("home.example:8443"));
        assert!(!access.host_allowed("rebind.attacker.example:7070"));
        assert!(!access.host_allowed(""));
    }
}
