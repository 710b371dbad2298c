//! `clawvisor reload`: asks the running daemon to re-read its config and agent files (the same as
//! SIGHUP and Studio's button), through Studio's API with the local access token
//! (`<data_dir>/studio.token`), and prints the report. Exits 0 when the files were applied, 78
//! (configuration error) when they were refused (nothing changed), 1 when the daemon could not be
//! asked.

use std::process::ExitCode;
use std::time::Duration;

use crate::config::LoadedConfig;
use crate::daemon::EXIT_CONFIG;

pub(super) async fn run(loaded: &LoadedConfig) -> ExitCode {
    let token = match crate::studio::access::local_token(&loaded.config.data_dir) {
        Ok(token) => token,
        Err(error) => {
            eprintln!("cannot read the daemon's access token: {error}");
            return ExitCode::FAILURE;
        }
    };
    let base = crate::studio::access::base_url(
        &loaded.config.studio.public_url,
        loaded.config.studio_addr(),
    );
    let url = format!("{}/api/v1/reload", base.trim_end_matches('/'));
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(150))
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            eprintln!("cannot make an HTTP client: {error}");
            return ExitCode::FAILURE;
        }
    };
    let response = client.post(&url).bearer_auth(token.expose()).send().await;
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            eprintln!(
                "cannot reach the daemon's Studio at {base} ({}); is `clawvisor serve` running? \
                 (`systemctl reload clawvisor` sends SIGHUP instead)",
                error.without_url()
            );
            return ExitCode::FAILURE;
        }
    };
    let status = response.status();
    let body: serde_json::Value = match response.json().await {
        Ok(body) => body,
        Err(error) => {
            eprintln!("the daemon answered {status} without a report: {error}");
            return ExitCode::FAILURE;
        }
    };
    if !status.is_success() {
        let message = body["error"]["message"].as_str().unwrap_or("no message");
        eprintln!("the daemon refused the reload ({status}): {message}");
        return ExitCode::FAILURE;
    }
    println!("{}", body["summary"].as_str().unwrap_or("reloaded"));
    if body["ok"].as_bool() == Some(true) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CONFIG)
    }
}
