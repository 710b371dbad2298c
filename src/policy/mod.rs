//! Policy: how risky an agent's action is, and why.
//!
//! [`shell`] (shell commands), [`paths`] (file accesses) and [`mcp`] (MCP tool calls) turn an
//! action into an [`Assessment`]: a [`RiskLevel`] and the reasons that produced it, which are shown to the
//! operator. The policy gate (autonomy mode, rules stored in the database, approvals) builds on these
//! levels; this module only classifies. It never performs the action and never asks anyone.
//!
//! Levels: L0 runs automatically, L1 runs and notifies the operator, L2 waits for an approval,
//! L3 is blocked. Policy rules may tighten a level, never loosen an L3.
//!
//! The decision on a call is [`gate::decide`], the one function every tool call passes through
//! (with the per-chat [`rate_limit`]); what a tool does to the world is its [`Effect`], which a
//! tool may make depend on a call's arguments (`Tool::effect_for`: its own chat, its own memory
//! are reads).
//!
//! **Architecture Invariant:** `policy` knows nothing about actors, the store, Telegram or HTTP; it
//! reads no file and no environment variable. The same input always gives the same assessment.

pub mod gate;
pub mod mcp;
pub mod paths;
pub mod rate_limit;
pub mod shell;

use std::fmt;
use std::str::FromStr;

pub use mcp::classify_mcp;
pub use paths::classify_file_access;
pub use shell::classify_shell;

/// Command text quoted in a reason is cut after this many characters.
const MAX_QUOTED_CHARACTERS: usize = 80;

/// What a tool can do to the world, independent of one call's arguments. Autonomy modes use it:
/// `require_approval` lets `ReadOnly` tools run freely and asks for the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    ReadOnly,
    Write,
    Destructive,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::ReadOnly => "read_only",
            Effect::Write => "write",
            Effect::Destructive => "destructive",
        }
    }
}

/// L0 auto, L1 run-and-notify, L2 require approval, L3 block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RiskLevel {
    L0,
    L1,
    L2,
    L3,
}

impl RiskLevel {
    /// Every level, lowest first.
    pub const ALL: [RiskLevel; 4] = [RiskLevel::L0, RiskLevel::L1, RiskLevel::L2, RiskLevel::L3];

    /// The stable name used in the database, the configuration and Studio (`"L0"` … `"L3"`).
    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::L0 => "L0",
            RiskLevel::L1 => "L1",
            RiskLevel::L2 => "L2",
            RiskLevel::L3 => "L3",
        }
    }

    /// One level higher; L3 stays L3.
    pub fn escalate(self) -> Self {
        match self {
            RiskLevel::L0 => RiskLevel::L1,
            RiskLevel::L1 => RiskLevel::L2,
            RiskLevel::L2 | RiskLevel::L3 => RiskLevel::L3,
        }
    }
}

impl fmt::Display for RiskLevel {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// A risk level name that is not one of `L0`, `L1`, `L2`, `L3`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown risk level `{given}`: expected one of L0, L1, L2, L3")]
pub struct UnknownRiskLevel {
    /// The text that was given, shortened to a few characters so a stray value stays readable.
    given: String,
}

impl FromStr for RiskLevel {
    type Err = UnknownRiskLevel;

    /// Accepts `L0` … `L3`, ignoring case and surrounding blanks (`" l2 "` is `L2`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_uppercase().as_str() {
            "L0" => Ok(RiskLevel::L0),
            "L1" => Ok(RiskLevel::L1),
            "L2" => Ok(RiskLevel::L2),
            "L3" => Ok(RiskLevel::L3),
            _ => Err(UnknownRiskLevel {
                given: text.chars().take(32).collect(),
            }),
        }
    }
}

/// A classification with the reasons that produced it (shown to the operator), and what the
/// action may reach when it runs (the sandbox profile its approval prompt states).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub level: RiskLevel,
    /// Every finding that contributed, in the order found; never empty.
    pub reasons: Vec<String>,
    /// What the kernel lets the action reach; see [`Reach`].
    pub reach: Reach,
}

impl Assessment {
    /// An assessment with a single reason, reaching what its level allows ([`Reach::for_level`]).
    pub fn new(level: RiskLevel, reason: impl Into<String>) -> Assessment {
        Assessment {
            level,
            reasons: vec![reason.into()],
            reach: Reach::for_level(level),
        }
    }

    /// An assessment with these reasons, reaching what its level allows.
    pub fn from_parts(level: RiskLevel, reasons: Vec<String>) -> Assessment {
        Assessment {
            level,
            reasons,
            reach: Reach::for_level(level),
        }
    }
}

/// Where a running command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Writes {
    /// Nowhere but its own scratch directory, discarded after the call.
    Nothing,
    /// The agent's workspace (and the scratch directory).
    Workspace,
    /// Anywhere the daemon's user may write, except clawvisor's own files (data, config).
    Anywhere,
}

/// What an action may reach when it runs: the sandbox profile the kernel enforces for it, and
/// the one its approval prompt states. The classifier sets it; the sandbox makes it true, so a
/// command the classifier misread fails (EACCES, ENETUNREACH) instead of doing more.
///
/// Architecture Invariant: a level never widens its reach: L0 is [`Reach::READ_ONLY`], L1 at most
/// [`Reach::WORKSPACE`]; only an approved (L2/L3) action may have the network or write outside the
/// workspace, and only when the classifier named why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reach {
    pub writes: Writes,
    /// Sockets to other machines (and to the host's loopback). Without it the command runs in an
    /// empty network namespace.
    pub network: bool,
}

impl Reach {
    /// L0: reads only, no network.
    pub const READ_ONLY: Reach = Reach {
        writes: Writes::Nothing,
        network: false,
    };
    /// L1, and any command the classifier cannot place: writes in the workspace, no network.
    pub const WORKSPACE: Reach = Reach {
        writes: Writes::Workspace,
        network: false,
    };

    /// The narrowest reach a level runs with: L0 reads only, every other level writes in the
    /// workspace without network until the classifier names a reason for more.
    pub fn for_level(level: RiskLevel) -> Reach {
        match level {
            RiskLevel::L0 => Reach::READ_ONLY,
            _ => Reach::WORKSPACE,
        }
    }

    /// Both reaches' widest parts.
    pub fn union(self, other: Reach) -> Reach {
        Reach {
            writes: self.writes.max(other.writes),
            network: self.network || other.network,
        }
    }

    /// Caps the reach at what `level` may have (the invariant above).
    pub fn within(self, level: RiskLevel) -> Reach {
        match level {
            RiskLevel::L0 => Reach::READ_ONLY,
            RiskLevel::L1 => Reach {
                writes: self.writes.min(Writes::Workspace),
                network: false,
            },
            RiskLevel::L2 | RiskLevel::L3 => self,
        }
    }

    /// For people: `network: no · writes: workspace only`.
    pub fn describe(&self) -> String {
        let network = if self.network { "yes" } else { "no" };
        let writes = match self.writes {
            Writes::Nothing => "nothing (reads only)",
            Writes::Workspace => "workspace only",
            Writes::Anywhere => "anywhere but clawvisor's own files",
        };
        format!("network: {network} · writes: {writes}")
    }
}

/// What a file tool wants to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileAccess {
    Read,
    Write,
    Delete,
}

/// The trust posture configured for an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpTrust {
    Trusted,
    Untrusted,
    /// The server may only be used for tools that declare themselves read-only.
    ReadOnly,
}

/// What an MCP tool declares about itself (MCP ToolAnnotations hints; None = not declared).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct McpToolHints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

/// Shortens text quoted in a reason and removes registered secrets from it.
fn quote_for_reason(text: &str) -> String {
    let shortened = if text.chars().count() > MAX_QUOTED_CHARACTERS {
        let mut cut: String = text.chars().take(MAX_QUOTED_CHARACTERS).collect();
        cut.push('…');
        cut
    } else {
        text.to_string()
    };
    crate::secrets::redact(&shortened).into_owned()
}

/// Runs a table of cases through a checker and reports every mismatch at once.
#[cfg(test)]
fn run_table<Case: Copy>(cases: &[Case], checker: impl Fn(Case) -> Result<(), String>) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| checker(*case).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn risk_levels_round_trip_through_their_names_and_escalate_saturating() {
        for level in RiskLevel::ALL {
            assert_eq!(level.as_str().parse::<RiskLevel>(), Ok(level));
            assert_eq!(level.to_string(), level.as_str());
        }
        assert_eq!(" l2 ".parse::<RiskLevel>(), Ok(RiskLevel::L2));
        let error = "L4".parse::<RiskLevel>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown risk level `L4`: expected one of L0, L1, L2, L3"
        );
        assert_eq!(RiskLevel::L0.escalate(), RiskLevel::L1);
        assert_eq!(RiskLevel::L1.escalate(), RiskLevel::L2);
        assert_eq!(RiskLevel::L2.escalate(), RiskLevel::L3);
        assert_eq!(RiskLevel::L3.escalate(), RiskLevel::L3);
        assert!(RiskLevel::L0 < RiskLevel::L3);
    }
}
