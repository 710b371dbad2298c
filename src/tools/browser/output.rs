//! What a `browser` call answers: the outcome's sentence, the page, downloads, the snapshot
//! labelled as untrusted content; files (a screenshot, a PDF) saved in the workspace or a
//! screenshot sent to the chat as a photo.

use std::io::Write;
use std::path::Path;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;
use serde_json::Value;

use crate::browser::{Action, Outcome, PageInfo, UNTRUSTED_NOTE};
use crate::domain::ChatKind;
use crate::store::outbox::{self, OutboxFile, OutboxFileKind};
use crate::tool::{ToolContext, ToolError, ToolOutput, run_blocking};
use crate::tools::workspace::{MissingParents, Purpose, Workspace};

/// Where screenshots and PDFs kept in the workspace go.
pub const SAVED_DIR: &str = "browser";

/// Turns an outcome into the tool's output (saving or sending its file first).
pub(super) async fn finish(
    action: &Action,
    args: &Value,
    outcome: Outcome,
    _before: &PageInfo,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let mut lines = vec![outcome.summary.clone()];
    if !outcome.page.url.is_empty() {
        lines.push(format!(
            "Page: {} — {}",
            outcome.page.title.trim(),
            crate::secrets::redact(&outcome.page.url)
        ));
    }
    for download in &outcome.downloads {
        lines.push(format!(
            "Downloaded \"{}\" into your workspace as {}.",
            download.name,
            download.path.display()
        ));
    }
    if let Some(bytes) = outcome.file.clone() {
        lines.push(keep_file(action, args, bytes, &outcome.page, ctx).await?);
    }
    let mut text = lines.join("\n");
    if let Some(snapshot) = &outcome.snapshot {
        text.push_str("\n\n");
        text.push_str(UNTRUSTED_NOTE);
        text.push_str("\n---\n");
        text.push_str(if snapshot.text.is_empty() {
            "(the page shows no text)"
        } else {
            &snapshot.text
        });
        text.push_str("\n---");
        if snapshot.cut {
            text.push_str(
                "\n[The snapshot was cut at its size limit; the rest of the page is not shown.]",
            );
        }
    }
    Ok(ToolOutput::ok(text))
}

/// Saves a screenshot or PDF in the workspace, or sends a screenshot to the chat (`send`).
async fn keep_file(
    action: &Action,
    args: &Value,
    bytes: Vec<u8>,
    page: &PageInfo,
    ctx: &ToolContext,
) -> Result<String, ToolError> {
    let send = args.get("send").and_then(Value::as_bool).unwrap_or(false);
    if matches!(action, Action::Screenshot) && send {
        let caption = args
            .get("caption")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| page.title.clone());
        send_photo(ctx, bytes, &caption).await?;
        return Ok("Sent the screenshot to this chat as a photo.".into());
    }
    let extension = if matches!(action, Action::Pdf) {
        "pdf"
    } else {
        "png"
    };
    let stem = if matches!(action, Action::Pdf) {
        "page"
    } else {
        "screenshot"
    };
    let name = format!(
        "{stem}-{}.{extension}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    );
    let root = ctx.workspace.clone();
    let saved = run_blocking(ctx, move || {
        save_in_workspace(&root, SAVED_DIR, &name, &bytes)
    })
    .await?;
    Ok(format!("Saved it in your workspace as {saved}."))
}

/// Writes `bytes` as a new file `<dir>/<name>` in the workspace (confined, never through a
/// symlink, never over an existing file: a number is added). Returns the path as shown.
pub fn save_in_workspace(
    root: &Path,
    dir: &str,
    name: &str,
    bytes: &[u8],
) -> Result<String, ToolError> {
    let workspace = Workspace::new(root).map_err(|error| ToolError::Failed(error.to_string()))?;
    let parent = workspace.resolve(dir, Purpose::Write)?;
    let candidate = crate::browser::session::inbox_name(&parent, name);
    let resolved = workspace.resolve(&format!("{dir}/{candidate}"), Purpose::Write)?;
    let (directory, file_name) = workspace.open_parent(&resolved, MissingParents::Create)?;
    let shown = workspace.display(&resolved);
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let descriptor = openat(
        &directory,
        file_name.as_os_str(),
        flags,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(|errno| ToolError::Failed(format!("`{shown}`: {}", std::io::Error::from(errno))))?;
    let mut file = std::fs::File::from(descriptor);
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|error| ToolError::Failed(format!("`{shown}`: {error}")))?;
    Ok(shown)
}

/// Sends `png` to the run's own Telegram chat as a photo, through the outbox (spooled in the data
/// directory first, like `send_file`). Other conversations cannot carry photos: an error says so.
pub async fn send_photo(ctx: &ToolContext, png: Vec<u8>, caption: &str) -> Result<(), ToolError> {
    if ctx.chat.kind() != ChatKind::Telegram {
        return Err(ToolError::Refused(format!(
            "this conversation ({}) cannot carry photos; only Telegram chats can — save the screenshot instead (without send)",
            ctx.chat
        )));
    }
    let spool = outbox::spool_dir(ctx.store.path());
    let path = spool.join(format!("{:016x}-screenshot.png", rand::random::<u64>()));
    let target = path.clone();
    run_blocking(ctx, move || {
        std::fs::create_dir_all(&spool)
            .and_then(|()| std::fs::write(&target, &png))
            .map_err(|error| ToolError::Failed(format!("cannot spool the screenshot: {error}")))
    })
    .await?;
    let file = OutboxFile {
        path: path.clone(),
        kind: OutboxFileKind::Photo,
        name: "screenshot.png".into(),
    };
    let caption: String = crate::secrets::redact(caption)
        .chars()
        .take(crate::tools::send_file::CAPTION_LIMIT_CHARS)
        .collect();
    crate::tools::send_file::queue_and_deliver(ctx, caption, file, "screenshot").await?;
    Ok(())
}
