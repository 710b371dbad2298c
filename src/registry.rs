//! Actor names of one daemon instance.
//!
//! Actors find each other by registered name (DESIGN.md, "Beyond one machine"), through ractor's
//! registry. That registry is process-wide, and the test suite runs several daemons in one process,
//! so every name carries its daemon's prefix: `cv3/agent:assistant`. Lookups check the actor's
//! message type at run time, so a name can never hand out a reference of the wrong type.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ractor::{ActorRef, Message};

/// Well-known local names.
pub mod names {
    pub const STORE: &str = "store";
    pub const EVENTS: &str = "events";
    pub const APPROVALS: &str = "approvals";
    pub const MEMORY: &str = "memory";
    pub const SCHEDULER: &str = "scheduler";
    pub const MCP: &str = "mcp";
    pub const AGENTS: &str = "agents";
    pub const HANDOFFS: &str = "handoffs";
    pub const CHANNELS: &str = "channels";
    pub const STUDIO: &str = "studio";
    pub const LOCAL_CHANNEL: &str = "local";

    pub fn agent(name: &str) -> String {
        format!("agent:{name}")
    }

    pub fn bot(agent: &str) -> String {
        format!("bot:{agent}")
    }

    pub fn mcp_link(server: &str) -> String {
        format!("mcp:{server}")
    }

    pub fn contract(id: &str) -> String {
        format!("contract:{id}")
    }
}

#[derive(Clone, Debug)]
pub struct Registry {
    prefix: Arc<str>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A fresh, process-unique namespace.
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Self {
            prefix: Arc::from(format!("cv{n}")),
        }
    }

    /// The registered (global) name for a local name.
    pub fn name(&self, local: &str) -> String {
        format!("{}/{local}", self.prefix)
    }

    /// The local part of a registered name of this instance.
    pub fn local<'a>(&self, registered: &'a str) -> Option<&'a str> {
        registered
            .strip_prefix(self.prefix.as_ref())
            .and_then(|rest| rest.strip_prefix('/'))
    }

    /// The actor registered under `local`, if it is running and takes messages of type `M`.
    pub fn lookup<M: Message>(&self, local: &str) -> Option<ActorRef<M>> {
        let cell = ractor::registry::where_is(self.name(local))?;
        if cell.is_message_type_of::<M>() == Some(false) {
            return None;
        }
        Some(cell.into())
    }

    /// Like [`Registry::lookup`], but waits (polling) up to `timeout` for the actor to appear,
    /// e.g. while its supervisor restarts it.
    pub async fn wait_for<M: Message>(
        &self,
        local: &str,
        timeout: Duration,
    ) -> Option<ActorRef<M>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(actor) = self.lookup(local) {
                return Some(actor);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
