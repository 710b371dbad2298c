//! `clawvisor memory stats | reindex`: memories per owner, and rebuilding the vector index.

use std::path::Path;
use std::process::ExitCode;

use crate::config::LoadedConfig;
use crate::memory::index::{IndexParams, VectorIndex};
use crate::store::Store;
use crate::store::memory as queries;

use super::{MemoryCommand, open_existing};

pub(super) async fn run(loaded: &LoadedConfig, command: MemoryCommand) -> ExitCode {
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let (embeddings, reason) = crate::memory::embeddings_config(&loaded.config, &loaded.secrets);
    let model = embeddings.map(|config| config.model).unwrap_or_default();
    let code = match command {
        MemoryCommand::Stats => print_stats(&store, &model, &reason).await,
        MemoryCommand::Reindex if model.is_empty() => {
            println!("nothing to index: memory is in full-text mode ({reason})");
            ExitCode::SUCCESS
        }
        MemoryCommand::Reindex => reindex_embedded(loaded, &store, &model).await,
    };
    store.stop_writer();
    code
}

/// `memory stats`: the search mode, the memory counts, and the live memories per owner.
async fn print_stats(store: &Store, model: &str, reason: &str) -> ExitCode {
    match store.read(queries::stats).await {
        Ok(stats) => {
            if model.is_empty() {
                println!("mode: full-text only ({reason})");
            } else {
                println!("mode: semantic (embeddings model {model})");
            }
            println!(
                "memories: {} live ({} embedded), {} archived, {} redacted",
                stats.live, stats.embedded, stats.archived, stats.redacted
            );
            for (owner, count) in stats.by_owner {
                println!("  {owner}: {count}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// `memory reindex`: rebuilds `<data dir>/memory` from the stored embeddings of `model`.
async fn reindex_embedded(loaded: &LoadedConfig, store: &Store, model: &str) -> ExitCode {
    let query_model = model.to_string();
    match store
        .read(move |conn| queries::embedded_vectors(conn, &query_model))
        .await
    {
        Ok(rows) if rows.is_empty() => {
            println!("no memory has an embedding of {model} yet");
            ExitCode::SUCCESS
        }
        Ok(rows) => {
            let dir = loaded.config.data_dir.join("memory");
            match reindex(rows, model, &dir) {
                Ok(count) => {
                    println!("indexed {count} memories into {}", dir.display());
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("reindex failed: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// Inserts one by one with a progress line, then dumps.
fn reindex(rows: Vec<(i64, String, Vec<f32>)>, model: &str, dir: &Path) -> Result<usize, String> {
    use std::io::Write as _;
    let dimension = rows[0].2.len();
    let mut index =
        VectorIndex::new(dimension, IndexParams::default()).map_err(|e| e.to_string())?;
    let total = rows.len();
    for (done, (id, owner, vector)) in rows.into_iter().enumerate() {
        if let Err(error) = index.insert(id, &owner, &vector) {
            eprintln!("\nmemory {id} skipped: {error}");
        }
        if done % 500 == 0 || done + 1 == total {
            let width = 30;
            let filled = (done + 1) * width / total;
            eprint!(
                "\r[{}{}] {}/{total}",
                "#".repeat(filled),
                " ".repeat(width - filled),
                done + 1
            );
            let _ = std::io::stderr().flush();
        }
    }
    eprintln!();
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    index.dump(dir, model).map_err(|e| e.to_string())?;
    Ok(index.len())
}
