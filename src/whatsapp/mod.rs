//! WhatsApp through Meta's Business Cloud API: the seam's adapter for one phone number
//! (`client`: the Graph API's messages, media and read receipts) and the webhook's inbound
//! edge (`webhook`: the signature over the raw body, the JSON read whole before anything is
//! stored), with the [`Directory`] of configured accounts the webhook routes by.
//!
//! Invariants: a webhook body is stored only after its `X-Hub-Signature-256` checked out against
//! the app secret of every account it names, and only whole (one transaction) — then answered
//! 200; a redelivered message id changes nothing. The access token, app secret and verify token
//! never reach a log, an error, Studio or the model (they are registered secrets and no message
//! here formats them).

pub mod client;
pub mod webhook;

use std::collections::BTreeMap;

use crate::config::LoadedConfig;
use crate::config::whatsapp::WhatsAppSpec;
use crate::secrets::Secret;

/// One configured account, with its secrets.
#[derive(Clone, Debug)]
pub struct Account {
    pub agent: String,
    pub spec: WhatsAppSpec,
    pub access_token: Secret,
    pub app_secret: Secret,
    pub verify_token: Secret,
}

/// Every WhatsApp account whose secrets are set, by phone number id (what the webhook routes by).
#[derive(Clone, Debug, Default)]
pub struct Directory {
    pub accounts: BTreeMap<String, Account>,
}

impl Directory {
    /// The accounts `loaded` configures (none when `channels` is off: `chat`, `eval`). An account
    /// with a secret unset is left out (the boot hint names it).
    pub fn new(loaded: &LoadedConfig, channels: bool) -> Directory {
        let accounts = loaded
            .agents
            .iter()
            .filter(|_| channels)
            .filter_map(|spec| {
                let whatsapp = spec.whatsapp.as_ref()?;
                let account = Account {
                    agent: spec.name.clone(),
                    spec: whatsapp.clone(),
                    access_token: loaded.secret(&whatsapp.access_token_env)?.clone(),
                    app_secret: loaded.secret(&whatsapp.app_secret_env)?.clone(),
                    verify_token: loaded.secret(&whatsapp.verify_token_env)?.clone(),
                };
                Some((whatsapp.phone_number_id.trim().to_string(), account))
            })
            .collect();
        Directory { accounts }
    }

    /// The account of `agent`.
    pub fn of_agent(&self, agent: &str) -> Option<&Account> {
        self.accounts
            .values()
            .find(|account| account.agent == agent)
    }
}
