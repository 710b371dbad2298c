//! `[[nodes]]` (on the daemon: the paired machines whose tools agents may use) and `[node]` (on a
//! node: where `clawvisor node serve` listens and which directories its file tools may use).
//!
//! `clawvisor nodes add` writes the `[[nodes]]` entry after pairing; the keys and pins are files
//! under `<data dir>/nodes/`, never in the config. A change of `[[nodes]]` is applied by a reload
//! (the node's link is started, stopped or restarted like an MCP server's); `[node]` (and, on a
//! node, `[[mcp.servers]]`, which it forwards: `node::upstream`) is read when `node serve` starts
//! (a change needs a restart of the node). Roots must exist, be directories, and not nest.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Dur};

/// One `[[nodes]]` entry: a machine paired with `clawvisor nodes add`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// `[a-z0-9_-]`, unique among nodes and MCP servers; tools are named `<name>__shell` etc.
    pub name: String,
    /// `https://nas.lan:7443`.
    pub url: String,
    /// Agents that get the node's tools (`"*"`: every agent).
    #[serde(default)]
    pub agents: Vec<String>,
    /// Per-call timeout.
    #[serde(default = "default_node_timeout")]
    pub timeout: Dur,
    #[serde(default = "default_true")]
    pub enabled: bool,
}

fn default_node_timeout() -> Dur {
    Dur::secs(120)
}

fn default_true() -> bool {
    true
}

/// `[node]`: this machine as a node (read by `clawvisor node serve` only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeServeConfig {
    /// Where `node serve` listens (`--bind` wins).
    pub bind: String,
    /// The directories the node's file tools may use (existing directories, none inside
    /// another); the shell runs in the first and its sandbox grants all of them like a
    /// workspace. Empty: `<data dir>/node-workspace`.
    pub roots: Vec<PathBuf>,
}

/// The port a node listens on by default.
pub const DEFAULT_NODE_BIND: &str = "0.0.0.0:7443";

impl Default for NodeServeConfig {
    fn default() -> Self {
        Self {
            bind: DEFAULT_NODE_BIND.to_string(),
            roots: Vec::new(),
        }
    }
}

/// Checks `[[nodes]]` and `[node]`; `mcp_names` are the MCP servers' names (a node's tools share
/// their namespace).
pub(super) fn validate(
    nodes: &[NodeEntry],
    node: &NodeServeConfig,
    mcp_names: &BTreeSet<&str>,
    origin: &str,
) -> Result<(), ConfigError> {
    let mut seen = BTreeSet::new();
    for (index, entry) in nodes.iter().enumerate() {
        let key = |field: &str| format!("[nodes.{index}].{field}");
        if !valid_node_name(&entry.name) {
            return Err(ConfigError::key(
                origin,
                key("name"),
                format!(
                    "`{}` must be 1 to 32 characters of a-z, 0-9, `_` and `-`, without `__`",
                    entry.name
                ),
            ));
        }
        if !seen.insert(entry.name.as_str()) || mcp_names.contains(entry.name.as_str()) {
            return Err(ConfigError::key(
                origin,
                key("name"),
                format!(
                    "`{}` is used by another [[nodes]] or [[mcp.servers]] entry",
                    entry.name
                ),
            ));
        }
        match url::Url::parse(&entry.url) {
            Ok(url) if url.scheme() == "https" && url.host().is_some() => {}
            _ => {
                return Err(ConfigError::key(
                    origin,
                    key("url"),
                    format!(
                        "`{}` is not an https:// address (a node listens with TLS, e.g. \
                         https://nas.lan:7443)",
                        entry.url
                    ),
                ));
            }
        }
        if entry.timeout.0 < Duration::from_millis(100)
            || entry.timeout.0 > Duration::from_secs(3600)
        {
            return Err(ConfigError::key(
                origin,
                key("timeout"),
                format!("{} is out of range (expected 100ms to 1h)", entry.timeout),
            ));
        }
    }
    if node.bind.parse::<std::net::SocketAddr>().is_err() {
        return Err(ConfigError::key(
            origin,
            "[node].bind",
            format!(
                "`{}` is not an address and port like 0.0.0.0:7443",
                node.bind
            ),
        ));
    }
    validate_roots(&node.roots, origin)
}

/// `[node] roots`: absolute paths of existing directories, none inside another (a path's rules
/// would otherwise depend on which root it is read against).
fn validate_roots(roots: &[PathBuf], origin: &str) -> Result<(), ConfigError> {
    let mut real_roots: Vec<(usize, PathBuf)> = Vec::new();
    for (index, root) in roots.iter().enumerate() {
        let key = format!("[node].roots.{index}");
        if !root.is_absolute() {
            return Err(ConfigError::key(
                origin,
                key,
                format!("`{}` must be an absolute path", root.display()),
            ));
        }
        let real = match std::fs::canonicalize(root) {
            Ok(real) if real.is_dir() => real,
            Ok(_) => {
                return Err(ConfigError::key(
                    origin,
                    key,
                    format!(
                        "`{}` is not a directory; list the directories the node's file tools \
                         may use",
                        root.display()
                    ),
                ));
            }
            Err(error) => {
                let problem = if error.kind() == std::io::ErrorKind::NotFound {
                    "does not exist".to_string()
                } else {
                    format!("cannot be used ({})", crate::cause::explain(&error))
                };
                return Err(ConfigError::key(
                    origin,
                    key,
                    format!(
                        "`{}` {problem}; create the directory or remove it from the list",
                        root.display()
                    ),
                ));
            }
        };
        if real.parent().is_none() {
            return Err(ConfigError::key(
                origin,
                key,
                "`/` would confine nothing; list the directories the node's tools may use",
            ));
        }
        if let Some((other, _)) = real_roots
            .iter()
            .find(|(_, seen)| seen.starts_with(&real) || real.starts_with(seen))
        {
            return Err(ConfigError::key(
                origin,
                key,
                format!(
                    "`{}` and `{}` (roots.{other}) lie one inside the other; list each directory \
                     once, without its parent or child",
                    root.display(),
                    roots[*other].display()
                ),
            ));
        }
        real_roots.push((index, real));
    }
    Ok(())
}

/// A node's name: as an MCP server's (`a-z0-9_-`, at most 32, no `__`).
pub fn valid_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The config file's text with a `[[nodes]]` entry added (comments and layout stay).
pub fn add_node_entry(
    text: &str,
    name: &str,
    url: &str,
    agents: &[String],
) -> Result<String, String> {
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .map_err(|error| format!("the config file is not valid TOML: {error}"))?;
    let nodes = document
        .entry("nodes")
        .or_insert_with(|| toml_edit::Item::ArrayOfTables(toml_edit::ArrayOfTables::new()));
    let Some(nodes) = nodes.as_array_of_tables_mut() else {
        return Err("`nodes` in the config file is not a list of [[nodes]] tables".to_string());
    };
    let mut table = toml_edit::Table::new();
    table.insert("name", toml_edit::value(name));
    table.insert("url", toml_edit::value(url));
    let mut list = toml_edit::Array::new();
    for agent in agents {
        list.push(agent.as_str());
    }
    table.insert("agents", toml_edit::value(list));
    nodes.push(table);
    Ok(document.to_string())
}

/// The config file's text without the `[[nodes]]` entry named `name`.
pub fn remove_node_entry(text: &str, name: &str) -> Result<String, String> {
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .map_err(|error| format!("the config file is not valid TOML: {error}"))?;
    if let Some(nodes) = document
        .get_mut("nodes")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
    {
        nodes.retain(|table| table.get("name").and_then(toml_edit::Item::as_str) != Some(name));
    }
    Ok(document.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, url: &str) -> NodeEntry {
        NodeEntry {
            name: name.into(),
            url: url.into(),
            agents: Vec::new(),
            timeout: default_node_timeout(),
            enabled: true,
        }
    }

    fn problem(nodes: &[NodeEntry], node: &NodeServeConfig, mcp: &[&str]) -> String {
        let names = mcp.iter().copied().collect();
        validate(nodes, node, &names, "t.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn errors_name_the_field_to_fix() {
        let fine = NodeServeConfig::default();
        assert!(
            validate(
                &[entry("nas", "https://nas.lan:7443")],
                &fine,
                &BTreeSet::new(),
                "t"
            )
            .is_ok()
        );
        assert!(
            problem(&[entry("nas", "http://nas.lan:7443")], &fine, &[]).contains("[nodes.0].url")
        );
        assert!(problem(&[entry("a__b", "https://x")], &fine, &[]).contains("[nodes.0].name"));
        assert!(
            problem(&[entry("files", "https://x")], &fine, &["files"]).contains("used by another")
        );
        let two = [entry("nas", "https://a"), entry("nas", "https://b")];
        assert!(problem(&two, &fine, &[]).contains("[nodes.1].name"));
        let bind = NodeServeConfig {
            bind: "nowhere".into(),
            roots: Vec::new(),
        };
        assert!(problem(&[], &bind, &[]).contains("[node].bind"));
        let scratch = std::env::temp_dir().join(format!("clawvisor-roots-{}", std::process::id()));
        std::fs::create_dir_all(scratch.join("photos/2024")).unwrap();
        std::fs::create_dir_all(scratch.join("docs")).unwrap();
        std::fs::write(scratch.join("file"), "x").unwrap();
        let roots = |list: &[&str]| NodeServeConfig {
            roots: list.iter().map(|name| scratch.join(name)).collect(),
            ..NodeServeConfig::default()
        };
        assert!(validate(&[], &roots(&["photos", "docs"]), &BTreeSet::new(), "t").is_ok());
        let missing = problem(&[], &roots(&["photos", "gone"]), &[]);
        assert!(
            missing.contains("[node].roots.1") && missing.contains("does not exist"),
            "{missing}"
        );
        let file = problem(&[], &roots(&["file"]), &[]);
        assert!(file.contains("[node].roots.0") && file.contains("not a directory"));
        let nested = problem(&[], &roots(&["photos", "docs", "photos/2024"]), &[]);
        assert!(
            nested.contains("[node].roots.2") && nested.contains("one inside the other"),
            "{nested}"
        );
        let _ = std::fs::remove_dir_all(&scratch);
        let relative = NodeServeConfig {
            roots: vec!["srv".into()],
            ..NodeServeConfig::default()
        };
        assert!(problem(&[], &relative, &[]).contains("[node].roots.0"));
    }
}
