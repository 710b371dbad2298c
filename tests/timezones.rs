//! Time zones end to end: a person in Berlin sets their zone with `/timezone` (a typo gets
//! "did you mean"), asks "remind me at 9 tomorrow" and the scripted model schedules 09:00
//! without an offset: the job is stored in Europe/Berlin and fires at 08:00 UTC in winter and
//! at 07:00 UTC in summer; a reminder due in a few seconds of Berlin time really fires then and
//! reaches the chat. The prompt the model received states the local time with its zone, and
//! Studio shows the job's local time and lets the operator set a person's zone (audited).

use std::time::Duration;

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use serde_json::{Value, json};

const USER: i64 = 42;
const TOOLS: &str = "autonomy = \"trust_first\"\ntools = [\"schedule_task\", \"current_time\"]\n";
const WINTER: &str = "2027-01-15T09:00";
const SUMMER: &str = "2027-07-15T09:00";

fn schedule_call(at: &str, prompt: &str) -> String {
    json!({"name": "reminder", "prompt": prompt, "kind": "at", "schedule": at}).to_string()
}

/// The system prompt of the first model request whose last user message contains `text`.
fn system_prompt_for(requests: &[Value], text: &str) -> Option<String> {
    requests.iter().find_map(|request| {
        let messages = request["messages"].as_array()?;
        let last_user = messages.iter().rev().find(|m| m["role"] == "user")?;
        if !last_user["content"].to_string().contains(text) {
            return None;
        }
        let system: Vec<String> = messages
            .iter()
            .filter(|m| m["role"] == "system")
            .map(|m| m["content"].to_string())
            .collect();
        Some(system.join("\n"))
    })
}

/// The stored jobs: (id, timezone, next_run_ms).
async fn jobs(w: &World) -> Vec<(i64, String, Option<i64>)> {
    w.store()
        .read(|conn| {
            let mut statement =
                conn.prepare("SELECT id, timezone, next_run_ms FROM jobs ORDER BY id")?;
            let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap()
}

async fn wait_for_reply(w: &World, text: &str) -> String {
    let bot = w.bot("ada");
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == USER && m.visible_text.contains(text),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|| {
            panic!(
                "a reply containing {text:?}; sent: {:?}",
                w.fake
                    .sent(bot)
                    .iter()
                    .map(|m| m.visible_text.clone())
                    .collect::<Vec<_>>()
            )
        })
        .visible_text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_in_berlin_is_reminded_at_nine_berlin_time_in_winter_and_summer() {
    let berlin = Tz::Europe__Berlin;
    let script = Script::new()
        .rule(Rule::text("Noted, I will remind you.").when_after_tool_result("schedule_task"))
        .rule(
            Rule::tool_call(
                "schedule_task",
                schedule_call(WINTER, "Remind the user to call Ann"),
            )
            .when_last_user_contains("remind me at 9 tomorrow"),
        )
        .rule(
            Rule::tool_call(
                "schedule_task",
                schedule_call(SUMMER, "Remind the user to call Ann"),
            )
            .when_last_user_contains("same in July"),
        )
        .rule(Rule::text("Time to stretch!").when_last_user_contains("Remind the user to stretch"))
        .rule(Rule::text("Hello!"));
    let w = World::builder(script)
        .agent_with_bot(
            "ada",
            TOOLS,
            "7001:AAH-timezone-test-token-0001",
            &[USER],
            &[],
        )
        .start()
        .await;
    let bot = w.bot("ada");

    // Before choosing, the person lives in the daemon's zone (UTC here) and is told so.
    w.fake.push_message(bot, USER, USER, "/timezone");
    let shown = wait_for_reply(&w, "Your time zone is").await;
    assert!(
        shown.contains("Your time zone is UTC (the daemon's default"),
        "{shown}"
    );
    w.fake.push_message(bot, USER, USER, "hello");
    wait_for_reply(&w, "Hello!").await;
    let before = system_prompt_for(&w.llm.requests(), "hello").expect("a request for hello");
    assert!(
        before.contains("Current time: ") && before.contains(" (UTC)."),
        "{before}"
    );

    // A typo is refused with the reason and a close match; nothing is stored.
    w.fake
        .push_message(bot, USER, USER, "/timezone Europe/Berln");
    let refused = wait_for_reply(&w, "unknown timezone").await;
    assert!(refused.contains("did you mean Europe/Berlin?"), "{refused}");
    w.fake
        .push_message(bot, USER, USER, "/timezone europe/berlin");
    let confirmed = wait_for_reply(&w, "Your time zone is now Europe/Berlin").await;
    let now_local = Utc::now().with_timezone(&berlin);
    assert!(
        confirmed.contains(&format!("(Europe/Berlin, UTC{})", now_local.format("%:z"))),
        "{confirmed}"
    );

    // "Remind me at 9 tomorrow": 09:00 without an offset, read in Berlin.
    w.fake
        .push_message(bot, USER, USER, "remind me at 9 tomorrow");
    wait_for_reply(&w, "Noted, I will remind you.").await;
    w.fake.push_message(bot, USER, USER, "same in July please");
    wait_until(Duration::from_secs(30), "two jobs stored", || async {
        jobs(&w).await.len() == 2
    })
    .await;
    let stored = jobs(&w).await;
    let winter_utc = Utc
        .with_ymd_and_hms(2027, 1, 15, 8, 0, 0)
        .unwrap()
        .timestamp_millis();
    let summer_utc = Utc
        .with_ymd_and_hms(2027, 7, 15, 7, 0, 0)
        .unwrap()
        .timestamp_millis();
    assert_eq!(stored[0].1, "Europe/Berlin", "{stored:?}");
    assert_eq!(
        stored[0].2,
        Some(winter_utc),
        "winter: 09:00 CET is 08:00 UTC"
    );
    assert_eq!(stored[1].1, "Europe/Berlin", "{stored:?}");
    assert_eq!(
        stored[1].2,
        Some(summer_utc),
        "summer: 09:00 CEST is 07:00 UTC"
    );

    // The prompt stated Berlin's local time; the tool's answer the local fire time.
    let requests = w.llm.requests();
    let prompt = system_prompt_for(&requests, "remind me at 9 tomorrow").expect("the request");
    let offset = format!("(Europe/Berlin, UTC{})", now_local.format("%:z"));
    assert!(
        prompt.contains("Current time: ") && prompt.contains(&offset),
        "{prompt}"
    );
    assert!(prompt.contains("are in Europe/Berlin"), "{prompt}");
    assert!(
        requests.iter().any(|r| r
            .to_string()
            .contains("next runs: 2027-01-15 09:00:00 CET (Fri)")),
        "the schedule_task answer shows the local fire time"
    );

    // Studio shows the jobs' local times with their zone.
    let (base, http) = w.harness.studio_http().await;
    let listed: Value = http
        .get(format!("{base}/api/v1/schedules"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let locals: Vec<&str> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|job| job["next_run_local"].as_str())
        .collect();
    assert!(
        locals.contains(&"2027-01-15 09:00:00 CET (Fri)"),
        "{listed}"
    );
    assert!(
        locals.contains(&"2027-07-15 09:00:00 CEST (Thu)"),
        "{listed}"
    );
    assert!(
        listed["jobs"][0]["schedule"]
            .as_str()
            .unwrap()
            .contains("(Europe/Berlin)"),
        "{listed}"
    );

    // A reminder due in a few seconds of Berlin wall time fires then (not an hour off) and
    // reaches the chat.
    let due = Utc::now() + chrono::Duration::seconds(20);
    let due_local = due
        .with_timezone(&berlin)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string();
    w.llm.set_script(
        Script::new()
            .rule(Rule::text("Noted, soon.").when_after_tool_result("schedule_task"))
            .rule(
                Rule::tool_call(
                    "schedule_task",
                    schedule_call(&due_local, "Remind the user to stretch"),
                )
                .when_last_user_contains("in a moment"),
            )
            .rule(
                Rule::text("Time to stretch!")
                    .when_last_user_contains("Remind the user to stretch"),
            )
            .rule(Rule::text("Hello!")),
    );
    w.fake
        .push_message(bot, USER, USER, "remind me to stretch in a moment");
    wait_for_reply(&w, "Noted, soon.").await;
    let due_ms = due.timestamp_millis() / 1000 * 1000;
    wait_for_reply(&w, "Time to stretch!").await;
    let fired: Vec<i64> = w
        .store()
        .read(|conn| {
            let mut statement = conn.prepare("SELECT fire_ms FROM job_runs ORDER BY id")?;
            let rows = statement.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(
        fired,
        vec![due_ms],
        "the fire time is the Berlin time asked for"
    );
    let requests = w.llm.requests();
    let fire_prompt = requests
        .iter()
        .map(Value::to_string)
        .find(|text| text.contains("Remind the user to stretch") && text.contains("due "))
        .expect("the scheduled run's request");
    let due_shown = due
        .with_timezone(&berlin)
        .format("%Y-%m-%d %H:%M:%S %Z")
        .to_string();
    assert!(
        fire_prompt.contains(&due_shown),
        "the job's run names its local time: {fire_prompt}"
    );

    // The operator sets the person's zone in Studio: a typo is refused the same way, a good
    // name is stored and audited, and `/timezone` then says where it comes from.
    let url = format!("{base}/api/v1/users/{USER}/timezone");
    let refused = http
        .patch(&url)
        .json(&json!({"timezone": "Berlin"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body = refused.text().await.unwrap();
    assert!(body.contains("did you mean Europe/Berlin?"), "{body}");
    let set = http
        .patch(&url)
        .json(&json!({"timezone": "America/New_York"}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let zones: Value = http
        .get(format!("{base}/api/v1/timezones"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(zones["daemon"]["timezone"], "UTC", "{zones}");
    let person = zones["people"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["user_id"] == USER)
        .cloned()
        .unwrap_or_else(|| panic!("the person is listed: {zones}"));
    assert_eq!(person["timezone"], "America/New_York", "{zones}");
    assert_eq!(person["changed_by"], "operator", "{zones}");
    assert_eq!(person["agents"], json!(["ada"]), "{zones}");
    w.fake.push_message(bot, USER, USER, "/timezone");
    let shown = wait_for_reply(&w, "Your time zone is America/New_York (your setting)").await;
    assert!(shown.contains("/timezone reset"), "{shown}");
    let audited: Vec<(String, String)> = w
        .store()
        .read(|conn| {
            let mut statement = conn.prepare(
                "SELECT actor, action FROM audit_log WHERE action LIKE 'user.timezone%' ORDER BY id",
            )?;
            let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(
        audited,
        vec![
            ("telegram:42".to_string(), "user.timezone_set".to_string()),
            ("operator".to_string(), "user.timezone_set".to_string()),
        ]
    );

    // `/timezone reset` forgets the choice: back to the daemon's zone.
    w.fake.push_message(bot, USER, USER, "/timezone reset");
    let reset = wait_for_reply(&w, "Forgot your time zone").await;
    assert!(
        reset.contains("you are on UTC (the daemon's default"),
        "{reset}"
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_files_zone_applies_to_people_who_chose_none() {
    let script = Script::new()
        .rule(Rule::text("Noted.").when_after_tool_result("schedule_task"))
        .rule(
            Rule::tool_call("schedule_task", schedule_call(WINTER, "Remind the user"))
                .when_last_user_contains("remind me"),
        )
        .rule(Rule::text("Hello!"));
    let w = World::builder(script)
        .agent_with_bot(
            "ada",
            &format!("timezone = \"Asia/Tokyo\"\n{TOOLS}"),
            "7002:AAH-timezone-test-token-0002",
            &[USER],
            &[],
        )
        .start()
        .await;
    let bot = w.bot("ada");
    w.fake.push_message(bot, USER, USER, "/timezone");
    let shown = wait_for_reply(&w, "Your time zone is").await;
    assert!(
        shown.contains("Asia/Tokyo (the agent's default)"),
        "{shown}"
    );
    w.fake.push_message(bot, USER, USER, "remind me at 9");
    wait_for_reply(&w, "Noted.").await;
    let stored = jobs(&w).await;
    let tokyo_nine = Utc
        .with_ymd_and_hms(2027, 1, 15, 0, 0, 0)
        .unwrap()
        .timestamp_millis();
    assert_eq!(
        stored,
        vec![(stored[0].0, "Asia/Tokyo".to_string(), Some(tokyo_nine))]
    );
    let prompt = system_prompt_for(&w.llm.requests(), "remind me at 9").expect("the request");
    assert!(prompt.contains("(Asia/Tokyo, UTC+09:00)"), "{prompt}");
    w.harness.stop().await;
}
