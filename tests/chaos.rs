//! Chaos: the real daemon binary with five bots on the fake Bot API and the scripted model, a
//! steady stream of messages (plain questions, actions that need an approval, reminders), a
//! heartbeat job per agent every few seconds — and SIGKILL at random moments, twenty times,
//! starting the daemon again on the same data each time.
//!
//! At the end it prints and checks: updates the fake handed out and the daemon confirmed vs
//! answered (none lost), duplicate replies (at most one per kill), actions executed without a
//! stored, consumed approval (none), denied actions that ran (none), reminders and heartbeat
//! fires lost or doubled (none), the audit chain (`clawvisor audit verify`) and
//! `PRAGMA integrity_check`.
//!
//! The second case is memory pressure (issue #30): a 500-message burst to the real binary under
//! an address-space cap (`prlimit --as`), SIGKILLed once a third is answered and started again
//! under the cap: no crash, nothing lost, nothing left `pending` or `dispatched`, the peak
//! address space and resident set printed.
//!
//! `CLAWVISOR_CHAOS_SEED` replays a run (the seed is printed); `CLAWVISOR_CHAOS_KILLS` changes the
//! number of kills. Run it alone with `cargo test --test chaos -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use clawvisor::testkit::fake_telegram::{BotId, FakeTelegram, SentMessage};
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::{Staged, World};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// Prints a figure straight to stderr: libtest captures `println!` of passing tests, and these
/// figures belong in CI's log whether the test passes or not.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const BOTS: usize = 5;
/// The approver: actions and reminders are asked for in this private chat of every bot.
const APPROVER: i64 = 42;
/// Plain questions come from these users' private chats.
const ASKERS: std::ops::Range<i64> = 1_000..1_012;
/// The heartbeat job's interval (its catch-up policy covers any outage of this test).
const HEARTBEAT_SECS: i64 = 5;
/// A reminder is due this long after it was asked for.
const REMINDER_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(12);
/// How long everything may take to settle after the last restart.
const SETTLE: Duration = Duration::from_secs(180);

/// What the test sent, to check what came of it.
#[derive(Debug, Clone)]
enum Sent {
    /// A plain question: answered `echo: <text>`.
    Question { bot: usize, chat: i64, text: String },
    /// `write note #N.`: an approval; approved when N is even, denied when odd.
    Note { bot: usize, number: u64 },
    /// `remind me #N.`: an approval for `schedule_task`, then one reminder ~12 s later.
    Reminder { bot: usize, number: u64 },
}

struct Chaos {
    dir: ScratchDir,
    fake: FakeTelegram,
    llm: ScriptedLlm,
    bots: Vec<BotId>,
    env: BTreeMap<String, String>,
    rng: StdRng,
    /// Rules added per note and reminder (their arguments differ), kept to set the whole script.
    rules: Vec<Rule>,
    sent: Vec<Sent>,
    /// Update ids handed to each bot's queue.
    pushed: Vec<Vec<i64>>,
    /// Approval buttons already pressed: (bot, message id).
    pressed: BTreeSet<(usize, i32)>,
    /// Chats with a message still waiting for its answer: (bot, chat) → index into `sent`. Like
    /// a person, a chat waits for the answer before it says the next thing (several messages
    /// in a row are answered together, in one run).
    waiting: BTreeMap<(usize, i64), usize>,
    next_number: u64,
}

fn agent_name(bot: usize) -> String {
    format!("agent{bot}")
}

impl Chaos {
    async fn new(seed: u64) -> Chaos {
        let dir = ScratchDir::new("clawvisor-chaos").unwrap();
        let users: Vec<i64> = std::iter::once(APPROVER).chain(ASKERS).collect();
        let mut builder = World::builder(Script::new()).config_extra(
            "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\nstale_grace = \"10m\"\n\
             [scheduler]\nmin_interval = \"1s\"",
        );
        for bot in 0..BOTS {
            let name = agent_name(bot);
            builder = builder.agent_with_bot(
                &name,
                "tools = [\"write_file\", \"schedule_task\"]\nautonomy = \"require_approval\"",
                &format!("{}:AAH-chaos-token-{name}-0123456789", 800 + bot),
                &users,
                &[APPROVER],
            );
        }
        let Staged {
            fake,
            llm,
            bots,
            env,
        } = builder.stage(dir.path()).await;
        let bots: Vec<BotId> = bots.iter().map(|bot| bot.id).collect();
        let chaos = Chaos {
            dir,
            fake,
            llm,
            bots,
            env,
            rng: StdRng::seed_from_u64(seed),
            rules: Vec::new(),
            sent: Vec::new(),
            pushed: vec![Vec::new(); BOTS],
            pressed: BTreeSet::new(),
            waiting: BTreeMap::new(),
            next_number: 0,
        };
        chaos.set_script();
        chaos
    }

    /// The whole script: fixed rules first, then the per-note and per-reminder ones, echo last.
    fn set_script(&self) {
        let mut script = Script::new()
            // After a tool ran (or was refused), the answer names the request.
            .rule(Rule::echo().when_after_tool_result("write_file"))
            .rule(Rule::echo().when_after_tool_result("schedule_task"))
            // Scheduled runs: the heartbeat and the reminders answer with their prompt.
            .rule(Rule::echo().when_last_user_contains("heartbeat tick"))
            .rule(Rule::echo().when_last_user_contains("is due"))
            .rule(
                Rule::tool_call(
                    "schedule_task",
                    json!({
                        "name": "heartbeat",
                        "kind": "every",
                        "schedule": format!("{HEARTBEAT_SECS}s"),
                        "prompt": "heartbeat tick",
                        "missed": "catch_up max_runs=100 window=1h",
                    })
                    .to_string(),
                )
                .when_last_user_contains("start the heartbeat"),
            );
        for rule in &self.rules {
            script = script.rule(rule.clone());
        }
        // Slow enough that runs are in flight when the kill comes.
        self.llm
            .set_script(script.rule(Rule::echo().delay(Duration::from_millis(120))));
    }

    async fn start(&self) -> DaemonProcess {
        let dir = self.dir.path().to_path_buf();
        let env = self.env.clone();
        tokio::task::spawn_blocking(move || DaemonProcess::start(BINARY, &dir, &env))
            .await
            .unwrap()
            .expect("the daemon starts")
    }

    fn push(&mut self, bot: usize, chat: i64, user: i64, text: &str) {
        let pushed = self.fake.push_message(self.bots[bot], chat, user, text);
        self.pushed[bot].push(pushed.update_id);
    }

    /// Records `item` as sent and waiting for its answer.
    fn sent(&mut self, chat: (usize, i64), item: Sent) {
        self.waiting.insert(chat, self.sent.len());
        self.sent.push(item);
    }

    /// Forgets the chats whose message was answered.
    fn refresh_waiting(&mut self) {
        let answered: Vec<(usize, i64)> = self
            .waiting
            .iter()
            .filter(|(_, index)| self.answers(&self.sent[**index]) > 0)
            .map(|(chat, _)| *chat)
            .collect();
        for chat in answered {
            self.waiting.remove(&chat);
        }
    }

    /// One message of the steady stream: mostly questions, some notes and reminders, each in a
    /// chat that is not waiting for an answer.
    fn push_one(&mut self) {
        self.refresh_waiting();
        let bot = self.rng.random_range(0..BOTS);
        self.next_number += 1;
        let number = self.next_number;
        let roll: f64 = self.rng.random();
        let approver_free = !self.waiting.contains_key(&(bot, APPROVER));
        if roll < 0.12 && approver_free {
            let content = if number.is_multiple_of(2) {
                "approved"
            } else {
                "denied"
            };
            self.rules.push(
                Rule::tool_call(
                    "write_file",
                    json!({
                        "path": format!("notes/n{number}.txt"),
                        "content": format!("entry {number} ({content});"),
                        "mode": "append",
                    })
                    .to_string(),
                )
                .when_last_user_contains(format!("write note #{number}.")),
            );
            self.set_script();
            self.sent((bot, APPROVER), Sent::Note { bot, number });
            self.push(bot, APPROVER, APPROVER, &format!("write note #{number}."));
        } else if roll < 0.20 && approver_free {
            let at = (Utc::now() + REMINDER_AFTER).to_rfc3339_opts(SecondsFormat::Secs, true);
            self.rules.push(
                Rule::tool_call(
                    "schedule_task",
                    json!({
                        "name": format!("reminder-{number}"),
                        "kind": "at",
                        "schedule": at,
                        "prompt": format!("reminder #{number}. is due"),
                    })
                    .to_string(),
                )
                .when_last_user_contains(format!("remind me #{number}.")),
            );
            self.set_script();
            self.sent((bot, APPROVER), Sent::Reminder { bot, number });
            self.push(bot, APPROVER, APPROVER, &format!("remind me #{number}."));
        } else {
            let chat = self.rng.random_range(ASKERS);
            if self.waiting.contains_key(&(bot, chat)) {
                return;
            }
            let text = format!("question #{number}. for {}", agent_name(bot));
            self.sent(
                (bot, chat),
                Sent::Question {
                    bot,
                    chat,
                    text: text.clone(),
                },
            );
            self.push(bot, chat, chat, &text);
        }
    }

    /// The approver presses every new approval button: notes with an odd number are denied,
    /// everything else approved.
    fn press_buttons(&mut self) {
        for bot in 0..BOTS {
            for message in self.fake.sent(self.bots[bot]) {
                if message.chat_id != APPROVER || self.pressed.contains(&(bot, message.message_id))
                {
                    continue;
                }
                let Some(nonce) = message
                    .callback_data()
                    .iter()
                    .find_map(|data| data.strip_prefix("ap:"))
                    .map(str::to_string)
                else {
                    continue;
                };
                let deny = note_number(&message).is_some_and(|number| !number.is_multiple_of(2));
                let data = if deny {
                    format!("dn:{nonce}")
                } else {
                    format!("ap:{nonce}")
                };
                self.fake.push_callback(
                    self.bots[bot],
                    APPROVER,
                    APPROVER,
                    message.message_id,
                    &data,
                );
                self.pressed.insert((bot, message.message_id));
            }
        }
    }

    /// Keeps the stream going (and the approver pressing) for `duration`.
    async fn stream_for(&mut self, duration: Duration) {
        let until = Instant::now() + duration;
        while Instant::now() < until {
            self.push_one();
            self.press_buttons();
            // A deliberate gap: the stream's pace, a few messages a second.
            let pause = self.rng.random_range(120..280);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    /// Replies in a bot's chat whose visible text contains `needle`.
    fn count(&self, bot: usize, chat: i64, needle: &str) -> usize {
        self.fake
            .sent(self.bots[bot])
            .iter()
            .filter(|message| message.chat_id == chat && message.visible_text.contains(needle))
            .count()
    }

    fn answers(&self, item: &Sent) -> usize {
        match item {
            Sent::Question { bot, chat, text } => self.count(*bot, *chat, &format!("echo: {text}")),
            Sent::Note { bot, number } => {
                self.count(*bot, APPROVER, &format!("echo: write note #{number}."))
            }
            Sent::Reminder { bot, number } => {
                self.count(*bot, APPROVER, &format!("echo: remind me #{number}."))
            }
        }
    }

    fn reminders_delivered(&self, bot: usize, number: u64) -> usize {
        self.count(bot, APPROVER, &format!("reminder #{number}. is due"))
    }

    /// Everything sent is answered, and every reminder was delivered.
    fn settled(&self) -> bool {
        self.sent.iter().all(|item| self.answers(item) > 0)
            && self.sent.iter().all(|item| match item {
                Sent::Reminder { bot, number } => self.reminders_delivered(*bot, *number) > 0,
                _ => true,
            })
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.dir.path().join("data/clawvisor.db")).unwrap()
    }
}

/// The note number an approval request is about (`notes/n<N>.txt` in its action).
fn note_number(message: &SentMessage) -> Option<u64> {
    let rest = message.visible_text.split("notes/n").nth(1)?;
    rest.split(".txt").next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_kills_lose_nothing_and_run_nothing_twice() {
    let seed = std::env::var("CLAWVISOR_CHAOS_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    let kills: usize = std::env::var("CLAWVISOR_CHAOS_KILLS")
        .ok()
        .and_then(|kills| kills.parse().ok())
        .unwrap_or(20);
    report!("chaos: seed {seed} (CLAWVISOR_CHAOS_SEED={seed} replays it), {kills} kills");
    let started = Instant::now();
    let mut chaos = Chaos::new(seed).await;
    // Kept for a post-mortem unless every check passes.
    chaos.dir.keep();
    let mut daemon = chaos.start().await;

    // Each agent gets its heartbeat (asked for, approved, then firing every few seconds).
    for bot in 0..BOTS {
        chaos.push(bot, APPROVER, APPROVER, "start the heartbeat please");
    }
    let heartbeats = |chaos: &Chaos| -> i64 {
        chaos
            .db()
            .query_row(
                "SELECT COUNT(*) FROM jobs WHERE name = 'heartbeat' AND status = 'active'",
                [],
                |row| row.get(0),
            )
            .unwrap_or(0)
    };
    wait_until(
        Duration::from_secs(60),
        "the heartbeats to be set up",
        || {
            let done = heartbeats(&chaos) >= BOTS as i64;
            if !done {
                chaos.press_buttons();
            }
            async move { done }
        },
    )
    .await;

    // The chaos: run for a random while, SIGKILL, let messages arrive while down, start again.
    let mut restart_times = Vec::new();
    for kill in 0..kills {
        let uptime = Duration::from_millis(chaos.rng.random_range(800..3_500));
        chaos.stream_for(uptime).await;
        drop(daemon.kill());
        for _ in 0..chaos.rng.random_range(0..3) {
            chaos.push_one();
        }
        // A deliberate gap: the daemon stays down a random while.
        let down = Duration::from_millis(chaos.rng.random_range(0..600));
        tokio::time::sleep(down).await;
        let restarting = Instant::now();
        daemon = chaos.start().await;
        restart_times.push(restarting.elapsed());
        report!(
            "chaos: kill {} after {uptime:?} up, {down:?} down, back in {:?}; {} messages so far",
            kill + 1,
            restarting.elapsed(),
            chaos.sent.len()
        );
    }
    let chaos_over = Instant::now();

    // Settle: everything answered, every reminder delivered.
    wait_until(SETTLE, "everything answered after the last restart", || {
        let outcome = if chaos.settled() {
            Ok(())
        } else {
            let missing: Vec<&Sent> = chaos
                .sent
                .iter()
                .filter(|item| chaos.answers(item) == 0)
                .collect();
            Err(format!(
                "not settled {SETTLE:?} after the last restart (data kept in {}); unanswered: {missing:?}",
                chaos.dir.path().display()
            ))
        };
        if outcome.is_err() {
            chaos.press_buttons();
        }
        async move { outcome }
    })
    .await;
    let settled_in = chaos_over.elapsed();
    // Let two more heartbeats fire (each heartbeat job records two more succeeded fires), then
    // look at fires due before a cut-off well in the past.
    let settled_ms = Utc::now().timestamp_millis();
    wait_until(
        Duration::from_secs(6 * HEARTBEAT_SECS as u64),
        "two more fires of every heartbeat",
        || async {
            chaos
                .db()
                .query_row(
                    "SELECT COUNT(*) FROM jobs j WHERE j.name = 'heartbeat' AND j.status = 'active' \
                     AND (SELECT COUNT(*) FROM job_runs r WHERE r.job_id = j.id \
                     AND r.status = 'succeeded' AND r.due_ms > ?1) >= 2",
                    [settled_ms],
                    |row| row.get::<_, i64>(0),
                )
                .unwrap_or(0)
                >= BOTS as i64
        },
    )
    .await;
    let cutoff_ms = Utc::now().timestamp_millis() - 3 * HEARTBEAT_SECS * 1000;
    let (status, _log) = daemon.terminate(Duration::from_secs(30)).expect("stops");
    assert!(status.success(), "a clean stop after the chaos: {status:?}");

    // --- Replies: nothing lost, at most one duplicate per kill.
    let mut lost = Vec::new();
    let mut duplicates = 0;
    for item in &chaos.sent {
        match chaos.answers(item) {
            0 => lost.push(item.clone()),
            count => duplicates += count - 1,
        }
    }
    let mut confirmed = 0;
    let mut pushed = 0;
    for bot in 0..BOTS {
        let offset = chaos
            .fake
            .confirmed_offset(chaos.bots[bot])
            .unwrap_or_default();
        pushed += chaos.pushed[bot].len();
        confirmed += chaos.pushed[bot]
            .iter()
            .filter(|update| **update < offset)
            .count();
    }

    // --- Approvals: nothing ran without a stored, approved and consumed decision; denied
    // actions never ran; approved ones ran exactly once.
    let conn = chaos.db();
    let mut statement = conn
        .prepare("SELECT details FROM audit_log WHERE action = 'tool.executed'")
        .unwrap();
    let executed: Vec<serde_json::Value> = statement
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(|details| serde_json::from_str(&details.unwrap()).unwrap())
        .collect();
    let mut unapproved = Vec::new();
    for details in &executed {
        let id = details["approval"].as_str().unwrap_or_default();
        let (status, decided_by): (Option<String>, Option<String>) = conn
            .query_row(
                "SELECT status, decided_by FROM approvals WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap_or((None, None));
        if status.as_deref() != Some("consumed") || decided_by.is_none() {
            unapproved.push(details.clone());
        }
    }
    let mut notes_wrong = Vec::new();
    let mut notes = (0, 0);
    for item in &chaos.sent {
        let Sent::Note { bot, number } = item else {
            continue;
        };
        let path = chaos.dir.path().join(format!(
            "data/workspaces/{}/notes/n{number}.txt",
            agent_name(*bot)
        ));
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        let runs = written.matches(&format!("entry {number} ")).count();
        let expected = if number.is_multiple_of(2) { 1 } else { 0 };
        if number.is_multiple_of(2) {
            notes.0 += 1;
        } else {
            notes.1 += 1;
        }
        if runs != expected {
            notes_wrong.push(format!(
                "note {number}: ran {runs} times, expected {expected}"
            ));
        }
    }

    // --- Reminders: each one's job fired once (one succeeded run) and was delivered once.
    let mut reminders_wrong = Vec::new();
    let mut reminder_count = 0;
    for item in &chaos.sent {
        let Sent::Reminder { bot, number } = item else {
            continue;
        };
        reminder_count += 1;
        let (status, succeeded, other): (String, i64, i64) = conn
            .query_row(
                "SELECT j.status, \
                 (SELECT COUNT(*) FROM job_runs r WHERE r.job_id = j.id AND r.status = 'succeeded'), \
                 (SELECT COUNT(*) FROM job_runs r WHERE r.job_id = j.id AND r.status <> 'succeeded') \
                 FROM jobs j WHERE j.agent = ?1 AND j.name = ?2",
                rusqlite::params![agent_name(*bot), format!("reminder-{number}")],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .unwrap_or_else(|error| panic!("reminder {number}: no job ({error})"));
        let delivered = chaos.reminders_delivered(*bot, *number);
        if status != "done" || succeeded != 1 || other != 0 || delivered == 0 {
            reminders_wrong.push(format!(
                "reminder {number}: job {status}, {succeeded} succeeded and {other} other fires, delivered {delivered}×"
            ));
        }
        duplicates += delivered.saturating_sub(1);
    }

    // --- Heartbeats: every fire time up to the cut-off ran exactly once, none missed.
    let mut heartbeat_wrong = Vec::new();
    let mut heartbeat_fires = 0;
    let mut heartbeat_delivered = 0;
    for bot in 0..BOTS {
        let (job, anchor_ms): (i64, i64) = conn
            .query_row(
                "SELECT id, anchor_ms FROM jobs WHERE agent = ?1 AND name = 'heartbeat'",
                [agent_name(bot)],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .expect("the heartbeat job");
        let mut statement = conn
            .prepare("SELECT fire_ms, status, attempt FROM job_runs WHERE job_id = ?1")
            .unwrap();
        let rows: Vec<(i64, String, i64)> = statement
            .query_map([job], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut succeeded: BTreeMap<i64, usize> = BTreeMap::new();
        for (fire_ms, status, attempt) in &rows {
            if status == "succeeded" {
                *succeeded.entry(*fire_ms).or_default() += 1;
            } else if *attempt == 0 || *fire_ms <= cutoff_ms && status != "failed" {
                heartbeat_wrong.push(format!(
                    "agent{bot}: fire at {fire_ms} is {status} (attempt {attempt})"
                ));
            }
        }
        let period = HEARTBEAT_SECS * 1000;
        let first = succeeded.keys().next().copied().unwrap_or(anchor_ms);
        let mut fire = first;
        while fire <= cutoff_ms {
            match succeeded.get(&fire) {
                Some(1) => {}
                Some(count) => {
                    heartbeat_wrong.push(format!("agent{bot}: fire at {fire} ran {count}×"))
                }
                None => heartbeat_wrong.push(format!("agent{bot}: fire at {fire} lost")),
            }
            fire += period;
        }
        let fires: usize = succeeded.values().sum();
        let delivered = chaos.count(bot, APPROVER, "heartbeat tick");
        let undelivered: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM outbox WHERE chat = ?1 AND delivered_ms IS NULL AND text LIKE '%heartbeat tick%'",
                [format!("tg:{APPROVER}")],
                |row| row.get(0),
            )
            .unwrap_or(0);
        heartbeat_fires += fires;
        heartbeat_delivered += delivered;
        // Every succeeded fire reached the chat, or waits in the outbox for the next start
        // (the clean stop may come between a run's end and its delivery).
        if delivered + (undelivered as usize) < fires {
            heartbeat_wrong.push(format!(
                "agent{bot}: {fires} fires succeeded but {delivered} reached the chat ({undelivered} waiting)"
            ));
        }
        duplicates += delivered.saturating_sub(fires);
    }

    // --- The audit chain and the database file.
    let verify = std::process::Command::new(BINARY)
        .args([
            "--config",
            &chaos
                .dir
                .path()
                .join("clawvisor.toml")
                .display()
                .to_string(),
            "audit",
            "verify",
        ])
        .envs(&chaos.env)
        .output()
        .unwrap();
    let verify_out = String::from_utf8_lossy(&verify.stdout).trim().to_string();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    let approvals_total: i64 = conn
        .query_row("SELECT COUNT(*) FROM approvals", [], |row| row.get(0))
        .unwrap();
    let restart_ms: Vec<u128> = {
        let mut ms: Vec<u128> = restart_times.iter().map(Duration::as_millis).collect();
        ms.sort_unstable();
        ms
    };

    let questions = chaos
        .sent
        .iter()
        .filter(|item| matches!(item, Sent::Question { .. }))
        .count();
    report!(
        "chaos: {kills} SIGKILLs over {:?}; settled {settled_in:?} after the last restart",
        chaos_over - started
    );
    report!(
        "chaos: restart to 'up' p50 {} ms, max {} ms",
        restart_ms[restart_ms.len() / 2],
        restart_ms.last().unwrap()
    );
    report!(
        "chaos: updates pushed {pushed}, confirmed by the daemon {confirmed}; messages {} ({questions} questions, {} notes, {reminder_count} reminders); answered {}; lost {}; duplicate replies {duplicates} (budget {kills})",
        chaos.sent.len(),
        notes.0 + notes.1,
        chaos.sent.len() - lost.len(),
        lost.len()
    );
    report!(
        "chaos: approvals {approvals_total}; executed tool calls {}; executed without a stored consumed approval {}; notes approved {} / denied {}, wrong {}",
        executed.len(),
        unapproved.len(),
        notes.0,
        notes.1,
        notes_wrong.len()
    );
    report!(
        "chaos: reminders {reminder_count}, wrong {}; heartbeat fires {heartbeat_fires} (delivered {heartbeat_delivered}), lost or doubled {}",
        reminders_wrong.len(),
        heartbeat_wrong.len()
    );
    report!("chaos: {verify_out}; integrity_check {integrity}");

    let failed = !lost.is_empty()
        || duplicates > kills
        || confirmed != pushed
        || !unapproved.is_empty()
        || !notes_wrong.is_empty()
        || !reminders_wrong.is_empty()
        || !heartbeat_wrong.is_empty()
        || !verify.status.success()
        || integrity != "ok";
    if failed {
        report!("chaos: data kept in {}", chaos.dir.path().display());
    } else {
        let _ = std::fs::remove_dir_all(chaos.dir.path());
    }
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert!(
        duplicates <= kills,
        "{duplicates} duplicates for {kills} kills"
    );
    assert_eq!(confirmed, pushed, "every update was confirmed");
    assert!(
        unapproved.is_empty(),
        "ran without approval: {unapproved:?}"
    );
    assert!(notes_wrong.is_empty(), "{notes_wrong:?}");
    assert!(reminders_wrong.is_empty(), "{reminders_wrong:?}");
    assert!(heartbeat_wrong.is_empty(), "{heartbeat_wrong:?}");
    assert!(
        verify.status.success() && verify_out.contains("valid"),
        "{verify_out}"
    );
    assert_eq!(integrity, "ok");
}

/// The burst under a memory cap: chats of two bots, one message each, all pushed at once.
const BURST_CHATS: i64 = 250;
const BURST_BOTS: usize = 2;
/// Address space the capped daemon may use beyond the highest it reserved up to idle (a tight
/// `MemoryMax=` or a small VPS). Before issue #30 the burst took 40 MiB more and aborted.
const CAP_HEADROOM_MIB: u64 = 24;
/// Replies that may repeat after the deliberate kill: sends Telegram accepted whose record the
/// kill cut off. Replies come from at most `[sessions] max_model_calls` (8) runs at a time.
const BURST_DUPLICATE_BUDGET: usize = 8;
/// How long the scripted model takes to answer: slow enough that, without a bound, hundreds of
/// runs would be waiting on it at once.
const BURST_MODEL_DELAY: Duration = Duration::from_millis(400);

/// The chat of the crashed run `crashed_run` leaves behind (not one of the burst's).
const CRASHED_CHAT: i64 = 4_999;

/// Writes, into the stopped daemon's database, what a run that crashed before its notice was
/// queued left behind (as versions before issue #30 recorded a crash): two updates of `chat`
/// to the first agent, `dispatched`, claimed by a failed run with no outbox row.
fn crashed_run(db: &std::path::Path, chat: i64) {
    use clawvisor::store::runs::{self, RunStatus};
    use clawvisor::store::sessions::{self, EventKindRow, NewEvent};
    use clawvisor::store::telegram::{self, NewUpdate, UpdateStatus};
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let now = Utc::now().timestamp_millis();
    let update = |update_id| NewUpdate {
        update_id,
        kind: "message".into(),
        chat_id: Some(chat),
        thread_id: None,
        user_id: Some(chat),
        payload: "{}".into(),
        sent_ms: Some(now),
    };
    let (agent, key) = (agent_name(0), format!("tg:{chat}"));
    // A bot id of its own: these update ids mean nothing to the fake's bots.
    let stored = telegram::store_batch(&conn, 1, &agent, &[update(1), update(2)], now).unwrap();
    let session = sessions::active_or_create(&conn, &agent, &key, now).unwrap();
    let run = runs::create(&conn, session.id, &agent, &key, "message", None, now).unwrap();
    for row in &stored {
        telegram::set_status(&conn, row.id, UpdateStatus::Dispatched, None, now).unwrap();
        let event = NewEvent {
            kind: EventKindRow::User,
            sender: Some("Crash"),
            content: "before the crash",
            data: None,
            run_id: None,
            inbound_id: Some(row.id),
        };
        let id = sessions::append(&conn, session.id, &event, now)
            .unwrap()
            .expect("a new event");
        sessions::claim_events(&conn, &[id], run).unwrap();
    }
    runs::finish(&conn, run, RunStatus::Failed, "crashed", now).unwrap();
}

/// Whether `prlimit` (util-linux) is there to cap the daemon.
fn prlimit_available() -> bool {
    std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// A 500-message burst (250 private chats of each of two bots, a model that takes 400 ms) to the
/// real binary under an address-space cap 24 MiB above its idle reservation, like a small VPS or a tight
/// `MemoryMax=`: it is SIGKILLed once a third is answered (runs in flight, updates stored and
/// dispatched, replies in the outbox) and started again under the same cap, as systemd would.
/// While it is down, the database gets a run that crashed before its notice was queued (the
/// state that stayed `dispatched` forever). The daemon must slow down rather than abort (no
/// crash at all, so no crash loop), answer every message, send the crashed run's notice once,
/// repeat at most the sends the kill cut off, and leave no update `pending` or `dispatched`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_under_a_memory_cap_slows_down_and_loses_nothing() {
    if !prlimit_available() {
        report!("chaos (memory cap): skipped: `prlimit` (util-linux) is not installed");
        return;
    }
    let started = Instant::now();
    let dir = ScratchDir::new("clawvisor-chaos-memory").unwrap();
    let users: Vec<i64> = (0..BURST_CHATS).map(|chat| 5_000 + chat).collect();
    let mut builder = World::builder(Script::new().rule(Rule::echo().delay(BURST_MODEL_DELAY)))
        .config_extra("[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"");
    for bot in 0..BURST_BOTS {
        let name = agent_name(bot);
        builder = builder.agent_with_bot(
            &name,
            "",
            &format!("{}:AAH-burst-token-{name}-0123456789", 900 + bot),
            &users,
            &[],
        );
    }
    let Staged {
        fake,
        llm: _llm,
        bots,
        env,
    } = builder.stage(dir.path()).await;
    let bots: Vec<BotId> = bots.iter().map(|bot| bot.id).collect();
    let start = |cap: Option<u64>| {
        let (dir, env) = (dir.path().to_path_buf(), env.clone());
        tokio::task::spawn_blocking(move || match cap {
            Some(cap) => DaemonProcess::start_capped(BINARY, &dir, &env, cap),
            None => DaemonProcess::start(BINARY, &dir, &env),
        })
    };

    // The idle reservation, uncapped: up, every bot polling.
    let daemon = start(None).await.unwrap().expect("the daemon starts");
    for bot in &bots {
        assert!(fake.wait_for_poll(*bot, Duration::from_secs(20)).await);
    }
    let idle_peak_kib = daemon.status_kib("VmPeak").expect("/proc/<pid>/status");
    daemon.terminate(Duration::from_secs(30)).expect("stops");
    let cap = (idle_peak_kib + CAP_HEADROOM_MIB * 1024) * 1024;
    report!(
        "chaos (memory cap): idle VmPeak {:.1} MiB; cap {:.1} MiB",
        idle_peak_kib as f64 / 1024.0,
        cap as f64 / 1024.0 / 1024.0
    );

    let mut daemon = start(Some(cap))
        .await
        .unwrap()
        .expect("starts under the cap");
    for bot in &bots {
        assert!(fake.wait_for_poll(*bot, Duration::from_secs(20)).await);
    }
    let burst = Instant::now();
    for bot in &bots {
        for user in &users {
            fake.push_message(*bot, *user, *user, &format!("burst #{user}."));
        }
    }
    let answers = |bot: usize, user: i64| {
        let needle = format!("echo: burst #{user}.");
        fake.sent(bots[bot])
            .iter()
            .filter(|message| message.chat_id == user && message.visible_text.contains(&needle))
            .count()
    };
    let answered = || {
        (0..BURST_BOTS)
            .map(|bot| users.iter().filter(|user| answers(bot, **user) > 0).count())
            .sum::<usize>()
    };
    let total = BURST_BOTS * users.len();
    let mut crashes: Vec<String> = Vec::new();
    let mut killed = false;
    let (mut vm_peak, mut rss_peak) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        vm_peak = vm_peak.max(daemon.status_kib("VmPeak").unwrap_or(0));
        rss_peak = rss_peak.max(daemon.status_kib("VmHWM").unwrap_or(0));
        if let Some(status) = daemon.exited() {
            // Restarted as systemd would; a crash fails the test below.
            daemon.drain();
            let cause = daemon
                .log
                .iter()
                .rev()
                .find(|line| line.contains("memory") || line.contains("panick"))
                .cloned()
                .unwrap_or_default();
            crashes.push(format!("{status}: {cause}"));
            daemon = start(Some(cap)).await.unwrap().expect("starts again");
        }
        let done = answered();
        if done == total || Instant::now() > deadline {
            break;
        }
        if !killed && done * 3 >= total {
            // The kill point: a third answered, the rest stored, dispatched or in runs.
            killed = true;
            drop(daemon.kill());
            // While it is down: a run that crashed before its notice was queued, as the issue's
            // crash loop left 14 of them (`dispatched` forever before #30).
            crashed_run(&dir.path().join("data/clawvisor.db"), CRASHED_CHAT);
            daemon = start(Some(cap))
                .await
                .unwrap()
                .expect("starts after the kill");
        }
        // A polling interval for the figures above, not a wait for a state.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answered_in = burst.elapsed();
    wait_until(
        Duration::from_secs(30),
        "the crashed run's notice",
        || async {
            fake.sent(bots[0])
                .iter()
                .any(|message| message.chat_id == CRASHED_CHAT)
        },
    )
    .await;
    let left = |store: &rusqlite::Connection| -> i64 {
        store
            .query_row(
                "SELECT COUNT(*) FROM inbound_updates WHERE status IN ('pending', 'dispatched')",
                [],
                |row| row.get(0),
            )
            .unwrap_or(-1)
    };
    let db = dir.path().join("data/clawvisor.db");
    wait_until(
        Duration::from_secs(30),
        "no update left pending or dispatched",
        || async { left(&rusqlite::Connection::open(&db).unwrap()) == 0 },
    )
    .await;
    vm_peak = vm_peak.max(daemon.status_kib("VmPeak").unwrap_or(0));
    rss_peak = rss_peak.max(daemon.status_kib("VmHWM").unwrap_or(0));
    let (status, _log) = daemon.terminate(Duration::from_secs(30)).expect("stops");

    let mut lost = Vec::new();
    let mut duplicates = 0;
    for bot in 0..BURST_BOTS {
        for user in &users {
            match answers(bot, *user) {
                0 => lost.push((bot, *user)),
                count => duplicates += count - 1,
            }
        }
    }
    let crash_notices = fake
        .sent(bots[0])
        .iter()
        .filter(|message| message.chat_id == CRASHED_CHAT)
        .count();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stuck = left(&conn);
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    report!(
        "chaos (memory cap): {total} messages answered in {answered_in:?} (1 kill, {} crashes); lost {}; duplicates {duplicates}; crashed run's notice sent {crash_notices}×; left pending/dispatched {stuck}; peak VmSize {:.1} MiB, peak RSS {:.1} MiB; whole case {:?}",
        crashes.len(),
        lost.len(),
        vm_peak as f64 / 1024.0,
        rss_peak as f64 / 1024.0,
        started.elapsed()
    );
    assert!(crashes.is_empty(), "crashed under the cap: {crashes:?}");
    assert_eq!(crash_notices, 1, "the crashed run's updates get one notice");
    assert!(lost.is_empty(), "unanswered (bot, chat): {lost:?}");
    assert!(
        duplicates <= BURST_DUPLICATE_BUDGET,
        "{duplicates} duplicate replies"
    );
    assert_eq!(stuck, 0, "updates left pending or dispatched");
    assert!(status.success(), "a clean stop: {status:?}");
    assert_eq!(integrity, "ok");
}
