//! Checking a call's arguments against an MCP tool's input schema before anything is sent.
//!
//! A deliberately small subset of JSON Schema — the part that catches a model's mistakes:
//! `type` (one or several), `required`, `properties` (recursively), `additionalProperties: false`,
//! `enum`, `items`, string `minLength`/`maxLength`, numeric `minimum`/`maximum`. Keywords it does
//! not know are ignored (the server still validates); a schema that is not an object accepts
//! anything. Depth is bounded, so a hostile schema cannot make it recurse forever.

use serde_json::{Map, Value};

const MAX_DEPTH: usize = 32;

/// `Ok(())` or the first problem found, naming the argument's path (`query.limit`).
pub fn validate(schema: &Value, args: &Value) -> Result<(), String> {
    check(schema, args, "arguments", 0)
}

fn check(schema: &Value, value: &Value, path: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let Value::Object(schema) = schema else {
        return Ok(());
    };
    if let Some(expected) = schema.get("type") {
        let names: Vec<&str> = match expected {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|name| has_type(value, name)) {
            return Err(format!(
                "`{path}` must be {}, got {}",
                names.join(" or "),
                type_name(value)
            ));
        }
    }
    if let Some(Value::Array(choices)) = schema.get("enum")
        && !choices.contains(value)
    {
        let shown: Vec<String> = choices.iter().take(20).map(Value::to_string).collect();
        return Err(format!("`{path}` must be one of {}", shown.join(", ")));
    }
    match value {
        Value::Object(fields) => check_object(schema, fields, path, depth),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{index}]"), depth + 1)?;
                }
            }
            Ok(())
        }
        Value::String(text) => {
            let length = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && length < min
            {
                return Err(format!("`{path}` must be at least {min} characters long"));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && length > max
            {
                return Err(format!("`{path}` must be at most {max} characters long"));
            }
            Ok(())
        }
        Value::Number(number) => {
            let Some(number) = number.as_f64() else {
                return Ok(());
            };
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && number < min
            {
                return Err(format!("`{path}` must be at least {min}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && number > max
            {
                return Err(format!("`{path}` must be at most {max}"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn check_object(
    schema: &Map<String, Value>,
    fields: &Map<String, Value>,
    path: &str,
    depth: usize,
) -> Result<(), String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                return Err(format!("`{}` is required", join(path, name)));
            }
        }
    }
    for (name, value) in fields {
        match properties.and_then(|properties| properties.get(name)) {
            Some(property) => check(property, value, &join(path, name), depth + 1)?,
            None => {
                if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                    let known: Vec<&str> = properties
                        .map(|properties| properties.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    return Err(format!(
                        "unknown field `{}` (expected: {})",
                        join(path, name),
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ));
                }
            }
        }
    }
    Ok(())
}

fn join(path: &str, name: &str) -> String {
    if path == "arguments" {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(number) => {
                number.is_i64()
                    || number.is_u64()
                    || number.as_f64().is_some_and(|float| float.fract() == 0.0)
            }
            _ => false,
        },
        // An unknown type name is the server's problem, not the model's.
        _ => true,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::validate;

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": 0},
                "mode": {"enum": ["fast", "slow"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "inner": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
            },
            "required": ["a"],
            "additionalProperties": false
        });
        let cases = [
            (json!({"a": 1}), Ok(())),
            (json!({"a": 2.0}), Ok(())),
            (json!({}), Err("`a` is required")),
            (json!({"a": "1"}), Err("`a` must be integer, got a string")),
            (json!({"a": -1}), Err("`a` must be at least 0")),
            (
                json!({"a": 1, "mode": "x"}),
                Err("`mode` must be one of \"fast\", \"slow\""),
            ),
            (
                json!({"a": 1, "tags": ["x", 2]}),
                Err("`tags[1]` must be string, got a number"),
            ),
            (json!({"a": 1, "inner": {}}), Err("`inner.x` is required")),
            (
                json!({"a": 1, "b": 1}),
                Err("unknown field `b` (expected: a, inner, mode, tags)"),
            ),
            (json!([1]), Err("`arguments` must be object, got an array")),
        ];
        for (args, expected) in cases {
            let got = validate(&schema, &args);
            assert_eq!(got, expected.map_err(str::to_string), "{args}");
        }
        assert_eq!(validate(&json!(true), &json!({"any": 1})), Ok(()));
    }
}
