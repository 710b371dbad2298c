//! Skills: capability packs in the `SKILL.md` format (a folder per skill; YAML front matter with
//! at least `name` and `description`, then Markdown instructions; other files beside it).
//!
//! Discovery has three levels ([`levels`]): bundled (`skills/` beside the config file, else the
//! ones built into the binary from `config/skills/`, written to `<data dir>/bundled-skills`),
//! installed (`<data dir>/skills/`), and the agent's own workspace `skills/`. An installed skill
//! replaces a bundled one of the same name (both are the operator's). A workspace skill never
//! replaces either: the workspace is writable by the agent (its tools, a web page it was told to
//! save), so a same-named workspace skill would silently swap instructions the operator chose for
//! ones nobody reviewed. It is kept in the catalogue as *shadowed*, unavailable with the reason,
//! and a new workspace skill under a fresh name needs a human decision anyway (writes into the
//! workspace `skills/` are L2 for the classifier).
//! Our front-matter extensions are optional: `tools` (required tools), `mcp` (required MCP
//! servers), `risk` (a hint that can only tighten), `agents` (who may use it), `requires`
//! (`env` variables, `bins` on PATH). Unknown keys are kept and shown, never errors, so skills
//! written for other runtimes load.
//!
//! An agent's enabled skills that it can use are listed by name and description in the prompt;
//! `use_skill` loads one's instructions (`tools/skill.rs`). Enablement is the agent file's
//! `skills` list with the operator's Studio toggles over it, owned by the Agent actor. Runs record
//! which skills they loaded (their `use_skill` calls), shown in Studio's runs view.
//!
//! Architecture Invariant: a skill grants nothing: one that needs a tool the agent lacks, an MCP
//! server not configured, or a missing variable or binary is *unavailable* for that agent, with
//! the reason (logged at boot; `clawvisor skills list`). An invalid skill never breaks an agent:
//! it is listed with what to fix.
//! Architecture Invariant: a skill's `risk` hint only tightens: once a run loaded a skill
//! (`use_skill`), its policy decisions use the stricter of the agent's autonomy and the skill's
//! (`medium` → `require_approval`, `high` → `supervised`); the decision step names the skill.
//!
//! Architecture Invariant: `skills` reads files and knows nothing about actors or the store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The bundled skills (`config/skills/` of the repository), built into the binary so that a
/// daemon started without the repository's `config/` still has them.
#[derive(rust_embed::Embed)]
#[folder = "config/skills/"]
struct BundledSkills;

/// Writes the built-in bundled skills into `dir` (only files whose content differs) and returns
/// it, for use as the bundled level when no `skills/` folder is beside the config file.
pub fn extract_bundled(dir: &Path) -> std::io::Result<PathBuf> {
    for name in BundledSkills::iter() {
        let Some(file) = BundledSkills::get(&name) else {
            continue;
        };
        let path = dir.join(name.as_ref());
        if std::fs::read(&path).is_ok_and(|existing| existing == file.data.as_ref()) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, file.data.as_ref())?;
    }
    Ok(dir.to_path_buf())
}

/// Where a skill was found. Installed overrides bundled; workspace never overrides either (see the
/// module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Bundled,
    Installed,
    Workspace,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Bundled => "bundled",
            Level::Installed => "installed",
            Level::Workspace => "workspace",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Requires {
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub bins: Vec<String>,
}

/// A parsed skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The Markdown after the front matter.
    pub instructions: String,
    pub dir: PathBuf,
    pub level: Level,
    pub tools: Vec<String>,
    pub mcp: Vec<String>,
    pub risk: Option<String>,
    pub agents: Option<Vec<String>>,
    pub requires: Requires,
    /// Front-matter keys this runtime does not use, kept as text to show.
    pub unknown: BTreeMap<String, String>,
    /// Other files of the skill's folder, relative to it.
    pub files: Vec<String>,
}

/// One entry of a catalogue: a skill, or a folder that failed to load, with why.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The skill's name (the folder's name when it could not be read).
    pub name: String,
    pub dir: PathBuf,
    pub level: Level,
    pub skill: Result<Skill, String>,
    /// Set on a workspace entry whose name is also a bundled or installed skill: why it is not
    /// used. The entry stays in the catalogue (after the one that is used) so that the reason is
    /// shown wherever availability is.
    pub shadowed: Option<String>,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    mcp: Vec<String>,
    risk: Option<String>,
    agents: Option<Vec<String>>,
    #[serde(default)]
    requires: Requires,
    #[serde(flatten)]
    rest: BTreeMap<String, serde_norway::Value>,
}

const RISKS: &[&str] = &["low", "medium", "high"];

impl Skill {
    /// The autonomy a run that loaded this skill may have at most: its `risk` hint only
    /// tightens (`medium`: every write asks, `high`: every call asks; `low` or none: unchanged).
    pub fn autonomy_ceiling(&self) -> Option<crate::config::Autonomy> {
        match self.risk.as_deref() {
            Some("medium") => Some(crate::config::Autonomy::RequireApproval),
            Some("high") => Some(crate::config::Autonomy::Supervised),
            _ => None,
        }
    }
}

/// Parses a `SKILL.md`. The error says what to fix.
pub fn parse(text: &str, dir: &Path, level: Level) -> Result<Skill, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Err("SKILL.md must start with YAML front matter between `---` lines".into());
    };
    let Some(end) = rest.find("\n---") else {
        return Err("the front matter is not closed by a `---` line".into());
    };
    let (yaml, body) = (&rest[..end], &rest[end + 4..]);
    let body = body
        .strip_prefix("\r\n")
        .or_else(|| body.strip_prefix('\n'))
        .unwrap_or(body);
    let front: FrontMatter = serde_norway::from_str(yaml)
        .map_err(|error| format!("the front matter is not valid YAML: {error}"))?;
    let name = front
        .name
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .ok_or("the front matter has no `name`")?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "`name: {name}` may only use letters, digits, `-` and `_`"
        ));
    }
    let description = front
        .description
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
        .ok_or("the front matter has no `description`")?;
    if let Some(risk) = &front.risk
        && !RISKS.contains(&risk.as_str())
    {
        return Err(format!("`risk: {risk}` is not one of {}", RISKS.join(", ")));
    }
    let unknown = front
        .rest
        .into_iter()
        .map(|(key, value)| {
            let shown = serde_norway::to_string(&value)
                .unwrap_or_default()
                .trim()
                .to_string();
            (key, shown)
        })
        .collect();
    Ok(Skill {
        name,
        description,
        instructions: body.trim().to_string(),
        dir: dir.to_path_buf(),
        level,
        tools: front.tools,
        mcp: front.mcp,
        risk: front.risk,
        agents: front.agents,
        requires: front.requires,
        unknown,
        files: other_files(dir),
    })
}

/// Files of a skill's folder besides `SKILL.md`, relative, sorted; links are not followed.
fn other_files(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file()
                && let Ok(relative) = path.strip_prefix(dir)
                && relative != Path::new("SKILL.md")
            {
                files.push(relative.display().to_string());
            }
            if files.len() >= 200 {
                break;
            }
        }
    }
    files.sort();
    files
}

/// Reads every `<dir>/<skill>/SKILL.md` of one level (a missing directory is an empty level).
pub fn load_level(dir: &Path, level: Level) -> Vec<Entry> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<Entry> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| {
            let folder = entry.path();
            let file = folder.join("SKILL.md");
            let skill = match std::fs::read(&file) {
                Err(error) => Err(format!("cannot read {}: {error}", file.display())),
                Ok(bytes) => match String::from_utf8(bytes) {
                    Err(_) => Err(format!("{} is not UTF-8 text", file.display())),
                    Ok(text) => parse(&text, &folder, level),
                },
            };
            Entry {
                name: skill.as_ref().map_or_else(
                    |_| entry.file_name().to_string_lossy().into_owned(),
                    |skill| skill.name.clone(),
                ),
                dir: folder,
                level,
                skill,
                shadowed: None,
            }
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// The catalogue over the three levels: one usable entry per name (installed over bundled, a
/// workspace skill only under a name no bundled or installed skill has), sorted by name. A
/// workspace skill that has the name of a bundled or installed one follows it as a shadowed entry
/// (`shadowed` says why), so a lookup by name finds the entry that is used first.
pub fn discover(levels: &[(PathBuf, Level)]) -> Vec<Entry> {
    let mut by_name: BTreeMap<String, Entry> = BTreeMap::new();
    let mut shadowed: Vec<Entry> = Vec::new();
    for (dir, level) in levels {
        for entry in load_level(dir, *level) {
            let existing_level = by_name.get(&entry.name).map(|existing| existing.level);
            match existing_level {
                Some(existing)
                    if entry.level == Level::Workspace && existing < Level::Workspace =>
                {
                    shadowed.push(entry);
                }
                Some(Level::Workspace) if entry.level < Level::Workspace => {
                    if let Some(workspace) = by_name.insert(entry.name.clone(), entry) {
                        shadowed.push(workspace);
                    }
                }
                Some(existing) if existing > entry.level => {}
                _ => {
                    by_name.insert(entry.name.clone(), entry);
                }
            }
        }
    }
    let mut catalogue: Vec<Entry> = by_name.into_values().collect();
    for mut entry in shadowed {
        // The entry that is used has the same name (it is why this one is shadowed); the
        // shadowed one goes right after it.
        let Some(used) = catalogue.iter().rposition(|used| used.name == entry.name) else {
            continue;
        };
        entry.shadowed = Some(shadow_reason(&catalogue[used]));
        catalogue.insert(used + 1, entry);
    }
    catalogue
}

fn shadow_reason(used: &Entry) -> String {
    format!(
        "shadowed: a {} skill named `{}` exists ({}), and a workspace skill never replaces a \
         bundled or installed one; the {} one is used (give the workspace skill another `name` \
         to use it)",
        used.level.as_str(),
        used.name,
        used.dir.display(),
        used.level.as_str()
    )
}

/// What an agent has that a skill may need.
pub struct AgentContext<'a> {
    pub agent: &'a str,
    pub tools: &'a [String],
    pub mcp_servers: &'a [String],
    pub env: &'a dyn Fn(&str) -> bool,
    pub bin: &'a dyn Fn(&str) -> bool,
}

/// Why `skill` cannot be used by this agent, or `Ok` when it can.
pub fn availability(skill: &Skill, context: &AgentContext<'_>) -> Result<(), String> {
    if let Some(agents) = &skill.agents
        && !agents.iter().any(|agent| agent == context.agent)
    {
        return Err(format!(
            "the skill is limited to agents {}",
            agents.join(", ")
        ));
    }
    let missing: Vec<&str> = skill
        .tools
        .iter()
        .filter(|tool| !context.tools.contains(tool))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "it needs tools the agent does not have: {} (a skill never grants tools; add them to the agent's `tools`)",
            missing.join(", ")
        ));
    }
    let missing: Vec<&str> = skill
        .mcp
        .iter()
        .filter(|server| !context.mcp_servers.contains(server))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "it needs MCP servers that are not configured: {}",
            missing.join(", ")
        ));
    }
    if let Some(variable) = skill.requires.env.iter().find(|name| !(context.env)(name)) {
        return Err(format!("it needs the environment variable {variable}"));
    }
    if let Some(binary) = skill.requires.bins.iter().find(|name| !(context.bin)(name)) {
        return Err(format!("it needs the program `{binary}` on PATH"));
    }
    Ok(())
}

/// A skill as one agent sees it: the catalogue entry and whether this agent can use it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSkill {
    pub entry: Entry,
    /// `Err(reason)` when the skill is invalid or needs what the agent lacks.
    pub available: Result<(), String>,
}

impl AgentSkill {
    pub fn description(&self) -> &str {
        self.entry
            .skill
            .as_ref()
            .map_or("", |skill| skill.description.as_str())
    }
}

/// The catalogue as `context`'s agent sees it, plus an unavailable entry for every name in
/// `configured` that no folder has (so a typo in `skills = [...]` is shown, not silently lost).
pub fn for_agent(
    catalogue: Vec<Entry>,
    configured: &[String],
    context: &AgentContext<'_>,
) -> Vec<AgentSkill> {
    let mut skills: Vec<AgentSkill> = catalogue
        .into_iter()
        .map(|entry| {
            let available = match (&entry.shadowed, &entry.skill) {
                (Some(reason), _) => Err(reason.clone()),
                (None, Ok(skill)) => availability(skill, context),
                (None, Err(error)) => Err(format!("the skill is invalid: {error}")),
            };
            AgentSkill { entry, available }
        })
        .collect();
    for name in configured {
        if !skills.iter().any(|skill| skill.entry.name == *name) {
            skills.push(AgentSkill {
                entry: Entry {
                    name: name.clone(),
                    dir: PathBuf::new(),
                    level: Level::Workspace,
                    skill: Err("no skills folder has it".into()),
                    shadowed: None,
                },
                available: Err(
                    "not found in the bundled, installed or workspace skills folders".into(),
                ),
            });
        }
    }
    skills
}

/// The names enabled for an agent: its file's `skills = [...]` with the operator's toggles
/// (skill, enabled) applied over it.
pub fn enabled_names(configured: &[String], toggles: &[(String, bool)]) -> Vec<String> {
    let mut enabled: Vec<String> = configured.to_vec();
    for (name, on) in toggles {
        enabled.retain(|other| other != name);
        if *on {
            enabled.push(name.clone());
        }
    }
    enabled
}

/// The skills an agent can load now: enabled and available (never a shadowed one).
pub fn usable(skills: &[AgentSkill], enabled: &[String]) -> Vec<Skill> {
    skills
        .iter()
        // A shadowed skill is never available, so this also leaves shadowed ones out.
        .filter(|skill| enabled.contains(&skill.entry.name) && skill.available.is_ok())
        .filter_map(|skill| skill.entry.skill.as_ref().ok().cloned())
        .collect()
}

/// Is `name` an executable on PATH?
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .any(|dir| std::fs::metadata(dir.join(name)).is_ok_and(|metadata| metadata.is_file()))
    })
}

/// The skill folders of an agent, lowest precedence first: bundled (`skills/` beside the config
/// file, else the ones built into the binary, written to `<data dir>/bundled-skills`), installed
/// (`<data dir>/skills`), the agent's workspace `skills/`.
pub fn levels(
    loaded: &crate::config::LoadedConfig,
    workspace: &std::path::Path,
) -> Vec<(std::path::PathBuf, Level)> {
    let mut levels = Vec::new();
    let beside_config = match &loaded.source {
        crate::config::ConfigSource::File(path) => path
            .parent()
            .map(|dir| dir.join("skills"))
            .filter(|dir| dir.is_dir()),
        crate::config::ConfigSource::BuiltIn => None,
    };
    let bundled = beside_config.or_else(|| {
        let dir = loaded.config.data_dir.join("bundled-skills");
        extract_bundled(&dir)
            .map_err(|error| {
                tracing::warn!(dir = %dir.display(), %error, "could not write the built-in skills");
            })
            .ok()
    });
    if let Some(dir) = bundled {
        levels.push((dir, Level::Bundled));
    }
    levels.push((loaded.config.data_dir.join("skills"), Level::Installed));
    levels.push((workspace.join("skills"), Level::Workspace));
    levels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Skill, String> {
        parse(text, Path::new("/nowhere"), Level::Bundled)
    }

    #[test]
    fn a_workspace_skill_is_shadowed_whatever_the_order_of_the_levels() {
        let root = tempfile::tempdir().unwrap();
        for (level, body) in [("bundled", "operator's"), ("workspace", "agent's")] {
            let dir = root.path().join(level).join("notes");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("SKILL.md"),
                format!("---\nname: notes\ndescription: d\n---\n{body}\n"),
            )
            .unwrap();
        }
        let bundled = (root.path().join("bundled"), Level::Bundled);
        let workspace = (root.path().join("workspace"), Level::Workspace);
        for levels in [
            [bundled.clone(), workspace.clone()],
            [workspace.clone(), bundled.clone()],
        ] {
            let catalogue = discover(&levels);
            assert_eq!(catalogue.len(), 2);
            let used = catalogue[0].skill.as_ref().unwrap();
            assert_eq!(
                (used.level, used.instructions.as_str()),
                (Level::Bundled, "operator's")
            );
            assert_eq!(catalogue[0].shadowed, None);
            assert_eq!(catalogue[1].level, Level::Workspace);
            assert!(
                catalogue[1]
                    .shadowed
                    .as_deref()
                    .is_some_and(|reason| reason.contains("bundled skill named `notes`"))
            );
        }
    }

    #[test]
    fn front_matter_is_checked_and_unknown_keys_are_kept() {
        let skill = parsed(
            "---\nname: notes\ndescription: Keep notes.\ntools: [write_file]\nlicense: MIT\nallowed-tools: Read\n---\n# Notes\nWrite them down.\n",
        )
        .unwrap();
        assert_eq!(skill.name, "notes");
        assert_eq!(skill.tools, ["write_file"]);
        assert_eq!(skill.instructions, "# Notes\nWrite them down.");
        assert_eq!(
            skill.unknown.get("license").map(String::as_str),
            Some("MIT")
        );
        assert!(skill.unknown.contains_key("allowed-tools"));
        for (text, error) in [
            ("# no front matter", "must start with YAML front matter"),
            ("---\nname: x\n", "not closed"),
            ("---\nname: [unclosed\n---\n", "not valid YAML"),
            ("---\ndescription: d\n---\n", "no `name`"),
            ("---\nname: x\n---\n", "no `description`"),
            ("---\nname: a b\ndescription: d\n---\n", "may only use"),
            (
                "---\nname: x\ndescription: d\nrisk: none\n---\n",
                "is not one of",
            ),
        ] {
            let got = parsed(text).unwrap_err();
            assert!(got.contains(error), "{text:?}: {got}");
        }
    }
}
