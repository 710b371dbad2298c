//! Studio: the web console, its JSON API, and the health endpoints, served by axum.
//!
//! [`router`] lists every route. The API is declared once, in the `api!` table: the router is
//! built from it and `/api/v1/openapi.json` is generated from it (`openapi.rs`: each route's
//! parameters, request body and answer with their schemas), so they cannot drift. Handlers read
//! through the [`Store`] (read-only connections) and act through actors by message; none holds
//! another actor's state. One file per concept: `overview` (overview, live
//! tree, `/metrics`), `agents` (agents, sessions and their transcripts), `agent_files` (an
//! agent's file: create, edit, duplicate, delete, skill toggles), `chat` (Studio's chat, also
//! into Telegram conversations, and its stop), `runs`, `schedules`, `approvals` (inbox, grants,
//! rules), `memory`, `mcp`, `handoffs`, `timezones`, `people`, `audit`, `logs` (the recent log
//! lines and their live tail), `costs`, `backups`, `secrets` (Keys & tokens), `reload`, `providers`, `tool_catalogue` and `setup`
//! (the first setup and what it and the agent editor pick from), `live` (runtime events as SSE), `gateway`
//! (the OpenAI-compatible endpoint), `error` (the one error shape), `openapi` (the API's
//! description), `assets` (the embedded console, CSP), `access` (the guard in front of every API
//! route) with `token_file`, and `views` (Studio's views of the files).
//!
//! The console (repository folder `studio/`: `index.html`, `app.css`, `app.js`, `pages/*.js`) is
//! plain HTML, CSS and ES modules with no build step, embedded with rust-embed. `app.js` owns the
//! hash router, the API client (CSRF header, error messages) and one `EventSource` on
//! `/api/v1/events`; each page module renders itself and names the event kinds that refresh it
//! (debounced, without losing form input; `ctx.accept(kind, event)` skips events about something
//! else). Changes go to the owning actor by message; reads go to the store. So that no page needs
//! a manual refresh, every change a page shows is announced on the bus by its owner once stored:
//! `agent_changed` (Agent: settings, skill toggles, tools), `policy_changed` (ApprovalDesk: grant
//! revoked, rule added or disabled), `people_changed` (`people`), `memory_changed` (Memory),
//! `handoff_changed` (HandoffSupervisor, Contract), and `audit_appended` from every writer of the
//! audit log (`audit::announce`, after the commit).
//!
//! Architecture Invariant: only `studio` speaks JSON to browsers; a page never shows a server
//! string as HTML.

pub mod access;
pub mod agent_files;
pub mod agents;
pub mod approvals;
pub mod assets;
pub mod audit;
pub mod backups;
// Issue #32: the agents' browsers on /metrics.
pub mod browser_metrics;
pub mod channel_pairings;
pub mod chat;
pub mod costs;
pub mod error;
pub mod event_json;
pub mod gateway;
pub mod handoffs;
pub mod hooks;
// Issue #33: Overview's "import available" hint.
pub mod import_hint;
pub mod live;
pub mod logs;
pub mod mcp;
pub mod memory;
pub mod nodes;
pub mod openapi;
pub mod overview;
pub mod people;
pub mod providers;
mod ready_bots;
pub mod reload;
pub mod runs;
pub mod schedules;
pub mod secrets;
pub mod setup;
pub mod store_health;
pub mod timezones;
pub mod token_file;
pub mod tool_catalogue;
pub mod triggers;
pub mod views;
mod whatsapp_hook;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post, put};
use axum::{Json, Router};

pub use error::ApiError;
pub use openapi::Answer;

use crate::events::EventBus;
use crate::protocol::events::{Events, TreeSnapshot};
use crate::registry::Registry;
use crate::store::Store;

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct StudioState {
    pub registry: Registry,
    pub store: Store,
    pub events: EventBus,
    /// Host names and the access token the API guard checks.
    pub access: Arc<access::Access>,
    /// The configured agents (replaced by a reload, like the other views of the files below).
    pub agents: Live<Vec<AgentEntry>>,
    /// When the daemon started.
    pub started_ms: i64,
    /// The daemon's and the agents' time zones and the agents' people (Time zones card).
    pub timezones: Live<timezones::Directory>,
    /// The configured model providers, for the Overview's provider checks (replaced by a reload
    /// that changes one).
    pub providers: Live<crate::llm::Providers>,
    /// The Telegram people each agent's file names (People page).
    pub people: Live<Vec<people::FilePeople>>,
    /// The agents' budgets and the unpriced models in use (Costs page).
    pub bill: Live<costs::Bill>,
    /// Scheduled backups' settings (Overview's Backups card; `[backup]` changes need a restart).
    pub backups: Arc<crate::backup::schedule::BackupPlan>,
    /// The secret variables the files name and where the running values came from (Keys &
    /// tokens; never a value in an answer).
    pub secrets: Live<secrets::SecretsView>,
    /// Actor ids that must have started (or failed visibly) before `/readyz` says ready: every
    /// configured bot, as the last reload left them. (MCP servers are asked of the MCP
    /// supervisor, whose set follows reloads.)
    pub ready_ids: Live<Vec<String>>,
    /// Where the config and agent files are, and what they define (the agent editor's source).
    pub files: Live<views::FileView>,
    /// The webhook triggers with their secrets, as the daemon started (`[[triggers]]` changes
    /// apply at a restart).
    pub triggers: Arc<crate::triggers::TriggerBook>,
    /// Each trigger's accepted deliveries of the last minute (`per_minute`).
    pub trigger_window: Arc<crate::triggers::RateWindow>,
    /// What became of each request to a trigger's address, for `/metrics`.
    pub trigger_counts: Arc<crate::triggers::HookCounts>,
    /// The WhatsApp accounts the webhook routes to, with their secrets (`/hooks/whatsapp`).
    pub whatsapp: Live<crate::whatsapp::Directory>,
}

impl StudioState {
    /// The bots `/readyz` waits for, as the files now say.
    pub fn expect_ready(&self) -> Arc<Vec<String>> {
        self.ready_ids.get()
    }
}

/// A view of the files that a reload replaces as a whole: readers take the current value (an
/// `Arc`, cheap), the reloader sets a new one. Clones share the value.
pub struct Live<T>(Arc<std::sync::RwLock<Arc<T>>>);

impl<T> Clone for Live<T> {
    fn clone(&self) -> Self {
        Live(self.0.clone())
    }
}

impl<T> Live<T> {
    pub fn new(value: T) -> Self {
        Self::shared(Arc::new(value))
    }

    /// A view of a value that is already shared.
    pub fn shared(value: Arc<T>) -> Self {
        Live(Arc::new(std::sync::RwLock::new(value)))
    }

    /// The current value.
    pub fn get(&self) -> Arc<T> {
        // A writer only swaps an `Arc`, so a poisoned lock still holds a whole value.
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A view of a value shared already.
    pub fn from_arc(value: Arc<T>) -> Self {
        Live(Arc::new(std::sync::RwLock::new(value)))
    }

    /// Replaces the value for every later reader.
    pub fn set(&self, value: T) {
        self.set_arc(Arc::new(value));
    }

    /// Replaces the value with one shared already.
    pub fn set_arc(&self, value: Arc<T>) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = value;
    }
}

/// What Studio knows of a configured agent without asking it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentEntry {
    pub name: String,
    pub telegram: bool,
}

/// Declares the API once: the router is built from this table and `/api/v1/openapi.json` is
/// generated from it, so the description cannot drift from what is served.
///
/// A route: `method "path" => handler, "summary"`, then what the document says of it:
/// `query: T` (the handler's `Query<T>`), `body: T` (its `Json<T>`; `optional_body: T` when it
/// may be left out), and `status: Answer::…` (its success status and answer: JSON with the
/// schema function beside the handler, Server-Sent Events, an SVG image). `tests/openapi.rs`
/// fails for a route without an answer, or whose handler reads a body or query it does not name.
macro_rules! api {
    (@query) => { None };
    (@query $query:ty) => { Some(openapi::of::<$query> as fn() -> serde_json::Value) };
    (@body) => { None };
    (@body $body:ty) => { Some(openapi::Body { schema: openapi::of::<$body>, required: true }) };
    (@optional) => { None };
    (@optional $body:ty) => { Some(openapi::Body { schema: openapi::of::<$body>, required: false }) };
    (@answer) => { None };
    (@answer $status:literal $answer:expr) => { Some(($status, $answer)) };
    ($( $method:ident $path:literal => $handler:path, $summary:literal
        $(, query: $query:ty)? $(, body: $body:ty)? $(, optional_body: $optional:ty)?
        $(, $status:literal: $answer:expr)?; )*) => {
        fn api_routes() -> Router<StudioState> {
            Router::new() $( .route($path, $method($handler)) )*
        }

        /// Every API route: (method, path, summary).
        pub const API_ROUTES: &[(&str, &str, &str)] = &[ $( (stringify!($method), $path, $summary) ),* ];

        /// Every API route as the OpenAPI document describes it.
        pub fn route_docs() -> Vec<openapi::RouteDoc> {
            vec![ $( openapi::RouteDoc {
                method: stringify!($method),
                path: $path,
                handler: stringify!($handler),
                summary: $summary,
                query: api!(@query $($query)?),
                body: match api!(@body $($body)?) {
                    Some(body) => Some(body),
                    None => api!(@optional $($optional)?),
                },
                answer: api!(@answer $($status $answer)?),
            } ),* ]
        }
    };
}

api! {
    post "/v1/chat/completions" => gateway::chat_completions, "OpenAI-compatible chat with an agent (model = the agent's name)",
        body: gateway::CompletionRequest, 200: Answer::JsonOrEvents(gateway::completion_schema, gateway::STREAM_EVENTS);
    get "/api/v1/session" => access::whoami, "Who is calling, and the CSRF token for mutations",
        200: Answer::Json(access::whoami_schema);
    post "/api/v1/session/logout" => access::logout, "Ends the browser session",
        200: Answer::Json(access::logout_schema);
    get "/api/v1/overview" => overview::overview, "Health, the supervision tree, bots, pending approvals, today's runs and cost",
        200: Answer::Json(overview::overview_schema);
    get "/api/v1/providers" => overview::providers, "Every model provider asked for its model list: does it answer and accept its key?",
        200: Answer::Json(overview::providers_schema);
    get "/api/v1/providers/{name}/models" => providers::models, "A provider's models, asked now (the model picker)",
        200: Answer::Json(providers::models_schema);
    post "/api/v1/providers/check" => providers::check, "Tries a provider before it is saved: does it answer, does it take the key, which models",
        body: providers::CheckBody, 200: Answer::Json(providers::check_schema);
    put "/api/v1/providers/{name}" => providers::set, "Writes a provider into the daemon's config (validated first) and applies it",
        body: providers::ProviderBody, 200: Answer::Json(providers::set_schema);
    post "/api/v1/telegram/check" => providers::check_token, "Asks Telegram whose bot token this is (the bot's @name); the token is not stored",
        body: providers::TokenBody, 200: Answer::Json(providers::check_token_schema);
    get "/api/v1/qr.svg" => providers::qr, "A QR code of `text` (an SVG image), e.g. a new bot's claim link",
        query: providers::QrQuery, 200: Answer::Svg;
    get "/api/v1/tree" => overview::tree_view, "The supervision tree: every actor's status, restarts and last error",
        200: Answer::Json(overview::tree_schema);
    get "/api/v1/events" => live::events, "Runtime events as Server-Sent Events",
        200: Answer::Events(live::EVENTS);
    get "/api/v1/agents" => agents::list, "Every agent with its runtime settings",
        200: Answer::Json(agents::list_schema);
    get "/api/v1/agents/{name}" => agents::detail, "One agent and its sessions",
        200: Answer::Json(agents::detail_schema);
    post "/api/v1/agents" => agent_files::create, "Creates an agent: writes its file (validated first) and starts it",
        body: agent_files::AgentBody, 201: Answer::Json(agent_files::changed_schema);
    patch "/api/v1/agents/{name}" => agent_files::update, "Changes the agent's file (instructions, model, tools, autonomy, budgets, zone, skills, voice, bot) and applies it; `paused` is runtime state",
        body: agent_files::AgentBody, 200: Answer::Json(agent_files::changed_schema);
    get "/api/v1/setup" => setup::status, "What is done of the first setup: a model provider with its key, the first agent, its Telegram bot (`needed`: the house cannot answer yet)",
        200: Answer::Json(setup::status_schema);
    get "/api/v1/tools" => tool_catalogue::list, "The tools an agent can have, in plain words with how careful the daemon is with each, and presets",
        200: Answer::Json(tool_catalogue::list_schema);
    get "/api/v1/agents/{name}/file" => agent_files::file, "The agent's definition as its file says it, the file's path and text, and whether Studio can write it",
        200: Answer::Json(agent_files::file_schema);
    post "/api/v1/agents/{name}/duplicate" => agent_files::duplicate, "A new agent with this one's settings (without its bot)",
        body: agent_files::DuplicateBody, 201: Answer::Json(agent_files::changed_schema);
    delete "/api/v1/agents/{name}" => agent_files::delete, "Deletes the agent's file and stops it; `data=keep|remove` says what happens to its workspace",
        query: agent_files::DeleteQuery, 200: Answer::Json(agent_files::delete_schema);
    patch "/api/v1/agents/{name}/skills/{skill}" => agent_files::toggle_skill, "Turns a skill on or off: the agent file's `skills` list, applied by a reload",
        body: agent_files::SkillToggle, 200: Answer::Json(agent_files::changed_schema);
    get "/api/v1/skills" => agents::skills, "The skills catalogue with each agent's enablement and availability",
        200: Answer::Json(agents::skills_schema);
    post "/api/v1/agents/{name}/chat" => chat::chat, "Talks to the agent as the operator, in a Studio conversation or one of its Telegram conversations (`chat`: `tg:<id>`; the answer goes to that Telegram chat too); the answer streams as Server-Sent Events",
        body: chat::ChatBody, 200: Answer::Events(chat::EVENTS);
    post "/api/v1/agents/{name}/chat/stop" => chat::stop, "Stops the answer being worked on in a conversation (`chat`), like /stop",
        body: chat::StopBody, 200: Answer::Json(chat::stop_schema);
    get "/api/v1/sessions" => agents::list_sessions, "Sessions, newest first",
        query: agents::SessionsQuery, 200: Answer::Json(agents::sessions_schema);
    get "/api/v1/sessions/{id}" => agents::session_detail, "A session's transcript",
        200: Answer::Json(agents::session_detail_schema);
    get "/api/v1/runs" => runs::list, "Runs, newest first, paged with `before`",
        query: runs::ListQuery, 200: Answer::Json(runs::list_schema);
    get "/api/v1/runs/{id}" => runs::detail, "A run with every step",
        200: Answer::Json(runs::detail_schema);
    get "/api/v1/approvals" => approvals::list_approvals, "Approvals, by status",
        query: approvals::ListQuery, 200: Answer::Json(approvals::list_schema);
    post "/api/v1/approvals/{id}/decision" => approvals::decide, "Approves or denies (optionally with a grant)",
        body: approvals::DecisionBody, 200: Answer::Json(approvals::decide_schema);
    get "/api/v1/approvals/{id}/screenshot" => approvals::screenshot, "The page a browser approval is about (a PNG)",
        200: Answer::Png;
    get "/api/v1/grants" => approvals::list_grants, "Scoped grants",
        query: approvals::GrantsQuery, 200: Answer::Json(approvals::grants_schema);
    post "/api/v1/grants/{id}/revoke" => approvals::revoke_grant, "Revokes a grant",
        200: Answer::Json(approvals::revoke_grant_schema);
    get "/api/v1/policy/rules" => approvals::list_rules, "Operator policy rules",
        200: Answer::Json(approvals::rules_schema);
    post "/api/v1/policy/rules" => approvals::add_rule, "Adds a rule (rules only tighten)",
        body: approvals::RuleBody, 201: Answer::Json(approvals::add_rule_schema);
    post "/api/v1/policy/rules/{id}/disable" => approvals::disable_rule, "Disables a rule",
        200: Answer::Json(approvals::disable_rule_schema);
    get "/api/v1/policy/decisions" => runs::decisions, "The policy gate's newest decisions",
        query: runs::DecisionsQuery, 200: Answer::Json(runs::decisions_schema);
    get "/api/v1/timezones" => timezones::list, "The daemon's, each agent's and each person's time zone, with where it comes from",
        200: Answer::Json(timezones::list_schema);
    patch "/api/v1/users/{id}/timezone" => timezones::set_user, "Sets (or, with an empty `timezone`, clears) a Telegram user's time zone",
        body: timezones::TimezoneBody, 200: Answer::Json(timezones::set_user_schema);
    get "/api/v1/people" => people::list, "Who talks to each agent: its bot's claim state (with the live claim code of an unclaimed bot), the people its file names, its owner, paired and blocked people, and pending pairing requests",
        200: Answer::Json(people::list_schema);
    post "/api/v1/pairings/{id}/{operation}" => people::decide_pairing, "Approves or denies a pending pairing request by its code (`approve`, `deny`)",
        200: Answer::Json(people::decide_pairing_schema);
    post "/api/v1/people/{name}/{id}/{operation}" => people::change, "Revokes, blocks or unblocks a Telegram user (by id) for an agent (`revoke`, `block`, `unblock`)",
        200: Answer::Json(people::change_schema);
    post "/api/v1/channel-pairings/{id}/{operation}" => channel_pairings::decide, "Approves or denies a pending WhatsApp or Signal pairing request by its code (`approve`, `deny`)",
        200: Answer::Json(channel_pairings::decide_schema);
    get "/api/v1/schedules" => schedules::list, "Scheduled jobs",
        200: Answer::Json(schedules::schema::list_schema);
    post "/api/v1/schedules" => schedules::create, "Creates a job",
        body: schedules::CreateBody, 201: Answer::Json(schedules::schema::job_schema);
    post "/api/v1/schedules/preview" => schedules::preview, "What a schedule means and its next fire times",
        body: schedules::PreviewBody, 200: Answer::Json(schedules::schema::preview_schema);
    get "/api/v1/schedules/{id}" => schedules::detail, "A job and its history (missed and caught-up runs marked)",
        200: Answer::Json(schedules::schema::detail_schema);
    post "/api/v1/schedules/{id}/pause" => schedules::pause, "Pauses a job",
        200: Answer::Json(schedules::schema::job_schema);
    post "/api/v1/schedules/{id}/resume" => schedules::resume, "Resumes a job",
        200: Answer::Json(schedules::schema::job_schema);
    delete "/api/v1/schedules/{id}" => schedules::cancel, "Cancels a job",
        200: Answer::Json(schedules::schema::job_schema);
    get "/api/v1/schedules/choices" => schedules::choices, "What a new job of an agent can be: where its answers can go (its chats and people by name, the owner's private chat by default), its time zone, the missed-run policy `run_once`",
        query: schedules::ChoicesQuery, 200: Answer::Json(schedules::schema::choices_schema);
    patch "/api/v1/schedules/{id}" => schedules::update, "Changes a job's name, prompt, schedule, time zone, missed-run policy or target (only the fields given)",
        body: schedules::UpdateBody, 200: Answer::Json(schedules::schema::job_schema);
    post "/api/v1/schedules/{id}/run" => schedules::run_now, "Runs a job now, once, besides its schedule (recorded with trigger `manual`; 409 while it runs)",
        202: Answer::Json(schedules::schema::run_now_schema);
    post "/api/v1/memory" => memory::add, "Adds a memory as the operator (audited)",
        body: memory::AddBody, 201: Answer::Json(memory::fact_schema);
    patch "/api/v1/memory/{id}" => memory::edit, "Edits a memory's text as the operator: its origin kept, the edit audited, the index updated",
        body: memory::EditBody, 200: Answer::Json(memory::fact_schema);
    get "/api/v1/memory" => memory::review, "Memories, newest first",
        query: memory::ReviewQuery, 200: Answer::Json(memory::review_schema);
    get "/api/v1/memory/stats" => memory::stats, "Memory counts and search mode",
        200: Answer::Json(memory::stats_schema);
    get "/api/v1/memory/search" => memory::search, "Searches memories",
        query: memory::SearchQuery, 200: Answer::Json(memory::search_schema);
    post "/api/v1/memory/{id}/{operation}" => memory::govern, "Archive, restore, redact, purge or reclassify a memory",
        optional_body: memory::GovernBody, 200: Answer::Json(memory::govern_schema);
    get "/api/v1/mcp" => mcp::servers, "MCP servers: health, trust and tools",
        200: Answer::Json(mcp::servers_schema);
    post "/api/v1/mcp/{server}/tools/{tool}/call" => mcp::call_tool, "Calls a tool of an MCP server as the operator (audited); the answer is the tool's text",
        body: mcp::CallBody, 200: Answer::Json(mcp::call_schema);
    // Issue #34, tool nodes.
    get "/api/v1/nodes" => nodes::list, "Paired tool nodes: link state, latency, version and protections",
        200: Answer::Json(nodes::list_schema);
    post "/api/v1/nodes" => nodes::add, "Pairs with a node by its one-time code and adds it to the config (audited)",
        body: nodes::AddBody, 200: Answer::Json(nodes::change_schema);
    delete "/api/v1/nodes/{name}" => nodes::remove, "Unpairs a node: tells it, forgets its pin, removes its entry (audited)",
        200: Answer::Json(nodes::change_schema);
    get "/api/v1/handoffs" => handoffs::list, "Handoff contracts",
        200: Answer::Json(handoffs::list_schema);
    get "/api/v1/handoffs/{id}" => handoffs::detail, "A contract and its timeline",
        200: Answer::Json(handoffs::detail_schema);
    post "/api/v1/handoffs/{id}/cancel" => handoffs::cancel, "Cancels a contract",
        200: Answer::Json(handoffs::cancel_schema);
    get "/api/v1/audit" => audit::entries, "Audit log entries, newest first, filtered by `actor`, `action` (or a family: `approval.*`), `agent` (entries by or about it), `subject` and time (`since_ms`, `until_ms`)",
        query: audit::EntriesQuery, 200: Answer::Json(audit::entries_schema);
    get "/api/v1/audit/facets" => audit::facets, "What the audit filters can choose from: the actors and actions in the log (with counts) and the agents",
        200: Answer::Json(audit::facets_schema);
    get "/api/v1/audit/verify" => audit::verify, "Checks the audit hash chain",
        200: Answer::Json(audit::verify_schema);
    get "/api/v1/logs" => logs::lines, "The daemon's recent log lines (kept in memory, redacted), newest first, filtered by `level` and text `q`, paged with `before`",
        query: logs::LinesQuery, 200: Answer::Json(logs::lines_schema);
    get "/api/v1/logs/events" => logs::events, "New log lines as Server-Sent Events (`line`, `gap`), filtered like /api/v1/logs, from `after` or Last-Event-ID",
        query: logs::LinesQuery, 200: Answer::Events(logs::EVENTS);
    get "/api/v1/backups" => backups::list, "Scheduled backups: the settings, the next run, recorded runs and the archives kept",
        200: Answer::Json(backups::list_schema);
    get "/api/v1/costs" => costs::costs, "Spending (dollars and tokens) by day, agent and model; each agent's daily budgets; unpriced models",
        query: costs::CostsQuery, 200: Answer::Json(costs::costs_schema);
    get "/api/v1/secrets" => secrets::list, "Keys and tokens the configuration names: what uses each, whether it is set, where from (environment or Studio's store) and its last characters; never a value",
        200: Answer::Json(secrets::list_schema);
    put "/api/v1/secrets/{name}" => secrets::set, "Keeps a key or token in the daemon's store (`value` in the body, never answered back) and reloads so that it takes effect; answers with the reload's report",
        body: secrets::SecretBody, 200: Answer::Json(secrets::change_schema);
    delete "/api/v1/secrets/{name}" => secrets::delete, "Deletes a key or token from the daemon's store and reloads; answers with the reload's report",
        200: Answer::Json(secrets::change_schema);
    post "/api/v1/reload" => reload::reload, "Re-reads the config and agent files and applies the difference (like SIGHUP); answers with the report",
        200: Answer::Json(reload::report_schema);
    // Webhook triggers (issue #32).
    get "/api/v1/triggers" => triggers::list, "Webhook triggers: address, agent, where answers go, whether the secret is set (never its value) and the last deliveries with their outcomes",
        200: Answer::Json(triggers::list_schema);
    post "/api/v1/triggers/{name}/test" => triggers::test, "Sends a test event through the trigger's path as the operator (stored, audited, run once like a webhook delivery)",
        optional_body: triggers::TestBody, 202: Answer::Json(triggers::test_schema);
    // Moving in from OpenClaw (issue #33).
    get "/api/v1/import/openclaw" => import_hint::openclaw, "Whether this machine has an OpenClaw installation not imported yet, and the commands that import it (dry run first)",
        200: Answer::Json(import_hint::openclaw_schema);
    get "/api/v1/openapi.json" => assets::openapi, "This API's OpenAPI description",
        200: Answer::Json(openapi::document_schema);
}

pub fn router(state: StudioState) -> Router {
    let api = api_routes()
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::guard,
        ))
        .layer(axum::middleware::from_fn(error::json_errors));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(
            "/metrics",
            get(overview::metrics).route_layer(axum::middleware::from_fn_with_state(
                state.clone(),
                access::metrics_guard,
            )),
        )
        .route("/login", get(access::login))
        .merge(hooks::router())
        .merge(whatsapp_hook::routes())
        .merge(api)
        .fallback(assets::asset)
        .with_state(state)
}

/// A `?status=` filter: absent or empty means all; otherwise one of `allowed`, or a 400 naming
/// them.
pub fn status_filter(status: Option<String>, allowed: &[&str]) -> Result<Option<String>, ApiError> {
    let status = status.filter(|status| !status.is_empty());
    if let Some(status) = &status
        && !allowed.contains(&status.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "unknown status `{status}` (one of: {})",
            allowed.join(", ")
        )));
    }
    Ok(status)
}

/// The JSON body, or a 400 that says what is wrong with it (see [`body_problem`]).
pub fn json_body<T>(
    body: Result<Json<T>, axum::extract::rejection::JsonRejection>,
) -> Result<T, ApiError> {
    body.map(|Json(body)| body)
        .map_err(|rejection| ApiError::bad_request(body_problem(&rejection)))
}

/// What is wrong with a body axum could not read, naming the field: `` `agent`: invalid type:
/// integer `5`, expected a string``, ``missing field `prompt` ``, ``unknown field `colour`,
/// expected one of …``; or that it is not JSON, or not sent as JSON.
pub fn body_problem(rejection: &axum::extract::rejection::JsonRejection) -> String {
    use std::error::Error;
    const SCHEMA: &str = "The route's request schema is in /api/v1/openapi.json.";
    let mut source: Option<&dyn Error> = rejection.source();
    while let Some(error) = source {
        if let Some(found) = error.downcast_ref::<serde_path_to_error::Error<serde_json::Error>>() {
            let inner = found.inner();
            if !inner.is_data() {
                return format!(
                    "The request body is not valid JSON ({inner}); send one JSON object. {SCHEMA}"
                );
            }
            // serde_json ends its message with where in the text it was ("at line 1 column 9").
            let text = inner.to_string();
            let what = text.split(" at line ").next().unwrap_or(&text);
            return match found.path().to_string().as_str() {
                "." => format!("The request body is not what this route takes: {what}. {SCHEMA}"),
                path => format!("The request body's `{path}` is wrong: {what}. {SCHEMA}"),
            };
        }
        source = error.source();
    }
    match rejection {
        axum::extract::rejection::JsonRejection::MissingJsonContentType(_) => format!(
            "This route takes a JSON body: send one with `Content-Type: application/json`. {SCHEMA}"
        ),
        _ => rejection.body_text(),
    }
}

async fn snapshot(state: &StudioState) -> Option<TreeSnapshot> {
    Events::new(&state.registry).snapshot().await.ok()
}

/// 200 once the tree is up and the database writer is alive.
async fn healthz(State(state): State<StudioState>) -> Response {
    if !state.store.writer_alive() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "database writer is not running\n",
        )
            .into_response();
    }
    match snapshot(&state).await {
        Some(snapshot) if snapshot.boot_complete => (StatusCode::OK, "ok\n").into_response(),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "events actor not reachable\n",
        )
            .into_response(),
    }
}

/// 200 once every configured bot is online (`ready_bots`: a bot that cannot get online holds it
/// at 503 with its reason), every enabled MCP server has published its tools to its agents or
/// failed visibly (its reason in Studio's MCP page and the log), and while database writes
/// commit. Otherwise 503, naming what it still waits for (or the store's trouble: "database: disk
/// full at /var/lib/clawvisor — free space to resume").
async fn readyz(State(state): State<StudioState>) -> Response {
    let Some(snapshot) = snapshot(&state).await else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "events actor not reachable\n",
        )
            .into_response();
    };
    if !snapshot.boot_complete || !state.store.writer_alive() {
        return (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response();
    }
    // Writes that do not commit: not ready, in the words of the store's health.
    if let Some(sentence) = state.store.health().sentence() {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("{sentence}\n")).into_response();
    }
    let mut waiting: Vec<String> = state
        .expect_ready()
        .iter()
        .filter(|id| {
            !snapshot
                .actors
                .iter()
                .any(|actor| &actor.id == *id && actor.status != "starting")
        })
        .cloned()
        .collect();
    waiting.extend(ready_bots::bots_not_online(&state, &snapshot).await);
    waiting.extend(mcp_pending(&state).await);
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("waiting for: {}\n", waiting.join(", ")),
        )
            .into_response()
    }
}

/// The MCP servers `/readyz` still waits for, as `mcp:<server> (what it is doing)` (a tool node's
/// link as `node:<name>`); asked of the MCP supervisor each time, so servers added or removed by
/// a reload count as they are now.
async fn mcp_pending(state: &StudioState) -> Vec<String> {
    let nodes = nodes::node_names(state);
    let servers = match crate::protocol::mcp::Mcp::new(&state.registry)
        .health()
        .await
    {
        Ok(servers) => servers,
        Err(error) => return vec![format!("mcp ({error})")],
    };
    servers
        .iter()
        .filter(|server| server.is_pending())
        .map(|server| {
            let step = if server.state == "up" {
                "handing its tools to the agents"
            } else {
                "connecting"
            };
            let name = if nodes.contains(&server.server) {
                format!("node:{}", server.server)
            } else {
                crate::protocol::mcp::link(&server.server)
                    .local()
                    .to_string()
            };
            format!("{name} ({step})")
        })
        .collect()
}

/// How long an in-flight request may take to finish when Studio stops.
pub const GRACEFUL_STOP: Duration = Duration::from_secs(3);
