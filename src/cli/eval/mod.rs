//! `clawvisor eval <dir>`: living-spec scenarios — scripted conversations with expected outcomes.
//!
//! Each `*.toml` file in the directory is one scenario: the agents' extra settings, a script for
//! the scripted model (`testkit::scripted_llm`, used unless `--live`), and turns, each a user
//! message (or a wait) with what must come of it. A scenario runs on a throwaway daemon
//! in-process (no Studio, no bots; the scheduler and configured MCP servers run) and is judged by
//! its answers and by what the database recorded.
//!
//! With `--live`, the same scenarios run against a configured provider and model instead of the
//! script; only the expectations that a real model can be held to are checked (a turn's `expect`,
//! unless marked `scripted_only`; never its `scripted`), and a pass rate is printed.
//!
//! ```toml
//! name = "tool use"
//! description = "The agent looks up the time with a tool and answers with it."
//! agent = 'tools = ["current_time"]'
//!
//! [[script.rules]]
//! when = { after_tool_result = "current_time", last_tool_result_contains = "Europe/Berlin" }
//! text = "It is 10:00 in Berlin."
//!
//! [[script.rules]]
//! when = { last_user_contains = "time" }
//! tool_calls = [{ name = "current_time", arguments = '{"timezone":"Europe/Berlin"}' }]
//!
//! [[turns]]
//! user = "What time is it in Berlin?"
//! expect = { tools = ["current_time"], status = "succeeded", reply_contains = ["Berlin"] }
//! scripted = { reply_contains = ["10:00"], max_model_calls = 2 }
//! ```
//!
//! Every key (an unknown key is an error that names it):
//!
//! Scenario
//! - `name`, `description`.
//! - `agent`: extra lines for the file of the agent called `agent`, the one turns talk to unless
//!   they say otherwise (tools, autonomy, approval_ttl, skills, context_tokens, ...).
//! - `[[agents]]`: more agents, each `name` and `file` (extra lines for its file, like `agent`),
//!   for handoffs and validators. Every agent's instructions say `You are <name>, a test agent.`,
//!   which script rules can match with `system_contains`.
//! - `config`: extra lines for the daemon's config (`[scheduler]`, `[[mcp.servers]]`, ...).
//! - `[files]`: `"path" = "contents"`, written into `agent`'s (default) workspace before the
//!   daemon starts: documents to read, workspace skills (`"skills/x/SKILL.md"`); contents
//!   `"base64:…"` are bytes (pictures).
//! - `[script]`: the scripted model's rules (see `testkit::scripted_llm`); rules are shared by all
//!   agents. Make answers depend on what a tool returned (`after_tool_result` with
//!   `last_tool_result_contains`), so that a broken tool shows in the reply.
//! - `telegram = true`: the main agent gets a bot on a fake Bot API (users 1001 "Ada", the
//!   approver, and 1002 "Bo" may talk to it); turns may then talk in Telegram chats (below).
//! - `whatsapp = true`: the main agent gets a WhatsApp account on a fake Graph API
//!   (`+4915100000001` "Ada" may talk and approve); turns to `wa:4915100000001` are signed webhook
//!   deliveries, and a turn's `approval` presses the prompt's reply button (`eval/whatsapp.rs`).
//! - `signal = true`: the main agent gets a Signal account on a fake signal-cli; `sg:` turns are
//!   messages (or with `voice`, voice notes) pushed into its event stream, and a turn's `approval`
//!   replies `yes <id>` / `no <id>` in words (`eval/signal.rs`); a number other than
//!   `+4917200000001` is a stranger (a pairing code), and `{{pairing_code}}` in an `sg:` turn's
//!   text is the newest pending request's code.
//! - `unclaimed = true` (with `telegram`): the bot's agent file names nobody, so the bot waits to
//!   be claimed; `{{claim_code}}` in a Telegram turn's text is its claim code.
//! - `[forums]`: `"-1001234567890" = ["Groceries", "Trips"]`: forum groups on the fake Bot API
//!   and their topics, which turns address by name.
//! - `voice = true`: a fake transcription server (provider `whisper`, `transcription_model`) and
//!   a fake speech server (provider `tts`, `speech_model`) are configured. `search = true`: a
//!   fake SearXNG is the `[web_search]` backend (it answers three results naming the query).
//! - `test_site = true`: the testkit's local web site runs (`testkit::test_site`: a JavaScript
//!   page, a login, a shop) for the `browser` tool; it is on loopback, so the config allows it;
//!   its password is in the daemon's environment as `TEST_SITE_PASSWORD` (for `[[browser.logins]]`).
//! - `[[turns]]`: at least one.
//!
//! Placeholders, in `agent`, `[[agents]] file`, `config`, `[files]` contents and the script's
//! texts and tool-call arguments:
//! - `{{now+5s}}` (any duration, or `{{now}}`): that moment as RFC 3339 UTC (for `at` tasks). In
//!   the script, now is when the first turn starts (the daemon is up and its tools are ready);
//!   elsewhere, when the scenario starts;
//! - `{{mcp_test_server}}`: the path of `clawvisor-mcp-test-server` beside this binary;
//! - `{{test_site}}` (with `test_site = true`; also in a turn's `user`): the site's
//!   `http://127.0.0.1:<port>`.
//!
//! Before the first turn the runner waits (up to 15 s) until every agent is offered the tools its
//! file lists by name (scheduler, memory and MCP tools are published after start; list an MCP tool
//! as `server__tool` to wait for its link).
//!
//! Turn
//! - `user`: the message; or `voice = "…"` (Telegram chats): a voice note in which the
//!   transcription server hears that text; or `wait = "10s"`: send nothing and wait at most that long for the
//!   agent's next message in the chat (a scheduled task's answer, shown as a notice, or a late
//!   answer). A user turn ignores what the chat showed before its message; a wait does not. A
//!   scheduled task's answer comes without its run: check it with `jobs` and `job_runs`.
//! - `to`: the agent (default `agent`). `chat`: the conversation, a terminal chat `cli:<chat>`
//!   (default `eval`), or with `telegram = true` a Telegram chat: `tg:1001` (Ada's private chat),
//!   `tg:-1001234567890` (a group), `tg:-1001234567890/Trips` (the topic named Trips of a group
//!   declared under `[forums]`). A Telegram turn's message
//!   is an update the bot receives from `from` (default: the private chat's owner, else 1001);
//!   what it heard is every message the bot sent to that chat until the update was answered
//!   (messages with buttons, such as approval prompts, count as notices); approval requests are
//!   decided by Ada.
//! - `trigger = { name, body, delivery_id }` (instead of `user`; with `telegram = true`): a
//!   webhook delivery POSTed to `/hooks/trigger/<name>` (a `[[triggers]]` entry of `config`),
//!   signed with the secret the runner gives every trigger; `delivery_id` is its `X-Delivery-Id`.
//!   Its `chat` is the Telegram chat the answer is expected in (`tg:1001`, Ada, the approver:
//!   `deliver_to = "owner"`); the hook's one-line answer (`accepted: …`, `already received: …`)
//!   is a notice; its `approval` decides the run's requests as the operator in Studio
//!   (`eval/trigger.rs`).
//! - `approval`: `approve`, `deny` or `expire` (leave it until its `approval_ttl` passes): what the
//!   user does with every approval requested in the chat during the turn. Without it a request is
//!   denied at once and the turn fails.
//! - `settings`: `{ paused = true, autonomy = "trust_first" }`: an operator's change to the
//!   agent's runtime settings, applied before the message.
//! - `expect`: below; what any capable model must bring about (tools run or refused, files,
//!   recorded statuses, memories, and the facts the reply must state).
//! - `scripted`: more expectations, with the same keys, checked only against the scripted model:
//!   the exact texts its script makes it say, model call counts.
//!
//! Expect (all optional; texts compare case-insensitively)
//! - `reply_contains`, `reply_not_contains`: the answer's text.
//! - `notices_contain`: notices the chat showed during the turn (approval requests,
//!   `send_message` messages).
//! - `status`: the run's status (succeeded, failed, cancelled, budget_stopped).
//! - `tools`, `tools_not_run`: tools that did / did not run in the turn's run.
//! - `tool_output_contains`: texts in the results the model got back in the run (refusals too).
//! - `compacted`: the session's history was compacted into a recap by the end of the turn.
//! - `max_model_calls`: at most this many model calls during the turn (scripted model only).
//! - `approvals`, `jobs`, `job_runs`, `handoffs`, `trigger_deliveries`: the statuses of every
//!   approval request, job, job fire, handoff contract and stored webhook delivery recorded so
//!   far, in the order they were created.
//! - `memory_contains`: texts that some saved memory (not a recap) contains; `memory_count`: how
//!   many saved memories there are.
//! - `files`: `{ "path" = "text" }`: the file in `agent`'s workspace contains the text;
//!   `files_absent`: files that must not exist there.
//! - `sent_files`: Telegram turns: the kinds of files the bot sent to the chat (`photo`,
//!   `document`, `voice`), in order.
//! - `scripted_only`: this turn's expectations are only checked against the scripted model (exact
//!   texts a real model would not produce).
//!
//! The module is split by concept: `scenario` (the file format and its checks), `placeholders`
//! (`{{now+5s}}` and friends), `runner` (a throwaway daemon driven turn by turn), `judge` (what
//! the turn brought about against what it expects), `services` (the fakes a scenario asks for:
//! Bot API, transcription, speech, search), `telegram` (turns as updates to the fake Bot API,
//! forum topics by name, what the bot sent as what was heard), `trigger` (turns as signed
//! webhook deliveries) and `report` (the `clawvisor eval` command). The repository's scenarios are in `evals/`, one promise each.

mod daemon;
mod judge;
mod placeholders;
pub(in crate::cli) mod report;
pub mod runner;
pub mod scenario;
mod seam;
mod services;
mod signal;
mod telegram;
mod trigger;
mod whatsapp;
