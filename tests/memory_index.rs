//! Semantic memory parts at their boundaries: the hnsw index (search, owner filter, tombstones,
//! dump and load, damaged dumps on real files), the embeddings client against the loopback fake
//! speaking the OpenAI and Gemini protocols, and surprise gating / RRF on the fake's vectors.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clawvisor::memory::dump::SIDECAR_FILE;
use clawvisor::memory::embeddings::{
    EmbeddingsClient, EmbeddingsConfig, EmbeddingsError, EmbeddingsProtocol,
};
use clawvisor::memory::index::{
    ChunkVector, Hit, IndexError, IndexParams, LoadOutcome, OwnerFilter, VectorIndex, Watermark,
};
use clawvisor::memory::scoring::{self, GateDecision};
use clawvisor::secrets::Secret;
use clawvisor::testkit::fake_embeddings::{FakeEmbeddings, FakeEmbeddingsOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use sha2::{Digest, Sha256};

const MODEL: &str = "test-embedding-model";
const OWNERS: [&str; 3] = ["assistant", "research", "platform"];

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn random_vector(rng: &mut StdRng, dimension: usize) -> Vec<f32> {
    (0..dimension)
        .map(|_| rng.random_range(-1.0f32..1.0))
        .collect()
}

/// The chunks a test puts in an index, kept beside it as "SQLite" would.
struct Corpus {
    dimension: usize,
    chunks: Vec<ChunkVector>,
}

impl Corpus {
    fn random(seed: u64, count: usize, dimension: usize) -> Corpus {
        let mut rng = StdRng::seed_from_u64(seed);
        let chunks = (0..count)
            .map(|position| ChunkVector {
                id: 1_000 + position as i64,
                owner: OWNERS[position % OWNERS.len()].to_string(),
                vector: random_vector(&mut rng, dimension),
            })
            .collect();
        Corpus { dimension, chunks }
    }

    fn owner_of(&self) -> HashMap<i64, String> {
        self.chunks
            .iter()
            .map(|chunk| (chunk.id, chunk.owner.clone()))
            .collect()
    }

    fn index(&self) -> VectorIndex {
        let mut index = VectorIndex::new(self.dimension, IndexParams::default()).unwrap();
        for chunk in &self.chunks {
            index.insert(chunk.id, &chunk.owner, &chunk.vector).unwrap();
        }
        index
    }

    /// What the caller would compute from SQLite for the live chunks.
    fn watermark(&self, removed: &HashSet<i64>) -> Watermark {
        Watermark::from_chunks(
            self.dimension,
            MODEL,
            self.chunks
                .iter()
                .filter(|chunk| !removed.contains(&chunk.id))
                .map(|chunk| (chunk.id, chunk.owner.as_str())),
        )
    }
}

fn cosine(left: &[f32], right: &[f32]) -> f32 {
    let dot: f64 = left
        .iter()
        .zip(right)
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>().sqrt();
    (dot / (norm(left) * norm(right))) as f32
}

fn loaded(outcome: LoadOutcome) -> VectorIndex {
    match outcome {
        LoadOutcome::Loaded(index) => *index,
        other => panic!("expected Loaded, got {other:?}"),
    }
}

fn sidecar(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join(SIDECAR_FILE)).unwrap()).unwrap()
}

fn dump_file(dir: &Path, suffix: &str) -> PathBuf {
    let basename = sidecar(dir)["basename"].as_str().unwrap().to_string();
    dir.join(format!("{basename}{suffix}"))
}

/// Rewrites the sizes and digests in the sidecar to match the files as they are now, so that a
/// damaged file gets past the digest check and must be caught by the structural check.
fn resign_sidecar(dir: &Path) {
    let mut sidecar = sidecar(dir);
    for file in sidecar["files"].as_array_mut().unwrap() {
        let bytes = fs::read(dir.join(file["name"].as_str().unwrap())).unwrap();
        file["bytes"] = json!(bytes.len());
        file["sha256"] = json!(hex::encode(Sha256::digest(&bytes)));
    }
    fs::write(
        dir.join(SIDECAR_FILE),
        serde_json::to_vec(&sidecar).unwrap(),
    )
    .unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// The index
// ---------------------------------------------------------------------------------------------

#[test]
fn search_finds_the_nearest_chunks_and_respects_the_owner_filter() {
    let corpus = Corpus::random(1, 600, 32);
    let index = corpus.index();
    let owner_of = corpus.owner_of();
    assert_eq!(index.len(), 600);

    // A stored vector finds itself first, with similarity 1, and the rest in brute-force order.
    for chunk in corpus.chunks.iter().step_by(37) {
        let hits = index
            .search(&chunk.vector, 10, &OwnerFilter::any())
            .unwrap();
        assert_eq!(hits.len(), 10);
        assert_eq!(hits[0].id, chunk.id);
        assert!((hits[0].similarity - 1.0).abs() < 1e-4, "{hits:?}");
        assert!(hits.windows(2).all(|w| w[0].similarity >= w[1].similarity));
        let mut exact: Vec<(i64, f32)> = corpus
            .chunks
            .iter()
            .map(|other| (other.id, cosine(&chunk.vector, &other.vector)))
            .collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1));
        let exact_top: HashSet<i64> = exact[..10].iter().map(|(id, _)| *id).collect();
        let found: HashSet<i64> = hits.iter().map(|hit| hit.id).collect();
        assert!(
            exact_top.intersection(&found).count() >= 9,
            "recall too low for chunk {}",
            chunk.id
        );
        for hit in &hits {
            let expected = exact.iter().find(|(id, _)| *id == hit.id).unwrap().1;
            assert!((hit.similarity - expected).abs() < 1e-4);
        }
    }

    // Owner filter: only allowed owners, still k results.
    let mut rng = StdRng::seed_from_u64(99);
    for _ in 0..20 {
        let query = random_vector(&mut rng, 32);
        let only_research = OwnerFilter::only(["research"]);
        let hits = index.search(&query, 10, &only_research).unwrap();
        assert_eq!(hits.len(), 10);
        assert!(hits.iter().all(|hit| owner_of[&hit.id] == "research"));
        let two = OwnerFilter::only(["assistant", "platform"]);
        let hits = index.search(&query, 25, &two).unwrap();
        assert_eq!(hits.len(), 25);
        assert!(hits.iter().all(|hit| owner_of[&hit.id] != "research"));
    }
    let nobody = OwnerFilter::only(["stranger"]);
    assert!(
        index
            .search(&corpus.chunks[0].vector, 5, &nobody)
            .unwrap()
            .is_empty()
    );
    assert!(
        index
            .search(&corpus.chunks[0].vector, 0, &OwnerFilter::any())
            .unwrap()
            .is_empty()
    );
    // More than exist: all of them.
    let small = Corpus::random(2, 7, 32).index();
    assert_eq!(
        small
            .search(&random_vector(&mut rng, 32), 50, &OwnerFilter::any())
            .unwrap()
            .len(),
        7
    );
}

#[test]
fn removed_chunks_never_come_back_and_k_results_still_do() {
    let corpus = Corpus::random(3, 900, 24);
    let mut index = corpus.index();
    let owner_of = corpus.owner_of();
    let mut removed = HashSet::new();
    // Remove 40 % of the assistant's chunks and a few others.
    for chunk in corpus.chunks.iter() {
        let drop_it = (chunk.owner == "assistant" && chunk.id % 5 < 2) || chunk.id % 97 == 0;
        if drop_it {
            assert!(index.remove(chunk.id));
            removed.insert(chunk.id);
        }
    }
    let already_removed = *removed.iter().next().unwrap();
    assert!(
        !index.remove(already_removed),
        "removing twice does nothing"
    );
    assert!(!index.remove(424_242), "unknown ids are not removed");
    assert_eq!(index.tombstones(), removed.len());
    assert_eq!(index.len(), 900 - removed.len());

    // Each removed vector, used as the query, must not find itself any more.
    for id in &removed {
        let chunk = corpus.chunks.iter().find(|chunk| chunk.id == *id).unwrap();
        let hits = index
            .search(&chunk.vector, 10, &OwnerFilter::any())
            .unwrap();
        assert_eq!(hits.len(), 10);
        assert!(hits.iter().all(|hit| !removed.contains(&hit.id)));
        let own = index
            .search(
                &chunk.vector,
                10,
                &OwnerFilter::only([chunk.owner.as_str()]),
            )
            .unwrap();
        assert_eq!(
            own.len(),
            10,
            "k results from the remaining chunks of the owner"
        );
        assert!(
            own.iter()
                .all(|hit| !removed.contains(&hit.id) && owner_of[&hit.id] == chunk.owner)
        );
    }

    // A small owner with most chunks removed still returns every remaining one.
    let mut small = VectorIndex::new(24, IndexParams::default()).unwrap();
    let mut rng = StdRng::seed_from_u64(4);
    for id in 0..500 {
        let owner = if id % 50 == 0 { "rare" } else { "common" };
        small
            .insert(id, owner, &random_vector(&mut rng, 24))
            .unwrap();
    }
    for id in [0, 50, 100, 150, 200, 250, 300] {
        small.remove(id);
    }
    let hits = small
        .search(
            &random_vector(&mut rng, 24),
            5,
            &OwnerFilter::only(["rare"]),
        )
        .unwrap();
    let ids: HashSet<i64> = hits.iter().map(|hit| hit.id).collect();
    assert_eq!(ids, HashSet::from([350, 400, 450]));

    // An owner with 95 % of its chunks removed (no rebuild yet): searches still return k live
    // chunks, the exact nearest ones among the few that are left.
    let mut heavy = VectorIndex::new(24, IndexParams::default()).unwrap();
    let mut vectors = HashMap::new();
    for id in 0..2_000i64 {
        let vector = random_vector(&mut rng, 24);
        heavy.insert(id, "crowded", &vector).unwrap();
        vectors.insert(id, vector);
    }
    for id in 0..2_000i64 {
        if id % 20 != 0 {
            heavy.remove(id);
        }
    }
    assert!(heavy.needs_rebuild());
    for _ in 0..20 {
        let query = random_vector(&mut rng, 24);
        let hits = heavy.search(&query, 10, &OwnerFilter::any()).unwrap();
        let mut exact: Vec<(i64, f32)> = (0..2_000i64)
            .filter(|id| id % 20 == 0)
            .map(|id| (id, cosine(&query, &vectors[&id])))
            .collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1));
        let found: HashSet<i64> = hits.iter().map(|hit| hit.id).collect();
        let expected: HashSet<i64> = exact[..10].iter().map(|(id, _)| *id).collect();
        assert_eq!(hits.len(), 10);
        assert!(
            found.intersection(&expected).count() >= 9,
            "{found:?} vs {expected:?}"
        );
    }

    // A removed id may come back with a new vector, found by the new vector only.
    let old = corpus
        .chunks
        .iter()
        .find(|chunk| removed.contains(&chunk.id))
        .unwrap();
    let new_vector = random_vector(&mut rng, 24);
    index.insert(old.id, &old.owner, &new_vector).unwrap();
    assert_eq!(
        index.search(&new_vector, 1, &OwnerFilter::any()).unwrap()[0].id,
        old.id
    );
    assert!(
        index
            .search(&old.vector, 10, &OwnerFilter::any())
            .unwrap()
            .iter()
            .all(|hit| hit.id != old.id || hit.similarity < 0.99)
    );
}

#[test]
fn tombstones_trigger_a_rebuild_that_drops_them() {
    let corpus = Corpus::random(5, 400, 16);
    let mut index = corpus.index();
    let mut removed = HashSet::new();
    for chunk in corpus.chunks.iter().take(79) {
        index.remove(chunk.id);
        removed.insert(chunk.id);
    }
    assert!(!index.needs_rebuild(), "79 of 400 is under 20 %");
    index.remove(corpus.chunks[79].id);
    index.remove(corpus.chunks[80].id);
    removed.insert(corpus.chunks[79].id);
    removed.insert(corpus.chunks[80].id);
    assert!(index.needs_rebuild(), "81 of 400 is over 20 %");

    let live: Vec<ChunkVector> = corpus
        .chunks
        .iter()
        .filter(|chunk| !removed.contains(&chunk.id))
        .cloned()
        .collect();
    let report = index.rebuild_from(live.clone()).unwrap();
    assert_eq!(report.inserted, live.len());
    assert!(report.rejected.is_empty());
    assert_eq!(index.tombstones(), 0);
    assert!(!index.needs_rebuild());
    assert_eq!(index.len(), live.len());
    for chunk in live.iter().step_by(13) {
        assert_eq!(
            index.search(&chunk.vector, 1, &OwnerFilter::any()).unwrap()[0].id,
            chunk.id
        );
    }
    assert_eq!(index.watermark(MODEL), corpus.watermark(&removed));
}

#[test]
fn bad_vectors_are_refused_with_a_clear_error() {
    let mut index = VectorIndex::new(4, IndexParams::default()).unwrap();
    index.insert(1, "assistant", &[1.0, 0.0, 0.0, 0.0]).unwrap();
    let error = index.insert(2, "assistant", &[1.0, 0.0, 0.0]).unwrap_err();
    assert_eq!(
        error,
        IndexError::DimensionMismatch {
            expected: 4,
            got: 3
        }
    );
    assert!(error.to_string().contains("rebuild the index"), "{error}");
    assert!(matches!(
        index.insert(3, "assistant", &[1.0, f32::NAN, 0.0, 0.0]),
        Err(IndexError::NonFinite { position: 1, .. })
    ));
    assert!(matches!(
        index.insert(4, "assistant", &[f32::INFINITY, 0.0, 0.0, 0.0]),
        Err(IndexError::NonFinite { position: 0, .. })
    ));
    assert_eq!(
        index.insert(5, "assistant", &[0.0; 4]),
        Err(IndexError::ZeroVector)
    );
    assert_eq!(
        index.insert(1, "assistant", &[0.0, 1.0, 0.0, 0.0]),
        Err(IndexError::DuplicateId { id: 1 })
    );
    // Queries are checked the same way instead of panicking inside hnsw_rs.
    assert!(matches!(
        index.search(&[1.0, 0.0], 3, &OwnerFilter::any()),
        Err(IndexError::DimensionMismatch { .. })
    ));
    assert!(
        index
            .search(&[f32::NAN; 4], 3, &OwnerFilter::any())
            .is_err()
    );
    assert_eq!(index.len(), 1, "refused vectors leave no trace");

    // A build reports bad rows instead of failing as a whole.
    let chunks = vec![
        ChunkVector {
            id: 10,
            owner: "a".into(),
            vector: vec![1.0, 2.0, 3.0, 4.0],
        },
        ChunkVector {
            id: 11,
            owner: "a".into(),
            vector: vec![1.0, 2.0],
        },
        ChunkVector {
            id: 12,
            owner: "a".into(),
            vector: vec![f32::NAN, 2.0, 3.0, 4.0],
        },
        ChunkVector {
            id: 10,
            owner: "a".into(),
            vector: vec![4.0, 3.0, 2.0, 1.0],
        },
        ChunkVector {
            id: 13,
            owner: "b".into(),
            vector: vec![0.0, 0.0, 1.0, 0.0],
        },
    ];
    let (built, report) = VectorIndex::build(4, IndexParams::default(), chunks).unwrap();
    assert_eq!(report.inserted, 2);
    let rejected: Vec<i64> = report.rejected.iter().map(|(id, _)| *id).collect();
    assert_eq!(rejected, vec![11, 12, 10]);
    assert_eq!(built.len(), 2);

    // Parameters that would make hnsw_rs exit the process are refused up front.
    for params in [
        IndexParams {
            max_connections: 257,
            ..IndexParams::default()
        },
        IndexParams {
            max_connections: 0,
            ..IndexParams::default()
        },
        IndexParams {
            ef_search: 0,
            ..IndexParams::default()
        },
        IndexParams {
            rebuild_tombstone_ratio: f64::NAN,
            ..IndexParams::default()
        },
    ] {
        assert!(matches!(
            VectorIndex::new(8, params),
            Err(IndexError::InvalidParams(_))
        ));
    }
}

#[test]
fn a_dump_loads_back_with_identical_search_results() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::random(6, 700, 32);
    let mut index = corpus.index();
    let mut removed = HashSet::new();
    for chunk in corpus.chunks.iter().step_by(9) {
        index.remove(chunk.id);
        removed.insert(chunk.id);
    }
    let watermark = index.dump(dir.path(), MODEL).unwrap();
    assert_eq!(watermark, corpus.watermark(&removed));
    assert_eq!(watermark.point_count as usize, 700 - removed.len());

    let reloaded =
        loaded(VectorIndex::load(dir.path(), &watermark, IndexParams::default()).unwrap());
    assert_eq!(reloaded.len(), index.len());
    assert_eq!(reloaded.tombstones(), index.tombstones());
    let mut rng = StdRng::seed_from_u64(7);
    let filters = [
        OwnerFilter::any(),
        OwnerFilter::only(["assistant"]),
        OwnerFilter::only(["research", "platform"]),
    ];
    for round in 0..60 {
        let query = random_vector(&mut rng, 32);
        let filter = &filters[round % filters.len()];
        let before: Vec<Hit> = index.search(&query, 10, filter).unwrap();
        let after: Vec<Hit> = reloaded.search(&query, 10, filter).unwrap();
        assert_eq!(before, after, "round {round}");
        assert!(after.iter().all(|hit| !removed.contains(&hit.id)));
    }

    // The loaded index keeps working: insert, dump again (hnsw_rs refuses to overwrite the
    // files of a loaded graph; fresh names avoid that), load again.
    let mut reloaded = reloaded;
    let extra = random_vector(&mut rng, 32);
    reloaded.insert(99_999, "assistant", &extra).unwrap();
    let second = reloaded.dump(dir.path(), MODEL).unwrap();
    assert_eq!(second.point_count, watermark.point_count + 1);
    let again = loaded(VectorIndex::load(dir.path(), &second, IndexParams::default()).unwrap());
    assert_eq!(
        again.search(&extra, 1, &OwnerFilter::any()).unwrap()[0].id,
        99_999
    );
    // Only the latest dump's files remain: the sidecar, the slot table, and a graph and a data
    // file per owner.
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2 + 2 * OWNERS.len(), "{names:?}");

    // An empty index dumps and loads too.
    let empty_dir = tempfile::tempdir().unwrap();
    let empty = VectorIndex::new(32, IndexParams::default()).unwrap();
    let empty_mark = empty.dump(empty_dir.path(), MODEL).unwrap();
    assert_eq!(empty_mark.point_count, 0);
    let empty =
        loaded(VectorIndex::load(empty_dir.path(), &empty_mark, IndexParams::default()).unwrap());
    assert!(empty.is_empty());
}

#[test]
fn a_dump_that_disagrees_with_sqlite_is_stale_and_a_missing_one_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        VectorIndex::load(
            dir.path(),
            &Corpus::random(8, 1, 8).watermark(&HashSet::new()),
            IndexParams::default()
        )
        .unwrap(),
        LoadOutcome::Missing
    ));
    let corpus = Corpus::random(8, 200, 8);
    let index = corpus.index();
    let recorded = index.dump(dir.path(), MODEL).unwrap();

    let mut one_more = corpus
        .chunks
        .iter()
        .map(|c| (c.id, c.owner.as_str()))
        .collect::<Vec<_>>();
    one_more.push((5_000, "assistant"));
    let mut moved = corpus
        .chunks
        .iter()
        .map(|c| (c.id, c.owner.as_str()))
        .collect::<Vec<_>>();
    moved[3].1 = "research";
    moved[4].1 = "assistant";
    let mut swapped_id = corpus
        .chunks
        .iter()
        .map(|c| (c.id, c.owner.as_str()))
        .collect::<Vec<_>>();
    swapped_id[10].0 = 77; // same count, same max id, another id set
    let cases: Vec<(Watermark, &str)> = vec![
        (Watermark::from_chunks(8, MODEL, one_more), "chunk count"),
        (
            Watermark::from_chunks(8, MODEL, moved),
            "(chunk id, owner) pairs",
        ),
        (
            Watermark::from_chunks(8, MODEL, swapped_id),
            "(chunk id, owner) pairs",
        ),
        (
            Watermark {
                embedding_model: "another-model".into(),
                ..recorded.clone()
            },
            "embeddings model",
        ),
        (
            Watermark {
                dimension: 16,
                ..recorded.clone()
            },
            "dimension",
        ),
        (
            Watermark {
                max_chunk_id: Some(1),
                ..recorded.clone()
            },
            "highest chunk id",
        ),
    ];
    for (expected, words) in cases {
        match VectorIndex::load(dir.path(), &expected, IndexParams::default()).unwrap() {
            LoadOutcome::Stale { reason } => assert!(reason.contains(words), "{reason}"),
            other => panic!("expected Stale ({words}), got {other:?}"),
        }
    }
    let other_graph = IndexParams {
        max_connections: 24,
        ..IndexParams::default()
    };
    assert!(matches!(
        VectorIndex::load(dir.path(), &recorded, other_graph).unwrap(),
        LoadOutcome::Stale { .. }
    ));
    // ef_search is not baked into the graph: changing it keeps the dump.
    let wider = IndexParams {
        ef_search: 200,
        ..IndexParams::default()
    };
    assert!(matches!(
        VectorIndex::load(dir.path(), &recorded, wider).unwrap(),
        LoadOutcome::Loaded(_)
    ));
    assert!(
        VectorIndex::load(
            dir.path(),
            &recorded,
            IndexParams {
                max_connections: 999,
                ..IndexParams::default()
            }
        )
        .is_err()
    );
}

/// Every way of damaging a dump ends as `Corrupt`, and none of them panics or exits the process
/// (an exit would end this test binary, a panic would fail the test).
#[test]
fn damaged_dumps_are_corrupt_and_never_crash() {
    let pristine = tempfile::tempdir().unwrap();
    let corpus = Corpus::random(9, 300, 16);
    let recorded = corpus.index().dump(pristine.path(), MODEL).unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut case_number = 0;
    let mut expect_corrupt = |name: &str, damage: &dyn Fn(&Path)| {
        case_number += 1;
        let dir = work.path().join(format!("case-{case_number}"));
        copy_dir(pristine.path(), &dir);
        damage(&dir);
        match VectorIndex::load(&dir, &recorded, IndexParams::default()).unwrap() {
            LoadOutcome::Corrupt { reason } => assert!(!reason.is_empty()),
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        }
    };

    let truncate = |path: PathBuf, keep: f64| {
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..(bytes.len() as f64 * keep) as usize]).unwrap();
    };
    expect_corrupt("graph truncated", &|dir| {
        truncate(dump_file(dir, "-o0.hnsw.graph"), 0.5)
    });
    expect_corrupt("data truncated", &|dir| {
        truncate(dump_file(dir, "-o0.hnsw.data"), 0.7)
    });
    expect_corrupt("slots truncated", &|dir| {
        truncate(dump_file(dir, ".slots"), 0.5)
    });
    expect_corrupt("data emptied", &|dir| {
        truncate(dump_file(dir, "-o0.hnsw.data"), 0.0)
    });
    expect_corrupt("data deleted", &|dir| {
        fs::remove_file(dump_file(dir, "-o0.hnsw.data")).unwrap()
    });
    expect_corrupt("sidecar garbage", &|dir| {
        fs::write(dir.join(SIDECAR_FILE), b"{not json").unwrap()
    });
    expect_corrupt("one flipped bit in a vector", &|dir| {
        let path = dump_file(dir, "-o0.hnsw.data");
        let mut bytes = fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x01;
        fs::write(&path, bytes).unwrap();
    });
    let garbage = |path: PathBuf| {
        let length = fs::metadata(&path).unwrap().len() as usize;
        let mut rng = StdRng::seed_from_u64(length as u64);
        let bytes: Vec<u8> = (0..length).map(|_| rng.random()).collect();
        fs::write(&path, bytes).unwrap();
    };
    expect_corrupt("graph garbage", &|dir| {
        garbage(dump_file(dir, "-o0.hnsw.graph"))
    });
    expect_corrupt("data garbage", &|dir| {
        garbage(dump_file(dir, "-o0.hnsw.data"))
    });

    // The same damage with the digests re-signed: the structural walk alone must catch it,
    // because hnsw_rs's loader would exit the process (short data record) or read out of bounds.
    expect_corrupt("data truncated, re-signed", &|dir| {
        truncate(dump_file(dir, "-o0.hnsw.data"), 0.7);
        resign_sidecar(dir);
    });
    expect_corrupt("graph truncated, re-signed", &|dir| {
        truncate(dump_file(dir, "-o0.hnsw.graph"), 0.4);
        resign_sidecar(dir);
    });
    expect_corrupt("graph garbage, re-signed", &|dir| {
        garbage(dump_file(dir, "-o0.hnsw.graph"));
        resign_sidecar(dir);
    });
    expect_corrupt("data garbage, re-signed", &|dir| {
        garbage(dump_file(dir, "-o0.hnsw.data"));
        resign_sidecar(dir);
    });
    expect_corrupt("NaN in a vector, re-signed", &|dir| {
        let path = dump_file(dir, "-o0.hnsw.data");
        let mut bytes = fs::read(&path).unwrap();
        // Header (magic u32 + dimension usize), then record: magic, id u64, length u64, values.
        let first_value = 4 + 8 + 4 + 8 + 8;
        bytes[first_value..first_value + 4].copy_from_slice(&f32::NAN.to_ne_bytes());
        fs::write(&path, bytes).unwrap();
        resign_sidecar(dir);
    });
    expect_corrupt("vector length field, re-signed", &|dir| {
        let path = dump_file(dir, "-o0.hnsw.data");
        let mut bytes = fs::read(&path).unwrap();
        let length_field = 4 + 8 + 4 + 8;
        bytes[length_field..length_field + 8].copy_from_slice(&8u64.to_ne_bytes());
        fs::write(&path, bytes).unwrap();
        resign_sidecar(dir);
    });
    expect_corrupt("one owner's graph in another's files, re-signed", &|dir| {
        for suffix in [".hnsw.graph", ".hnsw.data"] {
            let first = dump_file(dir, &format!("-o0{suffix}"));
            let second = dump_file(dir, &format!("-o1{suffix}"));
            let parked = dir.join("parked");
            fs::rename(&first, &parked).unwrap();
            fs::rename(&second, &first).unwrap();
            fs::rename(&parked, &second).unwrap();
        }
        resign_sidecar(dir);
    });
    expect_corrupt("slot owner out of range, re-signed", &|dir| {
        let path = dump_file(dir, ".slots");
        let mut bytes = fs::read(&path).unwrap();
        bytes[16 + 8..16 + 12].copy_from_slice(&77u32.to_le_bytes());
        fs::write(&path, bytes).unwrap();
        resign_sidecar(dir);
    });

    // Single-byte damage all over the graph file, re-signed each time: the outcome is Corrupt,
    // or Loaded when the byte was one hnsw_rs ignores; a Loaded index must then search fine.
    let graph_len = fs::metadata(dump_file(pristine.path(), "-o0.hnsw.graph"))
        .unwrap()
        .len() as usize;
    let data_len = fs::metadata(dump_file(pristine.path(), "-o0.hnsw.data"))
        .unwrap()
        .len() as usize;
    let mut rng = StdRng::seed_from_u64(10);
    let mut corrupt_count = 0;
    let trials = 60;
    for trial in 0..trials {
        let dir = work.path().join(format!("flip-{trial}"));
        copy_dir(pristine.path(), &dir);
        let (suffix, length) = if trial % 2 == 0 {
            ("-o0.hnsw.graph", graph_len)
        } else {
            ("-o0.hnsw.data", data_len)
        };
        let path = dump_file(&dir, suffix);
        let mut bytes = fs::read(&path).unwrap();
        let position = rng.random_range(0..length);
        bytes[position] ^= 1 << rng.random_range(0..8);
        fs::write(&path, bytes).unwrap();
        resign_sidecar(&dir);
        match VectorIndex::load(&dir, &recorded, IndexParams::default()).unwrap() {
            LoadOutcome::Corrupt { .. } => corrupt_count += 1,
            LoadOutcome::Loaded(index) => {
                let hits = index
                    .search(&corpus.chunks[0].vector, 5, &OwnerFilter::any())
                    .unwrap();
                assert_eq!(hits.len(), 5);
            }
            other => panic!("byte {position} of {suffix}: unexpected {other:?}"),
        }
    }
    assert!(
        corrupt_count > trials / 4,
        "only {corrupt_count} of {trials} flips were caught"
    );
}

// ---------------------------------------------------------------------------------------------
// The embeddings client against the fake
// ---------------------------------------------------------------------------------------------

fn openai_config(fake: &FakeEmbeddings) -> EmbeddingsConfig {
    let mut config = EmbeddingsConfig::new(
        EmbeddingsProtocol::OpenAiCompatible,
        fake.openai_base_url(),
        MODEL,
    );
    config.initial_backoff = Duration::from_millis(10);
    config.max_backoff = Duration::from_millis(50);
    config.request_timeout = Duration::from_secs(5);
    config
}

fn gemini_config(fake: &FakeEmbeddings) -> EmbeddingsConfig {
    let mut config = openai_config(fake);
    config.protocol = EmbeddingsProtocol::Gemini;
    config.base_url = fake.gemini_base_url();
    config.model = "gemini-embedding-001".to_string();
    config
}

fn texts(count: usize) -> Vec<String> {
    (0..count)
        .map(|n| format!("note number {n} about topic {}", n * 7))
        .collect()
}

#[tokio::test]
async fn openai_shape_batches_orders_and_authenticates() {
    let key = "sk-openai-test-key-0123456789";
    let fake = FakeEmbeddings::start_with(FakeEmbeddingsOptions {
        dimension: 64,
        required_api_key: Some(key.to_string()),
    })
    .await
    .unwrap();
    let mut config = openai_config(&fake);
    config.api_key = Some(Secret::new(key));
    config.batch_size = 4;
    config.expected_dimension = Some(64);
    let client = EmbeddingsClient::new(config).unwrap();
    let inputs = texts(10);
    let vectors = client.embed(&inputs).await.unwrap();
    assert_eq!(vectors.len(), 10);
    for (text, vector) in inputs.iter().zip(&vectors) {
        assert_eq!(
            vector,
            &fake.vector_for(text),
            "answers are reordered by index"
        );
    }
    assert_eq!(fake.batch_sizes(), vec![4, 4, 2]);
    assert_eq!(fake.request_count(), 3);
    assert_eq!(fake.input_count(), 10);
    assert_eq!(client.dimension(), Some(64));
    assert!(client.embed::<String>(&[]).await.unwrap().is_empty());
    assert_eq!(fake.request_count(), 3, "nothing to embed, nothing sent");
    assert!(matches!(
        client.embed(&["fine", "  "]).await,
        Err(EmbeddingsError::EmptyInput { index: 1 })
    ));
    fake.stop().await;
}

#[tokio::test]
async fn gemini_shape_sends_the_key_in_a_header_never_the_url() {
    let key = "AIza-gemini-test-key-0123456789";
    let fake = FakeEmbeddings::start_with(FakeEmbeddingsOptions {
        dimension: 48,
        required_api_key: Some(key.to_string()),
    })
    .await
    .unwrap();
    let mut config = gemini_config(&fake);
    config.api_key = Some(Secret::new(key));
    config.batch_size = 3;
    let client = EmbeddingsClient::new(config.clone()).unwrap();
    let inputs = texts(7);
    let vectors = client.embed(&inputs).await.unwrap();
    for (text, vector) in inputs.iter().zip(&vectors) {
        assert_eq!(vector, &fake.vector_for(text));
    }
    assert_eq!(fake.batch_sizes(), vec![3, 3, 1]);
    assert!(!fake.key_seen_in_url());
    assert_eq!(
        client.dimension(),
        Some(48),
        "learned from the first answer"
    );
    // "models/..." in the configuration is accepted as well.
    config.model = "models/gemini-embedding-001".to_string();
    let qualified = EmbeddingsClient::new(config).unwrap();
    assert_eq!(
        qualified.embed_one("hello world").await.unwrap(),
        fake.vector_for("hello world")
    );
    fake.stop().await;
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_honouring_retry_after() {
    let fake = FakeEmbeddings::start().await.unwrap();
    let client = EmbeddingsClient::new(openai_config(&fake)).unwrap();

    fake.fail_next(1, 429, Some(Duration::from_secs(1)));
    let started = Instant::now();
    let vectors = client.embed(&["remember the milk"]).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(vectors[0], fake.vector_for("remember the milk"));
    assert_eq!(fake.request_count(), 2);
    assert!(
        waited >= Duration::from_millis(950),
        "Retry-After: 1 was not honoured ({waited:?})"
    );

    fake.fail_next(2, 503, None);
    let started = Instant::now();
    client.embed(&["second try"]).await.unwrap();
    assert_eq!(fake.request_count(), 5);
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "backoff is the configured one"
    );

    // Retries run out: a clear error naming the attempts.
    fake.fail_next(10, 500, None);
    let error = client.embed(&["doomed"]).await.unwrap_err();
    match &error {
        EmbeddingsError::Unavailable {
            attempts, reason, ..
        } => {
            assert_eq!(*attempts, 5, "1 attempt + 4 retries");
            assert!(reason.contains("500"), "{reason}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    fake.fail_next(0, 500, None);

    // A Retry-After beyond the configured maximum ends the call at once.
    fake.fail_next(1, 429, Some(Duration::from_secs(120)));
    let started = Instant::now();
    let error = client.embed(&["later"]).await.unwrap_err();
    assert!(
        matches!(error, EmbeddingsError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(120))
    );
    assert!(started.elapsed() < Duration::from_secs(2));

    // A client error is not retried.
    let before = fake.request_count();
    fake.fail_next(3, 400, None);
    let error = client.embed(&["bad request"]).await.unwrap_err();
    assert!(
        matches!(error, EmbeddingsError::Http { status: 400, .. }),
        "{error:?}"
    );
    assert_eq!(fake.request_count(), before + 1);
    fake.stop().await;
}

#[tokio::test]
async fn timeouts_and_unreachable_servers_are_reported() {
    let fake = FakeEmbeddings::start().await.unwrap();
    let mut config = openai_config(&fake);
    config.request_timeout = Duration::from_millis(300);
    config.max_retries = 1;
    let client = EmbeddingsClient::new(config.clone()).unwrap();
    fake.stall_next(5, Duration::from_secs(3));
    let started = Instant::now();
    let error = client.embed(&["slow"]).await.unwrap_err();
    assert!(
        matches!(error, EmbeddingsError::Unavailable { attempts: 2, .. }),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));

    // A port nobody listens on.
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = unused.local_addr().unwrap().port();
    drop(unused);
    config.base_url = format!("http://127.0.0.1:{port}/v1");
    let client = EmbeddingsClient::new(config).unwrap();
    let error = client.embed(&["anyone?"]).await.unwrap_err();
    assert!(
        matches!(error, EmbeddingsError::Unavailable { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("reachable"), "{error}");
    fake.stop().await;
}

#[tokio::test]
async fn wrong_dimensions_and_nan_are_clear_errors() {
    let fake = FakeEmbeddings::start_with(FakeEmbeddingsOptions {
        dimension: 32,
        required_api_key: None,
    })
    .await
    .unwrap();
    for protocol in [
        EmbeddingsProtocol::OpenAiCompatible,
        EmbeddingsProtocol::Gemini,
    ] {
        let config = match protocol {
            EmbeddingsProtocol::OpenAiCompatible => openai_config(&fake),
            EmbeddingsProtocol::Gemini => gemini_config(&fake),
        };
        // Inside one answer: the last vector is one value longer than the others.
        let client = EmbeddingsClient::new(config.clone()).unwrap();
        fake.wrong_dimension_next(1);
        let error = client.embed(&["one", "two", "three"]).await.unwrap_err();
        match &error {
            EmbeddingsError::DimensionMismatch {
                index,
                got,
                expected,
                ..
            } => {
                assert_eq!((*index, *got, *expected), (2, 33, 32));
            }
            other => panic!("expected DimensionMismatch, got {other:?}"),
        }
        assert!(error.to_string().contains("dimension"), "{error}");

        // Against the configured dimension, even with a single input.
        let mut expecting = config.clone();
        expecting.expected_dimension = Some(32);
        let client = EmbeddingsClient::new(expecting).unwrap();
        fake.wrong_dimension_next(1);
        assert!(matches!(
            client.embed(&["alone"]).await,
            Err(EmbeddingsError::DimensionMismatch {
                got: 33,
                expected: 32,
                ..
            })
        ));
        // A model that answers another size than configured.
        let mut wrong_size = config.clone();
        wrong_size.expected_dimension = Some(768);
        let client = EmbeddingsClient::new(wrong_size).unwrap();
        assert!(matches!(
            client.embed(&["alone"]).await,
            Err(EmbeddingsError::DimensionMismatch {
                got: 32,
                expected: 768,
                ..
            })
        ));

        let client = EmbeddingsClient::new(config.clone()).unwrap();
        fake.nan_next(1);
        let error = client.embed(&["poisoned", "fine"]).await.unwrap_err();
        assert!(
            matches!(error, EmbeddingsError::BadVector { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("NaN"), "{error}");

        // A vector the fake sends as given: all zeros, and an overflowing value.
        fake.set_vector("zeros", vec![0.0; 32]);
        let error = client.embed(&["zeros"]).await.unwrap_err();
        assert!(error.to_string().contains("all zeros"), "{error}");
    }
    fake.stop().await;
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors() {
    let our_key = "sk-our-secret-key-must-not-leak-42";
    let fake = FakeEmbeddings::start_with(FakeEmbeddingsOptions {
        dimension: 16,
        required_api_key: Some("sk-the-server-wants-another-one".to_string()),
    })
    .await
    .unwrap();
    for protocol in [
        EmbeddingsProtocol::OpenAiCompatible,
        EmbeddingsProtocol::Gemini,
    ] {
        let mut config = match protocol {
            EmbeddingsProtocol::OpenAiCompatible => openai_config(&fake),
            EmbeddingsProtocol::Gemini => gemini_config(&fake),
        };
        config.api_key = Some(Secret::new(our_key));
        let client = EmbeddingsClient::new(config).unwrap();
        let error = client.embed(&["hello"]).await.unwrap_err();
        assert!(
            matches!(error, EmbeddingsError::Http { status: 401, .. }),
            "{error:?}"
        );
        let shown = format!("{error} {error:?} {client:?}");
        // The fake echoed the key it was sent; the client must have redacted it.
        assert!(!shown.contains(our_key), "key leaked: {shown}");
        assert!(
            shown.contains("***"),
            "the echo was redacted, not dropped: {shown}"
        );
        assert!(shown.contains("API key"), "the hint names the fix: {shown}");
    }
    fake.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Gating and fusion on the fake's vectors
// ---------------------------------------------------------------------------------------------

/// The memory actor's insertion path in miniature: embed, look at the owner's 5 nearest, gate,
/// insert. Returns the decision.
async fn remember(
    client: &EmbeddingsClient,
    index: &mut VectorIndex,
    next_id: &mut i64,
    owner: &str,
    text: &str,
) -> GateDecision {
    let vector = client.embed_one(text).await.unwrap();
    let nearest = index
        .search(
            &vector,
            scoring::GATE_NEIGHBOURS,
            &OwnerFilter::only([owner]),
        )
        .unwrap();
    let decision = scoring::gate(&nearest, scoring::DEFAULT_SURPRISE_THRESHOLD);
    if let GateDecision::Save { .. } = decision {
        index.insert(*next_id, owner, &vector).unwrap();
        *next_id += 1;
    }
    decision
}

#[tokio::test]
async fn near_duplicates_are_gated_and_distinct_memories_kept() {
    let fake = FakeEmbeddings::start().await.unwrap();
    let client = EmbeddingsClient::new(openai_config(&fake)).unwrap();
    let mut index = VectorIndex::new(fake.dimension(), IndexParams::default()).unwrap();
    let mut next_id = 1;

    let first = "Parked the car in the garage on level 3, spot 42";
    assert_eq!(
        remember(&client, &mut index, &mut next_id, "assistant", first).await,
        GateDecision::Save { surprise: 1.0 }
    );
    // The same words, other case and punctuation: a duplicate of chunk 1.
    match remember(
        &client,
        &mut index,
        &mut next_id,
        "assistant",
        "parked the car in the garage, level 3 spot 42!",
    )
    .await
    {
        GateDecision::Duplicate { of, similarity } => {
            assert_eq!(of, 1);
            assert!(similarity > 0.99);
        }
        other => panic!("expected Duplicate, got {other:?}"),
    }
    // A different memory is kept, and so is a paraphrase in other words (this fake's
    // bag-of-words cannot see paraphrases, which is what makes it predictable).
    assert!(matches!(
        remember(
            &client,
            &mut index,
            &mut next_id,
            "assistant",
            "Dentist appointment moved to Friday at noon"
        )
        .await,
        GateDecision::Save { .. }
    ));
    assert!(matches!(
        remember(
            &client,
            &mut index,
            &mut next_id,
            "assistant",
            "Vehicle left inside parking structure"
        )
        .await,
        GateDecision::Save { .. }
    ));
    // The gate looks at the owner's own memories only.
    assert!(matches!(
        remember(&client, &mut index, &mut next_id, "research", first).await,
        GateDecision::Save { .. }
    ));
    assert_eq!(index.len(), 4);

    // Controlled similarities around the threshold: 0.8 is a duplicate (surprise 0.2 < 0.25),
    // 0.7 is kept (surprise 0.3).
    let base = [1.0f32, 0.0];
    let at = |similarity: f32| {
        let mut vector = vec![0.0f32; fake.dimension()];
        vector[0] = similarity * base[0];
        vector[1] = (1.0 - similarity * similarity).sqrt();
        vector
    };
    let mut axis = vec![0.0f32; fake.dimension()];
    axis[0] = 1.0;
    fake.set_vector("anchor", axis);
    fake.set_vector("close", at(0.8));
    fake.set_vector("farther", at(0.7));
    assert!(matches!(
        remember(&client, &mut index, &mut next_id, "platform", "anchor").await,
        GateDecision::Save { .. }
    ));
    match remember(&client, &mut index, &mut next_id, "platform", "close").await {
        GateDecision::Duplicate { similarity, .. } => assert!((similarity - 0.8).abs() < 1e-4),
        other => panic!("expected Duplicate, got {other:?}"),
    }
    match remember(&client, &mut index, &mut next_id, "platform", "farther").await {
        GateDecision::Save { surprise } => assert!((surprise - 0.3).abs() < 1e-4),
        other => panic!("expected Save, got {other:?}"),
    }

    // After a restart (dump, load), the same recap is still a duplicate: no double memories.
    let dir = tempfile::tempdir().unwrap();
    let mark = index.dump(dir.path(), MODEL).unwrap();
    let mut index = loaded(VectorIndex::load(dir.path(), &mark, IndexParams::default()).unwrap());
    assert!(matches!(
        remember(&client, &mut index, &mut next_id, "assistant", first).await,
        GateDecision::Duplicate { of: 1, .. }
    ));
    fake.stop().await;
}

#[tokio::test]
async fn hybrid_retrieval_fuses_keyword_and_vector_rankings() {
    let fake = FakeEmbeddings::start().await.unwrap();
    let client = EmbeddingsClient::new(openai_config(&fake)).unwrap();
    let notes = [
        (1, "Anna likes green tea with honey"),
        (2, "Green tea and jasmine tea in the kitchen"),
        (3, "Anna's birthday is on the 4th of June"),
        (4, "The boiler service is due in March"),
    ];
    let texts: Vec<&str> = notes.iter().map(|(_, text)| *text).collect();
    let vectors = client.embed(&texts).await.unwrap();
    let mut index = VectorIndex::new(fake.dimension(), IndexParams::default()).unwrap();
    for ((id, _), vector) in notes.iter().zip(&vectors) {
        index.insert(*id, "assistant", vector).unwrap();
    }
    let query_vector = client.embed_one("green tea for Anna").await.unwrap();
    let vector_hits = index
        .search(&query_vector, 3, &OwnerFilter::only(["assistant"]))
        .unwrap();
    let vector_ids: Vec<i64> = vector_hits.iter().map(|hit| hit.id).collect();
    // Shared words: note 1 three of five, note 2 two (tea twice), note 3 one.
    assert_eq!(vector_ids, vec![1, 2, 3], "{vector_hits:?}");

    // A stand-in for FTS5 matching "anna": the shorter note 3 ranks first, then note 1.
    let full_text_ids = [3, 1];
    let fused = scoring::hybrid(&full_text_ids, &vector_ids);
    let order: Vec<i64> = fused.iter().map(|hit| hit.id).collect();
    // 1: 1/61 + 1/62; 3: 1/61 + 1/63; 2: 1/62 only. Agreement lifts note 3 above note 2.
    assert_eq!(order, vec![1, 3, 2]);
    assert_eq!(
        (fused[0].full_text_rank, fused[0].vector_rank),
        (Some(2), Some(1))
    );
    assert_eq!(
        (fused[1].full_text_rank, fused[1].vector_rank),
        (Some(1), Some(3))
    );
    assert_eq!(
        (fused[2].full_text_rank, fused[2].vector_rank),
        (None, Some(2))
    );

    // Re-ranking by insertion surprise reorders close vector hits only.
    let reranked = scoring::rerank(&vector_hits, |id| Some(if id == 2 { 1.0 } else { 0.0 }));
    let reranked_ids: Vec<i64> = reranked.iter().map(|hit| hit.id).collect();
    // Note 2 was surprising when learned: 0.65 × 1.3 ≈ 0.85 overtakes note 1's 0.77.
    assert_eq!(reranked_ids, vec![2, 1, 3]);
    fake.stop().await;
}
