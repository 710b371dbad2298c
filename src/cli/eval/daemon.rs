//! The throwaway daemon a scenario runs against: its options for the model source (scripted or
//! live), the channels' tables and secrets the scenario's services need, and its directory with
//! the workspace files in place.

use crate::domain::StartOptions;
use crate::testkit::harness::{HarnessOptions, ScratchDir, agent_toml};
use crate::testkit::scripted_llm::ScriptedLlm;

use super::runner::ModelSource;
use super::scenario::{MAIN_AGENT, Scenario, file_bytes, workspace_path};
use super::services::Services;
use super::telegram::TelegramSide;
use super::whatsapp::WhatsAppSide;

/// The model, the daemon's options, its directory with the workspace files in place, and the
/// fake Bot API when the scenario talks over Telegram.
pub(super) async fn setup(
    scenario: &Scenario,
    source: &ModelSource,
    services: &Services,
) -> Result<(Option<ScriptedLlm>, HarnessOptions, ScratchDir), String> {
    let triggers = super::trigger::env(&scenario.config);
    let start = StartOptions {
        // WhatsApp's webhook and the triggers' are on Studio's port.
        studio: scenario.whatsapp || !triggers.is_empty(),
        channels: scenario.telegram || scenario.whatsapp || scenario.signal,
        scheduler: true,
    };
    let (mut options, llm) =
        harness_options(scenario, source, start, services.telegram.as_ref()).await?;
    if let Some(whatsapp) = &services.whatsapp {
        if let Some(main) = options.agents.first_mut() {
            main.push_str(&whatsapp.agent_table());
        }
        options.env.extend(WhatsAppSide::env());
    }
    options.env.extend(triggers);
    if let Some(signal) = &services.signal
        && let Some(main) = options.agents.first_mut()
    {
        main.push_str(&signal.agent_table());
    }
    options.config_extra.push_str(&services.config());
    options.env.extend(services.env());
    let dir = ScratchDir::new("clawvisor-eval")
        .map_err(|error| format!("cannot create a scratch directory: {error}"))?;
    let workspace = dir.path().join("data").join("workspaces").join(MAIN_AGENT);
    for (path, contents) in &scenario.files {
        let target = workspace.join(workspace_path(path)?);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| format!("[files] `{path}`: {error}"))?;
        }
        std::fs::write(&target, file_bytes(contents)?)
            .map_err(|error| format!("[files] `{path}`: {error}"))?;
    }
    Ok((llm, options, dir))
}

/// The daemon's options for the model source; the main agent's file gets the bot's table.
async fn harness_options(
    scenario: &Scenario,
    source: &ModelSource,
    start: StartOptions,
    telegram: Option<&TelegramSide>,
) -> Result<(HarnessOptions, Option<ScriptedLlm>), String> {
    let (mut options, llm) = model_options(scenario, source, start).await?;
    if let Some(telegram) = telegram {
        if let Some(main) = options.agents.first_mut() {
            main.push_str(&telegram.agent_table());
        }
        let (variable, token) = TelegramSide::token_env();
        options.env.insert(variable, token);
    }
    Ok((options, llm))
}

async fn model_options(
    scenario: &Scenario,
    source: &ModelSource,
    start: StartOptions,
) -> Result<(HarnessOptions, Option<ScriptedLlm>), String> {
    let extras = std::iter::once(scenario.agent.as_str())
        .chain(scenario.agents.iter().map(|agent| agent.file.as_str()));
    let named = scenario.agent_names().into_iter().zip(extras);
    match source {
        ModelSource::Scripted => {
            let llm = ScriptedLlm::start(scenario.script.clone())
                .await
                .map_err(|error| format!("the scripted model did not start: {error}"))?;
            let mut options = HarnessOptions::new(llm.base_url());
            options.agents = named.map(|(name, extra)| agent_toml(name, extra)).collect();
            options.config_extra = scenario.config.clone();
            options.start = start;
            Ok((options, Some(llm)))
        }
        ModelSource::Live {
            provider_toml,
            provider,
            model,
            env,
        } => {
            // The scripted provider entry stays (unused); the agents use the live one, whose
            // table is appended to the config: it must not use the scripted entry's names.
            if provider == "scripted" || model == "scripted-model" {
                return Err(format!(
                    "--live: the provider name `scripted` and the model name `scripted-model` are \
                     the eval runner's own; give the live ones other names (got {provider}/{model})"
                ));
            }
            let mut options = HarnessOptions::new("http://127.0.0.1:9/v1");
            options.agents = named
                .map(|(name, extra)| {
                    let extra = without_model(extra);
                    format!(
                        "name = \"{name}\"\nprovider = \"{provider}\"\nmodel = \"{model}\"\ninstructions = \"You are {name}, a helpful assistant under test.\"\n{extra}\n"
                    )
                })
                .collect();
            options.config_extra = format!("{}\n{provider_toml}\n", scenario.config);
            options.env = env.clone();
            options.start = start;
            Ok((options, None))
        }
    }
}

/// An agent's extra lines without a top-level `model = …`: a scenario may name the scripted
/// model's name (an unpriced one, say), but a live run uses the live model.
fn without_model(extra: &str) -> String {
    let mut in_table = false;
    extra
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            in_table |= line.starts_with('[');
            in_table
                || !line
                    .strip_prefix("model")
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_live_run_drops_only_the_top_level_model_line() {
        let extra = "model = \"cheap\"\nmodels_note = 1\n[telegram]\nmodel = \"kept\"";
        assert_eq!(
            super::without_model(extra),
            "models_note = 1\n[telegram]\nmodel = \"kept\""
        );
    }
}
