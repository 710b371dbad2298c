//! `clawvisor skills list | show | validate`: the skill catalogue, one skill, or a folder to check.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::{AgentSpec, LoadedConfig};
use crate::skills::{self, Entry, Level, Skill};

use super::SkillsCommand;

pub(super) fn run(loaded: &LoadedConfig, command: SkillsCommand) -> ExitCode {
    match command {
        SkillsCommand::Validate { path } => validate(loaded, &path),
        SkillsCommand::List => list(loaded, &catalogue(loaded)),
        SkillsCommand::Show { name } => show(&catalogue(loaded), &name),
    }
}

/// The agent's workspace: its `workspace`, else `<data dir>/workspaces/<name>`.
fn workspace(loaded: &LoadedConfig, spec: &AgentSpec) -> PathBuf {
    spec.workspace
        .clone()
        .unwrap_or_else(|| loaded.config.data_dir.join("workspaces").join(&spec.name))
}

/// `skills validate`: parses the folder's `SKILL.md` and warns of every requirement this machine
/// and config do not meet; fails on an invalid skill or any warning.
fn validate(loaded: &LoadedConfig, path: &Path) -> ExitCode {
    let dir = if path.is_file() {
        path.parent().map(PathBuf::from).unwrap_or_default()
    } else {
        path.to_path_buf()
    };
    let file = dir.join("SKILL.md");
    let result = std::fs::read_to_string(&file)
        .map_err(|error| format!("cannot read {}: {error}", file.display()))
        .and_then(|text| skills::parse(&text, &dir, Level::Installed));
    match result {
        Ok(skill) => {
            println!("{}: valid skill `{}`", file.display(), skill.name);
            let warnings = print_unmet_requirements(loaded, &skill);
            for key in skill.unknown.keys() {
                println!("  note: key `{key}` is not used by clawvisor (kept)");
            }
            if warnings == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            println!("{}: invalid: {error}", file.display());
            ExitCode::FAILURE
        }
    }
}

/// Prints a warning per tool, MCP server, environment variable and program the skill requires
/// that is not there; returns how many were printed.
fn print_unmet_requirements(loaded: &LoadedConfig, skill: &Skill) -> usize {
    let mut warnings = 0;
    for tool in skill
        .tools
        .iter()
        .filter(|tool| !crate::tools::is_known_tool(tool))
    {
        println!("  warning: requires unknown tool `{tool}`");
        warnings += 1;
    }
    let servers: Vec<&str> = loaded
        .config
        .mcp
        .servers
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    for server in skill
        .mcp
        .iter()
        .filter(|server| !servers.contains(&server.as_str()))
    {
        println!(
            "  warning: requires MCP server `{server}`, which is not configured ([[mcp.servers]])"
        );
        warnings += 1;
    }
    for variable in skill
        .requires
        .env
        .iter()
        .filter(|name| std::env::var_os(name).is_none())
    {
        println!("  warning: requires the environment variable {variable}, which is not set");
        warnings += 1;
    }
    for binary in skill
        .requires
        .bins
        .iter()
        .filter(|name| !skills::on_path(name))
    {
        println!("  warning: requires the program `{binary}`, not found on PATH");
        warnings += 1;
    }
    warnings
}

/// Every skill the agents can see: the first agent's levels (bundled, installed, its workspace),
/// then the other agents' workspace skills whose names are not taken yet.
fn catalogue(loaded: &LoadedConfig) -> Vec<Entry> {
    let first_workspace = loaded
        .agents
        .first()
        .map(|spec| workspace(loaded, spec))
        .unwrap_or_default();
    let mut catalogue = skills::discover(&crate::skills::levels(loaded, &first_workspace));
    for spec in loaded.agents.iter().skip(1) {
        for entry in skills::load_level(&workspace(loaded, spec).join("skills"), Level::Workspace) {
            if !catalogue.iter().any(|known| known.name == entry.name) {
                catalogue.push(entry);
            }
        }
    }
    catalogue
}

/// `skills show`: where the named skill comes from, what it needs and its instructions.
fn show(catalogue: &[Entry], name: &str) -> ExitCode {
    let Some(entry) = catalogue.iter().find(|entry| entry.name == name) else {
        eprintln!("no skill named `{name}`");
        return ExitCode::FAILURE;
    };
    println!(
        "{} ({}, {})",
        entry.name,
        entry.level.as_str(),
        entry.dir.display()
    );
    match &entry.skill {
        Ok(skill) => {
            println!("{}", skill.description);
            println!(
                "tools: {:?}  mcp: {:?}  risk: {:?}",
                skill.tools, skill.mcp, skill.risk
            );
            for (key, value) in &skill.unknown {
                println!("{key}: {value} (not used, kept)");
            }
            println!(
                "
{}",
                skill.instructions
            );
        }
        Err(error) => println!("invalid: {error}"),
    }
    ExitCode::SUCCESS
}

/// `skills list`: a line per skill found, then whether each agent's skills are enabled.
fn list(loaded: &LoadedConfig, catalogue: &[Entry]) -> ExitCode {
    if catalogue.is_empty() {
        println!(
            "no skills found (bundled: skills/ beside the config; installed: <data dir>/skills)"
        );
    }
    for entry in catalogue {
        match (&entry.shadowed, &entry.skill) {
            (Some(reason), _) => {
                println!(
                    "{:<24} {:<9} NOT USED: {reason}",
                    entry.name,
                    entry.level.as_str()
                )
            }
            (None, Ok(skill)) => println!(
                "{:<24} {:<9} {}",
                entry.name,
                entry.level.as_str(),
                skill.description
            ),
            (None, Err(error)) => println!(
                "{:<24} {:<9} INVALID: {error}",
                entry.name,
                entry.level.as_str()
            ),
        }
    }
    for spec in &loaded.agents {
        for name in &spec.skills {
            let status = skill_status(loaded, spec, catalogue, name);
            println!("agent {}: {name}: {status}", spec.name);
        }
    }
    ExitCode::SUCCESS
}

/// Whether the agent can use the named skill: `enabled`, or `unavailable:` and why.
fn skill_status(
    loaded: &LoadedConfig,
    spec: &AgentSpec,
    catalogue: &[Entry],
    name: &str,
) -> String {
    match catalogue.iter().find(|entry| entry.name == *name) {
        None => "unavailable: not found".to_string(),
        Some(Entry {
            skill: Err(error), ..
        }) => format!("unavailable: invalid ({error})"),
        Some(Entry {
            skill: Ok(skill), ..
        }) => {
            let servers: Vec<String> = loaded
                .config
                .mcp
                .servers
                .iter()
                .filter(|s| s.enabled)
                .map(|s| s.name.clone())
                .collect();
            let has_env = |name: &str| std::env::var_os(name).is_some();
            let context = skills::AgentContext {
                agent: &spec.name,
                tools: &spec.tools,
                mcp_servers: &servers,
                env: &has_env,
                bin: &skills::on_path,
            };
            match skills::availability(skill, &context) {
                Ok(()) => "enabled".to_string(),
                Err(reason) => format!("unavailable: {reason}"),
            }
        }
    }
}
