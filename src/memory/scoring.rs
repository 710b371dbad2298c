//! The arithmetic of semantic memory (DESIGN.md, Memory): surprise gating on insertion,
//! re-ranking on retrieval, and reciprocal rank fusion of full-text and vector results.
//!
//! Everything here is a pure function of its inputs, so the memory actor decides *what* to ask
//! the index and SQLite, and these functions decide what the answers mean.
//!
//! - Before a chunk is saved, its 5 nearest neighbours of the same owner are fetched;
//!   `surprise = 1 − max similarity`. Below the threshold (0.25) the chunk repeats something
//!   already remembered and is not saved, which also keeps a recap written again after a
//!   restart from becoming a second memory.
//! - Retrieval re-ranks by `similarity × (1 + 0.3 × surprise at insertion)`: among equally
//!   similar memories, the ones that were new when learned weigh a little more.
//! - Hybrid retrieval merges the FTS5 (BM25) ranking and the vector ranking with reciprocal
//!   rank fusion: `score(d) = Σ 1 / (k + rank_i(d))`, k = 60, ranks from 1. Only ranks matter,
//!   so BM25 scores and cosine similarities never need a common scale.

use crate::memory::index::Hit;

/// A chunk is saved only when its surprise is at least this.
pub const DEFAULT_SURPRISE_THRESHOLD: f32 = 0.25;

/// How many same-owner neighbours the gate looks at.
pub const GATE_NEIGHBOURS: usize = 5;

/// Weight of the insertion-time surprise in the re-ranking score.
pub const SURPRISE_WEIGHT: f32 = 0.3;

/// The usual reciprocal rank fusion constant (Cormack et al., 2009).
pub const DEFAULT_RRF_K: f64 = 60.0;

/// `1 − max_similarity`, clamped to 0..=1. An unknown (NaN) similarity counts as nothing
/// similar (surprise 1): when in doubt, remembering beats forgetting.
pub fn surprise(max_similarity: f32) -> f32 {
    if max_similarity.is_nan() {
        return 1.0;
    }
    (1.0 - max_similarity).clamp(0.0, 1.0)
}

/// Whether a new chunk is worth saving.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GateDecision {
    /// Save it, recording this surprise with the chunk (it feeds the re-ranking later).
    Save { surprise: f32 },
    /// Too close to chunk `of`; do not save.
    Duplicate { of: i64, similarity: f32 },
}

/// Decides from the nearest same-owner neighbours (any order) whether to save a chunk:
/// saved when `surprise(max similarity) >= threshold`, and always when there is no neighbour.
pub fn gate(nearest: &[Hit], threshold: f32) -> GateDecision {
    let closest = nearest
        .iter()
        .filter(|hit| !hit.similarity.is_nan())
        .max_by(|left, right| left.similarity.total_cmp(&right.similarity));
    let Some(closest) = closest else {
        return GateDecision::Save { surprise: 1.0 };
    };
    let surprise = surprise(closest.similarity);
    if surprise >= threshold {
        GateDecision::Save { surprise }
    } else {
        GateDecision::Duplicate {
            of: closest.id,
            similarity: closest.similarity,
        }
    }
}

/// `similarity × (1 + 0.3 × surprise_at_insert)`, the surprise clamped to 0..=1.
pub fn rerank_score(similarity: f32, surprise_at_insert: f32) -> f32 {
    let surprise_at_insert = if surprise_at_insert.is_nan() {
        0.0
    } else {
        surprise_at_insert.clamp(0.0, 1.0)
    };
    similarity * (1.0 + SURPRISE_WEIGHT * surprise_at_insert)
}

/// A vector hit with its re-ranking score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedHit {
    pub id: i64,
    pub similarity: f32,
    pub score: f32,
}

/// Re-ranks vector hits, best first (ties by id, for a stable order). `surprise_at_insert`
/// looks up the surprise stored with each chunk; a chunk without one gets no boost.
pub fn rerank(hits: &[Hit], surprise_at_insert: impl Fn(i64) -> Option<f32>) -> Vec<RankedHit> {
    let mut ranked: Vec<RankedHit> = hits
        .iter()
        .map(|hit| RankedHit {
            id: hit.id,
            similarity: hit.similarity,
            score: rerank_score(hit.similarity, surprise_at_insert(hit.id).unwrap_or(0.0)),
        })
        .collect();
    ranked.sort_by(|left, right| {
        right
            .score
            .total_cmp(&left.score)
            .then(left.id.cmp(&right.id))
    });
    ranked
}

/// One fused result: its score and, per input list, the 1-based rank at which that list had it
/// (`None`: that source did not find it).
#[derive(Debug, Clone, PartialEq)]
pub struct FusedHit {
    pub id: i64,
    pub score: f64,
    pub ranks: Vec<Option<usize>>,
}

impl FusedHit {
    /// Whether input list `source` (its position in the `lists` given to [`rrf`]) found it.
    pub fn found_by(&self, source: usize) -> bool {
        self.ranks.get(source).is_some_and(Option::is_some)
    }
}

/// Reciprocal rank fusion of ranked id lists (best first), best fused score first; ties are
/// broken by id so the order is deterministic. An id repeated inside one list counts at its
/// first (best) rank. A `k` that is negative or not finite falls back to 60.
pub fn rrf(lists: &[&[i64]], k: f64) -> Vec<FusedHit> {
    let k = if k.is_finite() && k >= 0.0 {
        k
    } else {
        DEFAULT_RRF_K
    };
    let mut fused: Vec<FusedHit> = Vec::new();
    let mut position_of: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    for (source, list) in lists.iter().enumerate() {
        for (index, id) in list.iter().enumerate() {
            let rank = index + 1;
            let position = *position_of.entry(*id).or_insert_with(|| {
                fused.push(FusedHit {
                    id: *id,
                    score: 0.0,
                    ranks: vec![None; lists.len()],
                });
                fused.len() - 1
            });
            let hit = &mut fused[position];
            if hit.ranks[source].is_none() {
                hit.ranks[source] = Some(rank);
                hit.score += 1.0 / (k + rank as f64);
            }
        }
    }
    fused.sort_by(|left, right| {
        right
            .score
            .total_cmp(&left.score)
            .then(left.id.cmp(&right.id))
    });
    fused
}

/// A hybrid retrieval result: fused score and the rank each source gave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridHit {
    pub id: i64,
    pub score: f64,
    pub full_text_rank: Option<usize>,
    pub vector_rank: Option<usize>,
}

/// Merges the FTS5 (BM25) ranking and the vector ranking with RRF, k = 60.
pub fn hybrid(full_text: &[i64], vector: &[i64]) -> Vec<HybridHit> {
    rrf(&[full_text, vector], DEFAULT_RRF_K)
        .into_iter()
        .map(|hit| HybridHit {
            id: hit.id,
            score: hit.score,
            full_text_rank: hit.ranks[0],
            vector_rank: hit.ranks[1],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: i64, similarity: f32) -> Hit {
        Hit { id, similarity }
    }

    #[test]
    fn surprise_is_one_minus_similarity_clamped() {
        let cases = [
            (1.0, 0.0),
            (0.75, 0.25),
            (0.0, 1.0),
            (-0.5, 1.0),
            (1.2, 0.0),
            (f32::NAN, 1.0),
        ];
        for (similarity, expected) in cases {
            assert!(
                (surprise(similarity) - expected).abs() < 1e-6,
                "surprise({similarity}) = {}, expected {expected}",
                surprise(similarity)
            );
        }
    }

    #[test]
    fn the_gate_saves_novel_chunks_and_names_the_duplicate() {
        assert_eq!(gate(&[], 0.25), GateDecision::Save { surprise: 1.0 });
        // Unsorted input: the gate must find the closest itself.
        let nearest = [hit(3, 0.5), hit(7, 0.9), hit(9, 0.1)];
        assert_eq!(
            gate(&nearest, 0.25),
            GateDecision::Duplicate {
                of: 7,
                similarity: 0.9
            }
        );
        match gate(&[hit(1, 0.6)], 0.25) {
            GateDecision::Save { surprise } => assert!((surprise - 0.4).abs() < 1e-6),
            other => panic!("expected Save, got {other:?}"),
        }
        // Exactly at the threshold the chunk is saved (surprise ≥ threshold).
        assert!(matches!(
            gate(&[hit(1, 0.75)], 0.25),
            GateDecision::Save { .. }
        ));
        assert!(matches!(
            gate(&[hit(1, f32::NAN)], 0.25),
            GateDecision::Save { surprise } if surprise == 1.0
        ));
    }

    #[test]
    fn rerank_boosts_chunks_that_were_surprising_when_learned() {
        assert!((rerank_score(0.8, 1.0) - 1.04).abs() < 1e-6);
        assert!((rerank_score(0.8, 0.0) - 0.8).abs() < 1e-6);
        assert!(
            (rerank_score(0.8, 5.0) - 1.04).abs() < 1e-6,
            "surprise is clamped"
        );
        let hits = [hit(1, 0.80), hit(2, 0.78), hit(3, 0.50)];
        let surprises = |id: i64| match id {
            1 => Some(0.0),
            2 => Some(1.0),
            _ => None,
        };
        let ranked = rerank(&hits, surprises);
        let order: Vec<i64> = ranked.iter().map(|hit| hit.id).collect();
        assert_eq!(order, vec![2, 1, 3]);
        assert!((ranked[0].score - 0.78 * 1.3).abs() < 1e-6);
    }

    #[test]
    fn rrf_rewards_agreement_and_reports_sources() {
        let full_text = [10, 20, 30];
        let vector = [20, 40, 10, 20];
        let fused = rrf(&[&full_text, &vector], 60.0);
        let order: Vec<i64> = fused.iter().map(|hit| hit.id).collect();
        // 20: 1/62 + 1/61; 10: 1/61 + 1/63; 40: 1/62; 30: 1/63.
        assert_eq!(order, vec![20, 10, 40, 30]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(fused[0].ranks, vec![Some(2), Some(1)], "repeats count once");
        assert!(fused[2].found_by(1) && !fused[2].found_by(0));
        assert!(fused[3].found_by(0) && !fused[3].found_by(1));
        assert!(!fused[3].found_by(7));
        assert!(rrf(&[], 60.0).is_empty());
        assert_eq!(rrf(&[&[5]], f64::NAN)[0].score, 1.0 / 61.0);
    }

    #[test]
    fn hybrid_names_both_sources() {
        let merged = hybrid(&[1, 2], &[2, 3]);
        assert_eq!(merged[0].id, 2);
        assert_eq!(merged[0].full_text_rank, Some(2));
        assert_eq!(merged[0].vector_rank, Some(1));
        let only_vector = merged
            .iter()
            .find(|hit| hit.id == 3)
            .expect("3 is in the vector list");
        assert_eq!(only_vector.full_text_rank, None);
        // 1 (full-text rank 1, 1/61) comes before 3 (vector rank 2, 1/62).
        assert_eq!(
            merged.iter().map(|hit| hit.id).collect::<Vec<_>>(),
            vec![2, 1, 3]
        );
    }
}
