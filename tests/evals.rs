//! The living spec: `clawvisor eval evals/` runs every scenario against the scripted model, and
//! `--live` runs scenarios against the provider of a config (here a loopback OpenAI-compatible
//! server) and prints a pass rate.

use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};

/// The living spec must cover every capability; fewer files than this means scenarios were lost.
const MIN_SCENARIOS: usize = 25;

fn scenario_count(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|ext| ext == "toml")
        })
        .count()
}

#[test]
fn every_scenario_in_evals_passes_against_the_scripted_model() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["eval", "evals"])
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let count = scenario_count(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/evals"
    )));
    assert!(
        count >= MIN_SCENARIOS,
        "evals/ has {count} scenarios, at least {MIN_SCENARIOS} expected"
    );
    assert!(
        stdout.contains(&format!("{count}/{count} scenarios passed")),
        "{stdout}"
    );
}

#[test]
fn a_broken_scenario_fails_the_run_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("wrong.toml"),
        "name = \"wrong expectation\"\n[[script.rules]]\ntext = \"Lyon\"\n[[turns]]\nuser = \"capital of France?\"\nexpect = { reply_contains = [\"Paris\"] }\n",
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["eval", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success());
    assert!(
        stdout.contains("does not contain `Paris`") && stdout.contains("0/1 scenarios passed"),
        "{stdout}"
    );
}

/// `--live` ignores the scenarios' scripts and talks to the config's provider (with the config's
/// price for its model): scenarios its answers satisfy pass, one they do not fails, and
/// `scripted_only` expectations are skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_mode_uses_the_configured_provider_and_prints_a_pass_rate() {
    let provider = ScriptedLlm::start(
        Script::new()
            .rule(Rule::text("Paris, of course.").when_last_user_contains("capital of France"))
            .rule(Rule::text("I would rather not say.")),
    )
    .await
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("clawvisor.toml");
    std::fs::write(
        &config,
        format!(
            "[log]\nlevel = \"warn\"\n[providers.loopback]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n\
             [pricing.\"live-model\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n",
            provider.base_url()
        ),
    )
    .unwrap();
    std::fs::create_dir(root.path().join("actors")).unwrap();
    std::fs::write(
        root.path().join("actors/helper.toml"),
        "name = \"helper\"\nprovider = \"loopback\"\nmodel = \"live-model\"\ninstructions = \"Be brief.\"\n",
    )
    .unwrap();
    let scenarios = root.path().join("scenarios");
    std::fs::create_dir(&scenarios).unwrap();
    // The script says Lyon; only the live provider says Paris. The expectations for the scripted
    // model (Lyon) would fail live, so they must be skipped.
    std::fs::write(
        scenarios.join("1_france.toml"),
        "name = \"france\"\n[[script.rules]]\ntext = \"Lyon\"\n[[turns]]\nuser = \"What is the capital of France?\"\n\
         expect = { reply_contains = [\"Paris\"], status = \"succeeded\" }\nscripted = { reply_contains = [\"Lyon\"] }\n\
         [[turns]]\nuser = \"And the capital of France again?\"\nexpect = { reply_contains = [\"Lyon\"], scripted_only = true }\n",
    )
    .unwrap();
    std::fs::write(
        scenarios.join("2_germany.toml"),
        "name = \"germany\"\n[[script.rules]]\ntext = \"Berlin\"\n[[turns]]\nuser = \"What is the capital of Germany?\"\n\
         expect = { reply_contains = [\"Berlin\"] }\n",
    )
    .unwrap();

    // Costs come from the config's price for the live model, so a daily budget stops runs live.
    std::fs::write(
        scenarios.join("3_budget.toml"),
        "name = \"budget\"\nagent = \"daily_budget_usd = 0.000001\"\n[[turns]]\nuser = \"Tell me something\"\n\
         expect = { status = \"succeeded\" }\n[[turns]]\nuser = \"And something else\"\n\
         expect = { status = \"budget_stopped\", reply_contains = [\"budget\"] }\n",
    )
    .unwrap();

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
        .current_dir(root.path())
        .arg("eval")
        .arg(&scenarios)
        .arg("--live")
        .arg("--config")
        .arg(&config)
        .output()
        .await
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "one scenario fails: {stdout}");
    assert!(
        stdout.contains("running 3 scenario(s) live against loopback/live-model"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("PASS  france"), "{stdout}\n{stderr}");
    assert!(stdout.contains("PASS  budget"), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("FAIL  germany") && stdout.contains("does not contain `Berlin`"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("2/3 scenarios passed (67 %)"),
        "{stdout}\n{stderr}"
    );
    let requests = provider.requests();
    assert!(
        requests.len() >= 3,
        "every turn reached the live provider: {requests:?}"
    );
    assert!(
        requests
            .iter()
            .all(|request| request["model"] == "live-model"),
        "{requests:?}"
    );
}
