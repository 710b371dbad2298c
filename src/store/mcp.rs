//! The `mcp_processes` table: stdio MCP servers started by the daemon and not yet stopped in order.
//!
//! A row is written right after a server's process is spawned and deleted once its process group
//! was killed on an orderly stop. Rows left by a daemon that was killed are reaped at the next boot
//! (`mcp::process::reap`).

use rusqlite::{Connection, params};

use super::StoreError;

/// One recorded process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRow {
    pub token: String,
    pub server: String,
    pub pid: i64,
    pub pgid: i64,
    pub started_ms: i64,
}

pub fn insert(conn: &Connection, row: &ProcessRow) -> Result<(), StoreError> {
    conn.execute(
        "INSERT OR REPLACE INTO mcp_processes (token, server, pid, pgid, started_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![row.token, row.server, row.pid, row.pgid, row.started_ms],
    )?;
    Ok(())
}

pub fn delete(conn: &Connection, token: &str) -> Result<(), StoreError> {
    conn.execute("DELETE FROM mcp_processes WHERE token = ?1", params![token])?;
    Ok(())
}

pub fn delete_all(conn: &Connection, tokens: &[String]) -> Result<(), StoreError> {
    for token in tokens {
        delete(conn, token)?;
    }
    Ok(())
}

pub fn all(conn: &Connection) -> Result<Vec<ProcessRow>, StoreError> {
    let mut statement = conn.prepare(
        "SELECT token, server, pid, pgid, started_ms FROM mcp_processes ORDER BY started_ms",
    )?;
    let rows = statement
        .query_map([], |row| {
            Ok(ProcessRow {
                token: row.get(0)?,
                server: row.get(1)?,
                pid: row.get(2)?,
                pgid: row.get(3)?,
                started_ms: row.get(4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_recorded_listed_and_deleted() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&mut conn, std::path::Path::new(":memory:")).unwrap();
        let row = ProcessRow {
            token: "t1".into(),
            server: "files".into(),
            pid: 10,
            pgid: 10,
            started_ms: 5,
        };
        insert(&conn, &row).unwrap();
        assert_eq!(all(&conn).unwrap(), vec![row]);
        delete(&conn, "t1").unwrap();
        assert!(all(&conn).unwrap().is_empty());
    }
}
