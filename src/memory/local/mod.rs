//! Local embeddings: a sentence-embedding model run on the CPU inside the daemon (no key, no
//! service), loaded on first use and unloaded after an idle period.
//!
//! [`LocalEmbedder`] is what memory holds in local mode (`[memory] embeddings = "local"`). The
//! model ([`model::SentenceModel`]: candle's BERT encoder, the tokenizers crate, both pure Rust) is
//! read from `local_model` the first time something is embedded — all but its word table, which
//! stays in the file and is read per looked-up row (`words`); texts are embedded in batches of
//! `batch_size` on tokio's blocking threads. A task started with the load drops the model once
//! nothing was embedded for `idle_unload` and hands the freed heap and the code it ran back to
//! the system ([`crate::resident::release_after_large_work`]), so an idle daemon's footprint is
//! what it was without it (large buffers live in their own mappings: `resident::configure_malloc`).
//! [`fetch`] downloads a known model with checked SHA-256 sums (`clawvisor memory fetch-model`).
//!
//! Invariants: the model is loaded at most once at a time (the slot's lock is held while
//! loading); a call that started with the model keeps it (an `Arc`) until it ends, even if the
//! idle task unloads it meanwhile; every vector handed back is finite and of one dimension.

pub mod fetch;
pub mod model;
mod words;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use model::SentenceModel;

/// Where `fetch-model` puts models and where a bare `local_model` name is looked for.
pub fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

/// `local_model` as a directory: absolute as given, otherwise under `<data dir>/models/`.
pub fn model_dir(data_dir: &Path, local_model: &str) -> PathBuf {
    let path = Path::new(local_model.trim());
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        models_dir(data_dir).join(path)
    }
}

/// The name memory records with each vector of a local model: `local:<directory name>`.
pub fn model_name(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    format!("local:{name}")
}

/// The settings of a local embedder (from `[memory]`).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSettings {
    pub dir: PathBuf,
    /// Texts per forward pass.
    pub batch_size: usize,
    /// The model is dropped after this long without use.
    pub idle_unload: Duration,
}

/// The loaded model (if any) and when it was last used.
struct Slot {
    model: Option<Arc<SentenceModel>>,
    last_used: Instant,
    /// How often the model was loaded (for stats and tests).
    loads: u64,
    /// Whether the idle task runs (it ends when it unloads the model).
    watching: bool,
    /// Embedding calls running now: the model is not idle while one runs, however long it takes
    /// (a batch on a slow machine can outlast a short `idle_unload`).
    in_use: usize,
}

/// A local model, loaded when needed. Cheap to share behind an `Arc`.
pub struct LocalEmbedder {
    settings: LocalSettings,
    name: String,
    slot: Arc<Mutex<Slot>>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LocalEmbedder")
            .field("name", &self.name)
            .field("dir", &self.settings.dir)
            .finish()
    }
}

/// Locks the slot; a poisoned lock (a panic while it was held) still holds a consistent slot,
/// because every change to it is a single assignment.
fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LocalEmbedder {
    /// An embedder for the model in `settings.dir`; nothing is read until the first embedding.
    pub fn new(settings: LocalSettings) -> LocalEmbedder {
        let name = model_name(&settings.dir);
        LocalEmbedder {
            settings: LocalSettings {
                batch_size: settings.batch_size.max(1),
                ..settings
            },
            name,
            slot: Arc::new(Mutex::new(Slot {
                model: None,
                last_used: Instant::now(),
                loads: 0,
                watching: false,
                in_use: 0,
            })),
        }
    }

    /// `local:<directory name>`, recorded with each vector.
    pub fn model(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.settings.dir
    }

    /// Whether the model is in memory now.
    pub fn is_loaded(&self) -> bool {
        lock(&self.slot).model.is_some()
    }

    /// How often the model was loaded since start.
    pub fn loads(&self) -> u64 {
        lock(&self.slot).loads
    }

    /// Drops the model now (the next embedding loads it again).
    pub fn unload(&self) {
        let dropped = lock(&self.slot).model.take();
        if dropped.is_some() {
            drop(dropped);
            crate::resident::release_after_large_work();
            tracing::info!(model = %self.name, "memory: local embeddings model unloaded");
        }
    }

    /// Embeds one text.
    pub async fn embed_one(&self, text: &str) -> Result<Vec<f32>, String> {
        let mut vectors = self.embed(vec![text.to_string()]).await?;
        vectors
            .pop()
            .ok_or_else(|| "the local model returned no vector".to_string())
    }

    /// Embeds `texts` (one vector per text, same order) in batches, on a blocking thread.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, String> {
        if let Some(index) = texts.iter().position(|text| text.trim().is_empty()) {
            return Err(format!("text {index} is empty; there is nothing to embed"));
        }
        let slot = self.slot.clone();
        let settings = self.settings.clone();
        let vectors = tokio::task::spawn_blocking(move || embed_blocking(&slot, &settings, &texts))
            .await
            .map_err(|error| format!("the local embeddings task failed: {error}"))??;
        self.watch_idle();
        Ok(vectors)
    }

    /// Starts the task that unloads the model after `idle_unload` without use (one at a time).
    fn watch_idle(&self) {
        {
            let mut slot = lock(&self.slot);
            if slot.watching || slot.model.is_none() {
                return;
            }
            slot.watching = true;
        }
        let slot = self.slot.clone();
        let idle = self.settings.idle_unload;
        let name = self.name.clone();
        tokio::spawn(async move {
            loop {
                let due = {
                    let guard = lock(&slot);
                    if guard.in_use > 0 {
                        Instant::now() + idle
                    } else {
                        guard.last_used + idle
                    }
                };
                tokio::time::sleep_until(due.into()).await;
                let dropped = {
                    let mut guard = lock(&slot);
                    if guard.in_use > 0 || guard.last_used + idle > Instant::now() {
                        continue;
                    }
                    guard.watching = false;
                    guard.model.take()
                };
                if dropped.is_some() {
                    drop(dropped);
                    crate::resident::release_after_large_work();
                    tracing::info!(model = %name, idle = ?idle, "memory: local embeddings model unloaded after being idle");
                }
                return;
            }
        });
    }
}

/// The model, loaded now if it is not; the lock is held while loading so it loads once.
fn loaded(slot: &Mutex<Slot>, dir: &Path) -> Result<Arc<SentenceModel>, String> {
    let mut guard = lock(slot);
    guard.last_used = Instant::now();
    if let Some(model) = &guard.model {
        return Ok(model.clone());
    }
    let started = Instant::now();
    let model = Arc::new(SentenceModel::load(dir)?);
    // Loading held the file's bytes and the tensors at once, and ran code (the tokenizer's and
    // the weights' parsers) that embedding never runs again: both go back.
    crate::resident::release_after_large_work();
    tracing::info!(
        dir = %dir.display(),
        dimension = model.dimension(),
        took_ms = started.elapsed().as_millis() as u64,
        "memory: local embeddings model loaded"
    );
    guard.model = Some(model.clone());
    guard.loads += 1;
    guard.last_used = Instant::now();
    Ok(model)
}

/// Counts an embedding call in `Slot::in_use` while it lives (errors and panics included).
struct InUse<'a>(&'a Mutex<Slot>);

impl<'a> InUse<'a> {
    fn enter(slot: &'a Mutex<Slot>) -> InUse<'a> {
        lock(slot).in_use += 1;
        InUse(slot)
    }
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        let mut guard = lock(self.0);
        guard.in_use = guard.in_use.saturating_sub(1);
        guard.last_used = Instant::now();
    }
}

/// Embeds on the current (blocking) thread, batch by batch, and checks every vector.
fn embed_blocking(
    slot: &Mutex<Slot>,
    settings: &LocalSettings,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, String> {
    let _in_use = InUse::enter(slot);
    let model = loaded(slot, &settings.dir)?;
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(settings.batch_size) {
        let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
        vectors.extend(model.embed_batch(&batch)?);
        lock(slot).last_used = Instant::now();
    }
    if vectors.len() != texts.len() {
        return Err(format!(
            "the local model returned {} vectors for {} texts",
            vectors.len(),
            texts.len()
        ));
    }
    for (index, vector) in vectors.iter().enumerate() {
        if vector.len() != model.dimension() || vector.iter().any(|value| !value.is_finite()) {
            return Err(format!(
                "the local model produced an unusable vector for text {index}"
            ));
        }
    }
    Ok(vectors)
}
