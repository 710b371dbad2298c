//! Tokens never cross a network in plain text: the real binary with Studio bound to every
//! address, reached once over loopback and once over the machine's own non-loopback address (the
//! peer is then that address, as for a client on the network). Every credential — a Bearer token
//! on the API, the gateway and `/metrics`, a session cookie, a login link — is refused from afar
//! with what to do, and accepted over loopback; a TLS proxy the operator listed, with an `https`
//! public URL, is accepted from afar, and so is a peer listed in `plain_http_peers`.
//!
//! It needs a non-loopback IPv4 address on this machine (any container or VM has one, `eth0`);
//! without one it fails and says so rather than passing untested.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use clawvisor::testkit::process::{DaemonProcess, write_config};

const TOKEN: &str = "plain-http-test-studio-token-0123456789";

/// This machine's address on its default route (no packet is sent: a UDP `connect` only picks
/// the route).
fn non_loopback_address() -> IpAddr {
    for target in ["8.8.8.8:53", "192.0.2.1:9", "10.255.255.254:9"] {
        let Ok(socket) = UdpSocket::bind("0.0.0.0:0") else {
            continue;
        };
        if socket.connect(target).is_ok()
            && let Ok(local) = socket.local_addr()
            && !local.ip().is_loopback()
            && !local.ip().is_unspecified()
        {
            return local.ip();
        }
    }
    panic!(
        "this machine has no non-loopback IPv4 address with a route, so a request from another \
         machine cannot be simulated; run the test where one exists (any container has eth0)"
    );
}

/// One HTTP/1.1 request written by hand (so the Host header is exactly ours); the status and
/// the body.
fn request(to: SocketAddr, host: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let (method, path) = path.split_once(' ').unwrap_or(("GET", path));
    let mut stream = TcpStream::connect_timeout(&to, Duration::from_secs(10)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = if method == "POST" { "{}" } else { "" };
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if method == "POST" {
        text.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response}"));
    (status, response)
}

fn start(dir: &std::path::Path, studio: &str) -> (DaemonProcess, u16) {
    let config = format!(
        "data_dir = \"data\"\n[agents]\ndir = \"actors\"\n[studio]\nbind = \"0.0.0.0:0\"\n{studio}\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n"
    );
    write_config(dir, &config, &[]).unwrap();
    let env = BTreeMap::from([("CLAWVISOR_STUDIO_TOKEN".to_string(), TOKEN.to_string())]);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"));
    command
        .args([
            "--config",
            &dir.join("clawvisor.toml").display().to_string(),
        ])
        .args(["--log-format", "json", "serve"])
        .env("RUST_LOG", "info")
        .env("TZ", "UTC")
        .current_dir(dir);
    for (key, value) in &env {
        command.env(key, value);
    }
    let daemon = DaemonProcess::spawn(command).unwrap();
    let port = daemon
        .studio
        .as_deref()
        .and_then(|address| address.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .expect("Studio says where it listens");
    (daemon, port)
}

const REFUSED: &str = "over plain HTTP from another machine";

#[test]
fn credentials_over_plain_http_from_afar_are_refused_with_what_to_do() {
    let outside = non_loopback_address();
    let dir = tempfile::tempdir().unwrap();
    let (daemon, port) = start(dir.path(), "");
    let near = SocketAddr::from(([127, 0, 0, 1], port));
    let far = SocketAddr::new(outside, port);
    let bearer = format!("Bearer {TOKEN}");

    // Over loopback the token works.
    let (status, body) = request(
        near,
        "127.0.0.1",
        "/api/v1/session",
        &[("Authorization", &bearer)],
    );
    assert_eq!(status, 200, "{body}");

    // From afar every credential is refused, saying how to reach Studio safely.
    let cookie = "clawvisor_session=some-session-cookie-value";
    for (path, headers) in [
        ("/api/v1/session", vec![("Authorization", bearer.as_str())]),
        ("/api/v1/agents", vec![("Cookie", cookie)]),
        (
            "POST /v1/chat/completions",
            vec![("Authorization", bearer.as_str())],
        ),
        ("/metrics", vec![("Authorization", bearer.as_str())]),
        ("/login?token=a-one-time-login-link-secret", vec![]),
    ] {
        let (status, body) = request(far, "127.0.0.1", path, &headers);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains(REFUSED), "{path}: {body}");
        assert!(
            body.contains("HTTPS") && body.contains("tls_proxies"),
            "{path}: {body}"
        );
        assert!(!body.contains(TOKEN), "{path}: the answer echoes the token");
    }
    // Without a credential, the usual answer (nothing was exposed).
    let (status, body) = request(far, "127.0.0.1", "/api/v1/session", &[]);
    assert_eq!(status, 401, "{body}");
    daemon.kill();

    // Behind a TLS proxy the operator listed, with an https public URL, the token is accepted
    // from that proxy's address.
    let dir = tempfile::tempdir().unwrap();
    let (daemon, port) = start(
        dir.path(),
        &format!("public_url = \"https://studio.example\"\ntls_proxies = [\"{outside}\"]"),
    );
    let far = SocketAddr::new(outside, port);
    let (status, body) = request(
        far,
        "studio.example",
        "/api/v1/session",
        &[("Authorization", &bearer)],
    );
    assert_eq!(status, 200, "{body}");
    daemon.kill();

    // A peer the operator accepts plain HTTP from (a hop that crosses no network, like Docker's
    // bridge gateway) is treated like loopback.
    let dir = tempfile::tempdir().unwrap();
    let (daemon, port) = start(
        dir.path(),
        &format!("plain_http_peers = [\"{outside}/32\"]"),
    );
    let far = SocketAddr::new(outside, port);
    let (status, body) = request(
        far,
        "127.0.0.1",
        "/api/v1/session",
        &[("Authorization", &bearer)],
    );
    assert_eq!(status, 200, "{body}");
    daemon.kill();
}
