//! The prompt's memory layer: what the agent should remember for the current message.
//!
//! This is the seam where the memory service answers (facts and memories of this agent, its
//! direct reports and the platform, ranked for the query and cut to the layer's budget). While no
//! memory service runs, the layer is absent and the prompt says nothing about memory.

use crate::domain::ChatKey;

use super::AgentRuntime;

pub async fn recall(_runtime: &AgentRuntime, _chat: &ChatKey, _query: &str) -> Option<String> {
    None
}
