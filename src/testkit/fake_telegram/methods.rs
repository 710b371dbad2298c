//! The Bot API methods the fake server answers at once (everything but `getUpdates`, which
//! waits and lives with the server glue): each checks its parameters the way Telegram does,
//! answers with Telegram's error text, and records what a test may want to assert.

use std::time::Instant;

use serde_json::{Value, json};

use super::flood::Activity;
use super::forum::thread_param;
use super::html::{HtmlEntity, parse_html};
use super::state::{
    BotState, CallbackState, Directory, FileHandle, SentRecord, World, media_json, unix_now,
    without_reply,
};
use super::wire::{Params, Reply, UploadedFile};
use super::{
    AttachmentKind, BotCommandRecord, CallbackAnswer, ChatActionRecord, MAX_CAPTION_UTF16,
    MAX_MESSAGE_UTF16, SentAttachment, SentButton, SentEdit, SentMessage,
};

/// Callback data is at most 64 bytes on Telegram.
const MAX_CALLBACK_DATA_BYTES: usize = 64;
const NOT_MODIFIED_DESCRIPTION: &str = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message";
const CHAT_ACTIONS: &[&str] = &[
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
];

/// A text after `parse_mode` was applied.
pub(super) struct FormattedText {
    pub(super) visible: String,
    pub(super) entities: Vec<Value>,
    pub(super) utf16_len: usize,
}

pub(super) fn format_text(
    text: &str,
    parse_mode: Option<&str>,
    explicit_entities: Option<Value>,
) -> Result<FormattedText, Reply> {
    let mode = parse_mode.unwrap_or("").to_ascii_lowercase();
    match mode.as_str() {
        "" => Ok(FormattedText {
            visible: text.to_string(),
            entities: match explicit_entities {
                Some(Value::Array(entities)) => entities,
                _ => Vec::new(),
            },
            utf16_len: text.encode_utf16().count(),
        }),
        "html" => {
            let parsed = parse_html(text).map_err(|error| {
                Reply::bad_request(format!("Bad Request: can't parse entities: {error}"))
            })?;
            let utf16_len = parsed.utf16_len();
            Ok(FormattedText {
                entities: parsed.entities.iter().map(HtmlEntity::to_json).collect(),
                visible: parsed.text,
                utf16_len,
            })
        }
        // Not modelled: the raw text stands for the visible text.
        "markdown" | "markdownv2" => Ok(FormattedText {
            visible: text.to_string(),
            entities: Vec::new(),
            utf16_len: text.encode_utf16().count(),
        }),
        _ => Err(Reply::bad_request("Bad Request: unsupported parse_mode")),
    }
}

/// An inline keyboard as attached to a message (`None`: no keyboard) and as buttons.
struct Markup {
    json: Option<Value>,
    buttons: Vec<Vec<SentButton>>,
}

fn parse_markup(params: &Params) -> Result<Markup, Reply> {
    let none = Markup {
        json: None,
        buttons: Vec::new(),
    };
    let markup = params.json("reply_markup").map_err(Reply::bad_request)?;
    // Reply keyboards, keyboard removal and force-reply are accepted but not part of a Message.
    let Some(rows) = markup
        .as_ref()
        .and_then(|markup| markup.get("inline_keyboard"))
    else {
        return Ok(none);
    };
    let Some(rows) = rows.as_array() else {
        return Err(Reply::bad_request(
            "Bad Request: field \"inline_keyboard\" of the InlineKeyboardMarkup must be an Array",
        ));
    };
    let mut buttons = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(row) = row.as_array() else {
            return Err(Reply::bad_request(
                "Bad Request: field \"inline_keyboard\" of the InlineKeyboardMarkup must be an Array of Arrays",
            ));
        };
        let mut parsed_row = Vec::with_capacity(row.len());
        for button in row {
            let text = button.get("text").and_then(Value::as_str).unwrap_or("");
            if text.is_empty() {
                return Err(Reply::bad_request("Bad Request: BUTTON_TEXT_INVALID"));
            }
            let callback_data = button.get("callback_data").and_then(Value::as_str);
            let url = button.get("url").and_then(Value::as_str);
            if callback_data
                .is_some_and(|data| data.is_empty() || data.len() > MAX_CALLBACK_DATA_BYTES)
            {
                return Err(Reply::bad_request("Bad Request: BUTTON_DATA_INVALID"));
            }
            let has_other_action = [
                "login_url",
                "switch_inline_query",
                "switch_inline_query_current_chat",
                "switch_inline_query_chosen_chat",
                "web_app",
                "callback_game",
                "pay",
                "copy_text",
            ]
            .iter()
            .any(|field| button.get(*field).is_some());
            if callback_data.is_none() && url.is_none() && !has_other_action {
                return Err(Reply::bad_request(
                    "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard",
                ));
            }
            parsed_row.push(SentButton {
                text: text.to_string(),
                callback_data: callback_data.map(str::to_string),
                url: url.map(str::to_string),
            });
        }
        buttons.push(parsed_row);
    }
    if buttons.iter().all(Vec::is_empty) {
        return Ok(none);
    }
    Ok(Markup {
        json: Some(json!({"inline_keyboard": rows})),
        buttons,
    })
}

pub(super) fn chat_id_param(params: &Params) -> Result<i64, Reply> {
    match params.integer("chat_id") {
        Ok(Some(chat_id)) => Ok(chat_id),
        Ok(None) => Err(Reply::bad_request("Bad Request: chat_id is empty")),
        // `@channelusername` and other strings: channels are not modelled.
        Err(_) => Err(Reply::bad_request("Bad Request: chat not found")),
    }
}

fn message_id_param(params: &Params, missing: &str) -> Result<i32, Reply> {
    match params.integer("message_id") {
        Ok(Some(message_id)) => {
            i32::try_from(message_id).map_err(|_| Reply::bad_request(missing.to_string()))
        }
        Ok(None) => Err(Reply::bad_request(
            "Bad Request: message identifier is not specified",
        )),
        Err(description) => Err(Reply::bad_request(description)),
    }
}

impl World {
    /// Runs a method that answers at once (everything but getUpdates).
    pub(super) fn call(
        &mut self,
        bot: usize,
        method_key: &str,
        params: &Params,
        started: Instant,
    ) -> Reply {
        let World {
            bots, directory, ..
        } = self;
        let state = &mut bots[bot];
        let outcome = match method_key {
            "getme" => Ok(get_me(state)),
            "logout" | "close" => Ok(Value::Bool(true)),
            "deletewebhook" => {
                if params.flag("drop_pending_updates") {
                    state.updates.clear();
                }
                Ok(Value::Bool(true))
            }
            "getwebhookinfo" => Ok(json!({
                "url": "",
                "has_custom_certificate": false,
                "pending_update_count": state.updates.len(),
            })),
            "sendmessage" => send_message(state, directory, params, started),
            "senddocument" => send_media(state, directory, params, started, AttachmentKind::Document),
            "sendphoto" => send_media(state, directory, params, started, AttachmentKind::Photo),
            "sendvoice" => send_media(state, directory, params, started, AttachmentKind::Voice),
            "editmessagetext" => edit_message(state, directory, params, started, EditKind::Text),
            "editmessagereplymarkup" => edit_message(state, directory, params, started, EditKind::ReplyMarkup),
            "deletemessage" => delete_message(state, params),
            "sendchataction" => send_chat_action(state, directory, params),
            "sendmessagedraft" => super::drafts::send_message_draft(state, params, started),
            "answercallbackquery" => answer_callback_query(state, params),
            "setmycommands" => set_my_commands(state, params),
            "getmycommands" => Ok(Value::Array(
                state
                    .commands
                    .iter()
                    .map(|command| json!({"command": command.command, "description": command.description}))
                    .collect(),
            )),
            "deletemycommands" => {
                state.commands.clear();
                Ok(Value::Bool(true))
            }
            "getfile" => get_file(state, params),
            _ => Err(Reply::not_found()),
        };
        match outcome {
            Ok(result) => Reply::Done(result),
            Err(reply) => reply,
        }
    }
}

fn get_me(state: &BotState) -> Value {
    let mut me = state.user_json();
    me["can_join_groups"] = Value::Bool(true);
    me["can_read_all_group_messages"] = Value::Bool(false);
    me["supports_inline_queries"] = Value::Bool(false);
    me["can_connect_to_business"] = Value::Bool(false);
    me["has_main_web_app"] = Value::Bool(false);
    me
}

/// The message a send replies to, from `reply_parameters` or the older `reply_to_message_id`.
fn reply_target(
    state: &BotState,
    chat_id: i64,
    params: &Params,
) -> Result<Option<(i32, Value)>, Reply> {
    let (message_id, allow_without_reply) = match params
        .json("reply_parameters")
        .map_err(Reply::bad_request)?
    {
        Some(parameters) => (
            parameters.get("message_id").and_then(Value::as_i64),
            parameters
                .get("allow_sending_without_reply")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        ),
        None => (
            params
                .integer("reply_to_message_id")
                .map_err(Reply::bad_request)?,
            params.flag("allow_sending_without_reply"),
        ),
    };
    let Some(message_id) = message_id.and_then(|id| i32::try_from(id).ok()) else {
        return Ok(None);
    };
    match state.message(chat_id, message_id) {
        Some(message) => Ok(Some((message_id, without_reply(message)))),
        None if allow_without_reply => Ok(None),
        None => Err(Reply::bad_request(
            "Bad Request: message to be replied not found",
        )),
    }
}

/// Records a new message of the bot and returns its JSON.
fn record_sent(
    state: &mut BotState,
    directory: &Directory,
    record: SentRecord,
    started: Instant,
) -> Value {
    let chat_id = record.message.chat_id;
    let message_id = record.message.message_id;
    let json = state.render_sent(directory, &record);
    state.store_message(chat_id, message_id, json.clone());
    state.flood.record(
        Activity::Send,
        chat_id,
        message_id,
        record.message.method,
        record.message.sent_at,
        started,
    );
    state
        .sent_index
        .insert((chat_id, message_id), state.sent.len());
    state.sent.push(record);
    json
}

fn send_message(
    state: &mut BotState,
    directory: &Directory,
    params: &Params,
    started: Instant,
) -> Result<Value, Reply> {
    let chat_id = chat_id_param(params)?;
    let text = params.string("text").unwrap_or_default();
    let parse_mode = params.string("parse_mode").filter(|mode| !mode.is_empty());
    let entities = params.json("entities").map_err(Reply::bad_request)?;
    let formatted = format_text(&text, parse_mode.as_deref(), entities)?;
    if formatted.visible.trim().is_empty() {
        return Err(Reply::bad_request("Bad Request: message text is empty"));
    }
    if formatted.utf16_len > MAX_MESSAGE_UTF16 {
        return Err(Reply::bad_request("Bad Request: message is too long"));
    }
    let markup = parse_markup(params)?;
    let reply_to = reply_target(state, chat_id, params)?;
    let thread_id = thread_param(directory, chat_id, params)?;
    let message_id = state.allocate_message_id(chat_id);
    let record = SentRecord {
        message: SentMessage {
            chat_id,
            message_id,
            thread_id,
            method: "sendMessage",
            text: text.clone(),
            visible_text: formatted.visible,
            original_text: text,
            parse_mode,
            buttons: markup.buttons,
            reply_to_message_id: reply_to.as_ref().map(|(id, _)| *id),
            attachment: None,
            sent_at: Instant::now(),
            edits: Vec::new(),
            deleted: false,
        },
        entities: formatted.entities,
        markup: markup.json,
        reply_to: reply_to.map(|(_, message)| message),
        media: None,
        date: unix_now(),
        edit_date: None,
    };
    Ok(record_sent(state, directory, record, started))
}

/// `sendDocument`, `sendPhoto` and `sendVoice`: a file (uploaded, or named by file id or URL)
/// with an optional caption.
fn send_media(
    state: &mut BotState,
    directory: &mut Directory,
    params: &Params,
    started: Instant,
    kind: AttachmentKind,
) -> Result<Value, Reply> {
    let (field, method) = match kind {
        AttachmentKind::Document => ("document", "sendDocument"),
        AttachmentKind::Photo => ("photo", "sendPhoto"),
        AttachmentKind::Voice => ("voice", "sendVoice"),
    };
    let chat_id = chat_id_param(params)?;
    let caption = params.string("caption").unwrap_or_default();
    let parse_mode = params.string("parse_mode").filter(|mode| !mode.is_empty());
    let entities = params
        .json("caption_entities")
        .map_err(Reply::bad_request)?;
    let formatted = format_text(&caption, parse_mode.as_deref(), entities)?;
    if formatted.utf16_len > MAX_CAPTION_UTF16 {
        return Err(Reply::bad_request(
            "Bad Request: message caption is too long",
        ));
    }
    let markup = parse_markup(params)?;
    let reply_to = reply_target(state, chat_id, params)?;
    let thread_id = thread_param(directory, chat_id, params)?;
    let (handle, attachment) = media_attachment(state, directory, params, field, kind)?;
    let message_id = state.allocate_message_id(chat_id);
    let record = SentRecord {
        message: SentMessage {
            chat_id,
            message_id,
            thread_id,
            method,
            text: caption.clone(),
            visible_text: formatted.visible,
            original_text: caption,
            parse_mode,
            buttons: markup.buttons,
            reply_to_message_id: reply_to.as_ref().map(|(id, _)| *id),
            attachment: Some(attachment),
            sent_at: Instant::now(),
            edits: Vec::new(),
            deleted: false,
        },
        entities: formatted.entities,
        markup: markup.json,
        reply_to: reply_to.map(|(_, message)| message),
        media: Some(media_json(kind, &handle)),
        date: unix_now(),
        edit_date: None,
    };
    Ok(record_sent(state, directory, record, started))
}

/// The file a media send carries, from the upload in `field` or else the file id or URL that
/// `field` names.
fn media_attachment(
    state: &mut BotState,
    directory: &mut Directory,
    params: &Params,
    field: &str,
    kind: AttachmentKind,
) -> Result<(FileHandle, SentAttachment), Reply> {
    if let Some(upload) = params.file(field) {
        return uploaded_attachment(state, directory, upload, kind);
    }
    let Some(reference) = params
        .string(field)
        .filter(|reference| !reference.is_empty())
    else {
        return Err(Reply::bad_request(format!(
            "Bad Request: there is no {field} in the request"
        )));
    };
    referenced_attachment(state, directory, reference, kind)
}

/// Stores an uploaded file; an empty one, or a photo Telegram could not decode, is refused.
fn uploaded_attachment(
    state: &mut BotState,
    directory: &mut Directory,
    upload: &UploadedFile,
    kind: AttachmentKind,
) -> Result<(FileHandle, SentAttachment), Reply> {
    if upload.bytes.is_empty() {
        return Err(Reply::bad_request("Bad Request: file must be non-empty"));
    }
    if kind == AttachmentKind::Photo && !decodable_image(&upload.bytes) {
        return Err(Reply::bad_request("Bad Request: IMAGE_PROCESS_FAILED"));
    }
    let handle = state.store_file(
        directory,
        kind,
        upload.file_name.clone(),
        upload.bytes.clone(),
    );
    let attachment = SentAttachment {
        kind,
        file_name: upload.file_name.clone(),
        bytes: upload.bytes.clone(),
    };
    Ok((handle, attachment))
}

/// The file named by `reference`: a file id the fake knows, or an HTTP URL (stored empty, as the
/// fake does not download it).
fn referenced_attachment(
    state: &mut BotState,
    directory: &mut Directory,
    reference: String,
    kind: AttachmentKind,
) -> Result<(FileHandle, SentAttachment), Reply> {
    match state.files.get(&reference) {
        Some(known) => Ok((
            FileHandle {
                file_id: reference.clone(),
                unique_id: known.unique_id.clone(),
                path: known.path.clone(),
                file_name: known.file_name.clone(),
                size: known.bytes.len(),
            },
            SentAttachment {
                kind,
                file_name: known.file_name.clone(),
                bytes: known.bytes.clone(),
            },
        )),
        None if reference.starts_with("http://") || reference.starts_with("https://") => {
            let file_name = reference.rsplit('/').next().map(str::to_string);
            let handle = state.store_file(directory, kind, file_name.clone(), Vec::new());
            Ok((
                handle,
                SentAttachment {
                    kind,
                    file_name,
                    bytes: Vec::new(),
                },
            ))
        }
        None => Err(Reply::bad_request(
            "Bad Request: wrong file identifier/HTTP URL specified",
        )),
    }
}

/// Whether Telegram could decode an uploaded photo, judged by its header: a JPEG start, a PNG
/// signature followed by its `IHDR` chunk, WebP, GIF or BMP.
fn decodable_image(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xD8, 0xFF])
        || (bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.get(12..16) == Some(&b"IHDR"[..]))
        || (bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP")
        || bytes.starts_with(b"GIF8")
        || bytes.starts_with(b"BM")
}

/// Which edit method is running.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EditKind {
    Text,
    ReplyMarkup,
}

fn edit_message(
    state: &mut BotState,
    directory: &Directory,
    params: &Params,
    started: Instant,
    kind: EditKind,
) -> Result<Value, Reply> {
    if params.string("inline_message_id").is_some() {
        return Err(Reply::bad_request(
            "Bad Request: inline messages are not modelled by the fake Telegram server",
        ));
    }
    let chat_id = chat_id_param(params)?;
    let message_id = message_id_param(params, "Bad Request: message to edit not found")?;
    let Some(&index) = state.sent_index.get(&(chat_id, message_id)) else {
        // A user's message exists but cannot be edited by the bot.
        if state.message(chat_id, message_id).is_some() {
            return Err(Reply::bad_request("Bad Request: message can't be edited"));
        }
        return Err(Reply::bad_request("Bad Request: message to edit not found"));
    };
    let markup = parse_markup(params)?;
    let now = Instant::now();
    let method = match kind {
        EditKind::Text => "editMessageText",
        EditKind::ReplyMarkup => "editMessageReplyMarkup",
    };
    {
        let record = &mut state.sent[index];
        let (text, parse_mode, formatted) = match kind {
            EditKind::Text => {
                if record.media.is_some() {
                    return Err(Reply::bad_request(
                        "Bad Request: there is no text in the message to edit",
                    ));
                }
                let text = params.string("text").unwrap_or_default();
                let parse_mode = params.string("parse_mode").filter(|mode| !mode.is_empty());
                let entities = params.json("entities").map_err(Reply::bad_request)?;
                let formatted = format_text(&text, parse_mode.as_deref(), entities)?;
                if formatted.visible.trim().is_empty() {
                    return Err(Reply::bad_request("Bad Request: message text is empty"));
                }
                if formatted.utf16_len > MAX_MESSAGE_UTF16 {
                    return Err(Reply::bad_request("Bad Request: message is too long"));
                }
                (text, parse_mode, formatted)
            }
            EditKind::ReplyMarkup => (
                record.message.text.clone(),
                record.message.parse_mode.clone(),
                FormattedText {
                    visible: record.message.visible_text.clone(),
                    entities: record.entities.clone(),
                    utf16_len: 0,
                },
            ),
        };
        if formatted.visible == record.message.visible_text
            && formatted.entities == record.entities
            && markup.json == record.markup
        {
            return Err(Reply::bad_request(NOT_MODIFIED_DESCRIPTION));
        }
        record.message.text = text.clone();
        record.message.visible_text = formatted.visible.clone();
        record.message.parse_mode = parse_mode.clone();
        record.message.buttons = markup.buttons.clone();
        record.entities = formatted.entities;
        record.markup = markup.json;
        record.edit_date = Some(unix_now());
        record.message.edits.push(SentEdit {
            at: now,
            method,
            text,
            visible_text: formatted.visible,
            parse_mode,
            buttons: markup.buttons,
        });
    }
    let json = state.render_sent(directory, &state.sent[index]);
    state.store_message(chat_id, message_id, json.clone());
    state
        .flood
        .record(Activity::Edit, chat_id, message_id, method, now, started);
    Ok(json)
}

fn delete_message(state: &mut BotState, params: &Params) -> Result<Value, Reply> {
    let chat_id = chat_id_param(params)?;
    let message_id = message_id_param(params, "Bad Request: message to delete not found")?;
    let removed = state
        .chats
        .get_mut(&chat_id)
        .and_then(|chat| chat.messages.remove(&message_id));
    if removed.is_none() {
        return Err(Reply::bad_request(
            "Bad Request: message to delete not found",
        ));
    }
    if let Some(index) = state.sent_index.remove(&(chat_id, message_id)) {
        state.sent[index].message.deleted = true;
        state.flood.forget_message(chat_id, message_id);
    }
    Ok(Value::Bool(true))
}

fn send_chat_action(
    state: &mut BotState,
    directory: &Directory,
    params: &Params,
) -> Result<Value, Reply> {
    let chat_id = chat_id_param(params)?;
    let action = params.string("action").unwrap_or_default();
    if !CHAT_ACTIONS.contains(&action.as_str()) {
        return Err(Reply::bad_request(
            "Bad Request: wrong parameter action in request",
        ));
    }
    let thread_id = thread_param(directory, chat_id, params)?;
    state.chat_actions.push(ChatActionRecord {
        chat_id,
        thread_id,
        action,
        at: Instant::now(),
    });
    Ok(Value::Bool(true))
}

fn answer_callback_query(state: &mut BotState, params: &Params) -> Result<Value, Reply> {
    let id = params.string("callback_query_id").unwrap_or_default();
    let too_old = || {
        Reply::bad_request(
            "Bad Request: query is too old and response timeout expired or query id is invalid",
        )
    };
    match state.callbacks.get_mut(&id) {
        Some(slot @ CallbackState::Pending) => *slot = CallbackState::Answered,
        Some(CallbackState::Answered) | None => return Err(too_old()),
    }
    state.callback_answers.push(CallbackAnswer {
        callback_query_id: id,
        text: params.string("text"),
        show_alert: params.flag("show_alert"),
        url: params.string("url"),
        at: Instant::now(),
    });
    Ok(Value::Bool(true))
}

fn set_my_commands(state: &mut BotState, params: &Params) -> Result<Value, Reply> {
    let commands = match params.json("commands").map_err(Reply::bad_request)? {
        Some(Value::Array(commands)) => commands,
        _ => {
            return Err(Reply::bad_request(
                "Bad Request: parameter \"commands\" is required",
            ));
        }
    };
    if commands.len() > 100 {
        return Err(Reply::bad_request("Bad Request: too many commands"));
    }
    let mut parsed = Vec::with_capacity(commands.len());
    for command in &commands {
        let name = command.get("command").and_then(Value::as_str).unwrap_or("");
        let description = command
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let valid_name = (1..=32).contains(&name.len())
            && name
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_');
        if !valid_name {
            return Err(Reply::bad_request("Bad Request: BOT_COMMAND_INVALID"));
        }
        if !(1..=256).contains(&description.chars().count()) {
            return Err(Reply::bad_request(
                "Bad Request: command description must be non-empty",
            ));
        }
        parsed.push(BotCommandRecord {
            command: name.to_string(),
            description: description.to_string(),
        });
    }
    state.commands = parsed;
    Ok(Value::Bool(true))
}

fn get_file(state: &BotState, params: &Params) -> Result<Value, Reply> {
    let file_id = params.string("file_id").unwrap_or_default();
    let Some(file) = state.files.get(&file_id) else {
        return Err(Reply::bad_request("Bad Request: invalid file_id"));
    };
    Ok(json!({
        "file_id": file_id,
        "file_unique_id": file.unique_id,
        "file_size": file.bytes.len(),
        "file_path": file.path,
    }))
}
