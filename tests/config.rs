//! Config loading: a table of bad inputs, each answered by an error naming the place and the key,
//! and the layering order defaults < file < environment < flags.

use std::collections::BTreeMap;
use std::path::Path;

use clawvisor::config::{self, ConfigSource, Overrides};

const GOOD_CONFIG: &str = r#"
data_dir = "state"
[agents]
dir = "actors"
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
"#;

const GOOD_AGENT: &str = r#"
name = "helper"
provider = "local"
model = "llama3"
instructions = "Be helpful."
"#;

/// (case, config text, agent files, substrings the error must contain)
type FileCase<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
/// (case, agent files, substrings the error must contain)
type AgentCase<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(config: &str, agents: &[(&str, &str)]) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("clawvisor.toml"), config).unwrap();
        std::fs::create_dir(dir.path().join("actors")).unwrap();
        for (file, text) in agents {
            std::fs::write(dir.path().join("actors").join(file), text).unwrap();
        }
        Setup { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn load(
        &self,
        env: &[(&str, &str)],
        overrides: Overrides,
    ) -> Result<config::LoadedConfig, config::ConfigError> {
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let overrides = Overrides {
            config: Some(self.path().join("clawvisor.toml")),
            ..overrides
        };
        config::load_with_env(&overrides, env)
    }
}

#[test]
fn a_good_file_loads_with_its_agents_and_relative_paths_resolved_against_it() {
    let setup = Setup::new(GOOD_CONFIG, &[("helper.toml", GOOD_AGENT)]);
    let loaded = setup.load(&[], Overrides::default()).unwrap();
    assert_eq!(
        loaded.source,
        ConfigSource::File(setup.path().join("clawvisor.toml"))
    );
    assert_eq!(loaded.config.data_dir, setup.path().join("state"));
    assert_eq!(loaded.agents.len(), 1);
    assert_eq!(loaded.agents[0].name, "helper");
    assert_eq!(loaded.config.studio.bind, "127.0.0.1:7070");
    assert_eq!(loaded.config.supervision.max_restarts, 5);
    // Without `[agents] dir`, the agents are `actors/` next to the config file, wherever the
    // daemon is started from.
    let without_dir = GOOD_CONFIG.replace("[agents]\ndir = \"actors\"\n", "");
    assert_ne!(without_dir, GOOD_CONFIG);
    let setup = Setup::new(&without_dir, &[("helper.toml", GOOD_AGENT)]);
    let loaded = setup.load(&[], Overrides::default()).unwrap();
    assert_eq!(loaded.config.agents.dir, setup.path().join("actors"));
    assert_eq!(loaded.agents[0].name, "helper");
}

#[test]
fn a_signal_table_loads_with_its_default_address() {
    let agent = format!(
        "{GOOD_AGENT}\n[signal]\naccount = \"+4915100000000\"\nallow_users = [\"+4917200000001\", \"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\"]\n"
    );
    let setup = Setup::new(GOOD_CONFIG, &[("helper.toml", agent.as_str())]);
    let loaded = setup.load(&[], Overrides::default()).unwrap();
    let signal = loaded.agents[0]
        .signal
        .as_ref()
        .expect("the [signal] table");
    assert_eq!(signal.account, "+4915100000000");
    assert_eq!(signal.rpc_url, config::DEFAULT_SIGNAL_RPC_URL);
    assert_eq!(signal.allow_users.len(), 2);
    assert!(signal.approvers.is_empty());
}

#[test]
fn bad_inputs_name_the_file_the_key_and_what_is_expected() {
    let agent_dir_cases: &[FileCase] = &[
        // (case, config text, agent files, substrings the error must contain)
        (
            "unknown top-level key",
            "bogus = 1\n[providers.local]\nkind = \"openai\"\nbase_url = \"http://x\"",
            &[],
            &["clawvisor.toml", "unknown key `bogus`", "line 1"],
        ),
        (
            "unknown key in a section",
            "[studio]\nbindd = \"127.0.0.1:1\"",
            &[],
            &["[studio]", "unknown key `bindd`"],
        ),
        (
            "wrong type",
            "[supervision]\nmax_restarts = \"five\"",
            &[],
            &["[supervision].max_restarts", "line 2"],
        ),
        (
            "bad duration",
            "[supervision]\nwindow = \"soonish\"",
            &[],
            &["[supervision].window", "invalid duration `soonish`"],
        ),
        (
            "duration as a number",
            "[telegram]\nboot_stagger = 5",
            &[],
            &["[telegram].boot_stagger", "duration"],
        ),
        (
            "duration beyond the clock",
            "[telegram]\nboot_stagger = \"500000000y\"",
            &[],
            &["[telegram].boot_stagger", "100-year maximum"],
        ),
        (
            "bad socket address",
            "[studio]\nbind = \"localhost-7070\"",
            &[],
            &["[studio].bind", "invalid socket address `localhost-7070`"],
        ),
        (
            "poll timeout above 50 s",
            "[telegram]\npoll_timeout = \"90s\"",
            &[],
            &["[telegram].poll_timeout", "1s to 50s"],
        ),
        (
            "streaming threshold above a minute",
            "[telegram]\nstream_after = \"2m\"",
            &[],
            &["[telegram].stream_after", "0s to 60s"],
        ),
        (
            "streaming minimum longer than a message",
            "[telegram]\nstream_min_chars = 5000",
            &[],
            &["[telegram].stream_min_chars", "0 to 4096"],
        ),
        (
            "jitter out of range",
            "[supervision]\njitter = 1.5",
            &[],
            &["[supervision].jitter", "out of range"],
        ),
        (
            "unknown provider kind",
            "[providers.x]\nkind = \"cohere\"\nbase_url = \"http://x\"",
            &[],
            &["[providers].x.kind", "cohere"],
        ),
        (
            "missing provider key",
            "[providers.x]\nkind = \"openai\"",
            &[],
            &["missing key `base_url`"],
        ),
        (
            "provider with a bad URL",
            "[providers.x]\nkind = \"openai\"\nbase_url = \"not a url\"",
            &[],
            &["[providers.x].base_url", "invalid URL"],
        ),
        (
            "not TOML at all",
            "[studio\nbind=",
            &[],
            &["clawvisor.toml"],
        ),
        (
            "negative price",
            "[pricing.m]\ninput_per_mtok = -1.0\noutput_per_mtok = 1.0",
            &[],
            &["[pricing.\"m\"]", "not negative"],
        ),
    ];
    for (case, text, agents, expected) in agent_dir_cases {
        let setup = Setup::new(text, agents);
        let error = setup
            .load(&[], Overrides::default())
            .expect_err(case)
            .to_string();
        for needle in *expected {
            assert!(
                error.contains(needle),
                "{case}: `{error}` should mention `{needle}`"
            );
        }
    }
}

#[test]
fn bad_agent_files_are_named_with_their_key() {
    let cases: &[AgentCase] = &[
        (
            "duplicate agent names",
            &[("a.toml", GOOD_AGENT), ("b.toml", GOOD_AGENT)],
            &["b.toml", "name", "already defined in", "a.toml"],
        ),
        (
            "unknown key in an agent",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\ncolour = \"red\"",
            )],
            &["a.toml", "unknown key `colour`"],
        ),
        (
            "missing model",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"local\"\ninstructions = \"x\"",
            )],
            &["a.toml", "missing key `model`"],
        ),
        (
            "undefined provider",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"openai\"\nmodel = \"m\"\ninstructions = \"x\"",
            )],
            &["a.toml", "provider", "`openai` is not defined", "local"],
        ),
        (
            "bad autonomy",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\nautonomy = \"yolo\"",
            )],
            &["autonomy", "yolo", "trust_first"],
        ),
        (
            "bad name",
            &[(
                "a.toml",
                "name = \"Big Agent\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"",
            )],
            &["name", "not a valid agent name"],
        ),
        (
            "no instructions",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"",
            )],
            &["instructions", "persona"],
        ),
        (
            "instructions from a device",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions_file = \"/dev/zero\"",
            )],
            &[
                "a.toml",
                "instructions_file",
                "/dev/zero",
                "not a regular file",
            ],
        ),
        (
            "reports_to nobody",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\nreports_to = \"ghost\"",
            )],
            &["reports_to", "ghost"],
        ),
        (
            "reports_to cycle",
            &[
                (
                    "a.toml",
                    "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\nreports_to = \"b\"",
                ),
                (
                    "b.toml",
                    "name = \"b\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\nreports_to = \"a\"",
                ),
            ],
            &["reports_to", "cycle"],
        ),
        (
            "one token, two bots",
            &[
                (
                    "a.toml",
                    "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\n[telegram]\ntoken_env = \"T\"",
                ),
                (
                    "b.toml",
                    "name = \"b\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\n[telegram]\ntoken_env = \"T\"",
                ),
            ],
            &["[telegram].token_env", "one bot serves exactly one agent"],
        ),
        (
            "a Signal account not in international form",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\n[signal]\naccount = \"015100000000\"",
            )],
            &["a.toml", "[signal].account", "international form"],
        ),
        (
            "a Signal person who is neither a number nor a uuid",
            &[(
                "a.toml",
                "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\n[signal]\naccount = \"+4915100000000\"\nallow_users = [\"+4917200000001\", \"Ana\"]",
            )],
            &["a.toml", "[signal].allow_users[1]", "`Ana`"],
        ),
        (
            "one Signal account, two agents",
            &[
                (
                    "a.toml",
                    "name = \"a\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\n[signal]\naccount = \"+4915100000000\"",
                ),
                (
                    "b.toml",
                    "name = \"b\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"x\"\n[signal]\naccount = \"+4915100000000\"",
                ),
            ],
            &["[signal].account", "one account serves exactly one agent"],
        ),
    ];
    for (case, agents, expected) in cases {
        let setup = Setup::new(GOOD_CONFIG, agents);
        let error = setup
            .load(&[], Overrides::default())
            .expect_err(case)
            .to_string();
        for needle in *expected {
            assert!(
                error.contains(needle),
                "{case}: `{error}` should mention `{needle}`"
            );
        }
    }
}

#[test]
fn environment_overrides_the_file_and_flags_override_the_environment() {
    let setup = Setup::new(GOOD_CONFIG, &[("helper.toml", GOOD_AGENT)]);
    let env = [
        ("CLAWVISOR_STUDIO_BIND", "127.0.0.1:9001"),
        ("CLAWVISOR_SUPERVISION_MAX_RESTARTS", "9"),
        ("CLAWVISOR_TELEGRAM_BOOT_STAGGER", "250ms"),
        ("CLAWVISOR_DATA_DIR", "/var/lib/clawvisor-test"),
    ];
    let loaded = setup.load(&env, Overrides::default()).unwrap();
    assert_eq!(loaded.config.studio.bind, "127.0.0.1:9001");
    assert_eq!(loaded.config.supervision.max_restarts, 9);
    assert_eq!(
        loaded.config.telegram.boot_stagger.0,
        std::time::Duration::from_millis(250)
    );
    assert_eq!(loaded.config.data_dir, Path::new("/var/lib/clawvisor-test"));

    let flags = Overrides {
        studio_bind: Some("127.0.0.1:9002".into()),
        ..Overrides::default()
    };
    let loaded = setup.load(&env, flags).unwrap();
    assert_eq!(loaded.config.studio.bind, "127.0.0.1:9002");

    let error = setup
        .load(
            &[("CLAWVISOR_SUPERVISION_MAX_RESTARTS", "many")],
            Overrides::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("environment variable CLAWVISOR_SUPERVISION_MAX_RESTARTS"),
        "{error}"
    );
    assert!(error.contains("[supervision].max_restarts"), "{error}");
    let error = setup
        .load(
            &[],
            Overrides {
                studio_bind: Some("nowhere".into()),
                ..Overrides::default()
            },
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("--studio-bind") && error.contains("[studio].bind"),
        "{error}"
    );

    let loaded = setup
        .load(&[("CLAWVISOR_STUDIO_BINDING", "x")], Overrides::default())
        .unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("CLAWVISOR_STUDIO_BINDING")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn off_loopback_studio_requires_a_token_variable() {
    let setup = Setup::new(
        &format!("{GOOD_CONFIG}\n[studio]\nbind = \"0.0.0.0:7070\"\ntoken_env = \"\""),
        &[("helper.toml", GOOD_AGENT)],
    );
    let error = setup
        .load(&[], Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("[studio].token_env") && error.contains("not loopback"),
        "{error}"
    );
    // The variable named but not set: no token, so no start either.
    let setup = Setup::new(
        &format!("{GOOD_CONFIG}\n[studio]\nbind = \"0.0.0.0:7070\"\ntoken_env = \"STUDIO_T\""),
        &[("helper.toml", GOOD_AGENT)],
    );
    let error = setup
        .load(&[], Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("[studio].token_env") && error.contains("`STUDIO_T`"),
        "{error}"
    );
    let loaded = setup
        .load(
            &[("STUDIO_T", "a-long-enough-operator-token")],
            Overrides::default(),
        )
        .expect("with the token set it loads");
    assert_eq!(loaded.config.studio.bind, "0.0.0.0:7070");
}

#[test]
fn the_shipped_files_are_valid_and_document_every_default_key() {
    let shipped = config::parse_file(config::SHIPPED_CONFIG, "config/clawvisor.toml").unwrap();
    assert!(shipped.providers.contains_key("openai"));
    let defaults = toml::Table::try_from(config::Config::default()).unwrap();
    for (key, value) in &defaults {
        match value {
            toml::Value::Table(section) => {
                if section.is_empty() {
                    continue;
                }
                assert!(
                    config::SHIPPED_CONFIG.contains(&format!("[{key}]")),
                    "section [{key}] is documented"
                );
                for inner in section.keys() {
                    let written = config::SHIPPED_CONFIG.lines().any(|line| {
                        let line = line.trim_start_matches('#').trim();
                        line.starts_with(&format!("{inner} ="))
                    });
                    assert!(
                        written,
                        "[{key}] {inner} is documented in config/clawvisor.toml"
                    );
                }
            }
            _ => assert!(
                config::SHIPPED_CONFIG.contains(&format!("{key} =")),
                "{key} is documented"
            ),
        }
    }
    // The shipped agent is valid against the shipped config.
    let agent =
        config::parse_agent(config::SHIPPED_AGENT, "actors/assistant.toml", &shipped).unwrap();
    assert_eq!(agent.name, "assistant");
}

#[test]
fn with_no_config_at_all_the_built_in_defaults_and_agent_are_used() {
    let empty = tempfile::tempdir().unwrap();
    let loaded = config::load_in(&Overrides::default(), BTreeMap::new(), empty.path()).unwrap();
    // The same setup as the files `clawvisor init` would write there, by canonical paths.
    let real = std::fs::canonicalize(empty.path()).unwrap();
    assert_eq!(loaded.config.data_dir, real.join("data"));
    assert_eq!(loaded.config.agents.dir, real.join("actors"));
    assert!(!empty.path().join("config").exists());
    assert_eq!(loaded.source, ConfigSource::BuiltIn);
    assert_eq!(loaded.agents.len(), 1);
    assert!(loaded.agents_source.is_none());
    assert!(
        loaded
            .hints
            .iter()
            .any(|hint| hint.contains("no config file found")),
        "{:?}",
        loaded.hints
    );
}
