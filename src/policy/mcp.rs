//! MCP tool calls ([`classify_mcp`]).
//!
//! | server trust | tool hints read-only | tool hints destructive | neither declared |
//! |--------------|----------------------|------------------------|------------------|
//! | trusted      | L0                   | L2                     | L1               |
//! | untrusted    | L2                   | L2                     | L2               |
//! | read_only    | L0                   | L3                     | L3               |
//!
//! Hints are the server's own words about its tools. A trusted server's hints may lower the level;
//! an untrusted server's never do (it could call any tool read-only), so each of its calls waits for
//! an approval. A `read_only` server is one the operator declared read-only: its tools that say
//! otherwise are refused. A tool that declares itself both read-only and destructive is treated as
//! destructive. The idempotent and open-world hints do not change the level.

use crate::policy::{Assessment, McpToolHints, McpTrust, RiskLevel};

/// Classifies a call to an MCP tool from the server's trust posture and the tool's own hints.
pub fn classify_mcp(trust: McpTrust, hints: &McpToolHints) -> Assessment {
    let declares_destructive = hints.destructive == Some(true);
    // A tool that claims to be both read-only and destructive is taken at its worse word.
    let declares_read_only = hints.read_only == Some(true) && !declares_destructive;
    let (level, reason) = match (trust, declares_read_only, declares_destructive) {
        (McpTrust::Trusted, true, _) => (
            RiskLevel::L0,
            "a trusted server's tool that declares itself read-only",
        ),
        (McpTrust::Trusted, false, true) => (
            RiskLevel::L2,
            "a trusted server's tool that declares itself destructive",
        ),
        (McpTrust::Trusted, false, false) => (
            RiskLevel::L1,
            "a trusted server's tool that may write (not declared read-only)",
        ),
        // The hint is the untrusted server's own claim; it never lowers the level.
        (McpTrust::Untrusted, true, _) => (
            RiskLevel::L2,
            "an untrusted server's tool: its read-only hint is the server's own claim and is not believed",
        ),
        (McpTrust::Untrusted, false, true) => (
            RiskLevel::L2,
            "an untrusted server's tool that declares itself destructive",
        ),
        (McpTrust::Untrusted, false, false) => (
            RiskLevel::L2,
            "an untrusted server's tool that may write (not declared read-only)",
        ),
        (McpTrust::ReadOnly, true, _) => (
            RiskLevel::L0,
            "a read_only server's tool that declares itself read-only",
        ),
        (McpTrust::ReadOnly, false, _) => (
            RiskLevel::L3,
            "a read_only server may expose only read-only tools",
        ),
    };
    let mut assessment = Assessment::new(level, reason);
    if hints.read_only == Some(true) && declares_destructive {
        assessment.reasons.push(
            "the tool declares itself both read-only and destructive; treated as destructive"
                .to_string(),
        );
    }
    assessment
}

impl From<crate::config::McpTrustConfig> for McpTrust {
    fn from(trust: crate::config::McpTrustConfig) -> Self {
        match trust {
            crate::config::McpTrustConfig::Trusted => McpTrust::Trusted,
            crate::config::McpTrustConfig::Untrusted => McpTrust::Untrusted,
            crate::config::McpTrustConfig::ReadOnly => McpTrust::ReadOnly,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::run_table;
    use RiskLevel::{L0, L1, L2, L3};

    /// Classifies an MCP call from a server's trust and the tool's read-only and destructive hints.
    fn check_mcp(
        (trust, read_only, destructive, expected): (
            McpTrust,
            Option<bool>,
            Option<bool>,
            RiskLevel,
        ),
    ) -> Result<(), String> {
        let hints = McpToolHints {
            read_only,
            destructive,
            ..McpToolHints::default()
        };
        let assessment = classify_mcp(trust, &hints);
        if assessment.level == expected {
            return Ok(());
        }
        Err(format!(
            "{trust:?} read_only={read_only:?} destructive={destructive:?}: expected {expected}, got {}\n    reasons: {:?}",
            assessment.level, assessment.reasons
        ))
    }

    const MCP_CASES: &[(McpTrust, Option<bool>, Option<bool>, RiskLevel)] = &[
        (McpTrust::Trusted, Some(true), None, L0),
        (McpTrust::Trusted, Some(true), Some(false), L0),
        (McpTrust::Trusted, None, Some(true), L2),
        (McpTrust::Trusted, None, None, L1),
        (McpTrust::Trusted, Some(false), Some(false), L1),
        (McpTrust::Trusted, Some(true), Some(true), L2),
        (McpTrust::Untrusted, Some(true), None, L2),
        (McpTrust::Untrusted, Some(true), Some(false), L2),
        (McpTrust::Untrusted, None, Some(true), L2),
        (McpTrust::Untrusted, None, None, L2),
        (McpTrust::Untrusted, Some(false), Some(false), L2),
        (McpTrust::Untrusted, Some(true), Some(true), L2),
        (McpTrust::ReadOnly, Some(true), None, L0),
        (McpTrust::ReadOnly, None, None, L3),
        (McpTrust::ReadOnly, Some(false), None, L3),
        (McpTrust::ReadOnly, None, Some(true), L3),
        (McpTrust::ReadOnly, Some(true), Some(true), L3),
    ];

    #[test]
    fn mcp_calls_get_the_expected_level() {
        run_table(MCP_CASES, check_mcp);
        let assessment = classify_mcp(McpTrust::ReadOnly, &McpToolHints::default());
        assert_eq!(
            assessment.reasons,
            vec!["a read_only server may expose only read-only tools".to_string()]
        );
    }
}
