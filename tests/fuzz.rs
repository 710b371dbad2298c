//! Bad-input fuzzing (issue #11): one proptest target per input surface, each driving the entry
//! point the daemon itself uses, with inputs grown from valid samples — keys swapped, removed and
//! retyped, quoting and operators shuffled, markup nested and left open, unicode that changes
//! length when case-folded — and checked for more than "does not panic".
//!
//! | target | entry point | beyond "no panic" |
//! |---|---|---|
//! | `config` | `config::load_in` (what `serve` and `config check` call), files in a temp dir | an error names its file (or variable, or flag) and key; an accepted config's durations fit the clock arithmetic the daemon does with them; boot-time derived values compute |
//! | `telegram` | `telegram::intake::read` on stored update JSON, `intake::summary` | deterministic; the poller's re-serialised payload reads the same; commands and text well-formed |
//! | `forum_topics` | `telegram::intake::read` and `intake::topic` on messages with `message_thread_id`, `is_topic_message`, `is_forum` of any shape | the `telegram` properties; a topic only for a topic message with a positive thread id; its chat key round-trips and names the chat and the topic |
//! | `classifier` | `policy::shell::classify_shell`, `policy::paths::classify_file_access`, `policy::mcp::classify_mcp` | deterministic; reasons explain the level; an L3 part makes the whole command L3 and no part is ever lowered by its neighbours; quoting a literal word does not change the verdict; file levels grow read ≤ write ≤ delete |
//! | `cron` | `schedule::ScheduleSpec::parse`, `next_after`, `preview`, `MissedPolicy::resolve` | next time after the given one and consistent from any instant before it; previews increase; no "internal error" translation; missed runs lie between due and now |
//! | `format` | `telegram::format::markdown_to_html`, `split_html` | only Telegram's tags, balanced, escaped; each part ≤ the limit in UTF-16 units, balanced and non-blank; no visible text lost |
//! | `studio` | `studio::router` of a real in-process daemon, called with `tower::ServiceExt::oneshot` | no 5xx; every API error is `{"error": {"message": "..."}}` as JSON; every API success is JSON (or an event stream); no request hangs |
//! | `timezone` | `schedule::parse_timezone` (`/timezone`, Studio, the schedule tools) and `config::load_in` with the name as the daemon's and an agent's `timezone` | an accepted name is canonical and reads back; a refusal echoes bounded input and every zone it proposes exists; the config accepts a name exactly when `parse_timezone` does (blank: not set) and refuses it naming the file and `timezone` |
//! | `voice` | `telegram::intake::read` on voice-note and document updates, then `voice::agent_text` and `voice::user_notice` | deterministic; a voice note is a `Voice` file with the update's duration; every outcome tells the agent it is a voice note and gives the user a sentence |
//! | `transcription` | `voice::transcribe::parse_answer` on what a transcription server answers | deterministic; a transcript is exactly the trimmed `text` string, anything else an error saying why |
//! | `claim_code` | `people::parse_start_argument` on what follows `/start` (unicode, huge, empty) | deterministic; a code is 8 characters of the code alphabet and reads back from its displayed and lower-case forms; blank is no code; an over-long word never is |
//! | `send_file` | the `send_file` tool in a Telegram chat, on a real store and workspace; `send_file::choose_kind` | a success queued exactly one outbox row and one spool copy equal to the workspace file, a photo is an image within 10 MB, every file within 50 MB; a failure queued and copied nothing and says why |
//! | `prices` | `llm::prices::Prices::price` / `cost` and `candidate_names` on any model name | deterministic; never a negative or non-finite cost; `[pricing]` wins over the built-in table; a free provider's model costs nothing |
//! | `pdf_streams` | `tools::documents` (the bounded inflation check, then extraction) on PDFs with arbitrary stream dictionaries and data | no panic; a stream that inflates past the cap is refused before extraction; every answer is text or a sentence saying why not |
//! | `job_checks` | `protocol::scheduler::NewJob::into_row` (the checks the scheduler and `clawvisor jobs add` share) on schedules, prompts, names and targets | an accepted job is active, of a known kind, next fire in the future, a valid zone, a trimmed non-empty prompt and a bounded name; a refusal says why |
//! | `backup_archive` | `backup::restore` verification on arbitrary bytes and on damaged real archives (cuts, bit flips, inserted bytes) | no panic; nothing written; an archive that still verifies carries the original manifest |
//! | `reload_settings_comparison` | `reload` planning on every pair of config files in the corpus | no panic; the settings named as needing a restart are exactly those that differ |
//! | `signal_events` | `signal::sse::SseDecoder` and `signal::link::read_event` (the Signal link's reader) on signal-cli event streams: mutated `receive` objects framed with any line ending, raw bytes | no panic; the same events however the bytes are chunked; a message has a sender, a positive timestamp and a dedupe key naming account and timestamp, a direct message is addressed; anything else is ignored with a reason or unreadable with a sentence naming the field |
//! | `trigger_endpoint` | `triggers::authenticate`, `delivery_id` and `prompt` (what `POST /hooks/trigger/{name}` decides) on any headers and body | deterministic; authenticated exactly by the body's HMAC or the exact bearer secret, never with an empty secret; a delivery id is a bounded printable header or the body's hash; the body sits in exactly one untrusted wrapper |
//! | `mcp_startup_wait` | `[mcp] startup_wait` as `config::load_in` reads it, then as the MCP supervisor turns it into a deadline | no panic; a value is accepted within its bound (at most 10 minutes) or refused with a message naming the key |
//! | `whatsapp_webhook` | `whatsapp::webhook::parse` (what `/hooks/whatsapp` reads after the signature), `whatsapp::client::parse_message`, then `store::channels::store_inbound` in one transaction on a real store | deterministic; a refusal names the field (or says it is not JSON) and nothing is stored; every accepted message has an id, a digits-only sender and its own object as payload; a body stores whole and a redelivery stores nothing |
//! | `browser_proxy` | the browser's egress proxy (`browser::proxy::EgressProxy`, real, on loopback) on any bytes, and `browser::proxy::target_of` on any request line (`tests/fuzz/browser_proxy.rs`) | every answer an HTTP status line or a closed connection, never a hang; a private listener no `allow_private` entry names is never reached (kept-alive second requests, mapped IPv6, user-info authorities); the proxy answers afterwards; an accepted target has a host and a non-zero port |
//! | `local_embeddings` | `memory::local::model::SentenceModel::load` on a model directory with a mangled `config.json` or `tokenizer.json`, and `embed_batch` on any text (`tests/fuzz/local_embeddings.rs`) | no panic; a refusal names the file that is wrong; a model that loads embeds a padded batch into finite vectors of its dimension or says why not; any text gives one finite unit vector |
//!
//! Every run first replays the committed corpus, `tests/fuzz_corpus/<target>/` (one input per
//! file: the valid samples the strategies mutate, interesting inputs, and every input that once
//! failed), through the same property, then runs the generated cases. A failing generated case is
//! shrunk and its seed saved in `tests/fuzz_corpus/proptest-regressions/<target>.txt`, which is
//! replayed first on the next run; also add the shrunk input to the corpus as a file, since a seed
//! reproduces its input only while the strategy stays the same.
//!
//! Generated cases per run: config 300, telegram 400, classifier 500 mutated commands + 300
//! composed ones + 300 file accesses (and every MCP combination), cron 300, format 300, studio
//! 250, forum_topics 400, timezone 300 names + 60 config loads, voice 300, transcription 300,
//! send_file (see its target), claim_code 500, prices 500, pdf_streams
//! 200, signal_events 300, browser_proxy 200 byte streams + 300 request lines, local_embeddings 16 texts + 16 configs + 8 tokenizers — `cargo test --test fuzz` takes a few seconds. For a longer local run set
//! `CLAWVISOR_FUZZ_CASES` (every target then runs that many), e.g.
//! `CLAWVISOR_FUZZ_CASES=20000 cargo test --release --test fuzz`; `PROPTEST_RNG_SEED=<n>` fixes
//! the seed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{
    Config as ProptestConfig, FileFailurePersistence, TestCaseError, TestRunner,
};

// ---------------------------------------------------------------------------------------------
// Shared machinery: case counts, the corpus, the runner.
// ---------------------------------------------------------------------------------------------

/// Cases per target: `CLAWVISOR_FUZZ_CASES`, else the target's default.
fn fuzz_cases(default: u32) -> u32 {
    match std::env::var("CLAWVISOR_FUZZ_CASES") {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| {
            panic!("CLAWVISOR_FUZZ_CASES must be a whole number, not `{text}`")
        }),
        Err(_) => default,
    }
}

/// A runner whose failures are persisted at `regressions` (relative to the package root, where
/// `cargo test` runs).
fn runner(regressions: &'static str, default_cases: u32) -> TestRunner {
    let config = ProptestConfig {
        cases: fuzz_cases(default_cases),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        // A failing case of a slow target should not shrink for minutes.
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    };
    TestRunner::new(config)
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_corpus")
        .join(target)
}

/// Every corpus file of `target`, sorted by name: (file name, content).
fn corpus(target: &str) -> Vec<(String, String)> {
    let dir = corpus_dir(target);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.expect("a readable corpus entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path
                .file_name()
                .expect("a file has a name")
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            (name, text)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no corpus", dir.display());
    files
}

/// Runs `check` on every corpus input of `target` (all of them, then reports every failure).
fn replay<T>(
    target: &str,
    parse: impl Fn(&str) -> T,
    check: impl Fn(&T) -> Result<(), TestCaseError>,
) {
    let mut failures = Vec::new();
    for (name, text) in corpus(target) {
        let input = parse(&text);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&input)));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(error)) => failures.push(format!("{target}/{name}: {error}")),
            Err(panic) => failures.push(format!(
                "{target}/{name}: panicked: {}",
                panic_text(panic.as_ref())
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "corpus inputs fail:\n{}",
        failures.join("\n")
    );
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(not a string)".into())
}

/// Runs the generated cases; a failure panics with the shrunk input.
fn run<S: Strategy>(
    mut runner: TestRunner,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    if let Err(error) = runner.run(&strategy, check) {
        panic!("{error}");
    }
}

/// A position in a text, moved back to a character boundary.
fn boundary(text: &str, at: Index) -> usize {
    let mut position = at.index(text.len() + 1);
    while !text.is_char_boundary(position) {
        position -= 1;
    }
    position
}

/// A text-level edit, for inputs that should also be broken below their syntax.
#[derive(Debug, Clone)]
enum TextEdit {
    Insert(Index, String),
    Delete(Index, usize),
    Truncate(Index),
    /// Repeats the text from a position to the end.
    Duplicate(Index),
}

impl TextEdit {
    fn apply(&self, text: &mut String) {
        match self {
            TextEdit::Insert(at, snippet) => {
                let position = boundary(text, *at);
                text.insert_str(position, snippet);
            }
            TextEdit::Delete(at, length) => {
                let start = boundary(text, *at);
                let mut end = (start + length).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                text.replace_range(start..end, "");
            }
            TextEdit::Truncate(at) => {
                let position = boundary(text, *at);
                text.truncate(position);
            }
            TextEdit::Duplicate(at) => {
                let position = boundary(text, *at);
                let tail = text[position..].to_string();
                text.push_str(&tail);
            }
        }
    }
}

fn text_edit(snippets: impl Strategy<Value = String> + Clone) -> impl Strategy<Value = TextEdit> {
    prop_oneof![
        4 => (any::<Index>(), snippets).prop_map(|(at, snippet)| TextEdit::Insert(at, snippet)),
        2 => (any::<Index>(), 1usize..12).prop_map(|(at, length)| TextEdit::Delete(at, length)),
        1 => any::<Index>().prop_map(TextEdit::Truncate),
        1 => any::<Index>().prop_map(TextEdit::Duplicate),
    ]
}

/// Characters that change length or script when case-folded or counted in UTF-16, joiners,
/// controls: the unicode that breaks byte-offset arithmetic.
const TRICKY_CHARACTERS: &[&str] = &[
    "\u{212A}", // KELVIN SIGN: lowercases to ASCII `k`, three bytes long
    "\u{0130}", // İ: lowercases to two characters
    "ß",
    "ẞ",
    "ﬁ",
    "Σ",
    "é",
    "e\u{0301}",
    "👍🏽",
    "👨\u{200D}👩\u{200D}👧",
    "🇩🇪",
    "\u{200D}",
    "\u{FE0F}",
    "\u{200B}",
    "\u{202E}",
    "\u{FEFF}",
    "𝕏",
    "中文",
    "。",
    "\u{0}",
    "\u{7F}",
    "\r\n",
    "\t",
];

fn tricky_text() -> impl Strategy<Value = String> + Clone {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(TRICKY_CHARACTERS).prop_map(str::to_string),
            "[a-zA-Z0-9 ]{1,6}",
            "\\PC{1,4}",
        ],
        0..6,
    )
    .prop_map(|pieces| pieces.concat())
}

// ---------------------------------------------------------------------------------------------
// Target: config — the daemon's config file, agent files, environment and flags.
// ---------------------------------------------------------------------------------------------

mod config_target {
    use super::*;

    use clawvisor::config::{self, ConfigError, LoadedConfig, LogFormat, Overrides};
    use toml::{Table, Value};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/config.txt";

    /// One loading attempt: files (relative to a fresh directory), environment and flags.
    #[derive(Debug, Clone, Default)]
    pub struct ConfigCase {
        /// `clawvisor.toml` is passed as `--config`; `actors/*.toml` are the agents.
        pub files: Vec<(String, String)>,
        pub env: Vec<(String, String)>,
        /// `data_dir`, `studio_bind`, `actors_dir`, `log_level`, `log_format`.
        pub flags: Vec<(String, String)>,
    }

    /// Reads a corpus file: sections introduced by `--- <file name>`, `--- env` or `--- flags`
    /// (the last two hold `NAME=value` lines).
    pub fn parse_case(text: &str) -> ConfigCase {
        let mut case = ConfigCase::default();
        let mut sections: Vec<(String, String)> = Vec::new();
        for line in text.split_inclusive('\n') {
            if let Some(name) = line.strip_prefix("--- ") {
                sections.push((name.trim().to_string(), String::new()));
            } else if let Some((_, body)) = sections.last_mut() {
                body.push_str(line);
            }
        }
        for (name, body) in sections {
            let pairs = || {
                body.lines()
                    .filter_map(|line| line.split_once('='))
                    .map(|(key, value)| (key.to_string(), value.to_string()))
                    .collect::<Vec<_>>()
            };
            match name.as_str() {
                "env" => case.env = pairs(),
                "flags" => case.flags = pairs(),
                _ => case.files.push((name, body)),
            }
        }
        case
    }

    fn write_case(case: &ConfigCase, dir: &Path) {
        std::fs::create_dir_all(dir.join("actors")).expect("temp dir");
        for (name, text) in &case.files {
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("temp dir");
            }
            std::fs::write(&path, text).expect("temp file");
        }
    }

    fn overrides(case: &ConfigCase, dir: &Path) -> Overrides {
        let mut overrides = Overrides {
            config: case
                .files
                .iter()
                .any(|(name, _)| name == "clawvisor.toml")
                .then(|| dir.join("clawvisor.toml")),
            ..Overrides::default()
        };
        for (flag, value) in &case.flags {
            match flag.as_str() {
                "data_dir" => overrides.data_dir = Some(PathBuf::from(value)),
                "studio_bind" => overrides.studio_bind = Some(value.clone()),
                "actors_dir" => overrides.actors_dir = Some(PathBuf::from(value)),
                "log_level" => overrides.log_level = Some(value.clone()),
                "log_format" => {
                    overrides.log_format = match value.as_str() {
                        "json" => Some(LogFormat::Json),
                        _ => Some(LogFormat::Text),
                    }
                }
                _ => {}
            }
        }
        overrides
    }

    /// The property: loading never panics; an error names where and what; an accepted config
    /// is one the daemon can run with.
    pub fn check(case: &ConfigCase) -> Result<(), TestCaseError> {
        let dir = tempfile::tempdir().expect("temp dir");
        write_case(case, dir.path());
        let env: BTreeMap<String, String> = case.env.iter().cloned().collect();
        let result = config::load_in(&overrides(case, dir.path()), env, dir.path());
        match result {
            Ok(loaded) => check_loaded(&loaded),
            Err(error) => check_error(&error, dir.path(), case),
        }
    }

    fn check_error(
        error: &ConfigError,
        dir: &Path,
        case: &ConfigCase,
    ) -> Result<(), TestCaseError> {
        let text = error.to_string();
        // A file under a directory a flag or variable named (`--data-dir /dev/zero` makes the
        // secrets store `/dev/zero/secrets.toml`, which cannot be read) is named as that path.
        let given: Vec<&str> = case
            .flags
            .iter()
            .chain(&case.env)
            .map(|(_, value)| value.as_str())
            .filter(|value| value.starts_with('/'))
            .collect();
        let names_a_place = |origin: &str| {
            origin.contains(&*dir.to_string_lossy())
                || given.iter().any(|value| origin.starts_with(value))
                || origin.starts_with("environment variable CLAWVISOR_")
                || origin.starts_with("command-line flag --")
                || origin.starts_with("built-in ")
        };
        match error {
            ConfigError::Key {
                origin,
                key,
                message,
            } => {
                prop_assert!(names_a_place(origin), "no file named: {text}");
                prop_assert!(!key.trim().is_empty(), "no key named: {text}");
                prop_assert!(!message.trim().is_empty(), "nothing said: {text}");
            }
            ConfigError::File { origin, message } => {
                prop_assert!(names_a_place(origin), "no file named: {text}");
                prop_assert!(!message.trim().is_empty(), "nothing said: {text}");
            }
        }
        Ok(())
    }

    /// `duration` can be added to now as an `Instant` and as epoch milliseconds, as the daemon
    /// does with approval deadlines, the stale-update grace and retry times.
    fn fits_the_clock(duration: Duration) -> bool {
        let now_ms = clawvisor::clock::now_ms();
        std::time::Instant::now().checked_add(duration).is_some()
            && tokio::time::Instant::now().checked_add(duration).is_some()
            && i64::try_from(duration.as_millis())
                .ok()
                .and_then(|ms| now_ms.checked_add(ms))
                .is_some()
    }

    fn check_loaded(loaded: &LoadedConfig) -> Result<(), TestCaseError> {
        let config = &loaded.config;
        let mut durations = vec![
            ("[supervision].window", config.supervision.window),
            ("[supervision].backoff_min", config.supervision.backoff_min),
            ("[supervision].backoff_max", config.supervision.backoff_max),
            ("[supervision].reset_after", config.supervision.reset_after),
            ("[shutdown].timeout", config.shutdown.timeout),
            ("[store].busy_timeout", config.store.busy_timeout),
            ("[telegram].boot_stagger", config.telegram.boot_stagger),
            ("[telegram].poll_timeout", config.telegram.poll_timeout),
            ("[telegram].stale_grace", config.telegram.stale_grace),
            (
                "[telegram].wait_for_previous",
                config.telegram.wait_for_previous,
            ),
            ("[telegram].degraded_retry", config.telegram.degraded_retry),
            ("[scheduler].late_grace", config.scheduler.late_grace),
            ("[scheduler].max_sleep", config.scheduler.max_sleep),
            ("[scheduler].min_interval", config.scheduler.min_interval),
            ("[scheduler].run_timeout", config.scheduler.run_timeout),
            ("[tools].web_fetch_timeout", config.tools.web_fetch_timeout),
            ("[tools].shell_timeout", config.tools.shell_timeout),
            ("[sessions].idle_stop", config.sessions.idle_stop),
            ("[mcp].connect_timeout", config.mcp.connect_timeout),
            ("[mcp].ping_every", config.mcp.ping_every),
            ("[mcp].degraded_retry", config.mcp.degraded_retry),
        ];
        for backoff in &config.scheduler.retry_backoff {
            durations.push(("[scheduler].retry_backoff", *backoff));
        }
        for server in &config.mcp.servers {
            durations.push(("[[mcp.servers]].timeout", server.timeout));
        }
        for provider in config.providers.values() {
            durations.push(("[providers.*].timeout", provider.timeout));
        }
        for agent in &loaded.agents {
            durations.push(("approval_ttl", agent.approval_ttl));
        }
        for (key, duration) in durations {
            prop_assert!(
                fits_the_clock(duration.0),
                "{key} = {duration} was accepted but overflows the clock arithmetic"
            );
        }

        // What boot derives from the config.
        let policy = config.supervision.policy();
        for attempt in [0, 1, 2, 5, 10, 30, 64, 1_000, u32::MAX] {
            let delay = policy.base_delay(attempt);
            prop_assert!(delay <= config.supervision.backoff_max.0.max(policy.backoff_min));
        }
        let _ = clawvisor::agent::RuntimeLimits::from(config);
        let _ = clawvisor::tool::ToolSettings::from_config(config, true);
        let _ = clawvisor::store::StoreOptions::from(config);
        let _ = config.studio_addr();
        let _ = config.db_path();

        // Agents refer only to what exists.
        let mut names = std::collections::BTreeSet::new();
        for agent in &loaded.agents {
            prop_assert!(names.insert(agent.name.clone()), "duplicate {}", agent.name);
            prop_assert!(config.providers.contains_key(&agent.provider));
            for fallback in &agent.fallback {
                prop_assert!(config.providers.contains_key(&fallback.provider));
            }
            let _ = agent.telegram_people();
            let _ = agent.autonomy.turn_limit();
        }
        for agent in &loaded.agents {
            for delegate in agent.delegates(&loaded.agents) {
                prop_assert!(names.contains(&delegate), "unknown delegate {delegate}");
            }
        }
        Ok(())
    }

    // --- Strategies ---------------------------------------------------------------------------

    /// A step of a path into a TOML document.
    #[derive(Debug, Clone, PartialEq)]
    enum Step {
        Key(String),
        Item(usize),
    }

    /// Every path to a value in `table` (tables and arrays included).
    fn paths(table: &Table) -> Vec<Vec<Step>> {
        fn walk(value: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
            out.push(path.clone());
            match value {
                Value::Table(table) => {
                    for (key, inner) in table {
                        path.push(Step::Key(key.clone()));
                        walk(inner, path, out);
                        path.pop();
                    }
                }
                Value::Array(items) => {
                    for (index, inner) in items.iter().enumerate() {
                        path.push(Step::Item(index));
                        walk(inner, path, out);
                        path.pop();
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&Value::Table(table.clone()), &mut Vec::new(), &mut out);
        out.retain(|path| !path.is_empty());
        out
    }

    /// Sets `path` to `value`, creating (or replacing with) the tables and arrays on the way.
    fn set(target: &mut Value, path: &[Step], value: Value) {
        let Some((first, rest)) = path.split_first() else {
            *target = value;
            return;
        };
        match first {
            Step::Key(key) => {
                if !target.is_table() {
                    *target = Value::Table(Table::new());
                }
                if let Value::Table(table) = target {
                    let entry = table
                        .entry(key.clone())
                        .or_insert_with(|| Value::Table(Table::new()));
                    set(entry, rest, value);
                }
            }
            Step::Item(index) => {
                if !target.is_array() {
                    *target = Value::Array(Vec::new());
                }
                if let Value::Array(items) = target {
                    while items.len() <= *index {
                        items.push(Value::Table(Table::new()));
                    }
                    set(&mut items[*index], rest, value);
                }
            }
        }
    }

    /// The value at `path` (an empty table when there is none).
    fn lookup(table: &Table, path: &[Step]) -> Value {
        let mut current = Value::Table(table.clone());
        for step in path {
            let next = match (&current, step) {
                (Value::Table(inner), Step::Key(key)) => inner.get(key).cloned(),
                (Value::Array(items), Step::Item(index)) => items.get(*index).cloned(),
                _ => None,
            };
            match next {
                Some(next) => current = next,
                None => return Value::Table(Table::new()),
            }
        }
        current
    }

    /// Removes the value at `path`, if there is one.
    fn remove(target: &mut Value, path: &[Step]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        match (target, first) {
            (Value::Table(table), Step::Key(key)) if rest.is_empty() => {
                table.remove(key);
            }
            (Value::Array(items), Step::Item(index)) if rest.is_empty() && *index < items.len() => {
                items.remove(*index);
            }
            (Value::Table(table), Step::Key(key)) => {
                if let Some(inner) = table.get_mut(key) {
                    remove(inner, rest);
                }
            }
            (Value::Array(items), Step::Item(index)) => {
                if let Some(inner) = items.get_mut(*index) {
                    remove(inner, rest);
                }
            }
            _ => {}
        }
    }

    /// Strings a config value might hold, right or wrong for its key.
    const STRINGS: &[&str] = &[
        "",
        " ",
        "30s",
        "0",
        "0s",
        "1ns",
        "250ms",
        "1h30m",
        "5m",
        "-5s",
        "soon",
        "1y",
        "100y",
        "500000000y",
        "18446744073709551615s",
        "99999999999999999999s",
        "127.0.0.1:7070",
        "127.0.0.1:0",
        "0.0.0.0:7070",
        "[::1]:7070",
        "localhost:7070",
        "256.0.0.1:1",
        ":80",
        "http://127.0.0.1:11434/v1",
        "https://api.example.com",
        "ftp://example.com",
        "http://",
        "http://[::1",
        "not a url",
        "local",
        "other",
        "helper",
        "boss",
        "assistant",
        "Helper",
        "a__b",
        "files",
        "x-y_z",
        "openai",
        "anthropic",
        "gemini",
        "stdio",
        "http",
        "trusted",
        "untrusted",
        "read_only",
        "full",
        "normal",
        "text",
        "json",
        "trust_first",
        "require_approval",
        "supervised",
        "CLAWVISOR_STUDIO_TOKEN",
        "HELPER_TOKEN",
        "BOSS_TOKEN",
        "OPENAI_API_KEY",
        "actors",
        "state",
        "../x",
        "/nonexistent/x",
        "instructions.md",
        "/dev/zero",
        "/dev/null",
        "/tmp",
        "info",
        "clawvisor=debug,info",
        "[bad",
        "*",
        "mcp:files",
        "shell",
        "current_time",
        "files__read",
        "Authorization",
        "bad header",
        "ü",
        "\u{0}",
        "line\nbreak",
        "quote\"d",
        "a]b",
    ];

    fn string_value() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            6 => prop::sample::select(STRINGS).prop_map(str::to_string),
            1 => "\\PC{0,12}",
            1 => "x{33,40}",
            1 => tricky_text(),
        ]
    }

    fn value() -> impl Strategy<Value = Value> + Clone {
        let leaf = prop_oneof![
            6 => string_value().prop_map(Value::String),
            2 => prop_oneof![
                Just(0i64),
                Just(1),
                Just(-1),
                Just(3),
                Just(100),
                Just(1_000),
                Just(16_000),
                Just(i64::from(u32::MAX)),
                Just(i64::from(u32::MAX) + 1),
                Just(i64::MAX),
                Just(i64::MIN),
                any::<i64>(),
            ]
            .prop_map(Value::Integer),
            2 => prop_oneof![
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
                Just(-0.0),
                Just(0.25),
                Just(0.9),
                Just(1.0),
                Just(2.0),
                Just(10.5),
                Just(1e308),
                Just(-1.0),
                any::<f64>(),
            ]
            .prop_map(Value::Float),
            1 => any::<bool>().prop_map(Value::Boolean),
            1 => Just(Value::Datetime(
                "1979-05-27T07:32:00Z".parse().expect("a TOML date-time")
            )),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(STRINGS).prop_map(str::to_string),
                    inner,
                    0..3
                )
                .prop_map(|map| Value::Table(map.into_iter().collect())),
            ]
        })
    }

    /// Variables the loader reads: every `CLAWVISOR_<SECTION>_<KEY>`, the special ones, the
    /// secrets agent files name, and some that match nothing.
    fn env_names() -> Vec<String> {
        let defaults = Table::try_from(config::Config::default()).expect("the defaults serialize");
        let mut names = vec![
            "CLAWVISOR_ACTORS_DIR".to_string(),
            "CLAWVISOR_CONFIG".to_string(),
            "CLAWVISOR_NO_SUCH_KEY".to_string(),
            "CLAWVISOR_".to_string(),
            "CLAWVISOR_STUDIO_TOKEN".to_string(),
            "HELPER_TOKEN".to_string(),
            "OPENAI_API_KEY".to_string(),
        ];
        for (key, value) in &defaults {
            match value {
                Value::Table(section) => {
                    for inner in section.keys() {
                        names.push(format!("CLAWVISOR_{key}_{inner}").to_ascii_uppercase());
                    }
                    names.push(format!("CLAWVISOR_{key}").to_ascii_uppercase());
                }
                _ => names.push(format!("CLAWVISOR_{key}").to_ascii_uppercase()),
            }
        }
        names
    }

    const ENV_VALUES: &[&str] = &[
        "",
        "1",
        "-1",
        "0",
        "true",
        "yes",
        "maybe",
        "1.5",
        "nan",
        "inf",
        "30s",
        "500000000y",
        "18446744073709551615s",
        "127.0.0.1:0",
        "0.0.0.0:7070",
        "[\"30s\"]",
        "[1, 2]",
        "{ a = 1 }",
        "[[x]]",
        "1\n[studio]\nbind = \"x\"",
        "\"unterminated",
        "json",
        "actors",
        "nope",
        ".",
        "secret-token",
    ];

    #[derive(Debug, Clone)]
    enum Edit {
        /// Sets a key known from the samples (of the file's kind) in one TOML file: to a value
        /// like the sample's (another duration for a duration) or to `value`.
        Set {
            file: Index,
            path: Index,
            like_sample: bool,
            pick: Index,
            value: Value,
        },
        /// Removes one value, table or array item from one TOML file.
        Remove {
            file: Index,
            path: Index,
        },
        /// Breaks one file's text.
        Text {
            file: Index,
            edit: TextEdit,
        },
        /// Copies one file of the case under another agent file name.
        Copy {
            file: Index,
            name: String,
        },
        Env {
            name: Index,
            value: String,
        },
        Flag {
            name: &'static str,
            value: String,
        },
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let snippets = prop_oneof![
            prop::sample::select(
                &[
                    "[",
                    "]",
                    "=",
                    "\"",
                    "'''",
                    "\n",
                    "\n[studio]\n",
                    "\n[[mcp.servers]]\n",
                    "\n[telegram]\n",
                    "#",
                    "ü",
                    "\\",
                    "{",
                    "}",
                    ",",
                    "0x",
                    "inf",
                    "nan",
                    "\u{0}",
                    "\r",
                    "key = 1\n",
                    "\nname = \"dup\"\n",
                ][..]
            )
            .prop_map(str::to_string),
            "\\PC{1,6}",
        ];
        prop_oneof![
            6 => (any::<Index>(), any::<Index>(), prop::bool::weighted(0.7), any::<Index>(), value())
                .prop_map(|(file, path, like_sample, pick, value)| Edit::Set {
                    file,
                    path,
                    like_sample,
                    pick,
                    value,
                }),
            2 => (any::<Index>(), any::<Index>())
                .prop_map(|(file, path)| Edit::Remove { file, path }),
            1 => (any::<Index>(), text_edit(snippets))
                .prop_map(|(file, edit)| Edit::Text { file, edit }),
            1 => (any::<Index>(), prop::sample::select(&["actors/z.toml", "actors/a.toml", "actors/notes.txt"][..]))
                .prop_map(|(file, name)| Edit::Copy { file, name: name.to_string() }),
            2 => (any::<Index>(), prop_oneof![
                    prop::sample::select(ENV_VALUES).prop_map(str::to_string),
                    string_value(),
                ])
                .prop_map(|(name, value)| Edit::Env { name, value }),
            1 => (
                    prop::sample::select(&["data_dir", "studio_bind", "actors_dir", "log_level", "log_format"][..]),
                    string_value(),
                )
                .prop_map(|(name, value)| Edit::Flag { name, value }),
        ]
    }

    /// Known key paths of daemon files and of agent files, with a sample value, from the samples.
    struct Known {
        daemon: Vec<(Vec<Step>, Value)>,
        agent: Vec<(Vec<Step>, Value)>,
        env: Vec<String>,
    }

    const DURATIONS: &[&str] = &[
        "0",
        "0s",
        "1ns",
        "99ms",
        "100ms",
        "1s",
        "30s",
        "51s",
        "1m",
        "1h",
        "2h",
        "1d",
        "30d",
        "1y",
        "100y",
        "101y",
        "1000y",
        "500000000y",
        "18446744073709551615s",
        "-1s",
        "1.5s",
        "5 m",
        "",
        "forever",
    ];
    const URLS: &[&str] = &[
        "http://127.0.0.1:1/v1",
        "https://example.com",
        "http://[::1]:8080",
        "ftp://example.com",
        "file:///etc/passwd",
        "http://",
        "localhost:8080",
        "",
        "https://ü.example/ä?x=1#y",
    ];
    const ADDRESSES: &[&str] = &[
        "127.0.0.1:7070",
        "127.0.0.1:0",
        "0.0.0.0:7070",
        "[::]:7070",
        "[::1]:7070",
        "192.168.1.2:80",
        "localhost:7070",
        "127.0.0.1:65536",
        "127.0.0.1",
    ];
    const INTEGERS: &[i64] = &[
        0,
        1,
        -1,
        2,
        20,
        21,
        999,
        1_000,
        u32::MAX as i64,
        u32::MAX as i64 + 1,
        i64::MAX,
        i64::MIN,
    ];
    const FLOATS: &[f64] = &[
        0.0,
        -0.0,
        0.25,
        0.89,
        0.9,
        1.0,
        10.0,
        10.01,
        -1.0,
        1e6,
        1e308,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];

    /// A value of the same kind as `sample` (another duration for a duration), else `fallback`.
    fn similar(sample: &Value, pick: Index, fallback: &Value) -> Value {
        let one_of = |list: &[&str]| Value::String(list[pick.index(list.len())].to_string());
        match sample {
            Value::String(text) if clawvisor::config::Dur::parse(text).is_ok() => one_of(DURATIONS),
            Value::String(text) if text.contains("://") => one_of(URLS),
            Value::String(text) if text.parse::<std::net::SocketAddr>().is_ok() => {
                one_of(ADDRESSES)
            }
            Value::Integer(_) => Value::Integer(INTEGERS[pick.index(INTEGERS.len())]),
            Value::Float(_) => Value::Float(FLOATS[pick.index(FLOATS.len())]),
            Value::Boolean(flag) => Value::Boolean(!flag),
            Value::Array(items) if !items.is_empty() => {
                let mut items = items.clone();
                let at = pick.index(items.len());
                items[at] = similar(&items[at], pick, fallback);
                Value::Array(items)
            }
            _ => fallback.clone(),
        }
    }

    fn known(samples: &[ConfigCase]) -> Known {
        let mut known = Known {
            daemon: Vec::new(),
            agent: Vec::new(),
            env: env_names(),
        };
        let defaults = Table::try_from(config::Config::default()).expect("the defaults serialize");
        for path in paths(&defaults) {
            let sample = lookup(&defaults, &path);
            known.daemon.push((path, sample));
        }
        for case in samples {
            for (name, text) in &case.files {
                let Ok(table) = toml::from_str::<Table>(text) else {
                    continue;
                };
                let list = if name.ends_with("clawvisor.toml") {
                    &mut known.daemon
                } else {
                    &mut known.agent
                };
                for path in paths(&table) {
                    if !list.iter().any(|(known, _)| *known == path) {
                        let sample = lookup(&table, &path);
                        list.push((path, sample));
                    }
                }
            }
        }
        known
    }

    fn apply(case: &mut ConfigCase, edit: &Edit, known: &Known) {
        let file_at = |case: &ConfigCase, index: &Index| -> Option<usize> {
            (!case.files.is_empty()).then(|| index.index(case.files.len()))
        };
        match edit {
            Edit::Set {
                file,
                path,
                like_sample,
                pick,
                value,
            } => {
                let Some(file) = file_at(case, file) else {
                    return;
                };
                let (name, text) = &mut case.files[file];
                let Ok(table) = toml::from_str::<Table>(text) else {
                    return;
                };
                let list = if name.ends_with("clawvisor.toml") {
                    &known.daemon
                } else {
                    &known.agent
                };
                if list.is_empty() {
                    return;
                }
                let (path, sample) = &list[path.index(list.len())];
                let value = if *like_sample {
                    similar(sample, *pick, value)
                } else {
                    value.clone()
                };
                let mut document = Value::Table(table);
                set(&mut document, path, value);
                if let Ok(new_text) = toml::to_string(&document) {
                    *text = new_text;
                }
            }
            Edit::Remove { file, path } => {
                let Some(file) = file_at(case, file) else {
                    return;
                };
                let text = &mut case.files[file].1;
                let Ok(table) = toml::from_str::<Table>(text) else {
                    return;
                };
                let all = paths(&table);
                if all.is_empty() {
                    return;
                }
                let mut document = Value::Table(table);
                remove(&mut document, &all[path.index(all.len())]);
                if let Ok(new_text) = toml::to_string(&document) {
                    *text = new_text;
                }
            }
            Edit::Text { file, edit } => {
                if let Some(file) = file_at(case, file) {
                    edit.apply(&mut case.files[file].1);
                }
            }
            Edit::Copy { file, name } => {
                if let Some(file) = file_at(case, file) {
                    let text = case.files[file].1.clone();
                    case.files.retain(|(existing, _)| existing != name);
                    case.files.push((name.clone(), text));
                }
            }
            Edit::Env { name, value } => {
                let name = known.env[name.index(known.env.len())].clone();
                case.env.retain(|(existing, _)| *existing != name);
                case.env.push((name, value.clone()));
            }
            Edit::Flag { name, value } => {
                case.flags.retain(|(existing, _)| existing != name);
                case.flags.push((name.to_string(), value.clone()));
            }
        }
    }

    pub fn strategy() -> impl Strategy<Value = ConfigCase> {
        let samples: Vec<ConfigCase> = corpus("config")
            .iter()
            .map(|(_, text)| parse_case(text))
            .collect();
        let known = std::sync::Arc::new(known(&samples));
        (
            prop::sample::select(samples),
            prop::collection::vec(edit(), 1..4),
        )
            .prop_map(move |(mut case, edits)| {
                for edit in &edits {
                    apply(&mut case, edit, &known);
                }
                case
            })
    }
}

#[test]
fn config() {
    use config_target::*;
    replay("config", parse_case, check);
    run(runner(REGRESSIONS, 300), strategy(), |case| check(&case));
}

// ---------------------------------------------------------------------------------------------
// JSON mutation, shared by the Telegram and Studio targets.
// ---------------------------------------------------------------------------------------------

mod json_edits {
    use super::*;

    use serde_json::{Map, Value};

    /// An edit of a JSON document; positions index into the document's current values.
    #[derive(Debug, Clone)]
    pub enum JsonEdit {
        /// Replaces any value (the root included) with `value`.
        Replace { at: Index, value: Value },
        /// Removes an object member or an array item.
        Remove { at: Index },
        /// Sets `key` in an object to `value`.
        Insert {
            at: Index,
            key: String,
            value: Value,
        },
        /// Appends to an array.
        Append { at: Index, value: Value },
    }

    /// Pointers (RFC 6901) to every value in `document`, root first.
    fn pointers(document: &Value) -> Vec<String> {
        fn walk(value: &Value, pointer: String, out: &mut Vec<String>) {
            match value {
                Value::Object(members) => {
                    for (key, inner) in members {
                        let escaped = key.replace('~', "~0").replace('/', "~1");
                        walk(inner, format!("{pointer}/{escaped}"), out);
                    }
                }
                Value::Array(items) => {
                    for (index, inner) in items.iter().enumerate() {
                        walk(inner, format!("{pointer}/{index}"), out);
                    }
                }
                _ => {}
            }
            out.push(pointer);
        }
        let mut out = Vec::new();
        walk(document, String::new(), &mut out);
        out.reverse();
        out
    }

    fn pick<'a>(list: &'a [String], at: &Index) -> Option<&'a String> {
        (!list.is_empty()).then(|| &list[at.index(list.len())])
    }

    impl JsonEdit {
        pub fn apply(&self, document: &mut Value) {
            let all = pointers(document);
            match self {
                JsonEdit::Replace { at, value } => {
                    if let Some(target) = pick(&all, at).and_then(|p| document.pointer_mut(p)) {
                        *target = value.clone();
                    }
                }
                JsonEdit::Remove { at } => {
                    let Some(pointer) = pick(&all[1..], at).cloned() else {
                        return;
                    };
                    let (parent, last) = pointer.rsplit_once('/').expect("not the root");
                    let last = last.replace("~1", "/").replace("~0", "~");
                    match document.pointer_mut(parent) {
                        Some(Value::Object(members)) => {
                            members.remove(&last);
                        }
                        Some(Value::Array(items)) => {
                            if let Ok(index) = last.parse::<usize>()
                                && index < items.len()
                            {
                                items.remove(index);
                            }
                        }
                        _ => {}
                    }
                }
                JsonEdit::Insert { at, key, value } => {
                    let objects: Vec<String> = all
                        .into_iter()
                        .filter(|p| document.pointer(p).is_some_and(Value::is_object))
                        .collect();
                    if let Some(Value::Object(members)) =
                        pick(&objects, at).and_then(|p| document.pointer_mut(p))
                    {
                        members.insert(key.clone(), value.clone());
                    }
                }
                JsonEdit::Append { at, value } => {
                    let arrays: Vec<String> = all
                        .into_iter()
                        .filter(|p| document.pointer(p).is_some_and(Value::is_array))
                        .collect();
                    if let Some(Value::Array(items)) =
                        pick(&arrays, at).and_then(|p| document.pointer_mut(p))
                    {
                        items.push(value.clone());
                    }
                }
            }
        }
    }

    /// Numbers that break arithmetic: zero, negatives, the edges of every integer width, floats
    /// where integers belong.
    pub fn number() -> impl Strategy<Value = Value> + Clone {
        prop_oneof![
            prop::sample::select(vec![
                0i64,
                1,
                -1,
                7,
                42,
                777,
                9,
                17,
                i64::from(i32::MAX),
                i64::from(i32::MAX) + 1,
                i64::from(i32::MIN),
                i64::from(u32::MAX),
                i64::from(u32::MAX) + 1,
                1 << 53,
                i64::MAX,
                i64::MIN,
                4_102_444_800,
                253_402_300_800,
                -62_135_596_801,
            ])
            .prop_map(Value::from),
            Just(Value::from(u64::MAX)),
            prop::sample::select(&[1.5f64, -0.0, 1e300, 3.0][..]).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
        ]
    }

    /// Any JSON value, leaning on `strings` for text and on awkward numbers.
    pub fn value(
        strings: impl Strategy<Value = String> + Clone + 'static,
        keys: impl Strategy<Value = String> + Clone + 'static,
    ) -> impl Strategy<Value = Value> + Clone {
        let leaf = prop_oneof![
            3 => strings.prop_map(Value::String),
            3 => number(),
            1 => any::<bool>().prop_map(Value::Bool),
            1 => Just(Value::Null),
        ];
        leaf.prop_recursive(3, 12, 4, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(keys.clone(), inner, 0..4)
                    .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    pub fn edit(
        values: impl Strategy<Value = Value> + Clone + 'static,
        keys: impl Strategy<Value = String> + Clone + 'static,
    ) -> impl Strategy<Value = JsonEdit> {
        prop_oneof![
            4 => (any::<Index>(), values.clone()).prop_map(|(at, value)| JsonEdit::Replace { at, value }),
            3 => any::<Index>().prop_map(|at| JsonEdit::Remove { at }),
            3 => (any::<Index>(), keys, values.clone())
                .prop_map(|(at, key, value)| JsonEdit::Insert { at, key, value }),
            1 => (any::<Index>(), values).prop_map(|(at, value)| JsonEdit::Append { at, value }),
        ]
    }
}

// ---------------------------------------------------------------------------------------------
// Target: telegram — stored `getUpdates` JSON, read the way the bot reads it.
// ---------------------------------------------------------------------------------------------

mod telegram_target {
    use super::json_edits::{self, JsonEdit};
    use super::*;

    use clawvisor::telegram::intake::{self, Intake};
    use serde_json::{Value, json};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/telegram.txt";
    pub const BOT_ID: i64 = 777;
    /// Bot names with `k`s, so that a KELVIN SIGN (which lowercases to `k`, and is three bytes
    /// long) can stand in for one; with the second, a byte offset taken from the lowercased text
    /// lands inside a character.
    pub const BOT_USERNAMES: [&str; 2] = ["kiki_bot", "kkkk_bot"];

    pub fn parse_case(text: &str) -> String {
        text.trim_end_matches('\n').to_string()
    }

    /// The property: reading a stored update never panics and is deterministic; the payload
    /// the poller stores (teloxide's re-serialisation) reads the same; what the bot acts on is
    /// well-formed.
    pub fn check(payload: &str) -> Result<(), TestCaseError> {
        for username in BOT_USERNAMES {
            check_as(payload, username)?;
        }
        Ok(())
    }

    fn check_as(payload: &str, username: &str) -> Result<(), TestCaseError> {
        let first = intake::read(payload, BOT_ID, username);
        prop_assert_eq!(&first, &intake::read(payload, BOT_ID, username));
        // The sweep and the group context read stored updates without the username.
        let _ = intake::read(payload, BOT_ID, "");
        if let Ok(update) = serde_json::from_str::<teloxide::types::Update>(payload) {
            let _ = intake::summary(&update);
            // What the poller stores is teloxide's serialisation, not Telegram's text.
            let stored = serde_json::to_string(&update).expect("an update serializes");
            prop_assert_eq!(
                &intake::read(&stored, BOT_ID, username),
                &first,
                "the stored form {} reads differently",
                stored
            );
        }
        match &first {
            Intake::Message(message) => {
                prop_assert_eq!(message.text.trim(), message.text.as_str());
                prop_assert!(!message.private || message.addressed);
                if let Some((name, args)) = &message.command {
                    prop_assert!(!name.is_empty());
                    prop_assert!(
                        name.chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                        "command {:?}",
                        name
                    );
                    prop_assert_eq!(args.trim(), args.as_str());
                }
                for file in &message.files {
                    prop_assert!(!file.file_id.is_empty() || file.name.contains('-'));
                    prop_assert!(!file.mime.is_empty());
                }
                let _ = clawvisor::clock::to_datetime(message.date_ms);
            }
            Intake::Callback(callback) => {
                let _ = &callback.data;
            }
            Intake::Unsupported(why) => prop_assert!(!why.is_empty()),
        }
        Ok(())
    }

    /// A bot's `@name` spelled with other cases and with look-alikes that case-fold to it.
    fn mention_variant() -> impl Strategy<Value = String> + Clone {
        (
            prop::sample::select(&BOT_USERNAMES[..]),
            prop::collection::vec(0u8..2, 8),
        )
            .prop_map(|(username, choices)| {
                let mut text = String::from("@");
                for (character, choice) in username.chars().zip(choices) {
                    match (character, choice) {
                        ('k', 0) => text.push('\u{212A}'),
                        (_, 1) => text.push(character.to_ascii_uppercase()),
                        _ => text.push(character),
                    }
                }
                text
            })
    }

    fn strings() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            3 => (mention_variant(), tricky_text()).prop_map(|(mention, rest)| format!("{mention} {rest}")),
            2 => prop::sample::select(
                [
                    "", " ", "/", "/start", "/stop@kiki_bot", "/approve@other_bot x", "/pair 1234",
                    "/päir", "@", "@kiki_bot", "@KIKI_BOT", "hello", "private", "group",
                    "supergroup", "channel", "mention", "bot_command", "text_link", "bold", "url",
                ]
                .map(str::to_string)
                .into_iter()
                .chain(["x".repeat(5000)])
                .collect::<Vec<_>>()
            ),
            2 => tricky_text(),
            1 => "\\PC{0,16}",
        ]
    }

    fn keys() -> impl Strategy<Value = String> + Clone {
        prop::sample::select(
            &[
                "text",
                "caption",
                "entities",
                "caption_entities",
                "from",
                "chat",
                "date",
                "reply_to_message",
                "photo",
                "document",
                "voice",
                "callback_query",
                "data",
                "message",
                "edited_message",
                "is_bot",
                "username",
                "last_name",
                "first_name",
                "title",
                "type",
                "id",
                "offset",
                "length",
                "file_size",
                "width",
                "height",
                "mime_type",
                "file_name",
                "message_id",
                "update_id",
                "sender_chat",
                "url",
            ][..],
        )
        .prop_map(str::to_string)
    }

    /// Entities whose offsets and lengths point anywhere: inside a surrogate pair, past the end.
    fn entities() -> impl Strategy<Value = Value> + Clone {
        prop::collection::vec(
            (
                prop::sample::select(&["mention", "bot_command", "bold", "url", "text_link"][..]),
                prop_oneof![0u64..40, Just(1u64 << 40), Just(u64::MAX), Just(usize::MAX as u64 / 2)],
                prop_oneof![0u64..40, Just(u64::MAX), Just(usize::MAX as u64 / 2 + 2)],
            )
                .prop_map(|(kind, offset, length)| {
                    json!({"type": kind, "offset": offset, "length": length, "url": "https://x"})
                }),
            1..4,
        )
        .prop_map(Value::Array)
    }

    fn values() -> impl Strategy<Value = Value> + Clone {
        prop_oneof![
            4 => json_edits::value(strings(), keys()),
            1 => entities(),
        ]
    }

    #[derive(Debug, Clone)]
    pub enum Base {
        Sample(Value),
        Raw(String),
    }

    /// An edit of an update: a generic JSON edit, or one aimed at the message's text and
    /// entities, which hold offsets into that text.
    #[derive(Debug, Clone)]
    pub enum UpdateEdit {
        Json(JsonEdit),
        /// Sets `text` (or `caption`) of the update's message.
        Text {
            caption: bool,
            text: String,
        },
        /// Sets `entities` (or `caption_entities`) of the update's message.
        Entities {
            caption: bool,
            entities: Value,
        },
    }

    fn message_of(update: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
        let pointer = [
            "/message",
            "/edited_message",
            "/callback_query/message",
            "/channel_post",
        ]
        .into_iter()
        .find(|pointer| update.pointer(pointer).is_some_and(Value::is_object))?;
        update.pointer_mut(pointer)?.as_object_mut()
    }

    impl UpdateEdit {
        fn apply(&self, update: &mut Value) {
            match self {
                UpdateEdit::Json(edit) => edit.apply(update),
                UpdateEdit::Text { caption, text } => {
                    if let Some(message) = message_of(update) {
                        let key = if *caption { "caption" } else { "text" };
                        message.insert(key.into(), Value::String(text.clone()));
                    }
                }
                UpdateEdit::Entities { caption, entities } => {
                    if let Some(message) = message_of(update) {
                        let key = if *caption {
                            "caption_entities"
                        } else {
                            "entities"
                        };
                        message.insert(key.into(), entities.clone());
                    }
                }
            }
        }
    }

    fn update_edit() -> impl Strategy<Value = UpdateEdit> {
        prop_oneof![
            3 => json_edits::edit(values(), keys()).prop_map(UpdateEdit::Json),
            2 => (any::<bool>(), strings()).prop_map(|(caption, text)| UpdateEdit::Text { caption, text }),
            1 => (any::<bool>(), entities())
                .prop_map(|(caption, entities)| UpdateEdit::Entities { caption, entities }),
        ]
    }

    pub fn strategy() -> impl Strategy<Value = String> {
        let samples: Vec<Base> = corpus("telegram")
            .into_iter()
            .map(|(_, text)| match serde_json::from_str(&text) {
                Ok(value) => Base::Sample(value),
                Err(_) => Base::Raw(text),
            })
            .collect();
        let mutated = (
            prop::sample::select(samples),
            prop::collection::vec(update_edit(), 1..5),
        )
            .prop_map(|(base, edits): (Base, Vec<UpdateEdit>)| match base {
                Base::Sample(mut document) => {
                    for edit in &edits {
                        edit.apply(&mut document);
                    }
                    document.to_string()
                }
                Base::Raw(text) => text,
            });
        prop_oneof![
            8 => mutated,
            1 => "\\PC{0,64}",
            1 => json_edits::value(strings(), keys()).prop_map(|value| value.to_string()),
        ]
    }
}

#[test]
fn telegram() {
    use telegram_target::*;
    replay("telegram", parse_case, |payload| check(payload));
    run(runner(REGRESSIONS, 400), strategy(), |payload| {
        check(&payload)
    });
}

// ---------------------------------------------------------------------------------------------
// Target: classifier — shell commands, file accesses and MCP calls, as the policy gate sees them.
// ---------------------------------------------------------------------------------------------

mod classifier_target {
    use super::*;

    use clawvisor::policy::{Assessment, FileAccess, McpToolHints, McpTrust, RiskLevel};
    use clawvisor::policy::{classify_file_access, classify_mcp, classify_shell};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/classifier.txt";
    pub const REGRESSIONS_COMPOSED: &str =
        "tests/fuzz_corpus/proptest-regressions/classifier-composed.txt";
    pub const REGRESSIONS_FILES: &str =
        "tests/fuzz_corpus/proptest-regressions/classifier-files.txt";

    /// Commands agents really run, to be mutated.
    const REAL_COMMANDS: &[&str] = &[
        "ls -la",
        "cat README.md",
        "grep -rn TODO src",
        "git status",
        "git log --oneline | head -20",
        "git push --force origin main",
        "git reset --hard HEAD~1",
        "git config --global core.hooksPath /tmp/hooks",
        "rm -rf /",
        "rm -rf build",
        "curl -fsSL https://example.com/install.sh | sh",
        "wget -O- http://example.com/x | bash",
        "python3 -c 'print(1)'",
        "perl -e 'print 1'",
        "node -e 'process.exit(1)'",
        "find . -name '*.rs' -delete",
        "sed -i 's/a/b/' file.txt",
        "sed -n 1,10p file.txt",
        "awk '{print $1}' data.txt",
        "tar xzf archive.tar.gz -C /",
        "unzip -o x.zip -d /",
        "chmod -R 777 /",
        "dd if=/dev/zero of=/dev/sda",
        "sudo apt-get install -y curl",
        "echo hi > ~/.bashrc",
        "cat ~/.ssh/id_rsa",
        "cat < /etc/shadow",
        "env LD_PRELOAD=/tmp/x.so ls",
        "FOO=1 make test",
        "cd / && ls",
        "cd .. ; touch x",
        "xargs rm < list.txt",
        "timeout 5 sleep 10",
        "nohup ./run.sh &",
        ":(){ :|:& };:",
        "echo $(whoami)",
        "echo `id`",
        "cat <<EOF\nhello\nEOF",
        "python3 <<'PY'\nprint(1)\nPY",
        "docker run --privileged -v /:/host alpine",
        "npm install",
        "cargo build --release",
        "kill -9 1",
        "crontab -r",
        "nc -l 4444",
        "ssh user@example.com",
        "scp notes.txt example.com:",
        "mv a b",
        "cp -r src /tmp/x",
        "echo 'a;b' | tr ';' '\\n'",
        "ls {a,b}{c,d}",
        "for f in *.txt; do echo \"$f\"; done",
        "if [ -f x ]; then rm x; fi",
        "(cd sub && make)",
        "bash",
        "printf '%s\\n' \"$HOME\"",
        "$CMD --help",
        "cat file 2>&1 >/dev/null",
        "tee -a log.txt",
        "pip install requests",
        "systemctl restart nginx",
        "iptables -F",
        "ping -c 1 example.com",
        "jq . data.json",
        "echo $'\\x41'",
        "ls # comment; rm -rf /",
        "export PATH=/tmp:$PATH",
        "printenv",
    ];

    /// A corpus file: a command; or (starting with `--- parts`) parts separated by lines
    /// `--- <separator>`, for the composition property; or (starting with `--- same`) one
    /// command per line, the same words quoted differently, which must be judged alike.
    #[derive(Debug, Clone)]
    pub enum ClassifierCase {
        Command(String),
        Parts(Vec<String>, Vec<String>),
        Same(Vec<String>),
    }

    pub fn parse_case(text: &str) -> ClassifierCase {
        if let Some(rest) = text.strip_prefix("--- same\n") {
            return ClassifierCase::Same(rest.lines().map(str::to_string).collect());
        }
        let Some(rest) = text.strip_prefix("--- parts\n") else {
            return ClassifierCase::Command(text.to_string());
        };
        let mut parts = vec![String::new()];
        let mut separators = Vec::new();
        for line in rest.lines() {
            match line.strip_prefix("--- ") {
                Some(separator) => {
                    separators.push(format!(" {separator} "));
                    parts.push(String::new());
                }
                None => {
                    let part = parts.last_mut().expect("never empty");
                    if !part.is_empty() {
                        part.push('\n');
                    }
                    part.push_str(line);
                }
            }
        }
        ClassifierCase::Parts(parts, separators)
    }

    pub fn check_case(case: &ClassifierCase) -> Result<(), TestCaseError> {
        match case {
            ClassifierCase::Command(command) => check_command(command).map(|_| ()),
            ClassifierCase::Parts(parts, separators) => check_composition(parts, separators),
            ClassifierCase::Same(commands) => {
                let levels: Vec<RiskLevel> = commands
                    .iter()
                    .map(|command| check_command(command).map(|assessment| assessment.level))
                    .collect::<Result<_, _>>()?;
                prop_assert!(
                    levels.windows(2).all(|pair| pair[0] == pair[1]),
                    "{:?} are judged {:?}",
                    commands,
                    levels
                );
                Ok(())
            }
        }
    }

    /// The level a reason states at its start (`L2 ...`, `L3: ...`).
    fn stated_level(reason: &str) -> Option<RiskLevel> {
        reason.get(..2)?.parse().ok()
    }

    /// The property for any command: no panic, deterministic, reasons that explain the level.
    pub fn check_command(command: &str) -> Result<Assessment, TestCaseError> {
        let assessment = classify_shell(command);
        prop_assert_eq!(&assessment, &classify_shell(command), "not deterministic");
        prop_assert!(
            !assessment.reasons.is_empty(),
            "no reason for {:?}",
            command
        );
        let stated: Vec<Option<RiskLevel>> = assessment
            .reasons
            .iter()
            .map(|reason| stated_level(reason))
            .collect();
        if stated.iter().all(Option::is_some) {
            let highest = stated.iter().flatten().max().copied();
            prop_assert_eq!(
                highest,
                Some(assessment.level),
                "the reasons {:?} do not explain {}",
                assessment.reasons,
                assessment.level
            );
        } else {
            // The early refusals: one reason, L3.
            prop_assert_eq!(assessment.level, RiskLevel::L3, "{:?}", assessment.reasons);
        }
        if command.contains('\0') || command.len() > 10_000 || command.trim().is_empty() {
            prop_assert_eq!(assessment.level, RiskLevel::L3);
        }
        Ok(assessment)
    }

    /// Joined parts are never judged lower than any part alone: an L3 part blocks the whole
    /// command, and no neighbour lowers a part.
    pub fn check_composition(parts: &[String], separators: &[String]) -> Result<(), TestCaseError> {
        let mut command = String::new();
        let mut highest = RiskLevel::L0;
        for (index, part) in parts.iter().enumerate() {
            if index > 0 {
                command.push_str(separators.get(index - 1).map_or(" ; ", String::as_str));
            }
            command.push_str(part);
            highest = highest.max(check_command(part)?.level);
        }
        let whole = check_command(&command)?;
        prop_assert!(
            whole.level >= highest,
            "{:?} is {} but one of its parts is {}: {:?}",
            command,
            whole.level,
            highest,
            whole.reasons
        );
        Ok(())
    }

    // --- Mutated real commands ----------------------------------------------------------------

    const SHELL_SNIPPETS: &[&str] = &[
        " ",
        ";",
        " && ",
        " || ",
        "|",
        "&",
        "\n",
        "'",
        "\"",
        "\\",
        "$(",
        ")",
        "`",
        "$'",
        "${",
        "}",
        "{",
        "<<EOF\n",
        "\nEOF\n",
        "<<-",
        "<<<",
        "#",
        "*",
        "?",
        "[",
        "]",
        "{a,b}",
        "~",
        "..",
        "/",
        "-rf",
        "sudo ",
        "rm -rf / ",
        "(",
        ">",
        ">>",
        "2>&1",
        "<(",
        ">(",
        "$((1+1))",
        "\0",
        "\t",
        "\\\n",
        "LD_PRELOAD=x ",
        "env ",
        "xargs ",
        "sh -c ",
        "=",
        "$HOME",
        "!",
    ];

    fn snippet() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            5 => prop::sample::select(SHELL_SNIPPETS).prop_map(str::to_string),
            1 => tricky_text(),
            1 => "\\PC{1,6}",
        ]
    }

    pub fn mutated_command() -> impl Strategy<Value = String> {
        let mut bases: Vec<String> = REAL_COMMANDS.iter().map(|c| c.to_string()).collect();
        for (_, text) in corpus("classifier") {
            if let ClassifierCase::Command(command) = parse_case(&text) {
                bases.push(command);
            }
        }
        (
            prop::sample::select(bases),
            prop::collection::vec(text_edit(snippet()), 0..5),
        )
            .prop_map(|(mut command, edits)| {
                for edit in &edits {
                    edit.apply(&mut command);
                }
                command
            })
    }

    // --- Composed simple commands -------------------------------------------------------------

    const PROGRAMS: &[&str] = &[
        "ls",
        "cat",
        "echo",
        "grep",
        "rm",
        "git",
        "curl",
        "sh",
        "bash",
        "python3",
        "sed",
        "find",
        "tar",
        "chmod",
        "dd",
        "sudo",
        "env",
        "xargs",
        "timeout",
        "nice",
        "make",
        "cargo",
        "npm",
        "cp",
        "mv",
        "touch",
        "mkdir",
        "tee",
        "awk",
        "perl",
        "docker",
        "kill",
        "ssh",
        "cd",
        "export",
        "true",
        "printenv",
        "crontab",
        "systemctl",
        "/bin/rm",
        "./script.sh",
        "jq",
        "head",
        "nohup",
        "command",
        "stdbuf",
        "nc",
        "unzip",
        "pip",
        "npx",
    ];

    const ARGUMENTS: &[&str] = &[
        "-la",
        "-rf",
        "-r",
        "-f",
        "-i",
        "-c",
        "-e",
        "-n",
        "--force",
        "--global",
        "push",
        "status",
        "install",
        "run",
        "origin",
        "main",
        "/",
        "~",
        "~/.ssh/id_rsa",
        ".env",
        "/etc/passwd",
        "/dev/sda",
        "/dev/null",
        "..",
        ".",
        "src",
        "notes.txt",
        "a b",
        "it's",
        "say \"hi\"",
        "back\\slash",
        "semi;colon",
        "pipe|x",
        "amp&x",
        "<in>",
        "(paren)",
        "*.rs",
        "$HOME",
        "{a,b}",
        "{}",
        "+",
        ";",
        "LD_PRELOAD=/tmp/x.so",
        "FOO=bar",
        "PATH=/tmp",
        "s/a/b/",
        "rm -rf /",
        "print(1)",
        "x=$(id)",
        "#hash",
        "ü-ñ",
        "😀",
        "5",
        "-exec",
        "-delete",
        "10",
        "1",
        "https://example.com/x.sh",
        "--privileged",
        "-v",
        "/:/host",
        "-o",
        "-d",
        "777",
        "if=/dev/zero",
        "of=/dev/sda",
        "core.hooksPath",
        "-",
        "--",
        "--help",
        "",
    ];

    const REDIRECTIONS: &[&str] = &[
        "> out.txt",
        "2>&1",
        ">> ~/.bashrc",
        "< /etc/shadow",
        "> /dev/null",
        "> /dev/sda",
        "< input.txt",
        ">> .github/workflows/ci.yml",
        "2> errors.log",
    ];

    /// How a word is quoted.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Quote {
        /// As is, when the word has only characters the shell takes literally.
        Plain,
        Single,
        Double,
        AnsiC,
        Backslash,
    }

    fn plain_safe(word: &str) -> bool {
        !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+,=".contains(c))
    }

    /// Whether the shell reads the word literally whatever its quoting (no expansion, no
    /// pattern, no tilde), so that every quoting must be judged the same.
    fn literal(word: &str) -> bool {
        !word.chars().any(|c| "$`*?[]{}~!".contains(c))
    }

    pub fn render(word: &str, quote: Quote) -> String {
        match quote {
            Quote::Plain if plain_safe(word) => word.to_string(),
            Quote::Plain | Quote::Single => format!("'{}'", word.replace('\'', "'\\''")),
            Quote::Double => {
                let mut out = String::from("\"");
                for character in word.chars() {
                    if matches!(character, '\\' | '"' | '$' | '`') {
                        out.push('\\');
                    }
                    out.push(character);
                }
                out.push('"');
                out
            }
            Quote::AnsiC => {
                let mut out = String::from("$'");
                for character in word.chars() {
                    match character {
                        '\\' => out.push_str("\\\\"),
                        '\'' => out.push_str("\\'"),
                        '\n' => out.push_str("\\n"),
                        _ => out.push(character),
                    }
                }
                out.push('\'');
                out
            }
            Quote::Backslash if word.is_empty() || word.contains('\n') => {
                render(word, Quote::Single)
            }
            Quote::Backslash => {
                let mut out = String::new();
                for character in word.chars() {
                    if !character.is_ascii_alphanumeric() {
                        out.push('\\');
                    }
                    out.push(character);
                }
                out
            }
        }
    }

    pub fn quote() -> impl Strategy<Value = Quote> + Clone {
        prop::sample::select(
            &[
                Quote::Plain,
                Quote::Single,
                Quote::Double,
                Quote::AnsiC,
                Quote::Backslash,
            ][..],
        )
    }

    /// One simple command: words (program first) with their quoting, and a redirection.
    #[derive(Debug, Clone)]
    pub struct Part {
        pub words: Vec<(String, Quote)>,
        pub redirection: Option<&'static str>,
        /// Wrapped in `( … )` or `{ …; }`.
        pub group: Option<bool>,
    }

    impl Part {
        pub fn render(&self) -> String {
            let mut text: Vec<String> = self
                .words
                .iter()
                .map(|(word, quote)| render(word, *quote))
                .collect();
            text.extend(self.redirection.map(str::to_string));
            let text = text.join(" ");
            match self.group {
                Some(true) => format!("( {text} )"),
                Some(false) => format!("{{ {text}; }}"),
                None => text,
            }
        }
    }

    fn word() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            6 => prop::sample::select(ARGUMENTS).prop_map(str::to_string),
            1 => "[ -~]{0,8}",
            1 => tricky_text(),
        ]
    }

    pub fn part() -> impl Strategy<Value = Part> + Clone {
        (
            prop::sample::select(PROGRAMS).prop_map(str::to_string),
            quote(),
            prop::collection::vec((word(), quote()), 0..4),
            prop::option::weighted(0.25, prop::sample::select(REDIRECTIONS)),
            prop::option::weighted(0.15, any::<bool>()),
        )
            .prop_map(|(program, program_quote, arguments, redirection, group)| {
                let mut words = vec![(program, program_quote)];
                words.extend(arguments);
                Part {
                    words,
                    redirection,
                    group,
                }
            })
    }

    pub fn separator() -> impl Strategy<Value = String> + Clone {
        prop::sample::select(&[" ; ", " && ", " || ", " | ", "\n", " & "][..])
            .prop_map(str::to_string)
    }

    /// Parts joined by separators; each part also requoted (literal words only) to check that
    /// quoting alone never changes a verdict.
    pub fn check_parts(
        parts: &[Part],
        separators: &[String],
        requoting: &[Quote],
    ) -> Result<(), TestCaseError> {
        let rendered: Vec<String> = parts.iter().map(Part::render).collect();
        check_composition(&rendered, separators)?;
        for (part, text) in parts.iter().zip(&rendered) {
            let mut requoted = part.clone();
            for ((word, quote), new_quote) in
                requoted.words.iter_mut().zip(requoting.iter().cycle())
            {
                if literal(word) {
                    *quote = *new_quote;
                }
            }
            let other = requoted.render();
            let first = classify_shell(text);
            let second = classify_shell(&other);
            prop_assert_eq!(
                first.level,
                second.level,
                "{:?} and {:?} are the same words but judged {:?} and {:?}",
                text,
                other,
                first.reasons,
                second.reasons
            );
        }
        Ok(())
    }

    // --- File accesses and MCP ----------------------------------------------------------------

    const PATHS: &[&str] = &[
        "notes.txt",
        "./a/../b",
        "../outside",
        "/etc/passwd",
        "~/.ssh/id_rsa",
        ".env",
        "a/.git/config",
        ".github/workflows/ci.yml",
        "",
        " ",
        "x\0y",
        "/",
        "//",
        "a/../../..",
        "ü/文件",
        "Cargo.toml",
        "..",
        ".",
        "~",
        "~user/x",
        "C:\\Windows",
        "/srv/ws/inside.txt",
        "/srv/ws/../ws2/x",
        "id_rsa",
        "secrets/.env.local",
        "/dev/sda",
    ];

    const WORKSPACES: &[&str] = &[
        "/srv/ws",
        "/srv/ws/",
        "/",
        "relative/ws",
        "",
        "/srv/../ws",
        "/srv/ws/..",
        "/srv/ws/.",
    ];

    pub fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                4 => prop::sample::select(PATHS).prop_map(str::to_string),
                1 => tricky_text(),
                1 => "[a-z./~]{0,6}",
            ],
            1..4,
        )
        .prop_map(|pieces| pieces.join("/"))
    }

    pub fn workspace() -> impl Strategy<Value = String> {
        prop::sample::select(WORKSPACES).prop_map(str::to_string)
    }

    pub fn check_file_access(path: &str, workspace: &str) -> Result<(), TestCaseError> {
        let workspace = Path::new(workspace);
        let mut levels = Vec::new();
        for access in [FileAccess::Read, FileAccess::Write, FileAccess::Delete] {
            let assessment = classify_file_access(path, access, workspace);
            prop_assert_eq!(&assessment, &classify_file_access(path, access, workspace));
            prop_assert!(!assessment.reasons.is_empty());
            if path.trim().is_empty() || path.contains('\0') {
                prop_assert_eq!(assessment.level, RiskLevel::L3);
            }
            levels.push(assessment.level);
        }
        prop_assert!(
            levels[0] <= levels[1] && levels[1] <= levels[2],
            "{:?} in {:?}: read {}, write {}, delete {}",
            path,
            workspace,
            levels[0],
            levels[1],
            levels[2]
        );
        Ok(())
    }

    /// Every trust posture and every combination of hints (small enough to check them all).
    pub fn check_every_mcp_call() {
        let hint = [None, Some(false), Some(true)];
        for trust in [McpTrust::Trusted, McpTrust::Untrusted, McpTrust::ReadOnly] {
            for read_only in hint {
                for destructive in hint {
                    for idempotent in hint {
                        for open_world in hint {
                            let hints = McpToolHints {
                                read_only,
                                destructive,
                                idempotent,
                                open_world,
                            };
                            let assessment = classify_mcp(trust, &hints);
                            assert!(!assessment.reasons.is_empty());
                            if destructive == Some(true) {
                                assert!(assessment.level >= RiskLevel::L2, "{trust:?} {hints:?}");
                            }
                            // An untrusted server's hints never lower the risk.
                            if trust == McpTrust::Untrusted {
                                assert!(assessment.level >= RiskLevel::L2, "{hints:?}");
                            }
                            if trust == McpTrust::ReadOnly && read_only != Some(true) {
                                assert_eq!(assessment.level, RiskLevel::L3, "{hints:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn classifier() {
    use classifier_target::*;
    replay("classifier", parse_case, check_case);
    check_every_mcp_call();
    run(runner(REGRESSIONS, 500), mutated_command(), |command| {
        check_command(&command).map(|_| ())
    });
    let composed = (1usize..5).prop_flat_map(|count| {
        (
            prop::collection::vec(part(), count),
            prop::collection::vec(separator(), count.saturating_sub(1)),
            prop::collection::vec(quote(), 1..4),
        )
    });
    run(
        runner(REGRESSIONS_COMPOSED, 300),
        composed,
        |(parts, separators, requoting)| check_parts(&parts, &separators, &requoting),
    );
    run(
        runner(REGRESSIONS_FILES, 300),
        (path(), workspace()),
        |(path, workspace)| check_file_access(&path, &workspace),
    );
}

// ---------------------------------------------------------------------------------------------
// Target: cron — schedules as the scheduler, the schedule tools and Studio's preview read them.
// ---------------------------------------------------------------------------------------------

mod cron_target {
    use super::*;

    use chrono::{DateTime, TimeDelta, Timelike, Utc};
    use clawvisor::schedule::{MissedPolicy, ScheduleError, ScheduleSpec};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/cron.txt";

    #[derive(Debug, Clone)]
    pub struct CronCase {
        pub kind: String,
        pub expression: String,
        pub timezone: String,
        pub now: DateTime<Utc>,
        pub missed: String,
        /// The job's stored next fire time was this many seconds before `now`.
        pub due_before_now: i64,
    }

    /// Reads `key: value` lines; `now` is RFC 3339, `@<unix seconds>`, `min` or `max`.
    pub fn parse_case(text: &str) -> CronCase {
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(": "))
                .unwrap_or_default()
                .to_string()
        };
        let now = field("now");
        CronCase {
            kind: field("kind"),
            expression: field("expression"),
            timezone: field("timezone"),
            now: match now.as_str() {
                "min" => DateTime::<Utc>::MIN_UTC,
                "max" => DateTime::<Utc>::MAX_UTC,
                _ => now
                    .strip_prefix('@')
                    .and_then(|seconds| seconds.parse().ok())
                    .and_then(|seconds| DateTime::from_timestamp(seconds, 0))
                    .or_else(|| {
                        DateTime::parse_from_rfc3339(&now)
                            .ok()
                            .map(|at| at.with_timezone(&Utc))
                    })
                    .unwrap_or_else(|| panic!("cron corpus: unreadable `now: {now}`")),
            },
            missed: field("missed"),
            due_before_now: field("due_before_now").parse().unwrap_or(0),
        }
    }

    /// The property: parsing never panics and never fails with an internal translation error;
    /// the next fire time is after `now` and is what every instant before it sees; previews
    /// increase; missed runs lie between the stored due time and now.
    pub fn check(case: &CronCase) -> Result<(), TestCaseError> {
        let parsed = ScheduleSpec::parse(&case.kind, &case.expression, &case.timezone, case.now);
        let spec = match parsed {
            Ok(spec) => spec,
            Err(error) => {
                prop_assert!(
                    !matches!(error, ScheduleError::Translation { .. }),
                    "accepted but not translated: {}",
                    error
                );
                prop_assert!(!error.to_string().trim().is_empty());
                return Ok(());
            }
        };
        prop_assert!(!spec.describe().is_empty());
        let cron = case.kind.trim().eq_ignore_ascii_case("cron");
        let next = spec.next_after(case.now);
        if let Some(next) = next {
            prop_assert!(next > case.now, "next {} is not after {}", next, case.now);
            if cron {
                prop_assert_eq!(next.nanosecond(), 0, "cron fires on whole seconds");
            }
            // Nothing fires in between, so every instant in (now, next) sees the same next time.
            for before in [
                TimeDelta::nanoseconds(1),
                TimeDelta::seconds(1),
                TimeDelta::minutes(61),
            ] {
                let Some(instant) = next.checked_sub_signed(before) else {
                    continue;
                };
                if instant > case.now {
                    prop_assert_eq!(
                        spec.next_after(instant),
                        Some(next),
                        "from {} the next fire time is not {}",
                        instant,
                        next
                    );
                }
            }
        }
        let preview = spec.preview(case.now, 6);
        prop_assert_eq!(preview.first().copied(), next);
        for pair in preview.windows(2) {
            prop_assert!(pair[0] < pair[1], "preview not increasing: {:?}", preview);
            if cron {
                prop_assert!(pair[1] - pair[0] >= TimeDelta::seconds(1));
            }
        }

        let Ok(policy) = MissedPolicy::parse(&case.missed) else {
            return Ok(());
        };
        let Some(due) = case
            .now
            .checked_sub_signed(TimeDelta::seconds(case.due_before_now))
        else {
            return Ok(());
        };
        let outcome = policy.resolve(&spec, due, case.now);
        prop_assert_eq!(
            outcome.next_run_at,
            if due > case.now { Some(due) } else { next }
        );
        for run in outcome.run_now.iter().chain(&outcome.missed_samples) {
            prop_assert!(
                due <= *run && *run <= case.now,
                "{} is outside [{}, {}]: {:?}",
                run,
                due,
                case.now,
                outcome
            );
        }
        prop_assert!(outcome.run_now.windows(2).all(|pair| pair[0] < pair[1]));
        prop_assert!(
            outcome
                .missed_samples
                .windows(2)
                .all(|pair| pair[0] < pair[1])
        );
        Ok(())
    }

    // --- Strategies ---------------------------------------------------------------------------

    const EXPRESSIONS: &[&str] = &[
        "0 9 * * 1-5",
        "*/15 * * * *",
        "30 2 * * *",
        "0 * * * *",
        "0 0 1 * MON",
        "0 0 29 2 *",
        "0 0 31 * *",
        "0 0 30 2 *",
        "@daily",
        "@weekly",
        "@hourly",
        "@yearly",
        "@annually",
        "@monthly",
        "@midnight",
        "@reboot",
        "0 30 1 * * *",
        "59 59 23 31 12 *",
        "0 0 * * 7",
        "0 0 * * 0,7",
        "0 0 1-7 * 1",
        "5,35 8-18/2 * JAN-MAR,DEC mon-fri",
        "* * * * * *",
        "0 0 * * SUN-SAT",
    ];

    const ATOMS: &[&str] = &[
        "*",
        "?",
        "L",
        "W",
        "5L",
        "1#2",
        "LW",
        "-1",
        "",
        "*/0",
        "1-",
        "-5",
        "1,,2",
        "99999999999",
        "1/5",
        "a",
        "*/",
        "0x10",
        "½",
        "７",
        "MON",
        "sun",
        "Fri",
        "JAN",
        "dec",
        "mon-fri",
        "SAT-SUN",
        "5-1",
        "0-59/60",
        "*/61",
        "1-31/7",
        "60",
        "24",
        "32",
        "13",
        "8",
        "0",
        "7",
    ];

    fn atom() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            3 => prop::sample::select(ATOMS).prop_map(str::to_string),
            2 => (0u32..62).prop_map(|value| value.to_string()),
            2 => (0u32..62, 0u32..62).prop_map(|(first, last)| format!("{first}-{last}")),
            2 => (1u32..62).prop_map(|step| format!("*/{step}")),
            1 => (0u32..62, 0u32..62, 0u32..62).prop_map(|(a, b, s)| format!("{a}-{b}/{s}")),
        ]
    }

    fn field() -> impl Strategy<Value = String> + Clone {
        prop::collection::vec(atom(), 1..3).prop_map(|atoms| atoms.join(","))
    }

    fn expression() -> impl Strategy<Value = String> {
        let base = prop::sample::select(EXPRESSIONS).prop_map(str::to_string);
        prop_oneof![
            2 => base.clone(),
            // A real expression with one field replaced.
            4 => (base.clone(), any::<Index>(), field()).prop_map(|(expression, at, field)| {
                let mut fields: Vec<String> =
                    expression.split_whitespace().map(str::to_string).collect();
                let at = at.index(fields.len());
                fields[at] = field;
                fields.join(" ")
            }),
            3 => prop::collection::vec(field(), 4..8).prop_map(|fields| fields.join(" ")),
            1 => (base, text_edit(prop_oneof![
                    prop::sample::select(&[" ", "*", ",", "-", "/", "@", "\t", "\n"][..]).prop_map(str::to_string),
                    tricky_text(),
                ]))
                .prop_map(|(mut expression, edit)| {
                    edit.apply(&mut expression);
                    expression
                }),
        ]
    }

    const TIMEZONES: &[&str] = &[
        "UTC",
        "Europe/Berlin",
        "America/New_York",
        "Australia/Lord_Howe",
        "Pacific/Chatham",
        "Asia/Kathmandu",
        "America/Sao_Paulo",
        "Pacific/Apia",
        "Antarctica/Troll",
        "America/Santiago",
        "Africa/Casablanca",
        "Mars/Olympus",
        "",
        "utc",
        "+02:00",
        "Europe/berlin",
    ];

    /// Instants near clock changes, the crate's limits and the epoch.
    const INSTANTS: &[&str] = &[
        "2026-03-29T01:00:00Z",
        "2026-10-25T01:00:00Z",
        "2026-03-08T07:00:00Z",
        "2026-11-01T06:00:00Z",
        "2026-04-04T15:00:00Z",
        "2026-10-03T15:30:00Z",
        "2011-12-29T10:00:00Z",
        "2026-09-06T23:00:00Z",
        "2100-12-31T23:59:59Z",
        "2100-02-28T12:00:00Z",
        "1970-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
        "2026-06-15T12:00:00Z",
    ];

    fn instant() -> impl Strategy<Value = DateTime<Utc>> {
        let near = prop::sample::select(INSTANTS).prop_map(|text| {
            DateTime::parse_from_rfc3339(text)
                .expect("a valid instant")
                .with_timezone(&Utc)
        });
        prop_oneof![
            6 => (near, -200_000i64..200_000, 0u32..1_000_000_000).prop_map(|(at, seconds, nanos)| {
                at + TimeDelta::seconds(seconds) + TimeDelta::nanoseconds(i64::from(nanos % 3 * 500_000_000))
            }),
            3 => (-5_000_000_000i64..5_000_000_000).prop_map(|seconds| {
                DateTime::from_timestamp(seconds, 0).expect("in chrono's range")
            }),
            1 => prop::sample::select(vec![DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC]),
        ]
    }

    fn every() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(
                &[
                    "15m",
                    "every 1h30m",
                    "1s",
                    "0s",
                    "-1m",
                    "every",
                    "every ",
                    "10y",
                    "11y",
                    "500ms",
                    "1.5s",
                    "EVERY 1d",
                    "every1d",
                    "1h 30m",
                    "18446744073709551615s",
                    "3652d",
                    "3653d",
                ][..]
            )
            .prop_map(str::to_string),
            tricky_text(),
        ]
    }

    fn at() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(
                &[
                    "2026-12-01T09:00:00+01:00",
                    "2026-03-29 02:30",
                    "2026-10-25 02:30",
                    "2026-10-25T02:30:00",
                    "9999-12-31 23:59",
                    "0000-01-01 00:00",
                    "+275760-09-13T00:00:00Z",
                    "2026-02-30 10:00",
                    "2026-12-01T09:00:00.123456789Z",
                    "1969-07-20T20:17:00Z",
                    "tomorrow",
                    "",
                ][..]
            )
            .prop_map(str::to_string),
            tricky_text(),
        ]
    }

    const POLICIES: &[&str] = &[
        "skip",
        "run_once",
        "catch_up",
        "catch_up max_runs=3 window=24h",
        "catch_up max_runs=100 window=1h",
        "catch_up max_runs=0",
        "catch_up window=0s",
        "catch_up max_runs=99999999999",
        "catch_up window=600000000y",
        "catch_up max_runs=1 window=1s",
        "skip max_runs=1",
        "bogus",
        "",
    ];

    pub fn strategy() -> impl Strategy<Value = CronCase> {
        let samples: Vec<CronCase> = corpus("cron")
            .iter()
            .map(|(_, text)| parse_case(text))
            .collect();
        let kind_and_expression = prop_oneof![
            8 => expression().prop_map(|expression| ("cron".to_string(), expression)),
            1 => every().prop_map(|expression| ("every".to_string(), expression)),
            1 => at().prop_map(|expression| ("at".to_string(), expression)),
            1 => (prop::sample::select(&[" CRON ", "weekly", "At", ""][..]), expression())
                .prop_map(|(kind, expression)| (kind.to_string(), expression)),
        ];
        let generated = (
            kind_and_expression,
            prop::sample::select(TIMEZONES),
            instant(),
            prop::sample::select(POLICIES),
            prop_oneof![Just(0i64), 0i64..7_200, 0i64..200_000, Just(-60)],
        )
            .prop_map(
                |((kind, expression), timezone, now, missed, due_before_now)| CronCase {
                    kind,
                    expression,
                    timezone: timezone.to_string(),
                    now,
                    missed: missed.to_string(),
                    due_before_now,
                },
            );
        let resampled = (prop::sample::select(samples), instant()).prop_map(|(mut case, now)| {
            case.now = now;
            case
        });
        prop_oneof![4 => generated, 1 => resampled]
    }
}

#[test]
fn cron() {
    use cron_target::*;
    replay("cron", parse_case, check);
    run(runner(REGRESSIONS, 300), strategy(), |case| check(&case));
}

// ---------------------------------------------------------------------------------------------
// Target: format — a model's Markdown as Telegram HTML, cut into messages.
// ---------------------------------------------------------------------------------------------

mod format_target {
    use super::*;

    use clawvisor::telegram::format::{
        TELEGRAM_MESSAGE_LIMIT, markdown_to_html, plain_text, split_html, visible_len_utf16,
    };

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/format.txt";

    const TAGS: &[&str] = &["b", "i", "s", "code", "pre", "a", "blockquote"];

    /// Reads Telegram HTML independently of the code under test: its visible text, or why
    /// Telegram would refuse it (a tag it does not support, an unbalanced or badly nested tag,
    /// a bare `<`, `>` or `&`, an attribute it does not take).
    pub fn read_html(html: &str) -> Result<String, String> {
        let mut open: Vec<&str> = Vec::new();
        let mut visible = String::new();
        let mut rest = html;
        while let Some(character) = rest.chars().next() {
            match character {
                '<' => {
                    let end = rest.find('>').ok_or("a `<` that starts no tag")?;
                    let tag = &rest[1..end];
                    rest = &rest[end + 1..];
                    if let Some(name) = tag.strip_prefix('/') {
                        match open.pop() {
                            Some(opened) if opened == name => {}
                            other => return Err(format!("`</{name}>` closes {other:?}")),
                        }
                        continue;
                    }
                    let (name, attributes) = tag.split_once(' ').unwrap_or((tag, ""));
                    let name = TAGS
                        .iter()
                        .find(|known| **known == name)
                        .ok_or_else(|| format!("unsupported tag `<{tag}>`"))?;
                    let attributes_ok = match *name {
                        "a" => attributes
                            .strip_prefix("href=\"")
                            .and_then(|value| value.strip_suffix('"'))
                            .is_some_and(|value| !value.contains(['"', '<', '>'])),
                        "code" => {
                            attributes.is_empty()
                                || attributes
                                    .strip_prefix("class=\"language-")
                                    .and_then(|value| value.strip_suffix('"'))
                                    .is_some_and(|language| {
                                        !language.is_empty()
                                            && language.chars().all(|c| {
                                                c.is_ascii_alphanumeric() || "+-#._".contains(c)
                                            })
                                    })
                        }
                        _ => attributes.is_empty(),
                    };
                    if !attributes_ok {
                        return Err(format!("bad attributes in `<{tag}>`"));
                    }
                    // Telegram: nothing inside inline code; only `code` directly inside `pre`;
                    // no blockquote in a blockquote.
                    match (open.last(), *name) {
                        (Some(&"code"), _) => return Err(format!("`<{name}>` inside code")),
                        (Some(&"pre"), "code") => {}
                        (Some(&"pre"), _) => return Err(format!("`<{name}>` inside pre")),
                        (_, "blockquote") if open.contains(&"blockquote") => {
                            return Err("a blockquote inside a blockquote".into());
                        }
                        _ => {}
                    }
                    open.push(name);
                }
                '&' => {
                    let (entity, decoded) = [
                        ("&amp;", '&'),
                        ("&lt;", '<'),
                        ("&gt;", '>'),
                        ("&quot;", '"'),
                    ]
                    .into_iter()
                    .find(|(entity, _)| rest.starts_with(entity))
                    .ok_or_else(|| {
                        format!(
                            "a bare `&` before {:?}",
                            rest.chars().take(8).collect::<String>()
                        )
                    })?;
                    visible.push(decoded);
                    rest = &rest[entity.len()..];
                }
                '>' => return Err("a bare `>`".into()),
                _ => {
                    visible.push(character);
                    rest = &rest[character.len_utf8()..];
                }
            }
        }
        if !open.is_empty() {
            return Err(format!("left open: {open:?}"));
        }
        Ok(visible)
    }

    /// `parts` in order, with only whitespace between and around them, make up `whole`.
    fn nothing_lost(whole: &str, parts: &[String]) -> Result<(), String> {
        let mut rest = whole;
        for part in parts {
            let at = rest
                .find(part.as_str())
                .ok_or_else(|| format!("part {part:?} is not next in the text"))?;
            if !rest[..at].trim().is_empty() {
                return Err(format!("{:?} was lost before part {part:?}", &rest[..at]));
            }
            rest = &rest[at + part.len()..];
        }
        if !rest.trim().is_empty() {
            return Err(format!("{rest:?} was lost at the end"));
        }
        Ok(())
    }

    #[derive(Debug, Clone)]
    pub struct FormatCase {
        pub markdown: String,
        pub limit: usize,
    }

    pub fn parse_case(text: &str) -> FormatCase {
        FormatCase {
            markdown: text.to_string(),
            limit: TELEGRAM_MESSAGE_LIMIT,
        }
    }

    /// The property: the HTML is what Telegram accepts; every part of the split is valid on its
    /// own, non-blank, at most `limit` UTF-16 units of visible text; together the parts hold
    /// the whole visible text. Also the raw text split as if it were HTML (the sender's
    /// fallback reads any text): no panic, within the limit, nothing lost.
    pub fn check(case: &FormatCase) -> Result<(), TestCaseError> {
        let html = markdown_to_html(&case.markdown);
        prop_assert_eq!(
            &html,
            &markdown_to_html(&case.markdown),
            "not deterministic"
        );
        let visible = read_html(&html).map_err(|why| {
            TestCaseError::fail(format!(
                "markdown_to_html gave invalid HTML ({why}): {html:?}"
            ))
        })?;
        prop_assert_eq!(&visible, &plain_text(&html));
        let parts = split_html(&html, case.limit);
        let mut texts = Vec::new();
        for part in &parts {
            let text = read_html(part).map_err(|why| {
                TestCaseError::fail(format!("part is invalid HTML ({why}): {part:?}"))
            })?;
            let units: usize = text.chars().map(char::len_utf16).sum();
            prop_assert!(
                units <= case.limit.max(2),
                "a part holds {} UTF-16 units (limit {}): {:?}",
                units,
                case.limit,
                part
            );
            prop_assert!(!text.trim().is_empty(), "blank part {:?}", part);
            texts.push(text);
        }
        nothing_lost(&visible, &texts).map_err(TestCaseError::fail)?;

        let raw_parts = split_html(&case.markdown, case.limit);
        for part in &raw_parts {
            prop_assert!(visible_len_utf16(part) <= case.limit.max(2));
        }
        let raw_texts: Vec<String> = raw_parts.iter().map(|part| plain_text(part)).collect();
        nothing_lost(&plain_text(&case.markdown), &raw_texts).map_err(TestCaseError::fail)?;
        Ok(())
    }

    const MARKDOWN_PIECES: &[&str] = &[
        "**",
        "*",
        "_",
        "__",
        "~~",
        "~",
        "`",
        "```",
        "```rust\n",
        "\n```\n",
        "> ",
        "> > ",
        "# ",
        "### ",
        "- ",
        "* ",
        "1. ",
        "  - ",
        "[link](https://example.com/a_b)",
        "[x](javascript:x)",
        "](",
        "[",
        "]",
        "(",
        ")",
        "<b>",
        "</i>",
        "<br>",
        "&amp;",
        "&",
        "&#128512;",
        "&lt",
        "<",
        ">",
        "\"",
        "\n",
        "\n\n",
        "  \n",
        " ",
        "\t",
        "\\*",
        "\\",
        "---\n",
        "|a|b|\n|-|-|\n",
        "word",
        "snake_case_name",
        "https://example.com",
        "<https://x.y>",
        "!",
        ".",
        "。",
        "?",
        "…",
    ];

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => prop::sample::select(MARKDOWN_PIECES).prop_map(str::to_string),
            2 => "[a-z]{1,8}",
            2 => tricky_text(),
            1 => ("[a-z]", 100usize..600).prop_map(|(letter, count)| letter.repeat(count)),
        ]
    }

    fn limit() -> impl Strategy<Value = usize> {
        prop_oneof![
            3 => Just(TELEGRAM_MESSAGE_LIMIT),
            3 => 0usize..40,
            1 => 40usize..400,
        ]
    }

    pub fn strategy() -> impl Strategy<Value = FormatCase> {
        let samples: Vec<String> = corpus("format").into_iter().map(|(_, text)| text).collect();
        let generated = prop::collection::vec(piece(), 0..60).prop_map(|pieces| pieces.concat());
        let snippets = prop_oneof![
            prop::sample::select(MARKDOWN_PIECES).prop_map(str::to_string),
            tricky_text(),
        ];
        let mutated = (
            prop::sample::select(samples),
            prop::collection::vec(text_edit(snippets), 0..6),
        )
            .prop_map(|(mut markdown, edits)| {
                for edit in &edits {
                    edit.apply(&mut markdown);
                }
                markdown
            });
        (prop_oneof![3 => generated, 1 => mutated], limit())
            .prop_map(|(markdown, limit)| FormatCase { markdown, limit })
    }
}

#[test]
fn format() {
    use format_target::*;
    // The oracle itself refuses what Telegram refuses, so that a pass means something.
    for html in [
        "<b>open",
        "x</b>",
        "<b><i>x</b></i>",
        "<u>x</u>",
        "a & b",
        "a > b",
        "<a href=\"x\" onclick=\"y\">x</a>",
        "<code><b>x</b></code>",
        "<pre><b>x</b></pre>",
        "<blockquote><blockquote>x</blockquote></blockquote>",
        "<code class=\"language-\">x</code>",
    ] {
        assert!(read_html(html).is_err(), "the oracle accepts {html:?}");
    }
    assert_eq!(
        read_html("<pre><code class=\"language-rust\">&lt;x&gt; &amp;</code></pre>").as_deref(),
        Ok("<x> &")
    );
    replay("format", parse_case, check);
    run(runner(REGRESSIONS, 300), strategy(), |case| check(&case));
}

// ---------------------------------------------------------------------------------------------
// Target: studio — the HTTP API of a real daemon, called in-process.
// ---------------------------------------------------------------------------------------------

mod studio_target {
    use super::json_edits::{self, JsonEdit};
    use super::*;

    use axum::body::Body;
    use axum::http::{Request, header};
    use serde_json::Value;
    use tower::ServiceExt;

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/studio.txt";

    /// How long one request may take: the model answers at once, so a request still pending
    /// after this hangs.
    const ANSWER_WITHIN: Duration = Duration::from_secs(20);

    /// One HTTP request.
    #[derive(Debug, Clone)]
    pub struct ApiRequest {
        pub method: String,
        pub target: String,
        pub headers: Vec<(String, String)>,
        pub body: Vec<u8>,
    }

    /// Reads a corpus file: `METHOD TARGET`, header lines, a blank line, the body.
    pub fn parse_case(text: &str) -> ApiRequest {
        let (head, body) = text.split_once("\n\n").unwrap_or((text, ""));
        let mut lines = head.lines();
        let first = lines.next().unwrap_or_default();
        let (method, target) = first.split_once(' ').unwrap_or((first, "/"));
        let headers = lines
            .filter_map(|line| line.split_once(": "))
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        ApiRequest {
            method: method.to_string(),
            target: target.to_string(),
            headers,
            body: body.trim_end_matches('\n').as_bytes().to_vec(),
        }
    }

    fn is_api(path: &str) -> bool {
        path.starts_with("/api/") || path.starts_with("/v1/")
    }

    /// The property: no request makes Studio fail (5xx) or hang; every API error is JSON
    /// `{"error": {"message": "..."}}` with a message; every API success is JSON or an event
    /// stream.
    pub async fn check(router: &axum::Router, request: &ApiRequest) -> Result<(), TestCaseError> {
        let mut builder = Request::builder()
            .method(request.method.as_str())
            .uri(request.target.as_str());
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        // What no HTTP server would hand to the router (an unparsable target or header) is
        // not an input of this target.
        let Ok(http_request) = builder.body(Body::from(request.body.clone())) else {
            return Ok(());
        };
        let path = http_request.uri().path().to_string();
        let head = http_request.method() == axum::http::Method::HEAD;
        let shown = format!("{} {}", request.method, request.target);
        let response = tokio::time::timeout(ANSWER_WITHIN, router.clone().oneshot(http_request))
            .await
            .map_err(|_| TestCaseError::fail(format!("{shown}: no answer in {ANSWER_WITHIN:?}")))?
            .expect("the router is infallible");
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if content_type.starts_with("text/event-stream") {
            prop_assert!(
                status.is_success(),
                "{}: {} as an event stream",
                shown,
                status
            );
            return Ok(());
        }
        let body = tokio::time::timeout(
            ANSWER_WITHIN,
            axum::body::to_bytes(response.into_body(), 16 << 20),
        )
        .await
        .map_err(|_| TestCaseError::fail(format!("{shown}: the body never ended")))?
        .map_err(|error| TestCaseError::fail(format!("{shown}: unreadable body: {error}")))?;
        let text = String::from_utf8_lossy(&body);
        prop_assert!(!status.is_server_error(), "{}: {} {}", shown, status, text);
        if !is_api(&path) || head {
            return Ok(());
        }
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        if status.is_client_error() {
            prop_assert!(
                content_type.starts_with("application/json"),
                "{}: {} with content type {:?}: {}",
                shown,
                status,
                content_type,
                text
            );
            let message = json
                .as_ref()
                .and_then(|json| json["error"]["message"].as_str())
                .unwrap_or_default();
            prop_assert!(
                !message.trim().is_empty(),
                "{}: {} not in the API's error shape: {}",
                shown,
                status,
                text
            );
        } else {
            prop_assert!(
                json.is_some(),
                "{}: {} but not JSON: {}",
                shown,
                status,
                text
            );
        }
        Ok(())
    }

    // --- Strategies ---------------------------------------------------------------------------

    const METHODS: &[&str] = &[
        "GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS", "TRACE", "CONNECT", "FUZZ",
    ];

    const SEGMENTS: &[&str] = &[
        "ada",
        "nobody",
        "1",
        "2",
        "3",
        "0",
        "-1",
        "987654",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999",
        "abc",
        "1.5",
        "1e3",
        "%20",
        "%00",
        "%FF",
        "%ZZ",
        "..",
        "%2e%2e",
        "%2F",
        "h-nothing",
        "archive",
        "restore",
        "redact",
        "purge",
        "reclassify",
        "bogus",
        "%C3%BC",
        "notes",
        "write_file",
        "decision",
        "cancel",
        "pause",
        "resume",
        "chat",
        "skills",
        "",
        "api",
        "v1",
    ];

    fn segment() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            6 => prop::sample::select(SEGMENTS).prop_map(str::to_string),
            1 => "[a-zA-Z0-9._~-]{1,12}",
            1 => ("[a-z]", 200usize..400).prop_map(|(letter, count)| letter.repeat(count)),
        ]
    }

    const QUERY_KEYS: &[&str] = &[
        "status", "agent", "before", "limit", "q", "days", "all", "owner", "token", "chat", "kind",
        "x",
    ];

    const QUERY_VALUES: &[&str] = &[
        "",
        "1",
        "0",
        "-1",
        "abc",
        "99999999999999999999",
        "4294967296",
        "pending",
        "succeeded",
        "exploded",
        "%ZZ",
        "ada",
        "%00",
        "1e3",
        "true",
        "yes",
        "%C3%BC",
        "a+b",
        "%2B",
    ];

    fn query() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            4 => prop::collection::vec(
                (prop::sample::select(QUERY_KEYS), prop::sample::select(QUERY_VALUES)),
                0..4,
            )
            .prop_map(|pairs| {
                pairs
                    .iter()
                    .map(|(key, value)| format!("{key}={value}"))
                    .collect::<Vec<_>>()
                    .join("&")
            }),
            1 => prop::sample::select(&["&&&", "=", "a=1&a=2", "%", "limit", "limit=1&limit=x", "?"][..])
                .prop_map(str::to_string),
        ]
    }

    const HEADERS: &[(&str, &str)] = &[
        ("host", "127.0.0.1:7070"),
        ("host", "localhost"),
        ("host", "[::1]:7070"),
        ("host", "evil.example"),
        ("host", "127.0.0.1:notaport"),
        ("host", ""),
        ("origin", "http://127.0.0.1:7070"),
        ("origin", "http://evil.example"),
        ("origin", "null"),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-origin"),
        ("content-type", "application/json"),
        ("content-type", "application/json; charset=utf-8"),
        ("content-type", "text/plain"),
        ("content-type", "application/x-www-form-urlencoded"),
        ("content-type", "multipart/form-data; boundary=x"),
        ("authorization", "Bearer nope"),
        ("authorization", "Basic YTpi"),
        ("cookie", "clawvisor_session=bogus"),
        ("cookie", "clawvisor_session="),
        ("x-csrf-token", "nope"),
        ("accept", "text/event-stream"),
        ("content-length", "5"),
        ("transfer-encoding", "chunked"),
    ];

    fn json_strings() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            3 => prop::sample::select(&[
                "", " ", "ada", "nobody", "approve", "deny", "maybe", "cron", "every", "at",
                "0 9 * * 1-5", "61 * * * *", "15m", "2026-12-01 09:00", "UTC", "Mars/Olympus",
                "skip", "catch_up max_runs=0", "trust_first", "supervised", "yolo", "secret",
                "deny", "require_confirmation", "local", "tg", "user", "system", "assistant",
                "tool", "text", "studio:fuzz", "tg:42", "../etc", "scripted-model",
            ][..])
            .prop_map(str::to_string),
            1 => tricky_text(),
            1 => "\\PC{0,10}",
        ]
    }

    fn json_keys() -> impl Strategy<Value = String> + Clone {
        prop::sample::select(
            &[
                "model",
                "messages",
                "role",
                "content",
                "stream",
                "user",
                "autonomy",
                "paused",
                "enabled",
                "text",
                "chat",
                "decision",
                "grant_minutes",
                "effect",
                "tool",
                "agent",
                "channel",
                "pattern",
                "description",
                "name",
                "prompt",
                "kind",
                "expression",
                "timezone",
                "missed_policy",
                "target",
                "sensitivity",
                "type",
                "colour",
            ][..],
        )
        .prop_map(str::to_string)
    }

    #[derive(Debug, Clone)]
    pub enum RequestEdit {
        Method(&'static str),
        /// Replaces one path segment.
        Segment(Index, String),
        AppendSegment(String),
        Query(String),
        Header(&'static str, &'static str),
        RemoveHeader(Index),
        Body(JsonEdit),
        RawBody(Vec<u8>),
    }

    fn request_edit() -> impl Strategy<Value = RequestEdit> {
        let values = json_edits::value(json_strings(), json_keys());
        prop_oneof![
            2 => prop::sample::select(METHODS).prop_map(RequestEdit::Method),
            3 => (any::<Index>(), segment()).prop_map(|(at, value)| RequestEdit::Segment(at, value)),
            1 => segment().prop_map(RequestEdit::AppendSegment),
            2 => query().prop_map(RequestEdit::Query),
            2 => prop::sample::select(HEADERS).prop_map(|(name, value)| RequestEdit::Header(name, value)),
            1 => any::<Index>().prop_map(RequestEdit::RemoveHeader),
            5 => json_edits::edit(values, json_keys()).prop_map(RequestEdit::Body),
            1 => prop_oneof![
                prop::sample::select(&["", "{", "{not json", "null", "[]", "1", "\"s\"", "{\"a\":}", "\u{feff}{}"][..])
                    .prop_map(|text| text.as_bytes().to_vec()),
                prop::collection::vec(any::<u8>(), 0..32),
            ]
            .prop_map(RequestEdit::RawBody),
        ]
    }

    impl RequestEdit {
        fn apply(&self, request: &mut ApiRequest) {
            let (path, query) = match request.target.split_once('?') {
                Some((path, query)) => (path.to_string(), Some(query.to_string())),
                None => (request.target.clone(), None),
            };
            let join = |path: String, query: Option<String>| match query {
                Some(query) => format!("{path}?{query}"),
                None => path,
            };
            match self {
                RequestEdit::Method(method) => request.method = method.to_string(),
                RequestEdit::Segment(at, value) => {
                    let mut segments: Vec<String> = path.split('/').map(str::to_string).collect();
                    // Never the empty segment before the first slash.
                    let index = 1 + at.index(segments.len().saturating_sub(1).max(1));
                    if index < segments.len() {
                        segments[index] = value.clone();
                    }
                    request.target = join(segments.join("/"), query);
                }
                RequestEdit::AppendSegment(value) => {
                    request.target = join(format!("{path}/{value}"), query);
                }
                RequestEdit::Query(new_query) => {
                    request.target = join(path, Some(new_query.clone()));
                }
                RequestEdit::Header(name, value) => {
                    request.headers.retain(|(existing, _)| existing != name);
                    request.headers.push((name.to_string(), value.to_string()));
                }
                RequestEdit::RemoveHeader(at) => {
                    if !request.headers.is_empty() {
                        request.headers.remove(at.index(request.headers.len()));
                    }
                }
                RequestEdit::Body(edit) => {
                    let mut document: Value =
                        serde_json::from_slice(&request.body).unwrap_or(Value::Null);
                    edit.apply(&mut document);
                    request.body = document.to_string().into_bytes();
                }
                RequestEdit::RawBody(body) => request.body = body.clone(),
            }
        }
    }

    pub fn strategy() -> impl Strategy<Value = ApiRequest> {
        let samples: Vec<ApiRequest> = corpus("studio")
            .iter()
            .map(|(_, text)| parse_case(text))
            .collect();
        (
            prop::sample::select(samples),
            prop::collection::vec(request_edit(), 0..4),
        )
            .prop_map(|(mut request, edits)| {
                for edit in &edits {
                    edit.apply(&mut request);
                }
                request
            })
    }

    /// A real daemon with one agent (`ada`) on a scripted model that answers every message at
    /// once (never with a tool call, so that no request waits for an approval), and Studio's
    /// router for it.
    pub struct Studio {
        pub harness: clawvisor::testkit::harness::Harness,
        _llm: clawvisor::testkit::scripted_llm::ScriptedLlm,
        pub router: axum::Router,
    }

    impl Studio {
        pub async fn start() -> Studio {
            use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
            use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
            let script = Script::new().rule(Rule::text("Hello from ada."));
            let llm = ScriptedLlm::start(script).await.expect("model");
            let mut options = HarnessOptions::new(llm.base_url());
            options.agents = vec![agent_toml(
                "ada",
                "tools = [\"write_file\", \"current_time\"]\nautonomy = \"require_approval\"",
            )];
            let harness = Harness::start(options).await.expect("daemon");
            // A request that brings no credentials of its own gets the daemon's local access
            // token, so that the inputs reach the handlers and not only the guard.
            let token = harness.daemon().studio_token().expect("Studio runs");
            let bearer: axum::http::HeaderValue = format!("Bearer {}", token.expose())
                .parse()
                .expect("a hex token is a valid header value");
            let router = clawvisor::studio::router(harness.daemon().studio_state()).layer(
                axum::middleware::map_request(move |mut request: axum::extract::Request| {
                    let headers = request.headers_mut();
                    if !headers.contains_key("authorization") && !headers.contains_key("cookie") {
                        headers.insert("authorization", bearer.clone());
                    }
                    async move { request }
                }),
            );
            Studio {
                harness,
                _llm: llm,
                router,
            }
        }
    }
}

#[test]
fn studio() {
    use studio_target::*;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let studio = runtime.block_on(Studio::start());
    // Something to find by id: a run with its steps, a session.
    runtime.block_on(async {
        let chat = clawvisor::domain::ChatKey::cli("fuzz");
        studio
            .harness
            .ask("ada", &chat, "hello")
            .await
            .expect("an answer");
    });
    let router = &studio.router;
    replay("studio", parse_case, |request| {
        runtime.block_on(check(router, request))
    });
    run(runner(REGRESSIONS, 250), strategy(), |request| {
        runtime.block_on(check(router, &request))
    });
    runtime.block_on(studio.harness.stop());
}

// ---------------------------------------------------------------------------------------------
// Target: forum topics — `message_thread_id`, `is_topic_message` and `is_forum` of any shape on
// a stored update, read the way the bot reads it (issue #18).
// ---------------------------------------------------------------------------------------------

mod forum_topics_target {
    use super::*;

    use clawvisor::domain::ChatKey;
    use clawvisor::telegram::intake::{self, Intake};
    use serde_json::{Value, json};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/forum-topics.txt";

    /// A field's value of any JSON shape, with the edges a thread id can hit; `None`: absent.
    fn field(typical: Value) -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            2 => Just(Some(typical)),
            1 => Just(None),
            4 => prop::sample::select(vec![
                json!(0), json!(1), json!(-1), json!(-7), json!(i32::MAX), json!(i32::MIN),
                json!(i64::from(i32::MAX) + 1), json!(i64::MAX), json!(u64::MAX), json!(1e300),
                json!(7.5), json!("7"), json!(""), json!(null), json!(true), json!(false),
                json!([7]), json!({"id": 7}),
            ])
            .prop_map(Some),
            2 => any::<i64>().prop_map(|n| Some(json!(n))),
        ]
    }

    /// A message in a chat of some type, with thread fields of any shape.
    pub fn strategy() -> impl Strategy<Value = String> {
        (
            field(json!(7)),
            field(json!(true)),
            field(json!(true)),
            prop::sample::select(vec!["supergroup", "group", "private", "channel"]),
            any::<bool>(),
            "\\PC{0,24}",
        )
            .prop_map(|(thread, topic, forum, kind, reply, text)| {
                let chat_id = if kind == "private" { 42 } else { -1_001_234_567_890_i64 };
                let mut chat = json!({"id": chat_id, "type": kind, "title": "Home", "first_name": "Ada"});
                if let Some(forum) = forum {
                    chat["is_forum"] = forum;
                }
                let mut message = json!({
                    "message_id": 12,
                    "date": 1_700_000_000,
                    "chat": chat,
                    "from": {"id": 42, "is_bot": false, "first_name": "Ada"},
                    "text": format!("@kiki_bot {text}"),
                });
                if let Some(thread) = thread.clone() {
                    message["message_thread_id"] = thread;
                }
                if let Some(topic) = topic {
                    message["is_topic_message"] = topic;
                }
                if reply {
                    let mut root = message.clone();
                    root["message_id"] = thread.unwrap_or(json!(7));
                    root["from"] = json!({"id": 777, "is_bot": true, "first_name": "Kiki", "username": "kiki_bot"});
                    message["reply_to_message"] = root;
                }
                json!({"update_id": 5001, "message": message}).to_string()
            })
    }

    /// The properties: the general Telegram ones, and a topic only when Telegram marked the
    /// message a topic message with a positive thread id; its key names the chat and the topic.
    pub fn check(payload: &str) -> Result<(), TestCaseError> {
        super::telegram_target::check(payload)?;
        let raw: Value = serde_json::from_str(payload).unwrap_or(Value::Null);
        let parsed = serde_json::from_str::<teloxide::types::Update>(payload).ok();
        match intake::read(payload, super::telegram_target::BOT_ID, "kiki_bot") {
            Intake::Message(message) => {
                let key = message.chat();
                prop_assert_eq!(ChatKey::parse(key.as_str()), Some(key.clone()));
                prop_assert_eq!(key.telegram_chat_id(), Some(message.chat_id));
                prop_assert_eq!(key.telegram_thread_id(), message.thread_id);
                if let Some(thread) = message.thread_id {
                    prop_assert!(thread > 0, "thread {}", thread);
                    prop_assert_eq!(&raw["message"]["is_topic_message"], &json!(true));
                    prop_assert_eq!(&raw["message"]["message_thread_id"], &json!(thread));
                    prop_assert_eq!(key.as_str(), format!("tg:{}/{thread}", message.chat_id));
                } else {
                    prop_assert_eq!(key, ChatKey::telegram(message.chat_id));
                }
                if let Some(update) = &parsed {
                    prop_assert_eq!(intake::topic(update), message.thread_id);
                }
            }
            _ => {
                if let Some(update) = &parsed {
                    let _ = intake::topic(update);
                }
            }
        }
        Ok(())
    }
}

#[test]
fn forum_topics() {
    use forum_topics_target::*;
    // The committed Telegram corpus holds a topic message; every input passes these properties.
    replay(
        "telegram",
        |text| text.trim_end_matches('\n').to_string(),
        |payload| check(payload),
    );
    run(runner(REGRESSIONS, 400), strategy(), |payload| {
        check(&payload)
    });
}

// ---------------------------------------------------------------------------------------------
// Target `timezone`: zone names as people type them (`/timezone`, Studio, the schedule tools)
// and as operators write them (`timezone` in the config and in agent files).
// ---------------------------------------------------------------------------------------------

mod timezone_target {
    use super::*;
    use clawvisor::config::{self, ConfigError, Overrides};
    use clawvisor::schedule::{ScheduleError, parse_timezone};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/timezone.txt";

    /// Names that are valid, nearly valid, or shaped like what people write instead.
    pub fn strategy() -> impl Strategy<Value = String> {
        let known = any::<Index>().prop_map(|index| {
            let zones = chrono_tz::TZ_VARIANTS;
            zones[index.index(zones.len())].name().to_string()
        });
        let typo = (any::<Index>(), any::<Index>(), any::<char>(), 0..4u8).prop_map(
            |(zone, at, inserted, how)| {
                let zones = chrono_tz::TZ_VARIANTS;
                let mut chars: Vec<char> = zones[zone.index(zones.len())].name().chars().collect();
                let position = at.index(chars.len());
                match how {
                    0 => {
                        chars.remove(position);
                    }
                    1 => chars.insert(position, inserted),
                    2 => chars[position] = inserted,
                    _ => chars.iter_mut().for_each(|c| *c = c.to_ascii_uppercase()),
                }
                chars.into_iter().collect()
            },
        );
        let city = any::<Index>().prop_map(|index| {
            let zones = chrono_tz::TZ_VARIANTS;
            let name = zones[index.index(zones.len())].name();
            name.rsplit('/').next().unwrap_or(name).replace('_', " ")
        });
        let offset = ("(UTC|GMT|utc|)", "[+-−]", 0..40u32, "(|:00|00|:30)")
            .prop_map(|(prefix, sign, hours, minutes)| format!("{prefix}{sign}{hours}{minutes}"));
        prop_oneof![
            3 => known,
            4 => typo,
            2 => city,
            2 => offset,
            2 => "[A-Za-z/_+\\-0-9 :.]{0,40}",
            1 => any::<String>(),
            1 => "\\PC{0,300}",
        ]
    }

    /// The property: reading never panics; an accepted name is canonical and reads back to the
    /// same zone; a refusal says so, echoes a bounded input, and any "did you mean" names a zone
    /// that exists.
    pub fn check_name(name: &String) -> Result<(), TestCaseError> {
        match parse_timezone(name) {
            Ok(zone) => {
                prop_assert_eq!(parse_timezone(zone.name()), Ok(zone));
                prop_assert!(
                    zone.name().eq_ignore_ascii_case(name.trim()),
                    "{name:?} was read as {}",
                    zone.name()
                );
            }
            Err(error) => {
                let text = error.to_string();
                prop_assert!(text.starts_with("unknown timezone `"), "{text}");
                prop_assert!(text.chars().count() < 600, "an overlong message: {text}");
                let ScheduleError::UnknownTimezone { suggestion, .. } = &error else {
                    return Err(TestCaseError::fail(format!(
                        "not UnknownTimezone: {error:?}"
                    )));
                };
                // Every zone name the suggestion proposes (a word with a `/`) exists.
                let proposed = suggestion.iter().flat_map(|text| text.split_whitespace());
                for word in proposed.filter(|word| word.contains('/')) {
                    let word = word.trim_matches(|c: char| "?,()`".contains(c));
                    prop_assert!(
                        parse_timezone(word).is_ok(),
                        "{name:?}: proposed {word:?}, which is not a zone ({text})"
                    );
                }
            }
        }
        Ok(())
    }

    /// The same name as the daemon's `timezone` and as an agent file's: loading accepts it
    /// exactly when `parse_timezone` does (or it is blank: not set), and a refusal names the
    /// file and the key.
    pub fn check_config(name: &String) -> Result<(), TestCaseError> {
        let blank = name.trim().is_empty();
        let valid = blank || parse_timezone(name).is_ok();
        let quoted = toml::Value::String(name.clone()).to_string();
        for in_agent in [false, true] {
            let dir = tempfile::tempdir().expect("temp dir");
            std::fs::create_dir_all(dir.path().join("actors")).expect("temp dir");
            let (daemon_line, agent_line) = if in_agent {
                (String::new(), format!("timezone = {quoted}\n"))
            } else {
                (format!("timezone = {quoted}\n"), String::new())
            };
            std::fs::write(
                dir.path().join("clawvisor.toml"),
                format!(
                    "{daemon_line}data_dir = \"data\"\n[agents]\ndir = \"actors\"\n\
                     [providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n"
                ),
            )
            .expect("temp file");
            std::fs::write(
                dir.path().join("actors/ada.toml"),
                format!(
                    "name = \"ada\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"hi\"\n{agent_line}"
                ),
            )
            .expect("temp file");
            let overrides = Overrides {
                config: Some(dir.path().join("clawvisor.toml")),
                ..Overrides::default()
            };
            let env = BTreeMap::from([("TZ".to_string(), "UTC".to_string())]);
            match config::load_in(&overrides, env, dir.path()) {
                Ok(loaded) => {
                    prop_assert!(valid, "{name:?} was accepted by the config only");
                    // Blank: not set, so the agent has none and the daemon has `TZ`'s.
                    let zone = parse_timezone(name).unwrap_or(chrono_tz::Tz::UTC);
                    if in_agent {
                        let expected = (!blank).then(|| zone.name());
                        prop_assert_eq!(loaded.agents[0].timezone.as_deref(), expected);
                    } else {
                        prop_assert_eq!(loaded.timezone.zone, zone);
                    }
                }
                Err(ConfigError::Key {
                    origin,
                    key,
                    message,
                }) if !valid => {
                    let file = if in_agent {
                        "ada.toml"
                    } else {
                        "clawvisor.toml"
                    };
                    prop_assert!(origin.ends_with(file), "{origin}: {key}: {message}");
                    prop_assert_eq!(key, "timezone");
                    prop_assert!(message.starts_with("unknown timezone"), "{message}");
                }
                Err(error) => {
                    return Err(TestCaseError::fail(format!(
                        "{name:?} (valid: {valid}, in the agent file: {in_agent}): {error}"
                    )));
                }
            }
        }
        Ok(())
    }
}

#[test]
fn timezone() {
    use timezone_target::*;
    replay("timezone", |text| text.to_string(), check_name);
    replay("timezone", |text| text.to_string(), check_config);
    run(runner(REGRESSIONS, 300), strategy(), |name| {
        check_name(&name)
    });
    run(runner(REGRESSIONS, 60), strategy(), |name| {
        check_config(&name)
    });
}

// ---------------------------------------------------------------------------------------------
// Target: voice — voice-note and document updates as `telegram::intake::read` reads them, and
// what the bot then tells the agent and the user about a voice note (`voice::agent_text`,
// `voice::user_notice`).
// ---------------------------------------------------------------------------------------------

mod voice_target {
    use super::json_edits::{self, JsonEdit};
    use super::*;

    use clawvisor::domain::AttachmentKind;
    use clawvisor::telegram::intake::{self, Intake};
    use clawvisor::voice::{self, Unavailable, VoiceOutcome};
    use serde_json::{Value, json};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/voice.txt";
    const BOT_ID: i64 = 777;

    pub fn parse_case(text: &str) -> String {
        text.trim_end_matches('\n').to_string()
    }

    /// Every outcome a voice note can have, with `text` where an outcome carries text.
    fn outcomes(text: &str) -> Vec<VoiceOutcome> {
        vec![
            VoiceOutcome::Transcribed(text.trim().to_string()),
            VoiceOutcome::Transcribed(String::new()),
            VoiceOutcome::Unavailable(Unavailable {
                reason: text.to_string(),
                user_hint: voice::NO_PROVIDER_HINT.to_string(),
            }),
            VoiceOutcome::TooLong {
                limit: Duration::from_secs(600),
            },
            VoiceOutcome::NotDownloaded {
                reason: text.to_string(),
                too_big: false,
            },
            VoiceOutcome::Failed {
                reason: text.to_string(),
                unreadable: true,
            },
        ]
    }

    /// The property: reading never panics and is deterministic; a voice note is a `Voice` file
    /// named `voice-<id>.ogg` whose duration is the update's (when it is one Telegram could send);
    /// every outcome gives the agent a text that says it is a voice note, and the user a sentence
    /// (or nothing, for a transcript without echo).
    pub fn check(payload: &str) -> Result<(), TestCaseError> {
        let first = intake::read(payload, BOT_ID, "kiki_bot");
        prop_assert_eq!(&first, &intake::read(payload, BOT_ID, "kiki_bot"));
        let Intake::Message(message) = first else {
            return Ok(());
        };
        let reported = serde_json::from_str::<Value>(payload)
            .ok()
            .and_then(|update| {
                update
                    .pointer("/message/voice/duration")
                    .and_then(Value::as_u64)
            });
        for file in &message.files {
            prop_assert!(!file.mime.is_empty() && !file.name.is_empty());
            if file.kind != AttachmentKind::Voice {
                prop_assert_eq!(file.duration_secs, 0);
                continue;
            }
            prop_assert!(file.name.starts_with("voice-") && file.name.ends_with(".ogg"));
            if let Some(reported) = reported {
                prop_assert_eq!(file.duration_secs, reported);
            }
            let saved = std::path::PathBuf::from(format!("inbox/1-{}", file.name));
            for outcome in outcomes(&message.text) {
                let text =
                    voice::agent_text(&message.text, file.duration_secs, Some(&saved), &outcome);
                prop_assert!(text.contains("[voice note, "), "{}", text);
                let length = voice::clock_text(file.duration_secs);
                prop_assert!(text.contains(&length), "{} lacks {}", text, length);
                for echo in [false, true] {
                    if let Some(notice) = voice::user_notice(file.duration_secs, &outcome, echo) {
                        prop_assert!(!notice.trim().is_empty());
                    }
                }
            }
        }
        Ok(())
    }

    fn strings() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            2 => prop::sample::select(
                ["", " ", "audio/ogg", "audio/mpeg", "application/pdf", "", "x/y; z", "voice1", "../../etc/passwd", "report.pdf", "a\u{0}b"]
                    .map(str::to_string)
                    .to_vec()
            ),
            2 => tricky_text(),
            1 => "\\PC{0,16}",
        ]
    }

    fn keys() -> impl Strategy<Value = String> + Clone {
        prop::sample::select(
            &[
                "voice",
                "document",
                "audio",
                "caption",
                "duration",
                "file_id",
                "file_unique_id",
                "file_size",
                "mime_type",
                "file_name",
                "text",
                "from",
                "chat",
                "message_id",
            ][..],
        )
        .prop_map(str::to_string)
    }

    /// Numbers Telegram never sends in a voice note: negative, fractional, beyond u32 and u64.
    fn odd_numbers() -> impl Strategy<Value = Value> + Clone {
        prop_oneof![
            Just(json!(-1)),
            Just(json!(0)),
            Just(json!(2.5)),
            Just(json!(u32::MAX)),
            Just(json!(u64::from(u32::MAX) + 1)),
            Just(json!(u64::MAX)),
            Just(json!(i64::MIN)),
            Just(json!(1e308)),
            Just(json!("7")),
            Just(Value::Null),
            (0u64..100_000).prop_map(|n| json!(n)),
        ]
    }

    /// An edit aimed at a voice note's or document's fields, or a generic one.
    #[derive(Debug, Clone)]
    pub enum MediaEdit {
        Json(JsonEdit),
        Field {
            media: &'static str,
            field: &'static str,
            value: Value,
        },
    }

    impl MediaEdit {
        fn apply(&self, update: &mut Value) {
            match self {
                MediaEdit::Json(edit) => edit.apply(update),
                MediaEdit::Field {
                    media,
                    field,
                    value,
                } => {
                    if let Some(object) = update
                        .pointer_mut(&format!("/message/{media}"))
                        .and_then(Value::as_object_mut)
                    {
                        object.insert(field.to_string(), value.clone());
                    }
                }
            }
        }
    }

    fn media_edit() -> impl Strategy<Value = MediaEdit> {
        let field = (
            prop::sample::select(&["voice", "document"][..]),
            prop::sample::select(
                &[
                    "duration",
                    "file_size",
                    "mime_type",
                    "file_id",
                    "file_name",
                    "file_unique_id",
                ][..],
            ),
            prop_oneof![
                2 => odd_numbers(),
                2 => strings().prop_map(Value::String),
                1 => json_edits::value(strings(), keys()),
            ],
        )
            .prop_map(|(media, field, value)| MediaEdit::Field {
                media,
                field,
                value,
            });
        prop_oneof![
            3 => field,
            2 => json_edits::edit(json_edits::value(strings(), keys()), keys()).prop_map(MediaEdit::Json),
        ]
    }

    pub fn strategy() -> impl Strategy<Value = String> {
        let samples: Vec<Value> = corpus("voice")
            .into_iter()
            .filter_map(|(_, text)| serde_json::from_str(&text).ok())
            .collect();
        prop_oneof![
            9 => (
                prop::sample::select(samples),
                prop::collection::vec(media_edit(), 1..5),
            )
                .prop_map(|(mut update, edits)| {
                    for edit in &edits {
                        edit.apply(&mut update);
                    }
                    update.to_string()
                }),
            1 => "\\PC{0,64}",
        ]
    }
}

#[test]
fn voice() {
    use voice_target::*;
    replay("voice", parse_case, |payload| check(payload));
    run(runner(REGRESSIONS, 300), strategy(), |payload| {
        check(&payload)
    });
}

// ---------------------------------------------------------------------------------------------
// Target: transcription — what a transcription server answers, through the client's parser.
// ---------------------------------------------------------------------------------------------

mod transcription_target {
    use super::*;

    use clawvisor::voice::transcribe::parse_answer;
    use serde_json::{Value, json};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/transcription.txt";

    pub fn parse_case(text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    /// The property: deterministic; a transcript is exactly the trimmed `text` string of a JSON
    /// object; anything else is an error that says what is wrong.
    pub fn check(body: &[u8]) -> Result<(), TestCaseError> {
        let first = parse_answer(body);
        prop_assert_eq!(&first, &parse_answer(body));
        let expected = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|value| {
                value
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        match (&first, expected) {
            (Ok(text), Some(expected)) => prop_assert_eq!(text.as_str(), expected.trim()),
            (Err(reason), None) => prop_assert!(!reason.is_empty()),
            (first, expected) => {
                prop_assert!(false, "{:?} but the body's text is {:?}", first, expected)
            }
        }
        Ok(())
    }

    pub fn strategy() -> impl Strategy<Value = Vec<u8>> {
        let texts = prop_oneof![tricky_text(), "\\PC{0,32}".prop_map(String::from)];
        prop_oneof![
            3 => (texts.clone(), prop::collection::vec(("[a-z_]{1,8}", tricky_text()), 0..4))
                .prop_map(|(text, extra)| {
                    let mut object = serde_json::Map::new();
                    for (key, value) in extra {
                        object.insert(key, json!(value));
                    }
                    object.insert("text".into(), json!(text));
                    Value::Object(object).to_string().into_bytes()
                }),
            2 => prop::sample::select(vec![
                json!({"text": 5}), json!({"text": null}), json!({"text": ["a"]}), json!([]),
                json!("text"), json!({"Text": "a"}), json!({"error": {"message": "x"}}),
            ])
            .prop_map(|value| value.to_string().into_bytes()),
            2 => prop::collection::vec(any::<u8>(), 0..256),
            1 => texts.prop_map(String::into_bytes),
        ]
    }
}

#[test]
fn transcription() {
    use transcription_target::*;
    replay("transcription", parse_case, |body| check(body));
    run(runner(REGRESSIONS, 300), strategy(), |body| check(&body));
}

// ---------------------------------------------------------------------------------------------
// Target: send_file — a model's arguments to `send_file`, and the kind chosen for any file.
// ---------------------------------------------------------------------------------------------

mod send_file_target {
    use std::sync::Arc;

    use clawvisor::domain::ChatKey;
    use clawvisor::store::{Store, StoreOptions};
    use clawvisor::tool::{Tool, ToolContext, ToolSettings};
    use clawvisor::tools::send_file::{
        DOCUMENT_LIMIT_BYTES, PHOTO_LIMIT_BYTES, SendAs, SendFileTool, Sniffed, choose_kind, sniff,
    };
    use serde_json::{Value, json};

    use super::*;

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/send_file.txt";

    /// A workspace with the files the corpus names, a store, and a Telegram chat to send to.
    pub struct Bench {
        pub _dir: tempfile::TempDir,
        pub ctx: ToolContext,
        pub spool: PathBuf,
    }

    impl Bench {
        pub fn new() -> Bench {
            let dir = tempfile::tempdir().expect("a temp dir");
            let workspace = dir.path().join("workspace");
            std::fs::create_dir_all(workspace.join("docs")).expect("a workspace");
            let files: [(&str, &[u8]); 5] = [
                ("cat.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR a cat"),
                ("report.pdf", b"%PDF-1.7\n%%EOF\n"),
                ("voice.ogg", b"OggS\0\x02 an ogg page"),
                ("fake.jpg", b"not a picture"),
                ("empty.txt", b""),
            ];
            for (name, bytes) in files {
                std::fs::write(workspace.join(name), bytes).expect("a workspace file");
            }
            std::fs::write(dir.path().join("outside.txt"), b"outside").expect("a file outside");
            let data = dir.path().join("data");
            let store =
                Store::open(&data.join("clawvisor.db"), StoreOptions::default()).expect("a store");
            let spool = clawvisor::store::outbox::spool_dir(store.path());
            let ctx = ToolContext {
                agent: "ada".to_string(),
                chat: ChatKey::telegram(42),
                run_id: 1,
                workspace,
                settings: Arc::new(ToolSettings::default()),
                registry: clawvisor::registry::Registry::new(),
                store,
                cancel: tokio_util::sync::CancellationToken::new(),
                timezone: chrono_tz::Tz::UTC,
                egress: Default::default(),
            };
            Bench {
                _dir: dir,
                ctx,
                spool,
            }
        }

        fn spooled(&self) -> Vec<PathBuf> {
            std::fs::read_dir(&self.spool)
                .map(|entries| entries.filter_map(|e| Some(e.ok()?.path())).collect())
                .unwrap_or_default()
        }

        async fn rows(&self) -> Vec<(String, String, String)> {
            self.ctx
                .store
                .read(|conn| {
                    let mut statement = conn.prepare(
                        "SELECT file_path, file_kind, text FROM outbox WHERE file_path IS NOT NULL ORDER BY id",
                    )?;
                    let rows = statement
                        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(rows)
                })
                .await
                .expect("the outbox reads")
        }
    }

    /// One call: queued and copied exactly once on success, nothing on failure.
    pub async fn check(bench: &Bench, args: &Value) -> Result<(), TestCaseError> {
        let rows_before = bench.rows().await;
        let spool_before = bench.spooled();
        let outcome = SendFileTool.call(args.clone(), &bench.ctx).await;
        let rows_after = bench.rows().await;
        let spool_after = bench.spooled();
        match outcome {
            Ok(output) => {
                prop_assert!(
                    !output.is_error,
                    "a Telegram chat carries files: {}",
                    output.text
                );
                prop_assert_eq!(rows_after.len(), rows_before.len() + 1, "one row queued");
                prop_assert_eq!(spool_after.len(), spool_before.len() + 1, "one copy taken");
                let (path, kind, caption) = rows_after.last().cloned().expect("a row");
                let sent = std::fs::read(&path).expect("the spool copy exists");
                let named = args["path"].as_str().expect("a success had a path");
                let original =
                    std::fs::read(bench.ctx.workspace.join(named.trim_start_matches('/')))
                        .or_else(|_| std::fs::read(named))
                        .expect("the workspace file");
                prop_assert_eq!(&sent, &original, "the copy is the file");
                prop_assert!(!sent.is_empty());
                prop_assert!(caption.chars().count() <= 1024);
                if kind == "photo" {
                    prop_assert_eq!(sniff(&sent), Sniffed::Image);
                    prop_assert!(sent.len() as u64 <= PHOTO_LIMIT_BYTES);
                }
                prop_assert!(["photo", "document", "voice"].contains(&kind.as_str()));
            }
            Err(error) => {
                prop_assert_eq!(
                    rows_after.len(),
                    rows_before.len(),
                    "nothing queued: {}",
                    error
                );
                prop_assert_eq!(
                    spool_after.len(),
                    spool_before.len(),
                    "nothing copied: {}",
                    error
                );
                prop_assert!(!error.to_string().trim().is_empty());
            }
        }
        Ok(())
    }

    /// `choose_kind` on any name, head and size: within Telegram's limits or an error naming them.
    pub fn check_kind(
        name: &str,
        head: &[u8],
        size: u64,
        requested: Option<SendAs>,
    ) -> Result<(), TestCaseError> {
        let first = choose_kind(name, head, size, requested);
        prop_assert_eq!(
            &first,
            &choose_kind(name, head, size, requested),
            "deterministic"
        );
        match first {
            Ok(kind) => {
                prop_assert!(size > 0 && size <= DOCUMENT_LIMIT_BYTES);
                if kind == SendAs::Photo {
                    prop_assert!(size <= PHOTO_LIMIT_BYTES);
                    prop_assert_eq!(sniff(head), Sniffed::Image);
                }
                if let Some(requested) = requested {
                    prop_assert_eq!(kind, requested, "an explicit kind is kept or refused");
                }
            }
            Err(message) => {
                prop_assert!(!message.is_empty());
                if size > DOCUMENT_LIMIT_BYTES {
                    prop_assert!(
                        message.contains("MB"),
                        "a size error names sizes: {}",
                        message
                    );
                }
            }
        }
        Ok(())
    }

    const PATHS: &[&str] = &[
        "cat.png",
        "report.pdf",
        "voice.ogg",
        "fake.jpg",
        "empty.txt",
        "docs",
        "docs/",
        "missing.pdf",
        "../outside.txt",
        "/etc/hostname",
        "",
        ".",
        "./report.pdf",
        "a\u{0}b",
        "C:\\x.pdf",
        "/proc/self/environ",
        "docs/../report.pdf",
    ];

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            4 => prop::sample::select(PATHS).prop_map(|path| Value::String(path.to_string())),
            2 => super::tricky_text().prop_map(Value::String),
            2 => prop::sample::select(&["photo", "document", "voice", "sticker", "PHOTO", ""][..])
                .prop_map(|kind| Value::String(kind.to_string())),
            1 => (1020usize..1030).prop_map(|length| Value::String("c".repeat(length))),
            1 => any::<i64>().prop_map(|number| json!(number)),
            1 => Just(Value::Null),
            1 => Just(json!(["report.pdf"])),
            1 => Just(json!({"path": "report.pdf"})),
        ]
    }

    pub fn args() -> impl Strategy<Value = Value> {
        let keys = prop::sample::select(&["path", "caption", "as", "chat_id", "Path"][..]);
        (
            prop::sample::select(PATHS),
            prop::collection::vec((keys, prop::option::of(value())), 0..4),
        )
            .prop_map(|(path, edits)| {
                let mut args = json!({"path": path});
                for (key, value) in edits {
                    match value {
                        Some(value) => args[key] = value,
                        None => {
                            if let Some(object) = args.as_object_mut() {
                                object.remove(key);
                            }
                        }
                    }
                }
                args
            })
    }

    pub fn kinds() -> impl Strategy<Value = (String, Vec<u8>, u64, Option<SendAs>)> {
        let heads = prop_oneof![
            Just(b"\xFF\xD8\xFF\xE0".to_vec()),
            Just(b"\x89PNG\r\n\x1a\n".to_vec()),
            Just(b"RIFF\0\0\0\0WEBPVP8 ".to_vec()),
            Just(b"OggS\0\x02".to_vec()),
            prop::collection::vec(any::<u8>(), 0..16),
        ];
        let sizes = prop_oneof![
            Just(0u64),
            1u64..4096,
            Just(PHOTO_LIMIT_BYTES),
            Just(PHOTO_LIMIT_BYTES + 1),
            Just(DOCUMENT_LIMIT_BYTES),
            Just(DOCUMENT_LIMIT_BYTES + 1),
            any::<u64>(),
        ];
        let requested = prop::option::of(prop::sample::select(
            &[SendAs::Photo, SendAs::Document, SendAs::Voice][..],
        ));
        (
            prop_oneof![
                prop::sample::select(
                    &[
                        "a.jpg", "b.JPEG", "c.png", "d.webp", "e.pdf", "f", ".jpg", "g.ogg"
                    ][..]
                )
                .prop_map(str::to_string),
                super::tricky_text(),
            ],
            heads,
            sizes,
            requested,
        )
    }
}

#[test]
fn send_file() {
    use send_file_target::*;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let bench = Bench::new();
    replay(
        "send_file",
        |text| serde_json::from_str::<serde_json::Value>(text).unwrap_or(serde_json::Value::Null),
        |args| runtime.block_on(check(&bench, args)),
    );
    run(runner(REGRESSIONS, 300), args(), |args| {
        runtime.block_on(check(&bench, &args))
    });
    run(
        runner(REGRESSIONS, 500),
        kinds(),
        |(name, head, size, requested)| check_kind(&name, &head, size, requested),
    );
}

// ---------------------------------------------------------------------------------------------
// claim_code: what follows `/start` when someone claims a bot (`people::parse_start_argument`).

mod claim_code_target {
    use super::*;

    use clawvisor::people::{StartArgument, parse_start_argument};
    use clawvisor::store::telegram::normalize_code;
    use clawvisor::telegram::pairing;

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/claim_code.txt";

    /// Deterministic; a code is 8 characters of the code alphabet, stored as normalized, and reads
    /// back from its displayed and lower-case forms; blank input is no code; an over-long first
    /// word is never a code.
    pub fn check(args: &str) -> Result<(), TestCaseError> {
        let parsed = parse_start_argument(args);
        prop_assert_eq!(&parsed, &parse_start_argument(args), "deterministic");
        let first = args.split_whitespace().next();
        match &parsed {
            StartArgument::Missing => prop_assert!(first.is_none(), "{args:?} has a word"),
            StartArgument::Code(code) => {
                prop_assert!(pairing::is_code(code), "{code:?}");
                prop_assert_eq!(&normalize_code(code), code);
                prop_assert!(first.is_some_and(|word| word.len() <= 64));
                for form in [pairing::display(code), code.to_lowercase()] {
                    prop_assert_eq!(
                        parse_start_argument(&form),
                        StartArgument::Code(code.clone())
                    );
                }
            }
            StartArgument::Malformed => prop_assert!(first.is_some()),
        }
        Ok(())
    }

    pub fn args() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-HJ-NP-Z2-9]{4}-?[A-HJ-NP-Z2-9]{4}",
            "[a-z0-9 -]{0,12}",
            super::tricky_text(),
            (super::tricky_text(), 0usize..200).prop_map(|(text, times)| text.repeat(times)),
            "\\PC{0,80}",
        ]
    }
}

#[test]
fn claim_code() {
    use claim_code_target::*;
    replay("claim_code", str::to_string, |args| check(args));
    run(runner(REGRESSIONS, 500), args(), |args| check(&args));
}

// ---------------------------------------------------------------------------------------------
// prices: `llm::prices::Prices::price` / `cost` and `candidate_names` on any model name an agent
// file (or Studio) could give. Beyond "no panic": the lookup names start with the name itself,
// are distinct and are all parts of it; a price is found under one of them, in the table it
// names; a cost is finite and never negative, and `unpriced` exactly when no price was found;
// a free provider prices everything at $0.

mod prices_target {
    use super::*;
    use clawvisor::config::PriceConfig;
    use clawvisor::llm::Usage;
    use clawvisor::llm::prices::{
        ModelPrice, PriceSource, Prices, built_in_table, candidate_names,
    };

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/prices.txt";

    pub fn prices() -> Prices {
        let mut operator = BTreeMap::new();
        operator.insert(
            "gpt-4o".to_string(),
            PriceConfig {
                input_per_mtok: 1.0,
                output_per_mtok: 2.0,
            },
        );
        operator.insert(
            "house:free".to_string(),
            PriceConfig {
                input_per_mtok: 3.0,
                output_per_mtok: 3.0,
            },
        );
        Prices::new(operator, ["local".to_string()])
    }

    pub fn check(prices: &Prices, model: &str) -> Result<(), TestCaseError> {
        let names = candidate_names(model);
        prop_assert_eq!(names.first().map(String::as_str), Some(model));
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        prop_assert_eq!(distinct.len(), names.len(), "names repeat: {:?}", names);
        for name in &names {
            prop_assert!(
                model.contains(name.as_str()),
                "{name:?} is not part of {model:?}"
            );
        }
        let usage = Usage {
            input_tokens: 1_234,
            output_tokens: 567,
        };
        let price = prices.price("cloud", model);
        prop_assert_eq!(&price, &prices.price("cloud", model), "deterministic");
        if let ModelPrice::Priced {
            key,
            source,
            price: found,
        } = &price
        {
            prop_assert!(names.contains(key), "{key:?} not among {names:?}");
            if *source == PriceSource::BuiltIn {
                prop_assert_eq!(built_in_table().get(key), Some(found));
            }
        }
        let cost = prices.cost("cloud", model, &usage);
        prop_assert!(cost.usd.is_finite() && cost.usd >= 0.0, "{cost:?}");
        prop_assert_eq!(cost.unpriced, price == ModelPrice::Unpriced);
        prop_assert!(!cost.unpriced || cost.usd == 0.0);
        prop_assert_eq!(prices.price("local", model), ModelPrice::Free);
        Ok(())
    }

    /// Model names grown from real ones: vendors, dates, versions, tags, tricky text.
    pub fn names() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            prop::sample::select(
                &[
                    "gpt-4o",
                    "gpt-4o-mini",
                    "claude-sonnet-4-5",
                    "gemini-2.0-flash",
                    "openai/",
                    "anthropic/",
                    "/",
                    ":free",
                    ":nitro",
                    ":",
                    "-latest",
                    "-2025-04-14",
                    "-20250929",
                    "-001",
                    "-0125",
                    "-",
                    "-1",
                    "models/",
                    "é",
                ][..]
            )
            .prop_map(str::to_string),
            super::tricky_text(),
        ];
        prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
    }
}

#[test]
fn prices() {
    use prices_target::*;
    let table = prices();
    replay("prices", str::to_string, |model| check(&table, model));
    run(runner(REGRESSIONS, 500), names(), |model| {
        check(&table, &model)
    });
}

// ---------------------------------------------------------------------------------------------
// Target: pdf_streams — the bounded inflation check `read_file` runs before lopdf, on PDFs made
// of arbitrary stream dictionaries and data (raw bytes, or zlib of repeated bytes).
// ---------------------------------------------------------------------------------------------

mod pdf_streams_target {
    use super::*;
    use clawvisor::tools::documents::{self, PdfProblem};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/pdf_streams.txt";

    pub fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
        // Never a panic, and the same answer twice.
        let first = documents::check_decompressed_sizes(bytes);
        prop_assert_eq!(&first, &documents::check_decompressed_sizes(bytes));
        if let Err(reason) = &first {
            prop_assert!(reason.ends_with("not read"), "{}", reason);
        }
        match documents::extract_pdf_text(bytes) {
            Ok(pdf) => prop_assert!(pdf.pages_left_out <= pdf.pages),
            Err(PdfProblem::Refused(reason) | PdfProblem::Unreadable(reason)) => {
                prop_assert!(!reason.is_empty())
            }
        }
        Ok(())
    }

    fn zlib(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).expect("compressing into memory");
        encoder.finish().expect("compressing into memory")
    }

    pub fn strategy() -> impl Strategy<Value = Vec<u8>> {
        let dictionary = prop::sample::select(
            &[
                "<< /Filter /FlateDecode >>",
                "<< /Filter [/ASCII85Decode /FlateDecode] >>",
                "<< /Filter /LZWDecode >>",
                "<< /Length 3 0 R >>",
                "<< /Filter (endobj) /F#6cateDecode >>",
                "",
            ][..],
        );
        let data = prop_oneof![
            prop::collection::vec(any::<u8>(), 0..512),
            (any::<u8>(), 0usize..200_000).prop_map(|(byte, count)| zlib(&vec![byte; count])),
        ];
        prop::collection::vec((dictionary, data), 0..4).prop_map(|streams| {
            let mut pdf = b"%PDF-1.7\n".to_vec();
            for (number, (dictionary, data)) in streams.into_iter().enumerate() {
                pdf.extend_from_slice(
                    format!("{} 0 obj {dictionary}\nstream\r\n", number + 1).as_bytes(),
                );
                pdf.extend_from_slice(&data);
                pdf.extend_from_slice(b"\nendstream\nendobj\n");
            }
            pdf.extend_from_slice(b"trailer << /Root 1 0 R >>\n%%EOF\n");
            pdf
        })
    }
}

#[test]
fn pdf_streams() {
    use pdf_streams_target::*;
    run(runner(REGRESSIONS, 200), strategy(), |bytes| check(&bytes));
}

// ---------------------------------------------------------------------------------------------
// Target: job_checks — a job as `clawvisor jobs add` (daemon stopped) and the scheduler check it,
// `NewJob::into_row`, on the cron target's schedules with arbitrary prompts, names and targets.
// ---------------------------------------------------------------------------------------------

mod job_checks_target {
    use super::*;
    use clawvisor::config::SchedulerConfig;
    use clawvisor::domain::ChatKey;
    use clawvisor::jobs::{MAX_NAME_CHARS, MAX_PROMPT_CHARS, NewJob};
    use clawvisor::store::schedules::JobStatus;

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/job_checks.txt";

    #[derive(Debug, Clone)]
    pub struct JobCase {
        pub schedule: cron_target::CronCase,
        pub prompt: String,
        pub name: String,
        pub target: String,
    }

    /// An accepted job is stored active with its first fire after now, a known kind and zone, and
    /// trimmed, bounded texts; a refused one says why.
    pub fn check(case: &JobCase) -> Result<(), TestCaseError> {
        let now = case.schedule.now.timestamp_millis();
        let new_job = NewJob {
            agent: "ada".into(),
            name: case.name.clone(),
            prompt: case.prompt.clone(),
            target: ChatKey::parse(&case.target),
            kind: case.schedule.kind.clone(),
            expression: case.schedule.expression.clone(),
            timezone: case.schedule.timezone.clone(),
            missed_policy: case.schedule.missed.clone(),
            created_by: "operator".into(),
            created_in: None,
        };
        match new_job.into_row(&SchedulerConfig::default(), now) {
            Ok((row, checked)) => {
                prop_assert_eq!(row.status, JobStatus::Active);
                prop_assert!(
                    ["cron", "every", "at"].contains(&row.kind.as_str()),
                    "{}",
                    row.kind
                );
                prop_assert_eq!(row.next_run_ms, Some(checked.next_run_ms));
                prop_assert!(checked.next_run_ms > now, "{:?}", row);
                prop_assert!(clawvisor::schedule::parse_timezone(&row.timezone).is_ok());
                prop_assert_eq!(row.prompt.trim(), row.prompt.as_str());
                prop_assert!(!row.prompt.is_empty());
                prop_assert!(row.prompt.chars().count() <= MAX_PROMPT_CHARS);
                prop_assert!(!row.name.trim().is_empty(), "{:?}", row);
                // A name made from the prompt may end with an ellipsis.
                prop_assert!(row.name.chars().count() <= MAX_NAME_CHARS + 1);
            }
            Err(reason) => prop_assert!(!reason.trim().is_empty()),
        }
        Ok(())
    }

    pub fn strategy() -> impl Strategy<Value = JobCase> {
        let text = prop_oneof![
            Just(String::new()),
            Just("   ".to_string()),
            "[a-zA-Z ]{1,40}",
            any::<String>(),
            (any::<char>(), 0usize..9_000).prop_map(|(c, n)| c.to_string().repeat(n)),
        ];
        let target = prop_oneof![
            Just(String::new()),
            Just("tg:12345".to_string()),
            Just("sched:7".to_string()),
            Just("handoff:1".to_string()),
            any::<String>(),
        ];
        (cron_target::strategy(), text.clone(), text, target).prop_map(
            |(schedule, prompt, name, target)| JobCase {
                schedule,
                prompt,
                name,
                target,
            },
        )
    }
}

#[test]
fn job_checks() {
    use job_checks_target::*;
    run(runner(REGRESSIONS, 300), strategy(), |case| check(&case));
}

/// Restore verification on arbitrary bytes and on damaged real archives: never a panic, never a
/// file written (the target is not created and nothing appears beside it), and a damaged archive
/// that still passes is one whose content is the original's (only gzip header fields such as the
/// time stamp changed).
mod backup_archive_target {
    use super::*;
    use clawvisor::backup;
    use std::sync::OnceLock;

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/backup_archive.txt";

    /// A real archive of a small data directory, made once: (its bytes, its manifest).
    fn original() -> &'static (Vec<u8>, backup::Manifest) {
        static ORIGINAL: OnceLock<(Vec<u8>, backup::Manifest)> = OnceLock::new();
        ORIGINAL.get_or_init(|| {
            let scratch = tempfile::tempdir().expect("a scratch directory");
            let data = scratch.path().join("data");
            let store = clawvisor::store::Store::open(
                &clawvisor::store::Store::path_in(&data),
                clawvisor::store::StoreOptions::default(),
            )
            .expect("a fresh database");
            store.stop_writer();
            std::fs::create_dir_all(data.join("workspaces/ada")).expect("a workspace");
            std::fs::write(data.join("workspaces/ada/notes.txt"), "some notes\n").expect("a file");
            let archive = scratch.path().join("a.tar.gz");
            backup::create_backup(&data, &archive).expect("the backup is written");
            let bytes = std::fs::read(&archive).expect("the archive reads");
            let manifest = backup::verify_archive(bytes.as_slice())
                .expect("the original verifies")
                .manifest;
            (bytes, manifest)
        })
    }

    #[derive(Debug, Clone)]
    pub enum Damage {
        Arbitrary(Vec<u8>),
        Cut(Index),
        Flip(Vec<(Index, u8)>),
        Splice(Index, Vec<u8>),
    }

    pub fn strategy() -> impl Strategy<Value = Damage> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..2048).prop_map(Damage::Arbitrary),
            any::<Index>().prop_map(Damage::Cut),
            prop::collection::vec((any::<Index>(), 1u8..=255), 1..4).prop_map(Damage::Flip),
            (any::<Index>(), prop::collection::vec(any::<u8>(), 1..64))
                .prop_map(|(at, bytes)| Damage::Splice(at, bytes)),
        ]
    }

    pub fn check(damage: Damage) -> Result<(), TestCaseError> {
        let (original, manifest) = original();
        let bytes = match damage {
            Damage::Arbitrary(bytes) => bytes,
            Damage::Cut(at) => original[..at.index(original.len())].to_vec(),
            Damage::Flip(flips) => {
                let mut bytes = original.clone();
                for (at, mask) in flips {
                    let position = at.index(bytes.len());
                    bytes[position] ^= mask;
                }
                bytes
            }
            Damage::Splice(at, insert) => {
                let mut bytes = original.clone();
                let position = at.index(bytes.len());
                bytes.splice(position..position, insert);
                bytes
            }
        };
        match backup::verify_archive(bytes.as_slice()) {
            Ok(verified) => prop_assert_eq!(&verified.manifest, manifest),
            Err(error) => prop_assert!(
                matches!(error, backup::BackupError::Refused(_)),
                "{}",
                error
            ),
        }
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let archive = scratch.path().join("archive.tar.gz");
        std::fs::write(&archive, &bytes).expect("the case is written");
        let target = scratch.path().join("target");
        if backup::restore(&archive, &target, false).is_err() {
            prop_assert!(!target.exists(), "a refused restore created the target");
            let left: Vec<_> = std::fs::read_dir(scratch.path())
                .expect("the scratch directory lists")
                .filter_map(Result::ok)
                .map(|entry| entry.file_name())
                .collect();
            prop_assert_eq!(left, vec![std::ffi::OsString::from("archive.tar.gz")]);
        }
        Ok(())
    }
}

#[test]
fn backup_archive() {
    use backup_archive_target::*;
    run(runner(REGRESSIONS, 200), strategy(), check);
}

// Reload: which settings need a restart, for every pair of config files in the corpus.
// ---------------------------------------------------------------------------------------------

/// The `clawvisor.toml` section of a config corpus case.
fn reload_config_text(case: &str) -> Option<String> {
    let start = case.find("--- clawvisor.toml\n")? + "--- clawvisor.toml\n".len();
    let rest = &case[start..];
    let end = rest.find("\n--- ").map_or(rest.len(), |end| end + 1);
    Some(rest[..end].to_string())
}

#[test]
fn reload_settings_comparison() {
    let configs: Vec<(String, clawvisor::config::Config)> = corpus("config")
        .into_iter()
        .filter_map(|(name, case)| {
            let text = reload_config_text(&case)?;
            let config = clawvisor::config::parse_file(&text, &name).ok()?;
            Some((name, config))
        })
        .collect();
    assert!(configs.len() >= 2, "the corpus has configs that parse");
    for (name, config) in &configs {
        assert!(
            clawvisor::reload::needs_restart(config, config).is_empty(),
            "{name} against itself"
        );
        for (other_name, other) in &configs {
            let forward = clawvisor::reload::needs_restart(config, other);
            let backward = clawvisor::reload::needs_restart(other, config);
            assert_eq!(forward, backward, "{name} / {other_name}: symmetric");
            for setting in &forward {
                assert!(
                    !setting.starts_with("agents") && setting != "mcp.servers",
                    "{name} / {other_name}: `{setting}` is applied live, never a restart"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Target: mcp_startup_wait — `[mcp] startup_wait` (how long a run waits for its agent's MCP
// servers) as `config::load_in` reads it, then as the MCP supervisor turns it into a deadline.
// ---------------------------------------------------------------------------------------------

mod mcp_startup_wait_target {
    use super::*;
    use clawvisor::config::{self, ConfigError, Overrides};
    use clawvisor::protocol::mcp::MAX_STARTUP_WAIT;

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/mcp_startup_wait.txt";

    pub fn parse_case(text: &str) -> String {
        text.trim_end_matches('\n').to_string()
    }

    /// An accepted value becomes a deadline that fits the clock (clamped to the maximum); a
    /// refused one is a key error naming the file and `startup_wait`.
    pub fn check(value: &str) -> Result<(), TestCaseError> {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("actors")).expect("temp dir");
        let quoted = toml::Value::String(value.to_string()).to_string();
        std::fs::write(
            dir.path().join("clawvisor.toml"),
            format!(
                "data_dir = \"data\"\n[agents]\ndir = \"actors\"\n\
                 [providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
                 [mcp]\nstartup_wait = {quoted}\n"
            ),
        )
        .expect("temp file");
        let overrides = Overrides {
            config: Some(dir.path().join("clawvisor.toml")),
            ..Overrides::default()
        };
        let env = BTreeMap::from([("TZ".to_string(), "UTC".to_string())]);
        match config::load_in(&overrides, env, dir.path()) {
            Ok(loaded) => {
                let wait = loaded.config.mcp.startup_wait.0.min(MAX_STARTUP_WAIT);
                prop_assert!(std::time::Instant::now().checked_add(wait).is_some());
                prop_assert!(tokio::time::Instant::now().checked_add(wait).is_some());
            }
            Err(ConfigError::Key {
                origin,
                key,
                message,
            }) => {
                prop_assert!(origin.ends_with("clawvisor.toml"), "{origin}: {key}");
                prop_assert!(key.contains("startup_wait"), "{key}: {message}");
                prop_assert!(!message.trim().is_empty());
            }
            Err(error) => {
                return Err(TestCaseError::fail(format!("{value:?}: {error}")));
            }
        }
        Ok(())
    }

    pub fn strategy() -> impl Strategy<Value = String> {
        let number = prop_oneof![
            (0u64..100_000).prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            Just("18446744073709551615".to_string()),
            Just("-1".to_string()),
            Just("1.5".to_string()),
            Just(String::new()),
        ];
        let unit = prop::sample::select(
            &[
                "ms", "s", "m", "h", "d", "w", "y", " s", "sec", "", "µs", "ns", "S",
            ][..],
        );
        prop_oneof![
            (number, unit).prop_map(|(number, unit)| format!("{number}{unit}")),
            "\\PC{0,12}",
        ]
    }
}

#[test]
fn mcp_startup_wait() {
    use mcp_startup_wait_target::*;
    replay("mcp_startup_wait", parse_case, |value| check(value));
    run(runner(REGRESSIONS, 100), strategy(), |value| check(&value));
}

// ---------------------------------------------------------------------------------------------
// Target: signal_events — signal-cli's event stream, through the SSE decoder and the reader of
// `receive` objects the Signal link uses.
// ---------------------------------------------------------------------------------------------

mod signal_events_target {
    use super::*;

    use super::json_edits::{self, JsonEdit};
    use clawvisor::signal::inbound::{OwnAccount, Received};
    use clawvisor::signal::link::{LinkEvent, read_event};
    use clawvisor::signal::sse::SseDecoder;
    use serde_json::Value;

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/signal_events.txt";

    /// A stream's bytes and where a second chunk starts (modulo the length + 1).
    #[derive(Debug, Clone)]
    pub struct StreamCase {
        pub bytes: Vec<u8>,
        pub cut: usize,
    }

    pub fn parse_case(text: &str) -> Vec<StreamCase> {
        let bytes = text.as_bytes().to_vec();
        (0..=bytes.len())
            .step_by(7)
            .map(|cut| StreamCase {
                bytes: bytes.clone(),
                cut,
            })
            .collect()
    }

    fn own() -> OwnAccount {
        OwnAccount {
            number: "+4915100000000".into(),
            uuid: Some("00000000-0000-4000-8000-004915100000".into()),
        }
    }

    /// Decodes the stream in two chunks and reads every event as the link does.
    fn read_all(bytes: &[u8], cut: usize) -> Vec<Result<Option<LinkEvent>, String>> {
        let mut decoder = SseDecoder::new(4096);
        let mut decoded = decoder.push(&bytes[..cut]);
        decoded.extend(decoder.push(&bytes[cut..]));
        decoded
            .into_iter()
            .map(|event| {
                event
                    .map(|event| read_event(event, &own()))
                    .map_err(|error| error.to_string())
            })
            .collect()
    }

    /// The property: no panic; the same events however the bytes are chunked; a message has a
    /// sender, a positive timestamp and a dedupe key naming both; anything else is ignored with a
    /// reason or unreadable with a sentence naming what is wrong.
    pub fn check(case: &StreamCase) -> Result<(), TestCaseError> {
        let cut = case.cut % (case.bytes.len() + 1);
        let split = read_all(&case.bytes, cut);
        prop_assert_eq!(&split, &read_all(&case.bytes, case.bytes.len()));
        for outcome in split {
            match outcome {
                Err(error) => prop_assert!(error.contains("Signal stream"), "{}", error),
                Ok(None) => {}
                Ok(Some(LinkEvent::Received(Received::Message(message)))) => {
                    prop_assert!(message.timestamp > 0);
                    prop_assert!(!message.source().is_empty());
                    let key = message.dedupe_key();
                    prop_assert!(key.ends_with(&format!("/{}", message.timestamp)), "{}", key);
                    prop_assert!(key.starts_with(&format!("{}/", message.account)), "{}", key);
                    prop_assert_eq!(message.addressed_to(&own()), message.addressed_to(&own()));
                    if message.group.is_none() {
                        prop_assert!(message.addressed_to(&own()));
                    }
                    prop_assert!(message.attachments.iter().all(|a| !a.id.is_empty()));
                }
                Ok(Some(LinkEvent::Received(Received::Ignored { what, .. }))) => {
                    prop_assert!(!what.is_empty())
                }
                Ok(Some(LinkEvent::Unreadable(why))) => prop_assert!(
                    why.starts_with("a Signal event ")
                        && (why.contains(" at ") || why.contains(" has no ")),
                    "{}",
                    why
                ),
                Ok(Some(other)) => prop_assert!(false, "the reader made {:?}", other),
            }
        }
        Ok(())
    }

    fn keys() -> impl Strategy<Value = String> + Clone {
        prop::sample::select(
            &[
                "account",
                "envelope",
                "dataMessage",
                "message",
                "timestamp",
                "sourceNumber",
                "sourceUuid",
                "groupInfo",
                "groupId",
                "type",
                "mentions",
                "start",
                "length",
                "quote",
                "authorNumber",
                "attachments",
                "id",
                "contentType",
                "filename",
                "exception",
                "typingMessage",
                "reaction",
            ][..],
        )
        .prop_map(str::to_string)
    }

    fn strings() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            tricky_text(),
            Just("\u{FFFC}".to_string()),
            Just("+4915100000000".to_string()),
            Just("UPDATE".to_string()),
            Just("audio/aac".to_string()),
        ]
    }

    /// Frames `objects` as signal-cli does, with a line ending of choice.
    fn frame(objects: &[Value], ending: &str) -> Vec<u8> {
        let mut out = String::new();
        for object in objects {
            out.push_str(&format!(
                "event:receive{ending}data:{object}{ending}{ending}"
            ));
        }
        out.into_bytes()
    }

    pub fn strategy() -> impl Strategy<Value = StreamCase> {
        let samples: Vec<Value> = corpus("signal_events")
            .into_iter()
            .flat_map(|(_, text)| {
                text.lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .filter_map(|data| serde_json::from_str::<Value>(data).ok())
                    .collect::<Vec<_>>()
            })
            .collect();
        let edited = (
            prop::collection::vec(
                (
                    prop::sample::select(samples),
                    prop::collection::vec(
                        json_edits::edit(json_edits::value(strings(), keys()), keys()),
                        0..5,
                    ),
                ),
                1..4,
            ),
            prop::sample::select(&["\n", "\r\n", "\r"][..]),
        )
            .prop_map(|(documents, ending)| {
                let objects: Vec<Value> = documents
                    .into_iter()
                    .map(|(mut document, edits): (Value, Vec<JsonEdit>)| {
                        for edit in &edits {
                            edit.apply(&mut document);
                        }
                        document
                    })
                    .collect();
                frame(&objects, ending)
            });
        let bytes = prop_oneof![
            8 => edited,
            1 => prop::collection::vec(any::<u8>(), 0..512),
            1 => "\\PC{0,64}".prop_map(|text: String| format!("data:{text}\n\n").into_bytes()),
        ];
        (bytes, any::<usize>()).prop_map(|(bytes, cut)| StreamCase { bytes, cut })
    }
}

#[test]
fn signal_events() {
    use signal_events_target::*;
    replay("signal_events", parse_case, |cases| {
        cases.iter().try_for_each(check)
    });
    run(runner(REGRESSIONS, 300), strategy(), |case| check(&case));
}

// ---------------------------------------------------------------------------------------------
// trigger_endpoint: what `POST /hooks/trigger/{name}` decides from a request's headers and body
// (`triggers::authenticate`, `triggers::delivery_id`, `triggers::prompt`), on any header text and
// body. Beyond "no panic": deterministic; a request is authenticated exactly when it carries the
// HMAC of its own body or the exact bearer secret; the delivery id is a bounded printable header
// value or `sha256:` of the body; the prompt holds the body in exactly one untrusted wrapper.
// A case file is `name: value` header lines (`signature`, `authorization`, `delivery`, `github`;
// `SIGN` in a signature is replaced by the body's real HMAC), a blank line, then the body.

mod trigger_endpoint_target {
    use super::*;

    use clawvisor::triggers::{authenticate, delivery_id, prompt, sign};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/trigger_endpoint.txt";
    const SECRET: &str = "s3cret-0123456789";

    #[derive(Debug, Clone)]
    pub struct Request {
        pub signature: Option<String>,
        pub authorization: Option<String>,
        pub delivery: Option<String>,
        pub github: Option<String>,
        pub body: String,
    }

    pub fn parse_case(text: &str) -> Request {
        let (head, body) = text.split_once("\n\n").unwrap_or((text, ""));
        let header = |name: &str| {
            head.lines()
                .find_map(|line| line.strip_prefix(&format!("{name}: ")))
                .map(str::to_string)
        };
        let signature = header("signature")
            .map(|value| value.replace("sha256=SIGN", &sign(body.as_bytes(), SECRET.as_bytes())));
        Request {
            signature,
            authorization: header("authorization"),
            delivery: header("delivery"),
            github: header("github"),
            body: body.to_string(),
        }
    }

    pub fn check(request: &Request) -> Result<(), TestCaseError> {
        let body = request.body.as_bytes();
        let decide = || {
            authenticate(
                request.signature.as_deref(),
                request.authorization.as_deref(),
                body,
                SECRET.as_bytes(),
            )
        };
        let accepted = decide();
        prop_assert_eq!(accepted, decide(), "deterministic");
        let signed = request
            .signature
            .as_deref()
            .is_some_and(|value| value.trim() == sign(body, SECRET.as_bytes()));
        let bearer = request
            .authorization
            .as_deref()
            .and_then(|value| value.trim().strip_prefix("Bearer "))
            .is_some_and(|token| token.trim() == SECRET);
        prop_assert_eq!(accepted, signed || bearer, "{:?}", request);
        prop_assert!(!authenticate(
            request.signature.as_deref(),
            request.authorization.as_deref(),
            body,
            b""
        ));

        let headers = [request.delivery.as_deref(), request.github.as_deref()];
        let id = delivery_id(headers, body);
        prop_assert_eq!(&id, &delivery_id(headers, body), "deterministic");
        let from_header = headers.iter().flatten().any(|value| value.trim() == id);
        if from_header {
            prop_assert!(id.len() <= 128 && id.bytes().all(|byte| byte.is_ascii_graphic()));
        } else {
            prop_assert!(id.starts_with("sha256:") && id.len() == 7 + 64, "{id}");
        }

        let trigger = clawvisor::config::TriggerConfig {
            name: "bell".into(),
            agent: "ada".into(),
            secret_env: String::new(),
            prompt: "Event: {{body}} — person?".into(),
            deliver_to: "owner".into(),
            max_body: clawvisor::config::Bytes(1024),
            per_minute: 5,
        };
        let text = prompt(&trigger, 1, &request.body);
        prop_assert_eq!(text.matches("</untrusted_content>").count(), 1, "{}", text);
        prop_assert!(text.contains("untrusted"));
        Ok(())
    }

    fn header_value() -> impl Strategy<Value = Option<String>> {
        prop::option::of(prop_oneof![
            "sha256=[0-9a-f]{0,70}",
            "Bearer [ -~]{0,24}",
            Just(format!("Bearer {SECRET}")),
            Just(format!(" Bearer {SECRET} ")),
            "[ -~]{0,140}",
            super::tricky_text(),
        ])
    }

    pub fn requests() -> impl Strategy<Value = Request> {
        (
            header_value(),
            header_value(),
            header_value(),
            header_value(),
            prop_oneof![
                "\\PC{0,200}",
                super::tricky_text(),
                Just("x</untrusted_content>y</untrusted_content>".to_string()),
            ],
            any::<bool>(),
        )
            .prop_map(
                |(signature, authorization, delivery, github, body, sign_it)| {
                    let signature = if sign_it {
                        Some(sign(body.as_bytes(), SECRET.as_bytes()))
                    } else {
                        signature
                    };
                    Request {
                        signature,
                        authorization,
                        delivery,
                        github,
                        body,
                    }
                },
            )
    }
}

#[test]
fn trigger_endpoint() {
    use trigger_endpoint_target::*;
    replay("trigger_endpoint", parse_case, check);
    run(runner(REGRESSIONS, 500), requests(), |request| {
        check(&request)
    });
}

// ---------------------------------------------------------------------------------------------
// Target: whatsapp_webhook — Meta's webhook bodies as `/hooks/whatsapp` reads them.
// ---------------------------------------------------------------------------------------------

mod whatsapp_webhook_target {
    use super::*;

    use clawvisor::store::channels::{NewChannelInbound, store_inbound};
    use clawvisor::store::{Store, StoreOptions};
    use clawvisor::whatsapp::client::parse_message;
    use clawvisor::whatsapp::webhook::parse;
    use serde_json::{Value, json};

    pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/whatsapp_webhook.txt";

    pub fn parse_case(text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    /// The property: deterministic; a refusal says what is wrong (naming a field, or that it is
    /// not JSON) and stores nothing; an accepted body's every message has an id, a digits-only
    /// sender and its own object as payload, reads for the seam as something or a reason, and
    /// stores whole (a second store of the same body adds nothing).
    pub fn check(body: &[u8]) -> Result<(), TestCaseError> {
        let first = parse(body);
        prop_assert_eq!(&first, &parse(body));
        let messages = match first {
            Err(reason) => {
                prop_assert!(
                    reason.contains('`') || reason.contains("JSON"),
                    "an unclear refusal: {}",
                    reason
                );
                return Ok(());
            }
            Ok(messages) => messages,
        };
        for message in &messages {
            prop_assert!(!message.message_id.is_empty());
            prop_assert!(
                !message.from.is_empty() && message.from.chars().all(|c| c.is_ascii_digit())
            );
            let payload: Value = serde_json::from_str(&message.payload).expect("a payload is JSON");
            prop_assert_eq!(payload["id"].as_str(), Some(message.message_id.as_str()));
            if let Err(reason) = parse_message(&message.payload) {
                prop_assert!(!reason.is_empty());
            }
        }
        if messages.is_empty() {
            return Ok(());
        }
        let dir = tempfile::tempdir().expect("a temp dir");
        let store =
            Store::open(&dir.path().join("db.sqlite"), StoreOptions::default()).expect("a store");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let (first_time, second_time) = runtime.block_on(async {
            let first_time = store
                .write(store_all(messages.clone()))
                .await
                .expect("a parsed body stores");
            let second_time = store
                .write(store_all(messages.clone()))
                .await
                .expect("a parsed body stores again");
            (first_time, second_time)
        });
        let unique: std::collections::BTreeSet<(&str, &str)> = messages
            .iter()
            .map(|m| (m.phone_number_id.as_str(), m.message_id.as_str()))
            .collect();
        prop_assert_eq!(first_time, unique.len());
        prop_assert_eq!(second_time, 0, "a redelivery stores nothing");
        Ok(())
    }

    /// Stores every message in one transaction (as the webhook does); how many were new.
    fn store_all(
        messages: Vec<clawvisor::whatsapp::webhook::WebhookMessage>,
    ) -> impl FnOnce(&rusqlite::Connection) -> clawvisor::store::Result<usize> + Send + 'static
    {
        move |conn| {
            let mut fresh = 0;
            for message in &messages {
                let chat = format!("wa:{}", message.from);
                let new = NewChannelInbound {
                    channel: "wa",
                    account: &message.phone_number_id,
                    message_id: &message.message_id,
                    agent: "ada",
                    chat: &chat,
                    sender: &message.from,
                    sender_name: &message.name,
                    kind: message.kind,
                    payload: &message.payload,
                    sent_ms: message.sent_ms,
                };
                if store_inbound(conn, &new, 1_700_000_000_000)?.is_some() {
                    fresh += 1;
                }
            }
            Ok(fresh)
        }
    }

    fn field() -> impl Strategy<Value = Option<Value>> + Clone {
        prop_oneof![
            4 => "[0-9]{1,15}".prop_map(|text| Some(json!(text))),
            1 => tricky_text().prop_map(|text| Some(json!(text))),
            1 => Just(None),
            1 => Just(Some(json!(5))),
            1 => Just(Some(Value::Null)),
            1 => Just(Some(json!("x".repeat(300)))),
        ]
    }

    fn message() -> impl Strategy<Value = Value> {
        (
            field(),
            field(),
            prop::sample::select(vec![
                "text",
                "interactive",
                "audio",
                "image",
                "document",
                "sticker",
                "",
                "button",
            ]),
            tricky_text(),
        )
            .prop_map(|(id, from, kind, text)| {
                let mut object = serde_json::Map::new();
                if let Some(id) = id {
                    object.insert("id".into(), id);
                }
                if let Some(from) = from {
                    object.insert("from".into(), from);
                }
                object.insert("type".into(), json!(kind));
                object.insert("timestamp".into(), json!("1700000000"));
                object.insert("text".into(), json!({"body": text}));
                object.insert(
                    "interactive".into(),
                    json!({"button_reply": {"id": text, "title": "t"}}),
                );
                object.insert("audio".into(), json!({"id": text, "voice": true}));
                Value::Object(object)
            })
    }

    pub fn strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => (prop::collection::vec(message(), 0..4), field()).prop_map(|(messages, phone)| {
                let mut value = serde_json::Map::new();
                if let Some(phone) = phone {
                    value.insert("metadata".into(), json!({"phone_number_id": phone}));
                }
                value.insert("messages".into(), Value::Array(messages));
                json!({"object": "whatsapp_business_account",
                       "entry": [{"changes": [{"field": "messages", "value": value}]}]})
                .to_string()
                .into_bytes()
            }),
            1 => prop::sample::select(vec![
                json!({}), json!([]), json!({"object": "page"}), json!({"object": "whatsapp_business_account"}),
                json!({"object": "whatsapp_business_account", "entry": {}}),
                json!({"object": "whatsapp_business_account", "entry": [{"changes": 3}]}),
            ])
            .prop_map(|value| value.to_string().into_bytes()),
            1 => prop::collection::vec(any::<u8>(), 0..256),
        ]
    }
}

#[test]
fn whatsapp_webhook() {
    use whatsapp_webhook_target::*;
    replay("whatsapp_webhook", parse_case, |body| check(body));
    run(runner(REGRESSIONS, 300), strategy(), |body| check(&body));
}

// ---------------------------------------------------------------------------------------------
// Target: local_embeddings — a local model's files and any text through it (issue #33).
// ---------------------------------------------------------------------------------------------

#[path = "fuzz/local_embeddings.rs"]
mod local_embeddings_target;

#[test]
fn local_embeddings_texts() {
    use local_embeddings_target::*;
    replay(
        "local_embeddings",
        |text| vec![text.to_string()],
        |texts| check_texts(texts),
    );
    run(runner(REGRESSIONS, 16), texts(), |texts| {
        check_texts(&texts)
    });
}

#[test]
fn local_embeddings_model_files() {
    use local_embeddings_target::*;
    for config in known_bad_configs() {
        if let Err(error) = check_directory("config.json", &config) {
            panic!("{config}: {error}");
        }
    }
    for tokenizer in known_bad_tokenizers() {
        if let Err(error) = check_directory("tokenizer.json", &tokenizer) {
            panic!("a tokenizer past the vocabulary: {error}");
        }
    }
    run(runner(REGRESSIONS, 16), configs(), |mangled| {
        check_directory("config.json", &render(&mangled, "config.json"))
    });
    run(runner(REGRESSIONS, 8), configs(), |mangled| {
        check_directory("tokenizer.json", &render(&mangled, "tokenizer.json"))
    });
}

// ---------------------------------------------------------------------------------------------
// Target: browser_proxy — any bytes to the browser's egress proxy (issue #32).
// ---------------------------------------------------------------------------------------------

#[path = "fuzz/browser_proxy.rs"]
mod browser_proxy_target;

#[test]
fn browser_proxy() {
    use browser_proxy_target::*;
    replay(
        "browser_proxy",
        |text| rig().fill(text).into_bytes(),
        |bytes| check_bytes(bytes),
    );
    run(runner(REGRESSIONS, 200), byte_streams(), |bytes| {
        check_bytes(&bytes)
    });
    run(
        runner(REGRESSIONS, 300),
        request_lines(),
        |(method, uri)| check_line(&method, &uri),
    );
}
