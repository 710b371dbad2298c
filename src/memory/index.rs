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
//! - The dump format (sidecar, slot table, checked loading) lives in [`crate::memory::dump`].
//!
//! The index is synchronous and CPU-bound: callers run it on a dedicated thread or in
//! `spawn_blocking`. `insert`, `remove` and `rebuild_from` take `&mut self`; `search` takes
//! `&self`, so an `RwLock<VectorIndex>` lets searches run side by side. A build inserts with
//! rayon's global pool (all cores).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use hnsw_rs::anndists::dist::distances::Distance;
use hnsw_rs::filter::FilterT;
use hnsw_rs::hnsw::{Hnsw, Neighbour};

/// hnsw_rs always works with 16 layers; its dump refuses any other count.
const LAYER_COUNT: usize = 16;

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
    pub(super) fn io(path: &Path, error: impl std::fmt::Display) -> IndexError {
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
    pub(super) fn difference(&self, recorded: &Watermark) -> Option<String> {
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
pub(super) struct UnitCosineDistance;

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
pub(super) fn distance_name() -> &'static str {
    let full = std::any::type_name::<UnitCosineDistance>();
    full.rsplit("::").next().unwrap_or(full)
}

/// One point of the graph, addressed by its hnsw `DataId` (the position in `slots`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) chunk_id: i64,
    pub(super) owner: u32,
    pub(super) live: bool,
}

/// One owner's graph. Its hnsw `DataId`s are global slot numbers.
pub(super) struct Partition {
    pub(super) graph: Hnsw<'static, f32, UnitCosineDistance>,
    /// Points in the graph, live or tombstoned.
    pub(super) points: usize,
    pub(super) live: usize,
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
    pub(super) dimension: usize,
    pub(super) params: IndexParams,
    /// Indexed by owner id.
    pub(super) partitions: Vec<Partition>,
    pub(super) slots: Vec<Slot>,
    /// Live chunks only: chunk id → slot.
    pub(super) slot_of_chunk: HashMap<i64, usize>,
    pub(super) owners: Vec<String>,
    pub(super) owner_ids: HashMap<String, u32>,
    pub(super) tombstones: usize,
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

    pub(super) fn intern_owner(&mut self, owner: &str) -> Result<u32, IndexError> {
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

#[cfg(test)]
mod tests;
