//! Who may use Studio's API: the Host check, the access token, and the same-origin rule.
//!
//! - Host: the `Host` header must name loopback or one of the configured names (the bind address,
//!   `public_url`'s host) — a page on another site cannot reach a loopback daemon through DNS
//!   rebinding.
//! - Token: when an access token is configured (required off loopback), every API request carries
//!   it as `Authorization: Bearer <token>`; compared in constant time.
//! - Same origin: a mutation (anything but GET/HEAD) that comes with an `Origin` header, as every
//!   browser request does, must come from one of the allowed hosts; `Sec-Fetch-Site: cross-site`
//!   is refused. This is the CSRF protection for the API.
//!
//! `/healthz` and `/readyz` are outside the guard: probes carry no credentials.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::StudioState;
use crate::secrets::Secret;

/// What the guard checks against. Built once from the config.
#[derive(Debug, Default)]
pub struct Access {
    /// The Studio access token, when one is configured.
    pub token: Option<Secret>,
    /// Host names (without port) accepted besides loopback.
    pub hosts: Vec<String>,
}

impl Access {
    /// From the bind address and the public URL (either may add a host name).
    pub fn new(token: Option<Secret>, bind: std::net::SocketAddr, public_url: &str) -> Access {
        let mut hosts = Vec::new();
        if !bind.ip().is_unspecified() && !bind.ip().is_loopback() {
            hosts.push(bind.ip().to_string());
        }
        if let Some(host) = url::Url::parse(public_url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_string))
        {
            hosts.push(host.trim_matches(['[', ']']).to_ascii_lowercase());
        }
        Access { token, hosts }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1") || self.hosts.contains(&name)
    }

    fn token_ok(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .unwrap_or("");
        constant_time_eq(given.trim().as_bytes(), token.expose().as_bytes())
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

fn refuse(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(serde_json::json!({"error": {"message": message}})),
    )
        .into_response()
}

/// The middleware in front of every API route.
pub async fn guard(State(state): State<StudioState>, request: Request, next: Next) -> Response {
    let access = &state.access;
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        })
        .unwrap_or("");
    if !access.host_allowed(host) {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this Host is not served here; use the address Studio is configured with",
        );
    }
    if !access.token_ok(headers) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "missing or wrong access token (Authorization: Bearer ...)",
        );
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
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
    next.run(request).await
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
