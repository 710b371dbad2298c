//! The index's upkeep: rebuilt from SQLite, dumped to disk.

use ractor::ActorProcessingErr;

use super::MemoryState;
use crate::memory::index::{ChunkVector, IndexParams, VectorIndex};
use crate::store::memory::{self as queries};

/// Builds the index anew from SQLite (off the async threads).
pub(super) async fn rebuild(state: &mut MemoryState) -> Result<(), ActorProcessingErr> {
    if state.client.is_none() {
        return Ok(());
    }
    let model = state.model.clone();
    let rows = state
        .args
        .store
        .read(move |conn| queries::embedded_vectors(conn, &model))
        .await?;
    let Some(dimension) = rows.first().map(|(_, _, vector)| vector.len()) else {
        state.index = None;
        return Ok(());
    };
    let built = tokio::task::spawn_blocking(move || {
        VectorIndex::build(
            dimension,
            IndexParams::default(),
            rows.into_iter()
                .map(|(id, owner, vector)| ChunkVector { id, owner, vector }),
        )
    })
    .await?;
    match built {
        Ok((index, report)) => {
            for (id, error) in &report.rejected {
                tracing::warn!(id, %error, "memory: a stored embedding could not be indexed");
            }
            tracing::info!(
                memories = report.inserted,
                "memory: index rebuilt from SQLite"
            );
            state.index = Some(index);
            state.dirty = true;
        }
        Err(error) => {
            tracing::warn!(%error, "memory: the index could not be rebuilt; full-text search only until it can");
            state.index = None;
        }
    }
    Ok(())
}

/// Writes the index's dump (a failure is logged: the dump is only a cache of SQLite).
pub(super) async fn dump(state: &mut MemoryState) {
    let Some(index) = &state.index else {
        state.dirty = false;
        return;
    };
    if let Err(error) = std::fs::create_dir_all(&state.args.dir) {
        tracing::warn!(%error, "memory: cannot create the index directory");
        return;
    }
    match index.dump(&state.args.dir, &state.model) {
        Ok(_) => state.dirty = false,
        Err(error) => tracing::warn!(%error, "memory: could not dump the index"),
    }
}
