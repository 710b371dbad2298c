//! A model's word-embedding table, read from `model.safetensors` row by row as tokens are looked
//! up instead of being held in memory (issue #33: it is half of all-MiniLM-L6-v2's weights, 46.9 of
//! 90.9 MB, while a batch needs a few hundred of its 30,522 rows).
//!
//! A lookup reads each row with one positioned read (`pread`) of the open file: the rows a
//! household's sentences use sit in the kernel's page cache, which is shared and reclaimable, not
//! in the daemon's resident set. Rows stored as f16 or bf16 are widened to f32 per batch.
//!
//! Invariants: the table's place in the file is read from the safetensors header and checked
//! against the file's length and the model's config before the first lookup; a token outside
//! the vocabulary, or a file that shrank while loaded, is an error naming the file — never a read
//! past the table or a crash (no memory map: a file truncated under a map would kill the daemon).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

/// The largest safetensors header this reader accepts (real ones are a few KB to a few MB).
const MAX_HEADER_BYTES: u64 = 64 * 1024 * 1024;

/// One tensor's entry in a safetensors header.
#[derive(Debug, Deserialize)]
struct HeaderEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (u64, u64),
}

/// The names and entries of a safetensors file's tensors (without `__metadata__`), and where
/// their data starts.
pub struct Header {
    entries: HashMap<String, serde_json::Value>,
    data_start: u64,
}

impl Header {
    /// Reads the header of the safetensors file at `path` (its first bytes only).
    pub fn read(path: &Path) -> Result<Header, String> {
        let invalid = |why: String| format!("{} is not a safetensors file: {why}", path.display());
        let mut file =
            File::open(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let mut length = [0u8; 8];
        file.read_exact(&mut length)
            .map_err(|error| invalid(format!("its header length cannot be read ({error})")))?;
        let length = u64::from_le_bytes(length);
        if length > MAX_HEADER_BYTES {
            return Err(invalid(format!(
                "its header says it is {length} bytes long"
            )));
        }
        let mut header = Vec::new();
        file.take(length)
            .read_to_end(&mut header)
            .map_err(|error| invalid(format!("its header cannot be read ({error})")))?;
        let entries: HashMap<String, serde_json::Value> = serde_json::from_slice(&header)
            .map_err(|error| invalid(format!("its header is not valid JSON ({error})")))?;
        Ok(Header {
            entries,
            data_start: 8 + length,
        })
    }

    /// Whether the file has a tensor called `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }
}

/// The word-embedding table of a loaded model: where its rows are in the open file.
pub struct WordTable {
    file: File,
    path: PathBuf,
    /// Where row 0 starts in the file.
    start: u64,
    dtype: DType,
    rows: usize,
    width: usize,
    row_bytes: usize,
}

impl std::fmt::Debug for WordTable {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("WordTable")
            .field("rows", &self.rows)
            .field("width", &self.width)
            .field("dtype", &self.dtype)
            .finish()
    }
}

impl WordTable {
    /// Opens the table `name` of the safetensors file at `path`, which must be `rows` × `width`
    /// (the model config's `vocab_size` × `hidden_size`) of f32, f16 or bf16.
    pub fn open(
        path: &Path,
        header: &Header,
        name: &str,
        rows: usize,
        width: usize,
    ) -> Result<WordTable, String> {
        let invalid = |why: String| format!("{} is not a safetensors file: {why}", path.display());
        let entry = header
            .entries
            .get(name)
            .ok_or_else(|| format!("{} has no tensor `{name}`", path.display()))?;
        let entry: HeaderEntry = serde_json::from_value(entry.clone())
            .map_err(|error| invalid(format!("the entry of `{name}` is wrong ({error})")))?;
        let dtype = match entry.dtype.as_str() {
            "F32" => DType::F32,
            "F16" => DType::F16,
            "BF16" => DType::BF16,
            other => {
                return Err(format!(
                    "{}: `{name}` is stored as {other}; a local model's weights must be F32, F16 or BF16",
                    path.display()
                ));
            }
        };
        if entry.shape != [rows, width] {
            return Err(format!(
                "{}: `{name}` is {:?}, but config.json says {rows} words of {width} numbers",
                path.display(),
                entry.shape
            ));
        }
        let row_bytes = width * dtype.size_in_bytes();
        let (begin, end) = entry.data_offsets;
        let expected = (rows * row_bytes) as u64;
        if end.checked_sub(begin) != Some(expected) {
            return Err(invalid(format!(
                "`{name}` takes {begin}..{end}, not the {expected} bytes its shape needs"
            )));
        }
        let file =
            File::open(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let file_length = file
            .metadata()
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?
            .len();
        let start = header.data_start + begin;
        if start + expected > file_length {
            return Err(invalid(format!(
                "`{name}` ends at byte {}, past the file's end ({file_length})",
                start + expected
            )));
        }
        Ok(WordTable {
            file,
            path: path.to_path_buf(),
            start,
            dtype,
            rows,
            width,
            row_bytes,
        })
    }

    /// The rows of `ids`, in order: a tensor of `ids.len()` × width, f32.
    pub fn lookup(&self, ids: &[u32]) -> Result<Tensor, String> {
        let mut bytes = vec![0u8; ids.len() * self.row_bytes];
        for (row, &id) in bytes.chunks_exact_mut(self.row_bytes).zip(ids) {
            let id = id as usize;
            if id >= self.rows {
                return Err(format!(
                    "the tokenizer gave word {id}, but {} has {} words",
                    self.path.display(),
                    self.rows
                ));
            }
            let offset = self.start + (id * self.row_bytes) as u64;
            self.file.read_exact_at(row, offset).map_err(|error| {
                format!(
                    "cannot read {} (was it changed while the model was loaded? it is read \
                     again at the next load): {error}",
                    self.path.display()
                )
            })?;
        }
        Tensor::from_raw_buffer(&bytes, self.dtype, &[ids.len(), self.width], &Device::Cpu)
            .and_then(|table| table.to_dtype(DType::F32))
            .map_err(|error| format!("{}: {error}", self.path.display()))
    }
}
