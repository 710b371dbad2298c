//! `[browser]`: the `browser` tool's Chromium (an agent gets the tool by listing `browser` in its
//! `tools`). Changes apply at the next restart (`reload::needs_restart` lists them).
//!
//! ```toml
//! [browser]
//! chromium = ""              # empty: the system's (chromium, chromium-browser, google-chrome on PATH)
//! idle_timeout = "5m"        # closed after this long unused, so the idle daemon's memory comes back
//! page_timeout = "30s"       # how long a page may take to load
//! snapshot_max_chars = 20000 # the most page text one snapshot returns
//! allow_private = []         # private hosts pages may reach anyway ("192.168.1.10:8123", "nas.local");
//!                            # every other request of a page follows web_fetch's address rule
//!
//! [[browser.logins]]         # filled by the tool itself on `login`; the model never sees the password
//! site = "example.com"       # the host (its subdomains too)
//! username = "me@example.com"
//! password_env = "EXAMPLE_PASSWORD"   # from the environment or the secrets store (Keys & tokens)
//! ```

use serde::{Deserialize, Serialize};

use super::{ConfigError, Dur};

/// `[browser]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrowserConfig {
    /// The Chromium program; empty: the system's.
    pub chromium: String,
    pub idle_timeout: Dur,
    pub page_timeout: Dur,
    pub snapshot_max_chars: u32,
    /// Private hosts (`host` or `host:port`) the browser's pages may reach although
    /// `[tools] web_fetch_allow_private` is off (a router or Home Assistant on the LAN).
    pub allow_private: Vec<String>,
    pub logins: Vec<BrowserLogin>,
}

/// One `[[browser.logins]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrowserLogin {
    pub site: String,
    pub username: String,
    pub password_env: String,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            chromium: String::new(),
            idle_timeout: Dur::secs(300),
            page_timeout: Dur::secs(30),
            snapshot_max_chars: 20_000,
            allow_private: Vec::new(),
            logins: Vec::new(),
        }
    }
}

impl BrowserConfig {
    /// Every environment variable this section reads a secret from.
    pub fn secret_vars(&self) -> impl Iterator<Item = &str> {
        self.logins.iter().map(|login| login.password_env.as_str())
    }

    pub(super) fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let error = |key: String, message: String| Err(ConfigError::key(origin, key, message));
        let seconds = |dur: &Dur| dur.0.as_secs();
        if !(1..=86_400).contains(&seconds(&self.idle_timeout)) {
            return error(
                "[browser].idle_timeout".into(),
                format!(
                    "must be between 1s and 24h, got {}s",
                    seconds(&self.idle_timeout)
                ),
            );
        }
        if !(1..=300).contains(&seconds(&self.page_timeout)) {
            return error(
                "[browser].page_timeout".into(),
                format!(
                    "must be between 1s and 5m, got {}s",
                    seconds(&self.page_timeout)
                ),
            );
        }
        if !(1_000..=200_000).contains(&self.snapshot_max_chars) {
            return error(
                "[browser].snapshot_max_chars".into(),
                format!("must be 1000 to 200000, got {}", self.snapshot_max_chars),
            );
        }
        for (index, entry) in self.allow_private.iter().enumerate() {
            let host = site_host(entry);
            let port_ok = match entry.trim().rsplit_once(':') {
                Some((_, port)) if !entry.contains('/') => port.parse::<u16>().is_ok(),
                _ => true,
            };
            if host.is_empty() || entry.contains('/') || !port_ok {
                return error(
                    format!("[browser].allow_private #{}", index + 1),
                    format!(
                        "needs a host or host:port, like \"192.168.1.10:8123\" or \"nas.local\"; got {entry:?}"
                    ),
                );
            }
        }
        for (index, login) in self.logins.iter().enumerate() {
            let key = |field: &str| format!("[[browser.logins]] #{} `{field}`", index + 1);
            if site_host(&login.site).is_empty() {
                return error(
                    key("site"),
                    "needs the site's host, like \"example.com\"".into(),
                );
            }
            if login.username.trim().is_empty() {
                return error(key("username"), "needs the user name to log in with".into());
            }
            let name_ok = !login.password_env.is_empty()
                && login
                    .password_env
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !name_ok {
                return error(
                    key("password_env"),
                    format!(
                        "needs the name of the variable holding the password (letters, digits, _), like \"EXAMPLE_PASSWORD\"; got {:?}",
                        login.password_env
                    ),
                );
            }
        }
        Ok(())
    }
}

/// The host of `site` (`https://example.com/login` → `example.com`), lowercased; empty when it
/// names none.
pub fn site_host(site: &str) -> String {
    let site = site.trim();
    url::Url::parse(site)
        .ok()
        .and_then(|url| url.host_str().map(str::to_string))
        .unwrap_or_else(|| site.split(['/', ':']).next().unwrap_or("").to_string())
        .trim_end_matches('.')
        .to_ascii_lowercase()
}
