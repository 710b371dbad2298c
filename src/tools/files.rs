//! The file tools: `read_file`, `write_file`, `list_dir`, confined to the agent's workspace.
//! `read_file` reads a PDF as its extracted text and names the kind of any other binary file
//! (`documents.rs`).
//!
//! Every path goes through `Workspace::resolve` (the explained checks) and every file is reached
//! through the workspace's `open_*` functions (no symlink followed at open time), see
//! `workspace.rs`. File-system calls run on tokio's blocking pool.
//!
//! Invariants: `read_file` never returns more than `settings.read_max_bytes` of content and never
//! panics on bytes that are not UTF-8; `write_file` in `overwrite` mode replaces the file atomically
//! (a reader sees the old or the new content, never a mix) and durably (file and directory synced).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde_json::{Value, json};

use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::paths::classify_file_access;
use crate::policy::{Assessment, FileAccess, RiskLevel};
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, run_blocking};
use crate::tools::documents;
use crate::tools::workspace::{MissingParents, Purpose, Workspace, check_path_lexically};

/// At most this many entries are listed by `list_dir`.
pub const LIST_DIR_MAX_ENTRIES: usize = 500;
/// Bytes of the start of a file inspected for NUL bytes to tell binary files from text.
const BINARY_SNIFF_BYTES: usize = 8192;
/// Characters of the new content shown in an approval prompt for `write_file`.
const DESCRIBE_PREVIEW_CHARS: usize = 300;
/// File tools touch one file or directory. The dispatcher stops waiting after this long; a call
/// stuck in the kernel (a hung network file system) cannot be interrupted and keeps its thread.
const FILE_TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// The risk of touching `path`, from the text alone.
///
/// The risk of touching `path`: the classifier's verdict (inside the workspace L0 read / L1 write,
/// sensitive names escalated, outside L3), and L3 for anything confinement refuses outright.
fn assess_path(path: &str, purpose: Purpose, workspace_root: &Path) -> Assessment {
    if let Err(error) = check_path_lexically(workspace_root, path) {
        return Assessment::new(RiskLevel::L3, error.to_string());
    }
    let access = match purpose {
        Purpose::Read => FileAccess::Read,
        Purpose::Write => FileAccess::Write,
    };
    classify_file_access(path, access, workspace_root)
}

fn path_argument<'a>(tool: &'a str, args: &'a Value, allowed: &[&str]) -> Option<&'a str> {
    Args::parse(tool, args, allowed)
        .ok()
        .and_then(|args| args.optional_str("path").ok().flatten())
}

fn open_workspace(ctx: &ToolContext) -> Result<Workspace, ToolError> {
    Workspace::new(&ctx.workspace).map_err(|error| ToolError::Failed(error.to_string()))
}

// ---------------------------------------------------------------------------------------------
// read_file

/// `read_file`: the text of one file, limited to `settings.read_max_bytes`.
pub struct ReadFileTool;

const READ_FILE_FIELDS: &[&str] = &["path", "offset"];

impl Tool for ReadFileTool {
    fn name(&self) -> &str {
        "read_file"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".to_string(),
            description: "Read a text file from your workspace (a PDF is read as its extracted \
                          text). Long files are truncated; the result then says which offset to \
                          pass to continue. Use list_dir for directories."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the workspace, e.g. `notes/todo.md`."
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Byte offset to start reading at (default 0)."
                    }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        match path_argument("read_file", args, READ_FILE_FIELDS) {
            Some(path) => assess_path(path, Purpose::Read, &ctx.workspace),
            None => Assessment::new(RiskLevel::L0, "invalid arguments; the call will fail"),
        }
    }

    fn describe_call(&self, args: &Value) -> String {
        match path_argument("read_file", args, READ_FILE_FIELDS) {
            Some(path) => format!("read_file: {path}"),
            None => "read_file: (invalid arguments)".to_string(),
        }
    }

    fn target(&self, args: &Value) -> String {
        path_argument("read_file", args, READ_FILE_FIELDS)
            .unwrap_or_default()
            .to_string()
    }

    fn timeout(&self) -> Duration {
        FILE_TOOL_TIMEOUT
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("read_file", &args, READ_FILE_FIELDS)?;
            let path = parsed.required_str("path")?.to_string();
            let offset = parsed.optional_u64("offset")?.unwrap_or(0);
            let max_bytes = ctx.settings.read_max_bytes;
            let workspace = open_workspace(ctx)?;
            run_blocking(ctx, move || read_text(&workspace, &path, offset, max_bytes)).await
        })
    }
}

/// Reads `path` as text from `offset` on, at most `max_bytes` of it; a PDF as its extracted text,
/// another binary file as a line naming its kind.
fn read_text(
    workspace: &Workspace,
    path: &str,
    offset: u64,
    max_bytes: u64,
) -> Result<ToolOutput, ToolError> {
    let resolved = workspace.resolve(path, Purpose::Read)?;
    let shown = workspace.display(&resolved);
    let failed = |error: io::Error| ToolError::Failed(format!("`{shown}`: {error}"));
    let (mut file, size) = open_regular_file(workspace, &resolved, &shown)?;
    // PDFs are told by their first bytes (whatever the offset asked for), and read as their text;
    // their `offset` counts that text, which can be longer than the file, so the file's size
    // bounds it only after this.
    let mut head = Vec::new();
    (&mut file)
        .take(1024)
        .read_to_end(&mut head)
        .map_err(failed)?;
    if documents::looks_like_pdf(&shown, &head)
        && let Some(output) = documents::read_pdf(&mut file, &shown, size, offset, max_bytes)?
    {
        return Ok(output);
    }
    if offset > size {
        return Err(ToolError::InvalidArguments(format!(
            "read_file: `offset` {offset} is past the end of `{shown}` ({size} bytes)"
        )));
    }
    let (bytes, truncated) = read_window(&mut file, offset, max_bytes).map_err(failed)?;
    let sniffed = &bytes[..bytes.len().min(BINARY_SNIFF_BYTES)];
    if sniffed.contains(&0) {
        let kind = documents::binary_kind(&shown, &head);
        return Ok(ToolOutput::ok(format!(
            "`{shown}` is a binary file ({kind}, {size} bytes); read_file can't read it as text (it reads text files and extracts the text of PDFs)"
        )));
    }
    Ok(text_output(bytes, offset, size, truncated))
}

/// Opens `resolved` for reading and returns it with its size; a missing file, a directory and
/// anything that is not a regular file are explained instead.
fn open_regular_file(
    workspace: &Workspace,
    resolved: &Path,
    shown: &str,
) -> Result<(File, u64), ToolError> {
    let file = match workspace.open_read(resolved) {
        Ok(file) => file,
        Err(error) if error.io_kind() == Some(io::ErrorKind::NotFound) => {
            return Err(ToolError::Failed(format!(
                "`{shown}` does not exist; use list_dir to see what is there"
            )));
        }
        Err(error) => return Err(error.into()),
    };
    let metadata = file
        .metadata()
        .map_err(|error| ToolError::Failed(format!("`{shown}`: {error}")))?;
    if metadata.is_dir() {
        return Err(ToolError::Failed(format!(
            "`{shown}` is a directory; use list_dir to see its entries"
        )));
    }
    if !metadata.is_file() {
        return Err(ToolError::Refused(format!(
            "`{shown}` is not a regular file (a FIFO, socket or device); read_file only reads files"
        )));
    }
    Ok((file, metadata.len()))
}

/// Reads at most `max_bytes` from `offset` on, never ending inside a character; true when the
/// file goes on after what was read.
fn read_window(file: &mut File, offset: u64, max_bytes: u64) -> io::Result<(Vec<u8>, bool)> {
    file.seek(SeekFrom::Start(offset))?;
    // Read one byte more than allowed to learn whether the file goes on (it may have grown since
    // the size was taken).
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    let truncated = bytes.len() as u64 > max_bytes;
    if truncated {
        bytes.truncate(max_bytes as usize);
        // Do not cut a character in two: the rest of it is read with the next offset.
        let incomplete = incomplete_utf8_suffix(&bytes);
        bytes.truncate(bytes.len() - incomplete);
    }
    Ok((bytes, truncated))
}

/// The text read from `offset` on, followed by notes on invalid UTF-8 and on where to continue;
/// a line saying so when there was nothing to read.
fn text_output(bytes: Vec<u8>, offset: u64, size: u64, truncated: bool) -> ToolOutput {
    let end = offset + bytes.len() as u64;
    let mut notes = Vec::new();
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            let first_invalid = offset + error.utf8_error().valid_up_to() as u64;
            notes.push(format!(
                "[the file is not valid UTF-8 (first invalid byte at offset {first_invalid}); \
                 invalid bytes are shown as \u{FFFD}]"
            ));
            String::from_utf8_lossy(error.as_bytes()).into_owned()
        }
    };
    if truncated {
        notes.push(format!(
            "[truncated: showing bytes {offset}..{end} of {size}; call read_file with offset={end} to continue]"
        ));
    }
    if text.is_empty() && !truncated {
        let what = if size == 0 {
            "(empty file)".to_string()
        } else {
            format!("(nothing after offset {offset}; the file has {size} bytes)")
        };
        return ToolOutput::ok(what);
    }
    let mut output = text;
    for note in notes {
        output.push_str("\n\n");
        output.push_str(&note);
    }
    ToolOutput::ok(output)
}

/// The length of an incomplete UTF-8 sequence at the end of `bytes` (0 to 3).
fn incomplete_utf8_suffix(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: keep looking for the lead byte
        }
        let needed = match byte {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0, // not a lead byte: invalid anyway, lossy decoding handles it
        };
        return if needed > back { back } else { 0 };
    }
    0
}

// ---------------------------------------------------------------------------------------------
// write_file

/// `write_file`: create, overwrite (atomically) or append to a text file.
pub struct WriteFileTool;

const WRITE_FILE_FIELDS: &[&str] = &["path", "content", "mode"];
const WRITE_MODES: &[&str] = &["create", "overwrite", "append"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteMode {
    Create,
    Overwrite,
    Append,
}

impl WriteMode {
    fn parse(text: &str) -> WriteMode {
        match text {
            "overwrite" => WriteMode::Overwrite,
            "append" => WriteMode::Append,
            _ => WriteMode::Create,
        }
    }
}

impl Tool for WriteFileTool {
    fn name(&self) -> &str {
        "write_file"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file".to_string(),
            description: "Write a text file in your workspace. mode `create` (default) fails if \
                          the file exists; `overwrite` replaces it; `append` adds to its end. \
                          Missing parent directories are created."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the workspace, e.g. `notes/todo.md`."
                    },
                    "content": {
                        "type": "string",
                        "description": "The text to write."
                    },
                    "mode": {
                        "type": "string",
                        "enum": WRITE_MODES,
                        "default": "create",
                        "description": "create | overwrite | append"
                    }
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Write
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        match path_argument("write_file", args, WRITE_FILE_FIELDS) {
            Some(path) => assess_path(path, Purpose::Write, &ctx.workspace),
            None => Assessment::new(RiskLevel::L1, "invalid arguments; the call will fail"),
        }
    }

    fn describe_call(&self, args: &Value) -> String {
        let Ok(parsed) = Args::parse("write_file", args, WRITE_FILE_FIELDS) else {
            return "write_file: (invalid arguments)".to_string();
        };
        let path = parsed.optional_str("path").ok().flatten().unwrap_or("?");
        let mode = parsed.choice("mode", WRITE_MODES, "create").unwrap_or("?");
        let content = parsed.optional_str("content").ok().flatten().unwrap_or("");
        let preview: String = content.chars().take(DESCRIBE_PREVIEW_CHARS).collect();
        let ellipsis = if preview.len() < content.len() {
            "…"
        } else {
            ""
        };
        format!(
            "write_file ({mode}): {path}, {} bytes:\n{preview}{ellipsis}",
            content.len()
        )
    }

    fn target(&self, args: &Value) -> String {
        path_argument("write_file", args, WRITE_FILE_FIELDS)
            .unwrap_or_default()
            .to_string()
    }

    fn timeout(&self) -> Duration {
        FILE_TOOL_TIMEOUT
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("write_file", &args, WRITE_FILE_FIELDS)?;
            let path = parsed.required_str("path")?.to_string();
            let content = parsed.required_str("content")?.to_string();
            let mode = WriteMode::parse(parsed.choice("mode", WRITE_MODES, "create")?);
            let workspace = open_workspace(ctx)?;
            run_blocking(ctx, move || write_text(&workspace, &path, &content, mode)).await
        })
    }
}

fn write_text(
    workspace: &Workspace,
    path: &str,
    content: &str,
    mode: WriteMode,
) -> Result<ToolOutput, ToolError> {
    let resolved = workspace.resolve(path, Purpose::Write)?;
    let shown = workspace.display(&resolved);
    let (directory, name) = workspace.open_parent(&resolved, MissingParents::Create)?;
    let existing = stat_at(&directory, &name);
    if let Some(status) = &existing
        && file_kind(status) == SFlag::S_IFDIR
    {
        return Err(ToolError::Failed(format!(
            "`{shown}` is a directory; name a file inside it"
        )));
    }
    let failed = |error: io::Error| ToolError::Failed(format!("`{shown}`: {error}"));
    match mode {
        WriteMode::Create => {
            let flags = OFlag::O_WRONLY
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC;
            let descriptor = match openat(&directory, name.as_os_str(), flags, new_file_mode()) {
                Ok(descriptor) => descriptor,
                Err(Errno::EEXIST) => {
                    return Err(ToolError::Failed(format!(
                        "`{shown}` already exists; use mode \"overwrite\" to replace it or \"append\" to add to it"
                    )));
                }
                Err(errno) => {
                    return Err(workspace
                        .open_error(&resolved, &directory, &name, errno)
                        .into());
                }
            };
            let mut file = File::from(descriptor);
            if let Err(error) = write_and_sync(&mut file, content) {
                // Leave no half-written new file behind.
                let _ = unlinkat(&directory, name.as_os_str(), UnlinkatFlags::NoRemoveDir);
                return Err(failed(error));
            }
            sync_directory(&directory).map_err(failed)?;
            Ok(ToolOutput::ok(format!(
                "created `{shown}` ({} bytes)",
                content.len()
            )))
        }
        WriteMode::Overwrite => {
            let previous_size = existing.as_ref().map(|status| status.st_size);
            let permissions = existing
                .as_ref()
                .filter(|status| file_kind(status) == SFlag::S_IFREG)
                .map(|status| Mode::from_bits_truncate(status.st_mode & 0o7777));
            replace_atomically(
                workspace,
                &resolved,
                &directory,
                &name,
                content,
                permissions,
            )?;
            let was = match previous_size {
                Some(size) => format!("; it had {size} bytes"),
                None => "; it did not exist before".to_string(),
            };
            Ok(ToolOutput::ok(format!(
                "overwrote `{shown}` ({} bytes{was})",
                content.len()
            )))
        }
        WriteMode::Append => {
            // Non-blocking so that a FIFO without a reader fails instead of hanging.
            let flags = OFlag::O_WRONLY
                | OFlag::O_APPEND
                | OFlag::O_CREAT
                | OFlag::O_NOFOLLOW
                | OFlag::O_NONBLOCK
                | OFlag::O_CLOEXEC;
            let descriptor = openat(&directory, name.as_os_str(), flags, new_file_mode())
                .map_err(|errno| workspace.open_error(&resolved, &directory, &name, errno))?;
            let mut file = File::from(descriptor);
            let metadata = file.metadata().map_err(failed)?;
            if !metadata.is_file() {
                return Err(ToolError::Refused(format!(
                    "`{shown}` is not a regular file; write_file only writes files"
                )));
            }
            write_and_sync(&mut file, content).map_err(failed)?;
            sync_directory(&directory).map_err(failed)?;
            let size = file.metadata().map(|metadata| metadata.len()).unwrap_or(0);
            Ok(ToolOutput::ok(format!(
                "appended {} bytes to `{shown}` (now {size} bytes)",
                content.len()
            )))
        }
    }
}

/// Writes `content` to a fresh temporary file next to the target, syncs it, and renames it over
/// the target: readers see the old file or the new one, and a crash leaves one of them intact.
fn replace_atomically(
    workspace: &Workspace,
    resolved: &Path,
    directory: &OwnedFd,
    name: &OsStr,
    content: &str,
    permissions: Option<Mode>,
) -> Result<(), ToolError> {
    let shown = workspace.display(resolved);
    let failed = |error: io::Error| ToolError::Failed(format!("`{shown}`: {error}"));
    // A fixed-length name (a long target name plus a suffix could exceed NAME_MAX); the leading
    // dot keeps it out of casual listings should a crash leave it behind.
    let temporary = format!(".clawvisor-write-{:016x}.tmp", rand::random::<u64>());
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let descriptor = openat(directory, temporary.as_str(), flags, new_file_mode())
        .map_err(|errno| failed(io::Error::from(errno)))?;
    let mut file = File::from(descriptor);
    let written = permissions
        .map_or(Ok(()), |mode| fchmod(&file, mode).map_err(io::Error::from))
        .and_then(|()| write_and_sync(&mut file, content))
        .and_then(|()| {
            renameat(directory, temporary.as_str(), directory, name).map_err(io::Error::from)
        });
    if let Err(error) = written {
        let _ = unlinkat(directory, temporary.as_str(), UnlinkatFlags::NoRemoveDir);
        return Err(failed(error));
    }
    sync_directory(directory).map_err(failed)
}

fn write_and_sync(file: &mut File, content: &str) -> io::Result<()> {
    file.write_all(content.as_bytes())?;
    file.sync_all()
}

/// Makes a directory entry change (create, rename) durable.
fn sync_directory(directory: &OwnedFd) -> io::Result<()> {
    nix::unistd::fsync(directory).map_err(io::Error::from)
}

fn new_file_mode() -> Mode {
    Mode::from_bits_truncate(0o644)
}

fn stat_at(directory: &OwnedFd, name: &OsStr) -> Option<nix::sys::stat::FileStat> {
    fstatat(directory, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()
}

fn file_kind(status: &nix::sys::stat::FileStat) -> SFlag {
    SFlag::from_bits_truncate(status.st_mode) & SFlag::S_IFMT
}

// ---------------------------------------------------------------------------------------------
// list_dir

/// `list_dir`: the entries of a directory, sorted by name, with kind and size.
pub struct ListDirTool;

const LIST_DIR_FIELDS: &[&str] = &["path"];

impl Tool for ListDirTool {
    fn name(&self) -> &str {
        "list_dir"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".to_string(),
            description: format!(
                "List a directory of your workspace: each entry with its kind and size, sorted by \
                 name, at most {LIST_DIR_MAX_ENTRIES}. Directories end with `/`."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Directory relative to the workspace (default: the workspace itself)."
                    }
                },
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        let path = path_argument("list_dir", args, LIST_DIR_FIELDS).unwrap_or(".");
        assess_path(path, Purpose::Read, &ctx.workspace)
    }

    fn describe_call(&self, args: &Value) -> String {
        let path = path_argument("list_dir", args, LIST_DIR_FIELDS).unwrap_or(".");
        format!("list_dir: {path}")
    }

    fn target(&self, args: &Value) -> String {
        path_argument("list_dir", args, LIST_DIR_FIELDS)
            .unwrap_or(".")
            .to_string()
    }

    fn timeout(&self) -> Duration {
        FILE_TOOL_TIMEOUT
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("list_dir", &args, LIST_DIR_FIELDS)?;
            let path = parsed.optional_str("path")?.unwrap_or(".").to_string();
            let workspace = open_workspace(ctx)?;
            run_blocking(ctx, move || list_entries(&workspace, &path)).await
        })
    }
}

fn list_entries(workspace: &Workspace, path: &str) -> Result<ToolOutput, ToolError> {
    let resolved: PathBuf = workspace.resolve(path, Purpose::Read)?;
    let shown = workspace.display(&resolved);
    let directory = match workspace.open_dir(&resolved) {
        Ok(directory) => directory,
        Err(error) if error.io_kind() == Some(io::ErrorKind::NotADirectory) => {
            return Err(ToolError::Failed(format!(
                "`{shown}` is a file, not a directory; use read_file to read it"
            )));
        }
        Err(error) if error.io_kind() == Some(io::ErrorKind::NotFound) => {
            return Err(ToolError::Failed(format!("`{shown}` does not exist")));
        }
        Err(error) => return Err(error.into()),
    };
    let failed = |error: io::Error| ToolError::Failed(format!("`{shown}`: {error}"));
    let for_iteration = directory.try_clone().map_err(failed)?;
    let mut listing =
        nix::dir::Dir::from_fd(for_iteration).map_err(|errno| failed(errno.into()))?;
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    for entry in listing.iter() {
        let entry = entry.map_err(|errno| failed(errno.into()))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        names.push(OsStr::from_bytes(name).to_os_string());
    }
    names.sort();
    let total = names.len();
    if total == 0 {
        return Ok(ToolOutput::ok(format!("`{shown}` is empty")));
    }
    let mut lines = Vec::with_capacity(total.min(LIST_DIR_MAX_ENTRIES) + 2);
    lines.push(format!(
        "`{shown}`: {total} entr{}",
        if total == 1 { "y" } else { "ies" }
    ));
    for name in names.iter().take(LIST_DIR_MAX_ENTRIES) {
        lines.push(describe_entry(&directory, name));
    }
    if total > LIST_DIR_MAX_ENTRIES {
        lines.push(format!(
            "[{} more entries not shown; list a subdirectory or use a narrower path]",
            total - LIST_DIR_MAX_ENTRIES
        ));
    }
    Ok(ToolOutput::ok(lines.join("\n")))
}

fn describe_entry(directory: &OwnedFd, name: &OsStr) -> String {
    let shown = name.to_string_lossy();
    let Some(status) = stat_at(directory, name) else {
        // Removed between listing and stat, or unreadable.
        return format!("{shown}  (unknown)");
    };
    match file_kind(&status) {
        SFlag::S_IFDIR => format!("{shown}/  (directory)"),
        SFlag::S_IFREG => format!("{shown}  (file, {} bytes)", status.st_size),
        SFlag::S_IFLNK => {
            let target = nix::fcntl::readlinkat(directory, name)
                .map(|target| target.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "?".to_string());
            format!("{shown} -> {target}  (symlink)")
        }
        _ => format!("{shown}  (other: FIFO, socket or device)"),
    }
}
