//! Queries for `memory_facts` and its full-text index `memory_fts` (FTS5 with the Porter stemmer:
//! "plants" finds "plant" and "planting").
//!
//! Architecture Invariant: the read model is enforced here, in SQL: an agent reads its own, its
//! direct reports' (`reports_to`) and the platform's memories. Every query that an agent's tools
//! or prompt use takes the set of owners the agent may read ([`Scope`]) and the chat it is in,
//! and filters in SQL. A fact of
//! class `restricted` or `session_recap` is visible only in the chat where it was learned. Vector
//! hits, which know only their owner, are filtered by the same SQL ([`visible_ids`]) before
//! anyone sees them.
//!
//! Deviation from the design: facts and semantic chunks are one table (`memory_facts`; a recap is
//! a row of class `session_recap`, a note one of class `durable`) with an optional embedding, so
//! that one full-text index, one read model and one governance path serve both.

use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use super::Result;

/// What a reader may see: these owners' memories, in this chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub owners: Vec<String>,
    /// The reader's chat (`None`: the operator, who sees every chat).
    pub chat: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FactRow {
    pub id: i64,
    pub owner: String,
    pub class: String,
    pub sensitivity: String,
    pub source: String,
    pub chat: Option<String>,
    pub text: String,
    pub run_id: Option<i64>,
    pub message_id: Option<i64>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub archived_ms: Option<i64>,
    pub redacted_ms: Option<i64>,
    pub surprise: Option<f32>,
    pub embedded: bool,
    /// When the operator last changed the text (`None`: as it was saved).
    pub edited_ms: Option<i64>,
    /// Who last changed the text.
    pub edited_by: Option<String>,
}

/// A fact to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFact {
    pub owner: String,
    pub class: String,
    pub sensitivity: String,
    pub source: String,
    pub chat: Option<String>,
    pub text: String,
    pub run_id: Option<i64>,
    pub message_id: Option<i64>,
    pub surprise: Option<f32>,
    /// `(vector, model)`; the vector already normalized.
    pub embedding: Option<(Vec<f32>, String)>,
}

const COLUMNS: &str = "id, owner, class, sensitivity, source, chat, text, run_id, message_id, created_ms, \
    updated_ms, archived_ms, redacted_ms, surprise, embedding IS NOT NULL, edited_ms, edited_by";

fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<FactRow> {
    Ok(FactRow {
        id: row.get(0)?,
        owner: row.get(1)?,
        class: row.get(2)?,
        sensitivity: row.get(3)?,
        source: row.get(4)?,
        chat: row.get(5)?,
        text: row.get(6)?,
        run_id: row.get(7)?,
        message_id: row.get(8)?,
        created_ms: row.get(9)?,
        updated_ms: row.get(10)?,
        archived_ms: row.get(11)?,
        redacted_ms: row.get(12)?,
        surprise: row.get::<_, Option<f64>>(13)?.map(|value| value as f32),
        embedded: row.get(14)?,
        edited_ms: row.get(15)?,
        edited_by: row.get(16)?,
    })
}

pub fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

/// `None` when the blob is not a whole number of f32s.
pub fn decode_vector(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
            .collect(),
    )
}

pub fn insert(conn: &Connection, fact: &NewFact, now_ms: i64) -> Result<i64> {
    let (blob, model, dimension) = match &fact.embedding {
        Some((vector, model)) => (
            Some(encode_vector(vector)),
            Some(model.as_str()),
            Some(vector.len() as i64),
        ),
        None => (None, None, None),
    };
    conn.prepare_cached(
        "INSERT INTO memory_facts (owner, class, sensitivity, source, chat, text, run_id, message_id,
             created_ms, updated_ms, surprise, embedding, embedding_model, dimension)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        fact.owner,
        fact.class,
        fact.sensitivity,
        fact.source,
        fact.chat,
        fact.text,
        fact.run_id,
        fact.message_id,
        now_ms,
        fact.surprise.map(f64::from),
        blob,
        model,
        dimension
    ])?;
    Ok(conn.last_insert_rowid())
}

pub fn get(conn: &Connection, id: i64) -> Result<Option<FactRow>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM memory_facts WHERE id = ?1"))?
        .query_row([id], from_row)
        .optional()?)
}

/// The SQL condition (and its parameters, appended to `values`) for what `scope` may see of
/// live facts.
fn scope_condition(scope: &Scope, values: &mut Vec<String>) -> String {
    let mut placeholders = Vec::with_capacity(scope.owners.len());
    for owner in &scope.owners {
        values.push(owner.clone());
        placeholders.push(format!("?{}", values.len()));
    }
    let owners = if placeholders.is_empty() {
        "0".to_string()
    } else {
        format!("f.owner IN ({})", placeholders.join(", "))
    };
    let chat = match &scope.chat {
        Some(chat) => {
            values.push(chat.clone());
            format!(
                "(f.class NOT IN ('restricted', 'session_recap') OR f.chat = ?{})",
                values.len()
            )
        }
        None => "1".to_string(),
    };
    format!("f.archived_ms IS NULL AND f.redacted_ms IS NULL AND {owners} AND {chat}")
}

/// The newest live facts the scope may see.
pub fn list_visible(conn: &Connection, scope: &Scope, limit: u32) -> Result<Vec<FactRow>> {
    let mut values = Vec::new();
    let condition = scope_condition(scope, &mut values);
    let sql = format!(
        "SELECT {} FROM memory_facts f WHERE {condition} ORDER BY f.id DESC LIMIT {}",
        COLUMNS
            .split(", ")
            .map(|column| format!("f.{column}"))
            .collect::<Vec<_>>()
            .join(", "),
        limit.clamp(1, 1_000)
    );
    let mut statement = conn.prepare(&sql)?;
    let rows = statement.query_map(params_from_iter(values.iter()), from_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Which of `ids` the scope may see (used to filter vector hits, which know only owners).
pub fn visible_ids(conn: &Connection, scope: &Scope, ids: &[i64]) -> Result<Vec<i64>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut values = Vec::new();
    let condition = scope_condition(scope, &mut values);
    let list = id_list(ids);
    let sql = format!("SELECT f.id FROM memory_facts f WHERE {condition} AND f.id IN ({list})");
    let mut statement = conn.prepare(&sql)?;
    let rows = statement.query_map(params_from_iter(values.iter()), |row| row.get(0))?;
    Ok(rows.collect::<rusqlite::Result<Vec<i64>>>()?)
}

/// Words that say nothing about what is searched for ("what is our ...").
const STOP_WORDS: &[&str] = &[
    "about", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his",
    "how", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our",
    "she", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this",
    "to", "too", "us", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why",
    "will", "with", "would", "you", "your",
];

/// An FTS5 query matching any of the meaningful words of `text` (each quoted: no operator
/// injection).
pub fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 2)
        .filter(|word| !STOP_WORDS.contains(&word.to_lowercase().as_str()))
        .take(32)
        .map(|word| format!("\"{}\"", word.to_lowercase()))
        .collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

/// Full-text search within the scope, best BM25 first.
pub fn search_text(conn: &Connection, scope: &Scope, text: &str, limit: u32) -> Result<Vec<i64>> {
    let Some(query) = fts_query(text) else {
        return Ok(Vec::new());
    };
    let mut values = vec![query];
    let condition = scope_condition(scope, &mut values);
    let sql = format!(
        "SELECT f.id FROM memory_fts JOIN memory_facts f ON f.id = memory_fts.rowid
         WHERE memory_fts MATCH ?1 AND {condition} ORDER BY bm25(memory_fts) LIMIT {}",
        limit.clamp(1, 1_000)
    );
    let mut statement = conn.prepare(&sql)?;
    let rows = statement.query_map(params_from_iter(values.iter()), |row| row.get(0))?;
    Ok(rows.collect::<rusqlite::Result<Vec<i64>>>()?)
}

/// A live fact of `owner` with exactly this text (full-text mode's duplicate check).
pub fn same_text(conn: &Connection, owner: &str, text: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(
            "SELECT id FROM memory_facts WHERE owner = ?1 AND lower(trim(text)) = lower(trim(?2))
             AND archived_ms IS NULL AND redacted_ms IS NULL LIMIT 1",
        )?
        .query_row(params![owner, text], |row| row.get(0))
        .optional()?)
}

/// `1, 2, 3` for an SQL `IN (...)` (integers only: nothing to escape).
fn id_list(ids: &[i64]) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `(id, owner)` of every live embedded fact of `model` (for the index watermark).
pub fn embedded_ids(conn: &Connection, model: &str) -> Result<Vec<(i64, String)>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, owner FROM memory_facts WHERE embedding IS NOT NULL AND embedding_model = ?1
         AND archived_ms IS NULL AND redacted_ms IS NULL ORDER BY id",
    )?;
    let rows = statement.query_map([model], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// `(id, owner, vector)` of every live embedded fact of `model` (to rebuild the index).
pub fn embedded_vectors(conn: &Connection, model: &str) -> Result<Vec<(i64, String, Vec<f32>)>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, owner, embedding FROM memory_facts WHERE embedding IS NOT NULL AND embedding_model = ?1
         AND archived_ms IS NULL AND redacted_ms IS NULL ORDER BY id",
    )?;
    let rows = statement.query_map([model], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, Vec<u8>>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, owner, blob) = row?;
        if let Some(vector) = decode_vector(&blob) {
            out.push((id, owner, vector));
        }
    }
    Ok(out)
}

/// How many live memories have no embedding of `model` (to embed after a model change).
pub fn count_needing_embedding(conn: &Connection, model: &str) -> Result<u64> {
    Ok(conn
        .prepare_cached(
            "SELECT COUNT(*) FROM memory_facts WHERE archived_ms IS NULL AND redacted_ms IS NULL
             AND (embedding IS NULL OR embedding_model IS NOT ?1)",
        )?
        .query_row([model], |row| row.get::<_, i64>(0))? as u64)
}

/// `(id, owner, text)` of up to `limit` live memories after `after_id` without an embedding of
/// `model`, in id order.
pub fn needing_embedding(
    conn: &Connection,
    model: &str,
    after_id: i64,
    limit: u32,
) -> Result<Vec<(i64, String, String)>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, owner, text FROM memory_facts WHERE id > ?2 AND archived_ms IS NULL
         AND redacted_ms IS NULL AND (embedding IS NULL OR embedding_model IS NOT ?1)
         ORDER BY id LIMIT ?3",
    )?;
    let rows = statement.query_map(params![model, after_id, limit], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Stores `vector` as the embedding of `model` for memory `id`, if its text is still `text`
/// (an edit meanwhile re-embedded it already). Whether it was stored.
pub fn set_embedding(
    conn: &Connection,
    id: i64,
    text: &str,
    vector: &[f32],
    model: &str,
) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE memory_facts SET embedding = ?3, embedding_model = ?4, dimension = ?5
             WHERE id = ?1 AND text = ?2",
        )?
        .execute(params![
            id,
            text,
            encode_vector(vector),
            model,
            vector.len() as i64
        ])?
        == 1)
}

/// The dimension of the vectors stored for `model`, if any.
pub fn stored_dimension(conn: &Connection, model: &str) -> Result<Option<usize>> {
    Ok(conn
        .prepare_cached(
            "SELECT dimension FROM memory_facts WHERE embedding_model = ?1 AND dimension IS NOT NULL LIMIT 1",
        )?
        .query_row([model], |row| row.get::<_, i64>(0))
        .optional()?
        .map(|dimension| dimension as usize))
}

/// The surprise recorded with each of `ids`.
pub fn surprises(conn: &Connection, ids: &[i64]) -> Result<Vec<(i64, f32)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = id_list(ids);
    let mut statement = conn.prepare(&format!(
        "SELECT id, surprise FROM memory_facts WHERE id IN ({list}) AND surprise IS NOT NULL"
    ))?;
    let rows = statement.query_map([], |row| {
        Ok((row.get::<_, i64>(0)?, row.get::<_, f64>(1)? as f32))
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn by_ids(conn: &Connection, ids: &[i64]) -> Result<Vec<FactRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = id_list(ids);
    let mut statement = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM memory_facts WHERE id IN ({list})"
    ))?;
    let rows = statement.query_map([], from_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Every fact, newest first, for the operator's review (archived and redacted included).
/// Memories newest first (of `owner` when given), older than the id `before` when given.
pub fn review(
    conn: &Connection,
    owner: Option<&str>,
    before: Option<i64>,
    limit: u32,
) -> Result<Vec<FactRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM memory_facts WHERE (?1 IS NULL OR owner = ?1) AND (?2 IS NULL OR id < ?2) ORDER BY id DESC LIMIT ?3"
    ))?;
    let rows = statement.query_map(params![owner, before, limit.clamp(1, 10_000)], from_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn set_archived(conn: &Connection, id: i64, archived: bool, now_ms: i64) -> Result<bool> {
    let sql = if archived {
        "UPDATE memory_facts SET archived_ms = ?2, updated_ms = ?2 WHERE id = ?1 AND archived_ms IS NULL"
    } else {
        "UPDATE memory_facts SET archived_ms = NULL, updated_ms = ?2 WHERE id = ?1 AND archived_ms IS NOT NULL AND redacted_ms IS NULL"
    };
    Ok(conn.execute(sql, params![id, now_ms])? == 1)
}

/// The operator's edit of a memory's text: the new text and its embedding (`None`: none, the
/// old one no longer matches), who edited it and when. Everything else — owner, class, source,
/// chat, run and message (its lineage), created_ms — stays. The FTS row follows by trigger.
/// `false` when there is no such memory or it was redacted.
pub fn edit_text(
    conn: &Connection,
    id: i64,
    text: &str,
    embedding: Option<(&[f32], &str)>,
    by: &str,
    now_ms: i64,
) -> Result<bool> {
    let (blob, model, dimension) = match embedding {
        Some((vector, model)) => (
            Some(encode_vector(vector)),
            Some(model),
            Some(vector.len() as i64),
        ),
        None => (None, None, None),
    };
    Ok(conn.execute(
        "UPDATE memory_facts SET text = ?2, embedding = ?3, embedding_model = ?4, dimension = ?5,
             updated_ms = ?6, edited_ms = ?6, edited_by = ?7 WHERE id = ?1 AND redacted_ms IS NULL",
        params![id, text, blob, model, dimension, now_ms, by],
    )? == 1)
}

/// Replaces the text and drops the embedding; the FTS row follows by trigger.
pub fn redact(conn: &Connection, id: i64, now_ms: i64) -> Result<bool> {
    Ok(conn.execute(
        "UPDATE memory_facts SET text = '[redacted]', embedding = NULL, embedding_model = NULL, dimension = NULL,
             redacted_ms = ?2, updated_ms = ?2 WHERE id = ?1 AND redacted_ms IS NULL",
        params![id, now_ms],
    )? == 1)
}

pub fn purge(conn: &Connection, id: i64) -> Result<bool> {
    Ok(conn.execute("DELETE FROM memory_facts WHERE id = ?1", [id])? == 1)
}

pub fn reclassify(conn: &Connection, id: i64, sensitivity: &str, now_ms: i64) -> Result<bool> {
    Ok(conn.execute(
        "UPDATE memory_facts SET sensitivity = ?2, updated_ms = ?3 WHERE id = ?1 AND sensitivity <> ?2",
        params![id, sensitivity, now_ms],
    )? == 1)
}

/// The embedding of one live fact, for re-inserting it into the index after a restore.
pub fn embedding_of(conn: &Connection, id: i64) -> Result<Option<(String, Vec<f32>)>> {
    let row: Option<(String, Option<Vec<u8>>)> = conn
        .prepare_cached("SELECT owner, embedding FROM memory_facts WHERE id = ?1")?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(row.and_then(|(owner, blob)| Some((owner, decode_vector(&blob?)?))))
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub live: i64,
    pub embedded: i64,
    pub archived: i64,
    pub redacted: i64,
    /// `(owner, live facts)`.
    pub by_owner: Vec<(String, i64)>,
}

pub fn stats(conn: &Connection) -> Result<Stats> {
    let (live, embedded, archived, redacted) = conn.query_row(
        "SELECT
            COALESCE(SUM(archived_ms IS NULL AND redacted_ms IS NULL), 0),
            COALESCE(SUM(embedding IS NOT NULL AND archived_ms IS NULL AND redacted_ms IS NULL), 0),
            COALESCE(SUM(archived_ms IS NOT NULL), 0),
            COALESCE(SUM(redacted_ms IS NOT NULL), 0)
         FROM memory_facts",
        [],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
    )?;
    let mut statement = conn.prepare(
        "SELECT owner, COUNT(*) FROM memory_facts WHERE archived_ms IS NULL AND redacted_ms IS NULL
         GROUP BY owner ORDER BY owner",
    )?;
    let by_owner = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Stats {
        live,
        embedded,
        archived,
        redacted,
        by_owner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_bad_blobs_are_refused() {
        let vector = vec![0.5f32, -1.25, 3.0];
        assert_eq!(decode_vector(&encode_vector(&vector)), Some(vector));
        assert_eq!(decode_vector(&[1, 2, 3]), None);
    }

    #[test]
    fn full_text_queries_quote_every_word() {
        assert_eq!(
            fts_query("Where's my \"NEAR\" key* OR x").as_deref(),
            Some("\"near\" OR \"key\"")
        );
        assert_eq!(fts_query("?! a"), None);
        assert_eq!(fts_query("what is it"), None);
    }
}
