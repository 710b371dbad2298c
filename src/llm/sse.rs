//! An incremental Server-Sent Events parser: bytes in (in whatever pieces the network delivers),
//! complete events out.
//!
//! It follows the WHATWG event-stream rules that LLM providers rely on: lines end in `\n`, `\r\n`
//! or a lone `\r`; `data:` lines of one event are joined with `\n`; a blank line dispatches the
//! event; lines starting with `:` are comments (keep-alives); an event without data is not
//! dispatched. A line longer than [`MAX_LINE_BYTES`] is an error rather than unbounded memory.

/// The longest line accepted. Real chunks are a few KiB; a tool call with a large argument may be
/// a few hundred KiB.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when one was given.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an event-stream line is longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
    #[error("an event-stream line is not valid UTF-8")]
    NotUtf8,
}

#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line not yet terminated.
    partial_line: Vec<u8>,
    /// The previous piece ended in `\r`: a `\n` at the start of the next piece belongs to it.
    skip_next_newline: bool,
    event_name: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds the next piece of the stream and appends every event it completes to `events`.
    pub fn feed(&mut self, bytes: &[u8], events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut rest = bytes;
        if self.skip_next_newline {
            self.skip_next_newline = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(end) = rest
            .iter()
            .position(|byte| *byte == b'\n' || *byte == b'\r')
        {
            let terminator = rest[end];
            if self.partial_line.is_empty() {
                self.process_line(&rest[..end], events)?;
            } else {
                self.partial_line.extend_from_slice(&rest[..end]);
                let line = std::mem::take(&mut self.partial_line);
                self.process_line(&line, events)?;
            }
            rest = &rest[end + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.skip_next_newline = true,
                }
            }
        }
        if self.partial_line.len() + rest.len() > MAX_LINE_BYTES {
            return Err(SseError::LineTooLong);
        }
        self.partial_line.extend_from_slice(rest);
        Ok(())
    }

    /// The stream ended: dispatches an event still pending (a last event without its blank line),
    /// which is lenient where the specification says to drop it — a truncated JSON payload is
    /// then caught by the caller's JSON parsing instead of silently vanishing.
    pub fn finish(&mut self, events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.partial_line.is_empty() {
            let line = std::mem::take(&mut self.partial_line);
            self.process_line(&line, events)?;
        }
        self.dispatch(events);
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event_name = Some(value.to_string()),
            // `id` and `retry` matter to browsers reconnecting; a model call is never resumed.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        let event_name = self.event_name.take();
        if !self.has_data {
            return;
        }
        self.has_data = false;
        events.push(SseEvent {
            event: event_name,
            data: std::mem::take(&mut self.data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(stream: &[u8], piece_len: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for piece in stream.chunks(piece_len) {
            parser.feed(piece, &mut events).unwrap();
        }
        parser.finish(&mut events).unwrap();
        events
    }

    #[test]
    fn events_are_the_same_whatever_the_piece_boundaries() {
        let stream = b": keep-alive\r\n\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: first\ndata: second\n\nid: 3\nretry: 10\ndata:no-space\r\rdata: [DONE]\n\n";
        let expected = vec![
            SseEvent {
                event: Some("message_start".into()),
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: None,
                data: "first\nsecond".into(),
            },
            SseEvent {
                event: None,
                data: "no-space".into(),
            },
            SseEvent {
                event: None,
                data: "[DONE]".into(),
            },
        ];
        for piece_len in [1, 2, 3, 7, stream.len()] {
            assert_eq!(
                parse_in_pieces(stream, piece_len),
                expected,
                "piece length {piece_len}"
            );
        }
    }

    #[test]
    fn events_without_data_are_not_dispatched_and_a_last_event_is_flushed() {
        let events = parse_in_pieces(b"event: ping\n\n:comment\n\ndata: tail", 4);
        assert_eq!(
            events,
            vec![SseEvent {
                event: None,
                data: "tail".into()
            }]
        );
    }

    #[test]
    fn a_line_without_end_cannot_grow_forever() {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        let piece = vec![b'x'; 1024 * 1024];
        let mut outcome = Ok(());
        for _ in 0..20 {
            outcome = parser.feed(&piece, &mut events);
            if outcome.is_err() {
                break;
            }
        }
        assert_eq!(outcome, Err(SseError::LineTooLong));
    }
}
