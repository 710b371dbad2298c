//! Placeholders in a scenario's texts: `{{now}}`, `{{now+5s}}`, `{{mcp_test_server}}` and, with
//! `test_site = true`, `{{test_site}}` (the local test site's `http://127.0.0.1:<port>`).

use crate::config::Dur;
use crate::testkit::scripted_llm::Script;

use super::scenario::Scenario;

/// What the placeholders stand for in one scenario's run.
#[derive(Debug, Clone)]
pub(super) struct Values {
    pub(super) now: chrono::DateTime<chrono::Utc>,
    /// The test site's base URL, when the scenario serves it.
    pub(super) test_site: Option<String>,
}

impl Values {
    #[cfg(test)]
    fn at(now: chrono::DateTime<chrono::Utc>) -> Values {
        Values {
            now,
            test_site: None,
        }
    }
}

/// Replaces every `{{...}}` placeholder of `text`.
fn expand(text: &str, values: &Values) -> Result<String, String> {
    let mut expanded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        expanded.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("a `{{{{` without its `}}}}` in {text:?}"))?;
        expanded.push_str(&placeholder(after[..end].trim(), values)?);
        rest = &after[end + 2..];
    }
    expanded.push_str(rest);
    Ok(expanded)
}

fn placeholder(name: &str, values: &Values) -> Result<String, String> {
    let now = values.now;
    if name == "mcp_test_server" {
        return mcp_test_server();
    }
    if name == "test_site" {
        return values
            .test_site
            .clone()
            .ok_or_else(|| "`{{test_site}}` needs `test_site = true` in the scenario".to_string());
    }
    if let Some(offset) = name.strip_prefix("now") {
        let offset = offset.trim();
        let delta = match offset.strip_prefix('+') {
            None if offset.is_empty() => chrono::TimeDelta::zero(),
            Some(duration) => Dur::parse(duration)
                .ok()
                .and_then(|duration| chrono::TimeDelta::from_std(duration.0).ok())
                .ok_or_else(|| format!("`{{{{{name}}}}}`: `{duration}` is not a duration"))?,
            None => return Err(format!("`{{{{{name}}}}}`: write `now` or `now+30s`")),
        };
        return Ok((now + delta).to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    }
    Err(format!(
        "unknown placeholder `{{{{{name}}}}}` (known: now, now+<duration>, mcp_test_server, test_site)"
    ))
}

/// The repository's MCP test server, built beside this binary (`target/<profile>/`); a test
/// binary lives one level lower (`deps/`).
fn mcp_test_server() -> Result<String, String> {
    let exe =
        std::env::current_exe().map_err(|error| format!("`{{{{mcp_test_server}}}}`: {error}"))?;
    let name = format!("clawvisor-mcp-test-server{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(&name))
        .find(|candidate| candidate.is_file())
        .map(|found| found.display().to_string())
        .ok_or_else(|| {
            format!(
                "`{{{{mcp_test_server}}}}`: no {name} beside {} (build it: cargo build --bins)",
                exe.display()
            )
        })
}

/// The scenario with its placeholders expanded (at `values.now`).
pub(super) fn expanded(scenario: &Scenario, values: &Values) -> Result<Scenario, String> {
    let mut copy = scenario.clone();
    copy.agent = expand(&copy.agent, values)?;
    copy.config = expand(&copy.config, values)?;
    for agent in &mut copy.agents {
        agent.file = expand(&agent.file, values)?;
    }
    for contents in copy.files.values_mut() {
        *contents = expand(contents, values)?;
    }
    // A turn's text keeps its own placeholders (`{{claim_code}}` is known only mid-scenario):
    // only the test site's address is filled in.
    if let Some(site) = &values.test_site {
        for turn in &mut copy.turns {
            if let Some(user) = &turn.user {
                turn.user = Some(user.replace("{{test_site}}", site));
            }
        }
    }
    copy.script = expanded_script(&scenario.script, values)?;
    Ok(copy)
}

/// The script's texts and tool-call arguments with their placeholders expanded.
pub(super) fn expanded_script(script: &Script, values: &Values) -> Result<Script, String> {
    let mut copy = script.clone();
    for rule in &mut copy.rules {
        if let Some(text) = &rule.text {
            rule.text = Some(expand(text, values)?);
        }
        for call in &mut rule.tool_calls {
            call.arguments = expand(&call.arguments, values)?;
        }
    }
    Ok(copy)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_expand_or_are_refused() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let now = &Values::at(now);
        assert_eq!(
            expand(r#"{"at": "{{now+90s}}", "b": {}}"#, now).unwrap(),
            r#"{"at": "2026-01-01T00:01:30Z", "b": {}}"#
        );
        assert_eq!(expand("{{ now }}", now).unwrap(), "2026-01-01T00:00:00Z");
        assert!(expand("{{later}}", now).unwrap_err().contains("unknown"));
        assert!(expand("{{now+soon}}", now).is_err());
        assert!(expand("{{now", now).is_err());
        assert!(
            expand("{{test_site}}", now)
                .unwrap_err()
                .contains("test_site = true")
        );
        let site = Values {
            test_site: Some("http://127.0.0.1:8080".into()),
            ..now.clone()
        };
        assert_eq!(
            expand("{{test_site}}/js", &site).unwrap(),
            "http://127.0.0.1:8080/js"
        );
    }
}
