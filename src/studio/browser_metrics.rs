//! `/metrics` for the agents' browsers (issue #32): per agent that has one, whether Chromium is
//! open and how often it started, closed for idleness, crashed, and ran or failed an action.
//! An agent without the `browser` tool has no browser service and no samples.

use std::fmt::Write;

use crate::protocol::browser::{Browser, BrowserStatus};

/// A metric family: name, type, help and how a status gives its value.
type Family = (
    &'static str,
    &'static str,
    &'static str,
    fn(&BrowserStatus) -> u64,
);

/// The Prometheus families of every running browser.
pub async fn metrics(state: &super::StudioState) -> String {
    let mut statuses = Vec::new();
    for agent in state.agents.get().iter() {
        if let Ok(status) = Browser::new(&state.registry, &agent.name).status().await {
            statuses.push((agent.name.clone(), status));
        }
    }
    let mut text = String::new();
    let families: [Family; 6] = [
        (
            "clawvisor_browser_open",
            "gauge",
            "1 while the agent's Chromium runs",
            |s| u64::from(s.open),
        ),
        (
            "clawvisor_browser_starts_total",
            "counter",
            "Chromium starts",
            |s| s.starts,
        ),
        (
            "clawvisor_browser_idle_closes_total",
            "counter",
            "Chromium closed after [browser] idle_timeout",
            |s| s.idle_closes,
        ),
        (
            "clawvisor_browser_crashes_total",
            "counter",
            "Chromium exits nobody asked for",
            |s| s.crashes,
        ),
        (
            "clawvisor_browser_actions_total",
            "counter",
            "browser tool actions run",
            |s| s.actions,
        ),
        (
            "clawvisor_browser_action_failures_total",
            "counter",
            "browser tool actions that failed",
            |s| s.failures,
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (agent, status) in &statuses {
            let _ = writeln!(
                text,
                "{name}{{agent=\"{}\"}} {}",
                agent.replace(['"', '\\', '\n'], "_"),
                value(status)
            );
        }
    }
    text
}
