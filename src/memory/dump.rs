//! The vector index's dump: how a [`VectorIndex`] is written to a directory and read back.
//!
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
//! The hnsw_rs graph and data files themselves are walked by `dump_check` before hnsw_rs may
//! read them; this module owns the rest of the format (the sidecar and the `.slots` table) and
//! the order in which files are written, checked and loaded.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use hnsw_rs::api::AnnT;
use hnsw_rs::hnsw::Hnsw;
use hnsw_rs::hnswio::HnswIo;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::memory::dump_check::{self, DumpExpectations};
use crate::memory::index::{
    IndexError, IndexParams, LoadOutcome, Slot, UnitCosineDistance, VectorIndex, Watermark,
    distance_name,
};

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

impl VectorIndex {
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
