//! Agents managed from Studio, with the files as the one source of truth: `POST /api/v1/agents`
//! (new), `PATCH /api/v1/agents/{name}` (edit), `POST /api/v1/agents/{name}/duplicate`, `DELETE
//! /api/v1/agents/{name}`, `GET /api/v1/agents/{name}/file`, and the skill toggle.
//!
//! Every change of a definition is an edit of the agent's TOML file by the reloader
//! (`protocol::reload::FileEdit`): validated whole like a reload before anything is written,
//! written with the file's comments and untouched keys kept, audited as the operator's, and
//! applied by a reload. A file that cannot be written is answered 409 with the TOML to put there
//! by hand. Pausing is not a definition but the agent's runtime state: it goes to the agent.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use super::openapi::{
    array, boolean, described, extend, integer, map, nullable, number, object, one_of, requiring,
    string,
};
use super::{ApiError, StudioState, json_body};
use crate::config::Autonomy;
use crate::config::edit::Setting;
use crate::events::{EventData, EventKind};
use crate::protocol::CallError;
use crate::protocol::agent::Agent;
use crate::protocol::reload::{EditOutcome, FileEdit, Reloader};

/// Who Studio's edits are audited as.
const OPERATOR: &str = "operator (studio)";

/// An agent's definition as Studio's editor sends it: every field optional (absent: unchanged);
/// an empty text for `timezone`, `reports_to`, `voice_replies` or `approval_ttl` takes the key
/// out of the file (its default applies); `telegram: null` disconnects the bot.
#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentBody {
    /// Only when creating: the new agent's name.
    name: Option<String>,
    /// What it is for, in one line.
    description: Option<String>,
    /// A provider of the config's `[providers]`.
    provider: Option<String>,
    /// A model of that provider (the picker lists them); not empty.
    model: Option<String>,
    /// What it is told before every conversation.
    instructions: Option<String>,
    /// `trust_first`, `require_approval` or `supervised`.
    autonomy: Option<String>,
    /// Built-in tools by name (`GET /api/v1/tools` lists them).
    tools: Option<Vec<String>>,
    /// Skills by name (`GET /api/v1/skills`).
    skills: Option<Vec<String>>,
    /// Dollars a day it may spend (0: no limit).
    daily_budget_usd: Option<f64>,
    /// Tokens a day it may use (0: no limit).
    daily_token_budget: Option<u64>,
    /// An IANA zone, like `Europe/Berlin` (empty: the daemon's).
    timezone: Option<String>,
    /// When it answers with a voice note (empty: never).
    voice_replies: Option<String>,
    /// It may look at pictures.
    vision: Option<bool>,
    /// It may run shell commands at all.
    allow_shell: Option<bool>,
    /// Transcripts of voice notes are echoed into the chat.
    echo_transcripts: Option<bool>,
    /// How long an approval request waits, like `30m` (empty: the default).
    approval_ttl: Option<String>,
    /// The agent it reports to (empty: none).
    reports_to: Option<String>,
    /// Its Telegram bot; `null` disconnects it.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Option<TelegramBody>")]
    telegram: Option<Option<TelegramBody>>,
    /// The runtime state (not in the file).
    paused: Option<bool>,
}

/// The agent's bot: the variable (or stored secret) holding its token, who may talk to it.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelegramBody {
    /// The variable (or stored secret) that holds the bot's token.
    token_env: String,
    /// Telegram user ids allowed to talk to it (empty: its owner claims it).
    #[serde(default)]
    allow_users: Vec<i64>,
    /// Telegram user ids who may approve its actions (default: `allow_users`).
    #[serde(default)]
    approvers: Vec<i64>,
    /// The Bot API's address (default Telegram's).
    api_url: Option<String>,
}

/// A field that may be `null` (Some(None)) as well as absent (None).
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

impl AgentBody {
    /// The file's keys this body sets, checked where a bad value would otherwise only be named
    /// by the reload (an unknown autonomy, an empty model).
    fn settings(&self) -> Result<Vec<(String, Setting)>, ApiError> {
        let mut settings = Vec::new();
        let mut text = |key: &str, value: &Option<String>, empty_removes: bool| {
            if let Some(value) = value {
                let setting = if empty_removes && value.trim().is_empty() {
                    Setting::Absent
                } else {
                    Setting::Text(value.clone())
                };
                settings.push((key.to_string(), setting));
            }
        };
        self.check()?;
        text("description", &self.description, false);
        text("provider", &self.provider, false);
        text(
            "model",
            &self.model.as_ref().map(|model| model.trim().to_string()),
            false,
        );
        text("instructions", &self.instructions, false);
        text("autonomy", &self.autonomy, false);
        text("timezone", &self.timezone, true);
        text("voice_replies", &self.voice_replies, true);
        text("approval_ttl", &self.approval_ttl, true);
        text("reports_to", &self.reports_to, true);
        let mut push = |key: &str, setting: Option<Setting>| {
            if let Some(setting) = setting {
                settings.push((key.to_string(), setting));
            }
        };
        push("tools", self.tools.clone().map(Setting::Texts));
        push("skills", self.skills.clone().map(Setting::Texts));
        push(
            "daily_budget_usd",
            self.daily_budget_usd.map(Setting::Number),
        );
        push(
            "daily_token_budget",
            self.daily_token_budget
                .map(|tokens| Setting::Integer(i64::try_from(tokens).unwrap_or(i64::MAX))),
        );
        push("vision", self.vision.map(Setting::Flag));
        // Choosing the shell tool is what turns it on: its file's `allow_shell` follows the tool
        // list unless the body says otherwise (the policy still decides when it asks first).
        let shell_listed = self
            .tools
            .as_ref()
            .map(|tools| tools.iter().any(|tool| tool == "shell"));
        push(
            "allow_shell",
            self.allow_shell.or(shell_listed).map(Setting::Flag),
        );
        push("echo_transcripts", self.echo_transcripts.map(Setting::Flag));
        settings.extend(self.telegram_settings()?);
        Ok(settings)
    }

    /// Refuses a value the reload would otherwise only name later (an unknown autonomy, an empty
    /// model, a tool that does not exist).
    fn check(&self) -> Result<(), ApiError> {
        if let Some(autonomy) = &self.autonomy
            && Autonomy::parse(autonomy).is_none()
        {
            return Err(ApiError::bad_request(format!(
                "unknown autonomy `{autonomy}` (one of: trust_first, require_approval, supervised)"
            )));
        }
        if self
            .model
            .as_deref()
            .is_some_and(|model| model.trim().is_empty())
        {
            return Err(ApiError::bad_request("model must not be empty"));
        }
        if let Some(unknown) = self
            .tools
            .iter()
            .flatten()
            .find(|tool| !crate::tools::is_known_tool(tool))
        {
            return Err(ApiError::bad_request(format!(
                "`tools`: there is no tool `{unknown}` (the Agents page lists the tools an agent can have)"
            )));
        }
        Ok(())
    }

    /// The `[telegram]` keys: the bot's token variable and who may talk to it, or none (`null`).
    fn telegram_settings(&self) -> Result<Vec<(String, Setting)>, ApiError> {
        let mut settings = Vec::new();
        let mut push = |key: &str, setting: Option<Setting>| {
            if let Some(setting) = setting {
                settings.push((key.to_string(), setting));
            }
        };
        match &self.telegram {
            None => {}
            Some(None) => push("telegram.token_env", Some(Setting::Absent)),
            Some(Some(telegram)) => {
                if telegram.token_env.trim().is_empty() {
                    return Err(ApiError::bad_request(
                        "`telegram.token_env` must name the variable (or stored secret) that holds the bot's token",
                    ));
                }
                push(
                    "telegram.token_env",
                    Some(Setting::Text(telegram.token_env.trim().into())),
                );
                push(
                    "telegram.allow_users",
                    Some(Setting::Integers(telegram.allow_users.clone())),
                );
                push(
                    "telegram.approvers",
                    Some(Setting::Integers(telegram.approvers.clone())),
                );
                if let Some(api_url) = &telegram.api_url {
                    push("telegram.api_url", Some(Setting::Text(api_url.clone())));
                }
            }
        }
        Ok(settings)
    }
}

/// Asks the reloader to make `edit`; a refusal is a 400 naming the key, a file that cannot be
/// written a 409 with the TOML to put there by hand.
async fn apply(state: &StudioState, edit: FileEdit) -> Result<Value, Response> {
    let outcome = match Reloader::new(&state.registry).edit(edit, OPERATOR).await {
        Ok(outcome) => outcome,
        Err(CallError::NotRunning { .. }) => {
            return Err(ApiError::unavailable("the reloader").into_response());
        }
        Err(CallError::NoAnswer { .. }) => {
            return Err(ApiError(
                StatusCode::GATEWAY_TIMEOUT,
                "the change was not confirmed in time, so its outcome is unknown: look at the agent's file and the daemon's log".into(),
            )
            .into_response());
        }
    };
    match outcome {
        EditOutcome::Applied { path, report } => Ok(json!({
            "file": path, "reload": report.summary(), "reload_ok": report.ok,
        })),
        EditOutcome::Refused(reason) => Err(ApiError::bad_request(reason).into_response()),
        EditOutcome::NotWritable { path, reason, text } => Err(super::error::unwritable(
            format!(
                "The change is valid, but {path} cannot be written ({reason}). Put this text in that file yourself, then reload."
            ),
            path,
            text,
        )),
    }
}

/// The agent as the list shows it after a change (see [`answer`]): its settings, with `file`,
/// `reload` and `reload_ok` when its file was written; `{name, reachable: false}` while its new
/// actor does not answer yet.
pub fn changed_schema() -> Value {
    let agent = extend(
        super::agents::agent_schema(),
        [
            ("file?", described("the agent file written", string())),
            (
                "reload?",
                described("the reload's one-line summary", string()),
            ),
            ("reload_ok?", boolean()),
        ],
    );
    requiring(agent, &["name", "reachable"])
}

/// The agent as the list shows it, after a change (its new actor answers).
async fn answer(state: &StudioState, name: &str, change: Value) -> Response {
    let mut body = match super::agents::view(state, name).await {
        Ok(view) => super::agents::agent_json(&view, state.files.get().agents.get(name)),
        Err(_) => json!({"name": name, "reachable": false}),
    };
    if let (Some(body), Some(change)) = (body.as_object_mut(), change.as_object()) {
        for (key, value) in change {
            body.insert(key.clone(), value.clone());
        }
    }
    Json(body).into_response()
}

fn known(state: &StudioState, name: &str) -> Result<(), ApiError> {
    if state.files.get().agents.contains_key(name) {
        return Ok(());
    }
    Err(ApiError::not_found(format!("no agent is named `{name}`")))
}

/// `PATCH /api/v1/agents/{name}`: changes the agent's file (any of its keys, see [`AgentBody`])
/// and, with `paused`, its runtime state.
pub async fn update(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    body: Result<Json<AgentBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    match update_agent(&state, &name, body).await {
        Ok(response) | Err(response) => response,
    }
}

async fn update_agent(
    state: &StudioState,
    name: &str,
    body: Result<Json<AgentBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Response> {
    let body = json_body(body).map_err(IntoResponse::into_response)?;
    known(state, name).map_err(IntoResponse::into_response)?;
    if body.name.as_deref().is_some_and(|new| new != name) {
        return Err(ApiError::bad_request(
            "`name` cannot change: an agent's name is its identity (duplicate it under the new name, then delete the old one)",
        )
        .into_response());
    }
    let settings = body.settings().map_err(IntoResponse::into_response)?;
    let mut change = json!({});
    if !settings.is_empty() {
        let edit = FileEdit::UpdateAgent {
            name: name.to_string(),
            settings,
        };
        change = apply(state, edit).await?;
    }
    if let Some(paused) = body.paused {
        Agent::new(&state.registry, name)
            .set_paused(paused)
            .await
            .map_err(|error| ApiError::bad_request(error.to_string()).into_response())?;
    }
    let response = answer(state, name, change).await;
    announce_change(state, name).await;
    Ok(response)
}

/// Tells open pages that the agent changed (`agent_changed`), with its settings as it now runs.
async fn announce_change(state: &StudioState, name: &str) {
    let Ok(view) = super::agents::view(state, name).await else {
        return;
    };
    state.events.publish_data(
        EventKind::AgentChanged,
        &format!("agent:{name}"),
        &format!(
            "settings: autonomy {}, model {}, {}",
            view.autonomy.as_str(),
            view.model,
            if view.paused { "paused" } else { "running" }
        ),
        EventData::AgentSettingsChanged {
            agent: name.to_string(),
            autonomy: view.autonomy.as_str().to_string(),
            model: view.model.clone(),
            paused: view.paused,
        },
    );
}

/// `POST /api/v1/agents`: a new agent (`name`, `provider`, `model` at least), written as
/// `<agents dir>/<name>.toml` and started.
pub async fn create(
    State(state): State<StudioState>,
    body: Result<Json<AgentBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let result = async {
        let body = json_body(body).map_err(IntoResponse::into_response)?;
        let name = body.name.clone().unwrap_or_default();
        if name.trim().is_empty() {
            return Err(ApiError::bad_request("`name` is required").into_response());
        }
        let mut settings = body.settings().map_err(IntoResponse::into_response)?;
        for required in ["provider", "model"] {
            if !settings.iter().any(|(key, _)| key == required) {
                return Err(
                    ApiError::bad_request(format!("`{required}` is required")).into_response()
                );
            }
        }
        if !settings.iter().any(|(key, _)| key == "instructions") {
            settings.push((
                "instructions".into(),
                Setting::Text(DEFAULT_INSTRUCTIONS.into()),
            ));
        }
        let change = apply(
            &state,
            FileEdit::CreateAgent {
                name: name.clone(),
                settings,
            },
        )
        .await?;
        Ok((StatusCode::CREATED, answer(&state, &name, change).await).into_response())
    }
    .await;
    match result {
        Ok(response) | Err(response) => response,
    }
}

/// What a new agent is told when the operator writes nothing: a plain helpful assistant.
pub const DEFAULT_INSTRUCTIONS: &str = "You are a friendly, concise personal assistant.\n\
Answer plainly. When a task needs a tool, use it; when an action could change or delete\n\
something, say what you are about to do. Never invent facts about the people you talk to.\n";

/// The copy's name.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DuplicateBody {
    /// The new agent's name.
    name: String,
}

/// `POST /api/v1/agents/{name}/duplicate`: a new agent `name` with this one's settings (without
/// its bot: one bot serves one agent).
pub async fn duplicate(
    State(state): State<StudioState>,
    Path(from): Path<String>,
    body: Result<Json<DuplicateBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let result = async {
        let body = json_body(body).map_err(IntoResponse::into_response)?;
        known(&state, &from).map_err(IntoResponse::into_response)?;
        let edit = FileEdit::DuplicateAgent {
            from,
            name: body.name.clone(),
        };
        let change = apply(&state, edit).await?;
        Ok((
            StatusCode::CREATED,
            answer(&state, &body.name, change).await,
        )
            .into_response())
    }
    .await;
    match result {
        Ok(response) | Err(response) => response,
    }
}

/// What happens to a deleted agent's workspace.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// `keep` (its workspace stays) or `remove` (its workspace goes too); asked, never assumed.
    data: Option<String>,
}

/// `DELETE /api/v1/agents/{name}?data=keep|remove`: the agent's file removed and the agent
/// stopped; with `remove`, its workspace too. Transcripts, runs and the audit log stay.
pub async fn delete(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    Query(query): Query<DeleteQuery>,
) -> Response {
    let remove_data = match query.data.as_deref() {
        Some("keep") => false,
        Some("remove") => true,
        _ => {
            return ApiError::bad_request(
                "`data` must say what happens to the agent's workspace: `keep` or `remove`",
            )
            .into_response();
        }
    };
    if let Err(error) = known(&state, &name) {
        return error.into_response();
    }
    match apply(&state, FileEdit::DeleteAgent { name: name.clone(), remove_data }).await {
        Ok(change) => Json(json!({"deleted": name, "workspace_removed": remove_data, "file": change["file"], "reload": change["reload"]})).into_response(),
        Err(response) => response,
    }
}

/// What `DELETE /api/v1/agents/{name}` answers.
pub fn delete_schema() -> Value {
    object([
        ("deleted", described("the agent's name", string())),
        ("workspace_removed", boolean()),
        ("file", described("the agent file removed", string())),
        (
            "reload",
            described("the reload's one-line summary", string()),
        ),
    ])
}

/// `GET /api/v1/agents/{name}/file`: the agent's definition as its file says it, the file's path
/// and text, and whether Studio can write it.
pub async fn file(
    State(state): State<StudioState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let files = state.files.get();
    let Some(spec) = files.agents.get(&name) else {
        return Err(ApiError::not_found(format!("no agent is named `{name}`")));
    };
    let path = files.agent_file(&name);
    let text = path
        .as_ref()
        .and_then(|path| std::fs::read_to_string(path).ok());
    let writable = path.as_ref().is_some_and(|path| {
        std::fs::OpenOptions::new().append(true).open(path).is_ok()
            && path
                .parent()
                .and_then(|dir| std::fs::metadata(dir).ok())
                .is_some_and(|dir| !dir.permissions().readonly())
    });
    Ok(Json(json!({
        "name": spec.name,
        "file": path.map(|path| path.display().to_string()),
        "writable": writable,
        "text": text,
        "daemon_timezone": files.timezone,
        "providers": files.providers.iter()
            .map(|(name, provider)| (name.clone(), provider.kind.as_str()))
            .collect::<BTreeMap<_, _>>(),
        "settings": {
            "description": spec.description, "provider": spec.provider, "model": spec.model,
            "instructions": spec.instructions, "autonomy": spec.autonomy.as_str(),
            "tools": spec.tools, "skills": spec.skills, "daily_budget_usd": spec.daily_budget_usd,
            "daily_token_budget": spec.daily_token_budget, "timezone": spec.timezone,
            "voice_replies": spec.voice_replies.as_str(), "vision": spec.vision,
            "allow_shell": spec.allow_shell, "echo_transcripts": spec.echo_transcripts,
            "reports_to": spec.reports_to,
            "telegram": spec.telegram.as_ref().map(|telegram| json!({
                "token_env": telegram.token_env, "allow_users": telegram.allow_users,
                "approvers": telegram.approvers,
            })),
        },
    })))
}

/// What `GET /api/v1/agents/{name}/file` answers.
pub fn file_schema() -> Value {
    let telegram = object([
        ("token_env", string()),
        ("allow_users", array(integer())),
        ("approvers", array(integer())),
    ]);
    let settings = object([
        ("description", string()),
        ("provider", string()),
        ("model", string()),
        ("instructions", string()),
        (
            "autonomy",
            one_of(&["trust_first", "require_approval", "supervised"]),
        ),
        ("tools", array(string())),
        ("skills", array(string())),
        ("daily_budget_usd", number()),
        ("daily_token_budget", integer()),
        ("timezone", nullable(string())),
        ("voice_replies", string()),
        ("vision", boolean()),
        ("allow_shell", boolean()),
        ("echo_transcripts", boolean()),
        ("reports_to", nullable(string())),
        ("telegram", nullable(telegram)),
    ]);
    object([
        ("name", string()),
        (
            "file",
            described(
                "the agent file (null: the built-in example agent)",
                nullable(string()),
            ),
        ),
        (
            "writable",
            described("Studio can write the file", boolean()),
        ),
        (
            "text",
            described("the file as it is on disk", nullable(string())),
        ),
        ("daemon_timezone", string()),
        (
            "providers",
            described("the config's providers: name → kind", map(string())),
        ),
        ("settings", settings),
    ])
}

/// A skill turned on or off.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillToggle {
    /// On (`true`) or off.
    enabled: bool,
}

/// `PATCH /api/v1/agents/{name}/skills/{skill}` with `{"enabled": bool}`: the skill added to or
/// taken out of the agent file's `skills`, applied by a reload.
pub async fn toggle_skill(
    State(state): State<StudioState>,
    Path((name, skill)): Path<(String, String)>,
    body: Result<Json<SkillToggle>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let result = async {
        let body = json_body(body).map_err(IntoResponse::into_response)?;
        let view = super::agents::view(&state, &name)
            .await
            .map_err(IntoResponse::into_response)?;
        let Some(entry) = view.skills.iter().find(|entry| entry.name == skill) else {
            return Err(ApiError::not_found(format!(
                "agent `{name}` has no skill `{skill}` (see the Skills page)"
            ))
            .into_response());
        };
        if body.enabled
            && let Some(reason) = &entry.unavailable
        {
            return Err(
                ApiError::bad_request(format!("`{skill}` cannot be enabled: {reason}"))
                    .into_response(),
            );
        }
        let files = state.files.get();
        let mut skills = files
            .agents
            .get(&name)
            .map(|spec| spec.skills.clone())
            .unwrap_or_default();
        skills.retain(|other| *other != skill);
        if body.enabled {
            skills.push(skill.clone());
        }
        let edit = FileEdit::UpdateAgent {
            name: name.clone(),
            settings: vec![("skills".into(), Setting::Texts(skills))],
        };
        let change = apply(&state, edit).await?;
        let verb = if body.enabled { "enabled" } else { "disabled" };
        state.events.publish_data(
            EventKind::AgentChanged,
            &format!("agent:{name}"),
            &format!("skill {skill} {verb}"),
            EventData::AgentSkillToggled {
                agent: name.clone(),
                skill: skill.clone(),
                enabled: body.enabled,
            },
        );
        Ok(answer(&state, &name, change).await)
    }
    .await;
    match result {
        Ok(response) | Err(response) => response,
    }
}
