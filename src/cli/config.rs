//! `clawvisor config check`: validates the config and agent files and prints the effective settings.

use std::process::ExitCode;

use crate::config::LoadedConfig;

pub(super) fn check(loaded: &LoadedConfig) -> ExitCode {
    let config = &loaded.config;
    println!("config: {} (ok)", loaded.source);
    println!("data_dir: {}", config.data_dir.display());
    println!("studio: http://{}", config.studio.bind);
    println!(
        "timezone: {} ({})",
        loaded.timezone.zone.name(),
        loaded.timezone.origin
    );
    match &loaded.agents_source {
        Some(dir) => println!("agents: {} from {}", loaded.agents.len(), dir.display()),
        None => println!("agents: 1 (the built-in assistant)"),
    }
    for agent in &loaded.agents {
        let bot = agent
            .telegram
            .as_ref()
            .map(|telegram| format!("telegram token from {}", telegram.token_env))
            .unwrap_or_else(|| "no telegram bot".into());
        println!(
            "  - {} ({}/{}, {}, {})",
            agent.name,
            agent.provider,
            agent.model,
            agent.autonomy.as_str(),
            bot
        );
        if let Some(timezone) = &agent.timezone {
            println!("    timezone {timezone}");
        }
    }
    for warning in &loaded.warnings {
        println!("warning: {warning}");
    }
    for hint in &loaded.hints {
        println!("next: {hint}");
    }
    ExitCode::SUCCESS
}
