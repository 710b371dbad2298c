//! An agent's `[whatsapp]` table: its WhatsApp Business Cloud API account (a phone number of
//! Meta's WhatsApp Manager), the variables holding its secrets, and who may talk to it.
//!
//! Invariants: secrets are named by variable (`*_env`, the environment or the secrets store),
//! never written in a file; a phone number id serves exactly one agent (the webhook routes by it).

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The Graph API's address unless `[whatsapp] api_url` names another (a test fake).
pub const DEFAULT_WHATSAPP_API: &str = "https://graph.facebook.com/v21.0";

/// The agent's WhatsApp account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WhatsAppSpec {
    /// The phone number id from Meta's WhatsApp Manager (digits): where the Graph API sends from
    /// and what the webhook's `metadata.phone_number_id` names.
    pub phone_number_id: String,
    /// The variable holding a system user's access token.
    pub access_token_env: String,
    /// The variable holding the app secret that signs every webhook (`X-Hub-Signature-256`).
    pub app_secret_env: String,
    /// The variable holding the verify token Meta's subscription check must present.
    pub verify_token_env: String,
    /// The Graph API's base URL, with its version.
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Numbers (`+4915112345678`, stored as digits) allowed to talk to the agent; with none and
    /// no owner yet, the first to send the claim code owns the account.
    #[serde(default)]
    pub allow_users: Vec<String>,
    /// Numbers allowed to approve risky actions (default: `allow_users`).
    #[serde(default)]
    pub approvers: Vec<String>,
    /// An approved message template (its name) sent when a scheduled message falls outside the
    /// 24-hour customer-service window; without one such a message is held and reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The template's language code.
    #[serde(default = "default_template_language")]
    pub template_language: String,
}

fn default_api_url() -> String {
    DEFAULT_WHATSAPP_API.to_string()
}

fn default_template_language() -> String {
    "en".to_string()
}

/// A phone number as WhatsApp ids write it: digits only (`+49 151 …` → `49151…`).
pub fn normalize_number(number: &str) -> String {
    number.chars().filter(char::is_ascii_digit).collect()
}

impl WhatsAppSpec {
    /// The file's numbers, normalized: (allowed, approvers — `allow_users` when none are set).
    pub fn people(&self) -> (Vec<String>, Vec<String>) {
        let allowed: Vec<String> = self
            .allow_users
            .iter()
            .map(|n| normalize_number(n))
            .collect();
        let approvers = if self.approvers.is_empty() {
            allowed.clone()
        } else {
            self.approvers.iter().map(|n| normalize_number(n)).collect()
        };
        (allowed, approvers)
    }

    /// The three secret variables.
    pub fn secret_vars(&self) -> [&str; 3] {
        [
            self.access_token_env.as_str(),
            self.app_secret_env.as_str(),
            self.verify_token_env.as_str(),
        ]
    }
}

/// Checks the table, naming the key that is wrong.
pub fn check_whatsapp(whatsapp: &WhatsAppSpec, origin: &str) -> Result<(), ConfigError> {
    let id = whatsapp.phone_number_id.trim();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(ConfigError::key(
            origin,
            "[whatsapp].phone_number_id",
            "must be the phone number id from Meta's WhatsApp Manager (digits only, not the phone number)",
        ));
    }
    for (key, value) in [
        ("[whatsapp].access_token_env", &whatsapp.access_token_env),
        ("[whatsapp].app_secret_env", &whatsapp.app_secret_env),
        ("[whatsapp].verify_token_env", &whatsapp.verify_token_env),
    ] {
        if value.trim().is_empty() {
            return Err(ConfigError::key(
                origin,
                key,
                "must name an environment variable (or a key of the secrets store)",
            ));
        }
    }
    let url = reqwest::Url::parse(&whatsapp.api_url).map_err(|error| {
        ConfigError::key(
            origin,
            "[whatsapp].api_url",
            format!("invalid URL `{}`: {error}", whatsapp.api_url),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::key(
            origin,
            "[whatsapp].api_url",
            "must be an http:// or https:// URL",
        ));
    }
    for (key, numbers) in [
        ("[whatsapp].allow_users", &whatsapp.allow_users),
        ("[whatsapp].approvers", &whatsapp.approvers),
    ] {
        if let Some(bad) = numbers
            .iter()
            .find(|number| normalize_number(number).len() < 6)
        {
            return Err(ConfigError::key(
                origin,
                key,
                format!(
                    "`{bad}` is not a phone number: write it with its country code, like \"+4915112345678\""
                ),
            ));
        }
    }
    if whatsapp
        .template
        .as_deref()
        .is_some_and(|template| template.trim().is_empty())
    {
        return Err(ConfigError::key(
            origin,
            "[whatsapp].template",
            "must name an approved message template, or be left out",
        ));
    }
    Ok(())
}
