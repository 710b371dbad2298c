//! `clawvisor approvals`: the pending approval requests (decided in Studio or Telegram).

use std::process::ExitCode;

use crate::config::LoadedConfig;

use super::open_existing;

pub(super) async fn run(loaded: &LoadedConfig) -> ExitCode {
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let pending = store.read(crate::store::approvals::pending).await;
    store.stop_writer();
    match pending {
        Ok(rows) if rows.is_empty() => println!("no pending approvals"),
        Ok(rows) => {
            for row in rows {
                let left = (row.expires_ms - crate::clock::now_ms()).max(0) / 1000;
                println!(
                    "{}  {}  {}  {}  ({} s left)  {}",
                    row.id, row.agent, row.risk, row.tool, left, row.action
                );
            }
        }
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
