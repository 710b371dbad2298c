//! `clawvisor node serve | pair` (on a node) and `clawvisor nodes add | list | remove` (on the
//! daemon's machine), issue #34. How pairing and the wire work is in `crate::node`.
//!
//! `nodes add` and `nodes remove` edit the config file with `toml_edit` (the operator's comments
//! and layout stay), then ask a running daemon to reload so the node's link starts or stops.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use super::daemon_link::{self, Daemon};
use crate::config::{ConfigSource, LoadedConfig};
use crate::node::{client, pairing};

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Serve this machine's shell and file tools to its paired daemon (mutual TLS).
    Serve {
        /// Address and port (default: `[node] bind`, else 0.0.0.0:7443).
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
    },
    /// Print a one-time pairing code (valid 10 minutes) and this node's fingerprint.
    Pair,
}

#[derive(Debug, Subcommand)]
pub enum NodesCommand {
    /// Pair with a node (`clawvisor node pair` printed the code) and add it to the config.
    Add {
        /// The node's name: tools are `<name>__shell` etc.
        name: String,
        /// `https://nas.lan:7443`.
        url: String,
        /// The code `clawvisor node pair` printed on the node.
        code: String,
        /// An agent that gets the node's tools (repeat for more; `*` for all).
        #[arg(long = "agent", value_name = "AGENT")]
        agents: Vec<String>,
    },
    /// Every paired node: address, fingerprint, agents, and whether it answers now.
    List,
    /// Unpair a node: tell it (when it answers), forget its pin and remove its entry.
    Remove { name: String },
}

/// An empty directory standing for "no agents" when a node loads its config (a node runs none;
/// without one, the config loader would fall back to the built-in agent and its provider).
pub(super) fn no_agents_dir() -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "clawvisor-node-{}-no-agents",
        nix::unistd::getuid()
    ));
    crate::node::keys::private_dir(&dir).ok()?;
    Some(dir)
}

pub(super) async fn run_node(loaded: &LoadedConfig, command: NodeCommand) -> ExitCode {
    match command {
        NodeCommand::Pair => pair_code(loaded),
        NodeCommand::Serve { bind } => serve(loaded, bind).await,
    }
}

pub(super) async fn run_nodes(loaded: &LoadedConfig, command: NodesCommand) -> ExitCode {
    let outcome = match command {
        NodesCommand::Add {
            name,
            url,
            code,
            agents,
        } => add(loaded, &name, &url, &code, &agents).await,
        NodesCommand::List => list(loaded).await,
        NodesCommand::Remove { name } => remove(loaded, &name).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn pair_code(loaded: &LoadedConfig) -> ExitCode {
    let data_dir = &loaded.config.data_dir;
    let made =
        crate::node::keys::load_or_create_identity(&pairing::node_dir(data_dir), "clawvisor-node")
            .and_then(|identity| {
                pairing::make_code(data_dir, crate::clock::now_ms()).map(|code| (identity, code))
            });
    match made {
        Ok((identity, code)) => {
            println!("pairing code: {}", code.code);
            println!("fingerprint:  {}", identity.fingerprint());
            println!(
                "On the daemon's machine, within 10 minutes: clawvisor nodes add <name> \
                 https://<this machine>:7443 {} --agent <agent>",
                code.code
            );
            println!("(`clawvisor node serve` must be running here.)");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(loaded: &LoadedConfig, bind: Option<String>) -> ExitCode {
    let bind = bind.unwrap_or_else(|| loaded.config.node.bind.clone());
    if let Err(error) = std::fs::create_dir_all(&loaded.config.data_dir) {
        eprintln!(
            "cannot create the data directory {}: {error}",
            loaded.config.data_dir.display()
        );
        return ExitCode::from(crate::daemon::EXIT_CONFIG);
    }
    let path = loaded.config.db_path();
    let options = crate::store::StoreOptions::from(&loaded.config);
    let store = match tokio::task::spawn_blocking(move || crate::store::Store::open(&path, options))
        .await
    {
        Ok(Ok(store)) => store,
        Ok(Err(error)) => {
            eprintln!("{error}");
            return ExitCode::from(crate::daemon::EXIT_CONFIG);
        }
        Err(error) => {
            eprintln!("opening the database failed: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Like the daemon: the idle node's resident set is the code it runs (`resident`).
    tokio::spawn(super::serve::release_binary_pages());
    match crate::node::run_node(loaded, store, &bind).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn add(
    loaded: &LoadedConfig,
    name: &str,
    url: &str,
    code: &str,
    agents: &[String],
) -> Result<(), String> {
    if !crate::config::valid_node_name(name) {
        return Err(format!(
            "`{name}` is not a node name: use 1 to 32 characters of a-z, 0-9, `_` and `-`"
        ));
    }
    if loaded.config.nodes.iter().any(|node| node.name == name)
        || loaded
            .config
            .mcp
            .servers
            .iter()
            .any(|server| server.name == name)
    {
        return Err(format!(
            "`{name}` is already a node or an MCP server; remove it first or choose another name"
        ));
    }
    if !matches!(url::Url::parse(url), Ok(parsed) if parsed.scheme() == "https") {
        return Err(format!(
            "`{url}` is not an https:// address (e.g. https://nas.lan:7443)"
        ));
    }
    let file = config_file(loaded)?;
    let pin = client::pair(&loaded.config.data_dir, name, url, code).await?;
    edit_config(&file, |text| {
        crate::config::add_node_entry(text, name, url, agents)
    })?;
    println!("paired with `{name}` at {url}");
    println!("its fingerprint: {}", pin.fingerprint);
    println!("added [[nodes]] `{name}` to {}", file.display());
    reload_if_running(loaded).await;
    Ok(())
}

async fn list(loaded: &LoadedConfig) -> Result<(), String> {
    if loaded.config.nodes.is_empty() {
        println!("no nodes: pair one with `clawvisor node pair` on it, then `clawvisor nodes add`");
        return Ok(());
    }
    for node in &loaded.config.nodes {
        let data_dir = &loaded.config.data_dir;
        let fingerprint = client::node_pin(data_dir, &node.name)
            .map(|pin| pin.fingerprint)
            .unwrap_or_else(|_| "NOT PAIRED".to_string());
        let state = match client::health(data_dir, &node.name, &node.url).await {
            Ok((body, latency)) => format!(
                "answers in {} ms, version {}{}",
                latency.as_millis(),
                body["version"].as_str().unwrap_or("?"),
                client::lends(&body)
            ),
            Err(error) => format!("does not answer: {error}"),
        };
        println!(
            "{}  {}  agents: {}\n    fingerprint {fingerprint}\n    {state}",
            node.name,
            node.url,
            if node.agents.is_empty() {
                "(none)".to_string()
            } else {
                node.agents.join(", ")
            }
        );
    }
    Ok(())
}

async fn remove(loaded: &LoadedConfig, name: &str) -> Result<(), String> {
    let data_dir = &loaded.config.data_dir;
    let entry = loaded.config.nodes.iter().find(|node| node.name == name);
    let pinned = client::node_pin(data_dir, name).ok();
    if entry.is_none() && pinned.is_none() {
        return Err(format!(
            "there is no node `{name}` (see `clawvisor nodes list`)"
        ));
    }
    let url = entry
        .map(|entry| entry.url.clone())
        .or(pinned.as_ref().map(|pin| pin.url.clone()));
    if let (Some(url), Some(_)) = (url, &pinned) {
        match client::tell_revoked(data_dir, name, &url).await {
            Ok(()) => println!("the node `{name}` forgot this daemon"),
            Err(error) => println!(
                "the node `{name}` was not told ({error}); it refuses this daemon anyway once \
                 paired elsewhere, and its pairing is void here"
            ),
        }
    }
    client::forget_node(data_dir, name)?;
    if entry.is_some() {
        let file = config_file(loaded)?;
        edit_config(&file, |text| crate::config::remove_node_entry(text, name))?;
        println!("removed [[nodes]] `{name}` from {}", file.display());
    }
    reload_if_running(loaded).await;
    Ok(())
}

fn config_file(loaded: &LoadedConfig) -> Result<PathBuf, String> {
    match &loaded.source {
        ConfigSource::File(path) => Ok(path.clone()),
        ConfigSource::BuiltIn => Err(
            "there is no config file to add the node to: run `clawvisor init` first (or pass \
             --config)"
                .to_string(),
        ),
    }
}

/// Reads the config file, applies `change` to its text, and writes it back whole (temp file,
/// rename).
fn edit_config(
    file: &Path,
    change: impl FnOnce(&str) -> Result<String, String>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
    let text = change(&text).map_err(|error| format!("{}: {error}", file.display()))?;
    let temporary = file.with_extension("toml.tmp");
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, file))
        .map_err(|error| format!("cannot write {}: {error}", file.display()))
}

/// Asks a running daemon to reload (so a node's link starts or stops); says so when none runs.
async fn reload_if_running(loaded: &LoadedConfig) {
    match daemon_link::find(loaded).await {
        Ok(Daemon::Running(api)) => match api.post("/api/v1/reload", serde_json::json!({})).await {
            Ok(body) => println!(
                "the running daemon reloaded: {}",
                body["summary"].as_str().unwrap_or("done")
            ),
            Err(error) => {
                println!("the running daemon did not reload ({error}); run `clawvisor reload`")
            }
        },
        _ => println!("the daemon is not running: it uses the node when it starts"),
    }
}
