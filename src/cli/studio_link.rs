//! `clawvisor studio-link`: prints a one-time Studio login link (works once, for 15 minutes).

use std::process::ExitCode;

use crate::config::LoadedConfig;

use super::open_existing;

pub(super) async fn run(loaded: &LoadedConfig) -> ExitCode {
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let base = crate::studio::access::base_url(
        &loaded.config.studio.public_url,
        loaded.config.studio_addr(),
    );
    let result = crate::studio::access::login_link(&store, &base, "cli").await;
    store.stop_writer();
    match result {
        Ok(link) => {
            println!("{link}");
            eprintln!("Open it in a browser within 15 minutes; it works once.");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("could not create a login link: {error}");
            ExitCode::FAILURE
        }
    }
}
