//! `send_file`: a workspace file to the run's own Telegram chat (in a forum, its topic) — a photo
//! (JPEG, PNG or WebP, by content) as a photo, anything else as a document (or an OGG/Opus file
//! as a voice message when asked).
//!
//! The file is read through `Workspace::open_read` (confined, no symlink followed) and copied
//! into the daemon's spool (`store::outbox::spool_dir`, inside the data directory) before its
//! outbox row is written, so that what the agent sent is what arrives even if the workspace file
//! changes or goes, and a crash between the row and Telegram's answer sends it again (at most
//! once more) instead of losing it. Telegram's limits are checked first, with an error naming the
//! size and the limit: 10 MB for a photo, 50 MB for a document or voice message.
//!
//! Policy: speaking in the run's own conversation is judged like a read (L0, or the path's own
//! read risk when it names something sensitive); there is no argument naming another chat. A run
//! outside Telegram (terminal, Studio, gateway) cannot carry a file: the call says so and where
//! the file is, rather than failing silently.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::domain::{ChatKind, OutEvent, Outbound};
use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::paths::classify_file_access;
use crate::policy::{Assessment, FileAccess, RiskLevel};
use crate::store::outbox::{self, OutboxFile, OutboxFileKind};
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, run_blocking};
use crate::tools::workspace::{Purpose, Workspace, check_path_lexically};

/// Telegram's limit for photos sent by bots.
pub const PHOTO_LIMIT_BYTES: u64 = 10 * 1024 * 1024;
/// Telegram's limit for documents (and voice messages) uploaded by bots.
pub const DOCUMENT_LIMIT_BYTES: u64 = 50 * 1024 * 1024;
/// Telegram's limit on a caption, in characters (after formatting; checked on the raw text,
/// which is never shorter).
pub const CAPTION_LIMIT_CHARS: usize = 1024;

const FIELDS: &[&str] = &["path", "caption", "as"];

/// How a file is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendAs {
    Photo,
    Document,
    Voice,
}

/// What a file's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// JPEG, PNG or WebP: what Telegram takes as a photo.
    Image,
    /// An Ogg stream (a voice message's container).
    Ogg,
    Other,
}

/// Recognizes JPEG, PNG, WebP and Ogg by their magic bytes.
pub fn sniff(head: &[u8]) -> Sniffed {
    if head.starts_with(&[0xFF, 0xD8, 0xFF])
        || head.starts_with(b"\x89PNG\r\n\x1a\n")
        || (head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP")
    {
        Sniffed::Image
    } else if head.starts_with(b"OggS") {
        Sniffed::Ogg
    } else {
        Sniffed::Other
    }
}

/// Decides how a file of `bytes` with this `name` and these first bytes is sent, given the
/// caller's `requested` kind (`None`: by extension and content). An error names what is wrong and
/// what to do; every size error names the size and the limit.
pub fn choose_kind(
    name: &str,
    head: &[u8],
    bytes: u64,
    requested: Option<SendAs>,
) -> Result<SendAs, String> {
    if bytes == 0 {
        return Err(format!(
            "`{name}` is empty; Telegram does not send empty files"
        ));
    }
    let extension = Path::new(name)
        .extension()
        .map(|extension| extension.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let image_extension = matches!(extension.as_str(), "jpg" | "jpeg" | "png" | "webp");
    let sniffed = sniff(head);
    let kind = match requested {
        Some(kind) => kind,
        None if image_extension && sniffed == Sniffed::Image && bytes <= PHOTO_LIMIT_BYTES => {
            SendAs::Photo
        }
        None => SendAs::Document,
    };
    match kind {
        _ if bytes > DOCUMENT_LIMIT_BYTES => Err(format!(
            "`{name}` is {} and Telegram lets bots send files up to {}; make it smaller (compress or split it)",
            human_size(bytes),
            human_size(DOCUMENT_LIMIT_BYTES)
        )),
        SendAs::Photo if sniffed != Sniffed::Image => Err(format!(
            "`{name}` is not a JPEG, PNG or WebP image (by its content), so it cannot go as a photo; send it with as = \"document\""
        )),
        SendAs::Photo if bytes > PHOTO_LIMIT_BYTES => Err(format!(
            "`{name}` is {} and Telegram takes photos up to {}; send it with as = \"document\" (up to {})",
            human_size(bytes),
            human_size(PHOTO_LIMIT_BYTES),
            human_size(DOCUMENT_LIMIT_BYTES)
        )),
        SendAs::Voice if sniffed != Sniffed::Ogg => Err(format!(
            "`{name}` is not an OGG/Opus file, which a voice message must be; send it with as = \"document\""
        )),
        kind => Ok(kind),
    }
}

/// `12.3 MB` (MB = 1024 × 1024 bytes, as Telegram counts).
pub fn human_size(bytes: u64) -> String {
    let megabytes = bytes as f64 / (1024.0 * 1024.0);
    if megabytes >= 1.0 {
        format!("{megabytes:.1} MB")
    } else {
        format!("{bytes} bytes")
    }
}

/// `send_file`, the same for every agent.
pub struct SendFileTool;

fn path_argument(args: &Value) -> Option<&str> {
    Args::parse("send_file", args, FIELDS)
        .ok()
        .and_then(|args| args.optional_str("path").ok().flatten())
}

impl Tool for SendFileTool {
    fn name(&self) -> &str {
        "send_file"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send_file".to_string(),
            description: "Send a file from your workspace to this conversation: pictures \
                          (JPEG, PNG, WebP up to 10 MB) arrive as photos, anything else as a \
                          document (up to 50 MB). Your final answer is sent anyway; do not \
                          repeat the file's content in it."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the workspace, e.g. `reports/march.pdf`."
                    },
                    "caption": {
                        "type": "string",
                        "description": "A short caption shown with the file (Markdown, up to 1024 characters)."
                    },
                    "as": {
                        "type": "string",
                        "enum": ["photo", "document", "voice"],
                        "description": "How to send it (default: photo for pictures, else document; voice for an OGG/Opus recording)."
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
        let Some(path) = path_argument(args) else {
            return Assessment::new(RiskLevel::L0, "invalid arguments; the call will fail");
        };
        if let Err(error) = check_path_lexically(&ctx.workspace, path) {
            return Assessment::new(RiskLevel::L3, error.to_string());
        }
        // Sending shows the file to the people of this conversation: as risky as reading it.
        let read = classify_file_access(path, FileAccess::Read, &ctx.workspace);
        if read.level > RiskLevel::L0 {
            return read;
        }
        Assessment::new(
            RiskLevel::L0,
            "sends a workspace file to the run's own conversation",
        )
    }

    fn describe_call(&self, args: &Value) -> String {
        match path_argument(args) {
            Some(path) => format!("send_file: {path}"),
            None => "send_file: (invalid arguments)".to_string(),
        }
    }

    fn target(&self, args: &Value) -> String {
        path_argument(args).unwrap_or_default().to_string()
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(60)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("send_file", &args, FIELDS)?;
            let path = parsed.required_str("path")?.to_string();
            let caption = parsed
                .optional_str("caption")?
                .unwrap_or("")
                .trim()
                .to_string();
            let requested = match parsed.optional_str("as")? {
                None => None,
                Some(_) => Some(
                    match parsed.choice("as", &["photo", "document", "voice"], "document")? {
                        "photo" => SendAs::Photo,
                        "voice" => SendAs::Voice,
                        _ => SendAs::Document,
                    },
                ),
            };
            if caption.chars().count() > CAPTION_LIMIT_CHARS {
                return Err(ToolError::InvalidArguments(format!(
                    "send_file: `caption` is longer than Telegram's {CAPTION_LIMIT_CHARS} characters; shorten it or say the rest in your answer"
                )));
            }
            let workspace = Workspace::new(&ctx.workspace)
                .map_err(|error| ToolError::Failed(error.to_string()))?;
            match ctx.chat.kind() {
                ChatKind::Telegram | ChatKind::WhatsApp | ChatKind::Signal => {}
                ChatKind::Local => {
                    let resolved = workspace.resolve(&path, Purpose::Read)?;
                    return Ok(ToolOutput::error(format!(
                        "Not sent: this conversation ({}) cannot carry files; only Telegram chats can. \
                         Tell the user the file is `{}` in your workspace.",
                        ctx.chat,
                        workspace.display(&resolved)
                    )));
                }
                ChatKind::Schedule | ChatKind::Handoff | ChatKind::Trigger => {
                    return Err(ToolError::Refused(
                        "this run is not in a conversation with a person, so there is no chat to send a file to".into(),
                    ));
                }
            }
            let spool = outbox::spool_dir(ctx.store.path());
            let copied = run_blocking(ctx, move || {
                copy_to_spool(&workspace, &path, requested, &spool)
            })
            .await?;
            queue_and_deliver(ctx, caption, copied.file.clone(), "file").await?;
            Ok(ToolOutput::ok(format!(
                "Sent `{}` ({}) as a {}.",
                copied.shown,
                human_size(copied.bytes),
                copied.file.kind
            )))
        })
    }
}

/// Queues a spooled `file` with `caption` for the run's chat (its outbox row) and hands it to the
/// chat's channel; a file that cannot be queued is removed from the spool. `what` names it in the
/// error. Shared by `send_file` and the browser's screenshots.
pub(crate) async fn queue_and_deliver(
    ctx: &ToolContext,
    caption: String,
    file: OutboxFile,
    what: &str,
) -> Result<i64, ToolError> {
    let (agent, chat, stored_caption) = (
        ctx.agent.clone(),
        ctx.chat.as_str().to_string(),
        caption.clone(),
    );
    let spooled = file.path.clone();
    let queued = ctx
        .store
        .write(move |conn| {
            outbox::enqueue_file(
                conn,
                &agent,
                &chat,
                &stored_caption,
                &file,
                crate::clock::now_ms(),
            )
        })
        .await;
    let id = match queued {
        Ok(id) => id,
        Err(error) => {
            let _ = std::fs::remove_file(&spooled);
            return Err(ToolError::Failed(format!(
                "could not queue the {what}: {error}"
            )));
        }
    };
    crate::channels::deliver(
        &ctx.registry,
        Outbound {
            agent: ctx.agent.clone(),
            chat: ctx.chat.clone(),
            run_id: None,
            correlation: None,
            event: OutEvent::Final {
                text: caption,
                outbox_id: Some(id),
            },
        },
    );
    Ok(id)
}

/// A file copied into the spool, ready for its outbox row.
struct Copied {
    file: OutboxFile,
    /// The path as the workspace shows it.
    shown: String,
    bytes: u64,
}

/// Opens `path` in the workspace (confined), checks it against Telegram's limits, and copies it
/// into `spool` under a fresh name. Nothing is copied when a check fails.
fn copy_to_spool(
    workspace: &Workspace,
    path: &str,
    requested: Option<SendAs>,
    spool: &Path,
) -> Result<Copied, ToolError> {
    let resolved = workspace.resolve(path, Purpose::Read)?;
    let shown = workspace.display(&resolved);
    let mut file = match workspace.open_read(&resolved) {
        Ok(file) => file,
        Err(error) if error.io_kind() == Some(std::io::ErrorKind::NotFound) => {
            return Err(ToolError::Failed(format!(
                "`{shown}` does not exist; use list_dir to see what is there"
            )));
        }
        Err(error) => return Err(error.into()),
    };
    let metadata = file
        .metadata()
        .map_err(|error| ToolError::Failed(format!("`{shown}`: {error}")))?;
    if !metadata.is_file() {
        return Err(ToolError::Refused(format!(
            "`{shown}` is not a regular file; send_file sends files"
        )));
    }
    let size = metadata.len();
    let name = resolved
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_string());
    let mut head = [0u8; 16];
    let mut filled = 0;
    while filled < head.len() {
        match file.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) => return Err(ToolError::Failed(format!("`{shown}`: {error}"))),
        }
    }
    let kind = choose_kind(&name, &head[..filled], size, requested).map_err(ToolError::Failed)?;
    std::fs::create_dir_all(spool)
        .map_err(|error| ToolError::Failed(format!("cannot prepare the outbox spool: {error}")))?;
    let spool_name = format!("{:016x}-{}", rand::random::<u64>(), safe_name(&name));
    let target = spool.join(spool_name);
    let mut copy = || -> std::io::Result<u64> {
        use std::io::{Seek, SeekFrom, Write};
        file.seek(SeekFrom::Start(0))?;
        let mut output = std::fs::File::create_new(&target)?;
        // One byte more than the limit tells a file that grew since it was checked.
        let copied = std::io::copy(&mut (&mut file).take(DOCUMENT_LIMIT_BYTES + 1), &mut output)?;
        output.flush()?;
        output.sync_all()?;
        Ok(copied)
    };
    let copied = match copy() {
        Ok(copied) => copied,
        Err(error) => {
            let _ = std::fs::remove_file(&target);
            return Err(ToolError::Failed(format!(
                "could not copy `{shown}`: {error}"
            )));
        }
    };
    // The file may have changed between the checks and the copy: check what was copied.
    if let Err(problem) = choose_kind(&name, &head[..filled], copied, Some(kind)) {
        let _ = std::fs::remove_file(&target);
        return Err(ToolError::Failed(format!(
            "{problem} (it changed while it was being sent)"
        )));
    }
    let kind = match kind {
        SendAs::Photo => OutboxFileKind::Photo,
        SendAs::Document => OutboxFileKind::Document,
        SendAs::Voice => OutboxFileKind::Voice,
    };
    Ok(Copied {
        file: OutboxFile {
            path: target,
            kind,
            name,
        },
        shown,
        bytes: copied,
    })
}

/// A file name safe in the spool: ASCII letters, digits, `.`, `-`, `_`, at most 80 characters.
fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, b'J', b'F', b'I', b'F'];

    #[test]
    fn pictures_go_as_photos_and_the_rest_as_documents() {
        assert_eq!(choose_kind("cat.jpg", JPEG, 2_000, None), Ok(SendAs::Photo));
        assert_eq!(
            choose_kind("cat.JPEG", JPEG, 2_000, None),
            Ok(SendAs::Photo)
        );
        assert_eq!(
            choose_kind("report.pdf", b"%PDF-1.7", 2_000, None),
            Ok(SendAs::Document)
        );
        // An image extension over a file that is no image, and a big picture: documents.
        assert_eq!(
            choose_kind("fake.png", b"hello", 5, None),
            Ok(SendAs::Document)
        );
        assert_eq!(
            choose_kind("huge.jpg", JPEG, PHOTO_LIMIT_BYTES + 1, None),
            Ok(SendAs::Document)
        );
        assert_eq!(
            choose_kind("note.ogg", b"OggS\0\x02", 900, Some(SendAs::Voice)),
            Ok(SendAs::Voice)
        );
    }

    #[test]
    fn limits_are_refused_naming_the_size_and_the_limit() {
        let photo =
            choose_kind("huge.jpg", JPEG, PHOTO_LIMIT_BYTES + 1, Some(SendAs::Photo)).unwrap_err();
        assert!(
            photo.contains("10.0 MB") && photo.contains("as = \"document\""),
            "{photo}"
        );
        let document = choose_kind("video.mp4", b"....ftyp", 60 * 1024 * 1024, None).unwrap_err();
        assert!(
            document.contains("60.0 MB") && document.contains("50.0 MB"),
            "{document}"
        );
        assert!(
            choose_kind("empty.txt", b"", 0, None)
                .unwrap_err()
                .contains("empty")
        );
        assert!(
            choose_kind("notes.txt", b"hello", 5, Some(SendAs::Photo))
                .unwrap_err()
                .contains("not a JPEG")
        );
        assert!(
            choose_kind("notes.txt", b"hello", 5, Some(SendAs::Voice))
                .unwrap_err()
                .contains("OGG")
        );
    }
}
