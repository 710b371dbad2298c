//! An incremental Server-Sent Events decoder for signal-cli's `GET /api/v1/events` stream.
//!
//! signal-cli writes each event as `event:receive`, one `data:` line of JSON and a blank line,
//! and a `:` comment line every 15 s as keep-alive (`ServerSentEventSender`). This decoder follows
//! the WHATWG rules that matter for such a stream: lines end in `\n`, `\r\n` or `\r`; a line
//! starting with `:` is a comment; `field:value` with one optional space after the colon; `data`
//! lines are joined with `\n`; a blank line dispatches; an event without data is dropped.
//!
//! Invariants: [`SseDecoder::push`] never panics on any bytes; a line longer than the decoder's
//! limit (or an event whose data grows past it) is an error naming the limit, and the decoder
//! then skips to the next event, so one bad event never blocks the ones after it. It is written
//! here rather than taken from `sse-stream` (already in the tree) because that crate buffers a
//! line without a bound and needs an async body; this one is synchronous (fuzzable, benchable).

/// An event's data may not grow past this by default (signal-cli's events are a few KiB; a
/// message is at most 2,000 characters of text, attachments travel separately).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when the event named none.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` field seen, if any.
    pub id: Option<String>,
}

/// What is wrong with a stream's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line or an event's data passed the limit; the event is skipped.
    #[error(
        "an event on the Signal stream is larger than {limit} bytes; it was skipped (check that rpc_url points at signal-cli's HTTP daemon)"
    )]
    TooLarge { limit: usize },
    /// A line is not UTF-8; the event it belongs to is skipped.
    #[error(
        "a line on the Signal stream is not UTF-8 text (at byte {at} of the line); its event was skipped"
    )]
    NotUtf8 { at: usize },
}

/// The decoder's state between chunks.
#[derive(Debug)]
pub struct SseDecoder {
    limit: usize,
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` at the start of the next one belongs to it.
    after_carriage_return: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    /// The current event is being skipped (it was too large or not UTF-8) until a blank line.
    skipping: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::new(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseDecoder {
    /// A decoder that refuses lines and events larger than `limit` bytes.
    pub fn new(limit: usize) -> SseDecoder {
        SseDecoder {
            limit: limit.max(16),
            line: Vec::new(),
            after_carriage_return: false,
            event: None,
            data: String::new(),
            has_data: false,
            id: None,
            skipping: false,
        }
    }

    /// Feeds `bytes`; returns each complete event, or an error for each event skipped, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Result<SseEvent, SseError>> {
        let mut out = Vec::new();
        for &byte in bytes {
            if self.after_carriage_return {
                self.after_carriage_return = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_carriage_return = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(result) = self.end_line(&line) {
                        out.push(result);
                    }
                }
                _ if self.skipping => {}
                _ => {
                    if self.line.len() >= self.limit {
                        self.line.clear();
                        self.start_skipping();
                        out.push(Err(SseError::TooLarge { limit: self.limit }));
                    } else {
                        self.line.push(byte);
                    }
                }
            }
        }
        out
    }

    fn start_skipping(&mut self) {
        self.skipping = true;
        self.data.clear();
        self.has_data = false;
        self.event = None;
    }

    /// Handles one complete line; a blank line may dispatch an event.
    fn end_line(&mut self, line: &[u8]) -> Option<Result<SseEvent, SseError>> {
        if line.is_empty() {
            return self.dispatch();
        }
        if self.skipping {
            return None;
        }
        let text = match std::str::from_utf8(line) {
            Ok(text) => text,
            Err(error) => {
                self.start_skipping();
                return Some(Err(SseError::NotUtf8 {
                    at: error.valid_up_to(),
                }));
            }
        };
        if text.starts_with(':') {
            return None;
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.data.len() + value.len() + 1 > self.limit {
                    self.start_skipping();
                    return Some(Err(SseError::TooLarge { limit: self.limit }));
                }
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Result<SseEvent, SseError>> {
        let event = self.event.take();
        if self.skipping {
            self.skipping = false;
            self.data.clear();
            self.has_data = false;
            return None;
        }
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        Some(Ok(SseEvent {
            event: event
                .filter(|name| !name.is_empty())
                .unwrap_or_else(|| "message".to_string()),
            data,
            id: self.id.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(decoder: &mut SseDecoder, bytes: &[u8]) -> Vec<Result<SseEvent, SseError>> {
        decoder.push(bytes)
    }

    #[test]
    fn signal_cli_events_and_keep_alives_decode() {
        let mut decoder = SseDecoder::default();
        let events = all(
            &mut decoder,
            b"event:receive\ndata:{\"a\":1}\n\n:\n:\nevent:receive\ndata:{\"b\":2}\n\n",
        );
        assert_eq!(events.len(), 2);
        let first = events[0].as_ref().expect("valid event");
        assert_eq!(first.event, "receive");
        assert_eq!(first.data, "{\"a\":1}");
    }

    #[test]
    fn events_split_anywhere_decode_the_same() {
        let stream = b"event: receive\r\ndata: x\r\ndata:y\r\n\r\nid:7\rdata:z\r\r";
        let whole: Vec<_> = SseDecoder::default().push(stream);
        for cut in 0..stream.len() {
            let mut decoder = SseDecoder::default();
            let mut parts = decoder.push(&stream[..cut]);
            parts.extend(decoder.push(&stream[cut..]));
            assert_eq!(parts, whole, "cut at {cut}");
        }
        assert_eq!(whole.len(), 2);
        let first = whole[0].as_ref().expect("valid");
        assert_eq!(first.data, "x\ny");
        let second = whole[1].as_ref().expect("valid");
        assert_eq!(
            (second.event.as_str(), second.id.as_deref()),
            ("message", Some("7"))
        );
    }

    #[test]
    fn an_oversized_event_is_skipped_and_the_next_one_arrives() {
        let mut decoder = SseDecoder::new(64);
        let mut stream = b"event:receive\ndata:".to_vec();
        stream.extend(std::iter::repeat_n(b'x', 200));
        stream.extend_from_slice(b"\n\nevent:receive\ndata:ok\n\n");
        let events = decoder.push(&stream);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0], Err(SseError::TooLarge { limit: 64 }));
        assert_eq!(events[1].as_ref().expect("valid").data, "ok");
    }

    #[test]
    fn a_line_that_is_not_utf8_skips_only_its_event() {
        let mut decoder = SseDecoder::default();
        let events = decoder.push(b"data:\xff\xfe\n\ndata:fine\n\n");
        assert_eq!(events.len(), 2);
        assert!(matches!(events[0], Err(SseError::NotUtf8 { at: 5 })));
        assert_eq!(events[1].as_ref().expect("valid").data, "fine");
    }
}
