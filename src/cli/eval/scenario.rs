//! The scenario file format (`*.toml` in the evals directory) and the checks serde cannot make.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

use crate::config::{Autonomy, Dur};
use crate::domain::ChatKey;
use crate::testkit::scripted_llm::Script;

use super::trigger::TriggerTurn;

/// The agent turns talk to unless they name another.
pub const MAIN_AGENT: &str = "agent";
const DEFAULT_CHAT: &str = "eval";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Extra lines for the main agent's file (tools, autonomy, context_tokens, ...).
    #[serde(default)]
    pub agent: String,
    /// More agents (handoff delegates, validators).
    #[serde(default)]
    pub agents: Vec<ExtraAgent>,
    /// Extra lines for the daemon's config.
    #[serde(default)]
    pub config: String,
    /// Files put into the main agent's workspace before start: path → contents.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    #[serde(default)]
    pub script: Script,
    /// The main agent gets a bot on a fake Bot API; turns may then talk to `tg:` chats.
    #[serde(default)]
    pub telegram: bool,
    /// The main agent gets a WhatsApp account on a fake Graph API; turns may then talk to
    /// `wa:<number>` chats (`wa:4915100000001` may talk and approve, by reply buttons).
    #[serde(default)]
    pub whatsapp: bool,
    /// The main agent gets a Signal account on a fake signal-cli; turns may then talk to
    /// `sg:<number>` chats (`sg:+4917200000001` may talk and approve, in words).
    #[serde(default)]
    pub signal: bool,
    /// The bot's agent file names nobody (no `allow_users`, no `approvers`): the bot waits to be
    /// claimed; a turn's `{{claim_code}}` is its claim code.
    #[serde(default)]
    pub unclaimed: bool,
    /// Forum groups on the fake Bot API: chat id (negative) → its topics' names, which turns
    /// address as `tg:<chat_id>/<topic name>`.
    #[serde(default)]
    pub forums: BTreeMap<String, Vec<String>>,
    /// A fake transcription server (provider `whisper`, `transcription_model = "whisper-1"`) and a
    /// fake speech server (provider `tts`, `speech_model = "tts-1"`) are configured.
    #[serde(default)]
    pub voice: bool,
    /// A fake SearXNG is the `[web_search]` backend.
    #[serde(default)]
    pub search: bool,
    /// The testkit's local web site runs for the browser (`testkit::test_site`); texts name it
    /// `{{test_site}}` (`http://127.0.0.1:<port>`). It is on loopback: the scenario's config
    /// allows it (`[tools] web_fetch_allow_private = true` or `[browser] allow_private`).
    #[serde(default)]
    pub test_site: bool,
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraAgent {
    pub name: String,
    /// Extra lines for its agent file.
    #[serde(default)]
    pub file: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The user's message; absent for a `wait` turn.
    #[serde(default)]
    pub user: Option<String>,
    /// Send nothing; wait at most this long for the agent's next message in the chat.
    #[serde(default)]
    pub wait: Option<Dur>,
    /// The agent spoken to (default `agent`).
    #[serde(default)]
    pub to: Option<String>,
    /// The conversation: the terminal chat `cli:<chat>` (default `eval`), or with `telegram = true`
    /// a Telegram chat `tg:<chat_id>` (a forum topic: `tg:<chat_id>/<thread_id>`).
    #[serde(default)]
    pub chat: Option<String>,
    /// The Telegram user who sends the message (default: the private chat's owner, else 1001).
    #[serde(default)]
    pub from: Option<i64>,
    /// Instead of `user`: a voice note in a Telegram chat; the transcription server hears this text
    /// in it (with `voice = true`; without it nobody transcribes).
    #[serde(default)]
    pub voice: Option<String>,
    /// Instead of `user`: a signed webhook delivery to a trigger of the scenario's `config`
    /// (`trigger.rs`); the turn's `chat` (a Telegram chat) is where its answer is expected, and
    /// its `approval` decides the run's requests as the operator in Studio.
    #[serde(default)]
    pub trigger: Option<TriggerTurn>,
    /// What the user does with approval requests during the turn.
    #[serde(default)]
    pub approval: Option<ApprovalAction>,
    /// An operator's settings change applied before the message.
    #[serde(default)]
    pub settings: Option<Settings>,
    #[serde(default)]
    pub expect: Expect,
    /// Expectations checked only against the scripted model (its exact texts).
    #[serde(default)]
    pub scripted: Expect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    Approve,
    Deny,
    /// Leave the request alone until it expires.
    Expire,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub paused: Option<bool>,
    #[serde(default)]
    pub autonomy: Option<Autonomy>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Every one of these appears in the reply (case-insensitive).
    #[serde(default)]
    pub reply_contains: Vec<String>,
    #[serde(default)]
    pub reply_not_contains: Vec<String>,
    /// Every one of these appears in some notice shown during the turn.
    #[serde(default)]
    pub notices_contain: Vec<String>,
    /// Tools that ran during the turn (in any order).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Tools that did not run during the turn.
    #[serde(default)]
    pub tools_not_run: Vec<String>,
    /// Every one of these appears in some tool result the model got back during the turn.
    #[serde(default)]
    pub tool_output_contains: Vec<String>,
    /// None of these reached the model: not in the turn's tool results or reply, and (scripted
    /// model) in no request it was sent so far — a password the browser types by itself.
    #[serde(default)]
    pub model_never_saw: Vec<String>,
    /// The run's status: succeeded, failed, cancelled, budget_stopped.
    #[serde(default)]
    pub status: Option<String>,
    /// The session's history was compacted into a recap by the end of the turn.
    #[serde(default)]
    pub compacted: Option<bool>,
    /// At most this many model calls during the turn.
    #[serde(default)]
    pub max_model_calls: Option<u32>,
    /// The statuses of every approval request so far, oldest first.
    #[serde(default)]
    pub approvals: Option<Vec<String>>,
    /// The statuses of every scheduled job so far, oldest first.
    #[serde(default)]
    pub jobs: Option<Vec<String>>,
    /// The statuses of every job fire so far, oldest first.
    #[serde(default)]
    pub job_runs: Option<Vec<String>>,
    /// The statuses of every handoff contract so far, oldest first.
    #[serde(default)]
    pub handoffs: Option<Vec<String>>,
    /// The statuses of every stored webhook delivery so far, oldest first.
    #[serde(default)]
    pub trigger_deliveries: Option<Vec<String>>,
    /// Every one of these appears in some saved memory (recaps excluded).
    #[serde(default)]
    pub memory_contains: Vec<String>,
    /// How many saved memories there are (recaps excluded).
    #[serde(default)]
    pub memory_count: Option<usize>,
    /// Files of the main agent's workspace and a text each must contain.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Files that must not exist in the main agent's workspace.
    #[serde(default)]
    pub files_absent: Vec<String>,
    /// Telegram turns: the kinds of files the bot sent to the chat during the turn, in order
    /// (`photo`, `document`, `voice`); `[]`: none.
    #[serde(default)]
    pub sent_files: Option<Vec<String>>,
    /// Only checked against the scripted model (exact texts a real model would not produce).
    #[serde(default)]
    pub scripted_only: bool,
}

impl Scenario {
    /// The names of every agent, the main one first.
    pub(super) fn agent_names(&self) -> Vec<&str> {
        std::iter::once(MAIN_AGENT)
            .chain(self.agents.iter().map(|agent| agent.name.as_str()))
            .collect()
    }

    /// A `wa:` chat needs `whatsapp = true`, an `sg:` chat `signal = true`.
    fn whatsapp_chat(&self, number: usize, turn: &Turn) -> Result<(), String> {
        match turn.chat.as_deref().map(str::trim) {
            Some(chat) if chat.starts_with("wa:") && !self.whatsapp => Err(format!(
                "turn {number}: `chat = \"{chat}\"` needs `whatsapp = true`"
            )),
            Some(chat) if chat.starts_with("sg:") && !self.signal => Err(format!(
                "turn {number}: `chat = \"{chat}\"` needs `signal = true`"
            )),
            _ => Ok(()),
        }
    }

    /// A `trigger` turn names a trigger of the scenario's `config` and the private Telegram chat
    /// its answer is expected in.
    fn trigger_turn(&self, number: usize, turn: &Turn) -> Result<(), String> {
        let Some(trigger) = &turn.trigger else {
            return Ok(());
        };
        let configured = super::trigger::configured(&self.config);
        if !configured.iter().any(|entry| entry.name == trigger.name) {
            return Err(format!(
                "turn {number}: `trigger.name = \"{}\"` is not a [[triggers]] entry of `config`",
                trigger.name
            ));
        }
        if !self.telegram || turn.chat().telegram_chat_id().is_none_or(|id| id <= 0) {
            return Err(format!(
                "turn {number}: a `trigger` turn needs `telegram = true` and the private Telegram `chat` its answer goes to (\"tg:1001\")"
            ));
        }
        Ok(())
    }

    /// What serde cannot check: references between keys, one of `user` / `wait`, safe paths.
    fn check(&self) -> Result<(), String> {
        if self.turns.is_empty() {
            return Err("a scenario needs at least one [[turns]]".into());
        }
        let mut names = BTreeSet::new();
        for name in self.agent_names() {
            if name.trim().is_empty() || !names.insert(name) {
                return Err(format!(
                    "[[agents]]: `{name}` is empty or used twice (`{MAIN_AGENT}` is the main agent)"
                ));
            }
        }
        for (path, contents) in &self.files {
            workspace_path(path).map_err(|error| format!("[files]: {error}"))?;
            file_bytes(contents).map_err(|error| format!("[files] `{path}`: {error}"))?;
        }
        if self.unclaimed && !self.telegram {
            return Err("`unclaimed = true` needs `telegram = true`".into());
        }
        for (chat, topics) in &self.forums {
            if !self.telegram {
                return Err("[forums] needs `telegram = true`".into());
            }
            if !chat.parse::<i64>().is_ok_and(|id| id < 0) || topics.is_empty() {
                return Err(format!(
                    "[forums]: `{chat}` must be a group's (negative) chat id with at least one topic name"
                ));
            }
        }
        for (index, turn) in self.turns.iter().enumerate() {
            let number = index + 1;
            said_once(number, turn)?;
            self.trigger_turn(number, turn)?;
            if turn.voice.is_some()
                && !turn
                    .chat
                    .as_deref()
                    .is_some_and(|chat| ["tg:", "wa:", "sg:"].iter().any(|p| chat.starts_with(p)))
            {
                return Err(format!(
                    "turn {number}: a `voice` note needs a Telegram, WhatsApp or Signal `chat`"
                ));
            }
            if let Some(to) = &turn.to
                && !names.contains(to.as_str())
            {
                return Err(format!(
                    "turn {number}: `to = \"{to}\"` is not an agent of this scenario ({})",
                    names.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
            self.whatsapp_chat(number, turn)?;
            match turn.chat.as_deref().map(str::trim) {
                Some("") => return Err(format!("turn {number}: `chat` is empty")),
                Some(chat) if chat.starts_with("tg:") => {
                    if !self.telegram {
                        return Err(format!(
                            "turn {number}: `chat = \"{chat}\"` needs `telegram = true`"
                        ));
                    }
                    if turn.chat().telegram_chat_id().is_none() {
                        return Err(format!(
                            "turn {number}: `{chat}` is not `tg:<chat_id>` or `tg:<chat_id>/<topic>`"
                        ));
                    }
                    if let Some((group, topic)) = chat["tg:".len()..].split_once('/')
                        && topic.parse::<i32>().is_err()
                        && !self
                            .forums
                            .get(group)
                            .is_some_and(|topics| topics.iter().any(|name| name == topic))
                    {
                        return Err(format!(
                            "turn {number}: `{chat}`: no topic `{topic}` of group {group} under [forums]"
                        ));
                    }
                }
                _ if turn.from.is_some() => {
                    return Err(format!("turn {number}: `from` is for Telegram chats only"));
                }
                _ => {}
            }
            for expect in [&turn.expect, &turn.scripted] {
                for path in expect.files.keys().chain(expect.files_absent.iter()) {
                    workspace_path(path).map_err(|error| format!("turn {number}: {error}"))?;
                }
            }
        }
        Ok(())
    }
}

/// A turn gives exactly one of `user`, `voice`, `trigger` or a positive `wait`.
fn said_once(number: usize, turn: &Turn) -> Result<(), String> {
    match (&turn.user, &turn.wait, &turn.voice, &turn.trigger) {
        (Some(_), None, None, None) | (None, None, Some(_), None) | (None, None, None, Some(_)) => {
        }
        (None, Some(wait), None, None) if !wait.0.is_zero() => {}
        (None, Some(_), None, None) => {
            return Err(format!("turn {number}: `wait` must be positive"));
        }
        _ => {
            return Err(format!(
                "turn {number}: give one of `user` (a message), `voice` (a voice note), `trigger` (a webhook delivery) or `wait` (a duration)"
            ));
        }
    }
    Ok(())
}

impl Turn {
    pub(super) fn agent(&self) -> &str {
        self.to.as_deref().unwrap_or(MAIN_AGENT)
    }

    pub(super) fn chat(&self) -> ChatKey {
        let chat = self.chat.as_deref().unwrap_or(DEFAULT_CHAT).trim();
        match chat.starts_with("tg:") || chat.starts_with("wa:") || chat.starts_with("sg:") {
            true => ChatKey::parse(chat).unwrap_or_else(|| ChatKey::cli(chat)),
            false => ChatKey::cli(chat),
        }
    }
}

/// What a `[files]` entry writes: its text, or the bytes of `base64:<data>` (pictures).
pub(super) fn file_bytes(contents: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    match contents.strip_prefix("base64:") {
        Some(data) => base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|error| format!("not valid base64: {error}")),
        None => Ok(contents.as_bytes().to_vec()),
    }
}

/// A relative path inside a workspace (no `..`, not absolute).
pub(super) fn workspace_path(path: &str) -> Result<PathBuf, String> {
    let candidate = Path::new(path);
    if path.is_empty()
        || !candidate
            .components()
            .all(|component| matches!(component, Component::Normal(_)))
    {
        return Err(format!(
            "`{path}` must be a relative path inside the workspace"
        ));
    }
    Ok(candidate.to_path_buf())
}

/// Every scenario file of a directory, sorted by name.
pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, Scenario)>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|error| format!("cannot read {}: {error}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .map_err(|error| format!("{}: {error}", path.display()))?;
            let scenario: Scenario = toml::from_str(&text)
                .map_err(|error| format!("{}: {}", path.display(), error.message()))?;
            scenario
                .check()
                .map_err(|error| format!("{}: {error}", path.display()))?;
            Ok((path, scenario))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, String> {
        let scenario: Scenario = toml::from_str(text).map_err(|error| error.to_string())?;
        scenario.check()?;
        Ok(scenario)
    }

    #[test]
    fn unknown_keys_and_bad_references_are_named() {
        let error =
            parse("name = \"x\"\n[[turns]]\nuser = \"hi\"\nexpect = { replies = 1 }").unwrap_err();
        assert!(error.contains("replies"), "{error}");
        let error = parse("name = \"x\"\n[[turns]]\nuser = \"hi\"\nto = \"nobody\"").unwrap_err();
        assert!(error.contains("nobody"), "{error}");
        let error = parse("name = \"x\"\n[[turns]]\nexpect = {}").unwrap_err();
        assert!(error.contains("give one of `user`"), "{error}");
        let error =
            parse("name = \"x\"\n[files]\n\"../x\" = \"\"\n[[turns]]\nuser = \"hi\"").unwrap_err();
        assert!(error.contains("relative path"), "{error}");
        let error = parse(
            "name = \"x\"\n[[turns]]\nuser = \"hi\"\nscripted = { files_absent = [\"/etc/x\"] }",
        )
        .unwrap_err();
        assert!(error.contains("relative path"), "{error}");
        let error =
            parse("name = \"x\"\n[[turns]]\nuser = \"hi\"\napproval = \"maybe\"").unwrap_err();
        assert!(error.contains("maybe"), "{error}");
        assert!(
            parse("name = \"x\"\n[[agents]]\nname = \"b\"\n[[turns]]\nwait = \"2s\"\nto = \"b\"")
                .is_ok()
        );
        let error = parse("name = \"x\"\n[[turns]]\nuser = \"hi\"\nchat = \"tg:5\"").unwrap_err();
        assert!(error.contains("telegram = true"), "{error}");
        let error =
            parse("name = \"x\"\ntelegram = true\n[[turns]]\nuser = \"hi\"\nchat = \"tg:x\"")
                .unwrap_err();
        assert!(error.contains("tg:<chat_id>"), "{error}");
        let error = parse("name = \"x\"\n[[turns]]\nuser = \"hi\"\nfrom = 5").unwrap_err();
        assert!(error.contains("`from`"), "{error}");
        let topic =
            parse("name = \"x\"\ntelegram = true\n[[turns]]\nuser = \"hi\"\nchat = \"tg:-100/7\"")
                .expect("a topic chat");
        assert_eq!(topic.turns[0].chat().telegram_thread_id(), Some(7));
        let hook = "name = \"x\"\ntelegram = true\nconfig = '''\n[[triggers]]\nname = \"bell\"\n\
                    agent = \"agent\"\nprompt = \"p\"\n'''\n[[turns]]\nchat = \"tg:1001\"\n";
        assert!(
            parse(&format!(
                "{hook}trigger = {{ name = \"bell\", body = \"{{}}\" }}"
            ))
            .is_ok()
        );
        let error = parse(&format!(
            "{hook}trigger = {{ name = \"door\", body = \"\" }}"
        ))
        .unwrap_err();
        assert!(error.contains("not a [[triggers]] entry"), "{error}");
        let error = parse(&format!(
            "{hook}trigger = {{ name = \"bell\", body = \"\" }}\nuser = \"hi\""
        ))
        .unwrap_err();
        assert!(error.contains("give one of"), "{error}");
    }
}
