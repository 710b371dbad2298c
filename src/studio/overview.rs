//! The Overview page's data, the supervision tree, and `/metrics` (Prometheus text).
//!
//! The tree comes from the `Events` actor's snapshot (the latest lifecycle event of each actor);
//! a node's parent follows from its name (`agent:x` under `agents`, `session:x:..` under
//! `agent:x`, ...). Figures come from the store with one read each.
//!
//! In `/metrics`, `clawvisor_bot_poll_lag_seconds` is the time since a bot's last `getUpdates`
//! (told to the Events actor, kept in memory); `clawvisor_bot_last_update_age_seconds` is the time
//! since the newest update, not a lag; the webhook triggers' families are `triggers::metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::openapi::{
    array, boolean, described, integer, nullable, number, object, one_of, string,
};
use super::{ApiError, StudioState, snapshot};
use crate::protocol::events::{ActorView, TreeSnapshot};
use crate::protocol::mcp::{Mcp, McpHealth};
use crate::protocol::{agent, handoff, local, mcp, telegram};

/// The actor a node hangs under in the drawn tree.
pub fn parent_of(id: &str) -> Option<String> {
    if id == "root" {
        return None;
    }
    let Some((kind, rest)) = id.split_once(':') else {
        let parent = if id == local::NAME.local() {
            telegram::CHANNELS
        } else {
            "root"
        };
        return Some(parent.to_string());
    };
    Some(match kind {
        "agent" => agent::SUPERVISOR.to_string(),
        "session" => agent::name(rest.split(':').next().unwrap_or(rest))
            .local()
            .to_string(),
        "bot" | "channel" => telegram::CHANNELS.to_string(),
        "mcp" => mcp::NAME.local().to_string(),
        "contract" => handoff::NAME.local().to_string(),
        _ => "root".to_string(),
    })
}

/// The tree's nodes; the root supervisor (which reports no lifecycle of its own) heads them.
fn tree_json(tree: &TreeSnapshot) -> Vec<Value> {
    let mut nodes = Vec::with_capacity(tree.actors.len() + 1);
    if !tree.actors.iter().any(|actor| actor.id == "root") {
        nodes.push(json!({
            "id": "root", "parent": null,
            "status": if tree.boot_complete { "running" } else { "starting" },
            "restarts": 0, "last_error": null, "since_ms": null,
        }));
    }
    nodes.extend(tree.actors.iter().map(actor_json));
    nodes
}

fn actor_json(actor: &ActorView) -> Value {
    json!({
        "id": actor.id, "parent": parent_of(&actor.id), "status": actor.status,
        "restarts": actor.restarts, "last_error": actor.last_error, "since_ms": actor.since_ms,
    })
}

/// One node of the supervision tree (see [`actor_json`]).
fn actor_schema() -> Value {
    object([
        ("id", string()),
        ("parent", nullable(string())),
        ("status", string()),
        ("restarts", integer()),
        ("last_error", nullable(string())),
        ("since_ms", nullable(integer())),
    ])
}

async fn tree(state: &StudioState) -> Result<TreeSnapshot, ApiError> {
    snapshot(state)
        .await
        .ok_or_else(|| ApiError::unavailable("the events actor"))
}

/// `GET /api/v1/tree`
pub async fn tree_view(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let tree = tree(&state).await?;
    Ok(Json(json!({
        "boot_complete": tree.boot_complete,
        "actors": tree_json(&tree),
    })))
}

/// What `GET /api/v1/tree` answers.
pub fn tree_schema() -> Value {
    object([
        ("boot_complete", boolean()),
        ("actors", array(actor_schema())),
    ])
}

pub async fn mcp_health(state: &StudioState) -> Vec<McpHealth> {
    Mcp::new(&state.registry).health().await.unwrap_or_default()
}

/// Figures the overview and `/metrics` share, read in one store call.
#[derive(Debug, Default)]
struct Figures {
    approvals_pending: i64,
    runs_today: i64,
    cost_today: f64,
    /// Each bot's latest status event: agent → (state, detail, at).
    bots: BTreeMap<String, (String, String, i64)>,
    /// Agents whose bot waits to be claimed (a live claim code).
    unclaimed: Vec<String>,
    /// Pairing requests waiting for an approver.
    pairings_pending: usize,
    /// Active jobs whose last runs failed.
    jobs_failing: i64,
    /// Each agent's newest answer (ms) and its runs today.
    last_reply: BTreeMap<String, i64>,
    runs_today_by_agent: BTreeMap<String, i64>,
    /// Recent warnings about model providers (subject `provider:<name>`): (subject, detail).
    provider_warnings: Vec<(String, String)>,
}

fn start_of_day_ms(now_ms: i64) -> i64 {
    now_ms - now_ms.rem_euclid(86_400_000)
}

async fn figures(state: &StudioState) -> Result<Figures, ApiError> {
    let now = crate::clock::now_ms();
    Ok(state
        .store
        .read(move |conn| {
            let day = crate::store::runs::day_of(now);
            let mut figures = Figures {
                approvals_pending: conn
                    .prepare_cached("SELECT COUNT(*) FROM approvals WHERE status = 'pending'")?
                    .query_row([], |row| row.get(0))?,
                runs_today: crate::store::studio::runs_since(conn, start_of_day_ms(now))?,
                cost_today: conn
                    .prepare_cached(
                        "SELECT COALESCE(SUM(cost_usd), 0) FROM cost_events WHERE day = ?1",
                    )?
                    .query_row([day], |row| row.get(0))?,
                bots: BTreeMap::new(),
                pairings_pending: crate::store::telegram::pending_pairings(conn, now)?.len(),
                jobs_failing: conn
                    .prepare_cached(
                        "SELECT COUNT(*) FROM jobs WHERE failing = 1 AND status = 'active'",
                    )?
                    .query_row([], |row| row.get(0))?,
                last_reply: pairs_of(
                    conn,
                    "SELECT s.agent, MAX(e.created_ms) FROM session_events e JOIN sessions s ON s.id = e.session_id WHERE e.kind = 'assistant' GROUP BY s.agent",
                    [],
                )?,
                runs_today_by_agent: pairs_of(
                    conn,
                    "SELECT agent, COUNT(*) FROM runs WHERE started_ms >= ?1 GROUP BY agent",
                    [start_of_day_ms(now)],
                )?,
                provider_warnings: provider_warnings(conn, now)?,
                unclaimed: crate::store::people::claims(conn)?
                    .into_iter()
                    .filter(|claim| claim.is_live(now))
                    .map(|claim| claim.agent)
                    .collect(),
            };
            for event in crate::store::events::recent(conn, Some("bot_status"), 200)? {
                let data: Value = event
                    .data
                    .as_deref()
                    .and_then(|text| serde_json::from_str(text).ok())
                    .unwrap_or(Value::Null);
                let agent = data["agent"].as_str().unwrap_or(&event.subject).to_string();
                // `recent` is newest first: keep the first seen per bot.
                figures.bots.entry(agent).or_insert((
                    data["state"].as_str().unwrap_or("unknown").to_string(),
                    event.detail,
                    event.at_ms,
                ));
            }
            Ok(figures)
        })
        .await?)
}

/// The newest warning of each model provider in the last day, unless a reload came after it
/// (a key or address changed since may have fixed it; the next failure warns again).
fn provider_warnings(
    conn: &rusqlite::Connection,
    now: i64,
) -> crate::store::Result<Vec<(String, String)>> {
    let reloaded = crate::store::events::recent(conn, Some("config_reloaded"), 1)?
        .first()
        .map_or(0, |event| event.at_ms);
    let since = reloaded.max(now - 86_400_000);
    let mut newest: BTreeMap<String, String> = BTreeMap::new();
    for event in crate::store::events::recent(conn, Some("warning"), 50)? {
        if event.subject.starts_with("provider:") && event.at_ms > since {
            newest.entry(event.subject).or_insert(event.detail);
        }
    }
    Ok(newest.into_iter().collect())
}

/// (name, number) pairs of a grouped query.
fn pairs_of(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> crate::store::Result<BTreeMap<String, i64>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params, |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<BTreeMap<_, _>, _>>()?)
}

/// One thing that needs the operator, with what to do about it.
fn attention(kind: &str, text: String, action: &str, href: &str) -> Value {
    json!({"kind": kind, "text": text, "action": action, "href": href})
}

/// What needs the operator now, most pressing first: a guided queue, each item with its action.
fn needs_you(state: &StudioState, figures: &Figures) -> Vec<Value> {
    let mut queue = Vec::new();
    let plural = |n: i64, one: &str, many: &str| {
        if n == 1 {
            one.to_string()
        } else {
            format!("{n} {many}")
        }
    };
    if figures.approvals_pending > 0 {
        queue.push(attention(
            "approvals",
            format!(
                "{} waiting for your yes or no.",
                plural(figures.approvals_pending, "An action is", "actions are")
            ),
            "Decide",
            "#/approvals",
        ));
    }
    if figures.pairings_pending > 0 {
        queue.push(attention(
            "pairing",
            format!(
                "{} asked to talk to an agent.",
                plural(figures.pairings_pending as i64, "Someone", "people")
            ),
            "Let them in or not",
            "#/people",
        ));
    }
    for agent in &figures.unclaimed {
        queue.push(attention(
            "claim",
            format!(
                "The bot of {agent} waits for its owner: send it the claim code from your phone."
            ),
            "Show the code",
            "#/people",
        ));
    }
    for (agent, (status, detail, _)) in &figures.bots {
        if !matches!(status.as_str(), "online" | "polling") {
            queue.push(attention(
                "bot",
                format!(
                    "The bot of {agent} is not working ({status}): {}",
                    crate::cause::without_technical_tail(detail)
                ),
                "See the bot",
                "#/overview",
            ));
        }
    }
    if figures.jobs_failing > 0 {
        queue.push(attention(
            "jobs",
            format!(
                "{} failed several times in a row.",
                plural(
                    figures.jobs_failing,
                    "A scheduled job has",
                    "scheduled jobs have"
                )
            ),
            "Look at the schedules",
            "#/schedules",
        ));
    }
    for (subject, detail) in &figures.provider_warnings {
        let name = subject.trim_start_matches("provider:");
        queue.push(attention(
            "provider",
            format!("The model provider {name} had a problem: {detail}"),
            "Check the providers",
            "#/overview",
        ));
    }
    for model in &state.bill.get().unpriced {
        queue.push(attention(
            "unpriced",
            format!(
                "The model {} of {} has no price, so its spending is not counted in dollars (its tokens still are).",
                model.model, model.provider
            ),
            "See the costs",
            "#/costs",
        ));
    }
    if super::setup::needed(state) {
        let text = if state.agents.get().is_empty() {
            "No agent is set up yet.".to_string()
        } else {
            "Your agent cannot answer yet: its model provider has no key.".to_string()
        };
        queue.push(attention("setup", text, "Finish the setup", "#/setup"));
    }
    queue
}

/// One line per agent for people: what it is, whether its bot works, when it last answered.
fn agent_lines(state: &StudioState, figures: &Figures) -> Vec<Value> {
    state
        .agents
        .get()
        .iter()
        .map(|agent| {
            let bot = if !agent.telegram {
                "no bot".to_string()
            } else if figures.unclaimed.contains(&agent.name) {
                "waiting to be claimed".to_string()
            } else {
                match figures
                    .bots
                    .get(&agent.name)
                    .map(|(status, ..)| status.as_str())
                {
                    Some("online" | "polling") => "online".to_string(),
                    Some(other) => other.replace('_', " "),
                    None => "starting".to_string(),
                }
            };
            json!({
                "name": agent.name, "bot": bot,
                "last_reply_ms": figures.last_reply.get(&agent.name),
                "runs_today": figures.runs_today_by_agent.get(&agent.name).copied().unwrap_or(0),
            })
        })
        .collect()
}

/// What to do next, for an operator looking at a fresh install.
fn hints(state: &StudioState, figures: &Figures, mcp: &[McpHealth]) -> Vec<String> {
    let mut hints = Vec::new();
    for agent in state.agents.get().iter() {
        if !agent.telegram {
            hints.push(format!(
                "No Telegram bot for `{}` yet — add [telegram] token_env = \"...\" to its file in actors/ and set that variable",
                agent.name
            ));
        }
    }
    for (agent, (status, detail, _)) in &figures.bots {
        if status != "online" && status != "polling" {
            hints.push(format!("The bot of `{agent}` is {status}: {detail}"));
        }
    }
    for agent in &figures.unclaimed {
        hints.push(format!(
            "The bot of `{agent}` waits to be claimed: its claim code is on the People page (send /start <code> to the bot)"
        ));
    }
    if mcp.is_empty() {
        hints.push(
            "No MCP servers — add [[mcp.servers]] to the config to give agents more tools"
                .to_string(),
        );
    }
    if figures.approvals_pending > 0 {
        hints.push(format!(
            "{} approval(s) wait for you in the Approvals inbox",
            figures.approvals_pending
        ));
    }
    hints
}

/// `GET /api/v1/overview`
pub async fn overview(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let tree = tree(&state).await?;
    let figures = figures(&state).await?;
    let (mcp, store) = (mcp_health(&state).await, state.store.health());
    Ok(Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "started_ms": state.started_ms,
        "health": {"boot_complete": tree.boot_complete, "database": state.store.writer_alive() && store.state == crate::store::health::State::Healthy, "store": super::store_health::health_json(&store)},
        "tree": tree_json(&tree),
        "bots": figures.bots.iter().map(|(agent, (status, detail, at_ms))| json!({
            "agent": agent, "status": status, "detail": detail, "at_ms": at_ms,
            "last_poll_ms": tree.bot_polls.get(agent),
        })).collect::<Vec<_>>(),
        "agents": state.agents.get().len(),
        "approvals_pending": figures.approvals_pending,
        "runs_today": figures.runs_today,
        "cost_today_usd": figures.cost_today,
        "mcp": mcp.iter().map(|server| json!({"server": server.server, "state": server.state})).collect::<Vec<_>>(),
        "hints": hints(&state, &figures, &mcp),
        "needs_you": needs_you(&state, &figures),
        "agent_lines": agent_lines(&state, &figures),
        "protections": crate::sandbox::protections().to_json(),
    })))
}

/// What `GET /api/v1/overview` answers.
pub fn overview_schema() -> Value {
    let attention = object([
        (
            "kind",
            one_of(&[
                "approvals",
                "pairing",
                "claim",
                "bot",
                "jobs",
                "provider",
                "unpriced",
                "setup",
            ]),
        ),
        ("text", string()),
        ("action", string()),
        (
            "href",
            described("a console page, like `#/approvals`", string()),
        ),
    ]);
    let bot = object([
        ("agent", string()),
        ("status", string()),
        ("detail", string()),
        ("at_ms", integer()),
        ("last_poll_ms", nullable(integer())),
    ]);
    let agent_line = object([
        ("name", string()),
        (
            "bot",
            described("`online`, `no bot`, `waiting to be claimed`, ...", string()),
        ),
        ("last_reply_ms", nullable(integer())),
        ("runs_today", integer()),
    ]);
    let protections = object([
        (
            "landlock",
            object([
                ("status", string()),
                ("abi", nullable(integer())),
                ("detail", string()),
            ]),
        ),
        ("bash", nullable(string())),
        ("home_isolated", boolean()),
        ("complete", boolean()),
        ("summary", string()),
    ]);
    object([
        ("version", string()),
        ("started_ms", integer()),
        (
            "health",
            object([
                ("boot_complete", boolean()),
                ("database", boolean()),
                ("store", super::store_health::health_schema()),
            ]),
        ),
        ("tree", array(actor_schema())),
        ("bots", array(bot)),
        (
            "agents",
            described("how many agents are configured", integer()),
        ),
        ("approvals_pending", integer()),
        ("runs_today", integer()),
        ("cost_today_usd", number()),
        (
            "mcp",
            array(object([("server", string()), ("state", string())])),
        ),
        ("hints", array(string())),
        (
            "needs_you",
            described(
                "what needs the operator, most pressing first, each with its action",
                array(attention),
            ),
        ),
        ("agent_lines", array(agent_line)),
        ("protections", protections),
    ])
}

/// Every provider asked for its model list now (a few seconds at most; the page asks on demand).
pub async fn providers(State(state): State<StudioState>) -> Json<Value> {
    let outcomes = state.providers.get().probe_all().await;
    Json(json!({
        "providers": outcomes.iter().map(|outcome| json!({
            "provider": outcome.provider, "ok": outcome.ok, "detail": outcome.detail,
        })).collect::<Vec<_>>(),
    }))
}

/// What `GET /api/v1/providers` answers.
pub fn providers_schema() -> Value {
    object([(
        "providers",
        array(object([
            ("provider", string()),
            ("ok", boolean()),
            ("detail", string()),
        ])),
    )])
}

/// Counters for `/metrics`, read in one store call.
#[derive(Debug, Default)]
struct Counters {
    /// (kind, count) of transcript events: user = in, assistant = out.
    messages: Vec<(String, i64)>,
    runs: Vec<(String, i64)>,
    tool_calls: i64,
    /// (agent, model, input, output, cost)
    usage: Vec<(String, String, i64, i64, f64)>,
    /// (count, sum of ms) of model calls.
    llm: (i64, i64),
    /// agent → newest received update.
    last_update: Vec<(String, i64)>,
}

fn counters(conn: &rusqlite::Connection) -> crate::store::Result<Counters> {
    let pairs = |sql: &str| -> crate::store::Result<Vec<(String, i64)>> {
        let mut statement = conn.prepare_cached(sql)?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    };
    let mut usage = conn.prepare_cached(
        "SELECT agent, model, SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) FROM cost_events GROUP BY agent, model",
    )?;
    let usage = usage
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Counters {
        messages: pairs("SELECT kind, COUNT(*) FROM session_events GROUP BY kind")?,
        runs: pairs("SELECT status, COUNT(*) FROM runs GROUP BY status")?,
        tool_calls: conn
            .prepare_cached("SELECT COUNT(*) FROM run_steps WHERE kind = 'tool_call'")?
            .query_row([], |row| row.get(0))?,
        usage,
        llm: conn
            .prepare_cached(
                "SELECT COUNT(*), COALESCE(SUM(duration_ms), 0) FROM run_steps WHERE kind = 'llm'",
            )?
            .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?,
        last_update: pairs("SELECT agent, MAX(received_ms) FROM inbound_updates GROUP BY agent")?,
    })
}

/// Escapes a Prometheus label value.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `GET /metrics`: Prometheus text exposition.
pub async fn metrics(State(state): State<StudioState>) -> Response {
    let (counters, figures) = match (state.store.read(counters).await, figures(&state).await) {
        (Ok(counters), Ok(figures)) => (counters, figures),
        _ => return ApiError::unavailable("the database").into_response(),
    };
    let tree = snapshot(&state).await.unwrap_or_default();
    let mut exposition = Exposition::default();
    exposition.work(&counters, &figures, &tree);
    exposition.models(&counters);
    exposition.bots(&counters, &figures, &tree, crate::clock::now_ms());
    exposition.text += &super::store_health::metrics(&state.store.health());
    exposition.text += &super::browser_metrics::metrics(&state).await;
    exposition.text += &super::triggers::metrics(&state).await;
    exposition.text += &super::nodes::metrics(&state).await;
    crate::reply_latency::write_prometheus(&mut exposition.text);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        exposition.text,
    )
        .into_response()
}

/// One sample of a metric family: its label set (`{...}`, or empty) and its value.
type Sample = (String, String);

/// The Prometheus text being written, one metric family after the other.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    /// Writes one family: its help and type lines, then each sample.
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: Vec<Sample>) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(self.text, "{name}{labels} {value}");
        }
    }

    /// Messages, runs, tool calls, pending approvals and actor restarts.
    fn work(&mut self, counters: &Counters, figures: &Figures, tree: &TreeSnapshot) {
        let direction = |kind: &str| match kind {
            "user" => Some("in"),
            "assistant" => Some("out"),
            _ => None,
        };
        self.family(
            "clawvisor_messages_total",
            "counter",
            "Messages stored in transcripts, by direction.",
            counters
                .messages
                .iter()
                .filter_map(|(kind, count)| {
                    direction(kind)
                        .map(|dir| (format!("{{direction=\"{dir}\"}}"), count.to_string()))
                })
                .collect(),
        );
        self.family(
            "clawvisor_runs_total",
            "counter",
            "Agent runs, by status.",
            counters
                .runs
                .iter()
                .map(|(status, count)| {
                    (
                        format!("{{status=\"{}\"}}", label(status)),
                        count.to_string(),
                    )
                })
                .collect(),
        );
        self.family(
            "clawvisor_tool_calls_total",
            "counter",
            "Tool calls executed.",
            vec![(String::new(), counters.tool_calls.to_string())],
        );
        self.family(
            "clawvisor_approvals_pending",
            "gauge",
            "Approvals waiting for a decision.",
            vec![(String::new(), figures.approvals_pending.to_string())],
        );
        self.family(
            "clawvisor_actor_restarts_total",
            "counter",
            "Restarts of each supervised actor since boot.",
            tree.actors
                .iter()
                .map(|actor| {
                    (
                        format!("{{actor=\"{}\"}}", label(&actor.id)),
                        actor.restarts.to_string(),
                    )
                })
                .collect(),
        );
    }

    /// Model calls, the time spent on them, and tokens and spending by agent and model.
    fn models(&mut self, counters: &Counters) {
        self.family(
            "clawvisor_llm_calls_total",
            "counter",
            "Model calls.",
            vec![(String::new(), counters.llm.0.to_string())],
        );
        self.family(
            "clawvisor_llm_latency_seconds_sum",
            "counter",
            "Total time spent waiting for models.",
            vec![(
                String::new(),
                format!("{:.3}", counters.llm.1 as f64 / 1000.0),
            )],
        );
        let by_model = |pick: fn(&(String, String, i64, i64, f64)) -> String| {
            counters
                .usage
                .iter()
                .map(|row| {
                    (
                        format!(
                            "{{agent=\"{}\",model=\"{}\"}}",
                            label(&row.0),
                            label(&row.1)
                        ),
                        pick(row),
                    )
                })
                .collect::<Vec<_>>()
        };
        self.family(
            "clawvisor_llm_input_tokens_total",
            "counter",
            "Input tokens, by agent and model.",
            by_model(|row| row.2.to_string()),
        );
        self.family(
            "clawvisor_llm_output_tokens_total",
            "counter",
            "Output tokens, by agent and model.",
            by_model(|row| row.3.to_string()),
        );
        self.family(
            "clawvisor_llm_cost_usd_total",
            "counter",
            "Spending in USD, by agent and model.",
            by_model(|row| format!("{:.6}", row.4)),
        );
    }

    /// Whether each bot is up, and how long since its last poll and its newest update.
    fn bots(&mut self, counters: &Counters, figures: &Figures, tree: &TreeSnapshot, now: i64) {
        self.family(
            "clawvisor_bot_up",
            "gauge",
            "1 when the agent's Telegram bot is online and polling.",
            figures
                .bots
                .iter()
                .map(|(agent, (status, _, _))| {
                    let up = matches!(status.as_str(), "online" | "polling");
                    (agent_label(agent), u8::from(up).to_string())
                })
                .collect(),
        );
        self.family(
            "clawvisor_bot_poll_lag_seconds",
            "gauge",
            "Seconds since the bot's last completed getUpdates long poll (empty or not); grows only when polling stalls.",
            tree.bot_polls
                .iter()
                .map(|(agent, at)| (agent_label(agent), seconds_since(now, *at)))
                .collect(),
        );
        self.family(
            "clawvisor_bot_last_update_age_seconds",
            "gauge",
            "Seconds since the bot's newest received update (grows while nobody writes; for polling health see clawvisor_bot_poll_lag_seconds).",
            counters
                .last_update
                .iter()
                .map(|(agent, at)| (agent_label(agent), seconds_since(now, *at)))
                .collect(),
        );
    }
}

/// The label set naming one agent.
fn agent_label(agent: &str) -> String {
    format!("{{agent=\"{}\"}}", label(agent))
}

/// Seconds from `at_ms` to `now_ms` (never negative), to a tenth of a second.
fn seconds_since(now_ms: i64, at_ms: i64) -> String {
    format!("{:.1}", (now_ms - at_ms).max(0) as f64 / 1000.0)
}
