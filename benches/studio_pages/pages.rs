//! What each Studio page asks the API for when it opens, issued the way the page issues it, and
//! timed as one sample: requests the page starts together run in parallel, a request that needs
//! an earlier answer (Chat's transcript needs the session list) waits for it.
//!
//! The table mirrors the first render of `studio/pages/<page>.js` (its `api(...)` calls before
//! the operator touches anything) and of the console's start in `studio/app.js`. A page listed in
//! `app.js`'s `PAGES` without an entry here is reported as not measured, so that a new page cannot
//! slip by unnoticed.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// How a page fetches: one GET, several started together, or one after another.
#[derive(Debug, Clone)]
pub enum Fetch {
    Get(String),
    Together(Vec<Fetch>),
    InTurn(Vec<Fetch>),
}

/// What the plans need to know about the house: the first agent the pages pick, the Studio
/// session Chat opens, a run and a job to open.
pub struct Picks {
    pub agent: String,
    pub chat_session: i64,
    pub run: i64,
    pub job: i64,
}

/// One measured view: its name, whether it is a page of `PAGES` (or a detail view, or the
/// console's start), and its plan.
pub struct View {
    pub name: String,
    pub page: bool,
    pub plan: Fetch,
}

fn get(path: impl Into<String>) -> Fetch {
    Fetch::Get(path.into())
}

/// Every page of the console (by its `PAGES` name) and the detail views an operator opens most,
/// each with its plan. Long because it is a table: one entry per page, in `PAGES`' order.
pub fn views(picks: &Picks) -> Vec<View> {
    let agent = &picks.agent;
    let page = |name: &str, plan: Fetch| View {
        name: name.to_string(),
        page: true,
        plan,
    };
    let view = |name: &str, plan: Fetch| View {
        name: name.to_string(),
        page: false,
        plan,
    };
    vec![
        // app.js `boot()`: the session first; then the approvals badge (beside the first page's
        // own load, which waits only for the session).
        view(
            "start (session, approvals badge)",
            Fetch::InTurn(vec![
                get("/api/v1/session"),
                get("/api/v1/approvals?status=pending"),
            ]),
        ),
        page(
            "overview",
            Fetch::Together(vec![
                get("/api/v1/overview"),
                get("/api/v1/providers"),
                get("/api/v1/backups"),
            ]),
        ),
        page(
            "agents",
            Fetch::Together(vec![get("/api/v1/timezones"), get("/api/v1/agents")]),
        ),
        page(
            "chat",
            Fetch::InTurn(vec![
                get("/api/v1/agents"),
                Fetch::Together(vec![
                    get(format!("/api/v1/sessions?agent={agent}")),
                    Fetch::InTurn(vec![
                        get(format!("/api/v1/sessions?agent={agent}")),
                        get(format!("/api/v1/sessions/{}", picks.chat_session)),
                    ]),
                    get(format!(
                        "/api/v1/approvals?status=pending&agent={agent}&chat=studio%3Aoperator"
                    )),
                ]),
            ]),
        ),
        page(
            "runs",
            Fetch::Together(vec![get("/api/v1/agents"), get("/api/v1/runs?limit=50")]),
        ),
        page(
            "approvals",
            Fetch::Together(vec![
                get("/api/v1/approvals?status=pending"),
                get("/api/v1/grants"),
                get("/api/v1/approvals?limit=30"),
                get("/api/v1/policy/decisions?limit=30"),
            ]),
        ),
        page("people", get("/api/v1/people")),
        page(
            "schedules",
            Fetch::Together(vec![
                get("/api/v1/schedules"),
                Fetch::InTurn(vec![
                    get("/api/v1/agents"),
                    get(format!("/api/v1/schedules/choices?agent={agent}")),
                ]),
            ]),
        ),
        page(
            "memory",
            Fetch::Together(vec![
                get("/api/v1/agents"),
                get("/api/v1/memory/stats"),
                get("/api/v1/memory?limit=200"),
            ]),
        ),
        page("mcp", get("/api/v1/mcp")),
        page("handoffs", get("/api/v1/handoffs")),
        page(
            "audit",
            Fetch::Together(vec![
                get("/api/v1/audit/verify"),
                Fetch::InTurn(vec![
                    get("/api/v1/audit/facets"),
                    get("/api/v1/audit?limit=100"),
                ]),
            ]),
        ),
        page("logs", get("/api/v1/logs?level=info&limit=200")),
        page("costs", get("/api/v1/costs?days=30")),
        page("skills", get("/api/v1/skills")),
        page("secrets", get("/api/v1/secrets")),
        // The first-run wizard (issue #28), measured once `PAGES` lists it.
        page(
            "setup",
            Fetch::Together(vec![
                get("/api/v1/setup"),
                get("/api/v1/people"),
                get("/api/v1/tools"),
            ]),
        ),
        view(
            "run detail (#/runs/ID)",
            get(format!("/api/v1/runs/{}", picks.run)),
        ),
        view(
            "agent detail (#/agents/NAME)",
            get(format!("/api/v1/agents/{agent}")),
        ),
        view(
            "schedule detail (#/schedules/ID)",
            get(format!("/api/v1/schedules/{}", picks.job)),
        ),
    ]
}

/// The page names of `studio/app.js`'s `PAGES` list, read from the repository.
pub fn console_pages() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/studio/app.js");
    let app = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let start = app
        .find("const PAGES = [")
        .unwrap_or_else(|| panic!("{path} has no `const PAGES = [` list any more"));
    let list = &app[start..];
    let list = &list[..list.find("];").expect("the PAGES list ends with `];`")];
    list.split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Runs `plan` once; the paths it fetched with a failure, if any.
pub fn run<'a>(
    http: &'a reqwest::Client,
    base: &'a str,
    plan: &'a Fetch,
) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>> {
    Box::pin(async move {
        match plan {
            Fetch::Get(path) => {
                let response = http
                    .get(format!("{base}{path}"))
                    .send()
                    .await
                    .map_err(|error| format!("GET {path}: {error}"))?;
                let status = response.status();
                let body = response
                    .bytes()
                    .await
                    .map_err(|error| format!("GET {path}: {error}"))?;
                if !status.is_success() {
                    return Err(format!(
                        "GET {path} answered {status}: {}",
                        String::from_utf8_lossy(&body)
                    ));
                }
                Ok(())
            }
            Fetch::Together(plans) => {
                let results =
                    futures::future::join_all(plans.iter().map(|plan| run(http, base, plan))).await;
                results.into_iter().collect()
            }
            Fetch::InTurn(plans) => {
                for plan in plans {
                    run(http, base, plan).await?;
                }
                Ok(())
            }
        }
    })
}

/// `samples` timed runs of `plan` (after one untimed run that warms the connections up).
pub async fn time(
    http: &reqwest::Client,
    base: &str,
    plan: &Fetch,
    samples: usize,
) -> Result<Vec<Duration>, String> {
    run(http, base, plan).await?;
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        run(http, base, plan).await?;
        times.push(started.elapsed());
    }
    Ok(times)
}
