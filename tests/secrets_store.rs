//! The secrets store (Studio's Keys & tokens, `<data_dir>/secrets.toml`) against the real daemon:
//! a bot token and an API key entered through Studio's API bring the bot online and restart the
//! provider's agent at once (the fake Bot API sees `getMe` and `getUpdates` with the token), and
//! neither value is ever returned by an API route, written to the daemon's log (the real binary,
//! at debug level), handed to a tool (a scripted model asks `read_file` and `shell` for the file)
//! or put in a backup archive unless `--include-secrets` (and a restore puts it back with 0600).
//! The environment wins over the store and Studio says so; bad input is refused naming the field;
//! the file is 0600 and a writer killed mid-write (SIGKILL, the real process) leaves the last
//! whole file.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clawvisor::config::secrets_file;
use clawvisor::sandbox::{self, LandlockSupport};
use clawvisor::studio::API_ROUTES;
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const WAIT: Duration = Duration::from_secs(30);
/// The bot token entered in Studio (the fake Bot API knows the bot by it).
const TOKEN: &str = "5151:AAH-stored-token-that-never-leaks-0042";
/// A model provider's key entered in Studio.
const API_KEY: &str = "sk-stored-api-key-that-never-leaks-9876";
const OWNER: i64 = 1001;

/// Whether `text` holds `secret` in any form the redactor knows (plain, URL, hex, base64).
fn leaks(text: &str, secret: &str) -> bool {
    clawvisor::secrets::encoded_forms(secret)
        .iter()
        .any(|form| text.contains(form.as_str()))
}

fn assert_no_leak(what: &str, text: &str) {
    for secret in [TOKEN, API_KEY] {
        assert!(
            !leaks(text, secret),
            "{what} holds a secret entered in Studio: {text}"
        );
    }
}

fn landlock_active() -> bool {
    matches!(
        sandbox::protections().landlock,
        LandlockSupport::Enforced { .. } | LandlockSupport::Partial { .. }
    )
}

/// An HTTP client that sends the daemon's local access token, as a script on the server would.
fn studio_client(data_dir: &Path) -> reqwest::Client {
    let token = clawvisor::studio::token_file::local_token(data_dir).expect("the token file");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", token.expose()).parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// Calls Studio; returns the status and the body as text (checked for leaks by the callers).
async fn call(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut request = http.request(method, format!("{base}{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"))
}

/// The entry of `name` in `GET /api/v1/secrets`.
async fn listed(http: &reqwest::Client, base: &str, name: &str) -> Value {
    let (status, body) = call(http, base, reqwest::Method::GET, "/api/v1/secrets", None).await;
    assert_eq!(status, 200, "{body}");
    assert_no_leak("GET /api/v1/secrets", &body);
    parse(&body)["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not listed: {body}"))
}

/// `PUT /api/v1/secrets/{name}`: the answer (which must not hold the value) as JSON.
async fn put_secret(http: &reqwest::Client, base: &str, name: &str, value: &str) -> Value {
    let (status, body) = call(
        http,
        base,
        reqwest::Method::PUT,
        &format!("/api/v1/secrets/{name}"),
        Some(json!({ "value": value })),
    )
    .await;
    assert_eq!(status, 200, "PUT {name}: {body}");
    assert!(!leaks(&body, value), "the answer holds the value: {body}");
    parse(&body)
}

/// Every GET route of the API table (and the health endpoints and the console), with its
/// parameters filled in; the event streams (`/api/v1/events`, `/api/v1/logs/events`) never end,
/// so they are left out (their texts pass the same redaction as the log).
fn get_paths() -> Vec<String> {
    let mut paths: Vec<String> = API_ROUTES
        .iter()
        // The live streams never end (`/api/v1/logs`, read here, is what the log's stream sends).
        .filter(|(method, path, _)| *method == "get" && !path.ends_with("/events"))
        .map(|(_, path, _)| {
            path.replace("{name}", "ada")
                .replace("{id}", "1")
                .replace("{skill}", "journal")
        })
        .collect();
    paths.extend(
        [
            "/healthz",
            "/readyz",
            "/metrics",
            "/",
            "/app.js",
            "/pages/secrets.js",
        ]
        .map(String::from),
    );
    paths.push("/api/v1/audit?limit=500".into());
    paths.push("/api/v1/memory/search?q=token".into());
    paths
}

/// The bot's token and a provider's key entered through Studio: the bot comes online, the
/// provider's agent restarts with the key, a model asking tools for the file gets nothing, and
/// neither value appears in any API answer or in the daemon's log (the real binary, at debug).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_set_in_studio_brings_the_bot_online_and_leaks_nowhere() {
    let dir = ScratchDir::new("secrets-store").unwrap();
    let data = dir.path().join("data");
    let store_file = secrets_file::path(&data);
    let command = format!("cat {}", store_file.display());
    let script = Script::new()
        .rule(Rule::text("Done.").when_after_tool_result("shell"))
        .rule(
            Rule::tool_call("shell", json!({ "command": command }).to_string())
                .when_after_tool_result("read_file"),
        )
        .rule(
            Rule::tool_call(
                "read_file",
                json!({ "path": store_file.display().to_string() }).to_string(),
            )
            .when_last_user_contains("keys"),
        )
        .rule(Rule::text("Hello."));
    let mut staged = World::builder(script)
        .agent_with_bot(
            "ada",
            "tools = [\"read_file\", \"shell\"]\nallow_shell = true\nautonomy = \"trust_first\"\n\
             fallback = [{ provider = \"keyed\", model = \"scripted-model\" }]",
            TOKEN,
            &[OWNER],
            &[OWNER],
        )
        .config_extra("[providers.keyed]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"KEYED_API_KEY\"\nmax_retries = 0")
        .stage(dir.path())
        .await;
    // The agent file names ADA_TOKEN, but nothing sets it: the bot is off.
    staged.env.remove("ADA_TOKEN");
    let mut env = staged.env.clone();
    env.insert("RUST_LOG".into(), "debug".into());
    let daemon = DaemonProcess::start(BINARY, dir.path(), &env).expect("the daemon starts");
    let base = format!(
        "http://{}",
        daemon.studio.clone().expect("Studio's address")
    );
    let http = studio_client(&data);
    let bot = staged.bot("ada");

    // What the configuration names, none of it set yet.
    let entry = listed(&http, &base, "ADA_TOKEN").await;
    assert_eq!(entry["set"], false, "{entry}");
    assert_eq!(entry["used_by"][0]["kind"], "bot", "{entry}");
    assert_eq!(entry["used_by"][0]["name"], "ada", "{entry}");
    assert!(
        entry["note"].as_str().unwrap().starts_with("Not set"),
        "{entry}"
    );
    let entry = listed(&http, &base, "KEYED_API_KEY").await;
    assert_eq!(entry["used_by"][0]["kind"], "provider", "{entry}");
    assert_eq!(staged.fake.call_count(bot, "getMe"), 0, "the bot is off");

    // The token, entered in Studio: kept with mode 0600, the bot starts polling with it.
    let answer = put_secret(&http, &base, "ADA_TOKEN", TOKEN).await;
    assert_eq!(answer["change"], "added", "{answer}");
    assert_eq!(answer["reload"]["ok"], true, "{answer}");
    assert_eq!(
        answer["reload"]["bots"]["added"],
        json!(["ada"]),
        "{answer}"
    );
    assert_eq!(answer["secret"]["set"], true, "{answer}");
    assert_eq!(answer["secret"]["source"], "store", "{answer}");
    assert_eq!(answer["secret"]["ends_with"], "0042", "{answer}");
    assert!(staged.fake.wait_for_calls(bot, "getMe", 1, WAIT).await);
    assert!(staged.fake.wait_for_calls(bot, "getUpdates", 1, WAIT).await);
    let mode = std::fs::metadata(&store_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // The provider's key: its agent restarts with it.
    let answer = put_secret(&http, &base, "KEYED_API_KEY", API_KEY).await;
    assert_eq!(
        answer["reload"]["agents"]["restarted"],
        json!(["ada"]),
        "{answer}"
    );
    // Set again with the same value: nothing to change, no reload.
    let answer = put_secret(&http, &base, "KEYED_API_KEY", API_KEY).await;
    assert_eq!(answer["change"], "unchanged", "{answer}");
    assert_eq!(answer["reload"], Value::Null, "{answer}");

    // The owner asks the agent to read the file; every approval is given (as a careless operator
    // would): the tools still get nothing.
    staged
        .fake
        .push_message(bot, OWNER, OWNER, "please read the keys file");
    wait_until(
        Duration::from_secs(60),
        "the agent's answer after its tools",
        || async {
            let (_, pending) = call(
                &http,
                &base,
                reqwest::Method::GET,
                "/api/v1/approvals?status=pending",
                None,
            )
            .await;
            for approval in parse(&pending)["approvals"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                let id = approval["id"].as_str().unwrap_or_default().to_string();
                call(
                    &http,
                    &base,
                    reqwest::Method::POST,
                    &format!("/api/v1/approvals/{id}/decision"),
                    Some(json!({"decision": "approve"})),
                )
                .await;
            }
            staged
                .fake
                .sent(bot)
                .iter()
                .any(|sent| sent.text.contains("Done."))
                .then_some(())
        },
    )
    .await;
    let requests = serde_json::to_string(&staged.llm.requests()).unwrap();
    assert_no_leak("what the model was sent", &requests);
    assert!(
        requests.contains("read_file") && requests.contains("cat "),
        "both tools ran"
    );
    if landlock_active() {
        assert!(requests.contains("Permission denied"), "{requests}");
    } else {
        assert!(!sandbox::protections().complete());
    }

    // No API route answers either value.
    for path in get_paths() {
        let (_, body) = call(&http, &base, reqwest::Method::GET, &path, None).await;
        assert_no_leak(&format!("GET {path}"), &body);
    }
    // The audit log names the secrets, never their values.
    let (_, audit) = call(
        &http,
        &base,
        reqwest::Method::GET,
        "/api/v1/audit?limit=500",
        None,
    )
    .await;
    assert!(
        audit.contains("secret.set") && audit.contains("secret:ADA_TOKEN"),
        "{audit}"
    );

    // Deleted: the bot stops.
    let (status, body) = call(
        &http,
        &base,
        reqwest::Method::DELETE,
        "/api/v1/secrets/ADA_TOKEN",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        parse(&body)["reload"]["bots"]["removed"],
        json!(["ada"]),
        "{body}"
    );
    assert_eq!(listed(&http, &base, "ADA_TOKEN").await["set"], false);

    let (status, log) = daemon
        .terminate(Duration::from_secs(20))
        .expect("the daemon stops");
    assert!(status.success(), "{status:?}");
    assert!(log.len() > 20, "the log was captured: {log:?}");
    for line in &log {
        assert_no_leak("a log line", line);
    }
}

/// Runs the binary on `dir`'s config; returns (success, stdout + stderr).
fn cli(dir: &Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(BINARY)
        .arg("--config")
        .arg(dir.join("clawvisor.toml"))
        .args(args)
        .env("TZ", "UTC")
        .output()
        .expect("the binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Every entry of a backup archive: its path and its bytes.
fn archive_entries(archive: &Path) -> BTreeMap<String, Vec<u8>> {
    let file = std::fs::File::open(archive).unwrap();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    tar.entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            (path, bytes)
        })
        .collect()
}

/// `clawvisor backup` leaves the store out (no entry, no byte of it); `--include-secrets` takes
/// it, and a restore puts it back with mode 0600.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_leave_the_store_out_unless_asked() {
    let world = World::builder(Script::new().rule(Rule::text("Hello.")))
        .agent("ada", "")
        .start()
        .await;
    let (base, http) = world.harness.studio_http().await;
    put_secret(&http, &base, "KEYED_API_KEY", API_KEY).await;
    let dir = world.harness.stop().await;
    let backups = ScratchDir::new("secrets-backups").unwrap();

    let plain = backups.path().join("plain.tar.gz");
    let (ok, output) = cli(dir.path(), &["backup", plain.to_str().unwrap()]);
    assert!(ok, "{output}");
    assert!(
        output.contains("--include-secrets"),
        "says what was left out: {output}"
    );
    let entries = archive_entries(&plain);
    assert!(entries.contains_key("clawvisor.db"), "{:?}", entries.keys());
    assert!(
        !entries.contains_key(secrets_file::FILE_NAME),
        "{:?}",
        entries.keys()
    );
    for (path, bytes) in &entries {
        assert_no_leak(path, &String::from_utf8_lossy(bytes));
    }

    let with = backups.path().join("with.tar.gz");
    let (ok, output) = cli(
        dir.path(),
        &["backup", "--include-secrets", with.to_str().unwrap()],
    );
    assert!(ok, "{output}");
    let entries = archive_entries(&with);
    let kept = String::from_utf8_lossy(&entries[secrets_file::FILE_NAME]).into_owned();
    assert!(kept.contains(API_KEY));

    let restored = backups.path().join("restored");
    let (ok, output) = cli(
        dir.path(),
        &[
            "--data-dir",
            restored.to_str().unwrap(),
            "restore",
            with.to_str().unwrap(),
        ],
    );
    assert!(ok, "{output}");
    let file = secrets_file::path(&restored);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let stored = secrets_file::read(&restored).unwrap();
    assert_eq!(stored.values["KEYED_API_KEY"].expose(), API_KEY);
}

/// A variable set in the environment wins over the store, and Studio says so; a reload keeps
/// the environment's value. Bad names, values and bodies are refused naming the field, without
/// echoing what was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_wins_over_the_store_and_bad_input_names_the_field() {
    let env_token = "6161:AAH-environment-token-value-7777";
    let dir = ScratchDir::new("secrets-env-wins").unwrap();
    secrets_file::set(&dir.path().join("data"), "ADA_TOKEN", TOKEN).unwrap();
    let world = World::builder(Script::new().rule(Rule::text("Hello.")))
        .agent_with_bot("ada", "", env_token, &[OWNER], &[OWNER])
        .dir(dir)
        .start()
        .await;
    let bot = world.bot("ada");
    assert!(
        world.fake.wait_for_calls(bot, "getMe", 1, WAIT).await,
        "the env's token is used"
    );
    let loaded = &world.harness.daemon().config;
    assert_eq!(loaded.secret("ADA_TOKEN").unwrap().expose(), env_token);
    assert!(!loaded.secret_from_store("ADA_TOKEN"));
    let (base, http) = world.harness.studio_http().await;
    let entry = listed(&http, &base, "ADA_TOKEN").await;
    assert_eq!(entry["source"], "environment", "{entry}");
    assert_eq!(entry["in_store"], true, "{entry}");
    assert_eq!(entry["ends_with"], "7777", "the value in use: {entry}");
    assert!(
        entry["note"]
            .as_str()
            .unwrap()
            .contains("environment, which wins"),
        "{entry}"
    );

    // A new store value changes nothing while the environment sets the variable.
    let answer = put_secret(
        &http,
        &base,
        "ADA_TOKEN",
        "7171:AAH-another-stored-token-0000",
    )
    .await;
    assert_eq!(answer["reload"]["ok"], true, "{answer}");
    assert_eq!(answer["reload"]["bots"]["restarted"], json!([]), "{answer}");
    assert_eq!(answer["secret"]["source"], "environment", "{answer}");
    // Deleting what only the environment sets says where it is.
    let (status, body) = call(
        &http,
        &base,
        reqwest::Method::DELETE,
        "/api/v1/secrets/ADA_TOKEN",
        None,
    )
    .await;
    assert_eq!(status, 200, "the store's copy is deleted: {body}");
    let (status, body) = call(
        &http,
        &base,
        reqwest::Method::DELETE,
        "/api/v1/secrets/ADA_TOKEN",
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("environment"), "{body}");

    let secret_text = "a-value-with spaces-inside-1234";
    for (path, body, field) in [
        ("/api/v1/secrets/1BAD", json!({"value": TOKEN}), "`name`"),
        (
            "/api/v1/secrets/GOOD_NAME",
            json!({"value": "short"}),
            "`value`",
        ),
        (
            "/api/v1/secrets/GOOD_NAME",
            json!({"value": secret_text}),
            "`value`",
        ),
        (
            "/api/v1/secrets/GOOD_NAME",
            json!({"value": 12345678}),
            "`value`",
        ),
        (
            "/api/v1/secrets/GOOD_NAME",
            json!({secret_text: "x"}),
            "`value`",
        ),
    ] {
        let (status, answer) =
            call(&http, &base, reqwest::Method::PUT, path, Some(body.clone())).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        let message = parse(&answer)["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(message.starts_with(field), "{path} {body}: {message}");
        assert!(
            !message.contains(secret_text) && !message.contains(TOKEN),
            "{message}"
        );
    }
    let stored = secrets_file::read(&world.harness.dir.path().join("data")).unwrap();
    assert!(
        !stored.values.contains_key("GOOD_NAME"),
        "nothing refused was kept"
    );
}

/// The name of the test below, which is also its child process's role.
const CRASH_TEST: &str = "a_writer_killed_mid_write_leaves_the_last_whole_file";
/// Set in the child: the data directory it writes into until it is killed.
const CRASH_CHILD_DIR: &str = "CLAWVISOR_TEST_SECRETS_WRITER_DIR";
/// Variables per file and the length of each value: a file of about 330 kB, so that a write
/// takes long enough to be killed in the middle.
const CRASH_NAMES: usize = 20;
const CRASH_VALUE_LEN: usize = 16 * 1024;

fn crash_value(round: usize) -> String {
    let letter = char::from(b'a' + (round % 26) as u8);
    std::iter::repeat_n(letter, CRASH_VALUE_LEN).collect()
}

/// The writer process; killed when the test ends, whatever the outcome.
struct Writer(std::process::Child);

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The store's file is written to a temporary file and renamed: while a writer process rewrites
/// it again and again, the file is whole at every moment, and the writer killed with SIGKILL in
/// the middle of a write (while its temporary file exists) leaves the last whole file, mode
/// 0600; the next write removes the leftover. Run as a child (with [`CRASH_CHILD_DIR`]), this test is that writer.
#[test]
fn a_writer_killed_mid_write_leaves_the_last_whole_file() {
    if let Ok(dir) = std::env::var(CRASH_CHILD_DIR) {
        let dir = PathBuf::from(dir);
        for round in 1.. {
            for index in 0..CRASH_NAMES {
                secrets_file::set(&dir, &format!("KEY_{index:03}"), &crash_value(round)).unwrap();
            }
        }
    }
    let scratch = ScratchDir::new("secrets-crash").unwrap();
    let data = scratch.path().join("data");
    let mut leftovers_seen = 0;
    for attempt in 0..3 {
        // A whole file with every variable: its size stays the same after every whole write.
        let _ = std::fs::remove_dir_all(&data);
        for index in 0..CRASH_NAMES {
            secrets_file::set(&data, &format!("KEY_{index:03}"), &crash_value(0)).unwrap();
        }
        let whole_size = std::fs::metadata(secrets_file::path(&data)).unwrap().len();
        let mut child = Writer(
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", CRASH_TEST, "--nocapture", "--test-threads=1"])
                .env(CRASH_CHILD_DIR, &data)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Watch the writes: the file must be whole at every moment; the third write seen in
        // progress (a temporary file beside the file) is killed.
        let file = secrets_file::path(&data);
        let deadline = std::time::Instant::now() + WAIT;
        let (mut writes_seen, mut writing) = (0, false);
        while writes_seen < 3 {
            let temporary = std::fs::read_dir(&data).is_ok_and(|listing| {
                listing
                    .filter_map(Result::ok)
                    .any(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"))
            });
            writes_seen += usize::from(temporary && !writing);
            writing = temporary;
            let size = std::fs::metadata(&file).map(|metadata| metadata.len()).ok();
            if size != Some(whole_size) {
                panic!(
                    "attempt {attempt}: the file was seen not whole while being written ({size:?} of {whole_size} bytes)"
                );
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no write was ever seen in progress"
            );
        }
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        let leftover = std::fs::read_dir(&data)
            .unwrap()
            .filter_map(Result::ok)
            .any(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"));
        leftovers_seen += usize::from(leftover);
        let stored = secrets_file::read(&data)
            .unwrap_or_else(|error| panic!("attempt {attempt}: a torn file: {error}"));
        assert_eq!(
            stored.values.len(),
            CRASH_NAMES,
            "attempt {attempt}: a torn file"
        );
        for (name, value) in &stored.values {
            let value = value.expose();
            let first = value.chars().next().unwrap();
            assert!(
                value.len() == CRASH_VALUE_LEN && value.chars().all(|c| c == first),
                "attempt {attempt}: {name} holds a torn value"
            );
        }
        let mode = std::fs::metadata(secrets_file::path(&data))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(
        leftovers_seen > 0,
        "no writer was ever killed in the middle of a write"
    );
    // The next write sweeps what the killed writers left.
    secrets_file::set(&data, "ANOTHER_KEY", &crash_value(0)).unwrap();
    let names: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![secrets_file::FILE_NAME.to_string()]);
}
