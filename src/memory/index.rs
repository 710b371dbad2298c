//! The semantic index: hnsw_rs graphs (cosine distance) over `(chunk_id, owner, vector)`.
//!
//! SQLite is the source of truth for chunks and their embeddings; this index is derived from it.
//! It lives in memory, is dumped to a directory now and then, reloaded at boot when the dump
//! still matches what SQLite holds (the [`Watermark`]), and rebuilt from SQLite otherwise.
//!
//! Invariants:
//! - Every vector in a graph has the index's dimension, only finite values, and unit length:
//!   vectors are validated and normalized once, on the way in ([`normalize`]). hnsw_rs would
//!   `assert!`-panic on a length mismatch and on a NaN distance, and treats a zero vector as
//!   identical to everything; none of these can reach it.
//! - There is one graph per owner (see [`VectorIndex`] for why), and an [`OwnerFilter`] selects
//!   graphs; results of several graphs are merged by distance, so the filter is exact and
//!   k results come back whenever k exist.
//! - hnsw_rs cannot delete. A graph stores *slots* (its `DataId` is the slot number); a slot
//!   maps to a chunk id and an owner, and removing a chunk tombstones its slot. Tombstoned slots
//!   stay in the graph (they keep it connected) but are never returned: a search asks for a few
//!   more neighbours than needed, in proportion to the tombstones, widens when that was not
//!   enough, and falls back to hnsw_rs's in-graph filter (`search_filter`) last. Re-inserting
//!   a removed chunk id takes a new slot. [`VectorIndex::needs_rebuild`] says when the
//!   tombstones are worth a rebuild.
//! - Parameters are validated before `Hnsw::new`, which calls `std::process::exit(1)` when the
//!   connection count is above 256.
//! - A dump is a set of files written under fresh names followed by a small JSON sidecar written
//!   last, atomically (temporary file, fsync, rename, fsync of the directory). A crash mid-dump
//!   leaves the previous sidecar pointing at the previous, complete files.
//! - Loading a dump never panics the process and never lets hnsw_rs see a file it could choke on:
//!   the sidecar carries SHA-256 digests, and the graph and data files are walked field by field
//!   (magics, lengths, ranks, finite values) before hnsw_rs reads them (see `dump_check`),
//!   because its loader calls `std::process::exit(1)` on a short data record and reads a vector
//!   with `slice::from_raw_parts` without checking its length. The hnsw_rs loader then also runs
//!   inside `catch_unwind`, a second line of defence against its `assert!`s and indexing.
//!
//! The owner strings and the tombstones are persisted with the dump (owners in the sidecar, one
//! 13-byte record per slot in `<basename>.slots`), so a loaded index answers owner-filtered
//! searches without asking SQLite; the watermark, recomputed from those records, must match the
//! one the caller computes from SQLite, so a dump whose owners or ids drifted is `Stale`.
//!
//! The index is synchronous and CPU-bound: callers run it on a dedicated thread or in
//! `spawn_blocking`. `insert`, `remove` and `rebuild_from` take `&mut self`; `search` takes
//! `&self`, so an `RwLock<VectorIndex>` lets searches run side by side. A build inserts with
//! rayon's global pool (all cores).

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use hnsw_rs::anndists::dist::distances::Distance;
use hnsw_rs::api::AnnT;
use hnsw_rs::filter::FilterT;
use hnsw_rs::hnsw::{Hnsw, Neighbour};
use hnsw_rs::hnswio::HnswIo;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::memory::dump_check::{self, DumpExpectations};

/// hnsw_rs always works with 16 layers; its dump refuses any other count.
const LAYER_COUNT: usize = 16;

/// The sidecar naming the current dump. Written last; its presence makes a dump valid.
pub const SIDECAR_FILE: &str = "vector-index.json";

/// Prefix of every file a dump writes besides the sidecar (`<prefix><stamp>.hnsw.graph`, ...).
const DUMP_BASENAME_PREFIX: &str = "vectors-";

/// The sidecar format this code writes and reads.
const SIDECAR_FORMAT: u32 = 1;

/// Magic at the start of a `.slots` file (format 1).
const SLOTS_MAGIC: &[u8; 8] = b"CVSLOTS1";

/// Size of one slot record: chunk id (i64), owner index (u32), state (u8).
const SLOT_RECORD_LEN: usize = 13;

/// Points inserted one by one before a build switches to parallel insertion, so the first
/// layers of the graph are not raced into existence by many threads at once.
const SEQUENTIAL_BUILD_PREFIX: usize = 1_000;

/// Points validated and inserted per parallel batch during a build (bounds the transient copy).
const BUILD_BATCH: usize = 8_192;

/// Errors of the vector index. Texts say what was wrong and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IndexError {
    #[error("invalid vector index parameters: {0}")]
    InvalidParams(String),
    #[error(
        "vector has {got} dimensions but the index holds {expected}-dimensional vectors; \
         the embeddings model changed? rebuild the index from SQLite with the new dimension"
    )]
    DimensionMismatch { expected: usize, got: usize },
    #[error("vector value at position {position} is not finite ({value}); refusing to index it")]
    NonFinite { position: usize, value: f32 },
    #[error("vector is all zeros (cosine similarity is undefined for it); refusing to index it")]
    ZeroVector,
    #[error("chunk {id} is already in the index; remove it first to replace its vector")]
    DuplicateId { id: i64 },
    #[error("too many distinct owners in one index (limit {limit})")]
    TooManyOwners { limit: usize },
    #[error("vector index file {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("dumping the vector index failed: {0}")]
    Dump(String),
}

impl IndexError {
    fn io(path: &Path, error: impl std::fmt::Display) -> IndexError {
        IndexError::Io {
            path: path.display().to_string(),
            reason: error.to_string(),
        }
    }
}

/// Tuning of the graph. `max_connections` and `ef_construction` are baked into a built graph (a
/// dump built with other values is `Stale`); `ef_search` and the rebuild ratio apply at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IndexParams {
    /// M: links per point and layer (twice that on layer 0). 16 is the usual trade-off.
    pub max_connections: usize,
    /// Candidates examined while inserting; higher builds a better graph, slower. 100 reached
    /// the same recall as 200 in the benchmark at half the build time.
    pub ef_construction: usize,
    /// Candidates examined per owner graph while searching (at least k); higher raises recall
    /// and latency. A search over several owners pays it once per owner.
    pub ef_search: usize,
    /// [`VectorIndex::needs_rebuild`] turns true when tombstones exceed this share of points.
    pub rebuild_tombstone_ratio: f64,
    /// Expected number of points per owner; only pre-sizes tables.
    pub capacity_hint: usize,
}

impl Default for IndexParams {
    /// Chosen with `benches/memory.rs` (100,000 chunks of 384 dimensions, four owners): ef_search
    /// 32 gives recall@10 0.97 for one owner's search and 0.99 for all four, p99 1.2 ms / 6.2 ms.
    fn default() -> Self {
        IndexParams {
            max_connections: 16,
            ef_construction: 100,
            ef_search: 32,
            rebuild_tombstone_ratio: 0.2,
            capacity_hint: 10_000,
        }
    }
}

impl IndexParams {
    /// Checks every value before any of it reaches hnsw_rs (whose constructor exits the process
    /// on a connection count above 256).
    pub fn validate(&self) -> Result<(), IndexError> {
        if !(2..=128).contains(&self.max_connections) {
            return Err(IndexError::InvalidParams(format!(
                "max_connections is {}; use a value from 2 to 128 (16 is usual)",
                self.max_connections
            )));
        }
        if !(1..=4_096).contains(&self.ef_construction) {
            return Err(IndexError::InvalidParams(format!(
                "ef_construction is {}; use a value from 1 to 4096 (100 is the default)",
                self.ef_construction
            )));
        }
        if !(1..=10_000).contains(&self.ef_search) {
            return Err(IndexError::InvalidParams(format!(
                "ef_search is {}; use a value from 1 to 10000 (32 is the default)",
                self.ef_search
            )));
        }
        if !(self.rebuild_tombstone_ratio > 0.0 && self.rebuild_tombstone_ratio <= 1.0) {
            return Err(IndexError::InvalidParams(format!(
                "rebuild_tombstone_ratio is {}; use a share above 0 and at most 1 (0.2 is usual)",
                self.rebuild_tombstone_ratio
            )));
        }
        Ok(())
    }
}

/// Which owners a search may return. Built from owner strings (agent names, "platform").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerFilter {
    /// `None` means every owner (Studio's memory review); otherwise the allowed set.
    allowed: Option<BTreeSet<String>>,
}

impl OwnerFilter {
    /// Every owner.
    pub fn any() -> OwnerFilter {
        OwnerFilter { allowed: None }
    }

    /// Only these owners (an agent, its subordinates, the platform).
    pub fn only<I, S>(owners: I) -> OwnerFilter
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        OwnerFilter {
            allowed: Some(owners.into_iter().map(Into::into).collect()),
        }
    }

    pub fn allows(&self, owner: &str) -> bool {
        match &self.allowed {
            None => true,
            Some(allowed) => allowed.contains(owner),
        }
    }
}

/// One search result: a live chunk and its cosine similarity to the query (1 = same direction).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub id: i64,
    pub similarity: f32,
}

/// One chunk handed to [`VectorIndex::build`] / [`VectorIndex::rebuild_from`] (read from SQLite).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkVector {
    pub id: i64,
    pub owner: String,
    pub vector: Vec<f32>,
}

/// What a build did with its input: rows that could not be indexed are listed, not fatal, so
/// one bad row in SQLite does not leave an agent without semantic memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuildReport {
    pub inserted: usize,
    pub rejected: Vec<(i64, IndexError)>,
}

/// What SQLite and a dump must agree on for the dump to be used. The caller computes the
/// expected one from SQLite with [`Watermark::from_chunks`]; [`VectorIndex::dump`] returns the
/// one it recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    pub dimension: usize,
    /// The embeddings model that produced the vectors: a new model means new vectors, even
    /// when the ids and the dimension are unchanged.
    pub embedding_model: String,
    /// Live (not removed) chunks.
    pub point_count: u64,
    pub max_chunk_id: Option<i64>,
    /// An order-independent digest of the live `(chunk id, owner)` pairs.
    pub id_set_checksum: u64,
}

impl Watermark {
    /// The watermark of a set of live chunks, given as `(chunk id, owner)` in any order.
    /// The caller reads these from SQLite (no vectors needed) and compares them to a dump's.
    pub fn from_chunks<'a, I>(dimension: usize, embedding_model: &str, chunks: I) -> Watermark
    where
        I: IntoIterator<Item = (i64, &'a str)>,
    {
        let mut point_count = 0u64;
        let mut max_chunk_id: Option<i64> = None;
        let mut id_set_checksum = 0u64;
        for (id, owner) in chunks {
            point_count += 1;
            max_chunk_id = Some(max_chunk_id.map_or(id, |max| max.max(id)));
            id_set_checksum = id_set_checksum.wrapping_add(chunk_digest(id, owner));
        }
        Watermark {
            dimension,
            embedding_model: embedding_model.to_string(),
            point_count,
            max_chunk_id,
            id_set_checksum,
        }
    }

    /// Describes the first difference from `other` (None when equal), for `Stale` reasons.
    fn difference(&self, recorded: &Watermark) -> Option<String> {
        if self.dimension != recorded.dimension {
            return Some(format!(
                "dimension: the dump has {}, SQLite has {}",
                recorded.dimension, self.dimension
            ));
        }
        if self.embedding_model != recorded.embedding_model {
            return Some(format!(
                "embeddings model: the dump has `{}`, SQLite has `{}`",
                recorded.embedding_model, self.embedding_model
            ));
        }
        if self.point_count != recorded.point_count {
            return Some(format!(
                "chunk count: the dump has {}, SQLite has {}",
                recorded.point_count, self.point_count
            ));
        }
        if self.max_chunk_id != recorded.max_chunk_id {
            return Some(format!(
                "highest chunk id: the dump has {:?}, SQLite has {:?}",
                recorded.max_chunk_id, self.max_chunk_id
            ));
        }
        if self.id_set_checksum != recorded.id_set_checksum {
            return Some(
                "same chunk count and highest id, but a different set of (chunk id, owner) pairs"
                    .to_string(),
            );
        }
        None
    }
}

/// A stable 64-bit digest of one `(id, owner)` pair (FNV-1a of the owner, SplitMix64 mixing).
/// Stable across runs and platforms, since it is persisted.
fn chunk_digest(id: i64, owner: &str) -> u64 {
    let mut owner_hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in owner.as_bytes() {
        owner_hash ^= u64::from(*byte);
        owner_hash = owner_hash.wrapping_mul(0x0100_0000_01b3);
    }
    splitmix64(splitmix64(id as u64) ^ owner_hash)
}

fn splitmix64(mut value: u64) -> u64 {
    value = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

/// The result of [`VectorIndex::load`]. Anything but `Loaded` means: rebuild from SQLite.
#[derive(Debug)]
pub enum LoadOutcome {
    Loaded(Box<VectorIndex>),
    /// No sidecar: never dumped, or the directory was cleared.
    Missing,
    /// A consistent dump of another state (fewer chunks, another model, other parameters).
    Stale {
        reason: String,
    },
    /// A damaged or inconsistent dump (truncated, garbage, checksum mismatch).
    Corrupt {
        reason: String,
    },
}

/// Validates a vector for an index of `dimension` and returns it scaled to unit length.
/// Callers may use it before writing a row to SQLite, so that a row the index would refuse
/// is never stored.
pub fn normalize(vector: &[f32], dimension: usize) -> Result<Vec<f32>, IndexError> {
    if vector.len() != dimension {
        return Err(IndexError::DimensionMismatch {
            expected: dimension,
            got: vector.len(),
        });
    }
    if let Some((position, value)) = vector
        .iter()
        .enumerate()
        .find(|(_, value)| !value.is_finite())
    {
        return Err(IndexError::NonFinite {
            position,
            value: *value,
        });
    }
    // The norm is computed in f64 so that large f32 values do not overflow to infinity.
    let norm = vector
        .iter()
        .map(|value| f64::from(*value) * f64::from(*value))
        .sum::<f64>()
        .sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return Err(IndexError::ZeroVector);
    }
    Ok(vector
        .iter()
        .map(|value| (f64::from(*value) / norm) as f32)
        .collect())
}

/// Cosine distance between unit vectors: `1 − dot`, clamped to 0..=2.
///
/// Every vector reaching the graph is normalized (see [`normalize`]), so the norms hnsw_rs's
/// `DistCosine` recomputes on every call (in f64) are wasted work; this is several times faster.
/// hnsw_rs's own `DistDot` would do the same but `assert!`s `1 − dot ≥ 0`, which rounding breaks
/// for a vector compared with itself. Slices of different lengths cannot reach here (dimensions
/// are checked first); `zip` would stop at the shorter one rather than panic.
#[derive(Debug, Default, Clone, Copy)]
struct UnitCosineDistance;

impl Distance<f32> for UnitCosineDistance {
    fn eval(&self, left: &[f32], right: &[f32]) -> f32 {
        // Eight independent sums let the compiler vectorize the loop.
        let mut sums = [0f32; 8];
        let left_chunks = left.chunks_exact(8);
        let right_chunks = right.chunks_exact(8);
        let tail: f32 = left_chunks
            .remainder()
            .iter()
            .zip(right_chunks.remainder())
            .map(|(a, b)| a * b)
            .sum();
        for (left_chunk, right_chunk) in left_chunks.zip(right_chunks) {
            for lane in 0..8 {
                sums[lane] += left_chunk[lane] * right_chunk[lane];
            }
        }
        let dot = sums.iter().sum::<f32>() + tail;
        let distance = 1.0 - dot;
        // Inputs are finite unit vectors, so this is never NaN; a NaN would panic hnsw_rs's
        // ordering of candidates, so the guard stays.
        if distance.is_nan() {
            return 2.0;
        }
        distance.clamp(0.0, 2.0)
    }
}

/// The distance's name as hnsw_rs records it in a dump (the last path segment is compared).
fn distance_name() -> &'static str {
    let full = std::any::type_name::<UnitCosineDistance>();
    full.rsplit("::").next().unwrap_or(full)
}

/// One point of the graph, addressed by its hnsw `DataId` (the position in `slots`).
#[derive(Debug, Clone, Copy)]
struct Slot {
    chunk_id: i64,
    owner: u32,
    live: bool,
}

/// One owner's graph. Its hnsw `DataId`s are global slot numbers.
struct Partition {
    graph: Hnsw<'static, f32, UnitCosineDistance>,
    /// Points in the graph, live or tombstoned.
    points: usize,
    live: usize,
}

impl Partition {
    fn new(params: &IndexParams) -> Partition {
        Partition {
            // Parameters were validated in `VectorIndex::new`, so this never reaches
            // hnsw_rs's `process::exit` on a connection count above 256.
            graph: Hnsw::new(
                params.max_connections,
                params.capacity_hint.max(1),
                LAYER_COUNT,
                params.ef_construction,
                UnitCosineDistance,
            ),
            points: 0,
            live: 0,
        }
    }
}

/// hnsw_rs graphs, one per owner, plus the slot table that maps their points to chunks, owners
/// and tombstones.
///
/// Why one graph per owner: nearly every search is restricted to a few owners (an agent, its
/// subordinates, the platform), and hnsw_rs's in-graph filter (`search_filter`) gives up the
/// early stop of the search, which measured (20,000 points) 4× slower with 1 % tombstones and 10× slower for
/// one owner of four (`benches/memory.rs`). With one graph per owner the owner filter is exact
/// and free (only the allowed graphs are searched, their results merged by distance), and
/// tombstones are skipped by asking a graph for a few more neighbours than needed; the
/// in-graph filter remains the fallback that guarantees k results whenever k exist.
pub struct VectorIndex {
    dimension: usize,
    params: IndexParams,
    /// Indexed by owner id.
    partitions: Vec<Partition>,
    slots: Vec<Slot>,
    /// Live chunks only: chunk id → slot.
    slot_of_chunk: HashMap<i64, usize>,
    owners: Vec<String>,
    owner_ids: HashMap<String, u32>,
    tombstones: usize,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("dimension", &self.dimension)
            .field("live", &self.slot_of_chunk.len())
            .field("tombstones", &self.tombstones)
            .field("owners", &self.owners.len())
            .field("params", &self.params)
            .finish()
    }
}

impl VectorIndex {
    /// An empty index for vectors of `dimension` values.
    pub fn new(dimension: usize, params: IndexParams) -> Result<VectorIndex, IndexError> {
        params.validate()?;
        if dimension == 0 || dimension > 65_536 {
            return Err(IndexError::InvalidParams(format!(
                "dimension is {dimension}; embeddings have from 1 to 65536 dimensions"
            )));
        }
        Ok(VectorIndex {
            dimension,
            params,
            partitions: Vec::new(),
            slots: Vec::new(),
            slot_of_chunk: HashMap::new(),
            owners: Vec::new(),
            owner_ids: HashMap::new(),
            tombstones: 0,
        })
    }

    /// Builds an index from all chunks at once, inserting in parallel (rayon) after a short
    /// sequential start per owner. Invalid rows are reported in the [`BuildReport`], not fatal.
    pub fn build<I>(
        dimension: usize,
        params: IndexParams,
        chunks: I,
    ) -> Result<(VectorIndex, BuildReport), IndexError>
    where
        I: IntoIterator<Item = ChunkVector>,
    {
        let mut index = VectorIndex::new(dimension, params)?;
        let mut report = BuildReport::default();
        let mut batch: Vec<PreparedPoint> = Vec::with_capacity(BUILD_BATCH);
        for chunk in chunks {
            let Some(point) = index.prepare_slot(&chunk, &mut report) else {
                continue;
            };
            let partition = &index.partitions[point.owner as usize];
            if partition.points <= SEQUENTIAL_BUILD_PREFIX {
                partition
                    .graph
                    .insert((point.vector.as_slice(), point.slot));
                report.inserted += 1;
                continue;
            }
            batch.push(point);
            if batch.len() == BUILD_BATCH {
                index.insert_batch_in_parallel(&mut batch);
                report.inserted += batch.len();
                batch.clear();
            }
        }
        index.insert_batch_in_parallel(&mut batch);
        report.inserted += batch.len();
        Ok((index, report))
    }

    /// Replaces this index with one built from `chunks` (the caller reads them from SQLite).
    /// On an error the current index is kept.
    pub fn rebuild_from<I>(&mut self, chunks: I) -> Result<BuildReport, IndexError>
    where
        I: IntoIterator<Item = ChunkVector>,
    {
        let (rebuilt, report) = VectorIndex::build(self.dimension, self.params, chunks)?;
        *self = rebuilt;
        Ok(report)
    }

    /// Validates one chunk for a build and reserves its slot; records a rejection instead.
    fn prepare_slot(
        &mut self,
        chunk: &ChunkVector,
        report: &mut BuildReport,
    ) -> Option<PreparedPoint> {
        if self.slot_of_chunk.contains_key(&chunk.id) {
            report
                .rejected
                .push((chunk.id, IndexError::DuplicateId { id: chunk.id }));
            return None;
        }
        let vector = match normalize(&chunk.vector, self.dimension) {
            Ok(normalized) => normalized,
            Err(error) => {
                report.rejected.push((chunk.id, error));
                return None;
            }
        };
        match self.push_slot(chunk.id, &chunk.owner) {
            Ok(slot) => Some(PreparedPoint {
                slot,
                owner: self.slots[slot].owner,
                vector,
            }),
            Err(error) => {
                report.rejected.push((chunk.id, error));
                None
            }
        }
    }

    /// Inserts a batch owner by owner, each owner's points in parallel.
    fn insert_batch_in_parallel(&self, batch: &mut [PreparedPoint]) {
        batch.sort_by_key(|point| point.owner);
        for same_owner in batch.chunk_by(|left, right| left.owner == right.owner) {
            let items: Vec<(&[f32], usize)> = same_owner
                .iter()
                .map(|point| (point.vector.as_slice(), point.slot))
                .collect();
            self.partitions[same_owner[0].owner as usize]
                .graph
                .parallel_insert_slice(&items);
        }
    }

    /// Records a new live slot for `chunk_id` and returns its number (the hnsw `DataId`).
    fn push_slot(&mut self, chunk_id: i64, owner: &str) -> Result<usize, IndexError> {
        let owner = self.intern_owner(owner)?;
        let slot = self.slots.len();
        self.slots.push(Slot {
            chunk_id,
            owner,
            live: true,
        });
        self.slot_of_chunk.insert(chunk_id, slot);
        let partition = &mut self.partitions[owner as usize];
        partition.points += 1;
        partition.live += 1;
        Ok(slot)
    }

    fn intern_owner(&mut self, owner: &str) -> Result<u32, IndexError> {
        if let Some(id) = self.owner_ids.get(owner) {
            return Ok(*id);
        }
        let limit = u32::MAX as usize;
        if self.owners.len() >= limit {
            return Err(IndexError::TooManyOwners { limit });
        }
        let id = self.owners.len() as u32;
        self.owners.push(owner.to_string());
        self.owner_ids.insert(owner.to_string(), id);
        self.partitions.push(Partition::new(&self.params));
        Ok(id)
    }

    /// Adds a chunk. The vector is validated (dimension, finite, not zero) and normalized.
    /// A chunk id already present is refused: remove it first to replace its vector.
    pub fn insert(&mut self, id: i64, owner: &str, vector: &[f32]) -> Result<(), IndexError> {
        if self.slot_of_chunk.contains_key(&id) {
            return Err(IndexError::DuplicateId { id });
        }
        let normalized = normalize(vector, self.dimension)?;
        let slot = self.push_slot(id, owner)?;
        let owner = self.slots[slot].owner as usize;
        self.partitions[owner]
            .graph
            .insert((normalized.as_slice(), slot));
        Ok(())
    }

    /// Tombstones a chunk: it is never returned again. Returns false when it was not present.
    pub fn remove(&mut self, id: i64) -> bool {
        let Some(slot) = self.slot_of_chunk.remove(&id) else {
            return false;
        };
        let entry = &mut self.slots[slot];
        entry.live = false;
        self.partitions[entry.owner as usize].live -= 1;
        self.tombstones += 1;
        true
    }

    /// The `k` live chunks most similar to `query` among the allowed owners, most similar first
    /// (ties by chunk id). k results come back whenever k exist.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: &OwnerFilter,
    ) -> Result<Vec<Hit>, IndexError> {
        let query = normalize(query, self.dimension)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let mut merged: Vec<Neighbour> = Vec::new();
        for (owner, partition) in self.owners.iter().zip(&self.partitions) {
            if partition.live > 0 && filter.allows(owner) {
                merged.extend(self.search_partition(partition, &query, k));
            }
        }
        merged.sort_by(|left, right| {
            left.distance.total_cmp(&right.distance).then(
                self.slots[left.d_id]
                    .chunk_id
                    .cmp(&self.slots[right.d_id].chunk_id),
            )
        });
        Ok(merged
            .into_iter()
            .take(k)
            .map(|neighbour| Hit {
                id: self.slots[neighbour.d_id].chunk_id,
                similarity: (1.0 - neighbour.distance).clamp(-1.0, 1.0),
            })
            .collect())
    }

    /// Up to `k` live neighbours from one owner's graph (only live slots, checked).
    fn search_partition(&self, partition: &Partition, query: &[f32], k: usize) -> Vec<Neighbour> {
        let wanted = k.min(partition.live);
        let live_only = |neighbours: Vec<Neighbour>| -> Vec<Neighbour> {
            neighbours
                .into_iter()
                .filter(|neighbour| self.slots.get(neighbour.d_id).is_some_and(|slot| slot.live))
                .take(k)
                .collect()
        };
        // Ask for enough neighbours that `wanted` live ones are among them at the partition's
        // tombstone share (plus a margin), then widen twice before falling back to the filter.
        let live_share = partition.live as f64 / partition.points as f64;
        let mut fetch = ((k as f64 / live_share) * 1.25).ceil() as usize;
        if partition.live < partition.points {
            fetch += 4;
        }
        for _ in 0..3 {
            let fetch_now = fetch.min(partition.points);
            let ef = self.params.ef_search.max(fetch_now);
            let found = live_only(partition.graph.search(query, fetch_now, ef));
            if found.len() >= wanted || fetch_now == partition.points && ef >= partition.points {
                return found;
            }
            fetch = fetch.saturating_mul(4);
        }
        // The graph walk kept stopping short: the in-graph filter over every point of the
        // partition finds whatever is reachable.
        let slot_filter = LiveSlots { slots: &self.slots };
        let ef = self.params.ef_search.max(partition.points);
        live_only(
            partition
                .graph
                .search_filter(query, k, ef, Some(&slot_filter)),
        )
    }

    /// Live chunks.
    pub fn len(&self) -> usize {
        self.slot_of_chunk.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of_chunk.is_empty()
    }

    pub fn contains(&self, id: i64) -> bool {
        self.slot_of_chunk.contains_key(&id)
    }

    /// Removed chunks whose points still sit in the graph.
    pub fn tombstones(&self) -> usize {
        self.tombstones
    }

    /// True when tombstones exceed the configured share of the graph's points.
    pub fn needs_rebuild(&self) -> bool {
        self.tombstones > 0
            && self.tombstones as f64
                > self.params.rebuild_tombstone_ratio * self.slots.len() as f64
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    pub fn params(&self) -> IndexParams {
        self.params
    }

    /// Changes the search width at once (it is not baked into the graph).
    pub fn set_ef_search(&mut self, ef_search: usize) -> Result<(), IndexError> {
        let params = IndexParams {
            ef_search,
            ..self.params
        };
        params.validate()?;
        self.params = params;
        Ok(())
    }

    /// The watermark of the live chunks, as [`Watermark::from_chunks`] computes it from SQLite.
    pub fn watermark(&self, embedding_model: &str) -> Watermark {
        Watermark::from_chunks(
            self.dimension,
            embedding_model,
            self.slots
                .iter()
                .filter(|slot| slot.live)
                .map(|slot| (slot.chunk_id, self.owners[slot.owner as usize].as_str())),
        )
    }

    /// Writes the index to `dir` (created if needed) and returns the watermark recorded.
    /// Files from earlier dumps in `dir` are deleted once the new sidecar is in place.
    pub fn dump(&self, dir: &Path, embedding_model: &str) -> Result<Watermark, IndexError> {
        fs::create_dir_all(dir).map_err(|error| IndexError::io(dir, error))?;
        let basename = fresh_basename(dir);
        let watermark = self.watermark(embedding_model);

        let mut files = Vec::new();
        for (owner, partition) in self.partitions.iter().enumerate() {
            if partition.points == 0 {
                continue;
            }
            let partition_name = partition_basename(&basename, owner);
            // hnsw_rs panics (`panic_any`) when it cannot create its files; that is an I/O
            // error here, not a crash.
            let dumped = catch_unwind(AssertUnwindSafe(|| {
                partition.graph.file_dump(dir, &partition_name)
            }))
            .map_err(|panic| IndexError::Dump(panic_text(panic.as_ref())))?
            .map_err(|error| IndexError::Dump(error.to_string()))?;
            if dumped != partition_name {
                return Err(IndexError::Dump(format!(
                    "hnsw_rs wrote `{dumped}` instead of the fresh name `{partition_name}`"
                )));
            }
            files.push(described_file(
                dir,
                &format!("{partition_name}.hnsw.graph"),
            )?);
            files.push(described_file(dir, &format!("{partition_name}.hnsw.data"))?);
        }
        let slots_name = format!("{basename}.slots");
        self.write_slots(&dir.join(&slots_name))?;
        files.push(described_file(dir, &slots_name)?);

        let sidecar = Sidecar {
            format: SIDECAR_FORMAT,
            basename: basename.clone(),
            dimension: self.dimension,
            embedding_model: embedding_model.to_string(),
            point_count: watermark.point_count,
            max_chunk_id: watermark.max_chunk_id,
            id_set_checksum: format!("{:016x}", watermark.id_set_checksum),
            max_connections: self.params.max_connections,
            ef_construction: self.params.ef_construction,
            slot_count: self.slots.len(),
            tombstones: self.tombstones,
            owners: self.owners.clone(),
            files,
        };
        write_sidecar(dir, &sidecar)?;
        remove_other_dumps(dir, &basename);
        Ok(watermark)
    }

    fn write_slots(&self, path: &Path) -> Result<(), IndexError> {
        let file = File::create(path).map_err(|error| IndexError::io(path, error))?;
        let mut out = BufWriter::new(file);
        let write = |out: &mut BufWriter<File>| -> std::io::Result<()> {
            out.write_all(SLOTS_MAGIC)?;
            out.write_all(&(self.slots.len() as u64).to_le_bytes())?;
            for slot in &self.slots {
                out.write_all(&slot.chunk_id.to_le_bytes())?;
                out.write_all(&slot.owner.to_le_bytes())?;
                out.write_all(&[u8::from(slot.live)])?;
            }
            out.flush()?;
            out.get_ref().sync_all()
        };
        write(&mut out).map_err(|error| IndexError::io(path, error))
    }

    /// Loads the dump in `dir` if it matches `expected` (computed from SQLite) and `params`.
    /// `Err` only for invalid `params`; every problem with the files is a [`LoadOutcome`].
    ///
    /// hnsw_rs's loaded graph borrows the `HnswIo` that loaded it (it may point into an mmap of
    /// the data file). We never mmap, so the graph owns its vectors, but the borrow is in the
    /// type. Rather than a self-referential struct that would need `unsafe` lifetime casts, the
    /// `HnswIo` (about a hundred bytes: two paths and a counter, no data) is leaked once per
    /// load. Loads happen at boot, so the leak is bounded by the number of boots of a process.
    pub fn load(
        dir: &Path,
        expected: &Watermark,
        params: IndexParams,
    ) -> Result<LoadOutcome, IndexError> {
        params.validate()?;
        let sidecar_path = dir.join(SIDECAR_FILE);
        let sidecar_text = match fs::read(&sidecar_path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(LoadOutcome::Missing);
            }
            Err(error) => {
                return Ok(corrupt(format!(
                    "cannot read {}: {error}",
                    sidecar_path.display()
                )));
            }
        };
        let sidecar: Sidecar = match serde_json::from_slice(&sidecar_text) {
            Ok(sidecar) => sidecar,
            Err(error) => {
                return Ok(corrupt(format!(
                    "{} is not a valid sidecar: {error}",
                    sidecar_path.display()
                )));
            }
        };
        if sidecar.format != SIDECAR_FORMAT {
            return Ok(LoadOutcome::Stale {
                reason: format!(
                    "dump format {} (this build reads format {SIDECAR_FORMAT})",
                    sidecar.format
                ),
            });
        }
        let Some(recorded) = sidecar.watermark() else {
            return Ok(corrupt(format!(
                "{}: id_set_checksum `{}` is not a 16-digit hex number",
                sidecar_path.display(),
                sidecar.id_set_checksum
            )));
        };
        if let Some(difference) = expected.difference(&recorded) {
            return Ok(LoadOutcome::Stale { reason: difference });
        }
        if sidecar.max_connections != params.max_connections
            || sidecar.ef_construction != params.ef_construction
        {
            return Ok(LoadOutcome::Stale {
                reason: format!(
                    "built with max_connections {} / ef_construction {}, configured {} / {}",
                    sidecar.max_connections,
                    sidecar.ef_construction,
                    params.max_connections,
                    params.ef_construction
                ),
            });
        }
        match load_checked(dir, &sidecar, &recorded, params) {
            Ok(index) => Ok(LoadOutcome::Loaded(Box::new(index))),
            Err(reason) => Ok(corrupt(reason)),
        }
    }
}

fn corrupt(reason: String) -> LoadOutcome {
    LoadOutcome::Corrupt { reason }
}

/// The hnsw_rs filter used as the last resort: a slot passes when it is live.
struct LiveSlots<'a> {
    slots: &'a [Slot],
}

impl FilterT for LiveSlots<'_> {
    fn hnsw_filter(&self, id: &usize) -> bool {
        self.slots.get(*id).is_some_and(|slot| slot.live)
    }
}

/// A validated, normalized vector waiting for its batch during a build.
struct PreparedPoint {
    slot: usize,
    owner: u32,
    vector: Vec<f32>,
}

/// The sidecar, as stored. Field names are the on-disk format.
#[derive(Debug, Serialize, Deserialize)]
struct Sidecar {
    format: u32,
    basename: String,
    dimension: usize,
    embedding_model: String,
    point_count: u64,
    max_chunk_id: Option<i64>,
    /// Hex, so that readers with 53-bit JSON numbers see it whole.
    id_set_checksum: String,
    max_connections: usize,
    ef_construction: usize,
    slot_count: usize,
    tombstones: usize,
    owners: Vec<String>,
    files: Vec<DumpFile>,
}

impl Sidecar {
    fn watermark(&self) -> Option<Watermark> {
        if self.id_set_checksum.len() != 16 {
            return None;
        }
        Some(Watermark {
            dimension: self.dimension,
            embedding_model: self.embedding_model.clone(),
            point_count: self.point_count,
            max_chunk_id: self.max_chunk_id,
            id_set_checksum: u64::from_str_radix(&self.id_set_checksum, 16).ok()?,
        })
    }

    fn file(&self, name: &str) -> Result<&DumpFile, String> {
        self.files
            .iter()
            .find(|file| file.name == name)
            .ok_or_else(|| format!("the sidecar does not list {name}"))
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct DumpFile {
    name: String,
    bytes: u64,
    sha256: String,
}

/// A name no earlier dump in `dir` used: hnsw_rs refuses to overwrite the files of a graph it
/// loaded (it assumes they may be mmapped), and a crash mid-dump must not damage the dump the
/// current sidecar points at.
fn fresh_basename(dir: &Path) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis())
        .unwrap_or(0);
    loop {
        let candidate = format!(
            "{DUMP_BASENAME_PREFIX}{millis:x}-{:08x}",
            rand::random::<u32>()
        );
        let taken = fs::read_dir(dir).is_ok_and(|mut entries| {
            entries.any(|entry| {
                entry.is_ok_and(|entry| entry.file_name().to_string_lossy().starts_with(&candidate))
            })
        });
        if !taken {
            return candidate;
        }
    }
}

/// Fsyncs a written file and records its size and SHA-256 for the sidecar.
fn described_file(dir: &Path, name: &str) -> Result<DumpFile, IndexError> {
    let path = dir.join(name);
    let file = File::open(&path).map_err(|error| IndexError::io(&path, error))?;
    file.sync_all()
        .map_err(|error| IndexError::io(&path, error))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let read = reader
            .read(&mut buffer)
            .map_err(|error| IndexError::io(&path, error))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        bytes += read as u64;
    }
    Ok(DumpFile {
        name: name.to_string(),
        bytes,
        sha256: hex::encode(hasher.finalize()),
    })
}

/// Writes the sidecar atomically: temporary file, fsync, rename, fsync of the directory.
fn write_sidecar(dir: &Path, sidecar: &Sidecar) -> Result<(), IndexError> {
    let final_path = dir.join(SIDECAR_FILE);
    let temporary_path = dir.join(format!("{SIDECAR_FILE}.tmp"));
    let text = serde_json::to_vec_pretty(sidecar)
        .map_err(|error| IndexError::Dump(format!("cannot encode the sidecar: {error}")))?;
    let write = || -> std::io::Result<()> {
        let mut file = File::create(&temporary_path)?;
        file.write_all(&text)?;
        file.sync_all()?;
        fs::rename(&temporary_path, &final_path)?;
        File::open(dir)?.sync_all()
    };
    write().map_err(|error| IndexError::io(&final_path, error))
}

/// Deletes the files of earlier dumps (only names this module writes). Failures are logged:
/// a leftover file wastes disk but harms nothing, since only the sidecar's files are read.
fn remove_other_dumps(dir: &Path, current_basename: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let current_files = format!("{current_basename}.");
    let current_partitions = format!("{current_basename}-o");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let ours = name.starts_with(DUMP_BASENAME_PREFIX)
            && [".hnsw.graph", ".hnsw.data", ".slots"]
                .iter()
                .any(|suffix| name.ends_with(suffix));
        if ours
            && !name.starts_with(&current_files)
            && !name.starts_with(&current_partitions)
            && let Err(error) = fs::remove_file(entry.path())
        {
            tracing::warn!(file = %entry.path().display(), %error, "cannot delete an old vector index dump");
        }
    }
}

/// Everything after the sidecar checks: slot table, file digests and structure, then hnsw_rs.
fn load_checked(
    dir: &Path,
    sidecar: &Sidecar,
    recorded: &Watermark,
    params: IndexParams,
) -> Result<VectorIndex, String> {
    let mut index = VectorIndex::new(sidecar.dimension, params).map_err(|error| {
        format!("the sidecar describes an index this build cannot create: {error}")
    })?;
    if sidecar.owners.len() > u32::MAX as usize {
        return Err("the sidecar lists more owners than an index can hold".to_string());
    }
    let slots_name = format!("{}.slots", sidecar.basename);
    let slots = read_slots(
        &dir.join(&slots_name),
        sidecar.file(&slots_name)?,
        sidecar.owners.len(),
    )?;
    if slots.len() != sidecar.slot_count {
        return Err(format!(
            "{slots_name} holds {} slots, the sidecar says {}",
            slots.len(),
            sidecar.slot_count
        ));
    }
    for owner in &sidecar.owners {
        index
            .intern_owner(owner)
            .map_err(|error| error.to_string())?;
    }
    if index.owners.len() != sidecar.owners.len() {
        return Err("the sidecar lists the same owner twice".to_string());
    }
    for (slot_number, slot) in slots.iter().enumerate() {
        let partition = &mut index.partitions[slot.owner as usize];
        partition.points += 1;
        if slot.live {
            if index
                .slot_of_chunk
                .insert(slot.chunk_id, slot_number)
                .is_some()
            {
                return Err(format!(
                    "{slots_name}: chunk {} is live in two slots",
                    slot.chunk_id
                ));
            }
            partition.live += 1;
        } else {
            index.tombstones += 1;
        }
    }
    index.slots = slots;
    if index.tombstones != sidecar.tombstones {
        return Err(format!(
            "{slots_name} holds {} tombstones, the sidecar says {}",
            index.tombstones, sidecar.tombstones
        ));
    }
    let recomputed = index.watermark(&sidecar.embedding_model);
    if let Some(difference) = recomputed.difference(recorded) {
        return Err(format!(
            "{slots_name} does not match its sidecar ({difference})"
        ));
    }
    for owner in 0..index.partitions.len() {
        if index.partitions[owner].points == 0 {
            continue;
        }
        let graph = load_partition(dir, sidecar, &index, owner, params)?;
        index.partitions[owner].graph = graph;
    }
    Ok(index)
}

/// Checks and loads the graph of one owner.
fn load_partition(
    dir: &Path,
    sidecar: &Sidecar,
    index: &VectorIndex,
    owner: usize,
    params: IndexParams,
) -> Result<Hnsw<'static, f32, UnitCosineDistance>, String> {
    let partition_name = partition_basename(&sidecar.basename, owner);
    let graph_name = format!("{partition_name}.hnsw.graph");
    let data_name = format!("{partition_name}.hnsw.data");
    let graph_file = sidecar.file(&graph_name)?;
    let data_file = sidecar.file(&data_name)?;
    let expected_points = index.partitions[owner].points;
    let is_member = |slot: usize| {
        index
            .slots
            .get(slot)
            .is_some_and(|entry| entry.owner as usize == owner)
    };
    dump_check::check_hnsw_dump(
        &dir.join(&graph_name),
        &dir.join(&data_name),
        &DumpExpectations {
            dimension: sidecar.dimension,
            point_count: expected_points,
            id_bound: index.slots.len(),
            is_member: &is_member,
            max_connections: params.max_connections,
            distance_name: distance_name(),
            graph_bytes: graph_file.bytes,
            graph_sha256: &graph_file.sha256,
            data_bytes: data_file.bytes,
            data_sha256: &data_file.sha256,
        },
    )?;

    // The files were just checked field by field, so hnsw_rs should not fail on them; if it
    // does anyway (a file changed between the check and the load), its asserts and indexing
    // panics become a `Corrupt` outcome here instead of a crash. Its `process::exit` paths are
    // only reachable through records the check above refuses.
    let reader: &'static mut HnswIo = Box::leak(Box::new(HnswIo::new(dir, &partition_name)));
    let loaded = catch_unwind(AssertUnwindSafe(move || {
        // Moving the captured reference (rather than reborrowing it) makes this an `FnOnce`,
        // so the graph may borrow the reader for `'static`.
        let reader = reader;
        load_leaked(reader)
    }))
    .map_err(|panic| {
        format!(
            "hnsw_rs panicked while loading {graph_name}: {}",
            panic_text(panic.as_ref())
        )
    })?
    .map_err(|error| format!("hnsw_rs could not load {graph_name}: {error}"))?;
    if loaded.get_nb_point() != expected_points {
        return Err(format!(
            "hnsw_rs loaded {} points from {graph_name}, the slot table has {expected_points}",
            loaded.get_nb_point()
        ));
    }
    Ok(loaded)
}

/// The basename of one owner's graph files within a dump.
fn partition_basename(basename: &str, owner: usize) -> String {
    format!("{basename}-o{owner}")
}

/// Takes the leaked reader by value, so the closure around it is `FnOnce` and the loaded graph
/// may borrow it for `'static`.
fn load_leaked(
    reader: &'static mut HnswIo,
) -> anyhow::Result<Hnsw<'static, f32, UnitCosineDistance>> {
    reader.load_hnsw::<f32, UnitCosineDistance>()
}

/// Reads and checks a `.slots` file against its sidecar entry.
fn read_slots(path: &Path, described: &DumpFile, owner_count: usize) -> Result<Vec<Slot>, String> {
    let bytes =
        fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    if bytes.len() as u64 != described.bytes {
        return Err(format!(
            "{} has {} bytes, the sidecar recorded {}",
            path.display(),
            bytes.len(),
            described.bytes
        ));
    }
    if hex::encode(Sha256::digest(&bytes)) != described.sha256 {
        return Err(format!(
            "{} does not match its recorded SHA-256",
            path.display()
        ));
    }
    let header_len = SLOTS_MAGIC.len() + 8;
    if bytes.len() < header_len || &bytes[..SLOTS_MAGIC.len()] != SLOTS_MAGIC {
        return Err(format!("{} has no slot table header", path.display()));
    }
    let mut count_bytes = [0u8; 8];
    count_bytes.copy_from_slice(&bytes[SLOTS_MAGIC.len()..header_len]);
    let count = u64::from_le_bytes(count_bytes);
    let body = &bytes[header_len..];
    if body.len() as u64 != count.saturating_mul(SLOT_RECORD_LEN as u64) {
        return Err(format!(
            "{} announces {count} slots but holds {} bytes of records",
            path.display(),
            body.len()
        ));
    }
    body.chunks_exact(SLOT_RECORD_LEN)
        .map(|record| {
            let mut chunk_id = [0u8; 8];
            chunk_id.copy_from_slice(&record[0..8]);
            let mut owner = [0u8; 4];
            owner.copy_from_slice(&record[8..12]);
            let owner = u32::from_le_bytes(owner);
            if owner as usize >= owner_count {
                return Err(format!(
                    "{}: owner index {owner} is out of range",
                    path.display()
                ));
            }
            let live = match record[12] {
                0 => false,
                1 => true,
                other => {
                    return Err(format!("{}: unknown slot state {other}", path.display()));
                }
            };
            Ok(Slot {
                chunk_id: i64::from_le_bytes(chunk_id),
                owner,
                live,
            })
        })
        .collect()
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_that_would_exit_the_process_are_refused_first() {
        let params = IndexParams {
            max_connections: 300,
            ..IndexParams::default()
        };
        assert!(matches!(
            VectorIndex::new(8, params),
            Err(IndexError::InvalidParams(_))
        ));
        assert!(VectorIndex::new(0, IndexParams::default()).is_err());
    }

    #[test]
    fn normalize_refuses_bad_vectors_and_scales_good_ones() {
        assert_eq!(
            normalize(&[1.0, 2.0], 3),
            Err(IndexError::DimensionMismatch {
                expected: 3,
                got: 2
            })
        );
        assert!(matches!(
            normalize(&[1.0, f32::NAN, 0.0], 3),
            Err(IndexError::NonFinite { position: 1, .. })
        ));
        assert_eq!(normalize(&[0.0; 3], 3), Err(IndexError::ZeroVector));
        let huge = normalize(&[3.0e37, 4.0e37, 0.0], 3).expect("finite large values are fine");
        assert!((huge[0] - 0.6).abs() < 1e-6 && (huge[1] - 0.8).abs() < 1e-6);
    }

    #[test]
    fn the_watermark_ignores_order_and_sees_owners() {
        let a = Watermark::from_chunks(4, "m", [(1, "x"), (2, "y")]);
        let b = Watermark::from_chunks(4, "m", [(2, "y"), (1, "x")]);
        let c = Watermark::from_chunks(4, "m", [(1, "y"), (2, "x")]);
        assert_eq!(a, b);
        assert_ne!(a.id_set_checksum, c.id_set_checksum);
        assert_eq!(a.max_chunk_id, Some(2));
    }

    #[test]
    fn unit_cosine_distance_is_one_minus_the_dot_product() {
        let distance = UnitCosineDistance;
        let x = [1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let y = [0.0f32, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let minus_x = x.map(|value| -value);
        assert_eq!(distance.eval(&x, &x), 0.0);
        assert_eq!(distance.eval(&x, &y), 1.0);
        assert_eq!(distance.eval(&x, &minus_x), 2.0);
        // The tail after the last group of eight counts too.
        let mut tail = [0.0f32; 9];
        tail[8] = 1.0;
        assert_eq!(distance.eval(&tail, &tail), 0.0);
        // Rounding above 1 is clamped, never negative.
        let unit = normalize(&[0.3, 0.7, 0.1, 0.9, 0.2, 0.4, 0.8, 0.6, 0.5], 9).unwrap();
        assert!((0.0..1e-6).contains(&distance.eval(&unit, &unit)));
        assert_eq!(distance_name(), "UnitCosineDistance");
    }

    #[test]
    fn the_index_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<VectorIndex>();
    }
}
