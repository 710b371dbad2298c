//! The `browser` tool with real Chromium against the testkit's local site (`testkit::test_site`):
//! the engine alone (`browser::BrowserSession`), and through a real daemon with the scripted
//! model (a JavaScript page, a login whose password never reaches the model, an order whose
//! submit asks first with a screenshot, a download into `inbox/`, the idle close and a crash).

use std::time::Duration;

use clawvisor::browser::guard::GuardRules;
use clawvisor::browser::{Action, BrowserSession, BrowserSetup, LoginCredentials};
use clawvisor::testkit::test_site::{self, TestSite};
use clawvisor::tool::address::AddressPolicy;

fn setup(profile: &std::path::Path, protected: Vec<std::path::PathBuf>) -> BrowserSetup {
    BrowserSetup {
        agent: "assistant".into(),
        chromium: None,
        idle_timeout: Duration::from_secs(300),
        profile_dir: profile.to_path_buf(),
        protected,
        snapshot_max_chars: 20_000,
        page_timeout: Duration::from_secs(20),
        // The test site is on loopback: private addresses allowed, as `[tools]
        // web_fetch_allow_private = true` does for a daemon.
        requests: GuardRules {
            policy: AddressPolicy::AllowPrivate,
            allow_private: Vec::new(),
        },
        logins: vec![LoginCredentials {
            site: "127.0.0.1".into(),
            username: test_site::USERNAME.into(),
            password: Some(clawvisor::secrets::Secret::new(test_site::PASSWORD)),
            password_env: "SITE_PASSWORD".into(),
        }],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_reads_a_javascript_page_fills_a_login_and_downloads() {
    let site = TestSite::start().await.expect("site");
    let data = tempfile::tempdir().expect("tempdir");
    let profile = data.path().join("browser").join("assistant");
    let protected = vec![data.path().join("secret-place")];
    std::fs::create_dir_all(&protected[0]).expect("protected dir");
    std::fs::write(protected[0].join("secret.txt"), "the-daemon-secret-words")
        .expect("a protected file");
    let mut session = BrowserSession::start(&setup(&profile, protected.clone()))
        .await
        .expect("chromium starts");

    // Confinement: Chromium cannot read a protected path (Landlock), even asked directly.
    let url = format!("file://{}", protected[0].join("secret.txt").display());
    let shown = session
        .act(Action::Open {
            url,
            new_tab: false,
        })
        .await;
    let text = shown
        .map(|outcome| outcome.snapshot.map(|s| s.text).unwrap_or_default())
        .unwrap_or_default();
    assert!(
        !text.contains("the-daemon-secret-words"),
        "Chromium read a protected file: {text}"
    );

    let opened = session
        .act(Action::Open {
            url: site.url("/js"),
            new_tab: false,
        })
        .await
        .expect("open");
    assert_eq!(opened.page.title, "Tides");
    let waited = session
        .act(Action::WaitFor {
            text: Some("tide is at".into()),
            reference: None,
            timeout: Duration::from_secs(10),
        })
        .await
        .expect("wait_for");
    let text = waited.snapshot.expect("snapshot").text;
    assert!(text.contains(test_site::JS_TEXT), "{text}");

    session
        .act(Action::Open {
            url: site.url("/login"),
            new_tab: false,
        })
        .await
        .expect("open login");
    let logged_in = session
        .act(Action::Login {
            site: "127.0.0.1".into(),
        })
        .await
        .expect("login");
    let text = logged_in.snapshot.expect("snapshot").text;
    assert!(text.contains("Your balance is 42 euros"), "{text}");
    assert!(!text.contains(test_site::PASSWORD));

    let reports = session
        .act(Action::Open {
            url: site.url("/download"),
            new_tab: false,
        })
        .await
        .expect("open reports");
    let link = reports
        .snapshot
        .expect("snapshot")
        .refs
        .into_iter()
        .find(|r| r.role == "link")
        .expect("a link");
    let clicked = session
        .act(Action::Click { reference: link.n })
        .await
        .expect("click");
    assert_eq!(clicked.downloads.len(), 1, "{clicked:?}");
    assert_eq!(clicked.downloads[0].name, "report.csv");
    assert_eq!(
        std::fs::read_to_string(&clicked.downloads[0].path).expect("downloaded"),
        test_site::REPORT_CSV
    );
    session.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_action_is_a_clear_error_and_the_next_action_starts_chromium_again() {
    let site = TestSite::start().await.expect("site");
    let data = tempfile::tempdir().expect("tempdir");
    let mut session = BrowserSession::start(&setup(&data.path().join("profile"), Vec::new()))
        .await
        .expect("chromium starts");
    session
        .act(Action::Open {
            url: site.url("/"),
            new_tab: false,
        })
        .await
        .expect("open");
    let pid = session.pid().expect("a pid") as i32;
    let waiting = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let result = session
            .act(Action::WaitFor {
                text: Some("never shown".into()),
                reference: None,
                timeout: Duration::from_secs(60),
            })
            .await;
        (result, started.elapsed(), session)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill chromium");
    let (result, took, session) = waiting.await.expect("the action ends");
    assert_eq!(
        result.expect_err("the action fails"),
        clawvisor::browser::BrowserError::Crashed
    );
    assert!(took < Duration::from_secs(10), "no hang: {took:?}");
    assert!(session.is_closed());
    drop(session);
    let mut again = BrowserSession::start(&setup(&data.path().join("profile"), Vec::new()))
        .await
        .expect("a fresh chromium starts on the same profile");
    let opened = again
        .act(Action::Open {
            url: site.url("/"),
            new_tab: false,
        })
        .await
        .expect("open");
    assert_eq!(opened.page.title, "Test site");
    again.stop().await;
}

/// What one action told the model: its sentence on success, its error otherwise.
fn told(result: Result<clawvisor::browser::Outcome, clawvisor::browser::BrowserError>) -> String {
    match result {
        Ok(outcome) => outcome.summary,
        Err(error) => error.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_cannot_send_the_browser_to_a_private_address_by_itself() {
    // `public` stands for a site on the internet (allowed by a `[browser] allow_private` entry
    // naming its exact port); `private` for a router on the LAN: another loopback port, refused
    // by the address rule like any private address.
    let public = TestSite::start().await.expect("public site");
    let private = TestSite::start().await.expect("private site");
    let public_host = public.url("").trim_start_matches("http://").to_string();
    let data = tempfile::tempdir().expect("tempdir");
    let mut rules = setup(&data.path().join("profile"), Vec::new());
    rules.requests = GuardRules {
        policy: AddressPolicy::PublicOnly,
        allow_private: vec![public_host],
    };
    let mut session = BrowserSession::start(&rules)
        .await
        .expect("chromium starts");

    let opened = session
        .act(Action::Open {
            url: public.url("/js"),
            new_tab: false,
        })
        .await
        .expect("the allowed site opens");
    assert_eq!(opened.page.title, "Tides");

    for how in ["redirect", "script", "iframe", "image", "meta", "form"] {
        let target = private.url(&format!("/secret-{how}"));
        let leave = format!(
            "/leave?how={how}&to={}",
            url::form_urlencoded::byte_serialize(target.as_bytes()).collect::<String>()
        );
        let mut words = told(
            session
                .act(Action::Open {
                    url: public.url(&leave),
                    new_tab: false,
                })
                .await,
        );
        // A script's or refresh's navigation may start after the page loaded: a later action
        // reports it (snapshots until it does, at most 10 s).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !words.contains(&target) && std::time::Instant::now() < deadline {
            words.push_str(&told(session.act(Action::Snapshot).await));
        }
        assert!(
            words.contains(&target) && words.contains("a loopback address"),
            "{how}: the model is told which address was refused and why: {words}"
        );
    }
    let opened_directly = told(
        session
            .act(Action::Open {
                url: private.url("/secret-direct"),
                new_tab: false,
            })
            .await,
    );
    assert!(
        opened_directly.contains("refused"),
        "even an open the tool let through is checked: {opened_directly}"
    );
    assert!(
        public.requests().iter().any(|path| path == "/leave"),
        "{:?}",
        public.requests()
    );
    assert_eq!(
        private.requests(),
        Vec::<String>::new(),
        "the private site saw no request"
    );
    session.stop().await;
}

/// A loopback listener standing for a device on the LAN: it counts the connections it accepts
/// and keeps the first bytes each sends (a WebSocket upgrade request, when one gets through).
struct Listener {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    async fn start() -> Listener {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 4096];
                    let read = stream.read(&mut buffer).await.unwrap_or(0);
                    let text = String::from_utf8_lossy(&buffer[..read]).to_string();
                    kept.lock().expect("not poisoned").push(text);
                });
            }
        });
        Listener { port, seen, task }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().expect("not poisoned").clone()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Opens `/leave?how=<how>&to=<to>` on `site`, waits for the page to write `outcome`, and
/// returns everything the model was told.
async fn page_connects(
    session: &mut BrowserSession,
    site: &TestSite,
    how: &str,
    to: &str,
    outcome: &str,
) -> String {
    let leave = format!(
        "/leave?how={how}&to={}",
        url::form_urlencoded::byte_serialize(to.as_bytes()).collect::<String>()
    );
    let mut words = told(
        session
            .act(Action::Open {
                url: site.url(&leave),
                new_tab: false,
            })
            .await,
    );
    let waited = session
        .act(Action::WaitFor {
            text: Some(outcome.into()),
            reference: None,
            timeout: Duration::from_secs(10),
        })
        .await;
    words.push(' ');
    words.push_str(&told(waited));
    words
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_fetches_and_local_names_go_through_the_proxy_and_its_rule() {
    let public = TestSite::start().await.expect("public site");
    let private = TestSite::start().await.expect("private site");
    let device = Listener::start().await;
    let public_host = public.url("").trim_start_matches("http://").to_string();
    let data = tempfile::tempdir().expect("tempdir");
    let mut rules = setup(&data.path().join("profile"), Vec::new());
    rules.requests = GuardRules {
        policy: AddressPolicy::PublicOnly,
        allow_private: vec![public_host.clone()],
    };
    let mut session = BrowserSession::start(&rules)
        .await
        .expect("chromium starts");

    // A WebSocket (which the DevTools guard never sees) to a private address, by IP and by a
    // name that resolves to one: refused by the proxy, the model told why.
    for host in ["127.0.0.1", "localhost"] {
        let to = format!("ws://{host}:{}/feed", device.port);
        let words = page_connects(&mut session, &public, "websocket", &to, "Socket failed").await;
        assert!(
            words.contains(&format!("{host}:{}", device.port))
                && words.contains("a loopback address"),
            "the model is told which connection was refused and why: {words}"
        );
    }
    // fetch() and XHR from the page to a private site.
    for how in ["fetch", "xhr"] {
        let to = private.url(&format!("/secret-{how}"));
        let words = page_connects(&mut session, &public, how, &to, "Fetch failed").await;
        assert!(words.contains("refused"), "{how}: {words}");
    }
    // An open of `http://localhost:<port>` is refused like the IP.
    let by_name = told(
        session
            .act(Action::Open {
                url: format!("http://localhost:{}/secret-name", device.port),
                new_tab: false,
            })
            .await,
    );
    assert!(by_name.contains("a loopback address"), "{by_name}");
    assert_eq!(
        device.seen(),
        Vec::<String>::new(),
        "the device saw no connection"
    );
    assert_eq!(
        private.requests(),
        Vec::<String>::new(),
        "the private site saw no request"
    );
    session.stop().await;

    // Allowed by a `[browser] allow_private` entry for exactly that host and port: it connects.
    // (A profile of its own: the first Chromium's may still be releasing its lock.)
    rules.profile_dir = data.path().join("profile-allowed");
    rules.requests.allow_private = vec![public_host, format!("127.0.0.1:{}", device.port)];
    let mut session = BrowserSession::start(&rules)
        .await
        .expect("chromium starts");
    let to = format!("ws://127.0.0.1:{}/feed", device.port);
    let leave = format!(
        "/leave?how=websocket&to={}",
        url::form_urlencoded::byte_serialize(to.as_bytes()).collect::<String>()
    );
    session
        .act(Action::Open {
            url: public.url(&leave),
            new_tab: false,
        })
        .await
        .expect("the page opens");
    clawvisor::testkit::wait_until(
        Duration::from_secs(10),
        "the WebSocket reaches the device",
        || {
            let seen = device.seen();
            async move {
                seen.iter()
                    .any(|request| request.to_ascii_lowercase().contains("upgrade: websocket"))
            }
        },
    )
    .await;
    session.stop().await;
}

/// The proxy on its own, spoken to as Chromium speaks to it: one request on a fresh
/// connection, the answer's head returned (and the connection, for a tunnel).
async fn ask_proxy(port: u16, request: &str) -> (String, tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the proxy listens");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte))
            .await
            .expect("the proxy answers")
            .expect("read");
        if read == 0 {
            break;
        }
        head.push(byte[0]);
    }
    (String::from_utf8_lossy(&head).to_string(), stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_refuses_private_destinations_and_connects_allowed_ones_where_it_checked() {
    use clawvisor::browser::guard::RefusalLog;
    use clawvisor::browser::proxy::EgressProxy;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let device = Listener::start().await;
    let site = TestSite::start().await.expect("site");
    let site_host = site.url("").trim_start_matches("http://").to_string();
    let log = RefusalLog::default();
    let rules = GuardRules {
        policy: AddressPolicy::PublicOnly,
        allow_private: vec![format!("127.0.0.1:{}", device.port), site_host.clone()],
    };
    let proxy = EgressProxy::start(rules, log.clone()).await.expect("proxy");

    for host in ["127.0.0.2", "localhost", "[::1]", "10.0.0.1"] {
        let (head, _) = ask_proxy(
            proxy.port(),
            &format!(
                "CONNECT {host}:{0} HTTP/1.1\r\nHost: {host}:{0}\r\n\r\n",
                device.port
            ),
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 403"), "{host}: {head}");
    }
    let (head, _) = ask_proxy(
        proxy.port(),
        &format!(
            "GET http://localhost:{0}/x HTTP/1.1\r\nHost: localhost:{0}\r\n\r\n",
            device.port
        ),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let refusals = log.take().join(" ");
    assert!(
        refusals.contains(&format!("localhost:{}", device.port)) && refusals.contains("loopback"),
        "{refusals}"
    );
    assert_eq!(
        device.seen(),
        Vec::<String>::new(),
        "nothing reached the device"
    );

    // Bad input is a 400 naming what is wrong, never a crash.
    for bad in [
        "GET /origin-form HTTP/1.1\r\nHost: x\r\n\r\n",
        "CONNECT example.com HTTP/1.1\r\n\r\n",
        "GET ftp://example.com/ HTTP/1.1\r\n\r\n",
    ] {
        let (head, _) = ask_proxy(proxy.port(), bad).await;
        assert!(head.starts_with("HTTP/1.1 400"), "{bad:?}: {head}");
    }
    let (garbage, _) = ask_proxy(proxy.port(), "\u{1}\u{2} nonsense\r\n\r\n").await;
    assert!(!garbage.starts_with("HTTP/1.1 200"), "{garbage}");

    // Allowed: a tunnel carries bytes to the device; a plain request is forwarded.
    let (head, mut tunnel) = ask_proxy(
        proxy.port(),
        &format!(
            "CONNECT 127.0.0.1:{0} HTTP/1.1\r\nHost: 127.0.0.1:{0}\r\n\r\n",
            device.port
        ),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tunnel
        .write_all(b"hello through the tunnel")
        .await
        .expect("sent");
    clawvisor::testkit::wait_until(Duration::from_secs(5), "the tunnel's bytes arrive", || {
        let seen = device.seen();
        async move {
            seen.iter()
                .any(|text| text.contains("hello through the tunnel"))
        }
    })
    .await;
    let (head, mut forwarded) = ask_proxy(
        proxy.port(),
        &format!(
            "GET http://{site_host}/js HTTP/1.1\r\nHost: {site_host}\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut body = String::new();
    forwarded.read_to_string(&mut body).await.expect("the body");
    assert!(body.contains("<title>Tides</title>"), "{body}");
    assert!(site.requests().iter().any(|path| path == "/js"));
    drop(proxy);
    clawvisor::testkit::wait_until(
        Duration::from_secs(5),
        "the tunnel closes with the proxy",
        || {
            let mut tunnel_probe = [0u8; 1];
            let closed = matches!(tunnel.try_read(&mut tunnel_probe), Ok(0));
            async move { closed }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browsers_sandbox_lets_its_tcp_reach_the_proxy_port_only() {
    use clawvisor::policy::{Reach, Writes};
    use clawvisor::sandbox::landlock_rules::ConfinementRequest;
    use clawvisor::sandbox::{self, Confinement, Isolation, ShellHome};
    let abi = sandbox::landlock_support().abi().unwrap_or(0);
    if abi < 4 {
        // Without Landlock's TCP rules (kernel ABI 4) the proxy flag is the only wall; say so.
        eprintln!("this kernel's Landlock ABI is {abi}: TCP ports cannot be restricted here");
        return;
    }
    let proxy_port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port");
    let other_port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port");
    let (proxy_port_number, other_port_number) = (
        proxy_port.local_addr().expect("address").port(),
        other_port.local_addr().expect("address").port(),
    );
    let workspace = tempfile::tempdir().expect("tempdir");
    let reach = Reach {
        writes: Writes::Workspace,
        network: true,
    };
    let connect = |port: u16| {
        let workspace = workspace.path().to_path_buf();
        async move {
            let home = ShellHome::create().expect("a HOME");
            let path = sandbox::shell_path();
            // The browser's own request: its profile where the workspace would be.
            let confinement = Confinement::prepare(&ConfinementRequest {
                workspace: &workspace,
                extra_workspaces: &[],
                reach,
                home: home.path(),
                protected: &[],
                path: &path,
                tcp_connect_only: Some(proxy_port_number),
            })
            .expect("a ruleset");
            let bash = sandbox::find_bash(&path).expect("bash");
            let isolation = Isolation::new(
                reach,
                sandbox::namespace_support(Some(&bash)).is_available(),
            );
            let mut command = tokio::process::Command::new(&bash);
            command.arg("-c").arg(format!(
                "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused"
            ));
            isolation.install(confinement.into_ruleset(), &mut command);
            let output = command.output().await.expect("bash runs");
            String::from_utf8_lossy(&output.stdout).trim().to_string()
        }
    };
    assert_eq!(connect(proxy_port_number).await, "connected");
    assert_eq!(connect(other_port_number).await, "refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webrtc_sends_no_udp_outside_the_proxy() {
    let site = TestSite::start().await.expect("site");
    let stun = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("a UDP port");
    let stun_port = stun.local_addr().expect("its address").port();
    let data = tempfile::tempdir().expect("tempdir");
    let mut session = BrowserSession::start(&setup(&data.path().join("profile"), Vec::new()))
        .await
        .expect("chromium starts");
    // Even with private addresses allowed, a page's WebRTC may not send UDP (a STUN request to
    // a server of its choosing) past the proxy.
    let to = format!("stun:127.0.0.1:{stun_port}");
    let words = page_connects(&mut session, &site, "webrtc", &to, "Gathered").await;
    assert!(words.contains("Gathered"), "{words}");
    // Gathering is complete: a STUN request, had one been sent, is waiting in the socket.
    let mut buffer = [0u8; 512];
    let received = stun.try_recv_from(&mut buffer);
    assert!(
        received.is_err(),
        "the STUN server got a packet: {received:?}"
    );
    session.stop().await;
}
