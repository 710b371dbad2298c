//! The tools an agent can have, in an operator's words: `GET /api/v1/tools` lists each built-in
//! tool with a one-line explanation and how careful the daemon is with it, and a few presets
//! (what a household usually gives an agent) for the agent editor and the setup wizard.
//!
//! The words are written here for people; the risk shown is what the policy gate does with the
//! tool in the recommended autonomy mode (`require_approval`), not a promise: the gate decides per
//! call.

use axum::Json;
use serde_json::{Value, json};

/// How careful the daemon is with a tool, in the recommended autonomy mode.
#[derive(Clone, Copy)]
enum Care {
    /// Runs without asking (reads, time, own chat).
    Free,
    /// Runs and tells you (reading the web).
    Tells,
    /// Asks you first.
    Asks,
    /// Asks you first, and can do real damage if you say yes carelessly.
    Careful,
}

impl Care {
    fn word(self) -> &'static str {
        match self {
            Care::Free => "runs freely",
            Care::Tells => "runs and tells you",
            Care::Asks => "asks you first",
            Care::Careful => "asks you first — powerful",
        }
    }
}

/// (name, what it does in plain words, care, group)
const TOOLS: &[(&str, &str, Care, &str)] = &[
    (
        "current_time",
        "Knows the date and time",
        Care::Free,
        "Basics",
    ),
    (
        "send_message",
        "Writes to its people on Telegram",
        Care::Free,
        "Basics",
    ),
    (
        "send_file",
        "Sends a file from its workspace into the chat",
        Care::Free,
        "Basics",
    ),
    (
        "read_file",
        "Reads files in its own workspace (PDFs too)",
        Care::Free,
        "Files",
    ),
    (
        "list_dir",
        "Lists the files in its workspace",
        Care::Free,
        "Files",
    ),
    (
        "write_file",
        "Writes and changes files in its workspace",
        Care::Asks,
        "Files",
    ),
    ("web_fetch", "Reads web pages", Care::Tells, "Web"),
    (
        "web_search",
        "Searches the web (needs a search backend)",
        Care::Tells,
        "Web",
    ),
    (
        "save_to_memory",
        "Remembers what you tell it",
        Care::Free,
        "Memory",
    ),
    (
        "search_memory",
        "Recalls what it remembered",
        Care::Free,
        "Memory",
    ),
    (
        "list_memory_facts",
        "Lists what it remembers",
        Care::Free,
        "Memory",
    ),
    (
        "forget",
        "Forgets something it remembered",
        Care::Asks,
        "Memory",
    ),
    (
        "schedule_task",
        "Sets reminders and repeating jobs",
        Care::Asks,
        "Schedules",
    ),
    (
        "list_tasks",
        "Lists its reminders and jobs",
        Care::Free,
        "Schedules",
    ),
    (
        "get_task",
        "Looks at one of its jobs",
        Care::Free,
        "Schedules",
    ),
    (
        "update_task",
        "Changes one of its jobs",
        Care::Asks,
        "Schedules",
    ),
    (
        "pause_task",
        "Pauses one of its jobs",
        Care::Asks,
        "Schedules",
    ),
    (
        "resume_task",
        "Resumes one of its jobs",
        Care::Asks,
        "Schedules",
    ),
    (
        "cancel_task",
        "Cancels one of its jobs",
        Care::Asks,
        "Schedules",
    ),
    (
        "preview_schedule",
        "Works out when a schedule would fire",
        Care::Free,
        "Schedules",
    ),
    (
        "handoff_task",
        "Hands a task to another agent",
        Care::Asks,
        "Teamwork",
    ),
    (
        "spawn_subagent",
        "Works on a side task in parallel",
        Care::Asks,
        "Teamwork",
    ),
    (
        "use_skill",
        "Uses the skills you enabled for it",
        Care::Free,
        "Teamwork",
    ),
    (
        "shell",
        "Runs commands on this computer, inside its workspace",
        Care::Careful,
        "Computer",
    ),
];

/// (id, name, what it is for, tools)
const PRESETS: &[(&str, &str, &str, &[&str])] = &[
    (
        "chat",
        "Just talks",
        "Answers questions; no files, no web.",
        &["current_time"],
    ),
    (
        "helper",
        "Everyday helper",
        "Notes, reminders, memory and reading the web — the usual choice.",
        &[
            "current_time",
            "send_message",
            "send_file",
            "read_file",
            "list_dir",
            "write_file",
            "web_fetch",
            "save_to_memory",
            "search_memory",
            "list_memory_facts",
            "schedule_task",
            "list_tasks",
            "cancel_task",
        ],
    ),
    (
        "researcher",
        "Researcher",
        "Reads and searches the web and keeps notes.",
        &[
            "current_time",
            "send_message",
            "read_file",
            "list_dir",
            "write_file",
            "web_fetch",
            "web_search",
            "save_to_memory",
            "search_memory",
        ],
    ),
    (
        "hands-on",
        "Hands-on",
        "Everything of the helper, and runs commands on this computer (asks you first).",
        &[
            "current_time",
            "send_message",
            "send_file",
            "read_file",
            "list_dir",
            "write_file",
            "web_fetch",
            "save_to_memory",
            "search_memory",
            "list_memory_facts",
            "schedule_task",
            "list_tasks",
            "cancel_task",
            "shell",
        ],
    ),
];

/// The tool names of a preset (the wizard's choice).
pub fn preset(id: &str) -> Option<Vec<String>> {
    PRESETS
        .iter()
        .find(|(preset, ..)| *preset == id)
        .map(|(.., tools)| tools.iter().map(|tool| tool.to_string()).collect())
}

/// `GET /api/v1/tools`: every built-in tool in plain words, and the presets.
pub async fn list() -> Json<Value> {
    Json(json!({
        "tools": TOOLS.iter().map(|(name, summary, care, group)| json!({
            "name": name, "summary": summary, "care": care.word(), "group": group,
            "asks": matches!(care, Care::Asks | Care::Careful),
        })).collect::<Vec<_>>(),
        "presets": PRESETS.iter().map(|(id, name, summary, tools)| json!({
            "id": id, "name": name, "summary": summary, "tools": tools,
        })).collect::<Vec<_>>(),
    }))
}

/// What `GET /api/v1/tools` answers.
pub fn list_schema() -> Value {
    use super::openapi::{array, boolean, described, object, string};
    let tool = object([
        ("name", string()),
        (
            "summary",
            described("what it does, in plain words", string()),
        ),
        (
            "care",
            described("how careful the daemon is with it, in words", string()),
        ),
        ("group", string()),
        (
            "asks",
            described("it asks a person before it acts", boolean()),
        ),
    ]);
    let preset = object([
        ("id", string()),
        ("name", string()),
        ("summary", string()),
        ("tools", array(string())),
    ]);
    object([("tools", array(tool)), ("presets", array(preset))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_and_preset_names_a_real_tool() {
        for (name, ..) in TOOLS {
            assert!(crate::tools::is_known_tool(name), "{name}");
        }
        for (id, _, _, tools) in PRESETS {
            for tool in *tools {
                assert!(TOOLS.iter().any(|(name, ..)| name == tool), "{id}: {tool}");
            }
        }
    }
}
