//! Actor names of one daemon instance.
//!
//! Actors find each other by registered name (DESIGN.md, "Beyond one machine"), through ractor's
//! registry. That registry is process-wide, and the test suite runs several daemons in one process,
//! so every name carries its daemon's prefix: `cv3/agent:assistant`. Names are [`ServiceName`]s,
//! typed with their actor's message: each service declares its name once (`protocol/<service>.rs`),
//! and the compiler pairs name and type at every lookup and spawn.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ractor::{ActorRef, Message};

/// A registered name typed with the messages its actor takes: looking it up can only give an
/// `ActorRef` of that type, and spawning under it only accepts an actor of that type, so a name and
/// its message type are paired once, where the name is declared (in `protocol/<service>.rs`).
pub struct ServiceName<M> {
    local: Cow<'static, str>,
    messages: PhantomData<fn() -> M>,
}

impl<M> ServiceName<M> {
    /// A fixed name (`approvals`, `scheduler`).
    pub const fn fixed(local: &'static str) -> Self {
        Self {
            local: Cow::Borrowed(local),
            messages: PhantomData,
        }
    }

    /// A name built at run time (`agent:<name>`, `bot:<agent>`).
    pub fn new(local: impl Into<String>) -> Self {
        Self {
            local: Cow::Owned(local.into()),
            messages: PhantomData,
        }
    }

    /// The name within one daemon (without its prefix).
    pub fn local(&self) -> &str {
        &self.local
    }
}

impl<M> Clone for ServiceName<M> {
    fn clone(&self) -> Self {
        Self {
            local: self.local.clone(),
            messages: PhantomData,
        }
    }
}

impl<M> std::fmt::Debug for ServiceName<M> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.local)
    }
}

impl<M> std::fmt::Display for ServiceName<M> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.local)
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

    /// The actor registered under `name`, if it is running (and takes messages of type `M`, which
    /// holds unless two kinds of actor were spawned under one name).
    pub fn lookup<M: Message>(&self, name: &ServiceName<M>) -> Option<ActorRef<M>> {
        let cell = ractor::registry::where_is(self.name(name.local()))?;
        if cell.is_message_type_of::<M>() == Some(false) {
            return None;
        }
        Some(cell.into())
    }

    /// Like [`Registry::lookup`], but waits (polling) up to `timeout` for the actor to appear,
    /// e.g. while its supervisor restarts it.
    pub async fn wait_for<M: Message>(
        &self,
        name: &ServiceName<M>,
        timeout: Duration,
    ) -> Option<ActorRef<M>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(actor) = self.lookup(name) {
                return Some(actor);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
