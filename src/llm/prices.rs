//! What a model call costs: the operator's `[pricing]` over the built-in price table
//! (`config/prices.toml`, embedded), and providers marked `free = true`.
//!
//! Without a price every call used to cost $0, so `daily_budget_usd` silently never tripped for
//! most models. Now a model is either priced (from `[pricing]` or the built-in table), free (its
//! provider says `free = true`, or it is an OpenRouter `:free` variant), or *unpriced*: its calls
//! are still recorded with their tokens (which count against `daily_token_budget`) at $0, marked
//! unpriced (`cost_events.unpriced`, `runs.unpriced`), and reported once at boot, by `doctor` and
//! on Studio's Costs page.
//!
//! The matching rule (documented in `config/prices.toml` too), first match wins, `[pricing]`
//! searched with the whole rule before the built-in table:
//! 1. the model name exactly as the agent file writes it;
//! 2. without a `:tag` (`llama3.1:8b`, `…:nitro`), and without a date or version suffix
//!    (`-2025-04-14`, `-20250929`, `-0125`, `-001`, `-latest`);
//! 3. for `vendor/model` ids, the part after the last slash, with and without such a suffix.
//!
//! There is no prefix matching: `gpt-4o` and `gpt-4o-mini` differ tenfold.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use serde::Deserialize;

use super::Usage;
use crate::config::{AgentSpec, Config, PriceConfig};

/// The built-in price table as shipped.
pub const BUILT_IN_PRICES: &str = include_str!("../../config/prices.toml");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    models: BTreeMap<String, PriceConfig>,
}

fn parse_price_file(text: &str) -> Result<BTreeMap<String, PriceConfig>, toml::de::Error> {
    toml::from_str::<PriceFile>(text).map(|file| file.models)
}

/// The built-in table, parsed once. The file is embedded and checked by this module's tests;
/// should it still fail to parse, every model not in `[pricing]` is reported unpriced (loudly),
/// never guessed.
static BUILT_IN: LazyLock<BTreeMap<String, PriceConfig>> = LazyLock::new(
    || match parse_price_file(BUILT_IN_PRICES) {
        Ok(table) => table,
        Err(error) => {
            tracing::error!(%error, "the built-in price table does not parse; only [pricing] prices apply");
            BTreeMap::new()
        }
    },
);

/// The built-in table (for `doctor` and tests).
pub fn built_in_table() -> &'static BTreeMap<String, PriceConfig> {
    &BUILT_IN
}

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    /// `[pricing."model"]` in clawvisor.toml.
    Config,
    /// `config/prices.toml`, built into the binary.
    BuiltIn,
}

impl PriceSource {
    pub fn as_str(self) -> &'static str {
        match self {
            PriceSource::Config => "[pricing]",
            PriceSource::BuiltIn => "built-in table",
        }
    }
}

/// What a model costs.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelPrice {
    /// Found under `key` (which the matching rule may have shortened).
    Priced {
        price: PriceConfig,
        key: String,
        source: PriceSource,
    },
    /// A `free = true` provider, or an OpenRouter `:free` variant.
    Free,
    /// Not free and no price found: calls are recorded at $0 and marked unpriced.
    Unpriced,
}

/// One call's cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallCost {
    pub usd: f64,
    /// No price was known: `usd` is 0 and the bill is incomplete.
    pub unpriced: bool,
}

/// Dollars for `usage` at `price`.
pub fn cost_at(price: &PriceConfig, usage: &Usage) -> f64 {
    (usage.input_tokens as f64 * price.input_per_mtok
        + usage.output_tokens as f64 * price.output_per_mtok)
        / 1_000_000.0
}

/// The price tables and the free providers of one daemon. Immutable; shared by every run.
#[derive(Debug, Clone)]
pub struct Prices {
    operator: BTreeMap<String, PriceConfig>,
    built_in: BTreeMap<String, PriceConfig>,
    free_providers: BTreeSet<String>,
}

impl Prices {
    /// `[pricing]` over the built-in table; providers with `free = true`.
    pub fn from_config(config: &Config) -> Prices {
        Prices::new(
            config.pricing.clone(),
            config
                .providers
                .iter()
                .filter(|(_, provider)| provider.free)
                .map(|(name, _)| name.clone()),
        )
    }

    pub fn new(
        operator: BTreeMap<String, PriceConfig>,
        free_providers: impl IntoIterator<Item = String>,
    ) -> Prices {
        Prices::with_built_in(BUILT_IN.clone(), operator, free_providers)
    }

    /// With another built-in table (tests).
    pub fn with_built_in(
        built_in: BTreeMap<String, PriceConfig>,
        operator: BTreeMap<String, PriceConfig>,
        free_providers: impl IntoIterator<Item = String>,
    ) -> Prices {
        Prices {
            operator,
            built_in,
            free_providers: free_providers.into_iter().collect(),
        }
    }

    pub fn is_free_provider(&self, provider: &str) -> bool {
        self.free_providers.contains(provider)
    }

    /// What `model` served by `provider` costs, by the module's matching rule.
    pub fn price(&self, provider: &str, model: &str) -> ModelPrice {
        if self.is_free_provider(provider) {
            return ModelPrice::Free;
        }
        let names = candidate_names(model);
        let found = |table: &BTreeMap<String, PriceConfig>, source| {
            names.iter().find_map(|name| {
                table.get(name).map(|price| ModelPrice::Priced {
                    price: price.clone(),
                    key: name.clone(),
                    source,
                })
            })
        };
        // An operator's price for the exact `:free` id wins; otherwise the variant is free.
        if let Some(price) = self.operator.get(model) {
            return ModelPrice::Priced {
                price: price.clone(),
                key: model.to_string(),
                source: PriceSource::Config,
            };
        }
        if split_tag(model).1 == Some("free") {
            return ModelPrice::Free;
        }
        found(&self.operator, PriceSource::Config)
            .or_else(|| found(&self.built_in, PriceSource::BuiltIn))
            .unwrap_or(ModelPrice::Unpriced)
    }

    /// One call's cost.
    pub fn cost(&self, provider: &str, model: &str, usage: &Usage) -> CallCost {
        match self.price(provider, model) {
            ModelPrice::Priced { price, .. } => CallCost {
                usd: cost_at(&price, usage),
                unpriced: false,
            },
            ModelPrice::Free => CallCost {
                usd: 0.0,
                unpriced: false,
            },
            ModelPrice::Unpriced => CallCost {
                usd: 0.0,
                unpriced: true,
            },
        }
    }
}

/// `(name, tag)` for `name:tag`; the tag is looked for after the last slash only.
fn split_tag(model: &str) -> (&str, Option<&str>) {
    let slash = model.rfind('/').map_or(0, |index| index + 1);
    match model[slash..].find(':') {
        Some(colon) => (&model[..slash + colon], Some(&model[slash + colon + 1..])),
        None => (model, None),
    }
}

/// `name` without one trailing date or version suffix, if it has one.
fn without_version_suffix(name: &str) -> Option<&str> {
    if let Some(rest) = name.strip_suffix("-latest") {
        return (!rest.is_empty()).then_some(rest);
    }
    let bytes = name.as_bytes();
    // `-YYYY-MM-DD`: every byte of the tail is ASCII, so the cut is on a character boundary.
    if bytes.len() > 11 {
        let tail = &bytes[bytes.len() - 11..];
        let is_date = tail.iter().enumerate().all(|(index, byte)| match index {
            0 | 5 | 8 => *byte == b'-',
            _ => byte.is_ascii_digit(),
        });
        if is_date {
            return Some(&name[..name.len() - 11]);
        }
    }
    // `-20250929`, `-0125` (OpenAI's month and day), `-001` (Gemini's versions).
    let (head, last) = name.rsplit_once('-')?;
    let digits = last.bytes().all(|byte| byte.is_ascii_digit());
    (digits && matches!(last.len(), 3 | 4 | 8) && !head.is_empty()).then_some(head)
}

/// The names a model is looked up under, in order (the module's matching rule).
pub fn candidate_names(model: &str) -> Vec<String> {
    let mut names: Vec<String> = vec![model.to_string()];
    let push_with_suffixes_removed = |start: &str, names: &mut Vec<String>| {
        let mut current = start;
        names.push(current.to_string());
        while let Some(shorter) = without_version_suffix(current) {
            names.push(shorter.to_string());
            current = shorter;
        }
    };
    let (base, _) = split_tag(model);
    push_with_suffixes_removed(base, &mut names);
    if let Some((_, short)) = base.rsplit_once('/')
        && !short.is_empty()
    {
        push_with_suffixes_removed(short, &mut names);
    }
    let mut seen = BTreeSet::new();
    names.retain(|name| seen.insert(name.clone()));
    names
}

/// A model some agent's chain uses that has no price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpricedModel {
    pub provider: String,
    pub model: String,
    /// The agents whose chain (model or fallback) names it.
    pub agents: Vec<String>,
}

impl UnpricedModel {
    /// What the operator can do about it.
    pub fn how_to_fix(&self) -> String {
        format!(
            "add [pricing.\"{}\"] with input_per_mtok and output_per_mtok (US dollars per million tokens) to clawvisor.toml, \
             or set free = true on [providers.{}] if it costs nothing",
            self.model, self.provider
        )
    }

    /// The one line said at boot and by `doctor`.
    pub fn describe(&self) -> String {
        format!(
            "model `{}` of provider `{}` (agent {}) has no price: its calls are recorded with their tokens at $0 \
             and daily_budget_usd cannot count them (daily_token_budget does); {}",
            self.model,
            self.provider,
            self.agents
                .iter()
                .map(|agent| format!("`{agent}`"))
                .collect::<Vec<_>>()
                .join(", "),
            self.how_to_fix()
        )
    }
}

/// Every unpriced model in some agent's chain (the agent file's model, then its fallbacks), once
/// each, with the agents using it.
pub fn unpriced_in_use(prices: &Prices, agents: &[AgentSpec]) -> Vec<UnpricedModel> {
    let mut found: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for spec in agents {
        let chain = std::iter::once((&spec.provider, &spec.model)).chain(
            spec.fallback
                .iter()
                .map(|fallback| (&fallback.provider, &fallback.model)),
        );
        for (provider, model) in chain {
            if prices.price(provider, model) == ModelPrice::Unpriced {
                let agents = found.entry((provider.clone(), model.clone())).or_default();
                if !agents.contains(&spec.name) {
                    agents.push(spec.name.clone());
                }
            }
        }
    }
    found
        .into_iter()
        .map(|((provider, model), agents)| UnpricedModel {
            provider,
            model,
            agents,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(input: f64, output: f64) -> PriceConfig {
        PriceConfig {
            input_per_mtok: input,
            output_per_mtok: output,
        }
    }

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
        }
    }

    #[test]
    fn the_shipped_table_parses_and_prices_the_common_models() {
        let table = parse_price_file(BUILT_IN_PRICES).expect("config/prices.toml parses");
        assert_eq!(table.len(), built_in_table().len());
        for model in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4.1",
            "gpt-4.1-mini",
            "gpt-4.1-nano",
            "o3-mini",
            "o4-mini",
            "claude-sonnet-4-5",
            "claude-haiku-4-5",
            "claude-opus-4-1",
            "gemini-2.5-flash",
            "gemini-2.5-pro",
            "gemini-2.0-flash",
        ] {
            let price = table
                .get(model)
                .unwrap_or_else(|| panic!("{model} is priced"));
            assert!(
                price.input_per_mtok > 0.0 && price.output_per_mtok >= price.input_per_mtok,
                "{model}: {price:?}"
            );
        }
        for (model, price) in &table {
            assert!(
                price.input_per_mtok.is_finite()
                    && price.output_per_mtok.is_finite()
                    && price.input_per_mtok < 1_000.0
                    && price.output_per_mtok < 1_000.0,
                "{model}: {price:?}"
            );
        }
    }

    #[test]
    fn dated_latest_and_version_suffixes_are_stripped() {
        let prices = Prices::new(BTreeMap::new(), []);
        let expect = |model: &str, key: &str| match prices.price("p", model) {
            ModelPrice::Priced {
                key: found, source, ..
            } => {
                assert_eq!(found, key, "{model}");
                assert_eq!(source, PriceSource::BuiltIn);
            }
            other => panic!("{model}: {other:?}"),
        };
        expect("gpt-4.1-2025-04-14", "gpt-4.1");
        expect("gpt-4o-2024-08-06", "gpt-4o");
        expect("claude-sonnet-4-5-20250929", "claude-sonnet-4-5");
        expect("claude-3-5-haiku-latest", "claude-3-5-haiku");
        expect("gemini-2.0-flash-001", "gemini-2.0-flash");
        expect("gpt-3.5-turbo-0125", "gpt-3.5-turbo");
        expect("openai/gpt-4o-mini", "gpt-4o-mini");
        expect("google/gemini-2.5-flash", "gemini-2.5-flash");
        expect("anthropic/claude-sonnet-4.5", "anthropic/claude-sonnet-4.5");
        expect("models/gemini-2.5-pro", "gemini-2.5-pro");
        expect("openai/gpt-4.1-mini-2025-04-14", "gpt-4.1-mini");
        // No prefix matching, and a one-digit tail is part of the name.
        assert_eq!(prices.price("p", "gpt-4o-mini-tts"), ModelPrice::Unpriced);
        assert_eq!(prices.price("p", "claude-opus-4-9"), ModelPrice::Unpriced);
        assert_eq!(prices.price("p", "llama3.1:8b"), ModelPrice::Unpriced);
    }

    #[test]
    fn the_operators_pricing_overrides_the_built_in_table() {
        let mut operator = BTreeMap::new();
        operator.insert("gpt-4o".to_string(), price(1.0, 2.0));
        operator.insert("house-model".to_string(), price(0.5, 0.5));
        let prices = Prices::new(operator, []);
        let cost = prices.cost("openai", "gpt-4o-2024-08-06", &usage(1_000_000, 1_000_000));
        assert_eq!(
            cost,
            CallCost {
                usd: 3.0,
                unpriced: false
            }
        );
        assert!(matches!(
            prices.price("openai", "house-model"),
            ModelPrice::Priced {
                source: PriceSource::Config,
                ..
            }
        ));
        // Built-in entries the operator did not touch stay.
        let mini = prices.cost("openai", "gpt-4o-mini", &usage(1_000_000, 0));
        assert!((mini.usd - 0.15).abs() < 1e-12, "{mini:?}");
    }

    #[test]
    fn free_providers_and_free_variants_cost_nothing_and_are_not_unpriced() {
        let prices = Prices::new(BTreeMap::new(), ["ollama".to_string()]);
        assert_eq!(prices.price("ollama", "llama3.1:8b"), ModelPrice::Free);
        assert_eq!(prices.price("ollama", "gpt-4o"), ModelPrice::Free);
        assert_eq!(
            prices.cost("ollama", "whatever", &usage(10, 10)),
            CallCost {
                usd: 0.0,
                unpriced: false
            }
        );
        assert_eq!(
            prices.price("openrouter", "meta-llama/llama-3.3-70b-instruct:free"),
            ModelPrice::Free
        );
        // Any other tag is ignored for the lookup.
        assert!(matches!(
            prices.price("openrouter", "openai/gpt-4o:nitro"),
            ModelPrice::Priced { .. }
        ));
        assert_eq!(
            prices.cost("openai", "mystery-model", &usage(10, 10)),
            CallCost {
                usd: 0.0,
                unpriced: true
            }
        );
    }

    #[test]
    fn candidate_names_follow_the_documented_order() {
        assert_eq!(
            candidate_names("vendor/model-x-2025-01-02:nitro"),
            [
                "vendor/model-x-2025-01-02:nitro",
                "vendor/model-x-2025-01-02",
                "vendor/model-x",
                "model-x-2025-01-02",
                "model-x",
            ]
        );
        assert_eq!(candidate_names("gpt-4o"), ["gpt-4o"]);
        assert_eq!(candidate_names("-latest"), ["-latest"]);
        assert_eq!(candidate_names("/"), ["/"]);
        assert_eq!(candidate_names("é-2025-01-02"), ["é-2025-01-02", "é"]);
    }

    #[test]
    fn unpriced_models_in_use_are_listed_once_with_their_agents() {
        let config = crate::config::parse_file(
            "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             [providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nfree = true\n",
            "test",
        )
        .expect("a valid config");
        let agent = |name: &str, model: &str, fallback: &str| {
            let text = format!(
                "name = \"{name}\"\nprovider = \"p\"\nmodel = \"{model}\"\ninstructions = \"x\"\nfallback = [{{ provider = \"local\", model = \"{fallback}\" }}]\n"
            );
            crate::config::parse_agent(&text, "test", &config).expect("a valid agent file")
        };
        let agents = [
            agent("ada", "mystery-1", "llama3"),
            agent("bo", "mystery-1", "gpt-4o"),
            agent("cy", "gpt-4o-mini", "mystery-2"),
        ];
        let prices = Prices::from_config(&config);
        let unpriced = unpriced_in_use(&prices, &agents);
        assert_eq!(
            unpriced,
            [UnpricedModel {
                provider: "p".into(),
                model: "mystery-1".into(),
                agents: vec!["ada".into(), "bo".into()],
            },]
        );
        let line = unpriced[0].describe();
        assert!(
            line.contains("[pricing.\"mystery-1\"]")
                && line.contains("free = true on [providers.p]"),
            "{line}"
        );
    }
}
