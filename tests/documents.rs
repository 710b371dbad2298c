//! `read_file` on documents a user sent: a real PDF (written here, byte offsets and all) is read
//! as its text, paged like any file; a broken PDF and other binary files get a clear sentence;
//! and end to end, a PDF sent to the bot is saved and its text reaches the model.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use clawvisor::domain::ChatKey;
use clawvisor::registry::Registry;
use clawvisor::store::{Store, StoreOptions};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::world::World;
use clawvisor::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSettings};
use clawvisor::tools::files::ReadFileTool;

/// A PDF with one page per text, in Helvetica, as a PDF writer would lay it out: header,
/// numbered objects, a cross-reference table with each object's byte offset, and the trailer.
fn pdf_with_pages(pages: &[&str]) -> Vec<u8> {
    pdf_with_page_streams(pages, false)
}

/// The same PDF, its page contents compressed with `/FlateDecode` when `compress` is set (its
/// text can then be longer than the file).
fn pdf_with_page_streams(pages: &[&str], compress: bool) -> Vec<u8> {
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        String::new(), // the page tree, once the pages' numbers are known
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
    ];
    let mut kids = Vec::new();
    for text in pages {
        let page_number = objects.len() + 1;
        // A hex string, as many writers emit: the words are not in the file's bytes as text, so
        // only a real extraction finds them.
        let hex: String = text.bytes().map(|byte| format!("{byte:02X}")).collect();
        let content = format!("BT /F1 12 Tf 72 720 Td <{hex}> Tj ET");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            page_number + 1
        ));
        let (filter, content) = if compress {
            (" /Filter /FlateDecode", zlib(content.as_bytes()))
        } else {
            ("", content.into_bytes())
        };
        // Binary content goes in as Latin-1 characters, one per byte, and is written back so.
        let content: String = content.iter().map(|&byte| byte as char).collect();
        objects.push(format!(
            "<< /Length {}{filter} >>\nstream\n{content}\nendstream",
            content.chars().count()
        ));
        kids.push(format!("{page_number} 0 R"));
    }
    objects[1] = format!(
        "<< /Type /Pages /Kids [{}] /Count {} >>",
        kids.join(" "),
        pages.len()
    );
    let mut pdf = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
    let mut offsets = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        let object = format!("{} 0 obj\n{object}\nendobj\n", index + 1);
        pdf.extend(object.chars().map(|character| character as u32 as u8));
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
}

impl Fixture {
    fn new(settings: ToolSettings) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(workspace.join("inbox")).unwrap();
        let store = Store::open(&dir.path().join("clawvisor.db"), StoreOptions::default()).unwrap();
        let ctx = ToolContext {
            agent: "tester".to_string(),
            chat: ChatKey::cli("test"),
            run_id: 1,
            workspace,
            settings: Arc::new(settings),
            registry: Registry::new(),
            store,
            cancel: CancellationToken::new(),
            timezone: chrono_tz::Tz::UTC,
            egress: Default::default(),
        };
        Fixture { _dir: dir, ctx }
    }

    fn write(&self, path: &str, bytes: &[u8]) {
        std::fs::write(self.ctx.workspace.join(path), bytes).unwrap();
    }

    async fn read(&self, args: Value) -> Result<ToolOutput, ToolError> {
        tokio::time::timeout(Duration::from_secs(30), ReadFileTool.call(args, &self.ctx))
            .await
            .expect("read_file returns within 30 s")
    }

    async fn text(&self, args: Value) -> String {
        match self.read(args).await {
            Ok(output) if !output.is_error => output.text,
            other => panic!("expected text, got {other:?}"),
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.ctx.store.stop_writer();
    }
}

#[tokio::test]
async fn a_pdf_is_read_as_its_text_page_after_page() {
    let fixture = Fixture::new(ToolSettings::default());
    let pdf = pdf_with_pages(&["Invoice 2026-117 for Ada Lovelace", "Total due: 42 EUR"]);
    fixture.write("inbox/7-invoice.pdf", &pdf);
    let text = fixture.text(json!({"path": "inbox/7-invoice.pdf"})).await;
    assert!(
        text.starts_with("[text extracted from the PDF `inbox/7-invoice.pdf`: 2 pages,"),
        "{text}"
    );
    let first = text.find("Invoice 2026-117 for Ada Lovelace").expect(&text);
    let second = text.find("Total due: 42 EUR").expect(&text);
    assert!(first < second, "{text}");
    assert!(!text.contains("%PDF") && !text.contains("endobj"), "{text}");
}

/// The extracted text of one `read_file` answer (between its heading and any truncation note),
/// and the offset to continue at, if it was truncated.
fn page_of_text(answer: &str) -> (String, Option<u64>) {
    let (_, rest) = answer
        .split_once("]\n\n")
        .unwrap_or_else(|| panic!("a heading in {answer}"));
    match rest.split_once("\n\n[truncated: ") {
        Some((body, note)) => {
            let next = note
                .split_once("offset=")
                .and_then(|(_, tail)| tail.split(' ').next())
                .and_then(|number| number.parse().ok())
                .unwrap_or_else(|| panic!("a continuation offset in {note}"));
            (body.to_string(), Some(next))
        }
        None => (rest.to_string(), None),
    }
}

#[tokio::test]
async fn a_long_pdf_text_is_paged_with_offsets_into_the_text() {
    let pages: Vec<String> = (1..=6)
        .map(|n| format!("Chapter {n} begins here"))
        .collect();
    let pages: Vec<&str> = pages.iter().map(String::as_str).collect();
    let pdf = pdf_with_pages(&pages);
    let whole = Fixture::new(ToolSettings::default());
    whole.write("book.pdf", &pdf);
    let (all, more) = page_of_text(&whole.text(json!({"path": "book.pdf"})).await);
    assert_eq!(more, None);

    let fixture = Fixture::new(ToolSettings {
        read_max_bytes: 40,
        ..ToolSettings::default()
    });
    fixture.write("book.pdf", &pdf);
    let mut joined = String::new();
    let mut offset = 0;
    let mut reads = 0;
    loop {
        let answer = fixture
            .text(json!({"path": "book.pdf", "offset": offset}))
            .await;
        let (body, next) = page_of_text(&answer);
        assert!(body.len() <= 40, "{answer}");
        joined.push_str(&body);
        reads += 1;
        match next {
            Some(next) => offset = next,
            None => break,
        }
        assert!(reads < 20, "paging ends");
    }
    assert!(reads >= 4, "{reads} reads");
    assert_eq!(joined, all, "the pages add up to the whole text");
    for page in pages {
        assert!(all.contains(page), "{all}");
    }
}

#[tokio::test]
async fn broken_pdfs_and_binary_files_are_named_not_dumped() {
    let fixture = Fixture::new(ToolSettings::default());
    let mut broken = pdf_with_pages(&["never seen"]);
    broken.truncate(60);
    fixture.write("broken.pdf", &broken);
    let text = fixture.text(json!({"path": "broken.pdf"})).await;
    assert!(
        text.contains("`broken.pdf` is a PDF") && text.contains("could not be extracted"),
        "{text}"
    );

    let mut voice = b"OggS\0\x02\0\0".to_vec();
    voice.extend(std::iter::repeat_n(7u8, 500));
    fixture.write("inbox/3-voice-12.ogg", &voice);
    let text = fixture.text(json!({"path": "inbox/3-voice-12.ogg"})).await;
    assert_eq!(
        text,
        "`inbox/3-voice-12.ogg` is a binary file (audio/ogg, 508 bytes); read_file can't read it as text (it reads text files and extracts the text of PDFs)"
    );
    fixture.write("blob", b"\x7FELF\0\0\0\x01");
    let text = fixture.text(json!({"path": "blob"})).await;
    assert!(
        text.contains("binary file (an executable, 8 bytes)"),
        "{text}"
    );
}

#[tokio::test]
async fn a_pdf_bomb_is_refused_and_the_next_read_still_works() {
    let fixture = Fixture::new(ToolSettings::default());
    // 40 MB of zeros compress to about 40 KB; lopdf would inflate them all in memory.
    let mut bomb = b"%PDF-1.7\n1 0 obj\n<< /Filter [ /FlateDecode ] >>\nstream\n".to_vec();
    bomb.extend(zlib(&vec![0u8; 40 * 1024 * 1024]));
    bomb.extend_from_slice(b"\nendstream\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF\n");
    assert!(bomb.len() < 100 * 1024);
    fixture.write("inbox/9-bomb.pdf", &bomb);
    let text = fixture.text(json!({"path": "inbox/9-bomb.pdf"})).await;
    assert!(
        text.contains("expands to more than 32 MB when decompressed; not read"),
        "{text}"
    );
    fixture.write("inbox/10-fine.pdf", &pdf_with_pages(&["Still reading"]));
    let text = fixture.text(json!({"path": "inbox/10-fine.pdf"})).await;
    assert!(text.contains("Still reading"), "{text}");
}

#[tokio::test]
async fn only_files_starting_with_the_magic_are_pdfs_and_failed_ones_are_read_as_text() {
    let fixture = Fixture::new(ToolSettings::default());
    fixture.write(
        "spec.txt",
        b"A PDF file starts with %PDF-1.7 and a comment.\n",
    );
    let text = fixture.text(json!({"path": "spec.txt"})).await;
    assert_eq!(text, "A PDF file starts with %PDF-1.7 and a comment.\n");
    // It starts like a PDF but is not one, and is not named one: it is read as the text it is.
    fixture.write("notes.md", b"%PDF-1.7 is the header line of a PDF.\n");
    let text = fixture.text(json!({"path": "notes.md"})).await;
    assert_eq!(text, "%PDF-1.7 is the header line of a PDF.\n");
}

#[tokio::test]
async fn a_pdf_offset_may_pass_the_file_size_when_its_text_is_longer() {
    let long_page = "All work and no play makes Jack a dull boy. ".repeat(200);
    let pdf = pdf_with_page_streams(&[&long_page], true);
    assert!(pdf.len() < 3000, "{} bytes", pdf.len());
    let fixture = Fixture::new(ToolSettings {
        read_max_bytes: 1000,
        ..ToolSettings::default()
    });
    fixture.write("jack.pdf", &pdf);
    let offset = pdf.len() as u64 + 2000;
    let answer = fixture
        .text(json!({"path": "jack.pdf", "offset": offset}))
        .await;
    let (body, _) = page_of_text(&answer);
    assert!(body.contains("Jack a dull boy"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_sent_on_telegram_is_saved_and_read_by_the_agent() {
    const USER: i64 = 42;
    let w = World::builder(Script::new().rule(Rule::text("Hello.")))
        .agent_with_bot(
            "alpha",
            "tools = [\"read_file\"]",
            "100:AAH-documents-test-token-0000",
            &[USER],
            &[],
        )
        .start()
        .await;
    let bot = w.bot("alpha");
    // The fake numbers updates in order: the document will be the update after this one.
    let first = w.fake.push_message(bot, USER, USER, "hi");
    w.fake
        .wait_for_sent(bot, |m| m.visible_text == "Hello.", Duration::from_secs(30))
        .await
        .expect("the greeting is answered");
    let saved = format!("inbox/{}-invoice.pdf", first.update_id + 1);
    w.llm.set_script(
        Script::new()
            .rule(
                Rule::text("The invoice is for 42 EUR.")
                    .when_last_tool_result_contains("Total due: 42 EUR"),
            )
            .rule(
                Rule::tool_call("read_file", json!({"path": saved}).to_string())
                    .when_last_user_contains(&saved),
            ),
    );
    let pdf = pdf_with_pages(&["Invoice 2026-117", "Total due: 42 EUR"]);
    assert!(!String::from_utf8_lossy(&pdf).contains("Total due"));
    let pushed = w.fake.push_document(
        bot,
        USER,
        USER,
        "invoice.pdf",
        pdf.clone(),
        Some("what do I owe?"),
    );
    assert_eq!(pushed.update_id, first.update_id + 1);
    w.fake
        .wait_for_sent(
            bot,
            |m| m.visible_text == "The invoice is for 42 EUR.",
            Duration::from_secs(30),
        )
        .await
        .expect("the agent read the PDF and answered from it");
    let workspace = w.harness.dir.path().join("data/workspaces/alpha");
    assert_eq!(std::fs::read(workspace.join(&saved)).unwrap(), pdf);
    w.harness.stop().await;
}
