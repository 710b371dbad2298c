//! The secrets store: keys and tokens entered in Studio ("Keys & tokens"), kept by the daemon in
//! `<data_dir>/secrets.toml` and read like environment variables wherever the config names a
//! `*_env` variable (`api_key_env`, `token_env`, …).
//!
//! The file is flat TOML, one `NAME = "value"` per secret, names spelled like environment
//! variables. Loading reads it at boot and at every reload (`layers::read_secrets`); a variable
//! set in the environment wins over the file. Every value read or written is registered for
//! redaction at once ([`crate::secrets::Secret::new`]).
//!
//! Invariants:
//! - The file is never half-written: a change is written to a temporary file in the same
//!   directory (created with mode 0600), fsynced, renamed over the old file, and the directory is
//!   fsynced; a crash at any point leaves the old file or the new one, whole. Leftover temporary
//!   files of a crashed write are removed by the next write.
//! - The file's mode is 0600 (a more open file is read, with a warning saying how to fix it).
//! - One change at a time in this process ([`WRITER`]), so two concurrent changes cannot lose
//!   one another; the daemon is the file's only writer.
//! - No error, warning or `Debug` output of this module contains a value: errors name the file,
//!   the line and the variable, never what it holds.
//! - Values shorter than [`crate::secrets::MIN_SECRET_LEN`] are refused: the redactor does not
//!   register them, so they could not be kept out of logs.
//!
//! What Studio shows of a value is [`ending`]: its last [`ENDING_CHARS`] characters, only when
//! the value has at least [`ENDING_SHOWN_FROM`] characters, so that what is shown is at most a
//! fifth of the value and at least 16 characters stay unknown (a bot token has 46, an API key 40
//! to 200; a short password-like value shows nothing).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::secrets::Secret;

/// The store's file name in the data directory.
pub const FILE_NAME: &str = "secrets.toml";
/// How many trailing characters of a value Studio may show.
pub const ENDING_CHARS: usize = 4;
/// The shortest value whose ending is shown.
pub const ENDING_SHOWN_FROM: usize = 20;
/// The longest value accepted (a key or token is far shorter).
pub const MAX_VALUE_LEN: usize = 16 * 1024;
/// The longest name accepted.
pub const MAX_NAME_LEN: usize = 128;
/// Temporary files of a write: `.secrets.toml.<random>.tmp` beside the file.
const TEMP_PREFIX: &str = ".secrets.toml.";
const TEMP_SUFFIX: &str = ".tmp";
/// The file's first lines.
const HEADER: &str = "# Keys and tokens kept by clawvisor (Studio → Keys & tokens). Written by the daemon:\n\
# edit them in Studio. An environment variable of the same name wins over a value here.\n\
# Never share this file; backups leave it out unless `clawvisor backup --include-secrets`.\n";

/// Serializes the changes of this process (read, change, write).
static WRITER: Mutex<()> = Mutex::new(());

/// Why the store could not be read or changed. Never holds a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretsFileError {
    /// The name is not a variable name.
    #[error("`name`: {0}")]
    Name(String),
    /// The value cannot be kept (empty, too short, spaces inside, …).
    #[error("`value`: {0}")]
    Value(String),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not what the daemon writes (a hand edit went wrong).
    #[error("{path}: {message}")]
    Malformed { path: PathBuf, message: String },
}

impl SecretsFileError {
    fn io(action: &'static str, path: &Path, source: std::io::Error) -> SecretsFileError {
        SecretsFileError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What the store holds, each value registered for redaction, and what the operator should know
/// about the file (its mode).
#[derive(Debug, Default, Clone)]
pub struct StoredSecrets {
    pub values: BTreeMap<String, Secret>,
    pub warnings: Vec<String>,
}

/// What [`set`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Replaced,
    /// The store already held exactly this value; the file was not written.
    Unchanged,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Replaced => "replaced",
            Change::Unchanged => "unchanged",
        }
    }
}

/// The store's path in `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// Checks that `name` is spelled like an environment variable: a letter or `_`, then letters,
/// digits and `_`.
pub fn check_name(name: &str) -> Result<(), SecretsFileError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_');
    if name.is_empty() {
        return Err(SecretsFileError::Name(
            "the name is empty: give the variable's name, e.g. OPENAI_API_KEY".into(),
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(SecretsFileError::Name(format!(
            "the name is longer than {MAX_NAME_LEN} characters"
        )));
    }
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(SecretsFileError::Name(
            "a name is spelled like an environment variable: letters, digits and _, not starting with a digit (e.g. OPENAI_API_KEY)".into(),
        ));
    }
    Ok(())
}

/// The value as it will be kept (surrounding whitespace removed), or why it cannot be kept.
/// The reasons never quote the value.
pub fn check_value(value: &str) -> Result<&str, SecretsFileError> {
    let value = value.trim();
    let length = value.chars().count();
    if value.is_empty() {
        return Err(SecretsFileError::Value(
            "the value is empty: paste the key or token".into(),
        ));
    }
    if value.len() < crate::secrets::MIN_SECRET_LEN {
        return Err(SecretsFileError::Value(format!(
            "the value has {length} characters; a key or token has at least {}, so check that \
             you pasted all of it (shorter values could not be kept out of the logs)",
            crate::secrets::MIN_SECRET_LEN
        )));
    }
    if value.len() > MAX_VALUE_LEN {
        return Err(SecretsFileError::Value(format!(
            "the value is longer than {MAX_VALUE_LEN} bytes; paste only the key or token"
        )));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(SecretsFileError::Value(
            "the value has a space, a line break or a control character inside: paste only the \
             key or token itself"
                .into(),
        ));
    }
    Ok(value)
}

/// The last [`ENDING_CHARS`] characters of `value`, when it has at least [`ENDING_SHOWN_FROM`];
/// else nothing (see the module header).
pub fn ending(value: &str) -> Option<String> {
    let chars: Vec<char> = value.chars().collect();
    (chars.len() >= ENDING_SHOWN_FROM).then(|| chars[chars.len() - ENDING_CHARS..].iter().collect())
}

/// Reads the store in `data_dir` (none there: empty) and registers every value for redaction.
pub fn read(data_dir: &Path) -> Result<StoredSecrets, SecretsFileError> {
    let file = path(data_dir);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(StoredSecrets::default());
        }
        Err(error) => return Err(SecretsFileError::io("read", &file, error)),
    };
    let mut stored = StoredSecrets {
        values: parse(&text, &file)?,
        warnings: Vec::new(),
    };
    if let Ok(metadata) = std::fs::metadata(&file) {
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            stored.warnings.push(format!(
                "{} can be read by other users (mode {mode:o}): run `chmod 600 {}`",
                file.display(),
                file.display()
            ));
        }
    }
    Ok(stored)
}

/// Parses the file's text; errors name the line and the variable, never a value.
fn parse(text: &str, file: &Path) -> Result<BTreeMap<String, Secret>, SecretsFileError> {
    let malformed = |message: String| SecretsFileError::Malformed {
        path: file.to_path_buf(),
        message,
    };
    // `message()` is the parser's short reason; the `Display` form would quote the line.
    let table: toml::Table = toml::from_str(text).map_err(|error| {
        let line = error
            .span()
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        malformed(match line {
            Some(line) => format!(
                "line {line} is not `NAME = \"value\"` ({}); set the secrets again in Studio's Keys & tokens, or fix the line",
                error.message()
            ),
            None => format!("not TOML ({})", error.message()),
        })
    })?;
    let mut values = BTreeMap::new();
    for (name, value) in table {
        check_name(&name).map_err(|error| malformed(format!("`{name}`: {error}")))?;
        let toml::Value::String(value) = value else {
            return Err(malformed(format!(
                "`{name}` is not a quoted text (`{name} = \"...\"`)"
            )));
        };
        let value = value.trim();
        if !value.is_empty() {
            values.insert(name, Secret::new(value));
        }
    }
    Ok(values)
}

/// Keeps `value` under `name` (replacing what was there), registered for redaction.
pub fn set(data_dir: &Path, name: &str, value: &str) -> Result<Change, SecretsFileError> {
    check_name(name)?;
    let value = check_value(value)?;
    let secret = Secret::new(value);
    let _one_writer = WRITER.lock().unwrap_or_else(|poison| poison.into_inner());
    let mut values = read(data_dir)?.values;
    let change = match values.get(name) {
        Some(old) if old == &secret => return Ok(Change::Unchanged),
        Some(_) => Change::Replaced,
        None => Change::Added,
    };
    values.insert(name.to_string(), secret);
    write(data_dir, &values)?;
    Ok(change)
}

/// Removes `name` from the store; `false` when it held nothing under that name.
pub fn delete(data_dir: &Path, name: &str) -> Result<bool, SecretsFileError> {
    check_name(name)?;
    let _one_writer = WRITER.lock().unwrap_or_else(|poison| poison.into_inner());
    let mut values = read(data_dir)?.values;
    if values.remove(name).is_none() {
        return Ok(false);
    }
    write(data_dir, &values)?;
    Ok(true)
}

/// Writes the whole store atomically (see the module header). Called with [`WRITER`] held.
fn write(data_dir: &Path, values: &BTreeMap<String, Secret>) -> Result<(), SecretsFileError> {
    std::fs::create_dir_all(data_dir)
        .map_err(|error| SecretsFileError::io("create", data_dir, error))?;
    remove_leftovers(data_dir);
    let plain: BTreeMap<&str, &str> = values
        .iter()
        .map(|(name, secret)| (name.as_str(), secret.expose()))
        .collect();
    // A map of strings always serializes; the error arm keeps the daemon up regardless.
    let body = toml::to_string(&plain).map_err(|_| SecretsFileError::Malformed {
        path: path(data_dir),
        message: "the secrets could not be written as TOML".into(),
    })?;
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .suffix(TEMP_SUFFIX)
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(data_dir)
        .map_err(|error| SecretsFileError::io("create a temporary file in", data_dir, error))?;
    let temp_path = temp.path().to_path_buf();
    let io = |error| SecretsFileError::io("write", &temp_path, error);
    // The umask can only clear bits; this makes sure the mode is exactly 0600.
    std::fs::set_permissions(&temp_path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    temp.write_all(HEADER.as_bytes()).map_err(io)?;
    temp.write_all(body.as_bytes()).map_err(io)?;
    temp.as_file().sync_all().map_err(io)?;
    let file = path(data_dir);
    temp.persist(&file)
        .map_err(|error| SecretsFileError::io("replace", &file, error.error))?;
    std::fs::File::open(data_dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| SecretsFileError::io("sync the directory", data_dir, error))
}

/// Removes the temporary files a crashed write left (they hold secrets too).
fn remove_leftovers(data_dir: &Path) {
    let Ok(listing) = std::fs::read_dir(data_dir) else {
        return;
    };
    for entry in listing.filter_map(Result::ok) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_variable_names_and_values_are_whole_keys() {
        assert!(check_name("OPENAI_API_KEY").is_ok());
        assert!(check_name("_X1").is_ok());
        for bad in ["", "1ABC", "A-B", "A B", "ÄPI"] {
            let error = check_name(bad).unwrap_err().to_string();
            assert!(error.starts_with("`name`:"), "{error}");
        }
        assert_eq!(check_value("  sk-0123456789  ").unwrap(), "sk-0123456789");
        for bad in ["", "qzxw", "two words here", "line\nbreak-0123"] {
            let error = check_value(bad).unwrap_err().to_string();
            assert!(error.starts_with("`value`:"), "{error}");
            assert!(bad.len() < 4 || !error.contains(bad), "{error}");
        }
    }

    #[test]
    fn only_long_values_show_their_ending() {
        assert_eq!(ending("0123456789012345678"), None);
        assert_eq!(ending("01234567890123456789").as_deref(), Some("6789"));
        assert_eq!(
            ending("123456:AAH-a-bot-token-ends-in-WXYZ").as_deref(),
            Some("WXYZ")
        );
    }

    #[test]
    fn set_replace_delete_round_trip_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        assert!(read(&data).unwrap().values.is_empty());
        assert_eq!(
            set(&data, "UNIT_KEY", "unit-value-0001").unwrap(),
            Change::Added
        );
        assert_eq!(
            set(&data, "UNIT_KEY", "unit-value-0001").unwrap(),
            Change::Unchanged
        );
        assert_eq!(
            set(&data, "UNIT_KEY", "unit-value-0002").unwrap(),
            Change::Replaced
        );
        set(&data, "OTHER_KEY", "needs\"quotes\"\\-0003").unwrap();
        let stored = read(&data).unwrap();
        assert_eq!(stored.values["UNIT_KEY"].expose(), "unit-value-0002");
        assert_eq!(
            stored.values["OTHER_KEY"].expose(),
            "needs\"quotes\"\\-0003"
        );
        assert!(stored.warnings.is_empty());
        let mode = std::fs::metadata(path(&data)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(delete(&data, "UNIT_KEY").unwrap());
        assert!(!delete(&data, "UNIT_KEY").unwrap());
        assert_eq!(
            read(&data).unwrap().values.keys().collect::<Vec<_>>(),
            ["OTHER_KEY"]
        );
        let leftovers: Vec<_> = std::fs::read_dir(&data)
            .unwrap()
            .filter_map(Result::ok)
            .map(|entry| entry.file_name())
            .filter(|name| name != FILE_NAME)
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_broken_file_is_named_by_line_without_its_text() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            path(dir.path()),
            "GOOD = \"fine-value-1234\"\nBROKEN = \"visible-secret-text\n",
        )
        .unwrap();
        let error = read(dir.path()).unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
        assert!(!error.contains("visible-secret-text"), "{error}");
        std::fs::write(path(dir.path()), "NUMBER = 12345678\n").unwrap();
        let error = read(dir.path()).unwrap_err().to_string();
        assert!(error.contains("`NUMBER` is not a quoted text"), "{error}");
        std::fs::write(path(dir.path()), "OPEN = \"an-open-file-value\"\n").unwrap();
        std::fs::set_permissions(path(dir.path()), std::fs::Permissions::from_mode(0o644)).unwrap();
        let stored = read(dir.path()).unwrap();
        assert!(stored.warnings[0].contains("chmod 600"), "{stored:?}");
    }
}
