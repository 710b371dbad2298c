//! Which time zone a run lives in, decided in one place: the person's own zone (chosen with
//! `/timezone` or in Studio, stored daemon-wide), else the agent file's `timezone`, else the
//! daemon's (`timezone` in the config, else the system's, else UTC). A scheduled job's run
//! lives in the job's stored zone. The run states its local time in the prompt and gives the
//! zone to its tools, so "remind me at 9" means 9 where the person is.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::AgentRuntime;
use crate::config::DaemonTimezone;
use crate::domain::{ChatKey, ChatKind};
use crate::events::EventBus;
use crate::schedule::format::zone_of;
use crate::store::{Store, StoreError, schedules, timezones};

/// Where a zone came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneSource {
    /// The person chose it (`/timezone`, Studio).
    Person,
    /// The agent file's `timezone`.
    Agent,
    /// The scheduled job's stored zone.
    Job,
    /// The daemon's zone; the text says where that came from.
    Daemon(String),
}

/// A zone and its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedZone {
    pub zone: Tz,
    pub source: ZoneSource,
}

impl ResolvedZone {
    /// "your setting", "the agent's default", "the daemon's default: the system's zone (...)".
    pub fn describe_source(&self) -> String {
        match &self.source {
            ZoneSource::Person => "your setting".to_string(),
            ZoneSource::Agent => "the agent's default".to_string(),
            ZoneSource::Job => "the task's zone".to_string(),
            ZoneSource::Daemon(origin) => format!("the daemon's default: {origin}"),
        }
    }
}

/// The rule itself: the person's zone, else the agent's, else the daemon's. Stored names were
/// validated when written; one a newer tz database no longer knows is skipped.
pub fn resolve(person: Option<&str>, agent: Option<&str>, daemon: &DaemonTimezone) -> ResolvedZone {
    let known =
        |name: Option<&str>| name.and_then(|name| crate::schedule::parse_timezone(name).ok());
    if let Some(zone) = known(person) {
        return ResolvedZone {
            zone,
            source: ZoneSource::Person,
        };
    }
    if let Some(zone) = known(agent) {
        return ResolvedZone {
            zone,
            source: ZoneSource::Agent,
        };
    }
    ResolvedZone {
        zone: daemon.zone,
        source: ZoneSource::Daemon(daemon.origin.clone()),
    }
}

/// The zone of a run in `chat` (session `session_id`): a Telegram conversation's last speaker's
/// zone, a scheduled job's own zone, else the agent's, else the daemon's. A database problem
/// is logged and the defaults apply: the time is context, not worth failing a run over.
pub async fn zone_for_run(runtime: &AgentRuntime, session_id: i64, chat: &ChatKey) -> ResolvedZone {
    let agent = runtime.spec.timezone.as_deref();
    let fallback = || resolve(None, agent, &runtime.daemon_timezone);
    let looked_up = match chat.kind() {
        ChatKind::WhatsApp | ChatKind::Signal => Ok(fallback()),
        ChatKind::Telegram => runtime
            .store
            .read(move |conn| timezones::latest_speaker_timezone(conn, session_id))
            .await
            .map(|person| resolve(person.as_deref(), agent, &runtime.daemon_timezone)),
        ChatKind::Schedule => match chat.id().parse::<i64>() {
            Ok(job_id) => runtime
                .store
                .read(move |conn| schedules::job(conn, job_id))
                .await
                .map(
                    |job| match job.filter(|job| !job.timezone.trim().is_empty()) {
                        Some(job) => ResolvedZone {
                            zone: zone_of(&job.timezone),
                            source: ZoneSource::Job,
                        },
                        None => fallback(),
                    },
                ),
            Err(_) => Ok(fallback()),
        },
        ChatKind::Local | ChatKind::Handoff | ChatKind::Trigger => Ok(fallback()),
    };
    looked_up.unwrap_or_else(|error| {
        tracing::warn!(agent = %runtime.spec.name, %chat, %error, "could not read the conversation's time zone");
        fallback()
    })
}

/// "Thursday 2026-11-26 11:20 (Europe/Berlin, UTC+01:00)"; in UTC "… (UTC)".
pub fn local_time_text(now: DateTime<Utc>, zone: Tz) -> String {
    let local = now.with_timezone(&zone);
    let offset = local.format("%:z").to_string();
    if zone == Tz::UTC || zone == Tz::Etc__UTC {
        return format!("{} (UTC)", local.format("%A %Y-%m-%d %H:%M"));
    }
    format!(
        "{} ({}, UTC{})",
        local.format("%A %Y-%m-%d %H:%M"),
        zone.name(),
        offset
    )
}

/// Stores (`Some`) or forgets (`None`) Telegram user `user_id`'s zone, with its audit row in the
/// same transaction, and announces the audit row once committed. `actor` is who changed it
/// (`telegram:<id>`, `operator`).
pub async fn set_user_zone(
    store: &Store,
    events: &EventBus,
    user_id: i64,
    zone: Option<Tz>,
    actor: &str,
) -> Result<(), StoreError> {
    let action = if zone.is_some() {
        "user.timezone_set"
    } else {
        "user.timezone_cleared"
    };
    let subject = format!("telegram:{user_id}");
    let (audited_actor, audited_subject) = (actor.to_string(), subject.clone());
    let name = zone.map(|zone| zone.name().to_string());
    let now = crate::clock::now_ms();
    store
        .write(move |conn| {
            let before = timezones::user_timezone(conn, user_id)?;
            match &name {
                Some(name) => {
                    timezones::set_user_timezone(conn, user_id, name, &audited_actor, now)?
                }
                None => {
                    timezones::clear_user_timezone(conn, user_id)?;
                }
            }
            crate::audit::append(
                conn,
                &audited_actor,
                action,
                &audited_subject,
                &serde_json::json!({"from": before, "to": name}),
            )?;
            Ok(())
        })
        .await?;
    crate::audit::announce(events, action, &subject);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_person_wins_over_the_agent_and_the_agent_over_the_daemon() {
        let daemon = DaemonTimezone {
            zone: Tz::Asia__Tokyo,
            origin: "timezone in c.toml".into(),
        };
        let both = resolve(Some("Europe/Berlin"), Some("America/New_York"), &daemon);
        assert_eq!(
            (both.zone, both.source),
            (Tz::Europe__Berlin, ZoneSource::Person)
        );
        let agent = resolve(None, Some("America/New_York"), &daemon);
        assert_eq!(agent.zone, Tz::America__New_York);
        assert_eq!(agent.describe_source(), "the agent's default");
        let stale = resolve(Some("Gone/Zone"), None, &daemon);
        assert_eq!(stale.zone, Tz::Asia__Tokyo);
        assert_eq!(
            stale.describe_source(),
            "the daemon's default: timezone in c.toml"
        );
    }

    #[test]
    fn local_time_names_the_zone_and_its_offset() {
        let winter = "2026-11-26T10:20:00Z".parse().unwrap();
        assert_eq!(
            local_time_text(winter, Tz::Europe__Berlin),
            "Thursday 2026-11-26 11:20 (Europe/Berlin, UTC+01:00)"
        );
        let summer = "2027-07-15T10:20:00Z".parse().unwrap();
        assert_eq!(
            local_time_text(summer, Tz::Europe__Berlin),
            "Thursday 2027-07-15 12:20 (Europe/Berlin, UTC+02:00)"
        );
        assert_eq!(
            local_time_text(winter, Tz::UTC),
            "Thursday 2026-11-26 10:20 (UTC)"
        );
    }
}
