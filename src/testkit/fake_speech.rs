//! A speech server on `127.0.0.1:0` speaking the OpenAI-compatible `POST /v1/audio/speech`:
//! JSON `{model, input, voice, response_format}` in, audio bytes out (`audio/ogg` for `opus`),
//! so that the real [`crate::voice::speech::SpeechClient`] and the bot's spoken replies can be
//! tested end to end.
//!
//! The audio is a real Ogg/Opus stream: an `OpusHead` page, an `OpusTags` page whose comment
//! carries the spoken text (so each answer differs and a test can tell which text a voice message
//! speaks), and one page holding a 20 ms Opus silence frame, each page with its Ogg CRC.
//! It records every request (model, voice, input, format, the `Authorization` header and the
//! bytes it answered) and can fail the next requests with a status, for fallback tests.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeechRequest {
    pub model: String,
    pub voice: String,
    pub input: String,
    pub response_format: String,
    /// The `Authorization` header as sent (`Bearer …`), if any.
    pub authorization: Option<String>,
    /// The bytes answered (empty for a failed request).
    pub audio: Vec<u8>,
}

#[derive(Default)]
struct FakeState {
    requests: Vec<SpeechRequest>,
    /// The next requests answered with this status, and how many remain.
    failures: Option<(u16, u32)>,
}

/// A running fake speech server. Stops when dropped.
pub struct FakeSpeech {
    address: SocketAddr,
    state: Arc<Mutex<FakeState>>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl FakeSpeech {
    /// Starts the server on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<FakeSpeech> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let state = Arc::new(Mutex::new(FakeState::default()));
        let app = Router::new()
            .route("/v1/audio/speech", post(speak))
            .with_state(Arc::clone(&state));
        let (shutdown, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(FakeSpeech {
            address,
            state,
            shutdown: Some(shutdown),
            server: Some(server),
        })
    }

    /// `http://127.0.0.1:<port>/v1`, a provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SpeechRequest> {
        lock(&self.state).requests.clone()
    }

    /// The next `count` requests are answered with `status` and an OpenAI-style error body.
    pub fn fail_next(&self, status: u16, count: u32) {
        lock(&self.state).failures = Some((status, count));
    }

    /// The audio this server answers for `input`.
    pub fn audio_for(input: &str) -> Vec<u8> {
        ogg_opus(input)
    }
}

impl Drop for FakeSpeech {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

fn lock(state: &Mutex<FakeState>) -> MutexGuard<'_, FakeState> {
    // A poisoned lock only means a test thread panicked; the records are still readable.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn speak(
    State(state): State<Arc<Mutex<FakeState>>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let request: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(error) => return error_response(400, &format!("invalid JSON body: {error}")),
    };
    let field = |name: &str| request[name].as_str().unwrap_or_default().to_string();
    let mut record = SpeechRequest {
        model: field("model"),
        voice: field("voice"),
        input: field("input"),
        response_format: field("response_format"),
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string),
        audio: Vec::new(),
    };
    let mut state = lock(&state);
    if let Some((status, remaining)) = state.failures
        && remaining > 0
    {
        state.failures = Some((status, remaining - 1));
        state.requests.push(record);
        return error_response(status, "the speech model is overloaded");
    }
    if record.input.is_empty() || record.model.is_empty() {
        state.requests.push(record);
        return error_response(400, "`model` and `input` are required");
    }
    let (audio, content_type) = match record.response_format.as_str() {
        "" | "opus" => (ogg_opus(&record.input), "audio/ogg"),
        other => {
            let message = format!("this fake speaks only opus, not `{other}`");
            state.requests.push(record);
            return error_response(400, &message);
        }
    };
    record.audio = audio.clone();
    state.requests.push(record);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, content_type)],
        audio,
    )
        .into_response()
}

fn error_response(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::json!({"error": {"message": message, "type": "invalid_request_error"}});
    (status, axum::Json(body)).into_response()
}

/// A real Ogg/Opus stream: `OpusHead`, `OpusTags` (with `TITLE=<input>`), one silence frame.
fn ogg_opus(input: &str) -> Vec<u8> {
    const SERIAL: u32 = 0x5eec_0001;
    let mut head = b"OpusHead".to_vec();
    head.push(1); // version
    head.push(1); // channels
    head.extend_from_slice(&312u16.to_le_bytes()); // pre-skip
    head.extend_from_slice(&48_000u32.to_le_bytes()); // input sample rate
    head.extend_from_slice(&0i16.to_le_bytes()); // output gain
    head.push(0); // channel mapping family
    let vendor = b"clawvisor fake speech";
    let title: String = input.chars().take(200).collect();
    let comment = format!("TITLE={title}");
    let mut tags = b"OpusTags".to_vec();
    tags.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
    tags.extend_from_slice(vendor);
    tags.extend_from_slice(&1u32.to_le_bytes());
    tags.extend_from_slice(&(comment.len() as u32).to_le_bytes());
    tags.extend_from_slice(comment.as_bytes());
    // TOC 0xF8: CELT-only, full band, 20 ms, mono, one frame; 0xFF 0xFE: a silent frame.
    let silence = [0xF8u8, 0xFF, 0xFE];
    let mut stream = ogg_page(&head, SERIAL, 0, 0, 0x02);
    stream.extend(ogg_page(&tags, SERIAL, 1, 0, 0x00));
    stream.extend(ogg_page(&silence, SERIAL, 2, 960 + 312, 0x04));
    stream
}

/// One Ogg page holding one packet (shorter than 255 × 255 bytes), with its CRC.
fn ogg_page(packet: &[u8], serial: u32, sequence: u32, granule: u64, flags: u8) -> Vec<u8> {
    let mut lacing = vec![255u8; packet.len() / 255];
    lacing.push((packet.len() % 255) as u8);
    let mut page = b"OggS".to_vec();
    page.push(0); // stream structure version
    page.push(flags);
    page.extend_from_slice(&granule.to_le_bytes());
    page.extend_from_slice(&serial.to_le_bytes());
    page.extend_from_slice(&sequence.to_le_bytes());
    page.extend_from_slice(&0u32.to_le_bytes()); // CRC, filled in below
    page.push(lacing.len() as u8);
    page.extend_from_slice(&lacing);
    page.extend_from_slice(packet);
    let crc = ogg_crc(&page);
    page[22..26].copy_from_slice(&crc.to_le_bytes());
    page
}

/// Ogg's CRC-32: polynomial 0x04c11db7, initial value 0, no reflection.
fn ogg_crc(bytes: &[u8]) -> u32 {
    let mut crc = 0u32;
    for &byte in bytes {
        crc ^= u32::from(byte) << 24;
        for _ in 0..8 {
            crc = if crc & 0x8000_0000 != 0 {
                (crc << 1) ^ 0x04c1_1db7
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_checksum_is_oggs_crc() {
        // CRC-32/CKSUM's check value without its final inversion (0x765E7680 ^ 0xFFFFFFFF).
        assert_eq!(ogg_crc(b"123456789"), 0x89A1_897F);
    }

    #[test]
    fn the_audio_is_a_chain_of_checked_ogg_pages_starting_with_opus_head() {
        let audio = ogg_opus("hello there");
        let mut offset = 0;
        let mut packets = Vec::new();
        while offset < audio.len() {
            let page = &audio[offset..];
            assert_eq!(&page[..4], b"OggS");
            let segments = page[26] as usize;
            let body: usize = page[27..27 + segments].iter().map(|&l| l as usize).sum();
            let length = 27 + segments + body;
            let mut unchecked = page[..length].to_vec();
            let stored = u32::from_le_bytes([page[22], page[23], page[24], page[25]]);
            unchecked[22..26].fill(0);
            assert_eq!(ogg_crc(&unchecked), stored, "page CRC");
            packets.push(page[27 + segments..length].to_vec());
            offset += length;
        }
        assert_eq!(packets.len(), 3);
        assert!(packets[0].starts_with(b"OpusHead"));
        assert!(packets[1].starts_with(b"OpusTags"));
        assert!(String::from_utf8_lossy(&packets[1]).contains("TITLE=hello there"));
    }
}
