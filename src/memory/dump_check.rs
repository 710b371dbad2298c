//! A field-by-field check of an hnsw_rs 0.3.5 dump (`.hnsw.graph` + `.hnsw.data`) before
//! hnsw_rs's own loader is allowed to read it.
//!
//! Why: that loader trusts its input. On a short or damaged data record it calls
//! `std::process::exit(1)` (which no `catch_unwind` can stop), it reinterprets a record of any
//! length as `dimension` floats with `slice::from_raw_parts` (an out-of-bounds read), it
//! allocates whatever lengths the file announces, and it `assert!`s and indexes on ranks read
//! from the file. A NaN distance or vector would later panic a search. So this walk reads the
//! exact layout hnsw_rs writes (format v4, `DumpMode::Full`, native endianness, 16 layers) and
//! refuses anything it would mis-handle: bad magics, wrong lengths, out-of-range ranks and ids,
//! non-finite values, trailing bytes. It hashes both files on the way and compares the digests
//! with the sidecar's, so a flipped bit in a vector is caught too.
//!
//! The layout mirrors hnsw_rs `hnswio.rs` (`Description::dump`, `dump_point`,
//! `PointIndexation::dump`); a new hnsw_rs version must be checked against it.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::Path;

use sha2::{Digest, Sha256};

/// Magic at the start of a graph file, format v4 (the one hnsw_rs 0.3.5 writes).
const MAGIC_DESCRIPTION_V4: u32 = 0x002a_6779;
/// Magic before each layer in the graph file.
const MAGIC_LAYER: u32 = 0x000a_676f;
/// Magic before each point in the graph file.
const MAGIC_POINT: u32 = 0x000a_678f;
/// Magic at the start of the data file and before each vector.
const MAGIC_DATA: u32 = 0xa67f_0000;
/// hnsw_rs's fixed layer count (`NB_LAYER_MAX`).
const LAYER_COUNT: usize = 16;
/// `DumpMode::Full` stores each point's layer and rank; it is what `file_dump` writes.
const DUMP_MODE_FULL: u8 = 1;
/// hnsw_rs refuses names longer than this in the description.
const MAX_NAME_LEN: usize = 256;

/// What the sidecar and the slot table say the dump must contain.
pub(crate) struct DumpExpectations<'a> {
    pub dimension: usize,
    pub point_count: usize,
    /// Point ids (slot numbers) are below this bound...
    pub id_bound: usize,
    /// ...and each must belong to this graph.
    pub is_member: &'a dyn Fn(usize) -> bool,
    pub max_connections: usize,
    /// The last path segment of the distance type's name.
    pub distance_name: &'a str,
    pub graph_bytes: u64,
    pub graph_sha256: &'a str,
    pub data_bytes: u64,
    pub data_sha256: &'a str,
}

/// Checks both files completely. `Err` says what is wrong, for a `Corrupt` outcome.
pub(crate) fn check_hnsw_dump(
    graph_path: &Path,
    data_path: &Path,
    expected: &DumpExpectations<'_>,
) -> Result<(), String> {
    let mut graph = FieldReader::open(graph_path, expected.graph_bytes)?;
    let mut data = FieldReader::open(data_path, expected.data_bytes)?;

    check_description(&mut graph, expected)?;
    let magic = data.u32("data header magic")?;
    if magic != MAGIC_DATA {
        return Err(data.wrong("data header magic", magic));
    }
    let data_dimension = data.usize("data header dimension")?;
    if data_dimension != expected.dimension {
        return Err(data.wrong("data header dimension", data_dimension));
    }

    let layers = graph.u8("layer count")?;
    if usize::from(layers) != LAYER_COUNT {
        return Err(graph.wrong("layer count", layers));
    }
    // hnsw_rs keeps at most 2 × M links per point and layer; anything beyond is damage.
    let max_links = 2 * expected.max_connections + 1;
    let mut seen_ids = vec![false; expected.id_bound];
    let mut origins_by_layer: Vec<Vec<usize>> = Vec::with_capacity(LAYER_COUNT);
    let mut highest_linked_rank = [-1i64; LAYER_COUNT];
    let mut total_points = 0usize;
    for layer in 0..LAYER_COUNT {
        let magic = graph.u32("layer magic")?;
        if magic != MAGIC_LAYER {
            return Err(graph.wrong("layer magic", magic));
        }
        let points_in_layer = graph.usize("points in layer")?;
        if points_in_layer > expected.point_count - total_points {
            return Err(graph.wrong("points in layer", points_in_layer));
        }
        let mut origins = Vec::with_capacity(points_in_layer);
        for rank in 0..points_in_layer {
            let origin = check_graph_point(
                &mut graph,
                layer,
                rank,
                max_links,
                &mut seen_ids,
                &mut highest_linked_rank,
            )?;
            if !(expected.is_member)(origin) {
                return Err(graph.wrong("point id (belongs to another graph)", origin));
            }
            check_data_point(&mut data, origin, expected.dimension)?;
            origins.push(origin);
        }
        total_points += points_in_layer;
        origins_by_layer.push(origins);
    }
    if total_points != expected.point_count {
        return Err(format!(
            "{}: {total_points} points in the layers, expected {}",
            graph.name, expected.point_count
        ));
    }
    for (layer, highest) in highest_linked_rank.iter().enumerate() {
        if *highest >= origins_by_layer[layer].len() as i64 {
            return Err(format!(
                "{}: a link points at rank {highest} of layer {layer}, which holds {} points",
                graph.name,
                origins_by_layer[layer].len()
            ));
        }
    }

    let entry_origin = graph.usize("entry point id")?;
    let entry_layer = usize::from(graph.u8("entry point layer")?);
    let entry_rank = graph.i32("entry point rank")?;
    let entry_matches = origins_by_layer
        .get(entry_layer)
        .and_then(|origins| {
            usize::try_from(entry_rank)
                .ok()
                .and_then(|r| origins.get(r))
        })
        .is_some_and(|origin| *origin == entry_origin);
    if !entry_matches {
        return Err(format!(
            "{}: the entry point (id {entry_origin}, layer {entry_layer}, rank {entry_rank}) is not a stored point",
            graph.name
        ));
    }
    graph.finish(expected.graph_sha256)?;
    data.finish(expected.data_sha256)?;
    Ok(())
}

fn check_description(
    graph: &mut FieldReader,
    expected: &DumpExpectations<'_>,
) -> Result<(), String> {
    let magic = graph.u32("description magic")?;
    if magic != MAGIC_DESCRIPTION_V4 {
        return Err(graph.wrong("description magic", magic));
    }
    let mode = graph.u8("dump mode")?;
    if mode != DUMP_MODE_FULL {
        return Err(graph.wrong("dump mode", mode));
    }
    let max_connections = graph.u8("max connections")?;
    if usize::from(max_connections) != expected.max_connections {
        return Err(graph.wrong("max connections", max_connections));
    }
    let level_scale = graph.f64("level scale")?;
    if !(level_scale.is_finite() && level_scale > 0.0 && level_scale <= 10.0) {
        return Err(graph.wrong("level scale", level_scale));
    }
    let layers = graph.u8("description layer count")?;
    if usize::from(layers) != LAYER_COUNT {
        return Err(graph.wrong("description layer count", layers));
    }
    let _ef_construction = graph.usize("ef construction")?;
    let point_count = graph.usize("point count")?;
    if point_count != expected.point_count {
        return Err(graph.wrong("point count", point_count));
    }
    let dimension = graph.usize("dimension")?;
    if dimension != expected.dimension {
        return Err(graph.wrong("dimension", dimension));
    }
    let distance = graph.name_field("distance name")?;
    if distance.rsplit("::").next() != Some(expected.distance_name) {
        return Err(format!(
            "{}: distance is `{distance}`, expected {}",
            graph.name, expected.distance_name
        ));
    }
    let value_type = graph.name_field("value type name")?;
    if value_type != "f32" {
        return Err(format!(
            "{}: value type is `{value_type}`, expected f32",
            graph.name
        ));
    }
    Ok(())
}

/// Checks one point record of the graph file and returns its id (hnsw `DataId`).
fn check_graph_point(
    graph: &mut FieldReader,
    layer: usize,
    rank: usize,
    max_links: usize,
    seen_ids: &mut [bool],
    highest_linked_rank: &mut [i64; LAYER_COUNT],
) -> Result<usize, String> {
    let magic = graph.u32("point magic")?;
    if magic != MAGIC_POINT {
        return Err(graph.wrong("point magic", magic));
    }
    let origin = graph.usize("point id")?;
    match seen_ids.get_mut(origin) {
        Some(seen) if !*seen => *seen = true,
        _ => return Err(graph.wrong("point id (out of range or repeated)", origin)),
    }
    let point_layer = graph.u8("point layer")?;
    if usize::from(point_layer) != layer {
        return Err(graph.wrong("point layer", point_layer));
    }
    let point_rank = graph.i32("point rank")?;
    if usize::try_from(point_rank).ok() != Some(rank) {
        return Err(graph.wrong("point rank", point_rank));
    }
    for _ in 0..LAYER_COUNT {
        let links = graph.usize("link count")?;
        if links > max_links {
            return Err(graph.wrong("link count", links));
        }
        for _ in 0..links {
            let _linked_id = graph.usize("link id")?;
            let linked_layer = usize::from(graph.u8("link layer")?);
            if linked_layer >= LAYER_COUNT {
                return Err(graph.wrong("link layer", linked_layer));
            }
            let linked_rank = graph.i32("link rank")?;
            if linked_rank < 0 {
                return Err(graph.wrong("link rank", linked_rank));
            }
            let highest = &mut highest_linked_rank[linked_layer];
            *highest = (*highest).max(i64::from(linked_rank));
            let distance = graph.f32("link distance")?;
            if !(distance.is_finite() && (0.0..=2.0001).contains(&distance)) {
                return Err(graph.wrong("link distance", distance));
            }
        }
    }
    Ok(origin)
}

/// Checks one vector record of the data file.
fn check_data_point(data: &mut FieldReader, origin: usize, dimension: usize) -> Result<(), String> {
    let magic = data.u32("vector magic")?;
    if magic != MAGIC_DATA {
        return Err(data.wrong("vector magic", magic));
    }
    let stored_origin = data.u64("vector id")?;
    if stored_origin != origin as u64 {
        return Err(data.wrong("vector id (differs from the graph's)", stored_origin));
    }
    let byte_len = data.u64("vector length")?;
    if byte_len != (dimension * std::mem::size_of::<f32>()) as u64 {
        return Err(data.wrong("vector length", byte_len));
    }
    let mut norm_squared = 0f64;
    for _ in 0..dimension {
        let value = data.f32("vector value")?;
        if !value.is_finite() {
            return Err(data.wrong("vector value", value));
        }
        norm_squared += f64::from(value) * f64::from(value);
    }
    // Every stored vector was normalized on insertion.
    if (norm_squared - 1.0).abs() > 1e-3 {
        return Err(format!(
            "{}: vector {origin} has squared norm {norm_squared}, expected 1",
            data.name
        ));
    }
    Ok(())
}

/// Reads native-endian fields and hashes every byte read, for the digest check at the end.
struct FieldReader {
    name: String,
    reader: BufReader<HashingFile>,
    offset: u64,
    length: u64,
}

/// The file under the buffer: hashing here sees large reads, not one call per field.
struct HashingFile {
    file: File,
    hasher: Sha256,
}

impl Read for HashingFile {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.file.read(buffer)?;
        self.hasher.update(&buffer[..read]);
        Ok(read)
    }
}

impl FieldReader {
    fn open(path: &Path, recorded_bytes: u64) -> Result<FieldReader, String> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|error| format!("cannot open {name}: {error}"))?;
        let length = file
            .metadata()
            .map_err(|error| format!("cannot stat {name}: {error}"))?
            .len();
        if length != recorded_bytes {
            return Err(format!(
                "{name} has {length} bytes, the sidecar recorded {recorded_bytes} (truncated or replaced)"
            ));
        }
        Ok(FieldReader {
            name,
            reader: BufReader::with_capacity(
                1 << 20,
                HashingFile {
                    file,
                    hasher: Sha256::new(),
                },
            ),
            offset: 0,
            length,
        })
    }

    fn bytes<const N: usize>(&mut self, field: &str) -> Result<[u8; N], String> {
        let mut buffer = [0u8; N];
        self.reader.read_exact(&mut buffer).map_err(|error| {
            if error.kind() == ErrorKind::UnexpectedEof {
                format!(
                    "{}: ends inside `{field}` at byte {} of {}",
                    self.name, self.offset, self.length
                )
            } else {
                format!("{}: cannot read `{field}`: {error}", self.name)
            }
        })?;
        self.offset += N as u64;
        Ok(buffer)
    }

    fn u8(&mut self, field: &str) -> Result<u8, String> {
        Ok(u8::from_ne_bytes(self.bytes::<1>(field)?))
    }

    fn u32(&mut self, field: &str) -> Result<u32, String> {
        Ok(u32::from_ne_bytes(self.bytes::<4>(field)?))
    }

    fn i32(&mut self, field: &str) -> Result<i32, String> {
        Ok(i32::from_ne_bytes(self.bytes::<4>(field)?))
    }

    fn u64(&mut self, field: &str) -> Result<u64, String> {
        Ok(u64::from_ne_bytes(self.bytes::<8>(field)?))
    }

    fn usize(&mut self, field: &str) -> Result<usize, String> {
        const SIZE: usize = std::mem::size_of::<usize>();
        Ok(usize::from_ne_bytes(self.bytes::<SIZE>(field)?))
    }

    fn f32(&mut self, field: &str) -> Result<f32, String> {
        Ok(f32::from_ne_bytes(self.bytes::<4>(field)?))
    }

    fn f64(&mut self, field: &str) -> Result<f64, String> {
        Ok(f64::from_ne_bytes(self.bytes::<8>(field)?))
    }

    /// A length-prefixed UTF-8 name, as hnsw_rs writes the distance and type names.
    fn name_field(&mut self, field: &str) -> Result<String, String> {
        let len = self.usize(field)?;
        if len > MAX_NAME_LEN {
            return Err(self.wrong(field, len));
        }
        let mut buffer = vec![0u8; len];
        self.reader
            .read_exact(&mut buffer)
            .map_err(|error| format!("{}: cannot read `{field}`: {error}", self.name))?;
        self.offset += len as u64;
        String::from_utf8(buffer).map_err(|_| format!("{}: `{field}` is not UTF-8", self.name))
    }

    fn wrong(&self, field: &str, value: impl std::fmt::Debug) -> String {
        format!(
            "{}: unexpected `{field}` {value:?} before byte {}",
            self.name, self.offset
        )
    }

    /// Requires the end of the file here and compares the digest of everything read.
    fn finish(mut self, recorded_sha256: &str) -> Result<(), String> {
        let mut probe = [0u8; 1];
        match self.reader.read(&mut probe) {
            Ok(0) => {}
            Ok(_) => {
                return Err(format!(
                    "{}: unexpected bytes after the last record (byte {})",
                    self.name, self.offset
                ));
            }
            Err(error) => return Err(format!("{}: cannot read: {error}", self.name)),
        }
        let digest = hex::encode(self.reader.into_inner().hasher.finalize());
        if digest != recorded_sha256 {
            return Err(format!(
                "{}: SHA-256 {digest} differs from the recorded {recorded_sha256}",
                self.name
            ));
        }
        Ok(())
    }
}
