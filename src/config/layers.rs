//! The layering itself: each layer is a TOML table; they are merged in order and deserialized once.
//! The file layer is also deserialized alone first, so that its errors name the file and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use super::validate::validate;
use super::{
    CONFIG_FILE, Config, ConfigError, ConfigSource, LoadedConfig, Overrides, SHIPPED_AGENT,
    SecretSource, agent, resolve, secrets_file, starter,
};
use crate::secrets::Secret;

const ENV_PREFIX: &str = "CLAWVISOR_";
/// Variables with a meaning of their own, not mapped onto a key.
const ENV_SPECIAL: &[&str] = &["CONFIG", "ACTORS_DIR"];

/// Deserializes `text` as a [`Config`], naming the key path and the line on error.
pub(super) fn parse_config_text(text: &str, origin: &str) -> Result<(Config, Table), ConfigError> {
    let table: Table = toml::from_str(text).map_err(|error| ConfigError::File {
        origin: origin.to_string(),
        message: describe_toml_error(text, error.message(), error.span()),
    })?;
    let deserializer = toml::de::Deserializer::parse(text).map_err(|error| ConfigError::File {
        origin: origin.to_string(),
        message: describe_toml_error(text, error.message(), error.span()),
    })?;
    let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let key = display_key(&error.path().to_string());
        let inner = error.inner();
        ConfigError::key(
            origin,
            key,
            describe_toml_error(text, &friendly(inner.message()), inner.span()),
        )
    })?;
    Ok((config, table))
}

/// `supervision.max_restarts` → `[supervision].max_restarts`; the root → `(top level)`.
pub(super) fn display_key(path: &str) -> String {
    if path.is_empty() || path == "." {
        return "(top level)".to_string();
    }
    match path.split_once('.') {
        Some((section, rest)) => format!("[{section}].{rest}"),
        None => path.to_string(),
    }
}

pub(super) fn friendly(message: &str) -> String {
    message
        .replace("unknown field", "unknown key")
        .replace("missing field", "missing key")
}

pub(super) fn describe_toml_error(
    text: &str,
    message: &str,
    span: Option<std::ops::Range<usize>>,
) -> String {
    match span {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("{message} (line {line})")
        }
        None => message.to_string(),
    }
}

fn merge(base: &mut Table, layer: Table) {
    for (key, value) in layer {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(existing)), Value::Table(incoming)) => merge(existing, incoming),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Maps `CLAWVISOR_SECTION_KEY` (or `CLAWVISOR_KEY` for top-level keys) onto the defaults' keys.
fn env_layer(
    defaults: &Table,
    env: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Result<(Table, BTreeMap<String, String>), ConfigError> {
    let mut layer = Table::new();
    let mut origins = BTreeMap::new();
    for (name, raw) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if ENV_SPECIAL.contains(&rest) {
            continue;
        }
        let mut found = None;
        for (key, value) in defaults {
            match value {
                Value::Table(section) => {
                    for (inner, default) in section {
                        if format!("{key}_{inner}").to_ascii_uppercase() == rest {
                            found = Some((Some(key.clone()), inner.clone(), default.clone()));
                        }
                    }
                }
                default => {
                    if key.to_ascii_uppercase() == rest {
                        found = Some((None, key.clone(), default.clone()));
                    }
                }
            }
        }
        let Some((section, key, default)) = found else {
            // Agent files may name their own CLAWVISOR_... token variables; those are not keys.
            if !rest.ends_with("TOKEN") && !rest.ends_with("KEY") {
                warnings.push(format!(
                    "environment variable {name} matches no configuration key; ignored"
                ));
            }
            continue;
        };
        let dotted = match &section {
            Some(section) => format!("{section}.{key}"),
            None => key.clone(),
        };
        let value = typed_env_value(raw, &default).map_err(|message| {
            ConfigError::key(
                format!("environment variable {name}"),
                display_key(&dotted),
                message,
            )
        })?;
        match section {
            Some(section) => {
                let entry = layer
                    .entry(section)
                    .or_insert_with(|| Value::Table(Table::new()));
                if let Value::Table(table) = entry {
                    table.insert(key, value);
                }
            }
            None => {
                layer.insert(key, value);
            }
        }
        origins.insert(dotted, format!("environment variable {name}"));
    }
    Ok((layer, origins))
}

fn typed_env_value(raw: &str, default: &Value) -> Result<Value, String> {
    Ok(match default {
        Value::String(_) => Value::String(raw.to_string()),
        Value::Integer(_) => Value::Integer(
            raw.trim()
                .parse()
                .map_err(|_| format!("`{raw}` is not a whole number"))?,
        ),
        Value::Float(_) => Value::Float(
            raw.trim()
                .parse()
                .map_err(|_| format!("`{raw}` is not a number"))?,
        ),
        Value::Boolean(_) => Value::Boolean(match raw.trim() {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            _ => return Err(format!("`{raw}` is not true or false")),
        }),
        _ => {
            let parsed: Table = toml::from_str(&format!("value = {raw}"))
                .map_err(|error| format!("`{raw}` is not a TOML value: {}", error.message()))?;
            parsed
                .get("value")
                .cloned()
                .unwrap_or(Value::String(raw.to_string()))
        }
    })
}

fn cli_layer(overrides: &Overrides) -> (Table, BTreeMap<String, String>) {
    let mut layer = Table::new();
    let mut origins = BTreeMap::new();
    let mut set = |section: Option<&str>, key: &str, value: Value, flag: &str| match section {
        Some(section) => {
            let entry = layer
                .entry(section.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            if let Value::Table(table) = entry {
                table.insert(key.to_string(), value);
            }
            origins.insert(
                format!("{section}.{key}"),
                format!("command-line flag {flag}"),
            );
        }
        None => {
            layer.insert(key.to_string(), value);
            origins.insert(key.to_string(), format!("command-line flag {flag}"));
        }
    };
    if let Some(dir) = &overrides.data_dir {
        set(
            None,
            "data_dir",
            Value::String(dir.display().to_string()),
            "--data-dir",
        );
    }
    if let Some(bind) = &overrides.studio_bind {
        set(
            Some("studio"),
            "bind",
            Value::String(bind.clone()),
            "--studio-bind",
        );
    }
    if let Some(dir) = &overrides.actors_dir {
        set(
            Some("agents"),
            "dir",
            Value::String(dir.display().to_string()),
            "--actors-dir",
        );
    }
    if let Some(level) = &overrides.log_level {
        set(
            Some("log"),
            "level",
            Value::String(level.clone()),
            "--log-level",
        );
    }
    if let Some(format) = overrides.log_format {
        let text = match format {
            super::LogFormat::Text => "text",
            super::LogFormat::Json => "json",
        };
        set(
            Some("log"),
            "format",
            Value::String(text.into()),
            "--log-format",
        );
    }
    (layer, origins)
}

/// The chosen config file, parsed and checked alone.
struct FileLayer {
    source: ConfigSource,
    /// The source as errors name it.
    origin: String,
    /// The directory that paths written in the file are relative to.
    dir: PathBuf,
    table: Table,
}

impl FileLayer {
    /// Parses and validates the file alone, so that its errors name the file and line.
    fn parse(source: ConfigSource, text: &str, cwd: &Path) -> Result<FileLayer, ConfigError> {
        let origin = source.to_string();
        // Paths written in a file are relative to its directory. The built-in file stands for
        // the `clawvisor.toml` that `clawvisor init` would write in the working directory.
        let dir = match &source {
            ConfigSource::File(path) => path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| cwd.to_path_buf()),
            ConfigSource::BuiltIn => cwd.to_path_buf(),
        };
        let (file_config, table) = parse_config_text(text, &origin)?;
        validate(&file_config, &origin)?;
        Ok(FileLayer {
            source,
            origin,
            dir,
            table,
        })
    }
}

/// Where each key set by the environment or a flag came from; every other key is the file's.
struct Origins {
    overridden: BTreeMap<String, String>,
    file: String,
}

impl Origins {
    /// The variable or flag that set the dotted `key` (`studio.bind`), else the file.
    fn of(&self, key: &str) -> String {
        self.overridden
            .get(key)
            .cloned()
            .unwrap_or_else(|| self.file.clone())
    }

    /// Whether the environment or a flag set the dotted `key`.
    fn overrides(&self, key: &str) -> bool {
        self.overridden.contains_key(key)
    }
}

/// Loads the config from its layers, then the agents and the secrets they name.
pub(super) fn load(
    overrides: &Overrides,
    env: &BTreeMap<String, String>,
    cwd: &Path,
    overlay: &super::edit::Overlay,
) -> Result<LoadedConfig, ConfigError> {
    let mut warnings = Vec::new();

    // 1. Which file: flag > CLAWVISOR_CONFIG > clawvisor.toml > config/clawvisor.toml > built-in
    // defaults.
    let (source, text) = read_config_file(overrides, env, cwd, overlay, &mut warnings)?;

    // 2. The file alone: types, unknown keys, named by file and line.
    let file = FileLayer::parse(source, &text, cwd)?;

    // 3. Defaults < file < env < flags, deserialized once.
    let (mut config, origins) = merge_layers(&file, overrides, env, &mut warnings)?;
    validate(&config, &origins.of("studio.bind"))?;
    let timezone = super::timezone::daemon_timezone(
        &config.timezone,
        &origins.of("timezone"),
        env,
        &mut warnings,
    )?;

    // 4. Resolve paths: from the file → its directory; from env/flags/defaults → the working directory.
    let data_dir_from_file = file.table.contains_key("data_dir") && !origins.overrides("data_dir");
    config.data_dir = resolve(
        if data_dir_from_file { &file.dir } else { cwd },
        &config.data_dir,
    );
    let agents_dir_explicit = resolve_agents_dir(&mut config, &file, &origins, overrides, env, cwd);
    for server in &mut config.mcp.servers {
        if let Some(dir) = &server.cwd {
            server.cwd = Some(resolve(&file.dir, dir));
        }
    }

    // 5. Agents.
    let (agents, agents_source) = load_agent_specs(
        &config,
        &file.origin,
        agents_dir_explicit,
        overlay,
        &mut warnings,
    )?;
    agent::validate_agents(&agents, &config)?;
    super::triggers::validate(&config.triggers, &agents, &file.origin)?;

    // 6. Secrets: the environment, else the store Studio writes.
    let stored = read_store(&config.data_dir)?;
    warnings.extend(stored.warnings);
    let (secrets, secret_sources) = read_secrets(&config, &agents, env, &stored.values);
    check_studio_tokens(&config, &secrets, &origins)?;
    let hints = next_steps(&config, &agents, &file.source, &secrets);
    Ok(LoadedConfig {
        config,
        agents,
        source: file.source,
        agents_source,
        warnings,
        hints,
        secrets,
        secret_sources,
        timezone,
    })
}

/// Reads the file the lookup finds (`starter::config_file_in`), else takes the built-in defaults
/// (the starter config, read from the working directory).
fn read_config_file(
    overrides: &Overrides,
    env: &BTreeMap<String, String>,
    cwd: &Path,
    overlay: &super::edit::Overlay,
    warnings: &mut Vec<String>,
) -> Result<(ConfigSource, String), ConfigError> {
    let explicit = overrides.config.is_some() || env.contains_key("CLAWVISOR_CONFIG");
    if !explicit {
        warnings.extend(starter::shadowed_config_warning(cwd));
    }
    Ok(match starter::config_file_in(overrides, env, cwd) {
        Some(path) => {
            let text = overlay.read(&path).map_err(|error| ConfigError::File {
                origin: path.display().to_string(),
                message: format!("cannot read the config file: {error}"),
            })?;
            (ConfigSource::File(path), text)
        }
        None => (ConfigSource::BuiltIn, starter::starter_config()),
    })
}

/// Merges defaults < file < environment < flags and deserializes the result once, naming the
/// variable or flag that set a bad key.
fn merge_layers(
    file: &FileLayer,
    overrides: &Overrides,
    env: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Result<(Config, Origins), ConfigError> {
    let mut merged = Table::try_from(Config::default())
        .expect("the default config always serializes to a TOML table");
    let defaults = merged.clone();
    merge(&mut merged, file.table.clone());
    let (env_table, env_origins) = env_layer(&defaults, env, warnings)?;
    let (cli_table, cli_origins) = cli_layer(overrides);
    merge(&mut merged, env_table);
    merge(&mut merged, cli_table);
    let mut overridden = env_origins;
    overridden.extend(cli_origins);
    let origins = Origins {
        overridden,
        file: file.origin.clone(),
    };
    let config = serde_path_to_error::deserialize(Value::Table(merged)).map_err(|error| {
        let path = error.path().to_string();
        ConfigError::key(
            origins.of(&path),
            display_key(&path),
            friendly(&error.inner().to_string()),
        )
    })?;
    Ok((config, origins))
}

/// Sets `[agents].dir` from `CLAWVISOR_ACTORS_DIR` (unless a flag set it) and resolves it against
/// the directory its layer calls for; says whether it was set on purpose, so that a missing
/// directory is an error.
fn resolve_agents_dir(
    config: &mut Config,
    file: &FileLayer,
    origins: &Origins,
    overrides: &Overrides,
    env: &BTreeMap<String, String>,
    cwd: &Path,
) -> bool {
    let env_actors_dir = env
        .get("CLAWVISOR_ACTORS_DIR")
        .filter(|_| overrides.actors_dir.is_none());
    if let Some(dir) = env_actors_dir {
        config.agents.dir = PathBuf::from(dir);
    }
    let agents_dir_from_file = file
        .table
        .get("agents")
        .and_then(Value::as_table)
        .is_some_and(|agents| agents.contains_key("dir"))
        && !origins.overrides("agents.dir")
        && env_actors_dir.is_none();
    // The built-in file's `dir` only says where to look; a missing directory is not an error then.
    let agents_dir_explicit = (agents_dir_from_file && file.source != ConfigSource::BuiltIn)
        || origins.overrides("agents.dir")
        || env_actors_dir.is_some();
    // Not set anywhere: `actors/` next to the config file (with no file: in the working
    // directory, where `config/` is looked for too).
    let agents_dir_default = !agents_dir_from_file && !agents_dir_explicit;
    let next_to_file = agents_dir_default && matches!(file.source, ConfigSource::File(_));
    let agents_dir_base = if agents_dir_from_file || next_to_file {
        &file.dir
    } else {
        cwd
    };
    config.agents.dir = resolve(agents_dir_base, &config.agents.dir);
    agents_dir_explicit
}

/// The agents of `[agents].dir` and that directory; with no directory there (and none set on
/// purpose), the built-in `assistant` agent and a warning.
fn load_agent_specs(
    config: &Config,
    origin: &str,
    agents_dir_explicit: bool,
    overlay: &super::edit::Overlay,
    warnings: &mut Vec<String>,
) -> Result<(Vec<agent::AgentSpec>, Option<PathBuf>), ConfigError> {
    // An edit being validated may create the folder with its first agent (an import into an
    // empty directory): the overlay's files count as the folder.
    if config.agents.dir.is_dir() || overlay.adds_files_in(&config.agents.dir) {
        let agents = agent::load_agents_with(&config.agents.dir, config, overlay)?;
        Ok((agents, Some(config.agents.dir.clone())))
    } else if agents_dir_explicit {
        Err(ConfigError::key(
            origin,
            "[agents].dir",
            format!("directory {} does not exist", config.agents.dir.display()),
        ))
    } else {
        let spec = agent::parse_agent(SHIPPED_AGENT, "built-in actors/assistant.toml", config)?;
        warnings.push(format!(
            "no agents directory at {}; using the built-in `assistant` agent",
            config.agents.dir.display()
        ));
        Ok((vec![spec], None))
    }
}

/// The secrets store of the data directory; an unreadable or broken file stops the load, named
/// with its line (never its text).
fn read_store(data_dir: &Path) -> Result<secrets_file::StoredSecrets, ConfigError> {
    secrets_file::read(data_dir).map_err(|error| match error {
        secrets_file::SecretsFileError::Malformed { path, message } => ConfigError::File {
            origin: path.display().to_string(),
            message,
        },
        other => ConfigError::File {
            origin: secrets_file::path(data_dir).display().to_string(),
            message: other.to_string(),
        },
    })
}

/// Every secret the config and the agents name: from `env` (a blank value is not set), else
/// from the secrets store; with where each came from.
fn read_secrets(
    config: &Config,
    agents: &[agent::AgentSpec],
    env: &BTreeMap<String, String>,
    stored: &BTreeMap<String, Secret>,
) -> (BTreeMap<String, Secret>, BTreeMap<String, SecretSource>) {
    let mut secrets = BTreeMap::new();
    let mut sources = BTreeMap::new();
    for var in super::secret_uses(config, agents).into_keys() {
        let from_env = env
            .get(&var)
            .map(|value| value.trim())
            .filter(|value| !value.is_empty());
        if let Some(value) = from_env {
            secrets.insert(var.clone(), Secret::new(value));
            sources.insert(var, SecretSource::Environment);
        } else if let Some(secret) = stored.get(&var) {
            secrets.insert(var.clone(), secret.clone());
            sources.insert(var, SecretSource::Store);
        }
    }
    (secrets, sources)
}

/// Studio off loopback needs its access token set, and a named `/metrics` token must be set.
fn check_studio_tokens(
    config: &Config,
    secrets: &BTreeMap<String, Secret>,
    origins: &Origins,
) -> Result<(), ConfigError> {
    if let Ok(bind) = config.studio.bind.parse::<std::net::SocketAddr>()
        && !bind.ip().is_loopback()
        && !secrets.contains_key(config.studio.token_env.as_str())
    {
        return Err(ConfigError::key(
            origins.of("studio.bind"),
            "[studio].token_env",
            format!(
                "Studio binds to {bind}, which is not loopback, so it needs an access token: set `{}` in the environment or the secrets store (Studio's Keys & tokens, reachable on 127.0.0.1), or bind to 127.0.0.1",
                config.studio.token_env
            ),
        ));
    }
    let metrics_token_env = config.studio.metrics_token_env.trim();
    if !metrics_token_env.is_empty() && !secrets.contains_key(metrics_token_env) {
        return Err(ConfigError::key(
            origins.of("studio.metrics_token_env"),
            "[studio].metrics_token_env",
            format!(
                "`/metrics` needs the token in the environment variable `{metrics_token_env}`, which is not set: set it, or remove the key"
            ),
        ));
    }
    Ok(())
}

/// What an operator should set next, logged at boot ("serve with no config says what to set").
fn next_steps(
    config: &Config,
    agents: &[agent::AgentSpec],
    source: &ConfigSource,
    secrets: &BTreeMap<String, Secret>,
) -> Vec<String> {
    let mut hints = Vec::new();
    let config_file = match source {
        ConfigSource::File(path) => path.display().to_string(),
        ConfigSource::BuiltIn => CONFIG_FILE.to_string(),
    };
    if *source == ConfigSource::BuiltIn {
        hints.push(format!(
            "no config file found: running on built-in defaults. `clawvisor init` writes a \
             {CONFIG_FILE} to adjust (every key is documented there) and an example agent"
        ));
    }
    for spec in agents {
        if let Some(provider) = config.providers.get(&spec.provider)
            && !provider.api_key_env.is_empty()
            && !secrets.contains_key(&provider.api_key_env)
        {
            hints.push(format!(
                "agent `{}` uses provider `{}`, which reads its API key from {} (not set): set it in \
                 Studio's Keys & tokens page (or the daemon's environment), or point the agent at a \
                 local model (see [providers] in {})",
                spec.name, spec.provider, provider.api_key_env, config_file
            ));
        }
        match &spec.telegram {
            None => hints.push(format!(
                "agent `{}` has no Telegram bot yet: connect one in Studio's Set up page (or add a \
                 [telegram] table with token_env = \"...\" to its file)",
                spec.name
            )),
            Some(telegram) if !secrets.contains_key(&telegram.token_env) => {
                hints.push(format!(
                    "agent `{}` reads its Telegram bot token from {} (not set): the bot stays off until \
                     it is set in Studio's Keys & tokens page (or the daemon's environment)",
                    spec.name, telegram.token_env
                ));
            }
            Some(_) => {}
        }
    }
    hints
}
