//! Target `browser_proxy` (issue #32), included by `tests/fuzz.rs`: any bytes a client sends to
//! the browser's egress proxy (`browser::proxy::EgressProxy`, the real one on loopback), grown
//! from valid requests — CONNECT tunnels, absolute-form requests, keep-alive pairs, chunked
//! bodies — and the request-line reader `browser::proxy::target_of` on any method and URI.
//!
//! Beyond "no panic": every answer is an HTTP status line or a closed connection, within a
//! bound (nothing hangs); a private listener no `[browser] allow_private` entry names never
//! sees a connection, whatever the bytes (a second request on a kept-alive connection, a mapped
//! IPv6 form, a user-info authority); the proxy still answers afterwards; `target_of` is
//! deterministic and an accepted target has a host and a non-zero port.
//!
//! Corpus: `tests/fuzz_corpus/browser_proxy/*.req` (`{site}` is the allowed test site's port,
//! `{canary}` the private listener's). Cases per run: 200 byte streams, 300 request lines.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use clawvisor::browser::guard::{GuardRules, RefusalLog};
use clawvisor::browser::proxy::{EgressProxy, target_of};
use clawvisor::testkit::test_site::TestSite;
use clawvisor::tool::address::AddressPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/browser_proxy.txt";

/// The proxy, the allowed site and the private listener, on one runtime shared by every case.
pub struct Rig {
    runtime: tokio::runtime::Runtime,
    proxy_port: u16,
    site_port: u16,
    canary_port: u16,
    canary_connections: Arc<AtomicUsize>,
    _keep: (EgressProxy, TestSite),
}

pub fn rig() -> &'static Rig {
    static RIG: OnceLock<Rig> = OnceLock::new();
    RIG.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let canary_connections = Arc::new(AtomicUsize::new(0));
        let counted = canary_connections.clone();
        let (proxy, site, site_port, canary_port) = runtime.block_on(async move {
            let canary = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let canary_port = canary.local_addr().unwrap().port();
            tokio::spawn(async move {
                while let Ok((_stream, _)) = canary.accept().await {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            });
            let site = TestSite::start().await.unwrap();
            let site_port: u16 = site.url("").rsplit(':').next().unwrap().parse().unwrap();
            let rules = GuardRules {
                policy: AddressPolicy::PublicOnly,
                allow_private: vec![format!("127.0.0.1:{site_port}")],
            };
            let proxy = EgressProxy::start(rules, RefusalLog::default())
                .await
                .unwrap();
            (proxy, site, site_port, canary_port)
        });
        Rig {
            runtime,
            proxy_port: proxy.port(),
            site_port,
            canary_port,
            canary_connections,
            _keep: (proxy, site),
        }
    })
}

impl Rig {
    /// A request text with its placeholders filled in.
    pub fn fill(&self, text: &str) -> String {
        text.replace("{site}", &self.site_port.to_string())
            .replace("{canary}", &self.canary_port.to_string())
    }

    /// Sends `bytes`, closes the sending side, and reads what comes back (at most 10 s).
    fn exchange(&self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        let port = self.proxy_port;
        self.runtime.block_on(async move {
            let talk = async {
                let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .map_err(|error| format!("the proxy does not accept: {error}"))?;
                // The proxy may answer and close before reading everything: not a failure.
                let _ = stream.write_all(bytes).await;
                let _ = stream.shutdown().await;
                let mut answer = Vec::new();
                let _ = stream.read_to_end(&mut answer).await;
                Ok(answer)
            };
            tokio::time::timeout(Duration::from_secs(10), talk)
                .await
                .map_err(|_| "the proxy did not finish within 10 s".to_string())?
        })
    }
}

/// The property for one byte stream.
pub fn check_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let rig = rig();
    let answer = rig.exchange(bytes).map_err(TestCaseError::fail)?;
    if !answer.is_empty() && !answer.starts_with(b"HTTP/1.") {
        return Err(TestCaseError::fail(format!(
            "not an HTTP answer: {:?}",
            String::from_utf8_lossy(&answer[..answer.len().min(120)])
        )));
    }
    let reached = rig.canary_connections.load(Ordering::SeqCst);
    prop_assert_eq!(reached, 0, "the private listener was reached");
    // Still serving: a plain refusal is answered.
    let probe = rig.fill("CONNECT 10.0.0.1:{canary} HTTP/1.1\r\n\r\n");
    let refused = rig
        .exchange(probe.as_bytes())
        .map_err(TestCaseError::fail)?;
    prop_assert!(
        refused.starts_with(b"HTTP/1.1 403"),
        "the proxy stopped answering"
    );
    Ok(())
}

/// The property for one request line.
pub fn check_line(method: &str, uri: &str) -> Result<(), TestCaseError> {
    let (Ok(method), Ok(uri)) = (
        hyper::Method::from_bytes(method.as_bytes()),
        uri.parse::<hyper::Uri>(),
    ) else {
        return Ok(());
    };
    let first = target_of(&method, &uri);
    prop_assert_eq!(&first, &target_of(&method, &uri), "deterministic");
    match first {
        Ok(target) => {
            prop_assert!(!target.host.is_empty() && target.port != 0, "{target:?}");
            prop_assert_eq!(target.tunnel, method == hyper::Method::CONNECT);
        }
        Err(reason) => prop_assert!(!reason.is_empty()),
    }
    Ok(())
}

/// Corpus samples with byte-level edits (fragments of requests, separators, any bytes).
pub fn byte_streams() -> impl Strategy<Value = Vec<u8>> {
    let samples: Vec<String> = corpus("browser_proxy")
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    let fragments = prop_oneof![
        prop::sample::select(vec![
            "\r\n",
            "\r\n\r\n",
            "CONNECT ",
            "GET ",
            "http://",
            "https://",
            ":",
            "@",
            "[::1]",
            "localhost",
            "127.0.0.1",
            "0",
            " HTTP/1.1",
            "Host: ",
            "Transfer-Encoding: chunked\r\n",
            "Content-Length: 99999999999\r\n",
            "Upgrade: websocket\r\n",
            "%00",
            "\u{0}",
        ])
        .prop_map(str::to_string),
        "\\PC{1,6}",
        tricky_text(),
    ];
    (
        prop::sample::select(samples),
        prop::collection::vec(text_edit(fragments), 0..5),
    )
        .prop_map(|(sample, edits)| {
            let mut text = rig().fill(&sample);
            for edit in &edits {
                edit.apply(&mut text);
            }
            text.into_bytes()
        })
}

/// A method and a URI: common and odd methods, authorities, absolute and odd URIs.
pub fn request_lines() -> impl Strategy<Value = (String, String)> {
    let method = prop_oneof![
        prop::sample::select(vec!["CONNECT", "GET", "POST", "OPTIONS", "connect", "PRI"])
            .prop_map(str::to_string),
        "[A-Z]{1,8}",
    ];
    let uri = prop_oneof![
        "(http|https|ws|ftp)://[a-z0-9.:\\[\\]@-]{0,20}(:[0-9]{0,6})?(/[a-z?=&]{0,8})?",
        "[a-z0-9.\\[\\]:-]{0,20}:[0-9]{0,6}",
        "/[a-z/]{0,10}",
        "\\PC{0,20}",
    ];
    (method, uri)
}
