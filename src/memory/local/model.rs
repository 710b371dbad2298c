//! One sentence-embedding model on the CPU: a BERT-family encoder (candle) with its tokenizer,
//! pooled and normalised the way sentence-transformers does it.
//!
//! The model directory has the common layout: `config.json` (a BERT config), `tokenizer.json`
//! and `model.safetensors`; optionally sentence-transformers' `modules.json` (is there a
//! `Normalize` module?), `1_Pooling/config.json` (mean, CLS, max or mean-sqrt-len pooling) and
//! `sentence_bert_config.json` (`max_seq_length`). Without them: mean pooling, normalised, up to
//! 512 tokens (what all-MiniLM-L6-v2, bge-small and e5-small expect, bge saying CLS in its
//! pooling file).
//!
//! Invariants: every error names the file that is missing or wrong; every vector handed back
//! is finite and of the model's dimension (unit length when the model normalises). Pure CPU work:
//! callers run it off the async threads.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};
use candle_transformers::models::bert::{BertEncoder, Config as BertConfig};
use serde::Deserialize;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::words::{Header, WordTable};

/// The files a model directory must have.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// How token vectors become one sentence vector (sentence-transformers' `Pooling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    Mean,
    Cls,
    Max,
    MeanSqrtLen,
}

/// `1_Pooling/config.json`, the fields that choose the pooling.
#[derive(Debug, Default, Deserialize)]
struct PoolingFile {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

/// One entry of `modules.json`.
#[derive(Debug, Deserialize)]
struct ModuleEntry {
    #[serde(default)]
    path: String,
    #[serde(default, rename = "type")]
    kind: String,
}

/// `sentence_bert_config.json`.
#[derive(Debug, Deserialize)]
struct SentenceBertFile {
    max_seq_length: Option<usize>,
}

/// A loaded model, ready to embed: the encoder's weights in memory, the word table read from the
/// file per lookup ([`WordTable`]). The embedding step is BERT's (candle-transformers'
/// `BertEmbeddings`, whose word table would be held in memory): word + token type + position,
/// then the layer norm.
pub struct SentenceModel {
    words: WordTable,
    positions: Embedding,
    token_types: Embedding,
    layer_norm: LayerNorm,
    encoder: BertEncoder,
    tokenizer: Tokenizer,
    pooling: Pooling,
    normalize: bool,
    dimension: usize,
}

impl std::fmt::Debug for SentenceModel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SentenceModel")
            .field("pooling", &self.pooling)
            .field("normalize", &self.normalize)
            .field("dimension", &self.dimension)
            .finish()
    }
}

/// Reads a JSON file of the model directory, naming the file in every error.
fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    serde_json::from_str(&text).map_err(|error| {
        format!(
            "{} is not a valid file of a sentence-embedding model: {error}",
            path.display()
        )
    })
}

/// Checks that `dir` has the required files; the first missing one is named.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!(
            "the local embeddings model directory {} does not exist; download a model with \
             `clawvisor memory fetch-model all-MiniLM-L6-v2` or set `[memory] local_model` to a \
             directory with {}",
            dir.display(),
            REQUIRED_FILES.join(", ")
        ));
    }
    for file in REQUIRED_FILES {
        let path = dir.join(file);
        if !path.is_file() {
            return Err(format!(
                "{} is missing: a local embeddings model needs {} in its directory",
                path.display(),
                REQUIRED_FILES.join(", ")
            ));
        }
    }
    Ok(())
}

/// The pooling and normalisation sentence-transformers' files ask for (defaults without them).
fn pooling_of(dir: &Path) -> Result<(Pooling, bool), String> {
    let modules_path = dir.join("modules.json");
    let modules: Vec<ModuleEntry> = if modules_path.is_file() {
        read_json(&modules_path)?
    } else {
        Vec::new()
    };
    let normalize = modules.is_empty()
        || modules
            .iter()
            .any(|module| module.kind.ends_with("Normalize"));
    let pooling_dir = modules
        .iter()
        .find(|module| module.kind.ends_with("Pooling"))
        .map_or_else(
            || PathBuf::from("1_Pooling"),
            |module| PathBuf::from(&module.path),
        );
    let pooling_path = dir.join(pooling_dir).join("config.json");
    let file: PoolingFile = if pooling_path.is_file() {
        read_json(&pooling_path)?
    } else {
        PoolingFile {
            pooling_mode_mean_tokens: true,
            ..PoolingFile::default()
        }
    };
    let pooling = if file.pooling_mode_cls_token {
        Pooling::Cls
    } else if file.pooling_mode_max_tokens {
        Pooling::Max
    } else if file.pooling_mode_mean_sqrt_len_tokens {
        Pooling::MeanSqrtLen
    } else if file.pooling_mode_mean_tokens {
        Pooling::Mean
    } else {
        return Err(format!(
            "{} chooses no pooling mode this daemon knows (mean, cls, max, mean_sqrt_len)",
            pooling_path.display()
        ));
    };
    Ok((pooling, normalize))
}

/// The sizes a BERT's arithmetic divides by or indexes with, checked before the encoder is
/// built (it would divide by zero or index past a table), each refusal naming the field.
fn check_config(config: &BertConfig, path: &Path) -> Result<(), String> {
    let wrong = |field: &str, why: String| {
        Err(format!(
            "{} is not a valid file of a sentence-embedding model: `{field}` {why}",
            path.display()
        ))
    };
    for (field, value) in [
        ("hidden_size", config.hidden_size),
        ("num_attention_heads", config.num_attention_heads),
        ("intermediate_size", config.intermediate_size),
        ("vocab_size", config.vocab_size),
        ("type_vocab_size", config.type_vocab_size),
        ("max_position_embeddings", config.max_position_embeddings),
    ] {
        if value == 0 {
            return wrong(field, "must be more than 0".into());
        }
    }
    if !config
        .hidden_size
        .is_multiple_of(config.num_attention_heads)
    {
        return wrong(
            "num_attention_heads",
            format!(
                "({}) must divide hidden_size ({})",
                config.num_attention_heads, config.hidden_size
            ),
        );
    }
    if config.pad_token_id >= config.vocab_size {
        return wrong(
            "pad_token_id",
            format!(
                "({}) must be a token of the vocabulary (vocab_size {})",
                config.pad_token_id, config.vocab_size
            ),
        );
    }
    Ok(())
}

/// The tokenizer of `dir`, truncating at the model's length (`sentence_bert_config.json`'s
/// `max_seq_length`, else 512, at most the positions the model has) and padding a batch to its
/// longest text.
fn tokenizer_of(dir: &Path, config: &BertConfig) -> Result<Tokenizer, String> {
    let sentence_bert = dir.join("sentence_bert_config.json");
    let max_length = if sentence_bert.is_file() {
        read_json::<SentenceBertFile>(&sentence_bert)?.max_seq_length
    } else {
        None
    }
    .unwrap_or(512)
    .min(config.max_position_embeddings);
    let tokenizer_path = dir.join("tokenizer.json");
    let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|error| {
        format!(
            "{} is not a tokenizer this daemon can read: {error}",
            tokenizer_path.display()
        )
    })?;
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length,
            ..TruncationParams::default()
        }))
        .map_err(|error| format!("{}: {error}", tokenizer_path.display()))?;
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_id: config.pad_token_id as u32,
        ..PaddingParams::default()
    }));
    Ok(tokenizer)
}

impl SentenceModel {
    /// Loads the model in `dir` (reads about the size of `model.safetensors` into memory).
    pub fn load(dir: &Path) -> Result<SentenceModel, String> {
        check_dir(dir)?;
        let config_path = dir.join("config.json");
        let config: BertConfig = read_json(&config_path)?;
        check_config(&config, &config_path)?;
        let (pooling, normalize) = pooling_of(dir)?;
        let tokenizer = tokenizer_of(dir, &config)?;
        let weights_path = dir.join("model.safetensors");
        let header = Header::read(&weights_path)?;
        // Where the BERT's tensors are: at the top, under `bert.`, or under the model type
        // (as candle-transformers' `BertModel::load` looks for them).
        let prefix = ["".to_string(), "bert.".to_string()]
            .into_iter()
            .chain(config.model_type.iter().map(|kind| format!("{kind}.")))
            .find(|prefix| header.contains(&format!("{prefix}embeddings.word_embeddings.weight")))
            .ok_or_else(|| {
                format!(
                    "{} has no BERT word-embedding table (`embeddings.word_embeddings.weight`)",
                    weights_path.display()
                )
            })?;
        let words = WordTable::open(
            &weights_path,
            &header,
            &format!("{prefix}embeddings.word_embeddings.weight"),
            config.vocab_size,
            config.hidden_size,
        )?;
        let weights = std::fs::read(&weights_path)
            .map_err(|error| format!("cannot read {}: {error}", weights_path.display()))?;
        let builder = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|error| {
                format!(
                    "{} is not a safetensors file: {error}",
                    weights_path.display()
                )
            })?;
        let wrong_weights = |error: candle_core::Error| {
            format!(
                "{} does not hold the BERT weights {} describes: {error}",
                weights_path.display(),
                config_path.display()
            )
        };
        let embeddings = builder.pp(format!("{prefix}embeddings"));
        let positions = candle_nn::embedding(
            config.max_position_embeddings,
            config.hidden_size,
            embeddings.pp("position_embeddings"),
        )
        .map_err(wrong_weights)?;
        let token_types = candle_nn::embedding(
            config.type_vocab_size,
            config.hidden_size,
            embeddings.pp("token_type_embeddings"),
        )
        .map_err(wrong_weights)?;
        let layer_norm = candle_nn::layer_norm(
            config.hidden_size,
            config.layer_norm_eps,
            embeddings.pp("LayerNorm"),
        )
        .map_err(wrong_weights)?;
        let encoder = BertEncoder::load(builder.pp(format!("{prefix}encoder")), &config)
            .map_err(wrong_weights)?;
        Ok(SentenceModel {
            words,
            positions,
            token_types,
            layer_norm,
            encoder,
            tokenizer,
            pooling,
            normalize,
            dimension: config.hidden_size,
        })
    }

    /// The length of every vector.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Embeds `texts` as one batch (padded to the longest): one vector per text, in order.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|error| format!("the tokenizer failed: {error}"))?;
        let rows = encodings.len();
        let width = encodings.first().map_or(0, |encoding| encoding.len());
        let mut ids = Vec::with_capacity(rows * width);
        let mut types = Vec::with_capacity(rows * width);
        let mut mask = Vec::with_capacity(rows * width);
        for encoding in &encodings {
            ids.extend_from_slice(encoding.get_ids());
            types.extend_from_slice(encoding.get_type_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        self.forward(rows, width, ids, types, mask)
            .map_err(|error| format!("the local embeddings model failed: {error}"))
    }

    /// The encoder, the pooling and the normalisation over one padded batch.
    fn forward(
        &self,
        rows: usize,
        width: usize,
        ids: Vec<u32>,
        types: Vec<u32>,
        mask: Vec<u32>,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let device = Device::Cpu;
        let words = self
            .words
            .lookup(&ids)
            .map_err(candle_core::Error::msg)?
            .reshape((rows, width, self.dimension))?;
        let types = Tensor::from_vec(types, (rows, width), &device)?;
        let mask = Tensor::from_vec(mask, (rows, width), &device)?;
        let positions = Tensor::arange(0u32, width as u32, &device)?;
        let embedded = (words + self.token_types.forward(&types)?)?
            .broadcast_add(&self.positions.forward(&positions)?)?;
        let embedded = self.layer_norm.forward(&embedded)?;
        // BERT's extended attention mask: 0 where a token may be attended to, the lowest f32
        // where it is padding.
        let allowed = mask.unsqueeze(1)?.unsqueeze(1)?.to_dtype(DType::F32)?;
        let blocked =
            (allowed.ones_like()? - &allowed)?.broadcast_mul(&Tensor::new(f32::MIN, &device)?)?;
        let hidden = self.encoder.forward(&embedded, &blocked)?;
        // (rows, width, 1): 1.0 for real tokens, 0.0 for padding.
        let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let pooled = match self.pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
            Pooling::Mean | Pooling::MeanSqrtLen => {
                let summed = hidden.broadcast_mul(&weights)?.sum(1)?;
                let counts = weights.sum(1)?.clamp(1e-9f32, f32::MAX)?;
                let counts = match self.pooling {
                    Pooling::MeanSqrtLen => counts.sqrt()?,
                    _ => counts,
                };
                summed.broadcast_div(&counts)?
            }
            Pooling::Max => {
                // Padding gets a very low value so it never wins the maximum.
                let penalty = ((weights.ones_like()? - &weights)? * -1e9f64)?;
                hidden.broadcast_add(&penalty)?.max(1)?
            }
        };
        let pooled = if self.normalize {
            let norms = pooled
                .sqr()?
                .sum_keepdim(1)?
                .sqrt()?
                .clamp(1e-12f32, f32::MAX)?;
            pooled.broadcast_div(&norms)?
        } else {
            pooled
        };
        pooled.to_vec2::<f32>()
    }
}
