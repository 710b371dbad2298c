//! Spending: `/api/v1/costs` — dollars and tokens by day, agent and model, each agent's daily
//! budgets (used today against the limit), and the models without a price ("unpriced": their
//! calls count $0, so the dollar figures are incomplete, but their tokens are shown and count
//! against `daily_token_budget`).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Query, State};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{
    array, boolean, described, extend, integer, nullable, number, object, string,
};
use super::{ApiError, StudioState};
use crate::config::AgentSpec;
use crate::llm::prices::{Prices, UnpricedModel, unpriced_in_use};
use crate::store::studio::{self as queries, CostGroup, CostLine};

/// One agent's daily limits (0: none).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentBudget {
    pub agent: String,
    pub daily_budget_usd: f64,
    pub daily_token_budget: u64,
}

/// What the Costs page knows from the config: budgets and the unpriced models in use.
#[derive(Debug, Clone, Default)]
pub struct Bill {
    pub budgets: Vec<AgentBudget>,
    /// Models some agent's chain names that have no price.
    pub unpriced: Vec<UnpricedModel>,
}

impl Bill {
    pub fn new(prices: &Prices, agents: &[AgentSpec]) -> Bill {
        Bill {
            budgets: agents
                .iter()
                .map(|spec| AgentBudget {
                    agent: spec.name.clone(),
                    daily_budget_usd: spec.daily_budget_usd,
                    daily_token_budget: spec.daily_token_budget,
                })
                .collect(),
            unpriced: unpriced_in_use(prices, agents),
        }
    }
}

/// Which period `GET /api/v1/costs` sums.
#[derive(Deserialize, JsonSchema)]
pub struct CostsQuery {
    /// How many days back, today included (default 30, at most 366).
    days: Option<u32>,
}

fn line_json(line: &CostLine, key: &str) -> Value {
    json!({
        key: line.key, "cost_usd": line.cost_usd,
        "input_tokens": line.input_tokens, "output_tokens": line.output_tokens,
        "unpriced_tokens": line.unpriced_tokens,
    })
}

/// A spending line keyed by `key` (see [`line_json`]).
fn line_schema(key: &'static str) -> Value {
    object([
        (key, string()),
        ("cost_usd", number()),
        ("input_tokens", integer()),
        ("output_tokens", integer()),
        (
            "unpriced_tokens",
            described("tokens of calls on models without a price", integer()),
        ),
    ])
}

/// `GET /api/v1/costs?days=30`: spending by day, by agent and by model, budgets, unpriced models.
pub async fn costs(
    State(state): State<StudioState>,
    Query(query): Query<CostsQuery>,
) -> Result<Json<Value>, ApiError> {
    let days = query.days.unwrap_or(30).clamp(1, 366);
    let now = crate::clock::now_ms();
    let since = crate::store::runs::day_of(now - i64::from(days - 1) * 86_400_000);
    let today = crate::store::runs::day_of(now);
    let today_key = today.clone();
    let (by_day, by_agent, by_model, today_by_agent) = state
        .store
        .read(move |conn| {
            Ok((
                queries::costs(conn, &since, CostGroup::Day)?,
                queries::costs(conn, &since, CostGroup::Agent)?,
                queries::costs(conn, &since, CostGroup::Model)?,
                queries::costs(conn, &today_key, CostGroup::Agent)?,
            ))
        })
        .await?;
    let tokens = |line: &CostLine| line.input_tokens + line.output_tokens;
    let today_line = by_day.iter().find(|line| line.key == today);
    let budgets: Vec<Value> = state
        .bill
        .get()
        .budgets
        .iter()
        .map(|budget| {
            let used = today_by_agent.iter().find(|line| line.key == budget.agent);
            json!({
                "agent": budget.agent,
                "usd": {
                    "used_today": used.map_or(0.0, |line| line.cost_usd),
                    "limit": (budget.daily_budget_usd > 0.0).then_some(budget.daily_budget_usd),
                },
                "tokens": {
                    "used_today": used.map_or(0, tokens),
                    "limit": (budget.daily_token_budget > 0).then_some(budget.daily_token_budget),
                },
                "unpriced_tokens_today": used.map_or(0, |line| line.unpriced_tokens),
            })
        })
        .collect();
    // Unpriced: the models in use without a price, and any model whose recorded calls in the
    // period had none (an older config, or a model chosen in Studio).
    let mut unpriced: BTreeMap<(String, String), Value> = BTreeMap::new();
    for model in &state.bill.get().unpriced {
        unpriced.insert(
            (model.provider.clone(), model.model.clone()),
            json!({
                "provider": model.provider, "model": model.model, "agents": model.agents,
                "in_use": true, "input_tokens": 0, "output_tokens": 0, "unpriced_tokens": 0,
                "fix": model.how_to_fix(),
            }),
        );
    }
    for line in by_model.iter().filter(|line| line.unpriced_tokens > 0) {
        let (provider, model) = line.key.split_once('/').unwrap_or(("", line.key.as_str()));
        let entry = unpriced
            .entry((provider.to_string(), model.to_string()))
            .or_insert_with(|| {
                let fix = UnpricedModel {
                    provider: provider.to_string(),
                    model: model.to_string(),
                    agents: Vec::new(),
                }
                .how_to_fix();
                json!({
                    "provider": provider, "model": model, "agents": [], "in_use": false,
                    "fix": fix,
                })
            });
        entry["input_tokens"] = json!(line.input_tokens);
        entry["output_tokens"] = json!(line.output_tokens);
        entry["unpriced_tokens"] = json!(line.unpriced_tokens);
    }
    Ok(Json(json!({
        "days": days,
        "today": today,
        "resets_at_ms": crate::store::runs::next_day_start_ms(now),
        "today_usd": today_line.map_or(0.0, |line| line.cost_usd),
        "total_usd": by_day.iter().map(|line| line.cost_usd).sum::<f64>(),
        "today_tokens": today_line.map_or(0, tokens),
        "total_tokens": by_day.iter().map(tokens).sum::<i64>(),
        "unpriced_tokens": by_day.iter().map(|line| line.unpriced_tokens).sum::<i64>(),
        "by_day": by_day.iter().map(|line| line_json(line, "day")).collect::<Vec<_>>(),
        "by_agent": by_agent.iter().map(|line| line_json(line, "agent")).collect::<Vec<_>>(),
        "by_model": by_model.iter().map(|line| {
            let mut value = line_json(line, "model");
            if let Some((provider, model)) = line.key.split_once('/') {
                value["provider"] = json!(provider);
                value["model"] = json!(model);
            }
            value["unpriced"] = json!(line.unpriced_tokens > 0);
            value
        }).collect::<Vec<_>>(),
        "budgets": budgets,
        "unpriced": unpriced.into_values().collect::<Vec<_>>(),
    })))
}

/// What `GET /api/v1/costs` answers.
pub fn costs_schema() -> Value {
    let limit = |unit: Value| object([("used_today", unit.clone()), ("limit", nullable(unit))]);
    let budget = object([
        ("agent", string()),
        ("usd", limit(number())),
        ("tokens", limit(integer())),
        ("unpriced_tokens_today", integer()),
    ]);
    let unpriced = object([
        ("provider", string()),
        ("model", string()),
        ("agents", array(string())),
        ("in_use", boolean()),
        ("input_tokens", integer()),
        ("output_tokens", integer()),
        ("unpriced_tokens", integer()),
        ("fix", described("how to give it a price", string())),
    ]);
    let by_model = extend(
        line_schema("model"),
        [("provider?", string()), ("unpriced", boolean())],
    );
    object([
        ("days", integer()),
        (
            "today",
            described("today's date (UTC), like 2027-01-15", string()),
        ),
        (
            "resets_at_ms",
            described("when today's budgets start again", integer()),
        ),
        ("today_usd", number()),
        ("total_usd", number()),
        ("today_tokens", integer()),
        ("total_tokens", integer()),
        ("unpriced_tokens", integer()),
        ("by_day", array(line_schema("day"))),
        ("by_agent", array(line_schema("agent"))),
        ("by_model", array(by_model)),
        ("budgets", array(budget)),
        (
            "unpriced",
            described(
                "models whose spending is not counted in dollars",
                array(unpriced),
            ),
        ),
    ])
}
