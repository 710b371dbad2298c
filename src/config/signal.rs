//! An agent's `[signal]` table: the Signal account (registered or linked in signal-cli) that
//! talks for the agent, where signal-cli's HTTP daemon listens, and who may talk and approve.
//!
//! ```toml
//! [signal]
//! account = "+4915100000000"          # the number registered or linked in signal-cli
//! rpc_url = "http://127.0.0.1:7583"   # signal-cli daemon --http (the default)
//! allow_users = ["+4917200000001"]    # or the claim flow
//! approvers = ["+4917200000001"]      # who may answer approvals (default: allow_users)
//! ```
//!
//! Invariants: a loaded `[signal]` has an account in international form (`+` and 7–15 digits),
//! an http(s) `rpc_url` without credentials in it, and people given as numbers in that form or as
//! Signal uuids; every refusal names the key (`[signal].allow_users[1]`). One account serves one
//! agent; the daemon starts one seam account for it (`actors/specs.rs` `signal_specs`). Reload: a
//! change is a change of the agent (`reload::plan` compares whole `AgentSpec`s), and the account
//! is stopped and started again with it (`Plan::seam_restarted`).

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// signal-cli's HTTP daemon on this machine, as the README's unit starts it.
pub const DEFAULT_SIGNAL_RPC_URL: &str = "http://127.0.0.1:7583";

/// The agent's Signal account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalSpec {
    /// The account's number in international form.
    pub account: String,
    /// signal-cli's HTTP daemon.
    #[serde(default = "default_rpc_url")]
    pub rpc_url: String,
    /// Numbers (or Signal uuids) allowed to talk to the agent; others go through claim/pairing.
    #[serde(default)]
    pub allow_users: Vec<String>,
    /// Numbers (or uuids) allowed to answer approvals (default: `allow_users`).
    #[serde(default)]
    pub approvers: Vec<String>,
}

impl SignalSpec {
    /// Who may talk and who may approve (the approvers default to the allowed), trimmed.
    pub fn people(&self) -> (Vec<String>, Vec<String>) {
        let allowed: Vec<String> = self
            .allow_users
            .iter()
            .map(|person| person.trim().to_string())
            .collect();
        let approvers = if self.approvers.is_empty() {
            allowed.clone()
        } else {
            self.approvers
                .iter()
                .map(|person| person.trim().to_string())
                .collect()
        };
        (allowed, approvers)
    }
}

fn default_rpc_url() -> String {
    DEFAULT_SIGNAL_RPC_URL.to_string()
}

/// A number in international form: `+`, then 7 to 15 digits.
pub fn is_phone_number(text: &str) -> bool {
    text.strip_prefix('+').is_some_and(|digits| {
        (7..=15).contains(&digits.len()) && digits.bytes().all(|byte| byte.is_ascii_digit())
    })
}

/// A Signal uuid (ACI): 8-4-4-4-12 hex digits.
pub fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Checks a `[signal]` table read from `origin`.
pub(crate) fn check_signal(signal: &SignalSpec, origin: &str) -> Result<(), ConfigError> {
    if !is_phone_number(signal.account.trim()) {
        return Err(ConfigError::key(
            origin,
            "[signal].account",
            format!(
                "`{}` is not a phone number in international form; write it as signal-cli knows it, like \"+4915100000000\"",
                bounded(&signal.account)
            ),
        ));
    }
    let url = reqwest::Url::parse(&signal.rpc_url).map_err(|error| {
        ConfigError::key(
            origin,
            "[signal].rpc_url",
            format!(
                "invalid URL `{}`: {error}; signal-cli's default is {DEFAULT_SIGNAL_RPC_URL}",
                bounded(&signal.rpc_url)
            ),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::key(
            origin,
            "[signal].rpc_url",
            "must be an http:// or https:// URL (signal-cli daemon --http)",
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::key(
            origin,
            "[signal].rpc_url",
            "must not carry a user name or password (signal-cli's HTTP daemon has no login; keep it on 127.0.0.1)",
        ));
    }
    for (key, people) in [
        ("allow_users", &signal.allow_users),
        ("approvers", &signal.approvers),
    ] {
        for (index, person) in people.iter().enumerate() {
            if !is_phone_number(person.trim()) && !is_uuid(person.trim()) {
                return Err(ConfigError::key(
                    origin,
                    format!("[signal].{key}[{index}]"),
                    format!(
                        "`{}` is neither a phone number in international form (\"+4917200000001\") nor a Signal uuid",
                        bounded(person)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// At most 64 characters of a value, for messages.
fn bounded(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(account: &str, rpc_url: &str, allow: &[&str]) -> SignalSpec {
        SignalSpec {
            account: account.into(),
            rpc_url: rpc_url.into(),
            allow_users: allow.iter().map(|person| person.to_string()).collect(),
            approvers: Vec::new(),
        }
    }

    #[test]
    fn a_good_table_passes_and_each_mistake_names_its_key() {
        let good = spec(
            "+4915100000000",
            DEFAULT_SIGNAL_RPC_URL,
            &["+4917200000001", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"],
        );
        assert!(check_signal(&good, "agents/ada.toml").is_ok());
        for (bad, key) in [
            (
                spec("4915100000000", DEFAULT_SIGNAL_RPC_URL, &[]),
                "[signal].account",
            ),
            (
                spec("+49 151", DEFAULT_SIGNAL_RPC_URL, &[]),
                "[signal].account",
            ),
            (
                spec("+4915100000000", "127.0.0.1:7583", &[]),
                "[signal].rpc_url",
            ),
            (
                spec("+4915100000000", "ftp://127.0.0.1", &[]),
                "[signal].rpc_url",
            ),
            (
                spec("+4915100000000", "http://u:p@127.0.0.1:7583", &[]),
                "[signal].rpc_url",
            ),
            (
                spec(
                    "+4915100000000",
                    DEFAULT_SIGNAL_RPC_URL,
                    &["+4917200000001", "ana"],
                ),
                "[signal].allow_users[1]",
            ),
        ] {
            let error = check_signal(&bad, "agents/ada.toml")
                .expect_err("refused")
                .to_string();
            assert!(
                error.starts_with(&format!("agents/ada.toml: {key}: ")),
                "{error}"
            );
        }
    }
}
