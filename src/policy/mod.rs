//! Policy: risk levels and assessments (the classifier lands in `classifier.rs`).

/// L0 auto, L1 run-and-notify, L2 require approval, L3 block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RiskLevel {
    L0,
    L1,
    L2,
    L3,
}

impl RiskLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::L0 => "L0",
            RiskLevel::L1 => "L1",
            RiskLevel::L2 => "L2",
            RiskLevel::L3 => "L3",
        }
    }

    /// One level higher, saturating at L3.
    pub fn escalate(self) -> RiskLevel {
        match self {
            RiskLevel::L0 => RiskLevel::L1,
            RiskLevel::L1 => RiskLevel::L2,
            RiskLevel::L2 | RiskLevel::L3 => RiskLevel::L3,
        }
    }
}

/// A classification with the reasons that produced it (shown to the operator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub level: RiskLevel,
    pub reasons: Vec<String>,
}

impl Assessment {
    pub fn new(level: RiskLevel, reason: impl Into<String>) -> Assessment {
        Assessment {
            level,
            reasons: vec![reason.into()],
        }
    }
}
