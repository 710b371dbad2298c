//! Target `local_embeddings` (issue #33), included by `tests/fuzz.rs`: a local model directory
//! whose `config.json` or `tokenizer.json` is mangled, and arbitrary text through the tokenizer
//! and the model, with the real small model (`testkit::test_model`, all-MiniLM-L6-v2).
//!
//! Entry point: `memory::local::model::SentenceModel::load` (what the daemon's local embedder
//! calls on first use) and `SentenceModel::embed_batch` (every save, search and re-embedding).
//! Beyond "no panic": a refused directory's error names the file that is wrong (`config.json`,
//! `tokenizer.json`, or `model.safetensors` when the config does not describe its weights); a
//! model that loads embeds a batch of texts of different lengths (so padding runs) into one
//! finite vector per text of the config's dimension, or says why not; any text through the real
//! model (empty, huge, controls, joiners, lone combining marks) gives one finite unit vector of
//! 384 values.
//!
//! Corpus: `tests/fuzz_corpus/local_embeddings/` holds texts (one per file) replayed through the
//! real model; then the fixed configs and tokenizer of `known_bad_*` (a zero head count once
//! divided by zero inside the encoder). Cases per run: 16 configs, 8 tokenizers, 16 text batches
//! (a case runs the real model: tenths of a second each on a loaded 2-core machine).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clawvisor::memory::local::model::SentenceModel;
use clawvisor::testkit::test_model::minilm_dir;
use serde_json::Value;

use super::json_edits::{self, JsonEdit};
use super::*;

pub const REGRESSIONS: &str = "tests/fuzz_corpus/proptest-regressions/local_embeddings.txt";

/// The real model, loaded once for the text cases.
fn model() -> &'static SentenceModel {
    static MODEL: OnceLock<SentenceModel> = OnceLock::new();
    MODEL.get_or_init(|| SentenceModel::load(&minilm_dir()).expect("the test model loads"))
}

/// The real model directory's JSON file `name`, parsed.
fn original(name: &str) -> Value {
    static FILES: OnceLock<(Value, Value)> = OnceLock::new();
    let (config, tokenizer) = FILES.get_or_init(|| {
        let read = |file: &str| -> Value {
            serde_json::from_str(&std::fs::read_to_string(minilm_dir().join(file)).unwrap())
                .unwrap()
        };
        (read("config.json"), read("tokenizer.json"))
    });
    if name == "config.json" {
        config.clone()
    } else {
        tokenizer.clone()
    }
}

/// A copy of the model directory (the weights linked, not copied) with `file` replaced by `text`.
fn directory_with(scratch: &Path, file: &str, text: &str) -> PathBuf {
    let source = minilm_dir();
    let dir = scratch.join("model");
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    for name in [
        "config.json",
        "tokenizer.json",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ] {
        std::fs::copy(source.join(name), dir.join(name)).unwrap();
    }
    std::os::unix::fs::symlink(
        source.join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    std::fs::write(dir.join(file), text).unwrap();
    dir
}

/// One broken file: JSON edits of the real one, then (sometimes) edits below its syntax.
#[derive(Debug, Clone)]
pub struct Mangled {
    json: Vec<JsonEdit>,
    text: Vec<TextEdit>,
}

impl Mangled {
    fn render(&self, file: &str) -> String {
        let mut document = original(file);
        for edit in &self.json {
            edit.apply(&mut document);
        }
        let mut text = document.to_string();
        for edit in &self.text {
            edit.apply(&mut text);
        }
        text
    }
}

/// Keys a BERT config and a tokenizer file have, so that inserts hit real fields.
const KEYS: &[&str] = &[
    "hidden_size",
    "num_attention_heads",
    "num_hidden_layers",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "type_vocab_size",
    "pad_token_id",
    "hidden_act",
    "layer_norm_eps",
    "position_embedding_type",
    "model",
    "vocab",
    "type",
    "normalizer",
    "pre_tokenizer",
    "post_processor",
    "decoder",
    "truncation",
    "padding",
    "added_tokens",
    "unk_token",
    "continuing_subword_prefix",
    "max_input_chars_per_word",
];

fn mangled() -> impl Strategy<Value = Mangled> {
    let keys = prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-z_]{1,10}".prop_map(String::from),
    ];
    let strings = prop_oneof![
        prop::sample::select(vec![
            "gelu",
            "relu",
            "BertNormalizer",
            "WordPiece",
            "[UNK]",
            ""
        ])
        .prop_map(str::to_string),
        tricky_text(),
    ];
    let values = json_edits::value(strings, keys.clone());
    (
        prop::collection::vec(json_edits::edit(values, keys), 1..4),
        prop::collection::vec(
            text_edit(prop_oneof!["[{}\\[\\]\",:0-9]{1,3}", tricky_text()]),
            0..2,
        ),
    )
        .prop_map(|(json, text)| Mangled { json, text })
}

/// The files an error may name (the one that is wrong, or the weights the config must describe).
const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The property for a directory whose `file` is `text`.
pub fn check_directory(file: &str, text: &str) -> Result<(), TestCaseError> {
    let scratch = tempfile::tempdir().unwrap();
    let dir = directory_with(scratch.path(), file, text);
    match SentenceModel::load(&dir) {
        Err(error) => {
            prop_assert!(
                FILES.iter().any(|name| error.contains(name)),
                "the error names no file of the model: {}",
                error
            );
        }
        Ok(model) => {
            let texts = ["hi", "a longer sentence about the dentist's practice", ""];
            match model.embed_batch(&texts) {
                Ok(vectors) => {
                    prop_assert_eq!(vectors.len(), texts.len());
                    for vector in &vectors {
                        prop_assert_eq!(vector.len(), model.dimension());
                        prop_assert!(
                            vector.iter().all(|value| value.is_finite()),
                            "a value is not finite"
                        );
                    }
                }
                Err(error) => prop_assert!(!error.trim().is_empty()),
            }
        }
    }
    Ok(())
}

/// Config changes that break a BERT's arithmetic rather than its syntax, tried on every run.
pub fn known_bad_configs() -> Vec<String> {
    let cases: [(&str, Value); 9] = [
        ("num_attention_heads", Value::from(0)),
        ("num_attention_heads", Value::from(5)),
        ("hidden_size", Value::from(0)),
        ("vocab_size", Value::from(0)),
        ("vocab_size", Value::from(10)),
        ("max_position_embeddings", Value::from(0)),
        ("type_vocab_size", Value::from(0)),
        ("pad_token_id", Value::from(u64::MAX)),
        ("hidden_act", Value::from("no-such-activation")),
    ];
    cases
        .into_iter()
        .map(|(key, value)| {
            let mut config = original("config.json");
            config[key] = value;
            config.to_string()
        })
        .collect()
}

/// A tokenizer whose vocabulary maps words past the model's embedding table.
pub fn known_bad_tokenizers() -> Vec<String> {
    let mut tokenizer = original("tokenizer.json");
    tokenizer["model"]["vocab"]["hi"] = Value::from(4_000_000_000u64);
    tokenizer["model"]["vocab"]["the"] = Value::from(30_522);
    vec![tokenizer.to_string()]
}

/// The property for texts through the real model: one finite unit vector of 384 values each.
pub fn check_texts(texts: &[String]) -> Result<(), TestCaseError> {
    let borrowed: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = model().embed_batch(&borrowed);
    prop_assert!(vectors.is_ok(), "{:?}", vectors.err());
    let vectors = vectors.unwrap_or_default();
    prop_assert_eq!(vectors.len(), texts.len());
    for vector in &vectors {
        prop_assert_eq!(vector.len(), 384);
        prop_assert!(vector.iter().all(|value| value.is_finite()));
        let length = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
        prop_assert!((length - 1.0).abs() < 1e-3, "length {}", length);
    }
    Ok(())
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => tricky_text(),
        2 => "\\PC{0,64}".prop_map(String::from),
        1 => (tricky_text(), 200usize..3000).prop_map(|(piece, times)| {
            let piece = if piece.is_empty() { "word ".to_string() } else { piece };
            piece.repeat(times)
        }),
        1 => prop::sample::select(vec!["", " ", "\u{0}", "\u{0301}", "\u{FFFD}", "\u{FEFF}\u{200D}"])
            .prop_map(str::to_string),
    ]
}

pub fn texts() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(text(), 1..4)
}

pub fn configs() -> impl Strategy<Value = Mangled> {
    mangled()
}

pub fn render(mangled: &Mangled, file: &str) -> String {
    mangled.render(file)
}
