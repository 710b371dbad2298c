//! Studio's OpenAPI document held against the code and against a running daemon.
//!
//! - Against the code: every route of the `api!` table names its answer (status, media type and,
//!   for JSON, a schema with its top-level keys); a handler that reads a JSON body or a query
//!   string (read from its signature in `src/studio/`) has that type's schema in the document,
//!   and a handler that reads neither documents none; a path segment the handler reads as a
//!   number is documented as an integer; every error answer points at the one error schema.
//! - Against a running daemon (the real daemon in-process, the fake Bot API, the scripted model,
//!   Studio over real HTTP): the answer of every GET route without a path parameter, of routes
//!   with one (an agent's name, a run, a session, a job) and of the mutations a household uses
//!   has the documented status and media type, and its JSON conforms to the documented schema —
//!   every required key there with its documented type, all the way down. So the document cannot
//!   drift from the answers.
//! - Errors name the field: a body with a wrong type, a missing field or an unknown one, and a bad
//!   query parameter are refused with a 400 in the one error shape whose message names the field.

use std::collections::BTreeSet;
use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::studio::openapi::{self, Answer, RouteDoc};
use clawvisor::studio::route_docs;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use reqwest::Method;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Checking a value against a schema (the subset of JSON Schema the document uses).

/// Whether `value` is of JSON Schema type `kind`.
fn is_kind(value: &Value, kind: &str) -> bool {
    match kind {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// Where `value` does not conform to `schema` (`$ref`s resolved in `document`), as
/// "`at`: what is wrong" lines.
fn problems(value: &Value, schema: &Value, document: &Value, at: &str, found: &mut Vec<String>) {
    if let Some(reference) = schema["$ref"].as_str() {
        let target = document
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("{at}: `$ref` {reference} points at nothing"));
        return problems(value, target, document, at, found);
    }
    if let Some(choices) = schema["anyOf"].as_array() {
        let fits = choices.iter().any(|choice| {
            let mut inner = Vec::new();
            problems(value, choice, document, at, &mut inner);
            inner.is_empty()
        });
        if !fits {
            found.push(format!("{at}: {value} fits none of {}", schema["anyOf"]));
        }
        return;
    }
    let kinds: Vec<&str> = match &schema["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !kinds.is_empty() && !kinds.iter().any(|kind| is_kind(value, kind)) {
        found.push(format!(
            "{at}: expected {}, got {value}",
            kinds.join(" or ")
        ));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        found.push(format!("{at}: {value} is not one of {}", schema["enum"]));
    }
    match value {
        Value::Object(object) => {
            for key in schema["required"].as_array().into_iter().flatten() {
                let key = key.as_str().expect("required keys are texts");
                if !object.contains_key(key) {
                    found.push(format!("{at}: the required key `{key}` is missing"));
                }
            }
            for (key, inner) in object {
                let place = format!("{at}.{key}");
                match schema["properties"].get(key) {
                    Some(property) => problems(inner, property, document, &place, found),
                    None if schema["additionalProperties"].is_object() => problems(
                        inner,
                        &schema["additionalProperties"],
                        document,
                        &place,
                        found,
                    ),
                    None => {}
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for (index, item) in items.iter().enumerate().take(100) {
                problems(
                    item,
                    &schema["items"],
                    document,
                    &format!("{at}[{index}]"),
                    found,
                );
            }
        }
        _ => {}
    }
}

fn conforms(value: &Value, schema: &Value, document: &Value, at: &str) -> Result<(), String> {
    let mut found = Vec::new();
    problems(value, schema, document, at, &mut found);
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\nthe answer: {value}", found.join("\n")))
    }
}

#[test]
fn the_checker_finds_a_missing_key_a_wrong_type_and_a_wrong_item() {
    let schema = openapi::object([
        ("name", openapi::string()),
        ("count", openapi::integer()),
        ("note?", openapi::nullable(openapi::string())),
        (
            "items",
            openapi::array(openapi::object([("id", openapi::integer())])),
        ),
    ]);
    let document = json!({});
    let good = json!({"name": "ada", "count": 2, "note": null, "items": [{"id": 1}]});
    assert_eq!(conforms(&good, &schema, &document, "x"), Ok(()));
    let without_note = json!({"name": "ada", "count": 2, "items": []});
    assert_eq!(conforms(&without_note, &schema, &document, "x"), Ok(()));
    for (bad, expect) in [
        (json!({"count": 2, "items": []}), "`name` is missing"),
        (
            json!({"name": "ada", "count": 2.5, "items": []}),
            "x.count: expected integer",
        ),
        (
            json!({"name": 1, "count": 2, "items": []}),
            "x.name: expected string",
        ),
        (
            json!({"name": "ada", "count": 2, "items": [{"id": "one"}]}),
            "x.items[0].id: expected integer",
        ),
        (
            json!({"name": "ada", "count": 2, "note": 5, "items": []}),
            "x.note: expected string or null",
        ),
    ] {
        let problem = conforms(&bad, &schema, &document, "x").expect_err("a problem");
        assert!(problem.contains(expect), "{problem}");
    }
}

// ---------------------------------------------------------------------------------------------
// The document against the code.

/// A handler's parameter list, read from its source file (`schedules::create` →
/// `src/studio/schedules.rs`, `pub async fn create(`…`)`).
fn handler_parameters(handler: &str) -> String {
    let handler: String = handler.split_whitespace().collect();
    let (module, name) = handler
        .rsplit_once("::")
        .unwrap_or_else(|| panic!("the handler `{handler}` is not `module::function`"));
    let file = format!(
        "{}/src/studio/{}.rs",
        env!("CARGO_MANIFEST_DIR"),
        module.replace("::", "/")
    );
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|error| panic!("cannot read {file} for {handler}: {error}"));
    let start = text
        .find(&format!("pub async fn {name}("))
        .unwrap_or_else(|| panic!("no `pub async fn {name}(` in {file}"));
    let open = start
        + text[start..]
            .find('(')
            .expect("a signature has parentheses");
    let mut depth = 0;
    for (offset, character) in text[open..].char_indices() {
        match character {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return text[open + 1..open + offset].to_string();
                }
            }
            _ => {}
        }
    }
    panic!("the signature of {handler} in {file} does not close");
}

/// The type argument of the first `wrapper<…>` in `parameters` (`Json<CreateBody>` →
/// `CreateBody`), and whether it is wrapped in `Option<…>`.
fn type_argument(parameters: &str, wrapper: &str) -> Option<(String, bool)> {
    let found = parameters.find(&format!("{wrapper}<"))?;
    let start = found + wrapper.len() + 1;
    let mut depth = 1;
    let mut end = start;
    for (offset, character) in parameters[start..].char_indices() {
        match character {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            end = start + offset;
            break;
        }
    }
    let argument = parameters[start..end].trim().to_string();
    let optional = parameters[..found].trim_end().ends_with("Option<");
    Some((argument, optional))
}

/// The last segment of a type path (`axum::Json` → `Json`).
fn last_segment(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path).trim()
}

/// What is wrong with one route's description, judged against its handler's signature.
fn route_problems(route: &RouteDoc, document: &Value) -> Vec<String> {
    let name = format!("{} {} ({})", route.method, route.path, route.handler);
    let mut found = Vec::new();
    let operation = &document["paths"][route.path][route.method];
    match &route.answer {
        None => found.push(format!(
            "{name} has no answer: add `200: Answer::Json(<schema fn>)` (or its status and kind) to its line in the api! table"
        )),
        Some((status, answer)) => {
            let content = &operation["responses"][status.to_string()]["content"];
            let (media, schema) = match answer {
                Answer::Json(schema) | Answer::JsonOrEvents(schema, _) => {
                    ("application/json", Some(schema()))
                }
                Answer::Events(_) => ("text/event-stream", None),
                Answer::Svg => ("image/svg+xml", None),
                Answer::Png => ("image/png", None),
            };
            if !content[media].is_object() {
                found.push(format!("{name}: its {status} answer has no {media} content: {operation}"));
            }
            if let Some(schema) = schema {
                let keys = schema["properties"].as_object().map_or(0, |keys| keys.len());
                if schema["type"] != "object" || keys == 0 {
                    found.push(format!("{name}: its answer schema names no top-level keys: {schema}"));
                }
            }
        }
    }
    for range in ["4XX", "5XX"] {
        if operation["responses"][range]["$ref"] != "#/components/responses/Error" {
            found.push(format!(
                "{name}: its {range} answers do not point at the one error shape"
            ));
        }
    }
    let parameters = handler_parameters(route.handler);
    let body_schema = &operation["requestBody"]["content"]["application/json"]["schema"];
    match (type_argument(&parameters, "Json"), &route.body) {
        (Some((body, _)), None) => found.push(format!(
            "{name} reads a JSON body ({body}) the document does not describe: add `body: {body}` to its line"
        )),
        (None, Some(_)) => found.push(format!("{name} documents a body its handler does not read")),
        (Some((body, optional)), Some(documented)) => {
            if last_segment(&body) != "Value" && body_schema["title"] != last_segment(&body) {
                found.push(format!(
                    "{name} reads {body}, but the document describes {}",
                    body_schema["title"]
                ));
            }
            if documented.required == optional {
                found.push(format!(
                    "{name}: the body is {} but documented as {}",
                    if optional { "optional" } else { "required" },
                    if documented.required { "required" } else { "optional" }
                ));
            }
            if !body_schema.is_object() && body_schema != &Value::Bool(true) {
                found.push(format!("{name}: its requestBody has no schema"));
            }
        }
        (None, None) => {
            if operation.get("requestBody").is_some() {
                found.push(format!("{name} has a requestBody without a body in the table"));
            }
        }
    }
    match (type_argument(&parameters, "Query"), &route.query) {
        (Some((query, _)), None) => found.push(format!(
            "{name} reads a query string ({query}) the document does not describe: add `query: {query}`"
        )),
        (None, Some(_)) => found.push(format!("{name} documents a query its handler does not read")),
        (Some((query, _)), Some(documented)) => {
            if documented()["title"] != last_segment(&query) {
                found.push(format!("{name} reads {query}, but the document describes another type"));
            }
            let documented_names: BTreeSet<String> = documented()["properties"]
                .as_object()
                .map(|keys| keys.keys().cloned().collect())
                .unwrap_or_default();
            let in_document: BTreeSet<String> = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|parameter| parameter["in"] == "query")
                .filter_map(|parameter| parameter["name"].as_str().map(str::to_string))
                .collect();
            if documented_names != in_document || in_document.is_empty() {
                found.push(format!(
                    "{name}: query parameters {in_document:?} are not the type's fields {documented_names:?}"
                ));
            }
        }
        (None, None) => {}
    }
    // Path segments the handler reads as numbers are documented as integers.
    let segments: Vec<&str> = route
        .path
        .split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .collect();
    if let Some((types, _)) = type_argument(&parameters, "Path") {
        let types: Vec<&str> = types
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(str::trim)
            .filter(|kind| !kind.is_empty())
            .collect();
        if types.len() != segments.len() {
            found.push(format!(
                "{name}: its handler reads {types:?} from the path {segments:?}"
            ));
        }
        for (segment, kind) in segments.iter().zip(&types) {
            let documented = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|parameter| parameter["in"] == "path" && parameter["name"] == *segment)
                .map(|parameter| parameter["schema"]["type"].clone());
            let wanted = if matches!(*kind, "i64" | "u64" | "i32" | "u32") {
                "integer"
            } else {
                ""
            };
            match documented {
                None => found.push(format!(
                    "{name}: the path parameter `{segment}` is not documented"
                )),
                Some(documented) if !wanted.is_empty() && documented != wanted => found.push(
                    format!("{name}: `{segment}` is read as {kind} but documented as {documented}"),
                ),
                Some(_) => {}
            }
        }
    } else if !segments.is_empty() {
        found.push(format!(
            "{name}: the path has {segments:?} but the handler reads no Path"
        ));
    }
    found
}

#[test]
fn every_route_is_described_as_its_handler_reads_and_answers() {
    let document = openapi::document();
    let routes = route_docs();
    assert_eq!(routes.len(), clawvisor::studio::API_ROUTES.len());
    let found: Vec<String> = routes
        .iter()
        .flat_map(|route| route_problems(route, &document))
        .collect();
    assert!(
        found.is_empty(),
        "{} problem(s) in the OpenAPI document:\n{}",
        found.len(),
        found.join("\n")
    );
    // The one error shape, documented once.
    let error = &document["components"]["schemas"]["Error"];
    assert_eq!(error["required"], json!(["error"]), "{error}");
    assert_eq!(
        error["properties"]["error"]["required"],
        json!(["message"]),
        "{error}"
    );
    assert_eq!(
        document["components"]["responses"]["Error"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Error"
    );
    // Bodies say their fields: a schedule's, with what is required and that nothing else is.
    let create = &document["paths"]["/api/v1/schedules"]["post"]["requestBody"];
    let schema = &create["content"]["application/json"]["schema"];
    assert_eq!(create["required"], true, "{create}");
    for field in ["agent", "prompt", "kind", "expression"] {
        assert!(
            schema["required"]
                .as_array()
                .unwrap()
                .contains(&json!(field)),
            "{schema}"
        );
    }
    assert_eq!(schema["additionalProperties"], false, "{schema}");
    assert_eq!(
        schema["properties"]["target"]["type"],
        json!(["string", "null"]),
        "{schema}"
    );
    // Query parameters are typed as the handler reads them, null left out.
    let runs = document["paths"]["/api/v1/runs"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let before = runs
        .iter()
        .find(|parameter| parameter["name"] == "before")
        .unwrap();
    assert_eq!(before["schema"]["type"], "integer", "{before}");
    assert_eq!(before["required"], false, "{before}");
    let search = &document["paths"]["/api/v1/memory/search"]["get"]["parameters"];
    assert!(
        search
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "q" && p["required"] == true),
        "{search}"
    );
    // The routes outside the table: their media types.
    assert!(
        document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]["text/plain"]
            .is_object()
    );
    assert!(
        document["paths"]["/api/v1/events"]["get"]["responses"]["200"]["content"]
            ["text/event-stream"]
            .is_object()
    );
    assert!(
        document["paths"]["/api/v1/qr.svg"]["get"]["responses"]["200"]["content"]["image/svg+xml"]
            .is_object()
    );
}

// ---------------------------------------------------------------------------------------------
// The document against a running daemon's answers.

/// Studio over HTTP, with the document it serves and the routes whose answers were checked.
struct Api {
    base: String,
    client: reqwest::Client,
    document: Value,
    routes: Vec<RouteDoc>,
    checked: BTreeSet<(String, String)>,
}

impl Api {
    async fn connect(world: &World) -> Api {
        let (base, client) = world.harness.studio_http().await;
        let document: Value = client
            .get(format!("{base}/api/v1/openapi.json"))
            .send()
            .await
            .expect("the document is served")
            .json()
            .await
            .expect("the document is JSON");
        Api {
            base,
            client,
            document,
            routes: route_docs(),
            checked: BTreeSet::new(),
        }
    }

    fn route(&self, method: &str, template: &str) -> RouteDoc {
        *self
            .routes
            .iter()
            .find(|route| route.method == method && route.path == template)
            .unwrap_or_else(|| panic!("no route {method} {template} in the api! table"))
    }

    /// Calls `method template` at `path` (the template filled in, with its query) and checks the
    /// answer against the served document: status, media type, and the JSON's schema.
    async fn call(
        &mut self,
        method: &str,
        template: &str,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let route = self.route(method, template);
        let (status, answer) = route
            .answer
            .unwrap_or_else(|| panic!("{method} {template} has no documented answer"));
        let http_method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("a method");
        let mut request = self
            .client
            .request(http_method, format!("{}{path}", self.base));
        if let Some(body) = &body {
            request = request.json(body);
        }
        let response = request.send().await.expect("Studio answers");
        let got = response.status().as_u16();
        let media = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string();
        self.checked
            .insert((method.to_string(), template.to_string()));
        match answer {
            Answer::Events(_) => {
                assert_eq!(got, status, "{method} {path}");
                assert!(
                    media.starts_with("text/event-stream"),
                    "{method} {path}: {media}"
                );
                return Value::Null;
            }
            Answer::Svg => {
                assert_eq!(got, status, "{method} {path}");
                assert!(
                    media.starts_with("image/svg+xml"),
                    "{method} {path}: {media}"
                );
                let text = response.text().await.expect("an SVG body");
                assert!(text.contains("<svg"), "{method} {path}: {text}");
                return Value::Null;
            }
            Answer::Png => {
                assert_eq!(got, status, "{method} {path}");
                assert!(media.starts_with("image/png"), "{method} {path}: {media}");
                let bytes = response.bytes().await.expect("a PNG body");
                assert!(bytes.starts_with(b"\x89PNG"), "{method} {path}");
                return Value::Null;
            }
            Answer::Json(_) | Answer::JsonOrEvents(..) => {}
        }
        let value: Value = response.json().await.unwrap_or(Value::Null);
        assert_eq!(
            got, status,
            "{method} {path} answered {got}, documented {status}: {value}"
        );
        assert!(
            media.starts_with("application/json"),
            "{method} {path}: {media}"
        );
        let schema = &self.document["paths"][template][method]["responses"][status.to_string()]["content"]
            ["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{method} {template}: no schema in the served document"
        );
        if let Err(problem) = conforms(&value, schema, &self.document, &format!("{method} {path}"))
        {
            panic!("the answer does not match the document:\n{problem}");
        }
        value
    }

    async fn get(&mut self, template: &str, path: &str) -> Value {
        self.call("get", template, path, None).await
    }
}

/// The query a GET route without a path parameter needs to answer 200 (its required parameters).
fn sample_query(path: &str) -> &'static str {
    match path {
        "/api/v1/memory/search" => "?q=plants",
        "/api/v1/schedules/choices" => "?agent=ada",
        "/api/v1/qr.svg" => "?text=https://t.me/ada_bot?start=ABCD2345",
        _ => "",
    }
}

fn script() -> Script {
    Script::new()
        .rule(Rule::text("Written.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "note.txt", "content": "hi", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("write"),
        )
        .rule(Rule::text("Hello, I am here."))
}

const OWNER: i64 = 42;
const STRANGER: i64 = 77;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_daemon_answers_as_its_document_says() {
    let world = World::builder(script())
        .agent_with_bot(
            "ada",
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"",
            "111:ada-token-for-the-openapi-test",
            &[OWNER],
            &[],
        )
        .agent("bob", "")
        .start()
        .await;
    let mut api = Api::connect(&world).await;
    let bot = world.bot("ada");

    // A household at work: a local conversation, the owner on Telegram, a stranger asking to
    // pair, a tool call waiting for approval.
    let reply = world
        .harness
        .ask("ada", &ChatKey::cli("op"), "hello there")
        .await
        .expect("an answer");
    let run_id = reply.run_id.expect("a run");
    world.fake.set_user(OWNER, "Olivia", Some("olivia"));
    world
        .fake
        .push_message(bot, OWNER, OWNER, "hello from Telegram");
    world
        .fake
        .wait_for_sent(
            bot,
            |sent| sent.chat_id == OWNER && sent.text.contains("Hello"),
            Duration::from_secs(30),
        )
        .await
        .expect("ada answers the owner on Telegram");
    world
        .fake
        .push_message(bot, STRANGER, STRANGER, "hi, who are you?");
    world
        .harness
        .send("ada", &ChatKey::cli("op2"), "please write a note")
        .expect("sent");
    let (client, base) = (api.client.clone(), api.base.clone());
    wait_until(
        Duration::from_secs(30),
        "a pairing request and an approval",
        || {
            let (client, base) = (client.clone(), base.clone());
            async move {
                let people: Value = client
                    .get(format!("{base}/api/v1/people"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                let approvals: Value = client
                    .get(format!("{base}/api/v1/approvals?status=pending"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                let pairing = people["agents"][0]["pending"]
                    .as_array()
                    .is_some_and(|p| !p.is_empty());
                let approval = approvals["approvals"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty());
                (pairing && approval).then_some(())
            }
        },
    )
    .await;

    // The mutations a household uses, checked as they are made.
    let job = api
        .call(
            "post",
            "/api/v1/schedules",
            "/api/v1/schedules",
            Some(
                json!({"agent": "ada", "name": "standup", "prompt": "Say hi", "kind": "every",
                        "expression": "1h", "target": format!("tg:{OWNER}")}),
            ),
        )
        .await;
    let job_id = job["id"].as_i64().expect("a job id");
    api.call(
        "post",
        "/api/v1/schedules/preview",
        "/api/v1/schedules/preview",
        Some(json!({"kind": "cron", "expression": "0 9 * * 1-5", "timezone": "Europe/Berlin"})),
    )
    .await;
    api.call(
        "post",
        "/api/v1/schedules/{id}/run",
        &format!("/api/v1/schedules/{job_id}/run"),
        None,
    )
    .await;
    api.call(
        "patch",
        "/api/v1/schedules/{id}",
        &format!("/api/v1/schedules/{job_id}"),
        Some(json!({"name": "morning hello"})),
    )
    .await;
    for text in ["Olivia likes plants", "The wifi password is on the fridge"] {
        api.call(
            "post",
            "/api/v1/memory",
            "/api/v1/memory",
            Some(json!({"owner": "ada", "text": text})),
        )
        .await;
    }
    let memories = api.get("/api/v1/memory", "/api/v1/memory").await;
    let memory_id = memories["memories"][0]["id"].as_i64().expect("a memory");
    api.call(
        "post",
        "/api/v1/memory/{id}/{operation}",
        &format!("/api/v1/memory/{memory_id}/archive"),
        None,
    )
    .await;
    let rule = api
        .call(
            "post",
            "/api/v1/policy/rules",
            "/api/v1/policy/rules",
            Some(json!({"effect": "deny", "tool": "shell", "pattern": "rm -rf /", "description": "never"})),
        )
        .await;
    api.call(
        "patch",
        "/api/v1/users/{id}/timezone",
        &format!("/api/v1/users/{OWNER}/timezone"),
        Some(json!({"timezone": "Europe/Berlin"})),
    )
    .await;

    // Every GET route without a path parameter.
    let plain: Vec<&'static str> = api
        .routes
        .iter()
        .filter(|route| route.method == "get" && !route.path.contains('{'))
        .map(|route| route.path)
        .collect();
    for path in plain {
        api.get(path, &format!("{path}{}", sample_query(path)))
            .await;
    }
    // And some with one: an agent, its file, a run, a session, a job, a provider's models.
    for name in ["ada", "bob"] {
        api.get("/api/v1/agents/{name}", &format!("/api/v1/agents/{name}"))
            .await;
        api.get(
            "/api/v1/agents/{name}/file",
            &format!("/api/v1/agents/{name}/file"),
        )
        .await;
    }
    let run = api
        .get("/api/v1/runs/{id}", &format!("/api/v1/runs/{run_id}"))
        .await;
    let sessions = api
        .get("/api/v1/sessions", "/api/v1/sessions?agent=ada")
        .await;
    for session in sessions["sessions"].as_array().expect("sessions") {
        let id = session["id"].as_i64().expect("a session id");
        api.get("/api/v1/sessions/{id}", &format!("/api/v1/sessions/{id}"))
            .await;
    }
    api.get(
        "/api/v1/schedules/{id}",
        &format!("/api/v1/schedules/{job_id}"),
    )
    .await;
    api.get(
        "/api/v1/providers/{name}/models",
        "/api/v1/providers/scripted/models",
    )
    .await;
    let runs = api.get("/api/v1/runs", "/api/v1/runs?limit=100").await;
    for listed in runs["runs"].as_array().expect("runs") {
        let id = listed["id"].as_i64().expect("a run id");
        api.get("/api/v1/runs/{id}", &format!("/api/v1/runs/{id}"))
            .await;
    }

    // The data made the answers' lists non-empty, so their items were checked too.
    let people = api.get("/api/v1/people", "/api/v1/people").await;
    assert!(
        !people["agents"][0]["pending"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{people}"
    );
    assert!(
        run["steps"]
            .as_array()
            .is_some_and(|steps| !steps.is_empty()),
        "{run}"
    );
    let decided = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|run| run["status"] == "waiting_approval");
    assert!(decided, "a run waits for its approval: {runs}");

    // Deciding, granting, revoking, disabling, editing an agent, reloading, cancelling.
    let approvals = api
        .get("/api/v1/approvals", "/api/v1/approvals?status=pending")
        .await;
    let approval = approvals["approvals"][0]["id"]
        .as_str()
        .expect("an approval")
        .to_string();
    api.call(
        "post",
        "/api/v1/approvals/{id}/decision",
        &format!("/api/v1/approvals/{approval}/decision"),
        Some(json!({"decision": "approve", "grant_minutes": 30})),
    )
    .await;
    let grants = api.get("/api/v1/grants", "/api/v1/grants").await;
    let grant = grants["grants"][0]["id"]
        .as_i64()
        .expect("the grant just given");
    api.call(
        "post",
        "/api/v1/grants/{id}/revoke",
        &format!("/api/v1/grants/{grant}/revoke"),
        None,
    )
    .await;
    let rule_id = rule["id"].as_i64().expect("a rule id");
    api.call(
        "post",
        "/api/v1/policy/rules/{id}/disable",
        &format!("/api/v1/policy/rules/{rule_id}/disable"),
        None,
    )
    .await;
    api.call(
        "patch",
        "/api/v1/agents/{name}",
        "/api/v1/agents/ada",
        Some(json!({"description": "The household's assistant"})),
    )
    .await;
    api.call("post", "/api/v1/reload", "/api/v1/reload", None)
        .await;
    api.call(
        "delete",
        "/api/v1/schedules/{id}",
        &format!("/api/v1/schedules/{job_id}"),
        None,
    )
    .await;

    // Every GET route was checked but a contract's (no handoff happened here: tests/handoff.rs)
    // and a browser approval's screenshot (no browser here: tests/browser_agent.rs).
    let unchecked: Vec<&str> = api
        .routes
        .iter()
        .filter(|route| route.method == "get")
        .filter(|route| {
            !api.checked
                .contains(&("get".to_string(), route.path.to_string()))
        })
        .map(|route| route.path)
        .collect();
    assert_eq!(
        unchecked,
        ["/api/v1/approvals/{id}/screenshot", "/api/v1/handoffs/{id}"],
        "checked: {:?}",
        api.checked
    );
    world.harness.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Errors name the field.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_body_or_query_is_refused_naming_the_field() {
    let world = World::builder(script())
        .agent("ada", "tools = [\"write_file\"]")
        .start()
        .await;
    let api = Api::connect(&world).await;
    let job = |extra: Value| {
        let mut body =
            json!({"agent": "ada", "prompt": "Say hi", "kind": "every", "expression": "1h"});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        body
    };
    let mut without_prompt = job(json!({}));
    without_prompt.as_object_mut().unwrap().remove("prompt");
    let cases: Vec<(Method, &str, Option<Value>, &str)> = vec![
        // A wrong type, a missing field, an unknown field.
        (
            Method::POST,
            "/api/v1/schedules",
            Some(job(json!({"agent": 5}))),
            "`agent`",
        ),
        (
            Method::POST,
            "/api/v1/schedules",
            Some(without_prompt),
            "`prompt`",
        ),
        (
            Method::POST,
            "/api/v1/schedules",
            Some(job(json!({"colour": "red"}))),
            "`colour`",
        ),
        (
            Method::PATCH,
            "/api/v1/agents/ada",
            Some(json!({"tools": "shell"})),
            "`tools`",
        ),
        (
            Method::PATCH,
            "/api/v1/agents/ada",
            Some(json!({"telegram": {"token": "123:abc"}})),
            "`token`",
        ),
        (
            Method::POST,
            "/api/v1/memory",
            Some(json!({"owner": "ada"})),
            "`text`",
        ),
        (
            Method::POST,
            "/api/v1/approvals/a-1/decision",
            Some(json!({"decision": 1})),
            "`decision`",
        ),
        (
            Method::PUT,
            "/api/v1/secrets/SOME_KEY",
            Some(json!({"valu": "x"})),
            "`value`",
        ),
        // A query parameter of the wrong type.
        (Method::GET, "/api/v1/runs?limit=many", None, "limit"),
        // No JSON at all where a body is needed.
        (Method::POST, "/api/v1/schedules/preview", None, "JSON"),
    ];
    for (method, path, body, expect) in cases {
        let mut request = api
            .client
            .request(method.clone(), format!("{}{path}", api.base));
        if let Some(body) = &body {
            request = request.json(body);
        }
        let response = request.send().await.expect("Studio answers");
        let status = response.status().as_u16();
        let value: Value = response.json().await.expect("errors are JSON");
        assert_eq!(status, 400, "{method} {path} {body:?}: {value}");
        let error = json!({"$ref": "#/components/schemas/Error"});
        conforms(&value, &error, &api.document, "error")
            .unwrap_or_else(|problem| panic!("not the one error shape: {problem}"));
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(expect),
            "{method} {path} {body:?}: {message}"
        );
        assert!(
            !message.contains("at line") && !message.contains("123:abc"),
            "the message says where in the text, or echoes a token: {message}"
        );
    }
    world.harness.stop().await;
}
