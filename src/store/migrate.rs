//! Schema migrations: `migrations/NNNN_description.sql`, embedded in the binary, add-only.
//!
//! The applied version is SQLite's `PRAGMA user_version`, updated in the same transaction as the
//! migration's SQL, so a migration is either fully applied or not at all. A database stamped with
//! a version this binary does not know is refused before anything is touched.
//!
//! (Not refinery: it requires `V1__name.sql` file names where the design fixes `NNNN_name.sql`,
//! and this runner is the thirty lines below plus the newer-schema refusal we need anyway.)

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::{Result, StoreError};

#[derive(rust_embed::Embed)]
#[folder = "migrations/"]
struct MigrationFiles;

struct Migration {
    version: u32,
    name: String,
    sql: String,
}

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    pub from: u32,
    pub to: u32,
    pub applied: Vec<String>,
}

fn embedded() -> Result<Vec<Migration>> {
    let mut migrations = Vec::new();
    for file in MigrationFiles::iter() {
        let file = file.as_ref();
        let Some(stem) = file.strip_suffix(".sql") else {
            continue;
        };
        let (number, name) = stem
            .split_once('_')
            .ok_or_else(|| StoreError::MigrationName(file.to_string()))?;
        let version: u32 = number
            .parse()
            .map_err(|_| StoreError::MigrationName(file.to_string()))?;
        let sql = MigrationFiles::get(file)
            .map(|content| String::from_utf8_lossy(&content.data).into_owned())
            .ok_or_else(|| StoreError::MigrationName(file.to_string()))?;
        migrations.push(Migration {
            version,
            name: name.to_string(),
            sql,
        });
    }
    migrations.sort_by_key(|migration| migration.version);
    for (index, migration) in migrations.iter().enumerate() {
        if migration.version != index as u32 + 1 {
            return Err(StoreError::MigrationName(format!(
                "{:04}_{}.sql (versions must run 1, 2, 3, ... without gaps)",
                migration.version, migration.name
            )));
        }
    }
    Ok(migrations)
}

/// The newest schema version this binary knows.
pub fn latest_version() -> u32 {
    embedded().map(|all| all.len() as u32).unwrap_or(0)
}

pub fn schema_version(conn: &Connection) -> Result<u32> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get::<_, u32>(0))?)
}

/// Applies every pending migration, each in its own transaction.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<MigrationReport> {
    let migrations = embedded()?;
    let latest = migrations.len() as u32;
    let current = schema_version(conn)?;
    if current > latest {
        return Err(StoreError::NewerSchema {
            path: path.display().to_string(),
            db_version: current,
            binary_version: latest,
        });
    }
    let mut applied = Vec::new();
    for migration in migrations.iter().filter(|m| m.version > current) {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(&migration.sql)
            .map_err(|source| StoreError::Migration {
                version: migration.version,
                name: migration.name.clone(),
                source,
            })?;
        tx.pragma_update(None, "user_version", migration.version)?;
        tx.commit()?;
        applied.push(format!("{:04}_{}", migration.version, migration.name));
    }
    Ok(MigrationReport {
        from: current,
        to: latest,
        applied,
    })
}
