//! The `clawvisor eval <dir>` command: runs every scenario of a directory (scripted, or live
//! against a configured provider) and prints a PASS/FAIL line per scenario and the pass rate.

use std::process::ExitCode;

use crate::config::LoadedConfig;
use crate::daemon::EXIT_CONFIG;

use super::runner::{ModelSource, run};
use super::scenario::load_dir;

pub(in crate::cli) async fn command(
    loaded: &LoadedConfig,
    dir: &std::path::Path,
    live: bool,
    provider: Option<String>,
    model: Option<String>,
) -> ExitCode {
    let scenarios = match load_dir(dir) {
        Ok(scenarios) => scenarios,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let source = if live {
        let first = loaded.agents.first();
        let provider = provider
            .or_else(|| first.map(|agent| agent.provider.clone()))
            .unwrap_or_default();
        let model = model
            .or_else(|| first.map(|agent| agent.model.clone()))
            .unwrap_or_default();
        let Some(config) = loaded.config.providers.get(&provider) else {
            eprintln!("--live: no provider `{provider}` in the config");
            return ExitCode::from(EXIT_CONFIG);
        };
        let mut table = toml::Table::new();
        let mut providers = toml::Table::new();
        providers.insert(
            provider.clone(),
            toml::Value::try_from(config).unwrap_or(toml::Value::Table(toml::Table::new())),
        );
        table.insert("providers".into(), toml::Value::Table(providers));
        // The model's price comes along, so that costs and daily budgets work live as configured.
        if let Some(price) = loaded.config.pricing.get(&model)
            && let Ok(price) = toml::Value::try_from(price)
        {
            let mut pricing = toml::Table::new();
            pricing.insert(model.clone(), price);
            table.insert("pricing".into(), toml::Value::Table(pricing));
        }
        let env = loaded
            .secrets
            .iter()
            .map(|(var, secret)| (var.clone(), secret.expose().to_string()))
            .collect();
        println!(
            "running {} scenario(s) live against {provider}/{model}",
            scenarios.len()
        );
        ModelSource::Live {
            provider_toml: toml::to_string(&table).unwrap_or_default(),
            provider,
            model,
            env,
        }
    } else {
        ModelSource::Scripted
    };
    let mut passed = 0;
    for (path, scenario) in &scenarios {
        let outcome = run(scenario, &source).await;
        if outcome.passed() {
            passed += 1;
            println!("PASS  {}  ({})", outcome.name, path.display());
        } else {
            println!("FAIL  {}  ({})", outcome.name, path.display());
            for failure in &outcome.failures {
                println!("      - {failure}");
            }
        }
    }
    let total = scenarios.len();
    println!(
        "{passed}/{total} scenarios passed ({:.0} %)",
        100.0 * passed as f64 / total.max(1) as f64
    );
    if passed == total {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
