//! What `read_file` does with files that are not text: the text of a PDF (extracted with the
//! pure-Rust `pdf-extract`, over `lopdf`), and a clear sentence for any other binary file.
//!
//! PDFs come from users (a document sent in the chat) and are untrusted: extraction runs under
//! `catch_unwind` (the crate has panicking paths on malformed files; the daemon is built with
//! `panic = "unwind"`), on files of at most [`MAX_PDF_BYTES`], page by page up to
//! [`MAX_PDF_PAGES`] and [`MAX_EXTRACTED_BYTES`] of text. It runs on the blocking pool under the
//! file tools' timeout, like every file tool.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::tools::{ToolError, ToolOutput};

/// A PDF starts with `%PDF-`, possibly after some junk (readers look in the first kilobyte).
const PDF_MAGIC: &[u8] = b"%PDF-";
const PDF_MAGIC_WINDOW: usize = 1024;
/// Larger PDFs are not parsed (their text would not fit in a model's context anyway).
pub const MAX_PDF_BYTES: u64 = 64 * 1024 * 1024;
/// Pages extracted at most.
pub const MAX_PDF_PAGES: usize = 2000;
/// Extraction stops once this much text is collected.
pub const MAX_EXTRACTED_BYTES: usize = 8 * 1024 * 1024;

/// Whether the start of a file says it is a PDF.
pub fn looks_like_pdf(start: &[u8]) -> bool {
    let window = &start[..start.len().min(PDF_MAGIC_WINDOW)];
    window
        .windows(PDF_MAGIC.len())
        .any(|candidate| candidate == PDF_MAGIC)
}

/// The text of a PDF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfText {
    pub text: String,
    pub pages: usize,
    /// Pages not extracted because of [`MAX_PDF_PAGES`] or [`MAX_EXTRACTED_BYTES`].
    pub pages_left_out: usize,
}

/// Extracts the text of a PDF held in memory, page by page; never panics.
pub fn extract_pdf_text(bytes: &[u8]) -> Result<PdfText, String> {
    match catch_unwind(AssertUnwindSafe(|| extract_pages(bytes))) {
        Ok(result) => result,
        Err(_) => Err("the PDF is malformed (its parser gave up)".to_string()),
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
/// `max_bytes`, headed by what it is; a PDF whose text cannot be had says why.
pub fn read_pdf(
    mut file: File,
    shown: &str,
    size: u64,
    offset: u64,
    max_bytes: u64,
) -> Result<ToolOutput, ToolError> {
    if size > MAX_PDF_BYTES {
        return Ok(ToolOutput::ok(format!(
            "`{shown}` is a PDF of {size} bytes, over the {} MB read_file extracts text from",
            MAX_PDF_BYTES / 1024 / 1024
        )));
    }
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.take(MAX_PDF_BYTES).read_to_end(&mut bytes))
        .map_err(|error| ToolError::Failed(format!("`{shown}`: {error}")))?;
    let pdf = match extract_pdf_text(&bytes) {
        Ok(pdf) => pdf,
        Err(reason) => {
            return Ok(ToolOutput::ok(format!(
                "`{shown}` is a PDF ({size} bytes) whose text could not be extracted: {reason}"
            )));
        }
    };
    if pdf.text.trim().is_empty() {
        return Ok(ToolOutput::ok(format!(
            "`{shown}` is a PDF ({} pages, {size} bytes) with no extractable text (it may be scanned images)",
            pdf.pages
        )));
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
    Ok(ToolOutput::ok(output))
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
            assert!(looks_like_pdf(&bytes));
            match extract_pdf_text(&bytes) {
                Ok(pdf) => assert!(pdf.text.is_empty() && pdf.pages == 0, "{pdf:?}"),
                Err(reason) => assert!(reason.contains("PDF"), "{reason}"),
            }
        }
        assert!(!looks_like_pdf(b"hello"));
    }

    #[test]
    fn binary_files_are_named_by_their_name_or_their_bytes() {
        assert_eq!(binary_kind("photo.png", b""), "image/png");
        assert_eq!(binary_kind("inbox/5-voice-9.ogg", b""), "audio/ogg");
        assert_eq!(binary_kind("blob", b"OggS\0"), "audio/ogg");
        assert_eq!(binary_kind("blob", b"\0\0"), "unknown type");
    }
}
