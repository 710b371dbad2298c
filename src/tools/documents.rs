//! What `read_file` does with files that are not text: the text of a PDF (extracted with the
//! pure-Rust `pdf-extract`, over `lopdf`), and a clear sentence for any other binary file.
//!
//! PDFs come from users (a document sent in the chat) and are untrusted: extraction runs under
//! `catch_unwind` (the crate has panicking paths on malformed files; the daemon is built with
//! `panic = "unwind"`), on files of at most [`MAX_PDF_BYTES`], page by page up to
//! [`MAX_PDF_PAGES`] and [`MAX_EXTRACTED_BYTES`] of text. It runs on the blocking pool under the
//! file tools' timeout, like every file tool.
//!
//! `catch_unwind` does not help against memory: lopdf inflates every compressed stream in full,
//! so a small file whose streams inflate to gigabytes would get the daemon killed. Before the
//! bytes reach the parser, [`check_decompressed_sizes`] inflates every stream lopdf could inflate
//! through a bounded reader (discarding the output) and refuses the file once one stream expands
//! past [`MAX_STREAM_EXPANSION`] or all of them past [`MAX_TOTAL_EXPANSION`]; PDFs using the one
//! other expanding filter lopdf decodes, `/LZWDecode`, are refused outright.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use flate2::read::{DeflateDecoder, ZlibDecoder};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::tool::{ToolError, ToolOutput};

/// A PDF starts with `%PDF-`. A file named `.pdf` may have some junk before it (readers look in
/// the first kilobyte); any other file must start with it to be taken for a PDF.
const PDF_MAGIC: &[u8] = b"%PDF-";
const PDF_MAGIC_WINDOW: usize = 1024;
/// One stream inflating to more than this refuses the PDF.
pub const MAX_STREAM_EXPANSION: u64 = 32 * 1024 * 1024;
/// All streams together inflating to more than this refuses the PDF.
pub const MAX_TOTAL_EXPANSION: u64 = 128 * 1024 * 1024;
/// Larger PDFs are not parsed (their text would not fit in a model's context anyway).
pub const MAX_PDF_BYTES: u64 = 64 * 1024 * 1024;
/// Pages extracted at most.
pub const MAX_PDF_PAGES: usize = 2000;
/// Extraction stops once this much text is collected.
pub const MAX_EXTRACTED_BYTES: usize = 8 * 1024 * 1024;

/// Whether a file is to be read as a PDF: it starts with `%PDF-`, or its name ends in `.pdf` and
/// `%PDF-` is in its first kilobyte.
pub fn looks_like_pdf(name: &str, start: &[u8]) -> bool {
    if start.starts_with(PDF_MAGIC) {
        return true;
    }
    let named_pdf = name.to_ascii_lowercase().ends_with(".pdf");
    let window = &start[..start.len().min(PDF_MAGIC_WINDOW)];
    named_pdf
        && window
            .windows(PDF_MAGIC.len())
            .any(|candidate| candidate == PDF_MAGIC)
}

/// The bytes PDF syntax treats as whitespace or delimiters (they end a name).
fn ends_a_name(byte: u8) -> bool {
    matches!(
        byte,
        b'\0'
            | b'\t'
            | b'\n'
            | 0x0C
            | b'\r'
            | b' '
            | b'('
            | b')'
            | b'<'
            | b'>'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'/'
            | b'%'
    )
}

/// Whether the name `wanted` (without its slash) is written anywhere in the file, in plain or
/// with `#xx` escapes. Stream dictionaries (which name the filters) are never compressed, so a
/// filter a stream uses is always found; a match inside binary data only errs on the safe side.
fn mentions_name(bytes: &[u8], wanted: &[u8]) -> bool {
    let hex = |byte: u8| (byte as char).to_digit(16).map(|digit| digit as u8);
    let mut position = 0;
    while let Some(found) = bytes[position..].iter().position(|&byte| byte == b'/') {
        let mut index = position + found + 1;
        let mut name = Vec::new();
        while index < bytes.len() && !ends_a_name(bytes[index]) && name.len() <= wanted.len() {
            let escaped = (bytes[index] == b'#')
                .then(|| Some((hex(*bytes.get(index + 1)?)?, hex(*bytes.get(index + 2)?)?)))
                .flatten();
            match escaped {
                Some((high, low)) => {
                    name.push(high << 4 | low);
                    index += 3;
                }
                None => {
                    name.push(bytes[index]);
                    index += 1;
                }
            }
        }
        if name == wanted {
            return true;
        }
        position = index.max(position + found + 1);
    }
    false
}

/// Where the data of each stream may start: after every `stream` keyword (not `endstream`),
/// past its end of line, and past any further whitespace.
fn stream_data_starts(bytes: &[u8]) -> Vec<usize> {
    const KEYWORD: &[u8] = b"stream";
    let mut starts = Vec::new();
    let mut position = 0;
    while let Some(found) = bytes[position..]
        .windows(KEYWORD.len())
        .position(|window| window == KEYWORD)
    {
        let keyword = position + found;
        position = keyword + KEYWORD.len();
        if bytes[..keyword].ends_with(b"end") {
            continue;
        }
        let mut start = position;
        if bytes[start..].starts_with(b"\r\n") {
            start += 2;
        } else if bytes[start..].starts_with(b"\n") || bytes[start..].starts_with(b"\r") {
            start += 1;
        }
        starts.push(start);
        let mut past_whitespace = start;
        while past_whitespace < bytes.len() && bytes[past_whitespace].is_ascii_whitespace() {
            past_whitespace += 1;
        }
        if past_whitespace != start {
            starts.push(past_whitespace);
        }
    }
    starts
}

/// What one bounded inflation found.
struct Inflated {
    /// Bytes produced, at most the limit plus one.
    produced: u64,
    /// Compressed bytes the decoder read.
    consumed: u64,
}

/// Inflates `data` (zlib, or raw deflate after the two header bytes when zlib yields nothing,
/// as lopdf does) into nowhere, stopping after `limit + 1` bytes.
fn inflate_bounded(data: &[u8], limit: u64) -> Inflated {
    let mut zlib = ZlibDecoder::new(data);
    let produced = copy_until_error((&mut zlib).take(limit.saturating_add(1)));
    let consumed = zlib.total_in();
    if produced > 0 || data.len() <= 2 {
        return Inflated { produced, consumed };
    }
    let mut raw = DeflateDecoder::new(&data[2..]);
    let produced = copy_until_error((&mut raw).take(limit.saturating_add(1)));
    Inflated {
        produced,
        consumed: consumed + raw.total_in(),
    }
}

/// Reads `reader` to its end or first error (lopdf keeps what was inflated before an error),
/// returning how many bytes it gave.
fn copy_until_error(mut reader: impl Read) -> u64 {
    let mut buffer = [0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => return total,
            Ok(count) => total += count as u64,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return total,
        }
    }
}

/// ASCII85-decodes `data` as lopdf does (to `~>` or the first byte outside the alphabet), for
/// the streams that chain `/ASCII85Decode` before `/FlateDecode`. Its output is at most four
/// times its input, and the input is one file of at most [`MAX_PDF_BYTES`].
fn decode_ascii85_prefix(data: &[u8]) -> Vec<u8> {
    let mut output = Vec::new();
    let mut group: u64 = 0;
    let mut count = 0;
    for (index, &byte) in data.iter().enumerate() {
        if byte == b'~' && data.get(index + 1) == Some(&b'>') {
            break;
        }
        if byte == b'z' && count == 0 {
            output.extend_from_slice(&[0, 0, 0, 0]);
            continue;
        }
        if byte.is_ascii_whitespace() {
            continue;
        }
        if !(b'!'..=b'u').contains(&byte) {
            break;
        }
        group = group * 85 + u64::from(byte - b'!');
        count += 1;
        if count == 5 {
            output.extend_from_slice(&(group as u32).to_be_bytes());
            group = 0;
            count = 0;
        }
    }
    output
}

/// Refuses, with a sentence for the user, a PDF whose streams would inflate past
/// [`MAX_STREAM_EXPANSION`] each or [`MAX_TOTAL_EXPANSION`] together, or that uses a filter
/// whose output cannot be bounded beforehand (`/LZWDecode`). Every place a stream's data may
/// start is tried, whatever its dictionary says, so no way of writing the filter name escapes.
pub fn check_decompressed_sizes(bytes: &[u8]) -> Result<(), String> {
    if mentions_name(bytes, b"LZWDecode") {
        return Err(
            "the PDF uses LZW compression (/LZWDecode), which read_file does not unpack because its \
             unpacked size cannot be checked first; not read"
                .to_string(),
        );
    }
    let chains_ascii85 = mentions_name(bytes, b"ASCII85Decode");
    // The compressed bytes read by all attempts together are bounded too, so a file cannot make
    // the check itself slow by starting many attempts that read far without producing anything.
    let input_budget = (bytes.len() as u64).saturating_mul(4) + 16 * 1024 * 1024;
    let mut consumed_total = 0u64;
    let mut produced_total = 0u64;
    for start in stream_data_starts(bytes) {
        let data = &bytes[start..];
        let decoded_ascii85;
        let mut candidates = vec![data];
        if chains_ascii85 {
            decoded_ascii85 = decode_ascii85_prefix(data);
            candidates.push(&decoded_ascii85);
        }
        for candidate in candidates {
            let limit = MAX_STREAM_EXPANSION.min(MAX_TOTAL_EXPANSION - produced_total);
            let inflated = inflate_bounded(candidate, limit);
            if inflated.produced > MAX_STREAM_EXPANSION {
                return Err(format!(
                    "one of the PDF's streams expands to more than {} MB when decompressed; not read",
                    MAX_STREAM_EXPANSION / 1024 / 1024
                ));
            }
            produced_total += inflated.produced;
            if produced_total > MAX_TOTAL_EXPANSION {
                return Err(format!(
                    "the PDF's streams expand to more than {} MB when decompressed; not read",
                    MAX_TOTAL_EXPANSION / 1024 / 1024
                ));
            }
            consumed_total += inflated.consumed;
            if consumed_total > input_budget {
                return Err(
                    "the PDF's compressed streams are laid out too unusually to check their \
                     unpacked size; not read"
                        .to_string(),
                );
            }
        }
    }
    Ok(())
}

/// The text of a PDF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfText {
    pub text: String,
    pub pages: usize,
    /// Pages not extracted because of [`MAX_PDF_PAGES`] or [`MAX_EXTRACTED_BYTES`].
    pub pages_left_out: usize,
}

/// Why a PDF's text could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PdfProblem {
    /// The file was not parsed because of what it would cost (a sentence for the user).
    Refused(String),
    /// The parser could not make sense of the file (a sentence for the user).
    Unreadable(String),
}

/// Extracts the text of a PDF held in memory, page by page; never panics, and refuses a PDF
/// whose streams would inflate past the caps (see [`check_decompressed_sizes`]).
pub fn extract_pdf_text(bytes: &[u8]) -> Result<PdfText, PdfProblem> {
    check_decompressed_sizes(bytes).map_err(PdfProblem::Refused)?;
    match catch_unwind(AssertUnwindSafe(|| extract_pages(bytes))) {
        Ok(result) => result.map_err(PdfProblem::Unreadable),
        Err(_) => Err(PdfProblem::Unreadable(
            "the PDF is malformed (its parser gave up)".to_string(),
        )),
    }
}

fn extract_pages(bytes: &[u8]) -> Result<PdfText, String> {
    let document = pdf_extract::Document::load_mem(bytes)
        .map_err(|error| format!("the PDF cannot be parsed: {error}"))?;
    if document.is_encrypted() {
        return Err("the PDF is encrypted".to_string());
    }
    let page_numbers: Vec<u32> = document.get_pages().keys().copied().collect();
    let pages = page_numbers.len();
    let mut text = String::new();
    let mut extracted = 0;
    for page in page_numbers.iter().take(MAX_PDF_PAGES) {
        if text.len() >= MAX_EXTRACTED_BYTES {
            break;
        }
        let mut page_text = String::new();
        {
            let mut output = pdf_extract::PlainTextOutput::new(&mut page_text);
            // A page that cannot be read is left out; the others still count.
            if pdf_extract::output_doc_page(&document, &mut output, *page).is_err() {
                extracted += 1;
                continue;
            }
        }
        if !text.is_empty() && !page_text.trim().is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(page_text.trim());
        extracted += 1;
    }
    Ok(PdfText {
        text,
        pages,
        pages_left_out: pages - extracted,
    })
}

/// `read_file` on a PDF: its extracted text from byte `offset` of that text, at most
/// `max_bytes`, headed by what it is; a PDF whose text cannot be had says why. `None` when the
/// file cannot be parsed and its name does not end in `.pdf`: it only started like a PDF, and
/// the caller reads it as text.
pub fn read_pdf(
    file: &mut File,
    shown: &str,
    size: u64,
    offset: u64,
    max_bytes: u64,
) -> Result<Option<ToolOutput>, ToolError> {
    if size > MAX_PDF_BYTES {
        return Ok(Some(ToolOutput::ok(format!(
            "`{shown}` is a PDF of {size} bytes, over the {} MB read_file extracts text from",
            MAX_PDF_BYTES / 1024 / 1024
        ))));
    }
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.take(MAX_PDF_BYTES).read_to_end(&mut bytes))
        .map_err(|error| ToolError::Failed(format!("`{shown}`: {error}")))?;
    let named_pdf = shown.to_ascii_lowercase().ends_with(".pdf");
    let pdf = match extract_pdf_text(&bytes) {
        // A parse that found no page at all did not find a PDF either.
        Ok(pdf) if pdf.pages == 0 && !named_pdf => return Ok(None),
        Ok(pdf) => pdf,
        Err(PdfProblem::Unreadable(_)) if !named_pdf => return Ok(None),
        Err(PdfProblem::Refused(reason) | PdfProblem::Unreadable(reason)) => {
            return Ok(Some(ToolOutput::ok(format!(
                "`{shown}` is a PDF ({size} bytes) whose text could not be extracted: {reason}"
            ))));
        }
    };
    if pdf.text.trim().is_empty() {
        return Ok(Some(ToolOutput::ok(format!(
            "`{shown}` is a PDF ({} pages, {size} bytes) with no extractable text (it may be scanned images)",
            pdf.pages
        ))));
    }
    let length = pdf.text.len() as u64;
    if offset > length {
        return Err(ToolError::InvalidArguments(format!(
            "read_file: `offset` {offset} is past the end of the text extracted from `{shown}` ({length} bytes)"
        )));
    }
    let mut start = offset as usize;
    while !pdf.text.is_char_boundary(start) {
        start += 1;
    }
    let mut end = start.saturating_add(max_bytes as usize).min(pdf.text.len());
    while !pdf.text.is_char_boundary(end) {
        end -= 1;
    }
    let mut output = format!(
        "[text extracted from the PDF `{shown}`: {} pages, {length} bytes of text]\n\n{}",
        pdf.pages,
        &pdf.text[start..end]
    );
    if pdf.pages_left_out > 0 {
        output.push_str(&format!(
            "\n\n[{} pages were left out: read_file extracts at most {MAX_PDF_PAGES} pages and {} MB of text]",
            pdf.pages_left_out,
            MAX_EXTRACTED_BYTES / 1024 / 1024
        ));
    }
    if end < pdf.text.len() {
        output.push_str(&format!(
            "\n\n[truncated: showing bytes {start}..{end} of the {length} bytes of extracted text; call read_file with offset={end} to continue]"
        ));
    }
    Ok(Some(ToolOutput::ok(output)))
}

/// What a binary file is, for the sentence that says it cannot be read: the MIME type its name
/// suggests, else what its first bytes say, else "unknown type".
pub fn binary_kind(name: &str, start: &[u8]) -> String {
    if let Some(mime) = mime_guess::from_path(name).first() {
        return mime.essence_str().to_string();
    }
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x89PNG", "image/png"),
        (b"\xFF\xD8\xFF", "image/jpeg"),
        (b"GIF8", "image/gif"),
        (b"OggS", "audio/ogg"),
        (b"PK\x03\x04", "a zip archive"),
        (b"\x1F\x8B", "gzip data"),
        (b"\x7FELF", "an executable"),
        (b"SQLite format 3\0", "an SQLite database"),
    ];
    SIGNATURES
        .iter()
        .find(|(magic, _)| start.starts_with(magic))
        .map(|(_, kind)| kind.to_string())
        .unwrap_or_else(|| "unknown type".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_that_claims_to_be_a_pdf_is_an_error_not_a_panic() {
        for bytes in [
            b"%PDF-1.4\n".to_vec(),
            b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF"
                .to_vec(),
            [b"%PDF-1.4\n".to_vec(), vec![0xFF; 4096]].concat(),
        ] {
            assert!(looks_like_pdf("x", &bytes));
            match extract_pdf_text(&bytes) {
                Ok(pdf) => assert!(pdf.text.is_empty() && pdf.pages == 0, "{pdf:?}"),
                Err(PdfProblem::Unreadable(reason)) => assert!(reason.contains("PDF"), "{reason}"),
                Err(PdfProblem::Refused(reason)) => panic!("refused: {reason}"),
            }
        }
        assert!(!looks_like_pdf("x", b"hello"));
    }

    #[test]
    fn only_a_file_named_pdf_may_have_bytes_before_its_magic() {
        assert!(looks_like_pdf("notes.txt", b"%PDF-1.7\n"));
        assert!(!looks_like_pdf("notes.txt", b"see %PDF-1.7 in the spec"));
        assert!(looks_like_pdf("scan.PDF", b"\xEF\xBB\xBF junk %PDF-1.7\n"));
        let far = [vec![b' '; 2000], b"%PDF-1.4".to_vec()].concat();
        assert!(!looks_like_pdf("scan.pdf", &far));
    }

    /// A PDF whose one stream is `content` with the dictionary `dictionary`.
    fn pdf_with_stream(dictionary: &str, content: &[u8]) -> Vec<u8> {
        [
            b"%PDF-1.7\n1 0 obj\n".to_vec(),
            dictionary.as_bytes().to_vec(),
            b"\nstream\n".to_vec(),
            content.to_vec(),
            b"\nendstream\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF\n".to_vec(),
        ]
        .concat()
    }

    fn zlib(bytes: &[u8]) -> Vec<u8> {
        use flate2::{Compression, write::ZlibEncoder};
        use std::io::Write;
        let mut encoder = ZlibEncoder::new(Vec::new(), Compression::best());
        encoder.write_all(bytes).expect("compressing into memory");
        encoder.finish().expect("compressing into memory")
    }

    #[test]
    fn a_stream_that_inflates_past_the_cap_refuses_the_pdf_quickly() {
        let zeros = vec![0u8; 40 * 1024 * 1024];
        let bomb = zlib(&zeros);
        drop(zeros);
        assert!(bomb.len() < 100 * 1024, "{} bytes", bomb.len());
        // However the filter is named: plainly, in an array, or with `#xx` escapes.
        for dictionary in [
            "<< /Length 99 /Filter /FlateDecode >>",
            "<< /Filter [ /FlateDecode ] >>",
            "<< /Filter /Fl#61teDecode >>",
            "<< /Length 5 0 R >>",
        ] {
            let pdf = pdf_with_stream(dictionary, &bomb);
            let started = std::time::Instant::now();
            match extract_pdf_text(&pdf) {
                Err(PdfProblem::Refused(reason)) => {
                    assert!(reason.contains("more than 32 MB"), "{reason}")
                }
                other => panic!("{dictionary}: {other:?}"),
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
        }
    }

    #[test]
    fn many_streams_together_are_capped_and_small_ones_pass() {
        let stream = zlib(&vec![b'a'; 20 * 1024 * 1024]);
        let mut pdf = b"%PDF-1.7\n".to_vec();
        for number in 1..=7 {
            pdf.extend_from_slice(
                format!("{number} 0 obj << /Filter /FlateDecode >>\nstream\n").as_bytes(),
            );
            pdf.extend_from_slice(&stream);
            pdf.extend_from_slice(b"\nendstream\nendobj\n");
        }
        let reason = check_decompressed_sizes(&pdf).expect_err("140 MB in all");
        assert!(reason.contains("more than 128 MB"), "{reason}");
        let small = pdf_with_stream("<< /Filter /FlateDecode >>", &zlib(b"BT (hello) Tj ET"));
        assert_eq!(check_decompressed_sizes(&small), Ok(()));
    }

    #[test]
    fn lzw_and_ascii85_wrapped_bombs_are_refused() {
        let lzw = pdf_with_stream("<< /Filter /LZW#44ecode >>", b"\x80\x0b\x60\x50");
        let reason = check_decompressed_sizes(&lzw).expect_err("LZW");
        assert!(reason.contains("LZWDecode"), "{reason}");
        // ASCII85 of the compressed bomb, then inflated: the chain is checked too.
        let bomb = zlib(&vec![0u8; 40 * 1024 * 1024]);
        let mut ascii85 = String::new();
        for chunk in bomb.chunks(4) {
            let mut group = [0u8; 4];
            group[..chunk.len()].copy_from_slice(chunk);
            let mut value = u32::from_be_bytes(group) as u64;
            let mut digits = [0u8; 5];
            for digit in digits.iter_mut().rev() {
                *digit = (value % 85) as u8 + b'!';
                value /= 85;
            }
            ascii85.push_str(std::str::from_utf8(&digits[..chunk.len() + 1]).expect("ascii"));
        }
        ascii85.push_str("~>");
        let pdf = pdf_with_stream(
            "<< /Filter [/ASCII85Decode /FlateDecode] >>",
            ascii85.as_bytes(),
        );
        let reason = check_decompressed_sizes(&pdf).expect_err("ASCII85 + Flate bomb");
        assert!(reason.contains("more than 32 MB"), "{reason}");
    }

    #[test]
    fn binary_files_are_named_by_their_name_or_their_bytes() {
        assert_eq!(binary_kind("photo.png", b""), "image/png");
        assert_eq!(binary_kind("inbox/5-voice-9.ogg", b""), "audio/ogg");
        assert_eq!(binary_kind("blob", b"OggS\0"), "audio/ogg");
        assert_eq!(binary_kind("blob", b"\0\0"), "unknown type");
    }
}
