//! Changing the files an operator also edits by hand: an agent's file (`actors/<name>.toml`) and
//! the daemon's `clawvisor.toml`. Studio's agent editor and setup wizard write through here, with
//! `toml_edit`, so that the comments, order and formatting of every key they do not change stay
//! as the operator wrote them.
//!
//! An edit is computed as text ([`edit_agent`], [`new_agent`], [`set_provider`]) and validated
//! like a reload before anything is written (the reloader loads the files with the new text as
//! an [`Overlay`]); only then is it written, atomically ([`write_atomically`]: a temporary file
//! beside the target, flushed, renamed over it), so that a crash leaves the old file or the new
//! one, never half of either.
//!
//! **Architecture Invariant:** the files are the one source of truth for an agent's definition:
//! what Studio changes lands in them (the database keeps only the runtime state: paused).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, Item, Table, Value};

/// One value an operator set for a key of a file.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    Text(String),
    Number(f64),
    Integer(i64),
    Flag(bool),
    Texts(Vec<String>),
    Integers(Vec<i64>),
    /// Take the key out of the file (its default applies).
    Absent,
}

/// The keys of an agent file Studio may set, and the kind of value each takes. `name` is only
/// set when an agent is created (an agent's name is its identity: renaming is a new agent).
pub const AGENT_KEYS: &[(&str, Kind)] = &[
    ("description", Kind::Text),
    ("provider", Kind::Text),
    ("model", Kind::Text),
    ("instructions", Kind::Text),
    ("autonomy", Kind::Text),
    ("tools", Kind::Texts),
    ("skills", Kind::Texts),
    ("daily_budget_usd", Kind::Number),
    ("daily_token_budget", Kind::Integer),
    ("timezone", Kind::Text),
    ("voice_replies", Kind::Text),
    ("vision", Kind::Flag),
    ("allow_shell", Kind::Flag),
    ("echo_transcripts", Kind::Flag),
    ("approval_ttl", Kind::Text),
    ("reports_to", Kind::Text),
    ("telegram.token_env", Kind::Text),
    ("telegram.api_url", Kind::Text),
    ("telegram.allow_users", Kind::Integers),
    ("telegram.approvers", Kind::Integers),
];

/// The kind of value a key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Number,
    Integer,
    Flag,
    Texts,
    Integers,
}

/// Why an edit could not be made; the text names the file or the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
}

/// File contents to read instead of what is on disk (`None`: the file is gone), by path: how an
/// edit is validated before it is written.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    pub files: BTreeMap<PathBuf, Option<String>>,
}

impl Overlay {
    pub fn one(path: PathBuf, text: Option<String>) -> Self {
        Self {
            files: BTreeMap::from([(path, text)]),
        }
    }

    /// The text of `path`: the overlay's when it holds the path, the disk's otherwise.
    pub fn read(&self, path: &Path) -> std::io::Result<String> {
        match self.files.get(path) {
            Some(Some(text)) => Ok(text.clone()),
            Some(None) => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
            None => std::fs::read_to_string(path),
        }
    }

    /// Whether the overlay writes a file directly in `dir`.
    pub fn adds_files_in(&self, dir: &Path) -> bool {
        self.files
            .iter()
            .any(|(path, text)| text.is_some() && path.parent() == Some(dir))
    }

    /// The agent files of `dir` as the overlay leaves them: the `*.toml` on disk, less the ones
    /// the overlay removes, plus the ones it adds there; sorted.
    pub fn agent_files(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => Some(entries),
            // A folder the overlay creates (its first files are in the overlay).
            Err(error)
                if error.kind() == std::io::ErrorKind::NotFound && self.adds_files_in(dir) =>
            {
                None
            }
            Err(error) => return Err(error),
        };
        let mut files: Vec<PathBuf> = entries
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
            .filter(|path| !matches!(self.files.get(path), Some(None)))
            .collect();
        for (path, text) in &self.files {
            if text.is_some() && path.parent() == Some(dir) && !files.contains(path) {
                files.push(path.clone());
            }
        }
        files.sort();
        Ok(files)
    }
}

/// The kind of value `key` takes in an agent file, or why Studio may not set it.
pub fn agent_key(key: &str) -> Result<Kind, EditError> {
    AGENT_KEYS
        .iter()
        .find(|(known, _)| *known == key)
        .map(|(_, kind)| *kind)
        .ok_or_else(|| {
            EditError::Invalid(format!(
                "`{key}` cannot be set from Studio (the keys it sets: {})",
                AGENT_KEYS
                    .iter()
                    .map(|(key, _)| *key)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// `text` (an agent file) with `changes` applied; every other key, comment and blank line stays.
pub fn edit_agent(text: &str, changes: &[(String, Setting)]) -> Result<String, EditError> {
    let mut document: DocumentMut = text
        .parse()
        .map_err(|error: toml_edit::TomlError| EditError::Invalid(error.to_string()))?;
    for (key, setting) in changes {
        let kind = agent_key(key)?;
        check_kind(key, kind, setting)?;
        set(document.as_table_mut(), key, setting);
    }
    // A `[telegram]` table left without a token is no bot at all.
    let telegram_empty = document
        .get("telegram")
        .and_then(Item::as_table)
        .is_some_and(|table| table.get("token_env").is_none());
    if telegram_empty {
        document.remove("telegram");
    }
    Ok(document.to_string())
}

/// A new agent's file: a short commented header, its name, then `changes`.
pub fn new_agent(name: &str, changes: &[(String, Setting)]) -> Result<String, EditError> {
    check_agent_name(name)?;
    let header = format!(
        "# The agent `{name}`, made in Studio. Edit it here or in Studio; both write this file.\n\
         name = {}\n",
        Value::from(name)
    );
    edit_agent(&header, changes)
}

/// Lowercase letters, digits, `-` and `_`, as the agent files require.
pub fn check_agent_name(name: &str) -> Result<(), EditError> {
    let fine = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if fine {
        return Ok(());
    }
    Err(EditError::Invalid(format!(
        "`name` must be 1 to 40 lowercase letters, digits, `-` or `_` (got `{name}`)"
    )))
}

/// `text` (an agent file) as a file for a new agent `name`: the same settings, a new name, and
/// without its Telegram bot (one bot serves one agent).
pub fn duplicate_agent(text: &str, name: &str) -> Result<String, EditError> {
    check_agent_name(name)?;
    let mut document: DocumentMut = text
        .parse()
        .map_err(|error: toml_edit::TomlError| EditError::Invalid(error.to_string()))?;
    document["name"] = toml_edit::value(name);
    document.remove("telegram");
    document.remove("workspace");
    Ok(document.to_string())
}

/// `text` (the daemon's config) with the provider `name` set: its kind, base URL, the variable
/// holding its key, and whether it is free; other providers and keys stay.
pub fn set_provider(
    text: &str,
    name: &str,
    kind: &str,
    base_url: &str,
    api_key_env: &str,
    free: bool,
) -> Result<String, EditError> {
    let mut document: DocumentMut = text
        .parse()
        .map_err(|error: toml_edit::TomlError| EditError::Invalid(error.to_string()))?;
    let providers = document
        .entry("providers")
        .or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        })
        .as_table_mut()
        .ok_or_else(|| EditError::Invalid("`providers` is not a table".into()))?;
    let provider = providers
        .entry(name)
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| EditError::Invalid(format!("`providers.{name}` is not a table")))?;
    provider["kind"] = toml_edit::value(kind);
    if base_url.trim().is_empty() {
        provider.remove("base_url");
    } else {
        provider["base_url"] = toml_edit::value(base_url.trim());
    }
    if api_key_env.trim().is_empty() {
        provider.remove("api_key_env");
    } else {
        provider["api_key_env"] = toml_edit::value(api_key_env.trim());
    }
    if free {
        provider["free"] = toml_edit::value(true);
    } else {
        provider.remove("free");
    }
    Ok(document.to_string())
}

/// The file in `dir` that defines agent `name` (the file name does not matter, `name` does).
pub fn find_agent_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files.into_iter().find(|path| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.parse::<DocumentMut>().ok())
            .and_then(|document| document.get("name")?.as_str().map(str::to_string))
            .is_some_and(|found| found == name)
    })
}

/// Where a new agent's file goes: `<dir>/<name>.toml`, or `<name>-2.toml`, … when that file
/// exists (it defines another agent, or none).
pub fn new_agent_path(dir: &Path, name: &str) -> PathBuf {
    let mut path = dir.join(format!("{name}.toml"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{name}-{n}.toml"));
        n += 1;
    }
    path
}

/// Writes `contents` to `path` so that readers see the old file or the new one: a temporary file
/// in the same directory, flushed to disk, renamed over `path` (keeping `path`'s permissions; a
/// new file gets the temporary file's 0600).
pub fn write_atomically(path: &Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut temporary = tempfile::Builder::new()
        .prefix(".clawvisor-edit-")
        .tempfile_in(dir)?;
    temporary.write_all(contents.as_ref())?;
    temporary.as_file().sync_all()?;
    if let Ok(metadata) = std::fs::metadata(path) {
        temporary
            .as_file()
            .set_permissions(metadata.permissions())?;
    }
    temporary.persist(path).map_err(|error| error.error)?;
    if let Ok(directory) = std::fs::File::open(dir) {
        let _ = directory.sync_all();
    }
    Ok(())
}

fn check_kind(key: &str, kind: Kind, setting: &Setting) -> Result<(), EditError> {
    let fits = matches!(
        (kind, setting),
        (_, Setting::Absent)
            | (Kind::Text, Setting::Text(_))
            | (Kind::Number, Setting::Number(_) | Setting::Integer(_))
            | (Kind::Integer, Setting::Integer(_))
            | (Kind::Flag, Setting::Flag(_))
            | (Kind::Texts, Setting::Texts(_))
            | (Kind::Integers, Setting::Integers(_))
    );
    if fits {
        return Ok(());
    }
    let expected = match kind {
        Kind::Text => "a text",
        Kind::Number => "a number",
        Kind::Integer => "a whole number",
        Kind::Flag => "true or false",
        Kind::Texts => "a list of texts",
        Kind::Integers => "a list of whole numbers",
    };
    Err(EditError::Invalid(format!("`{key}` must be {expected}")))
}

/// Sets (or removes) the dotted `key` in `table`, making the tables on the way.
fn set(table: &mut Table, key: &str, setting: &Setting) {
    let (parent, last) = match key.rsplit_once('.') {
        Some((parent, last)) => (Some(parent), last),
        None => (None, key),
    };
    let table = match parent {
        None => table,
        Some(parent) => {
            let item = table
                .entry(parent)
                .or_insert_with(|| Item::Table(Table::new()));
            if !item.is_table() {
                *item = Item::Table(Table::new());
            }
            match item.as_table_mut() {
                Some(table) => table,
                // Made a table just above.
                None => return,
            }
        }
    };
    let value = match setting {
        Setting::Absent => {
            table.remove(last);
            return;
        }
        Setting::Text(text) if text.contains('\n') => multi_line(text),
        Setting::Text(text) => Value::from(text.as_str()),
        Setting::Number(number) => Value::from(*number),
        Setting::Integer(number) => Value::from(*number),
        Setting::Flag(flag) => Value::from(*flag),
        Setting::Texts(texts) => Value::Array(texts.iter().map(String::as_str).collect::<Array>()),
        Setting::Integers(numbers) => Value::Array(numbers.iter().copied().collect::<Array>()),
    };
    match table.get_mut(last).and_then(Item::as_value_mut) {
        // The value changes; the comments around it stay.
        Some(existing) => {
            let decor = existing.decor().clone();
            *existing = value;
            *existing.decor_mut() = decor;
        }
        None => table[last] = Item::Value(value),
    }
}

/// A multi-line text as TOML's `"""` string, which reads as written (the instructions).
fn multi_line(text: &str) -> Value {
    let body = text.replace('\\', "\\\\").replace("\"\"\"", "\"\"\\\"");
    let body = if body.ends_with('"') {
        format!("{body}\n")
    } else {
        body
    };
    format!("\"\"\"\n{body}\"\"\"")
        .parse::<Value>()
        .unwrap_or_else(|_| Value::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# My agent.\nname = \"ada\"\n\n# The model it uses.\nmodel = \"small\" # cheap\nprovider = \"openai\"\ntools = [\"read_file\"]\n\n[telegram]\n# From BotFather.\ntoken_env = \"ADA_TOKEN\"\n";

    fn text(value: &str) -> Setting {
        Setting::Text(value.to_string())
    }

    #[test]
    fn an_edit_keeps_comments_and_untouched_keys() {
        let edited = edit_agent(
            FILE,
            &[
                ("model".into(), text("large")),
                (
                    "tools".into(),
                    Setting::Texts(vec!["read_file".into(), "web_fetch".into()]),
                ),
                ("daily_budget_usd".into(), Setting::Number(2.5)),
            ],
        )
        .unwrap();
        assert!(edited.contains("# My agent."), "{edited}");
        assert!(
            edited.contains("# The model it uses.\nmodel = \"large\" # cheap"),
            "{edited}"
        );
        assert!(
            edited.contains("tools = [\"read_file\", \"web_fetch\"]"),
            "{edited}"
        );
        assert!(
            edited.contains("# From BotFather.\ntoken_env = \"ADA_TOKEN\""),
            "{edited}"
        );
        assert!(edited.contains("daily_budget_usd = 2.5"), "{edited}");
        let parsed: toml::Table = toml::from_str(&edited).unwrap();
        assert_eq!(parsed["model"].as_str(), Some("large"));
    }

    #[test]
    fn instructions_are_written_as_they_read_and_read_back_exactly() {
        let instructions = "Be brief.\nQuote \"\"\"like this\"\"\" and a path C:\\temp.\n";
        let edited = edit_agent(FILE, &[("instructions".into(), text(instructions))]).unwrap();
        assert!(
            edited.contains("instructions = \"\"\"\nBe brief.\n"),
            "{edited}"
        );
        let parsed: toml::Table = toml::from_str(&edited).unwrap();
        assert_eq!(parsed["instructions"].as_str(), Some(instructions));
    }

    #[test]
    fn unknown_keys_and_wrong_kinds_name_the_key() {
        let error = edit_agent(FILE, &[("workspace".into(), text("/"))]).unwrap_err();
        assert!(
            error.to_string().contains("`workspace` cannot be set"),
            "{error}"
        );
        let error = edit_agent(FILE, &[("tools".into(), text("shell"))]).unwrap_err();
        assert_eq!(error.to_string(), "`tools` must be a list of texts");
    }

    #[test]
    fn removing_the_token_removes_the_bot_and_new_and_duplicate_files_read_back() {
        let edited = edit_agent(FILE, &[("telegram.token_env".into(), Setting::Absent)]).unwrap();
        assert!(!edited.contains("[telegram]"), "{edited}");
        let made = new_agent(
            "bob",
            &[
                ("provider".into(), text("openai")),
                ("model".into(), text("small")),
                ("telegram.token_env".into(), text("BOB_TOKEN")),
                ("telegram.allow_users".into(), Setting::Integers(vec![42])),
            ],
        )
        .unwrap();
        let parsed: toml::Table = toml::from_str(&made).unwrap();
        assert_eq!(parsed["name"].as_str(), Some("bob"));
        assert_eq!(parsed["telegram"]["allow_users"][0].as_integer(), Some(42));
        let copy = duplicate_agent(FILE, "ada-2").unwrap();
        let parsed: toml::Table = toml::from_str(&copy).unwrap();
        assert_eq!(parsed["name"].as_str(), Some("ada-2"));
        assert!(parsed.get("telegram").is_none());
        assert!(new_agent("Bad Name", &[]).is_err());
    }

    #[test]
    fn a_provider_is_added_or_changed_beside_the_others() {
        let config =
            "# Daemon.\n[providers.openai]\nkind = \"openai\"\napi_key_env = \"OPENAI_API_KEY\"\n";
        let edited = set_provider(
            config,
            "local",
            "openai",
            "http://127.0.0.1:11434/v1",
            "",
            true,
        )
        .unwrap();
        let parsed: toml::Table = toml::from_str(&edited).unwrap();
        assert_eq!(
            parsed["providers"]["openai"]["api_key_env"].as_str(),
            Some("OPENAI_API_KEY")
        );
        assert_eq!(parsed["providers"]["local"]["free"].as_bool(), Some(true));
        assert!(edited.starts_with("# Daemon."));
    }

    #[test]
    fn an_overlay_reads_its_own_text_and_hides_what_it_removes() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.toml");
        std::fs::write(&a, "name = \"a\"").unwrap();
        let b = dir.path().join("b.toml");
        let overlay = Overlay::one(b.clone(), Some("name = \"b\"".into()));
        assert_eq!(
            overlay.agent_files(dir.path()).unwrap(),
            [a.clone(), b.clone()]
        );
        assert_eq!(overlay.read(&b).unwrap(), "name = \"b\"");
        let removed = Overlay::one(a.clone(), None);
        assert!(removed.agent_files(dir.path()).unwrap().is_empty());
        assert!(removed.read(&a).is_err());
        assert_eq!(find_agent_file(dir.path(), "a"), Some(a));
        write_atomically(&b, "name = \"b\"\n").unwrap();
        assert_eq!(new_agent_path(dir.path(), "b"), dir.path().join("b-2.toml"));
    }
}
