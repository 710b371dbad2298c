//! `clawvisor memory stats | reindex | fetch-model`: memories per owner, embedding the memories
//! a new model has not seen and rebuilding the vector index, and downloading a local model.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use crate::config::LoadedConfig;
use crate::memory::index::{IndexParams, VectorIndex};
use crate::memory::{Embedder, EmbeddingsChoice, local};
use crate::store::Store;
use crate::store::memory as queries;

use super::{MemoryCommand, open_existing};

/// Memories embedded per step of `reindex`.
const REINDEX_BATCH: u32 = 32;

pub(super) async fn run(loaded: &LoadedConfig, command: MemoryCommand) -> ExitCode {
    if let MemoryCommand::FetchModel { name, from } = &command {
        return fetch_model(loaded, name, from.as_deref()).await;
    }
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let (choice, why) = crate::memory::embeddings_choice(&loaded.config, &loaded.secrets);
    let code = match (command, choice) {
        (MemoryCommand::Stats, choice) => print_stats(&store, choice.as_ref(), &why).await,
        (MemoryCommand::Reindex, None) => {
            println!("nothing to index: memory is in full-text mode ({why})");
            ExitCode::SUCCESS
        }
        (MemoryCommand::Reindex, Some(choice)) => reindex_all(loaded, &store, &choice).await,
        (MemoryCommand::FetchModel { .. }, _) => ExitCode::SUCCESS,
    };
    store.stop_writer();
    code
}

/// `memory stats`: the search mode and why, the memory counts, and the live memories per owner.
async fn print_stats(store: &Store, choice: Option<&EmbeddingsChoice>, why: &str) -> ExitCode {
    let model = choice.map(EmbeddingsChoice::model).unwrap_or_default();
    let counted = store
        .read(move |conn| {
            Ok((
                queries::stats(conn)?,
                queries::count_needing_embedding(conn, &model)?,
            ))
        })
        .await;
    match counted {
        Ok((stats, needing)) => {
            match choice {
                None => println!("mode: full text only ({why})"),
                Some(choice) => {
                    println!(
                        "mode: {} embeddings, model {} ({why})",
                        choice.mode(),
                        choice.model()
                    );
                    if needing > 0 {
                        println!(
                            "{needing} memories have no vector of this model yet: the daemon embeds \
                             them at start, or run `clawvisor memory reindex` while it is stopped"
                        );
                    }
                }
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

/// `memory reindex`: embeds what the current model has not seen, then rebuilds the index.
async fn reindex_all(loaded: &LoadedConfig, store: &Store, choice: &EmbeddingsChoice) -> ExitCode {
    let embedder = match Embedder::new(choice) {
        Ok(embedder) => embedder,
        Err(error) => {
            eprintln!("cannot embed memories: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(error) = embed_missing(store, &embedder).await {
        eprintln!(
            "embedding memories stopped: {error}; run `clawvisor memory reindex` again to go on"
        );
        return ExitCode::FAILURE;
    }
    reindex_embedded(loaded, store, embedder.model()).await
}

/// Embeds every live memory without a vector of the embedder's model, with a progress line.
async fn embed_missing(store: &Store, embedder: &Embedder) -> Result<(), String> {
    let model = embedder.model().to_string();
    let total = {
        let model = model.clone();
        store
            .read(move |conn| queries::count_needing_embedding(conn, &model))
            .await
            .map_err(|error| error.to_string())?
    };
    if total == 0 {
        return Ok(());
    }
    println!("embedding {total} memories with {model}");
    let (mut done, mut after_id) = (0u64, 0i64);
    loop {
        let batch = {
            let model = model.clone();
            store
                .read(move |conn| queries::needing_embedding(conn, &model, after_id, REINDEX_BATCH))
                .await
                .map_err(|error| error.to_string())?
        };
        let Some((last, _, _)) = batch.last() else {
            break;
        };
        after_id = *last;
        let texts: Vec<String> = batch.iter().map(|(_, _, text)| text.clone()).collect();
        let vectors = embedder.embed(texts).await?;
        let model_for_write = model.clone();
        done += store
            .write(move |conn| {
                let mut stored = 0u64;
                for ((id, _, text), vector) in batch.iter().zip(&vectors) {
                    let Ok(unit) = crate::memory::index::normalize(vector, vector.len()) else {
                        continue;
                    };
                    stored += u64::from(queries::set_embedding(
                        conn,
                        *id,
                        text,
                        &unit,
                        &model_for_write,
                    )?);
                }
                Ok(stored)
            })
            .await
            .map_err(|error| error.to_string())?;
        eprint!("\rembedded {done}/{total}");
        let _ = std::io::stderr().flush();
    }
    eprintln!();
    Ok(())
}

/// Rebuilds `<data dir>/memory` from the stored embeddings of `model`.
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

/// `memory fetch-model <name>`: downloads a known model into `<data dir>/models/<name>/`.
async fn fetch_model(loaded: &LoadedConfig, name: &str, from: Option<&str>) -> ExitCode {
    let model = match local::fetch::find(name) {
        Ok(model) => model,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let models_dir = local::models_dir(&loaded.config.data_dir);
    let mut progress = |line: &str| println!("{line}");
    match local::fetch::download(&model, from, &models_dir, &mut progress).await {
        Ok(dir) => {
            println!(
                "{} is ready in {}. To use it, put this in the config file and restart:\n\n\
                 [memory]\nembeddings = \"local\"\nlocal_model = \"{}\"",
                model.name,
                dir.display(),
                model.name
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("The model was not downloaded: {error}");
            ExitCode::FAILURE
        }
    }
}
