//! `clawvisor audit verify | export`: the tamper-evident audit log, checked or written out.

use std::process::ExitCode;

use crate::config::LoadedConfig;

use super::{AuditCommand, open_existing};

pub(super) async fn run(loaded: &LoadedConfig, command: AuditCommand) -> ExitCode {
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let code = match command {
        AuditCommand::Verify => match store
            .read(|conn| crate::audit::verify_report(conn, None))
            .await
        {
            Ok(report) => {
                report.lines().iter().for_each(|line| println!("{line}"));
                match report.verification {
                    crate::audit::Verification::Valid { .. } => ExitCode::SUCCESS,
                    crate::audit::Verification::Broken { .. } => ExitCode::FAILURE,
                }
            }
            Err(error) => {
                eprintln!("cannot read the audit log: {error}");
                ExitCode::FAILURE
            }
        },
        AuditCommand::Export { out } => {
            let result = store
                .read(move |conn| {
                    let mut sink: Box<dyn std::io::Write> = match &out {
                        Some(path) => Box::new(std::fs::File::create(path).map_err(|error| {
                            crate::store::StoreError::Invalid(format!(
                                "cannot create {}: {error}",
                                path.display()
                            ))
                        })?),
                        None => Box::new(std::io::stdout()),
                    };
                    crate::audit::export_jsonl(conn, &mut sink)
                })
                .await;
            match result {
                Ok(count) => {
                    eprintln!("exported {count} entries");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("export failed: {error}");
                    ExitCode::FAILURE
                }
            }
        }
    };
    store.stop_writer();
    code
}
