//! Running one scenario: a throwaway daemon in-process, the model (scripted or live), and each
//! turn sent and listened to, with approval requests decided as the turn says.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::domain::{ChatKey, OutEvent, Outbound};
use crate::protocol::agent::{Agent, AgentError};
use crate::protocol::approvals::{Approvals, DecideOutcome, Decider, Decision};
use crate::testkit::harness::{Harness, HarnessOptions};
use crate::testkit::scripted_llm::{Script, ScriptedLlm};

use super::judge::{Heard, Recorded, judge};
use super::placeholders::{expanded, expanded_script};
use super::scenario::{ApprovalAction, MAIN_AGENT, Scenario, Settings, Turn};
use super::services::Services;
use super::telegram::{self, Said, TelegramSide, Utterance};
use crate::testkit::fake_transcription::FakeTranscription;

/// How long an agent may take to be offered the tools its file lists.
const TOOLS_READY_WITHIN: Duration = Duration::from_secs(15);
const SCRIPTED_TURN_LIMIT: Duration = Duration::from_secs(60);
const LIVE_TURN_LIMIT: Duration = Duration::from_secs(180);
/// How often pending approvals are looked for during a turn.
const APPROVAL_POLL: Duration = Duration::from_millis(100);

/// Where the model comes from.
#[derive(Debug, Clone)]
pub enum ModelSource {
    Scripted,
    /// A live provider: its `[providers.NAME]` TOML table (with the key variable) and a model.
    Live {
        provider_toml: String,
        provider: String,
        model: String,
        env: std::collections::BTreeMap<String, String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub name: String,
    pub failures: Vec<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Runs one scenario and judges it.
pub async fn run(scenario: &Scenario, source: &ModelSource) -> Outcome {
    let outcome = |failures| Outcome {
        name: scenario.name.clone(),
        failures,
    };
    let script = scenario.script.clone();
    // The services first: a placeholder may name one (`{{test_site}}`); what they start
    // depends only on the scenario's flags.
    let services = match Services::start(scenario).await {
        Ok(services) => services,
        Err(error) => return outcome(vec![error]),
    };
    let scenario = match expanded(scenario, &services.values(chrono::Utc::now())) {
        Ok(scenario) => scenario,
        Err(error) => return outcome(vec![error]),
    };
    let (llm, options, dir) = match super::daemon::setup(&scenario, source, &services).await {
        Ok(setup) => setup,
        Err(error) => return outcome(vec![error]),
    };
    let harness = match Harness::start_in(dir, options.clone()).await {
        Ok(harness) => harness,
        Err(error) => return outcome(vec![format!("the daemon did not start: {error}")]),
    };
    let failures = converse_all(
        &scenario,
        &script,
        &harness,
        llm.as_ref(),
        &options,
        source,
        &services,
    )
    .await;
    harness.stop().await;
    services.stop().await;
    outcome(failures)
}

/// `model_never_saw`, against every request the scripted model was sent so far.
fn never_sent(
    llm: Option<&ScriptedLlm>,
    expect: &super::scenario::Expect,
    scripted: &super::scenario::Expect,
) -> Vec<String> {
    let Some(llm) = llm else {
        return Vec::new();
    };
    let needles: Vec<&String> = expect
        .model_never_saw
        .iter()
        .chain(&scripted.model_never_saw)
        .collect();
    if needles.is_empty() {
        return Vec::new();
    }
    let requests: Vec<String> = llm
        .requests()
        .iter()
        .map(|request| request.to_string())
        .collect();
    needles
        .into_iter()
        .filter(|needle| {
            requests
                .iter()
                .any(|request| request.contains(needle.as_str()))
        })
        .map(|needle| format!("`{needle}` was in a request to the model"))
        .collect()
}

/// One listener per local chat, for the whole scenario.
type Listeners = BTreeMap<ChatKey, UnboundedReceiver<Outbound>>;

async fn converse_all(
    scenario: &Scenario,
    script: &Script,
    harness: &Harness,
    llm: Option<&ScriptedLlm>,
    options: &HarnessOptions,
    source: &ModelSource,
    services: &Services,
) -> Vec<String> {
    let live = matches!(source, ModelSource::Live { .. });
    if let Err(error) = tools_ready(harness, scenario, options).await {
        return vec![error];
    }
    // The script's `{{now+…}}` count from here, when the conversation starts, not from before the
    // daemon booted (slower on a busy machine). No model call has been made yet, so replacing the
    // script loses no rule's uses.
    if let Some(llm) = llm {
        match expanded_script(script, &services.values(chrono::Utc::now())) {
            Ok(script) => llm.set_script(script),
            Err(error) => return vec![error],
        }
    }
    // One listener per chat for the whole scenario, so that nothing said between turns is lost.
    let mut listeners = match listen_to_chats(harness, scenario).await {
        Ok(listeners) => listeners,
        Err(error) => return vec![error],
    };
    let conversation = Conversation {
        harness,
        llm,
        services,
        live,
        workspace: harness
            .dir
            .path()
            .join("data")
            .join("workspaces")
            .join(MAIN_AGENT),
        limit: if live {
            LIVE_TURN_LIMIT
        } else {
            SCRIPTED_TURN_LIMIT
        },
    };
    let mut failures = Vec::new();
    for (index, turn) in scenario.turns.iter().enumerate() {
        conversation
            .take_turn(index, turn, &mut listeners, &mut failures)
            .await;
    }
    failures
}

/// Opens a listener on every local (not Telegram) chat the scenario's turns talk in.
async fn listen_to_chats(harness: &Harness, scenario: &Scenario) -> Result<Listeners, String> {
    let mut listeners: Listeners = BTreeMap::new();
    for turn in scenario.turns.iter().filter(|turn| !is_telegram(turn)) {
        if let std::collections::btree_map::Entry::Vacant(entry) = listeners.entry(turn.chat()) {
            let receiver = harness.listen(entry.key()).await?;
            entry.insert(receiver);
        }
    }
    Ok(listeners)
}

/// What every turn of a scenario's conversation shares.
struct Conversation<'a> {
    harness: &'a Harness,
    llm: Option<&'a ScriptedLlm>,
    services: &'a Services,
    /// A live model: the turns' `scripted` expectations and `scripted_only` turns are not judged.
    live: bool,
    /// The main agent's workspace, where the turns' files are looked for.
    workspace: PathBuf,
    /// How long a turn may take to be answered, unless it says how long to wait.
    limit: Duration,
}

impl Conversation<'_> {
    /// Plays one turn and adds every way it differs from what it expects, prefixed with the turn.
    async fn take_turn(
        &self,
        index: usize,
        turn: &Turn,
        listeners: &mut Listeners,
        failures: &mut Vec<String>,
    ) {
        let said = turn.user.as_ref().or(turn.voice.as_ref());
        let prefix = match (
            said.or(turn.trigger.as_ref().map(|hook| &hook.body)),
            &turn.wait,
        ) {
            (Some(user), _) => format!(
                "turn {} ({:?})",
                index + 1,
                user.chars().take(40).collect::<String>()
            ),
            (None, wait) => format!("turn {} (wait {})", index + 1, wait.unwrap_or_default()),
        };
        if let Some(settings) = &turn.settings
            && let Err(error) = apply_settings(self.harness, turn.agent(), settings).await
        {
            failures.push(format!("{prefix}: {error}"));
            return;
        }
        let calls_before = self.llm.map(ScriptedLlm::request_count).unwrap_or(0);
        let heard = match self.hear(turn, listeners, failures, &prefix).await {
            Ok(heard) => heard,
            Err(error) => {
                failures.push(format!("{prefix}: {error}"));
                return;
            }
        };
        if self.live && turn.expect.scripted_only {
            return;
        }
        let recorded = match record(self.harness, heard.run_id).await {
            Ok(recorded) => recorded,
            Err(error) => {
                failures.push(format!("{prefix}: cannot read the database: {error}"));
                return;
            }
        };
        let calls = self.llm.map(|llm| llm.request_count() - calls_before);
        let mut found = judge(&turn.expect, &heard, &recorded, calls, &self.workspace);
        found.extend(never_sent(self.llm, &turn.expect, &turn.scripted));
        if !self.live {
            found.extend(judge(
                &turn.scripted,
                &heard,
                &recorded,
                calls,
                &self.workspace,
            ));
        }
        failures.extend(
            found
                .into_iter()
                .map(|failure| format!("{prefix}: {failure}")),
        );
    }

    /// A turn in a Signal chat (`eval/signal.rs`).
    async fn hear_on_signal(
        &self,
        signal: &super::signal::SignalSide,
        turn: &Turn,
        failures: &mut Vec<String>,
        prefix: &str,
    ) -> Result<Heard, String> {
        let said = seam_said(turn);
        let mut decided = HashSet::new();
        let heard = signal
            .converse(
                self.harness.store(),
                &turn.chat(),
                said,
                self.services.transcription.as_ref(),
                turn.approval,
                &mut decided,
                turn.wait.map_or(self.limit, |wait| wait.0),
            )
            .await;
        if turn.approval.is_some() && decided.is_empty() {
            failures.push(format!(
                "{prefix}: `approval` is set but no approval was requested during the turn"
            ));
        }
        heard
    }

    /// Says the turn's message in its chat (Telegram or local) and listens until the answer.
    async fn hear(
        &self,
        turn: &Turn,
        listeners: &mut Listeners,
        failures: &mut Vec<String>,
        prefix: &str,
    ) -> Result<Heard, String> {
        let chat = turn.chat();
        if let (Some(delivery), Some(telegram)) = (&turn.trigger, &self.services.telegram) {
            return self
                .hear_delivery(turn, delivery, telegram, failures, prefix)
                .await;
        }
        if let Some(whatsapp) = &self.services.whatsapp
            && chat.kind() == crate::domain::ChatKind::WhatsApp
        {
            let (base, _) = self.harness.studio_http().await;
            let mut decided = HashSet::new();
            let limit = turn.wait.map_or(self.limit, |wait| wait.0);
            let heard = whatsapp
                .converse(
                    self.harness.store(),
                    &format!("{base}/hooks/whatsapp"),
                    &chat,
                    seam_said(turn),
                    self.services.transcription.as_ref(),
                    turn.approval,
                    &mut decided,
                    limit,
                )
                .await;
            if turn.approval.is_some() && decided.is_empty() {
                failures.push(format!(
                    "{prefix}: `approval` is set but no approval was requested during the turn"
                ));
            }
            return heard;
        }
        if let Some(signal) = &self.services.signal
            && chat.kind() == crate::domain::ChatKind::Signal
        {
            return self.hear_on_signal(signal, turn, failures, prefix).await;
        }
        match (&self.services.telegram, listeners.get_mut(&chat)) {
            (Some(telegram), _) if is_telegram(turn) => {
                let transcription = self.services.transcription.as_ref();
                converse_on_telegram(
                    self.harness,
                    telegram,
                    turn,
                    transcription,
                    self.limit,
                    failures,
                    prefix,
                )
                .await
            }
            (_, Some(outputs)) => {
                converse(self.harness, outputs, turn, self.limit, failures, prefix).await
            }
            _ => Err(format!("no listener for {chat}")),
        }
    }
}

impl Conversation<'_> {
    /// A `trigger` turn: the signed delivery, its answer heard in the turn's Telegram chat, its
    /// run's approval requests decided as the operator in Studio.
    async fn hear_delivery(
        &self,
        turn: &Turn,
        delivery: &super::trigger::TriggerTurn,
        telegram: &TelegramSide,
        failures: &mut Vec<String>,
        prefix: &str,
    ) -> Result<Heard, String> {
        let (base, _) = self.harness.studio_http().await;
        let chat_id = turn.chat().telegram_chat_id().unwrap_or(telegram::OWNER);
        let limit = turn.wait.map_or(self.limit, |wait| wait.0);
        let store = self.harness.store();
        let conversation =
            super::trigger::deliver(store, &base, telegram, chat_id, delivery, limit);
        tokio::pin!(conversation);
        let session = ChatKey::trigger(&delivery.name);
        let mut decided: HashSet<String> = HashSet::new();
        let mut poll = tokio::time::interval(APPROVAL_POLL);
        let heard = loop {
            tokio::select! {
                heard = &mut conversation => break heard,
                _ = poll.tick() => {
                    let decider = Decider::Operator { name: "eval".into() };
                    decide_pending(self.harness, turn.agent(), &session, turn.approval, decider, &mut decided, failures, prefix).await;
                }
            }
        };
        if turn.approval.is_some() && decided.is_empty() {
            failures.push(format!(
                "{prefix}: `approval` is set but no approval was requested during the turn"
            ));
        }
        heard
    }
}

/// Waits until every agent is offered the tools its file names.
async fn tools_ready(
    harness: &Harness,
    scenario: &Scenario,
    options: &HarnessOptions,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + TOOLS_READY_WITHIN;
    for (name, file) in scenario.agent_names().into_iter().zip(&options.agents) {
        let wanted: Vec<String> = toml::from_str::<toml::Table>(file)
            .ok()
            .and_then(|table| table.get("tools").cloned())
            .and_then(|tools| tools.try_into::<Vec<String>>().ok())
            .unwrap_or_default()
            .into_iter()
            .filter(|tool| !tool.contains(':') && !tool.contains('*'))
            .collect();
        if wanted.is_empty() {
            continue;
        }
        loop {
            let offered = harness.agent_tools(name).await;
            let missing: Vec<&String> = wanted
                .iter()
                .filter(|tool| !offered.contains(tool))
                .collect();
            if missing.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "agent `{name}` was not offered {missing:?} within {} s (offered: {offered:?})",
                    TOOLS_READY_WITHIN.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// A scenario's settings, as the operator would make them: the autonomy in the agent's file (by
/// the reloader, as Studio does), the pause on the running agent.
async fn apply_settings(harness: &Harness, agent: &str, settings: &Settings) -> Result<(), String> {
    let registry = &harness.daemon().registry;
    if let Some(autonomy) = settings.autonomy {
        let edit = crate::protocol::reload::FileEdit::UpdateAgent {
            name: agent.to_string(),
            settings: vec![(
                "autonomy".into(),
                crate::config::edit::Setting::Text(autonomy.as_str().into()),
            )],
        };
        match crate::protocol::reload::Reloader::new(registry)
            .edit(edit, "eval")
            .await
        {
            Ok(crate::protocol::reload::EditOutcome::Applied { .. }) => {}
            Ok(other) => {
                return Err(format!(
                    "the autonomy of {agent} was not changed: {other:?}"
                ));
            }
            Err(error) => return Err(format!("the reloader did not answer: {error}")),
        }
    }
    let Some(paused) = settings.paused else {
        return Ok(());
    };
    match Agent::new(registry, agent).set_paused(paused).await {
        Ok(_) => Ok(()),
        Err(AgentError::Unavailable(error)) => Err(format!(
            "the settings change did not reach {agent}: {error}"
        )),
        Err(error) => Err(format!("the settings change was refused: {error}")),
    }
}

/// Sends the turn's message (if any) and collects what the chat shows until the answer, deciding
/// approval requests as the turn says.
async fn converse(
    harness: &Harness,
    outputs: &mut UnboundedReceiver<Outbound>,
    turn: &Turn,
    limit: Duration,
    failures: &mut Vec<String>,
    prefix: &str,
) -> Result<Heard, String> {
    let agent = turn.agent();
    let chat = turn.chat();
    let limit = turn.wait.map_or(limit, |wait| wait.0);
    if let Some(user) = &turn.user {
        while outputs.try_recv().is_ok() {}
        harness.send(agent, &chat, user)?;
    }
    let deadline = tokio::time::Instant::now() + limit;
    let mut heard = Heard::default();
    let mut decided: HashSet<String> = HashSet::new();
    let mut poll = tokio::time::interval(APPROVAL_POLL);
    let finished = loop {
        tokio::select! {
            received = tokio::time::timeout_at(deadline, outputs.recv()) => {
                let outbound = match received {
                    Ok(Some(outbound)) => outbound,
                    Ok(None) => break Err("the local channel closed".to_string()),
                    Err(_) => break Err(format!(
                        "no answer within {} s (notices: {:?})",
                        limit.as_secs(),
                        heard.notices
                    )),
                };
                if outbound.agent != agent {
                    continue;
                }
                match outbound.event {
                    OutEvent::Final { text, .. } => {
                        heard.text = text;
                        heard.run_id = outbound.run_id;
                        break Ok(());
                    }
                    OutEvent::Notice { text } if turn.user.is_none() => {
                        heard.text = text;
                        heard.run_id = outbound.run_id;
                        break Ok(());
                    }
                    OutEvent::Notice { text } => heard.notices.push(text),
                    _ => {}
                }
            }
            _ = poll.tick() => {
                let decider = Decider::Local { chat: chat.clone() };
                decide_pending(harness, agent, &chat, turn.approval, decider, &mut decided, failures, prefix).await;
            }
        }
    };
    if turn.approval.is_some() && decided.is_empty() {
        failures.push(format!(
            "{prefix}: `approval` is set but no approval was requested during the turn"
        ));
    }
    finished.map(|()| heard)
}

fn is_telegram(turn: &Turn) -> bool {
    turn.chat().telegram_chat_id().is_some()
}

/// A turn in a Telegram chat: the message goes to the bot as an update, and approval requests
/// are decided by the approver (user 1001) as the turn says.
async fn converse_on_telegram(
    harness: &Harness,
    telegram: &TelegramSide,
    turn: &Turn,
    transcription: Option<&FakeTranscription>,
    limit: Duration,
    failures: &mut Vec<String>,
    prefix: &str,
) -> Result<Heard, String> {
    let (agent, chat) = (turn.agent(), telegram.chat_of(&turn.chat()));
    let limit = turn.wait.map_or(limit, |wait| wait.0);
    let from = turn
        .from
        .unwrap_or_else(|| TelegramSide::default_sender(&chat));
    let utterance = Utterance {
        chat: &chat,
        from,
        said: match (&turn.user, &turn.voice) {
            (Some(text), _) => Said::Text(text),
            (None, Some(heard)) => Said::Voice(heard),
            (None, None) => Said::Nothing,
        },
    };
    let conversation = telegram.converse(harness.store(), agent, utterance, transcription, limit);
    tokio::pin!(conversation);
    let mut decided: HashSet<String> = HashSet::new();
    let mut poll = tokio::time::interval(APPROVAL_POLL);
    let heard = loop {
        tokio::select! {
            heard = &mut conversation => break heard,
            _ = poll.tick() => {
                let decider = Decider::Telegram {
                    agent: agent.to_string(),
                    user_id: telegram::OWNER,
                    name: "Ada".into(),
                    approver: true,
                };
                decide_pending(harness, agent, &chat, turn.approval, decider, &mut decided, failures, prefix).await;
            }
        }
    };
    if turn.approval.is_some() && decided.is_empty() {
        failures.push(format!(
            "{prefix}: `approval` is set but no approval was requested during the turn"
        ));
    }
    heard
}

/// Decides the chat's pending approval requests as the turn says (once each).
#[allow(clippy::too_many_arguments)] // The turn's pieces, each used once.
async fn decide_pending(
    harness: &Harness,
    agent: &str,
    chat: &ChatKey,
    action: Option<ApprovalAction>,
    decider: Decider,
    decided: &mut HashSet<String>,
    failures: &mut Vec<String>,
    prefix: &str,
) {
    let (owner, key) = (agent.to_string(), chat.as_str().to_string());
    let pending: Vec<(String, String)> = harness
        .store()
        .read(move |conn| {
            let mut statement = conn.prepare(
                "SELECT id, tool FROM approvals WHERE status = 'pending' AND agent = ?1 AND chat = ?2 ORDER BY requested_ms",
            )?;
            let rows = statement.query_map([&owner, &key], |row| Ok((row.get(0)?, row.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap_or_default();
    for (id, tool) in pending {
        if decided.contains(&id) {
            continue;
        }
        let decision = match action {
            Some(ApprovalAction::Approve) => Decision::Approve,
            Some(ApprovalAction::Deny) => Decision::Deny,
            Some(ApprovalAction::Expire) => {
                decided.insert(id);
                continue;
            }
            None => {
                failures.push(format!(
                    "{prefix}: approval {id} was requested for `{tool}` but the turn has no `approval` key (denied)"
                ));
                Decision::Deny
            }
        };
        decided.insert(id.clone());
        match Approvals::new(&harness.daemon().registry)
            .decide(&id, decision, decider.clone())
            .await
        {
            Ok(DecideOutcome::Approved { .. } | DecideOutcome::Denied { .. }) => {}
            Ok(other) => failures.push(format!(
                "{prefix}: deciding approval {id}: {}",
                other.message()
            )),
            Err(error) => failures.push(format!("{prefix}: deciding approval {id}: {error}")),
        }
    }
}

/// Reads the turn's run (when there is one) and the scenario's records so far.
async fn record(harness: &Harness, run_id: Option<i64>) -> Result<Recorded, String> {
    harness
        .store()
        .read(move |conn| {
            fn column(
                conn: &rusqlite::Connection,
                sql: &str,
                run_id: Option<i64>,
            ) -> rusqlite::Result<Vec<String>> {
                let mut statement = conn.prepare(sql)?;
                let params: &[&dyn rusqlite::ToSql] = match &run_id {
                    Some(run_id) => &[run_id],
                    None => &[],
                };
                let rows = statement.query_map(params, |row| row.get(0))?;
                rows.collect()
            }
            let mut recorded = Recorded {
                approvals: column(
                    conn,
                    "SELECT status FROM approvals ORDER BY requested_ms, rowid",
                    None,
                )?,
                jobs: column(conn, "SELECT status FROM jobs ORDER BY id", None)?,
                job_runs: column(conn, "SELECT status FROM job_runs ORDER BY id", None)?,
                handoffs: column(
                    conn,
                    "SELECT status FROM handoff_contracts ORDER BY created_ms, rowid",
                    None,
                )?,
                trigger_deliveries: column(
                    conn,
                    "SELECT status FROM trigger_deliveries ORDER BY id",
                    None,
                )?,
                memories: column(
                    conn,
                    "SELECT text FROM memory_facts WHERE archived_ms IS NULL AND class != 'session_recap' ORDER BY id",
                    None,
                )?,
                ..Recorded::default()
            };
            if let Some(run_id) = run_id {
                recorded.run = crate::store::runs::get(conn, run_id)?;
                recorded.ran = crate::store::runs::steps(conn, run_id)?
                    .into_iter()
                    .filter(|step| step.kind == "tool_call")
                    .filter_map(|step| step.name)
                    .collect();
                recorded.tool_results = column(
                    conn,
                    "SELECT content FROM session_events WHERE kind = 'tool_result' AND run_id = ?1 ORDER BY id",
                    Some(run_id),
                )?;
                let recap: Option<String> = conn.query_row(
                    "SELECT recap FROM sessions WHERE id = (SELECT session_id FROM runs WHERE id = ?1)",
                    [run_id],
                    |row| row.get(0),
                )?;
                recorded.recap = recap.is_some();
            }
            Ok(recorded)
        })
        .await
        .map_err(|error| error.to_string())
}

/// What a turn says on WhatsApp or Signal: its text, or a voice note.
fn seam_said(turn: &Turn) -> Option<super::seam::Said<'_>> {
    use super::seam::Said;
    match (&turn.user, &turn.voice) {
        (Some(text), _) => Some(Said::Text(text)),
        (None, Some(heard)) => Some(Said::Voice(heard)),
        (None, None) => None,
    }
}
