//! The built-in tools an agent can call, one family per file: `files` (read_file, write_file,
//! list_dir, confined by `workspace`), `documents`, `web_fetch`, `web_search`, `shell`, `time`,
//! `memory`, `schedule`, `handoff`, `message`, `send_file` and `skill`. [`builtin_tools`] lists the
//! shared ones; [`tools_for_agent`] builds one agent's set. The contract they implement (the
//! `Tool` trait, its context, output and argument checks) is `crate::tool`. An agent gets the
//! tools its file lists; `web_search` exists only with a `[web_search]` backend; `send_message`
//! (which knows the agent's people), `spawn_subagent` and `use_skill` (present when the agent has
//! skills enabled) are built per agent; MCP tools arrive later from their links.
//!
//! Architecture Invariant: every file a tool touches is reached through `Workspace::open_*` (no
//! symlink followed at open time); no process started by `shell` outlives its call.

pub mod browser;
pub mod documents;
pub mod files;
pub mod handoff;
pub mod memory;
pub mod message;
pub mod schedule;
pub mod send_file;
pub mod shell;
pub mod skill;
pub mod time;
pub mod web_fetch;
pub mod web_search;
pub mod workspace;

use std::sync::Arc;

use crate::tool::Tool;

/// Every built-in tool of this module that is the same for every agent. `send_message` is built
/// per agent (it knows the agent's people); the memory, schedule and handoff tools live with the
/// parts of the daemon they drive and are added by their owners.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(files::ReadFileTool),
        Arc::new(files::WriteFileTool),
        Arc::new(files::ListDirTool),
        Arc::new(web_fetch::WebFetchTool::new()),
        Arc::new(shell::ShellTool),
        Arc::new(time::CurrentTimeTool),
        Arc::new(memory::SaveToMemoryTool),
        Arc::new(memory::SearchMemoryTool),
        Arc::new(memory::ListMemoryFactsTool),
        Arc::new(memory::ForgetTool),
        Arc::new(handoff::HandoffTaskTool),
        Arc::new(handoff::HandoffStatusTool),
        Arc::new(handoff::HandoffCancelTool),
        Arc::new(handoff::HandoffProgressTool),
        Arc::new(handoff::HandoffReturnTool),
        Arc::new(send_file::SendFileTool),
    ]
}

/// Tools built for each agent (they hold something of that agent: its people, its sub-agent
/// slots, its skills) rather than shared from [`builtin_tools`].
pub const PER_AGENT_TOOLS: &[&str] =
    &["send_message", "spawn_subagent", "use_skill", browser::NAME];

/// Is `name` a tool an agent file may list: a built-in, a per-agent tool, a schedule tool, or an
/// MCP tool (`mcp:<server>`, `<server>__<tool>`)?
pub fn is_known_tool(name: &str) -> bool {
    PER_AGENT_TOOLS.contains(&name)
        || name == WEB_SEARCH
        || schedule::TOOL_NAMES.contains(&name)
        || name.starts_with("mcp:")
        || name.contains("__")
        || builtin_tools().iter().any(|tool| tool.name() == name)
}

/// The tool configured by `[web_search]`; absent without a backend.
pub const WEB_SEARCH: &str = "web_search";

/// The tools one agent starts with: the shared built-ins and schedule tools it lists, its own
/// instances of the per-agent tools, and `web_search` when a backend is configured (`web_search`).
/// MCP tools arrive later from their links (`SetTools`); names that are none of these are
/// returned for the caller to report.
pub fn tools_for_agent(
    spec: &crate::config::AgentSpec,
    skills: &Arc<Vec<crate::skills::Skill>>,
    web_search: Option<&Arc<dyn Tool>>,
) -> (Vec<Arc<dyn Tool>>, Vec<String>) {
    let builtin = builtin_tools();
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut unknown = Vec::new();
    for name in &spec.tools {
        match name.as_str() {
            "send_message" => tools.push(Arc::new(message::SendMessageTool::new(
                spec.telegram_people(),
            ))),
            "spawn_subagent" => tools.push(Arc::new(handoff::SpawnSubagentTool::new())),
            // Issue #32: one per agent (it remembers the agent's last page for the risk check).
            browser::NAME => tools.push(Arc::new(browser::BrowserTool::new())),
            WEB_SEARCH => tools.extend(web_search.cloned()),
            // Added below, also when only skills are enabled.
            "use_skill" => {}
            _ => match builtin.iter().find(|tool| tool.name() == name) {
                Some(tool) => tools.push(tool.clone()),
                None if is_known_tool(name) => {}
                None => unknown.push(name.clone()),
            },
        }
    }
    tools.extend(schedule::tools_for(&spec.tools));
    (with_skills(&tools, spec, skills), unknown)
}

/// `tools` with a `use_skill` tool for exactly these skills: present when the agent lists it or
/// has skills enabled (an operator's toggle replaces it without touching the other tools).
pub fn with_skills(
    tools: &[Arc<dyn Tool>],
    spec: &crate::config::AgentSpec,
    skills: &Arc<Vec<crate::skills::Skill>>,
) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = tools
        .iter()
        .filter(|tool| tool.name() != "use_skill")
        .cloned()
        .collect();
    if spec.tools.iter().any(|tool| tool == "use_skill") || !skills.is_empty() {
        tools.push(Arc::new(skill::UseSkillTool::new(skills.clone())));
    }
    tools
}
