//! `current_time`: the date and time now, in UTC and in the run's time zone (the person's, see
//! `agent::zone`) or an IANA timezone the model names.
//!
//! Models do not know what time it is; scheduling and "remind me tomorrow" need it. Read-only and
//! harmless (L0).

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, RiskLevel};
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// `current_time`.
pub struct CurrentTimeTool;

const CURRENT_TIME_FIELDS: &[&str] = &["timezone"];

impl Tool for CurrentTimeTool {
    fn name(&self) -> &str {
        "current_time"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "current_time".to_string(),
            description: "The current date and time (ISO 8601, with the weekday) in UTC and in \
                          the conversation's time zone, or in an IANA timezone such as \
                          `Europe/Paris` if given."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "timezone": {
                        "type": "string",
                        "description": "IANA timezone name, e.g. `America/New_York` (optional; default: the conversation's zone)."
                    }
                },
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "reads the clock")
    }

    fn describe_call(&self, args: &Value) -> String {
        match timezone_argument(args) {
            Some(timezone) => format!("current_time: {timezone}"),
            None => "current_time".to_string(),
        }
    }

    fn target(&self, args: &Value) -> String {
        timezone_argument(args).unwrap_or("UTC").to_string()
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(5)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("current_time", &args, CURRENT_TIME_FIELDS)?;
            let timezone = match parsed.optional_str("timezone")? {
                Some(name) => Some(parse_timezone(name)?),
                None => (ctx.timezone != Tz::UTC).then_some(ctx.timezone),
            };
            Ok(ToolOutput::ok(describe_time(Utc::now(), timezone)))
        })
    }
}

fn timezone_argument(args: &Value) -> Option<&str> {
    Args::parse("current_time", args, CURRENT_TIME_FIELDS)
        .ok()
        .and_then(|parsed| parsed.optional_str("timezone").ok().flatten())
}

fn parse_timezone(name: &str) -> Result<Tz, ToolError> {
    crate::schedule::parse_timezone(name).map_err(|error| {
        ToolError::InvalidArguments(format!(
            "current_time: `timezone` is not an IANA timezone name: {error}"
        ))
    })
}

/// The text the tool returns for the instant `now`.
pub fn describe_time(now: DateTime<Utc>, timezone: Option<Tz>) -> String {
    let mut lines = vec![format!(
        "UTC: {} ({})",
        now.to_rfc3339_opts(SecondsFormat::Secs, true),
        now.format("%A")
    )];
    if let Some(timezone) = timezone {
        let local = timezone.from_utc_datetime(&now.naive_utc());
        lines.push(format!(
            "{}: {} ({}, {})",
            timezone.name(),
            local.to_rfc3339_opts(SecondsFormat::Secs, false),
            local.format("%A"),
            local.format("%Z")
        ));
    }
    lines.push(format!("Unix time: {}", now.timestamp()));
    lines.join("\n")
}
