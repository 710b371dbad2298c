//! The approvals service: a run asks for a human decision; approvers (Telegram, Studio, the
//! terminal) decide; the operator administers grants and policy rules. Served by
//! `actors/approval_desk/`.
//!
//! The words people read about approvals are here too, once, for every channel: what an agent
//! wants to do in one plain sentence ([`plain_summary`]), the one wording of the grant's scope
//! ([`grant_label`], [`grant_scope`]), outcomes in plain words ([`plain_outcome`]) and what a
//! refused action tells the chat ([`refusal_notice`]). Telegram, the terminal and Studio show the
//! same sentences.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::{CallError, ServiceName};
use crate::domain::ChatKey;
use crate::policy::RiskLevel;
use crate::registry::Registry;
use crate::store::approvals::ApprovalStatus;

/// Where the approval desk is registered.
pub const NAME: ServiceName<ApprovalDeskMsg> = ServiceName::fixed("approvals");
/// How long a decision or an administrative change may take (a stored, audited write).
const TIMEOUT: Duration = Duration::from_secs(10);

/// What a run asks.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub agent: String,
    pub chat: ChatKey,
    pub run_id: i64,
    pub call_id: String,
    pub tool: String,
    pub action: String,
    pub action_hash: String,
    pub target: String,
    pub risk: RiskLevel,
    pub reason: String,
    pub ttl: Duration,
    /// The page the action is on (the browser's screenshot, a PNG), kept with the request for
    /// Studio (`store::approvals::screenshot_path`).
    pub screenshot: Option<Screenshot>,
}

/// A PNG shown with an approval request; cheap to clone, and `Debug` shows only its size.
#[derive(Clone)]
pub struct Screenshot(pub std::sync::Arc<[u8]>);

impl std::fmt::Debug for Screenshot {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Screenshot({} bytes)", self.0.len())
    }
}

/// The answer a waiting run gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalVerdict {
    Approved { id: String, by: String },
    Denied { id: String, reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve,
    /// Approve, and let exactly this action (same tool, same arguments) run again in this chat
    /// without asking for this long.
    ApproveFor(Duration),
    Deny,
    /// The operator allows a blocked (L3) action once, having typed it out: `confirmation` must
    /// be the action exactly as shown. Only where `[policy] allow_l3_once` let the run ask, only
    /// from Studio, never with a grant.
    AllowBlockedOnce {
        confirmation: String,
    },
}

/// Who decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    /// A Telegram user pressing a button or typing `/approve`; `approver` as the bot knows it.
    Telegram {
        agent: String,
        user_id: i64,
        name: String,
        approver: bool,
    },
    /// A person on a seam channel (WhatsApp, Signal) pressing a button or replying `yes <id>`;
    /// `approver` as the channel's account knows it.
    Channel {
        channel: String,
        agent: String,
        user: String,
        name: String,
        approver: bool,
    },
    /// The Studio operator.
    Operator { name: String },
    /// The user of a local (terminal) chat, for requests of that chat only.
    Local { chat: ChatKey },
}

impl Decider {
    /// Who decided, as people in a chat read it: the person's name, "the operator in Studio".
    pub fn display_name(&self) -> String {
        match self {
            Decider::Telegram { name, .. } | Decider::Channel { name, .. } => name.clone(),
            Decider::Operator { .. } => "the operator in Studio".to_string(),
            Decider::Local { .. } => "the terminal's user".to_string(),
        }
    }

    /// Who decided, as the audit log and Studio record it: `telegram:42 (Olivia)`,
    /// `operator (studio)`, `local:cli:op`.
    pub fn label(&self) -> String {
        match self {
            Decider::Telegram { user_id, name, .. } => format!("telegram:{user_id} ({name})"),
            Decider::Channel {
                channel,
                user,
                name,
                ..
            } => format!("{channel}:{user} ({name})"),
            Decider::Operator { name } => format!("operator ({name})"),
            Decider::Local { chat } => format!("local:{chat}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideOutcome {
    Approved {
        id: String,
    },
    Denied {
        id: String,
    },
    /// Unknown, already decided, or expired.
    NotPending {
        id: String,
        status: Option<ApprovalStatus>,
    },
    NotAllowed {
        reason: String,
    },
}

impl DecideOutcome {
    /// What the decider is told.
    pub fn message(&self) -> String {
        match self {
            DecideOutcome::Approved { id } => format!("Approved ({id})."),
            DecideOutcome::Denied { id } => format!("Denied ({id})."),
            DecideOutcome::NotPending {
                status: Some(status),
                ..
            } if *status == ApprovalStatus::DeniedTimeout => {
                "This request has expired; it was not approved.".into()
            }
            DecideOutcome::NotPending {
                status: Some(status),
                ..
            } => format!(
                "This request was already decided: {}.",
                plain_outcome(*status)
            ),
            DecideOutcome::NotPending { .. } => {
                "This request has expired or does not exist.".into()
            }
            DecideOutcome::NotAllowed { reason } => reason.clone(),
        }
    }
}

/// What others may ask of the approval desk.
pub enum ApprovalDeskMsg {
    Request(ApprovalRequest, RpcReplyPort<ApprovalVerdict>),
    Decide(String, Decision, Decider, RpcReplyPort<DecideOutcome>),
    /// The bot posted the buttons of a request.
    Posted {
        id: String,
        chat_id: i64,
        message_id: i32,
    },
    /// An agent's bot is online: requests carried over from before a restart are posted again.
    BotOnline {
        agent: String,
    },
    /// Revoke a scoped grant (audited); `false` when it was not live.
    RevokeGrant {
        id: i64,
        by: String,
        reply: RpcReplyPort<bool>,
    },
    /// Add a policy rule (audited); the id of the new rule.
    AddRule {
        rule: NewRule,
        by: String,
        reply: RpcReplyPort<i64>,
    },
    /// Disable a policy rule (audited); `false` when it was not active.
    DisableRule {
        id: i64,
        by: String,
        reply: RpcReplyPort<bool>,
    },
}

/// A policy rule as an operator writes it. Rules only tighten: `deny` or `require_confirmation`
/// (nothing can loosen an L3 block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRule {
    pub effect: RuleEffect,
    /// A tool name, or a prefix ending in `*` (`github__*`); `None`: every tool.
    pub tool: Option<String>,
    pub agent: Option<String>,
    /// A channel kind (`tg`, `local`, `sched`, `handoff`).
    pub channel: Option<String>,
    /// A substring of the action ("rm ", "/etc/").
    pub pattern: Option<String>,
    pub description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleEffect {
    Deny,
    RequireConfirmation,
}

impl RuleEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleEffect::Deny => "deny",
            RuleEffect::RequireConfirmation => "require_confirmation",
        }
    }

    pub fn parse(text: &str) -> Option<RuleEffect> {
        match text {
            "deny" => Some(RuleEffect::Deny),
            "require_confirmation" => Some(RuleEffect::RequireConfirmation),
            _ => None,
        }
    }
}

/// Why the approvals service could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalsError {
    #[error(transparent)]
    Unavailable(#[from] CallError),
}

/// The approvals service, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Approvals {
    registry: Registry,
}

impl Approvals {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    /// Asks for a decision and waits for it, as long as it takes (the desk expires the request).
    pub async fn request(
        &self,
        request: ApprovalRequest,
    ) -> Result<ApprovalVerdict, ApprovalsError> {
        Ok(super::ask(&self.registry, &NAME, None, |reply| {
            ApprovalDeskMsg::Request(request, reply)
        })
        .await?)
    }

    /// Records `decider`'s decision on request `id`.
    pub async fn decide(
        &self,
        id: &str,
        decision: Decision,
        decider: Decider,
    ) -> Result<DecideOutcome, ApprovalsError> {
        let id = id.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ApprovalDeskMsg::Decide(id, decision, decider, reply)
        })
        .await?)
    }

    /// A bot posted the buttons of request `id` (so that the message can be resolved later).
    pub fn posted(&self, id: String, chat_id: i64, message_id: i32) {
        let posted = ApprovalDeskMsg::Posted {
            id,
            chat_id,
            message_id,
        };
        let _ = super::tell(&self.registry, &NAME, posted);
    }

    /// An agent's bot is online: requests carried over from before a restart are posted again.
    pub fn bot_online(&self, agent: &str) {
        let online = ApprovalDeskMsg::BotOnline {
            agent: agent.to_string(),
        };
        let _ = super::tell(&self.registry, &NAME, online);
    }

    /// Revokes a scoped grant (audited); `false` when it was not live.
    pub async fn revoke_grant(&self, id: i64, by: &str) -> Result<bool, ApprovalsError> {
        let by = by.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ApprovalDeskMsg::RevokeGrant { id, by, reply }
        })
        .await?)
    }

    /// Adds a policy rule (audited); the new rule's id.
    pub async fn add_rule(&self, rule: NewRule, by: &str) -> Result<i64, ApprovalsError> {
        let by = by.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ApprovalDeskMsg::AddRule { rule, by, reply }
        })
        .await?)
    }

    /// Disables a policy rule (audited); `false` when it was not active.
    pub async fn disable_rule(&self, id: i64, by: &str) -> Result<bool, ApprovalsError> {
        let by = by.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ApprovalDeskMsg::DisableRule { id, by, reply }
        })
        .await?)
    }
}

// ---------------------------------------------------------------------------------------------
// Words for people: the same sentences in Telegram, the terminal and Studio.
// ---------------------------------------------------------------------------------------------

/// How long the grant offered with a request lasts (it covers exactly the action asked for).
pub const GRANT_MINUTES: u32 = 30;

/// What an agent wants to do, as the first sentence a person reads: "ada wants to delete files in
/// its workspace". Worked out from the tool and the action as shown (never from anything else),
/// so it is the same wherever the request is shown, also for requests stored before.
pub fn plain_summary(agent: &str, tool: &str, action: &str) -> String {
    format!("{agent} wants to {}", plain_activity(tool, action))
}

/// What a call does, in plain words, without the agent: "delete files in its workspace".
pub fn plain_activity(tool: &str, action: &str) -> String {
    let text = match tool {
        "read_file" => "read a file in its workspace",
        "write_file" if action.contains("(append)") => "add to a file in its workspace",
        "write_file" => "write a file in its workspace",
        "list_dir" => "look at the files in its workspace",
        "shell" => {
            let command = typed_action(action);
            return shell_activity(command.strip_prefix("shell:").unwrap_or(command).trim());
        }
        "web_fetch" => "open a web page",
        "browser" => return crate::browser::words::plain_activity(action),
        "web_search" => "search the web",
        "send_message" => "send a message to a chat",
        "send_file" => "send a file from its workspace into the chat",
        "schedule_task" => "schedule a task for later",
        "save_to_memory" => "remember something",
        "forget" => "forget something it remembered",
        "search_memory" | "list_memory_facts" => "look through what it remembers",
        "handoff_task" => "hand a task to another agent",
        "spawn_subagent" => "start a helper for part of the task",
        "handoff_cancel" => "cancel a task it handed over",
        "use_skill" => "use one of its skills",
        "current_time" => "look at the clock",
        _ => {
            return match tool.split_once("__") {
                Some((server, name)) => {
                    format!("use `{name}` from the connected service `{server}`")
                }
                None => format!("use the tool `{tool}`"),
            };
        }
    };
    text.to_string()
}

/// What a shell command does, from its first program: "delete files in its workspace", or "run
/// the command `make` in its workspace" for a program without a plainer name.
fn shell_activity(command: &str) -> String {
    let programs: Vec<String> = crate::policy::shell::simple_command_words(command)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|words| {
            // Skip `VAR=value` assignments in front of the program.
            words.into_iter().find(|word| !word.contains('='))
        })
        .map(|program| program.rsplit('/').next().unwrap_or_default().to_string())
        .collect();
    let plain = |program: &str| -> Option<&'static str> {
        Some(match program {
            "rm" | "shred" | "unlink" => "delete files in its workspace",
            "rmdir" => "delete folders in its workspace",
            "mv" => "move or rename files in its workspace",
            "cp" => "copy files in its workspace",
            "mkdir" => "create a folder in its workspace",
            "touch" => "create a file in its workspace",
            "chmod" | "chown" | "chgrp" => "change who may use files in its workspace",
            "curl" | "wget" => "download something from the internet",
            "git" => "work with a git repository in its workspace",
            "tar" | "zip" | "unzip" | "gzip" | "gunzip" => "pack or unpack files in its workspace",
            "ls" | "cat" | "head" | "tail" | "wc" | "grep" | "find" => {
                "look at files in its workspace"
            }
            _ => return None,
        })
    };
    match programs.first() {
        Some(first) if programs.len() == 1 || programs.iter().all(|p| p == first) => {
            match plain(first) {
                Some(text) => text.to_string(),
                None => format!("run the command `{first}` in its workspace"),
            }
        }
        Some(_) => "run several commands in its workspace".to_string(),
        None => "run a command in its workspace".to_string(),
    }
}

/// A duration as people read it: "40 s", "5 min", "2 h 30 min".
pub fn plain_duration(duration: Duration) -> String {
    let seconds = duration.as_secs().max(1);
    match seconds {
        0..120 => format!("{seconds} s"),
        120..7_200 => format!("{} min", seconds / 60),
        _ if seconds % 3_600 < 60 => format!("{} h", seconds / 3_600),
        _ => format!("{} h {} min", seconds / 3_600, seconds % 3_600 / 60),
    }
}

/// The part of an action a person types out to allow a blocked one once: a shell command's
/// description ends with the profile it runs with (`\nruns with network: …`), which is not typed.
pub fn typed_action(action: &str) -> &str {
    action
        .rsplit_once("\nruns with network: ")
        .map_or(action, |(command, _)| command)
        .trim()
}

/// When a grant stops applying besides its expiry, in the words every channel and the audit use.
pub const GRANT_LAPSES: &str = "until the workspace changes";

/// The grant button's label, the same in Telegram and Studio.
pub fn grant_label(minutes: u32) -> String {
    format!("Allow exactly this for {minutes} min ({GRANT_LAPSES})")
}

/// What the grant covers, said once, the same way everywhere: exactly this action (the same tool
/// with the same arguments — what its hash covers), in this chat, for `minutes`, and only while
/// nothing else has written in the agent's workspace (a planted file could change what it does).
pub fn grant_scope(minutes: u32) -> String {
    format!(
        "“{}” approves now and, for the next {minutes} minutes, lets exactly this action run again in this chat without asking: the same tool with the same arguments, character for character. As soon as anything else writes in the agent's workspace (a file saved, a command that writes, a file sent in a chat), the grant lapses and the same action asks again, because a changed file could change what it does. Anything else still asks.",
        grant_label(minutes)
    )
}

/// An approval's outcome in plain words ("approved and done", not `consumed`).
pub fn plain_outcome(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Pending => "waiting for a decision",
        ApprovalStatus::Approved => "approved, about to run",
        ApprovalStatus::Consumed => "approved and done",
        ApprovalStatus::Denied => "denied",
        ApprovalStatus::DeniedTimeout => "expired: nobody decided in time, so it did not run",
        ApprovalStatus::DeniedUnreachable => "not run: nobody who could approve it was reachable",
    }
}

/// Who or what decided a call, in words, from the gate's `source` (`autonomy`, `risk`,
/// `rule:3`, `grant:7`, `rate_limit`, `loop_guard`, `contract:h-1`, `secrets`).
pub fn who_decided(source: &str) -> String {
    match source.split_once(':') {
        Some(("rule", id)) => format!("policy rule {id}, set by an operator"),
        Some(("grant", id)) => {
            format!("grant {id}: an approver allowed exactly this action earlier")
        }
        Some(("contract", id)) => format!("the tool list of handed-over task {id}"),
        _ => match source {
            "autonomy" => "the agent's autonomy setting".to_string(),
            "risk" => "the safety check: this kind of action is blocked".to_string(),
            "rate_limit" => "the limit on tool calls per minute".to_string(),
            "loop_guard" => "the loop guard: the same call again and again".to_string(),
            "secrets" => "the secrets guard: the call carried a key or token".to_string(),
            other => other.to_string(),
        },
    }
}

/// An action the policy refused, as the chat is told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal<'a> {
    pub agent: &'a str,
    pub tool: &'a str,
    pub action: &'a str,
    /// Why, as the risk check or the rule says it.
    pub why: &'a str,
    /// The gate's source: `risk`, `rule:<id>`, ...
    pub source: &'a str,
    /// `Some(ttl)` when an operator may allow it once in Studio and the run waits that long.
    pub operator_may_allow: Option<Duration>,
}

/// What the chat is told when the policy refuses an action: what happened, why, and what an
/// operator could change — a plain sentence first.
pub fn refusal_notice(refusal: &Refusal<'_>) -> String {
    let activity = plain_activity(refusal.tool, refusal.action);
    let agent = refusal.agent;
    // The risk check's reasons start with their level ("L3 `rm -rf old`: ..."): the level is
    // technical detail, and the sentence already says the action is blocked.
    let why = refusal
        .why
        .split("; ")
        .map(|reason| {
            let reason = reason.trim();
            match reason.get(..3) {
                Some("L0 " | "L1 " | "L2 " | "L3 ") => &reason[3..],
                _ => reason,
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    let why = why.trim_end_matches('.');
    if let Some(wait) = refusal.operator_may_allow {
        return format!(
            "{agent} may not {activity} on its own, so it is asking an operator.\nWhy: {why}.\nWhat happens next: an operator can allow exactly this once in Studio (Approvals), by typing the action to confirm. If nobody does within {}, it is not run.",
            plain_duration(wait)
        );
    }
    let change = match refusal.source.split_once(':') {
        Some(("rule", id)) => format!(
            "an operator can disable policy rule {id} on Studio's Approvals page."
        ),
        _ if refusal.source == "risk" => "this kind of action is always blocked. An operator can set `allow_l3_once = true` in the `[policy]` section of the config; then such an action waits for an operator to allow it once in Studio.".to_string(),
        _ => "ask for it differently, or ask an operator.".to_string(),
    };
    format!(
        "{agent} was not allowed to {activity}, so nothing was run.\nWhy: {why}.\nWhat can change it: {change}"
    )
}

#[cfg(test)]
mod wording_tests {
    use super::*;

    #[test]
    fn the_plain_sentence_names_what_the_action_does() {
        assert_eq!(
            plain_summary("assistant", "shell", "shell: rm -rf old"),
            "assistant wants to delete files in its workspace"
        );
        // The profile line the shell tool adds is not a second command.
        assert_eq!(
            plain_summary(
                "assistant",
                "shell",
                "shell: rm -rf old\nruns with network: no · writes: workspace only"
            ),
            "assistant wants to delete files in its workspace"
        );
        assert_eq!(
            plain_summary(
                "ada",
                "write_file",
                "write_file (overwrite): notes.txt\nhello"
            ),
            "ada wants to write a file in its workspace"
        );
        assert_eq!(
            plain_activity("shell", "shell: FOO=1 /usr/bin/make all"),
            "run the command `make` in its workspace"
        );
        assert_eq!(
            plain_activity("shell", "shell: ls && rm x"),
            "run several commands in its workspace"
        );
        assert_eq!(
            plain_activity("github__create_issue", "github__create_issue {}"),
            "use `create_issue` from the connected service `github`"
        );
        assert_eq!(plain_activity("odd", "odd"), "use the tool `odd`");
        assert_eq!(
            plain_summary(
                "ada",
                "browser",
                "browser: click [3] \"Buy now\" on shop.example (page \"Cart\")"
            ),
            "ada wants to click “Buy now” on shop.example (page “Cart”)"
        );
    }

    #[test]
    fn the_grant_is_worded_once_and_says_exactly_this_action_in_this_chat() {
        let scope = grant_scope(30);
        for said in [
            "Allow exactly this for 30 min",
            "exactly this action",
            "in this chat",
            "same arguments",
            "Anything else still asks",
            "until the workspace changes",
            "the grant lapses and the same action asks again",
        ] {
            assert!(scope.contains(said), "`{said}` missing: {scope}");
        }
        assert_eq!(plain_outcome(ApprovalStatus::Consumed), "approved and done");
    }

    #[test]
    fn a_refusal_says_what_happened_why_and_what_could_change_it() {
        let refusal = Refusal {
            agent: "ada",
            tool: "shell",
            action: "shell: rm -rf old",
            why: "L3 `rm -rf old`: `rm -rf` deletes a whole tree without asking",
            source: "risk",
            operator_may_allow: None,
        };
        let text = refusal_notice(&refusal);
        assert!(text.starts_with("ada was not allowed to delete files in its workspace"));
        assert!(
            text.contains("Why: `rm -rf old`: `rm -rf` deletes a whole tree"),
            "{text}"
        );
        assert!(text.contains("allow_l3_once"));
        let waiting = refusal_notice(&Refusal {
            operator_may_allow: Some(Duration::from_secs(300)),
            ..refusal.clone()
        });
        assert!(
            waiting.contains("allow exactly this once in Studio"),
            "{waiting}"
        );
        let rule = refusal_notice(&Refusal {
            source: "rule:4",
            ..refusal
        });
        assert!(rule.contains("disable policy rule 4"), "{rule}");
    }
}
