//! Actor names of one daemon instance.
//!
//! Actors find each other by registered name (DESIGN.md, "Beyond one machine"), through ractor's
//! registry. That registry is process-wide, and the test suite runs several daemons in one process,
//! so every name carries its daemon's prefix: `cv3/agent:assistant`. Names are [`ServiceName`]s,
//! typed with the messages the service takes from others: each service declares its name once
//! (`protocol/<service>.rs`), and the compiler pairs name and type at every lookup and spawn.
//!
//! A service's actor may take more than its public messages: its own callbacks (a connection
//! made, a poll's result, a timer) are variants of an enum private to the actor, which wraps the
//! public one. Such an actor is registered with a *mailbox* for its public messages (ractor's
//! `DerivedActorRef`, which converts each message into the actor's own type); a lookup finds the
//! actor by its ractor name and hands out that mailbox, so the rest of the daemon can only send
//! what the protocol lists.

use std::any::Any;
use std::borrow::Cow;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ractor::{ActorRef, DerivedActorRef, Message};

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

/// What a lookup hands out: the actor, able to take messages of type `M` (its own type, or its
/// public messages when its own enum also holds private callbacks).
pub type Mailbox<M> = DerivedActorRef<M>;

#[derive(Clone)]
pub struct Registry {
    prefix: Arc<str>,
    /// The public mailboxes of actors whose own message type is private, by registered name.
    mailboxes: Arc<Mutex<HashMap<String, Box<dyn Any + Send + Sync>>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Registry")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
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
            mailboxes: Arc::default(),
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

    /// The actor registered under `name`, if it is running and takes messages of type `M`: as its
    /// own type, or through the mailbox it was registered with ([`Registry::publish`]).
    pub fn lookup<M: Message>(&self, name: &ServiceName<M>) -> Option<Mailbox<M>> {
        let registered = self.name(name.local());
        let cell = ractor::registry::where_is(registered.clone())?;
        if cell.is_message_type_of::<M>() != Some(false) {
            return Some(ActorRef::<M>::from(cell).get_derived());
        }
        let mailboxes = self.mailboxes();
        let mailbox = mailboxes.get(&registered)?.downcast_ref::<Mailbox<M>>()?;
        // A mailbox left by an earlier actor under this name (it stopped, a new one started and
        // has not published yet) is not this actor's.
        (mailbox.get_id() == cell.get_id()).then(|| mailbox.clone())
    }

    /// Registers the public mailbox of the actor just spawned under `name` (replacing the one of
    /// an earlier actor of that name).
    pub fn publish<M: Message>(&self, name: &ServiceName<M>, mailbox: Mailbox<M>) {
        self.mailboxes()
            .insert(self.name(name.local()), Box::new(mailbox));
    }

    /// The mailbox table; a panic elsewhere while it was held left it whole (each change is one
    /// insert), so a poisoned lock is used as it is.
    fn mailboxes(&self) -> MutexGuard<'_, HashMap<String, Box<dyn Any + Send + Sync>>> {
        self.mailboxes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Like [`Registry::lookup`], but waits (polling) up to `timeout` for the actor to appear,
    /// e.g. while its supervisor restarts it.
    pub async fn wait_for<M: Message>(
        &self,
        name: &ServiceName<M>,
        timeout: Duration,
    ) -> Option<Mailbox<M>> {
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
