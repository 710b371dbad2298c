//! Unit tests of the scripted server's matching, streaming and errors.

use super::*;

#[test]
fn scripts_read_from_toml() {
    let script = Script::from_toml(
        r#"
        [[rules]]
        when = { last_user_contains = "weather", tools_include = "get_weather" }
        times = 1
        text = "Let me look."
        tool_calls = [{ name = "get_weather", arguments = '{"city":"Paris"}' }]

        [[rules]]
        when = { model = "flaky" }
        error = { status = 429, message = "slow down", retry_after = "1" }
        "#,
    )
    .unwrap();
    assert_eq!(
        script,
        Script::new()
            .rule(
                Rule::tool_call("get_weather", r#"{"city":"Paris"}"#)
                    .with_text("Let me look.")
                    .when_last_user_contains("weather")
                    .when_tools_include("get_weather")
                    .times(1)
            )
            .rule(
                Rule::error(429, "slow down")
                    .with_retry_after("1")
                    .when_model("flaky")
            )
    );
    assert!(Script::from_toml("[[rules]]\nwhen = { nonsense = 1 }").is_err());
}

#[test]
fn last_tool_result_contains_looks_only_at_the_latest_results() {
    let matcher = Matcher {
        last_tool_result_contains: Some("created".into()),
        ..Matcher::default()
    };
    let call = |id: &str| json!({"role":"assistant","content":null,"tool_calls":[{"id":id,"type":"function","function":{"name":"f","arguments":"{}"}}]});
    let fresh = json!({"messages":[
        {"role":"user","content":"go"},
        call("a"),
        {"role":"tool","tool_call_id":"a","content":"created `x`"}
    ]});
    assert!(matches(&matcher, &fresh));
    let stale = json!({"messages":[
        {"role":"user","content":"go"},
        call("a"),
        {"role":"tool","tool_call_id":"a","content":"created `x`"},
        {"role":"assistant","content":"done"},
        {"role":"user","content":"again"},
        call("b"),
        {"role":"tool","tool_call_id":"b","content":"refused"}
    ]});
    assert!(
        !matches(&matcher, &stale),
        "an earlier turn's result does not count"
    );
    let answered = json!({"messages":[
        {"role":"user","content":"go"},
        call("a"),
        {"role":"tool","tool_call_id":"a","content":"created `x`"},
        {"role":"assistant","content":"done"}
    ]});
    assert!(
        !matches(&matcher, &answered),
        "only while the results end the conversation"
    );
}

#[test]
fn pieces_respect_character_boundaries() {
    assert_eq!(pieces("héllo wörld!", 4), vec!["héll", "o wö", "rld!"]);
    assert!(pieces("", 4).is_empty());
}

#[test]
fn conversations_openai_would_refuse_are_refused() {
    let ok = json!({"model":"m","messages":[
        {"role":"user","content":"hi"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"a","content":"done"}
    ]});
    assert_eq!(validate(&ok), Ok(()));
    let orphan = json!({"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"?"}]});
    assert!(validate(&orphan).unwrap_err().contains("role 'tool'"));
    let unanswered = json!({"model":"m","messages":[
        {"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},
        {"role":"user","content":"and?"}
    ]});
    assert!(
        validate(&unanswered)
            .unwrap_err()
            .contains("did not have response messages: a")
    );
}
