//! People: `/api/v1/people` (per agent: its bot's claim state with the live claim code of an
//! unclaimed bot, the people its file names, its owner, paired and blocked people, and pending
//! pairing requests), `/api/v1/pairings/{code}/{approve|deny}` and
//! `/api/v1/people/{agent}/{user}/{revoke|block|unblock}`. WhatsApp and Signal pairing requests
//! are decided in `channel_pairings`.
//!
//! Changes go through `crate::people` (stored with their audit row, then announced as
//! `people_changed`); the bot reads who may talk on every message, so a change applies to the
//! next one. People named in an agent file are managed in that file and refused here.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::openapi::{array, boolean, described, integer, nullable, object, one_of, string};
use super::{ApiError, StudioState};
use crate::config::AgentSpec;
use crate::domain::ChatKey;
use crate::people::{self as service, PeopleError, PersonChange};
use crate::store::people::{self as queries, Claim, Person, PersonStatus};
use crate::store::telegram::{PairingRow, pending_pairings};
use crate::telegram::pairing::display;

/// Who the operator is in the audit log.
const OPERATOR: &str = "operator (studio)";

/// What an agent's file says about its Telegram people (from the config, once per boot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePeople {
    pub agent: String,
    /// Whether the agent has a bot at all.
    pub bot: bool,
    pub allow_users: Vec<i64>,
    pub approvers: Vec<i64>,
}

impl FilePeople {
    pub fn from_specs(specs: &[AgentSpec]) -> Vec<FilePeople> {
        specs
            .iter()
            .map(|spec| FilePeople {
                agent: spec.name.clone(),
                bot: spec.telegram.is_some(),
                allow_users: spec
                    .telegram
                    .as_ref()
                    .map(|telegram| telegram.allow_users.clone())
                    .unwrap_or_default(),
                approvers: spec
                    .telegram
                    .as_ref()
                    .map(|telegram| telegram.approvers.clone())
                    .unwrap_or_default(),
            })
            .collect()
    }

    fn names(&self, user_id: i64) -> bool {
        self.allow_users.contains(&user_id) || self.approvers.contains(&user_id)
    }

    fn names_anyone(&self) -> bool {
        !self.allow_users.is_empty() || !self.approvers.is_empty()
    }
}

fn person_json(person: &Person) -> Value {
    json!({
        "user_id": person.user_id, "name": person.name, "status": person.status.label(),
        "changed_ms": person.changed_ms, "changed_by": person.changed_by,
    })
}

fn pairing_json(row: &PairingRow) -> Value {
    json!({
        "code": row.code, "display": display(&row.code), "user_id": row.user_id, "name": row.name,
        "created_ms": row.created_ms, "expires_ms": row.expires_ms,
    })
}

fn claim_json(file: &FilePeople, owner: Option<&Person>, claim: Option<&Claim>, now: i64) -> Value {
    if !file.bot {
        return json!({"state": "no_bot"});
    }
    if file.names_anyone() {
        return json!({"state": "managed_by_file"});
    }
    if let Some(owner) = owner {
        return json!({
            "state": "claimed", "owner": {"user_id": owner.user_id, "name": owner.name},
            "claimed_ms": claim.and_then(|claim| claim.claimed_ms).unwrap_or(owner.changed_ms),
        });
    }
    match claim {
        Some(claim) if claim.is_live(now) => json!({
            "state": "unclaimed", "code": display(&claim.code), "created_ms": claim.created_ms,
            "expires_ms": claim.expires_ms,
        }),
        // Expired, or used by an owner since revoked: the bot's sweep makes a new one.
        Some(_) => json!({"state": "renewing"}),
        None => json!({"state": "waiting_for_bot"}),
    }
}

/// `GET /api/v1/people`
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let now = crate::clock::now_ms();
    let (people, claims, pending, names) = state
        .store
        .read(move |conn| {
            Ok((
                queries::people(conn)?,
                queries::claims(conn)?,
                pending_pairings(conn, now)?,
                crate::store::timezones::known_names(conn)?,
            ))
        })
        .await?;
    let seam = state
        .store
        .read(move |conn| {
            Ok((
                crate::store::channels::people(conn)?,
                crate::store::channels::claims(conn)?,
                crate::store::outbox::held(conn)?,
                crate::store::channels::pending_pairings(conn, now)?,
            ))
        })
        .await?;
    let whatsapp = state.whatsapp.get();
    let files = state.files.get();
    let signal_agents: Vec<String> = files
        .agents
        .values()
        .filter(|spec| spec.signal.is_some())
        .map(|spec| spec.name.clone())
        .collect();
    let streams = signal_streams(&state, signal_agents).await?;
    let agents: Vec<Value> = state
        .people
        .get()
        .iter()
        .map(|file| {
            let mine: Vec<&Person> = people.iter().filter(|p| p.agent == file.agent).collect();
            let owner = mine
                .iter()
                .find(|person| person.status == PersonStatus::Owner)
                .copied();
            let claim = claims.iter().find(|claim| claim.agent == file.agent);
            let mut from_file: Vec<i64> = file
                .allow_users
                .iter()
                .chain(&file.approvers)
                .copied()
                .collect();
            from_file.sort_unstable();
            from_file.dedup();
            json!({
                "agent": file.agent,
                "bot": file.bot,
                "claim": claim_json(file, owner, claim, now),
                "from_file": from_file.iter().map(|user_id| json!({
                    "user_id": user_id,
                    "name": names.iter().find(|(id, _)| id == user_id).map(|(_, name)| name),
                    "approver": file.approvers.contains(user_id)
                        || (file.approvers.is_empty() && file.allow_users.contains(user_id)),
                })).collect::<Vec<_>>(),
                "people": mine.iter().map(|person| person_json(person)).collect::<Vec<_>>(),
                "pending": pending.iter().filter(|row| row.agent == file.agent)
                    .map(pairing_json).collect::<Vec<_>>(),
                "whatsapp": whatsapp_json(&whatsapp, &file.agent, &seam, now),
                "signal": signal_json(
                    files.agents.get(&file.agent).and_then(|spec| spec.signal.as_ref()),
                    &file.agent,
                    &seam,
                    streams.get(&file.agent),
                    now,
                ),
            })
        })
        .collect();
    Ok(Json(json!({
        "agents": agents,
        "note": "People named in an agent file's allow_users or approvers are managed in that file; edit it, then reload (Overview's \"Reload configuration\", or clawvisor reload) to apply the change.",
    })))
}

/// The channel seam's tables as the People page reads them.
type SeamRows = (
    Vec<crate::store::channels::ChannelPerson>,
    Vec<crate::store::channels::ChannelClaim>,
    Vec<crate::store::outbox::HeldRow>,
    Vec<crate::store::channels::ChannelPairing>,
);

/// An agent's WhatsApp account as the People page shows it: its number id, its claim, the
/// numbers its file names, the people it knows and the messages held outside the window.
fn whatsapp_json(
    directory: &crate::whatsapp::Directory,
    agent: &str,
    seam: &SeamRows,
    now: i64,
) -> Value {
    let Some(account) = directory.of_agent(agent) else {
        return json!({"account": false});
    };
    let (allowed, approvers) = account.spec.people();
    let mut value = seam_account_json("wa", agent, &allowed, &approvers, seam, now);
    value["phone_number_id"] = json!(account.spec.phone_number_id);
    value
}

/// An agent's Signal account as the People page shows it: its number, its claim and people (as
/// WhatsApp's), and the last news of its message stream (dropped, or back after a gap).
fn signal_json(
    spec: Option<&crate::config::SignalSpec>,
    agent: &str,
    seam: &SeamRows,
    stream: Option<&(i64, String)>,
    now: i64,
) -> Value {
    let Some(signal) = spec else {
        return json!({"account": false});
    };
    let (allowed, approvers) = signal.people();
    let mut value = seam_account_json("sg", agent, &allowed, &approvers, seam, now);
    value["number"] = json!(signal.account.trim());
    value["stream"] = match stream {
        Some((at_ms, detail)) => json!({"detail": detail, "at_ms": at_ms,
            "dropped": detail.starts_with("Signal's message stream dropped")}),
        None => Value::Null,
    };
    value
}

/// Each Signal account's last status in words, as (ms, sentence): the events actor's live view
/// (current at once), else the stored history (after its restart).
async fn signal_streams(
    state: &StudioState,
    agents: Vec<String>,
) -> Result<std::collections::BTreeMap<String, (i64, String)>, ApiError> {
    let subject = |agent: &str| {
        crate::protocol::channel::name("sg", agent)
            .local()
            .to_string()
    };
    let live = crate::protocol::events::Events::new(&state.registry)
        .snapshot()
        .await
        .map(|snapshot| snapshot.channel_status)
        .unwrap_or_default();
    let streams = state
        .store
        .read(move |conn| {
            let mut streams = std::collections::BTreeMap::new();
            for agent in agents {
                let found = match live.get(&subject(&agent)) {
                    Some(status) => Some(status.clone()),
                    None => crate::store::events::last_for_subject(
                        conn,
                        &subject(&agent),
                        "bot_status",
                    )?
                    .map(|event| (event.at_ms, event.detail)),
                };
                if let Some(found) = found {
                    streams.insert(agent, found);
                }
            }
            Ok(streams)
        })
        .await?;
    Ok(streams)
}

/// What every seam account shows: its claim, the people its file names, the people it knows
/// and the messages held for them.
fn seam_account_json(
    channel: &str,
    agent: &str,
    allowed: &[String],
    approvers: &[String],
    (people, claims, held, pending): &SeamRows,
    now: i64,
) -> Value {
    let mine: Vec<_> = people
        .iter()
        .filter(|p| p.agent == agent && p.channel == channel)
        .collect();
    let owner = mine
        .iter()
        .find(|p| p.status == crate::store::channels::ChannelPersonStatus::Owner);
    let claim = claims
        .iter()
        .find(|c| c.agent == agent && c.channel == channel);
    let claim = match (owner, claim) {
        _ if !allowed.is_empty() || !approvers.is_empty() => json!({"state": "managed_by_file"}),
        (Some(owner), _) => {
            json!({"state": "claimed", "owner": {"number": owner.user, "name": owner.name}, "claimed_ms": owner.changed_ms})
        }
        (None, Some(claim)) if claim.claimed_ms.is_none() && claim.expires_ms > now => json!({
            "state": "unclaimed", "code": crate::telegram::pairing::display(&claim.code), "expires_ms": claim.expires_ms}),
        _ => json!({"state": "waiting_for_account"}),
    };
    let mut numbers: Vec<&String> = allowed.iter().chain(approvers).collect();
    numbers.sort();
    numbers.dedup();
    let prefix = format!("{channel}:");
    json!({
        "account": true,
        "claim": claim,
        "from_file": numbers.iter().map(|n| json!({"number": n, "approver": approvers.contains(n)})).collect::<Vec<_>>(),
        "people": mine.iter().map(|p| json!({"number": p.user, "name": p.name, "status": p.status.as_str(), "changed_ms": p.changed_ms})).collect::<Vec<_>>(),
        "pending": pending.iter().filter(|p| p.agent == agent && p.channel == channel)
            .map(super::channel_pairings::pending_json).collect::<Vec<_>>(),
        "held": held.iter().filter(|h| h.agent == agent && h.chat.starts_with(&prefix))
            .map(|h| json!({"chat": h.chat, "held_ms": h.held_ms, "reason": h.reason})).collect::<Vec<_>>(),
    })
}

/// What `GET /api/v1/people` answers.
pub fn list_schema() -> Value {
    let person = object([
        ("user_id", integer()),
        ("name", string()),
        ("status", string()),
        ("changed_ms", integer()),
        ("changed_by", string()),
    ]);
    let pairing = object([
        ("code", string()),
        (
            "display",
            described("the code as people read it, like ABCD-EFGH", string()),
        ),
        ("user_id", integer()),
        ("name", string()),
        ("created_ms", integer()),
        ("expires_ms", integer()),
    ]);
    let claim = object([
        (
            "state",
            one_of(&[
                "no_bot",
                "managed_by_file",
                "claimed",
                "unclaimed",
                "renewing",
                "waiting_for_bot",
            ]),
        ),
        (
            "owner?",
            object([("user_id", integer()), ("name", string())]),
        ),
        ("claimed_ms?", integer()),
        (
            "code?",
            described("an unclaimed bot's live claim code", string()),
        ),
        ("created_ms?", integer()),
        ("expires_ms?", integer()),
    ]);
    let from_file = object([
        ("user_id", integer()),
        ("name", nullable(string())),
        ("approver", boolean()),
    ]);
    let agent = object([
        ("agent", string()),
        ("bot", boolean()),
        ("claim", claim),
        (
            "from_file",
            described(
                "people the agent file names (managed there)",
                array(from_file),
            ),
        ),
        ("people", array(person)),
        (
            "pending",
            described("pairing requests waiting for an answer", array(pairing)),
        ),
        ("whatsapp", whatsapp_schema()),
        ("signal", signal_schema()),
    ]);
    object([("agents", array(agent)), ("note", string())])
}

/// The WhatsApp block of `GET /api/v1/people`'s agents.
fn whatsapp_schema() -> Value {
    described(
        "the agent's WhatsApp account: `account` false without one; else its phone number id, claim (state, code, owner), the numbers its file names, the people it knows and the messages held outside the 24-hour window",
        object([
            ("account", boolean()),
            ("phone_number_id?", string()),
            ("claim?", object([("state", string())])),
            (
                "from_file?",
                array(object([("number", string()), ("approver", boolean())])),
            ),
            (
                "people?",
                array(object([
                    ("number", string()),
                    ("name", string()),
                    ("status", string()),
                    ("changed_ms", integer()),
                ])),
            ),
            (
                "pending?",
                described(
                    "pairing requests waiting for an answer",
                    array(super::channel_pairings::pending_schema()),
                ),
            ),
            (
                "held?",
                array(object([
                    ("chat", string()),
                    ("held_ms", integer()),
                    ("reason", string()),
                ])),
            ),
        ]),
    )
}

/// The Signal block of `GET /api/v1/people`'s agents.
fn signal_schema() -> Value {
    described(
        "the agent's Signal account: `account` false without one; else its number, claim (state, code, owner), the numbers its file names, the people it knows, and `stream`: the last news of its message stream (`detail` in words, `at_ms`, `dropped` while it is away), or null",
        object([
            ("account", boolean()),
            ("number?", string()),
            ("claim?", object([("state", string())])),
            (
                "from_file?",
                array(object([("number", string()), ("approver", boolean())])),
            ),
            (
                "pending?",
                described(
                    "pairing requests waiting for an answer",
                    array(super::channel_pairings::pending_schema()),
                ),
            ),
        ]),
    )
}

fn api_error(error: PeopleError) -> ApiError {
    match error {
        PeopleError::Store(error) => error.into(),
        PeopleError::NotFound(message) => ApiError::not_found(message),
        PeopleError::Conflict(message) => ApiError::conflict(message),
    }
}

/// `POST /api/v1/pairings/{code}/{operation}` with operation `approve` or `deny`.
pub async fn decide_pairing(
    State(state): State<StudioState>,
    Path((code, operation)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let row = match operation.as_str() {
        "approve" => service::approve_pairing(&state.store, &state.events, &code, None, OPERATOR)
            .await
            .map_err(api_error)?,
        "deny" => service::deny_pairing(&state.store, &state.events, &code, OPERATOR)
            .await
            .map_err(api_error)?,
        other => {
            return Err(ApiError::bad_request(format!(
                "unknown operation `{other}` (one of: approve, deny)"
            )));
        }
    };
    let approved = operation == "approve";
    if approved {
        // Told by their bot, as `/pair` does; the bot being down only loses this notice.
        crate::protocol::telegram::Bot::new(&state.registry, &row.agent).notify(
            ChatKey::telegram(row.chat_id),
            service::paired_reply(&row.name),
        );
    }
    Ok(Json(json!({
        "agent": row.agent, "user_id": row.user_id, "name": row.name,
        "status": if approved { "paired" } else { "denied" },
    })))
}

/// What `POST /api/v1/pairings/{id}/{operation}` answers.
pub fn decide_pairing_schema() -> Value {
    object([
        ("agent", string()),
        ("user_id", integer()),
        ("name", string()),
        ("status", one_of(&["paired", "denied"])),
    ])
}

/// `POST /api/v1/people/{agent}/{user_id}/{operation}` with operation `revoke`, `block` or
/// `unblock`.
pub async fn change(
    State(state): State<StudioState>,
    Path((agent, user_id, operation)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let files = state.people.get();
    let Some(file) = files.iter().find(|file| file.agent == agent) else {
        return Err(ApiError::not_found(format!("no agent named `{agent}`")));
    };
    let user_id = user_id
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "`{user_id}` is not a Telegram user id (a positive number)"
            ))
        })?;
    let Some(change) = PersonChange::parse(&operation) else {
        return Err(ApiError::bad_request(format!(
            "unknown operation `{operation}` (one of: revoke, block, unblock)"
        )));
    };
    if file.names(user_id) {
        return Err(ApiError::conflict(format!(
            "{user_id} is named in {agent}'s agent file (allow_users or approvers): change them there, then reload the configuration (Overview → Reload configuration, or `clawvisor reload`)"
        )));
    }
    let after = service::change_person(
        &state.store,
        &state.events,
        &agent,
        user_id,
        change,
        OPERATOR,
    )
    .await
    .map_err(api_error)?;
    Ok(Json(json!({
        "agent": agent, "user_id": user_id,
        "status": after.map_or("unknown", |person| person.status.label()),
    })))
}

/// What `POST /api/v1/people/{name}/{id}/{operation}` answers.
pub fn change_schema() -> Value {
    object([
        ("agent", string()),
        ("user_id", integer()),
        (
            "status",
            described("the person's standing after the change", string()),
        ),
    ])
}
