//! Runtime events as JSON: the one place an [`EventData`] becomes the object Studio's pages
//! (`studio/pages/*.js`) read. The live stream sends it, and the `Events` actor stores the same
//! text in `runtime_events.data`, so history and the live view always agree.
//!
//! Keep each variant's keys stable: the console's pages and stored history depend on them.

use serde_json::{Value, json};

use crate::events::{EventData, RuntimeEvent};

/// The whole event as the live stream sends it.
pub fn event_json(event: &RuntimeEvent) -> Value {
    json!({
        "seq": event.seq, "at_ms": event.at_ms, "kind": event.kind.as_str(),
        "subject": event.subject, "detail": event.detail, "data": data_json(&event.data),
    })
}

/// An event's `data` as a JSON object, or `Null` for [`EventData::None`].
pub fn data_json(data: &EventData) -> Value {
    match data {
        EventData::None => Value::Null,
        EventData::MessageIn { .. }
        | EventData::MessageOut { .. }
        | EventData::TelegramReplySent { .. }
        | EventData::RunStarted { .. }
        | EventData::RunStep { .. }
        | EventData::RunFinished { .. }
        | EventData::CostRecorded { .. } => conversation_json(data),
        EventData::ApprovalRequested { .. }
        | EventData::ApprovalDecided { .. }
        | EventData::ApprovalExpired { .. } => approval_json(data),
        EventData::BotOnline { .. }
        | EventData::BotPolling { .. }
        | EventData::BotUnauthorized { .. }
        | EventData::BotPairingRequested { .. }
        | EventData::McpHealth { .. } => connection_json(data),
        EventData::ScheduleFired { .. }
        | EventData::JobChanged { .. }
        | EventData::JobRunFinished { .. }
        | EventData::FiresNotRun { .. }
        | EventData::FiresCaughtUp { .. }
        | EventData::TriggerDelivery { .. } => schedule_json(data),
        EventData::HandoffChanged { .. }
        | EventData::MemoryChanged { .. }
        | EventData::MemoryReindex { .. }
        | EventData::AgentToolsChanged { .. }
        | EventData::AgentSkillToggled { .. }
        | EventData::AgentSettingsChanged { .. }
        | EventData::GrantRevoked { .. }
        | EventData::GrantLapsed { .. }
        | EventData::RuleAdded { .. }
        | EventData::RuleDisabled { .. }
        | EventData::PeopleChanged { .. }
        | EventData::AuditAppended { .. } => change_json(data),
    }
}

/// Messages in and out, runs and their steps, and their cost.
fn conversation_json(data: &EventData) -> Value {
    match data {
        EventData::MessageIn {
            agent,
            chat,
            sender,
        } => json!({"agent": agent, "chat": chat, "sender": sender}),
        EventData::MessageOut {
            agent,
            chat,
            run_id,
        } => json!({"agent": agent, "chat": chat, "run_id": run_id}),
        EventData::TelegramReplySent { agent, chat, parts } => {
            json!({"agent": agent, "chat": chat, "parts": parts})
        }
        EventData::RunStarted {
            run_id,
            agent,
            chat,
            resume,
        } => json!({"run_id": run_id, "agent": agent, "chat": chat, "resume": resume}),
        EventData::RunStep {
            run_id,
            agent,
            kind,
            name,
        } => json!({"run_id": run_id, "agent": agent, "kind": kind, "name": name}),
        EventData::RunFinished {
            run_id,
            agent,
            chat,
            status,
        } => json!({"run_id": run_id, "agent": agent, "chat": chat, "status": status}),
        EventData::CostRecorded {
            agent,
            model,
            input_tokens,
            output_tokens,
            cost_usd,
        } => json!({"agent": agent, "model": model, "input_tokens": input_tokens,
                    "output_tokens": output_tokens, "cost_usd": cost_usd}),
        // `data_json` routes only conversation events here; its match names every variant.
        _ => Value::Null,
    }
}

/// Approvals asked for, decided and expired.
fn approval_json(data: &EventData) -> Value {
    match data {
        EventData::ApprovalRequested {
            id,
            agent,
            chat,
            tool,
            risk,
            action,
            reason,
            expires_ms,
            run_id,
        } => json!({"id": id, "agent": agent, "chat": chat, "tool": tool, "risk": risk,
                    "action": action, "reason": reason, "expires_ms": expires_ms, "run_id": run_id}),
        EventData::ApprovalDecided {
            id,
            status,
            by,
            agent,
        } => json!({"id": id, "status": status, "by": by, "agent": agent}),
        EventData::ApprovalExpired {
            id,
            agent,
            expires_ms,
            expired_ms,
        } => json!({"id": id, "status": "denied_timeout", "agent": agent,
                    "expires_ms": expires_ms, "expired_ms": expired_ms}),
        // `data_json` routes only approval events here; its match names every variant.
        _ => Value::Null,
    }
}

/// The state of the links to the outside: Telegram bots and MCP servers.
fn connection_json(data: &EventData) -> Value {
    match data {
        EventData::BotOnline { agent, username } => {
            json!({"agent": agent, "state": "online", "username": username})
        }
        EventData::BotPolling {
            agent,
            state,
            detail,
            at_ms,
        } => json!({"agent": agent, "state": state, "detail": detail, "at_ms": at_ms}),
        EventData::BotUnauthorized { agent } => json!({"agent": agent, "state": "unauthorized"}),
        EventData::BotPairingRequested {
            agent,
            code,
            user_id,
        } => {
            json!({"agent": agent, "state": "pairing_requested", "code": code, "user_id": user_id})
        }
        EventData::McpHealth {
            server,
            transport,
            trust,
            state,
            last_error,
            restarts,
            last_latency_ms,
            tool_count,
        } => json!({
            "server": server,
            "transport": transport,
            "trust": trust,
            "state": state,
            "last_error": last_error,
            "restarts": restarts,
            "last_latency_ms": last_latency_ms,
            "tool_count": tool_count,
        }),
        // `data_json` routes only bot and MCP events here; its match names every variant.
        _ => Value::Null,
    }
}

/// Scheduled jobs: fires, runs, changes and missed fires.
fn schedule_json(data: &EventData) -> Value {
    match data {
        EventData::ScheduleFired {
            job_id,
            job_run_id,
            agent,
            fire_ms,
            started_ms,
            attempt,
        } => json!({"job_id": job_id, "job_run_id": job_run_id, "agent": agent,
                    "fire_ms": fire_ms, "started_ms": started_ms, "attempt": attempt}),
        EventData::JobChanged {
            job_id,
            agent,
            outcome,
        } => json!({"job_id": job_id, "agent": agent, "outcome": outcome}),
        EventData::JobRunFinished {
            job_id,
            job_run_id,
            agent,
            outcome,
            run_id,
            retry_at_ms,
        } => json!({"job_id": job_id, "job_run_id": job_run_id, "agent": agent,
                    "outcome": outcome, "run_id": run_id, "retry_at_ms": retry_at_ms}),
        EventData::FiresNotRun {
            job_id,
            agent,
            outcome,
            count,
            busy,
        } => json!({"job_id": job_id, "agent": agent, "outcome": outcome,
                    "count": count, "busy": busy}),
        EventData::FiresCaughtUp {
            job_id,
            agent,
            count,
        } => json!({"job_id": job_id, "agent": agent, "outcome": "caught_up", "count": count}),
        EventData::TriggerDelivery {
            trigger,
            delivery,
            agent,
            status,
        } => json!({"trigger": trigger, "delivery": delivery, "agent": agent, "status": status}),
        // `data_json` routes only schedule and trigger events here; its match names every variant.
        _ => Value::Null,
    }
}

/// Changes to handoffs, memory, agents, policy, people and the audit log.
fn change_json(data: &EventData) -> Value {
    match data {
        EventData::HandoffChanged {
            id,
            status,
            change,
            owner,
            delegate,
        } => json!({"id": id, "status": status, "change": change,
                    "owner": owner, "delegate": delegate}),
        EventData::MemoryChanged { id, change } => json!({"id": id, "change": change}),
        EventData::MemoryReindex {
            model,
            done,
            total,
            running,
            error,
        } => json!({"change": "reindex", "model": model, "done": done, "total": total,
                    "running": running, "error": error}),
        EventData::AgentToolsChanged { agent, source } => {
            json!({"agent": agent, "change": "tools", "source": source})
        }
        EventData::AgentSkillToggled {
            agent,
            skill,
            enabled,
        } => json!({"agent": agent, "change": "skill", "skill": skill, "enabled": enabled}),
        EventData::AgentSettingsChanged {
            agent,
            autonomy,
            model,
            paused,
        } => json!({"agent": agent, "change": "settings", "autonomy": autonomy,
                    "model": model, "paused": paused}),
        EventData::GrantRevoked { grant } => json!({"grant": grant, "change": "grant_revoked"}),
        EventData::GrantLapsed { grant } => json!({"grant": grant, "change": "grant_lapsed"}),
        EventData::RuleAdded { rule } => json!({"rule": rule, "change": "rule_added"}),
        EventData::RuleDisabled { rule } => json!({"rule": rule, "change": "rule_disabled"}),
        EventData::PeopleChanged {
            agent,
            user_id,
            change,
        } => json!({"agent": agent, "user_id": user_id, "change": change}),
        EventData::AuditAppended { action, subject } => {
            json!({"action": action, "subject": subject})
        }
        // `data_json` routes only change events here; its match names every variant.
        _ => Value::Null,
    }
}

/// What `runtime_events.data` holds for `data`: the JSON text, or `None` for no data.
pub fn stored_data(data: &EventData) -> Option<String> {
    match data {
        EventData::None => None,
        data => Some(data_json(data).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventKind;

    fn text(value: &str) -> String {
        value.to_string()
    }

    /// Every variant against the object the publishing site built before payloads were typed
    /// (the console's pages and stored history read exactly these keys).
    #[test]
    fn every_variant_keeps_the_json_studio_reads() {
        let cases = [
            (
                EventData::MessageIn {
                    agent: text("ada"),
                    chat: text("tg:7"),
                    sender: text("Bob"),
                },
                json!({"agent": "ada", "chat": "tg:7", "sender": "Bob"}),
            ),
            (
                EventData::MessageOut {
                    agent: text("ada"),
                    chat: text("local:cli"),
                    run_id: None,
                },
                json!({"agent": "ada", "chat": "local:cli", "run_id": null}),
            ),
            (
                EventData::TelegramReplySent {
                    agent: text("ada"),
                    chat: text("tg:7"),
                    parts: 2,
                },
                json!({"agent": "ada", "chat": "tg:7", "parts": 2}),
            ),
            (
                EventData::RunStarted {
                    run_id: 4,
                    agent: text("ada"),
                    chat: text("tg:7"),
                    resume: true,
                },
                json!({"run_id": 4, "agent": "ada", "chat": "tg:7", "resume": true}),
            ),
            (
                EventData::RunStep {
                    run_id: 4,
                    agent: text("ada"),
                    kind: text("tool_result"),
                    name: text("read_file"),
                },
                json!({"run_id": 4, "agent": "ada", "kind": "tool_result", "name": "read_file"}),
            ),
            (
                EventData::RunFinished {
                    run_id: 4,
                    agent: text("ada"),
                    chat: text("tg:7"),
                    status: text("completed"),
                },
                json!({"run_id": 4, "agent": "ada", "chat": "tg:7", "status": "completed"}),
            ),
            (
                EventData::CostRecorded {
                    agent: text("ada"),
                    model: text("m"),
                    input_tokens: 10,
                    output_tokens: 3,
                    cost_usd: 0.25,
                },
                json!({"agent": "ada", "model": "m", "input_tokens": 10, "output_tokens": 3,
                       "cost_usd": 0.25}),
            ),
            (
                EventData::ApprovalRequested {
                    id: text("ap1"),
                    agent: text("ada"),
                    chat: text("tg:7"),
                    tool: text("shell"),
                    risk: text("high"),
                    action: text("rm x"),
                    reason: text("cleanup"),
                    expires_ms: 900,
                    run_id: 4,
                },
                json!({"id": "ap1", "agent": "ada", "chat": "tg:7", "tool": "shell", "risk": "high",
                       "action": "rm x", "reason": "cleanup", "expires_ms": 900, "run_id": 4}),
            ),
            (
                EventData::ApprovalDecided {
                    id: text("ap1"),
                    status: text("approved"),
                    by: text("studio"),
                    agent: text("ada"),
                },
                json!({"id": "ap1", "status": "approved", "by": "studio", "agent": "ada"}),
            ),
            (
                EventData::ApprovalExpired {
                    id: text("ap1"),
                    agent: text("ada"),
                    expires_ms: 900,
                    expired_ms: 901,
                },
                json!({"id": "ap1", "status": "denied_timeout", "agent": "ada", "expires_ms": 900,
                       "expired_ms": 901}),
            ),
            (
                EventData::BotOnline {
                    agent: text("ada"),
                    username: text("ada_bot"),
                },
                json!({"agent": "ada", "state": "online", "username": "ada_bot"}),
            ),
            (
                EventData::BotPolling {
                    agent: text("ada"),
                    state: text("conflict"),
                    detail: text("another poller"),
                    at_ms: 5,
                },
                json!({"agent": "ada", "state": "conflict", "detail": "another poller", "at_ms": 5}),
            ),
            (
                EventData::BotUnauthorized { agent: text("ada") },
                json!({"agent": "ada", "state": "unauthorized"}),
            ),
            (
                EventData::BotPairingRequested {
                    agent: text("ada"),
                    code: text("ABC123"),
                    user_id: 42,
                },
                json!({"agent": "ada", "state": "pairing_requested", "code": "ABC123", "user_id": 42}),
            ),
            (
                EventData::McpHealth {
                    server: text("files"),
                    transport: text("stdio"),
                    trust: text("untrusted"),
                    state: text("up"),
                    last_error: None,
                    restarts: 1,
                    last_latency_ms: Some(12),
                    tool_count: 3,
                },
                json!({"server": "files", "transport": "stdio", "trust": "untrusted", "state": "up",
                       "last_error": null, "restarts": 1, "last_latency_ms": 12, "tool_count": 3}),
            ),
            (
                EventData::ScheduleFired {
                    job_id: 1,
                    job_run_id: 2,
                    agent: text("ada"),
                    fire_ms: 100,
                    started_ms: 101,
                    attempt: 1,
                },
                json!({"job_id": 1, "job_run_id": 2, "agent": "ada", "fire_ms": 100,
                       "started_ms": 101, "attempt": 1}),
            ),
            (
                EventData::JobChanged {
                    job_id: 1,
                    agent: text("ada"),
                    outcome: text("paused"),
                },
                json!({"job_id": 1, "agent": "ada", "outcome": "paused"}),
            ),
            (
                EventData::JobRunFinished {
                    job_id: 1,
                    job_run_id: 2,
                    agent: text("ada"),
                    outcome: text("failed"),
                    run_id: Some(4),
                    retry_at_ms: None,
                },
                json!({"job_id": 1, "job_run_id": 2, "agent": "ada", "outcome": "failed",
                       "run_id": 4, "retry_at_ms": null}),
            ),
            (
                EventData::FiresNotRun {
                    job_id: 1,
                    agent: text("ada"),
                    outcome: text("skipped"),
                    count: 3,
                    busy: true,
                },
                json!({"job_id": 1, "agent": "ada", "outcome": "skipped", "count": 3, "busy": true}),
            ),
            (
                EventData::FiresCaughtUp {
                    job_id: 1,
                    agent: text("ada"),
                    count: 2,
                },
                json!({"job_id": 1, "agent": "ada", "outcome": "caught_up", "count": 2}),
            ),
            (
                EventData::HandoffChanged {
                    id: text("c1"),
                    status: text("running"),
                    change: text("started"),
                    owner: text("ada"),
                    delegate: text("bob"),
                },
                json!({"id": "c1", "status": "running", "change": "started", "owner": "ada",
                       "delegate": "bob"}),
            ),
            (
                EventData::MemoryChanged {
                    id: 9,
                    change: text("saved"),
                },
                json!({"id": 9, "change": "saved"}),
            ),
            (
                EventData::MemoryReindex {
                    model: text("local:all-MiniLM-L6-v2"),
                    done: 3,
                    total: 9,
                    running: true,
                    error: None,
                },
                json!({"change": "reindex", "model": "local:all-MiniLM-L6-v2", "done": 3,
                       "total": 9, "running": true, "error": null}),
            ),
            (
                EventData::AgentToolsChanged {
                    agent: text("ada"),
                    source: text("mcp:files"),
                },
                json!({"change": "tools", "source": "mcp:files", "agent": "ada"}),
            ),
            (
                EventData::AgentSkillToggled {
                    agent: text("ada"),
                    skill: text("journal"),
                    enabled: false,
                },
                json!({"change": "skill", "skill": "journal", "enabled": false, "agent": "ada"}),
            ),
            (
                EventData::AgentSettingsChanged {
                    agent: text("ada"),
                    autonomy: text("ask"),
                    model: text("m"),
                    paused: true,
                },
                json!({"change": "settings", "autonomy": "ask", "model": "m", "paused": true,
                       "agent": "ada"}),
            ),
            (
                EventData::GrantRevoked { grant: 5 },
                json!({"grant": 5, "change": "grant_revoked"}),
            ),
            (
                EventData::RuleAdded { rule: 6 },
                json!({"rule": 6, "change": "rule_added"}),
            ),
            (
                EventData::RuleDisabled { rule: 6 },
                json!({"rule": 6, "change": "rule_disabled"}),
            ),
            (
                EventData::PeopleChanged {
                    agent: text("ada"),
                    user_id: Some(42),
                    change: text("blocked"),
                },
                json!({"agent": "ada", "user_id": 42, "change": "blocked"}),
            ),
            (
                EventData::AuditAppended {
                    action: text("grant.revoked"),
                    subject: text("grant:5"),
                },
                json!({"action": "grant.revoked", "subject": "grant:5"}),
            ),
        ];
        for (data, expected) in cases {
            assert_eq!(data_json(&data), expected, "{data:?}");
            assert_eq!(
                stored_data(&data).map(|stored| serde_json::from_str::<Value>(&stored).unwrap()),
                Some(expected),
                "{data:?}"
            );
        }
    }

    #[test]
    fn an_event_without_data_has_null_data_and_stores_none() {
        assert_eq!(data_json(&EventData::None), Value::Null);
        assert_eq!(stored_data(&EventData::None), None);
        let event = RuntimeEvent {
            seq: 3,
            at_ms: 10,
            kind: EventKind::Warning,
            subject: text("bot:ada"),
            detail: text("reply not delivered"),
            data: Box::new(EventData::None),
        };
        assert_eq!(
            event_json(&event),
            json!({"seq": 3, "at_ms": 10, "kind": "warning", "subject": "bot:ada",
                   "detail": "reply not delivered", "data": null})
        );
    }
}
