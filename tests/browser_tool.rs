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
