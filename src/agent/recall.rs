//! The prompt's memory layer: what the agent should remember for the current message.
//!
//! The memory actor answers (this agent's memories, its direct reports' and the platform's,
//! ranked for the query; private ones only in their own chat; `secret` ones never). The layer is
//! absent when memory is off, has nothing relevant, or does not answer within 3 s: a slow memory
//! never holds up an answer.

use crate::domain::ChatKey;
use crate::protocol::memory::{Memory, SearchRequest};

use super::AgentRuntime;

/// How long the prompt waits for memory.
const RECALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

pub async fn recall(runtime: &AgentRuntime, chat: &ChatKey, query: &str) -> Option<String> {
    let limit = runtime.limits.recall_limit;
    if limit == 0 || query.trim().is_empty() {
        return None;
    }
    let request = SearchRequest {
        agent: Some(runtime.spec.name.clone()),
        chat: Some(chat.as_str().to_string()),
        query: query.chars().take(2_000).collect(),
        limit,
        include_secret: false,
    };
    let result = Memory::new(&runtime.registry)
        .search_within(request, RECALL_TIMEOUT)
        .await
        .ok()?;
    if result.hits.is_empty() {
        return None;
    }
    let mut text = String::from(
        "What you remember that may be relevant (from memory; use it only if it helps):\n",
    );
    for hit in &result.hits {
        let owner = if hit.fact.owner == runtime.spec.name {
            String::new()
        } else {
            format!(" (from {})", hit.fact.owner)
        };
        text.push_str(&format!(
            "- [memory {}{owner}] {}\n",
            hit.fact.id, hit.fact.text
        ));
    }
    Some(text)
}
