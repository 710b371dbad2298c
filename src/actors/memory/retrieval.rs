//! Searching: FTS5 and, with embeddings, the index, merged by reciprocal rank fusion under the
//! read model.

use std::collections::BTreeMap;

use super::{CANDIDATES, MemoryArgs, MemoryState};
use crate::memory::index::OwnerFilter;
use crate::memory::scoring::{self};
use crate::protocol::memory::{MemoryHit, PLATFORM, SearchRequest, SearchResult};
use crate::store::memory::{self as queries, FactRow, Scope};

pub(super) async fn search(
    state: &mut MemoryState,
    request: SearchRequest,
    vector: Option<Vec<f32>>,
    mode: String,
) -> Result<SearchResult, String> {
    let scope = match &request.agent {
        Some(agent) => Scope {
            owners: state.args.readable_owners(agent),
            chat: request.chat.clone(),
        },
        None => Scope {
            owners: all_owners(&state.args),
            chat: None,
        },
    };
    let vector_ranked: Vec<i64> = match (&vector, &state.index) {
        (Some(vector), Some(index)) => {
            let hits = index
                .search(vector, CANDIDATES, &OwnerFilter::only(scope.owners.clone()))
                .unwrap_or_default();
            let ids: Vec<i64> = hits.iter().map(|hit| hit.id).collect();
            let surprises: BTreeMap<i64, f32> = state
                .args
                .store
                .read(move |conn| queries::surprises(conn, &ids))
                .await
                .map_err(|error| error.to_string())?
                .into_iter()
                .collect();
            scoring::rerank(&hits, |id| surprises.get(&id).copied())
                .into_iter()
                .map(|hit| hit.id)
                .collect()
        }
        _ => Vec::new(),
    };
    let (query, limit, include_secret) = (
        request.query.clone(),
        request.limit.clamp(1, 50),
        request.include_secret,
    );
    state
        .args
        .store
        .read(move |conn| {
            let full_text = queries::search_text(conn, &scope, &query, CANDIDATES as u32)?;
            // Vector hits know only their owner: the chat rule is applied here.
            let visible: std::collections::HashSet<i64> =
                queries::visible_ids(conn, &scope, &vector_ranked)?
                    .into_iter()
                    .collect();
            let vector_ranked: Vec<i64> = vector_ranked
                .into_iter()
                .filter(|id| visible.contains(id))
                .collect();
            let fused = scoring::hybrid(&full_text, &vector_ranked);
            let ids: Vec<i64> = fused.iter().map(|hit| hit.id).collect();
            let rows: BTreeMap<i64, FactRow> = queries::by_ids(conn, &ids)?
                .into_iter()
                .map(|row| (row.id, row))
                .collect();
            Ok(fused
                .into_iter()
                .filter_map(|hit| {
                    let fact = rows.get(&hit.id)?.clone();
                    (include_secret || fact.sensitivity != "secret").then_some(MemoryHit {
                        fact,
                        score: hit.score,
                        full_text_rank: hit.full_text_rank,
                        vector_rank: hit.vector_rank,
                    })
                })
                .take(limit)
                .collect::<Vec<_>>())
        })
        .await
        .map(|hits| SearchResult { hits, mode })
        .map_err(|error| error.to_string())
}

pub(super) fn all_owners(args: &MemoryArgs) -> Vec<String> {
    let mut owners: Vec<String> = args.hierarchy.keys().cloned().collect();
    owners.push(PLATFORM.to_string());
    owners
}
