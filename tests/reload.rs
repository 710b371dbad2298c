//! Reload without restart, on the real binary: SIGHUP after adding an agent with a bot and an MCP
//! server to the files brings both up while the running agent's conversation goes on untouched; a
//! broken file changes nothing and is reported; `clawvisor reload` prints the report; removing an
//! agent stops its bot.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use clawvisor::testkit::fake_telegram::{BotId, FakeTelegram};
use clawvisor::testkit::harness::{agent_toml, telegram_toml};
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

const SERVER: &str = env!("CARGO_BIN_EXE_clawvisor-mcp-test-server");
const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const ANN: i64 = 4242;
const BEA_TOKEN: &str = "777:bea-token";

fn script() -> Script {
    Script::new()
        .rule(Rule::text("bea used the tool").when_after_tool_result("tools__echo"))
        .rule(
            Rule::tool_call("tools__echo", r#"{"text":"from bea"}"#)
                .when_last_user_contains("beta-tool")
                .when_tools_include("tools__echo")
                .times(1),
        )
        .rule(Rule::text("bea has no tools").when_last_user_contains("beta-tool"))
        .rule(
            Rule::text("ada remembers alpha-first")
                .when_last_user_contains("alpha-second")
                .when_any_message_contains("alpha-first"),
        )
        .rule(Rule::text("ada answer one").when_last_user_contains("alpha-first"))
        .rule(Rule::text("ada answer three").when_last_user_contains("alpha-third"))
        .rule(Rule::text("fallback"))
}

/// Bea's file: a bot on the fake and the MCP server's tools.
fn bea_file(fake: &FakeTelegram) -> String {
    let telegram = telegram_toml("BEA_TOKEN", &fake.base_url(), &[ANN], &[ANN]);
    agent_toml("bea", &format!("autonomy = \"trust_first\"\n{telegram}"))
}

fn mcp_server() -> String {
    format!(
        "\n[[mcp.servers]]\nname = \"tools\"\ntransport = \"stdio\"\ncommand = \"{SERVER}\"\ntrust = \"trusted\"\nagents = [\"bea\"]\n"
    )
}

fn hang_up(daemon: &DaemonProcess) {
    kill(Pid::from_raw(daemon.pid() as i32), Signal::SIGHUP).expect("SIGHUP is sent");
}

/// The `n`-th (from 1) reload report line in the log.
async fn nth_report(daemon: &mut DaemonProcess, n: usize) -> String {
    wait_until(
        Duration::from_secs(60),
        &format!("reload report {n}"),
        || {
            daemon.drain();
            let reports: Vec<String> = daemon
                .log
                .iter()
                .filter(|line| line.contains("reloaded: ") || line.contains("reload refused"))
                .cloned()
                .collect();
            async move {
                reports
                    .get(n - 1)
                    .cloned()
                    .map(|_| ())
                    .ok_or_else(|| format!("{} reports so far", reports.len()))
            }
        },
    )
    .await;
    daemon
        .log
        .iter()
        .filter(|line| line.contains("reloaded: ") || line.contains("reload refused"))
        .nth(n - 1)
        .cloned()
        .expect("the report was just seen")
}

async fn reply(fake: &FakeTelegram, bot: BotId, text: &str) {
    let sent = fake
        .wait_for_sent(
            bot,
            |message| message.text.contains(text),
            Duration::from_secs(60),
        )
        .await;
    assert!(
        sent.is_some(),
        "no reply containing `{text}`; sent: {:?}",
        fake.sent(bot).iter().map(|m| &m.text).collect::<Vec<_>>()
    );
}

async fn studio_get(studio: &str, token: &str, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("http://{studio}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("Studio answers")
        .json()
        .await
        .expect("Studio answers JSON")
}

fn cli_reload(dir: &Path, studio: &str) -> (Option<i32>, String, String) {
    let output = Command::new(BINARY)
        .args([
            "--config",
            &dir.join("clawvisor.toml").display().to_string(),
        ])
        .args(["--studio-bind", studio, "reload"])
        .output()
        .expect("the CLI runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_adds_an_agent_with_a_bot_and_an_mcp_server_without_touching_the_running_one() {
    let dir = tempfile::tempdir().unwrap();
    let staged = World::builder(script())
        .agent_with_bot("ada", "", "555:ada-token", &[ANN], &[ANN])
        .stage(dir.path())
        .await;
    let fake = &staged.fake;
    let ada = staged.bot("ada");
    // Bea's bot exists on the fake and its token is in the daemon's environment from the start
    // (a running daemon cannot learn new variables); no file names it yet.
    let bea = fake.add_bot(BEA_TOKEN, "bea_bot");
    let mut env = staged.env.clone();
    env.insert("BEA_TOKEN".into(), BEA_TOKEN.into());
    let mut daemon = tokio::task::block_in_place(|| DaemonProcess::start(BINARY, dir.path(), &env))
        .expect("the daemon starts");
    let studio = daemon.studio.clone().expect("Studio listens");
    let token = clawvisor::studio::access::local_token(&dir.path().join("data"))
        .expect("the local token file")
        .expose()
        .to_string();

    // Ada's conversation before the reload.
    fake.push_message(ada, ANN, ANN, "alpha-first");
    reply(fake, ada, "ada answer one").await;
    let ada_started = fake.call_count(ada, "getMe");
    assert!(ada_started >= 1, "ada's bot asked who it is at start");

    // Bea with a bot and an MCP server appear in the files; SIGHUP.
    std::fs::write(dir.path().join("actors/bea.toml"), bea_file(fake)).unwrap();
    let config = std::fs::read_to_string(dir.path().join("clawvisor.toml")).unwrap();
    std::fs::write(
        dir.path().join("clawvisor.toml"),
        format!("{config}{}", mcp_server()),
    )
    .unwrap();
    // Ada's next message arrives while the reload runs.
    fake.push_message(ada, ANN, ANN, "alpha-second");
    hang_up(&daemon);
    let report = nth_report(&mut daemon, 1).await;
    assert!(report.contains("agents: added bea"), "{report}");
    assert!(report.contains("bots: added bea"), "{report}");
    assert!(report.contains("MCP servers: added tools"), "{report}");

    // The MCP link comes up with its tools for bea.
    wait_until(Duration::from_secs(30), "the MCP server is up", || async {
        let body = studio_get(&studio, &token, "/api/v1/mcp").await;
        let up = body.to_string().contains("\"state\":\"up\"");
        if up { Ok(()) } else { Err(body.to_string()) }
    })
    .await;
    // Bea's bot answers, and bea's run calls the MCP tool.
    fake.push_message(bea, ANN, ANN, "beta-tool please");
    reply(fake, bea, "bea used the tool").await;

    // Ada's conversation went on: its history is intact, nothing lost, nothing doubled, and its
    // bot was not restarted (no second getMe; its offset kept advancing).
    reply(fake, ada, "ada remembers alpha-first").await;
    fake.push_message(ada, ANN, ANN, "alpha-third");
    reply(fake, ada, "ada answer three").await;
    let answers: Vec<String> = fake.sent(ada).into_iter().map(|m| m.text).collect();
    for answer in [
        "ada answer one",
        "ada remembers alpha-first",
        "ada answer three",
    ] {
        assert_eq!(
            answers.iter().filter(|text| text.contains(answer)).count(),
            1,
            "{answer} once: {answers:?}"
        );
    }
    assert_eq!(
        fake.call_count(ada, "getMe"),
        ada_started,
        "ada's bot was not restarted"
    );
    assert_eq!(
        fake.updates_pending(ada),
        0,
        "every update of ada was confirmed"
    );

    // A broken agent file: nothing changes and the reason names the file.
    std::fs::write(
        dir.path().join("actors/broken.toml"),
        "name = \"broken\"\nprovider = 12\n",
    )
    .unwrap();
    hang_up(&daemon);
    let refused = nth_report(&mut daemon, 2).await;
    assert!(
        refused.contains("reload refused, nothing changed"),
        "{refused}"
    );
    assert!(refused.contains("broken.toml"), "{refused}");
    let agents = studio_get(&studio, &token, "/api/v1/agents").await;
    assert_eq!(
        agents["agents"].as_array().map(Vec::len),
        Some(2),
        "still ada and bea: {agents}"
    );
    let events = studio_get(&studio, &token, "/api/v1/audit")
        .await
        .to_string();
    assert!(
        events.contains("config.reload_refused"),
        "audited: {events}"
    );

    // The CLI reads the same files first: it names the file and exits with the configuration
    // error code.
    let (code, out, err) = tokio::task::block_in_place(|| cli_reload(dir.path(), &studio));
    assert_eq!(code, Some(78), "stdout {out} stderr {err}");
    assert!(err.contains("broken.toml"), "stdout {out} stderr {err}");

    // Fixed, and bea removed: the CLI applies it; bea's bot stops polling.
    std::fs::remove_file(dir.path().join("actors/broken.toml")).unwrap();
    std::fs::remove_file(dir.path().join("actors/bea.toml")).unwrap();
    let (code, out, err) = tokio::task::block_in_place(|| cli_reload(dir.path(), &studio));
    assert_eq!(code, Some(0), "stdout {out} stderr {err}");
    assert!(out.contains("agents: removed bea"), "{out}");
    assert!(out.contains("bots: removed bea"), "{out}");
    wait_until(
        Duration::from_secs(30),
        "bea's bot stops polling",
        || async {
            match fake.polls_waiting(bea) {
                0 => Ok(()),
                polls => Err(format!("{polls} polls waiting")),
            }
        },
    )
    .await;
    let tree = studio_get(&studio, &token, "/api/v1/tree").await;
    let bea_bot = tree["actors"]
        .as_array()
        .or_else(|| tree["tree"].as_array())
        .into_iter()
        .flatten()
        .find(|actor| actor["id"] == "bot:bea")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        bea_bot["status"], "stopped",
        "bea's bot in the tree: {tree}"
    );
    let polls_after = fake.call_count(bea, "getUpdates");
    fake.push_message(ada, ANN, ANN, "alpha-fourth");
    reply(fake, ada, "fallback").await;
    assert_eq!(
        fake.call_count(bea, "getUpdates"),
        polls_after,
        "bea's bot no longer polls"
    );
    assert_eq!(
        fake.call_count(ada, "getMe"),
        ada_started,
        "ada's bot still untouched"
    );

    // Ada's file changes: ada and its bot restart; the bot resumes from its stored offset (no
    // update is read twice) and the conversation keeps its history.
    let ada_file = std::fs::read_to_string(dir.path().join("actors/agent0.toml")).unwrap();
    std::fs::write(
        dir.path().join("actors/agent0.toml"),
        ada_file.replacen(
            "instructions =",
            "description = \"changed\"\ninstructions =",
            1,
        ),
    )
    .unwrap();
    let (code, out, err) = tokio::task::block_in_place(|| cli_reload(dir.path(), &studio));
    assert_eq!(code, Some(0), "stdout {out} stderr {err}");
    assert!(out.contains("agents: restarted ada"), "{out}");
    assert!(out.contains("bots: restarted ada"), "{out}");
    fake.push_message(ada, ANN, ANN, "alpha-second once more");
    wait_until(
        Duration::from_secs(60),
        "ada answers after its restart, with its history",
        || async {
            let count = fake
                .sent(ada)
                .iter()
                .filter(|m| m.text.contains("ada remembers alpha-first"))
                .count();
            if count == 2 {
                Ok(())
            } else {
                Err(format!("{count} answers"))
            }
        },
    )
    .await;
    assert_eq!(
        fake.call_count(ada, "getMe"),
        ada_started + 1,
        "ada's bot restarted once"
    );
    let answers: Vec<String> = fake.sent(ada).into_iter().map(|m| m.text).collect();
    for answer in ["ada answer one", "ada answer three", "fallback"] {
        assert_eq!(
            answers.iter().filter(|text| text.contains(answer)).count(),
            1,
            "no update was read again after the bot's restart: {answers:?}"
        );
    }
}

/// A reload changes the running agent supervisor; when that supervisor later restarts (it
/// failed, or was stopped), the root must rebuild it from what the reload applied, not from the
/// boot's files: an added agent stays, a removed one does not come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_supervisor_keeps_what_the_last_reload_applied() {
    use clawvisor::actors::agent_supervisor::{AgentSupervisorMsg, NAME as AGENTS};
    use clawvisor::protocol::reload::Reloader;

    let world = World::builder(Script::new().rule(Rule::text("fallback")))
        .agent("ada", "")
        .agent("cyd", "")
        .studio(false)
        .start()
        .await;
    let actors = world.harness.dir.path().join("actors");
    // The world names its agent files by position: replace cyd's file with bea's.
    let cyd_file = std::fs::read_dir(&actors)
        .expect("the agents directory")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            std::fs::read_to_string(path).is_ok_and(|text| text.contains("name = \"cyd\""))
        })
        .expect("cyd's file");
    std::fs::remove_file(cyd_file).expect("cyd's file is removed");
    std::fs::write(actors.join("bea.toml"), agent_toml("bea", "")).expect("bea's file");
    let registry = world.harness.daemon().registry.clone();
    let report = Reloader::new(&registry)
        .reload("test")
        .await
        .expect("the reloader answers");
    assert!(report.ok, "{report:?}");
    assert_eq!(report.agents.added, vec!["bea"], "{report:?}");
    assert_eq!(report.agents.removed, vec!["cyd"], "{report:?}");

    let agents = registry.lookup(&AGENTS).expect("the agent supervisor runs");
    let before = agents.get_id();
    agents.stop(Some("test: the agent supervisor goes down".into()));
    let ids = wait_until(
        Duration::from_secs(30),
        "the agent supervisor is back with its agents",
        || {
            let registry = registry.clone();
            async move {
                let agents = registry
                    .lookup(&AGENTS)
                    .ok_or_else(|| "not registered".to_string())?;
                if agents.get_id() == before {
                    return Err("not restarted yet".to_string());
                }
                let children = ractor::call!(agents, AgentSupervisorMsg::Children)
                    .map_err(|error| error.to_string())?;
                let ids: Vec<String> = children.into_iter().map(|child| child.id).collect();
                if ids.len() == 2 {
                    Ok(ids)
                } else {
                    Err(format!("children so far: {ids:?}"))
                }
            }
        },
    )
    .await;
    assert!(ids.contains(&"agent:ada".to_string()), "{ids:?}");
    assert!(
        ids.contains(&"agent:bea".to_string()),
        "added by the reload: {ids:?}"
    );
    assert!(
        !ids.contains(&"agent:cyd".to_string()),
        "removed by the reload: {ids:?}"
    );
}
