//! The usual test world in one builder: the fake Telegram Bot API, the scripted model, agents
//! (some with a bot on the fake) and the daemon, in-process ([`WorldBuilder::start`]) or staged on
//! disk for the real binary ([`WorldBuilder::stage`]). Tests used to assemble this by hand, each
//! its own way; one builder keeps the token, variable and `[telegram]` table conventions in one
//! place.

use std::collections::BTreeMap;
use std::path::Path;

use crate::store::Store;
use crate::testkit::fake_telegram::{BotId, FakeTelegram};
use crate::testkit::harness::{
    Harness, HarnessOptions, ScratchDir, agent_toml, config_toml, telegram_toml,
};
use crate::testkit::process::write_config;
use crate::testkit::scripted_llm::{Script, ScriptedLlm};

/// A bot on the fake Bot API and the agent it talks to.
#[derive(Debug, Clone)]
pub struct WorldBot {
    pub agent: String,
    pub token: String,
    pub id: BotId,
}

/// A running daemon with its fakes.
pub struct World {
    pub fake: FakeTelegram,
    pub llm: ScriptedLlm,
    pub harness: Harness,
    pub bots: Vec<WorldBot>,
}

/// The fakes of a world staged on disk for the real binary (see [`WorldBuilder::stage`]).
pub struct Staged {
    pub fake: FakeTelegram,
    pub llm: ScriptedLlm,
    pub bots: Vec<WorldBot>,
    /// The environment the daemon needs (the bots' token variables).
    pub env: BTreeMap<String, String>,
}

struct BotSpec {
    token: String,
    allow_users: Vec<i64>,
    approvers: Vec<i64>,
}

struct AgentSpec {
    name: String,
    extra: String,
    bot: Option<BotSpec>,
}

/// Builds a [`World`]; see [`World::builder`].
pub struct WorldBuilder {
    script: Script,
    agents: Vec<AgentSpec>,
    config_extra: String,
    studio: bool,
    dir: Option<ScratchDir>,
    env: BTreeMap<String, String>,
}

/// The variable holding `agent`'s bot token: `ADA_TOKEN` for `ada`.
pub fn token_variable(agent: &str) -> String {
    format!("{}_TOKEN", agent.to_uppercase())
}

impl World {
    /// A world whose model answers by `script`. Without any `agent*` call it has the harness's
    /// default agent `ada`, without a bot.
    pub fn builder(script: Script) -> WorldBuilder {
        WorldBuilder {
            script,
            agents: Vec::new(),
            config_extra: String::new(),
            studio: true,
            dir: None,
            env: BTreeMap::new(),
        }
    }

    /// The bot of `agent`.
    pub fn bot(&self, agent: &str) -> BotId {
        bot_of(&self.bots, agent)
    }

    pub fn store(&self) -> &Store {
        self.harness.store()
    }
}

impl Staged {
    /// The bot of `agent`.
    pub fn bot(&self, agent: &str) -> BotId {
        bot_of(&self.bots, agent)
    }
}

fn bot_of(bots: &[WorldBot], agent: &str) -> BotId {
    bots.iter()
        .find(|bot| bot.agent == agent)
        .map(|bot| bot.id)
        .unwrap_or_else(|| panic!("the world has no bot for agent {agent}"))
}

impl WorldBuilder {
    /// An agent without a bot; `extra` goes into its file (tools, autonomy, ...).
    pub fn agent(mut self, name: &str, extra: &str) -> Self {
        self.agents.push(AgentSpec {
            name: name.to_string(),
            extra: extra.to_string(),
            bot: None,
        });
        self
    }

    /// An agent with a bot `<name>_bot` on the fake, its token in `<NAME>_TOKEN`; `extra` goes
    /// into its file before the `[telegram]` table.
    pub fn agent_with_bot(
        mut self,
        name: &str,
        extra: &str,
        token: &str,
        allow_users: &[i64],
        approvers: &[i64],
    ) -> Self {
        self.agents.push(AgentSpec {
            name: name.to_string(),
            extra: extra.to_string(),
            bot: Some(BotSpec {
                token: token.to_string(),
                allow_users: allow_users.to_vec(),
                approvers: approvers.to_vec(),
            }),
        });
        self
    }

    /// TOML appended to the daemon's config (a `[telegram]` table here replaces the harness's).
    pub fn config_extra(mut self, extra: &str) -> Self {
        self.config_extra.push_str(extra);
        self.config_extra.push('\n');
        self
    }

    /// Whether Studio starts (it does unless told otherwise).
    pub fn studio(mut self, studio: bool) -> Self {
        self.studio = studio;
        self
    }

    /// The daemon's directory (files written into it beforehand stay).
    pub fn dir(mut self, dir: ScratchDir) -> Self {
        self.dir = Some(dir);
        self
    }

    /// An environment variable for config loading.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    /// Starts the fakes and the daemon in-process.
    pub async fn start(self) -> World {
        self.start_after(|_, _| {}).await
    }

    /// Like [`start`](Self::start), with `before_start` run once the bots exist on the fake and
    /// before the daemon starts (to queue faults or updates it meets at boot).
    pub async fn start_after(self, before_start: impl FnOnce(&FakeTelegram, &[WorldBot])) -> World {
        let mut builder = self;
        let dir = match builder.dir.take() {
            Some(dir) => dir,
            None => ScratchDir::new("clawvisor-world").expect("a scratch directory"),
        };
        let studio = builder.studio;
        let config_extra = std::mem::take(&mut builder.config_extra);
        let (staged, agents) = builder.fakes().await;
        before_start(&staged.fake, &staged.bots);
        let mut options = HarnessOptions::new(staged.llm.base_url());
        if !agents.is_empty() {
            options.agents = agents;
        }
        options.config_extra = config_extra;
        options.env = staged.env;
        options.start.studio = studio;
        let harness = Harness::start_in(dir, options)
            .await
            .unwrap_or_else(|error| panic!("the daemon starts: {error}"));
        World {
            fake: staged.fake,
            llm: staged.llm,
            harness,
            bots: staged.bots,
        }
    }

    /// Starts the fakes and writes the daemon's config and agent files into `dir` (as the
    /// harness would), for the real binary to run on.
    pub async fn stage(mut self, dir: &Path) -> Staged {
        let config_extra = std::mem::take(&mut self.config_extra);
        let (staged, agents) = self.fakes().await;
        let agents = if agents.is_empty() {
            vec![agent_toml("ada", "")]
        } else {
            agents
        };
        write_config(
            dir,
            &config_toml(&staged.llm.base_url(), &config_extra),
            &agents,
        )
        .unwrap_or_else(|error| panic!("cannot write the config into {}: {error}", dir.display()));
        staged
    }

    /// Starts the fake Bot API and the model, adds the bots; returns them with the agent files.
    async fn fakes(self) -> (Staged, Vec<String>) {
        let fake = FakeTelegram::start().await;
        let llm = ScriptedLlm::start(self.script)
            .await
            .unwrap_or_else(|error| panic!("the scripted model starts: {error}"));
        let mut env = self.env;
        let mut bots = Vec::new();
        let mut agents = Vec::new();
        for agent in self.agents {
            let Some(bot) = agent.bot else {
                agents.push(agent_toml(&agent.name, &agent.extra));
                continue;
            };
            let id = fake.add_bot(&bot.token, &format!("{}_bot", agent.name));
            let variable = token_variable(&agent.name);
            env.insert(variable.clone(), bot.token.clone());
            let telegram = telegram_toml(
                &variable,
                &fake.base_url(),
                &bot.allow_users,
                &bot.approvers,
            );
            agents.push(agent_toml(
                &agent.name,
                &format!("{}\n{telegram}", agent.extra),
            ));
            bots.push(WorldBot {
                agent: agent.name,
                token: bot.token,
                id,
            });
        }
        (
            Staged {
                fake,
                llm,
                bots,
                env,
            },
            agents,
        )
    }
}
