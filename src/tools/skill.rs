//! `use_skill`: loads an enabled skill's instructions into the run (progressive disclosure: the
//! prompt only lists each enabled skill's name and description).
//!
//! The skill's other files are mirrored into the agent's workspace (`.skills/<name>/`) so that the
//! workspace-confined `read_file` can read them. A skill grants nothing: only the agent's
//! enabled, available skills can be loaded, and its tools are the agent's own.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, RiskLevel};
use crate::skills::{Level, Skill};
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// Largest skill file mirrored into the workspace.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// `use_skill`, for one agent's enabled and available skills.
pub struct UseSkillTool {
    skills: Arc<Vec<Skill>>,
}

impl UseSkillTool {
    pub fn new(skills: Arc<Vec<Skill>>) -> UseSkillTool {
        UseSkillTool { skills }
    }
}

/// Copies the skill's files (not `SKILL.md`) under `<workspace>/.skills/<name>/`; the relative
/// paths the agent can read.
fn mirror(skill: &Skill, workspace: &Path) -> Vec<String> {
    if skill.level == Level::Workspace {
        // Already in the workspace, under `skills/<folder>/`.
        let folder = skill
            .dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        return skill
            .files
            .iter()
            .map(|file| format!("skills/{folder}/{file}"))
            .collect();
    }
    let target = workspace.join(".skills").join(&skill.name);
    let mut readable = Vec::new();
    for file in &skill.files {
        let source = skill.dir.join(file);
        let destination = target.join(file);
        let small = std::fs::symlink_metadata(&source)
            .is_ok_and(|metadata| metadata.is_file() && metadata.len() <= MAX_FILE_BYTES);
        if !small {
            continue;
        }
        if let Some(parent) = destination.parent()
            && std::fs::create_dir_all(parent).is_ok()
            && std::fs::copy(&source, &destination).is_ok()
        {
            readable.push(format!(".skills/{}/{file}", skill.name));
        }
    }
    readable
}

impl Tool for UseSkillTool {
    fn name(&self) -> &str {
        "use_skill"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "use_skill".into(),
            description: "Load the full instructions of one of your skills (listed in your \
                          instructions by name and description) when the task calls for it."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "The skill's name."}},
                "required": ["name"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "reads a skill's instructions")
    }

    fn describe_call(&self, args: &Value) -> String {
        format!(
            "use_skill: {}",
            args.get("name").and_then(Value::as_str).unwrap_or("")
        )
    }

    fn target(&self, args: &Value) -> String {
        args.get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("use_skill", &args, &["name"])?;
            let name = parsed.required_str("name")?.trim().to_string();
            let Some(skill) = self.skills.iter().find(|skill| skill.name == name) else {
                let enabled: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
                return Err(ToolError::Refused(format!(
                    "the skill `{name}` is not enabled for this agent (enabled: {})",
                    if enabled.is_empty() {
                        "none".to_string()
                    } else {
                        enabled.join(", ")
                    }
                )));
            };
            let skill = skill.clone();
            let workspace = ctx.workspace.clone();
            let files = tokio::task::spawn_blocking(move || {
                let files = mirror(&skill, &workspace);
                (skill, files)
            })
            .await
            .map_err(|error| ToolError::Failed(error.to_string()))?;
            let (skill, files) = files;
            let mut text = format!(
                "Skill `{}` ({}): follow these instructions for this task.\n\n{}",
                skill.name,
                skill.level.as_str(),
                skill.instructions
            );
            if !files.is_empty() {
                text.push_str("\n\nFiles of this skill (read them with read_file):\n");
                for file in files {
                    text.push_str(&format!("- {file}\n"));
                }
            }
            if !skill.tools.is_empty() {
                text.push_str(&format!(
                    "\nTools this skill uses: {}.",
                    skill.tools.join(", ")
                ));
            }
            Ok(ToolOutput::ok(text))
        })
    }
}
