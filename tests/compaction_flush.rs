//! Issue #33: nothing the user said is lost to compaction. Ten facts told early in a long
//! conversation are saved to memory by the flush before the summary, recalled in a new chat, and a
//! crash in the middle of the flush's saves (the real binary, kill -9) saves each fact once.

use std::time::Duration;

use clawvisor::agent::compaction::FLUSH_PROMPT;
use clawvisor::domain::ChatKey;
use clawvisor::testkit::fake_embeddings::FakeEmbeddings;
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml};
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

/// A saved memory's text, source and the session event it came from.
type SavedFact = (String, String, Option<i64>);

/// Ten facts, each with a word only it has (full-text recall finds it by that word).
const FACTS: [(&str, &str); 10] = [
    ("My sister Ana lives in Porto.", "Porto"),
    ("My dentist is Dr. Weber on Linden Street.", "dentist"),
    ("I am allergic to hazelnuts.", "hazelnuts"),
    ("Our dog is called Biscuit.", "Biscuit"),
    ("My wedding anniversary is on 14 June.", "anniversary"),
    ("I work night shifts at the harbour.", "harbour"),
    ("My car is a green Skoda.", "Skoda"),
    ("I play the cello on Thursdays.", "cello"),
    ("My son Leo starts school in September.", "Leo"),
    ("The wifi router sits in the attic.", "attic"),
];

/// The two turns that tell the facts (five each), unmistakable in a flush's transcript.
const FIRST_TELLING: &str = "Some things about me, first batch";
const SECOND_TELLING: &str = "More things about me, second batch";

fn telling(first: bool) -> String {
    let (intro, facts) = if first {
        (FIRST_TELLING, &FACTS[..5])
    } else {
        (SECOND_TELLING, &FACTS[5..])
    };
    let said: Vec<&str> = facts.iter().map(|(fact, _)| *fact).collect();
    format!("{intro}: {}", said.join(" "))
}

/// The flush's answer for transcripts holding one or both tellings, numbered as the flush
/// numbers user turns (the tellings are always the first user turns of what it reads).
fn flush_answer(facts: &[(&str, &str)], first_turn: u32) -> String {
    let items: Vec<String> = facts
        .iter()
        .enumerate()
        .map(|(index, (fact, _))| {
            format!(
                r#"{{"turn": {}, "fact": "{fact}"}}"#,
                first_turn + index as u32 / 5
            )
        })
        .collect();
    format!(r#"{{"facts": [{}]}}"#, items.join(", "))
}

fn script(stall_summary: bool) -> Script {
    let summary = Rule::text("RECAP: we talked about the user's life and a long garden plan.")
        .when_system_contains("Summarise the conversation");
    Script::new()
        .rule(
            Rule::text(flush_answer(&FACTS, 1))
                .when_system_contains(FLUSH_PROMPT)
                .when_last_user_contains(SECOND_TELLING)
                .when_any_message_contains(FIRST_TELLING),
        )
        .rule(
            Rule::text(flush_answer(&FACTS[5..], 1))
                .when_system_contains(FLUSH_PROMPT)
                .when_last_user_contains(SECOND_TELLING),
        )
        .rule(
            Rule::text(flush_answer(&FACTS[..5], 1))
                .when_system_contains(FLUSH_PROMPT)
                .when_last_user_contains(FIRST_TELLING),
        )
        .rule(Rule::text(r#"{"facts": []}"#).when_system_contains(FLUSH_PROMPT))
        .rule(if stall_summary {
            summary.delay(Duration::from_secs(30))
        } else {
            summary
        })
        .rule(Rule::text("Noted.").when_last_user_contains("garden plan"))
        .rule(Rule::echo())
}

/// A short turn after the tellings (the conversation stays under its budget).
fn filler(turn: usize) -> String {
    format!("garden plan part {turn}: beans along the hedge")
}

/// A turn long enough to push the conversation over a 1,200-token budget: the run it starts
/// compacts the conversation, the tellings being old by then.
fn long_filler(turn: usize) -> String {
    format!(
        "garden plan part {turn}: {}",
        "beds of beans and tomatoes along the hedge ".repeat(60)
    )
}

async fn replies(
    fake: &clawvisor::testkit::fake_telegram::FakeTelegram,
    bot: clawvisor::testkit::fake_telegram::BotId,
    count: usize,
) {
    wait_until(Duration::from_secs(60), "the replies", || async {
        let sent = fake.sent(bot).len();
        if sent >= count {
            Ok(())
        } else {
            Err(format!("{sent} of {count} replies"))
        }
    })
    .await
}

/// The flush requests that read the first telling.
fn flushes_of_the_tellings(llm: &ScriptedLlm) -> usize {
    llm.requests()
        .iter()
        .filter(|request| {
            let text = request.to_string();
            text.contains("Before older turns") && text.contains(FIRST_TELLING)
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_told_early_survive_compaction_and_are_recalled_in_a_new_chat() {
    let llm = ScriptedLlm::start(script(false)).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", "context_tokens = 1200")];
    let harness = Harness::start(options).await.unwrap();
    let chat = ChatKey::cli("long");
    harness.ask("ada", &chat, &telling(true)).await.unwrap();
    harness.ask("ada", &chat, &telling(false)).await.unwrap();
    for turn in 0..3 {
        harness.ask("ada", &chat, &filler(turn)).await.unwrap();
    }
    harness.ask("ada", &chat, &long_filler(3)).await.unwrap();
    let (recap, saved): (Option<String>, Vec<SavedFact>) = harness
        .store()
        .read(|conn| {
            let recap = conn.query_row(
                "SELECT recap FROM sessions WHERE chat = 'cli:long'",
                [],
                |row| row.get(0),
            )?;
            let mut statement = conn.prepare(
                "SELECT text, source, message_id FROM memory_facts WHERE class = 'durable' ORDER BY id",
            )?;
            let rows = statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok((recap, rows))
        })
        .await
        .unwrap();
    let recap = recap.expect("the long conversation was compacted");
    let texts: Vec<&str> = saved.iter().map(|(text, _, _)| text.as_str()).collect();
    for (fact, _) in FACTS {
        assert_eq!(
            texts.iter().filter(|text| **text == fact).count(),
            1,
            "each fact saved once: {fact} in {texts:?}"
        );
    }
    assert!(
        saved
            .iter()
            .all(|(_, source, message_id)| source == "user_said" && message_id.is_some()),
        "marked with the turn that said them: {saved:?}"
    );
    assert!(
        recap.contains("Saved to memory from these turns") && recap.contains("Biscuit"),
        "the recap links the saved memories: {recap}"
    );

    // A new chat: each fact comes back through recall, by a word only it has.
    for (fact, word) in FACTS {
        let before = llm.requests().len();
        harness
            .ask(
                "ada",
                &ChatKey::cli("fresh"),
                &format!("What do you know about {word}?"),
            )
            .await
            .unwrap();
        let requests = llm.requests();
        let prompt = requests[before..]
            .iter()
            .map(|request| request.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            prompt.contains(fact),
            "{fact} recalled in a new chat: {prompt}"
        );
    }
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_the_flush_saves_each_fact_once() {
    let embeddings = FakeEmbeddings::start().await.unwrap();
    let dir = ScratchDir::new("clawvisor-flush-crash").unwrap();
    let user = 5_100;
    let staged = World::builder(script(false))
        .agent_with_bot(
            "ada",
            "context_tokens = 1200",
            "778:AAH-flush-test-token-0123456789",
            &[user],
            &[user],
        )
        .config_extra(&format!(
            "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\n\
             [providers.embed]\nkind = \"openai\"\nbase_url = \"{}\"\n\
             embeddings_model = \"fake-embed\"\nmax_retries = 0\n\
             [memory]\nembeddings_provider = \"embed\"\n",
            embeddings.openai_base_url()
        ))
        .stage(dir.path())
        .await;
    let bot = staged.bot("ada");
    let db = || rusqlite::Connection::open(dir.path().join("data/clawvisor.db")).unwrap();
    let durable = || -> Vec<String> {
        let conn = db();
        let mut statement = conn
            .prepare("SELECT text FROM memory_facts WHERE class = 'durable' ORDER BY id")
            .unwrap();
        statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let daemon = DaemonProcess::start(BINARY, dir.path(), &staged.env).expect("starts");
    // The tellings and short turns; the next (long) turn compacts both tellings away.
    let mut turns = vec![telling(true), telling(false)];
    turns.extend((0..3).map(filler));
    for (index, text) in turns.iter().enumerate() {
        staged.fake.push_message(bot, user, user, text);
        replies(&staged.fake, bot, index + 1).await;
    }
    assert!(durable().is_empty(), "nothing saved before a compaction");
    // Every embedding now takes a while, so the flush's ten saves take seconds: kill -9 after
    // the second one landed.
    embeddings.stall_next(1_000, Duration::from_millis(400));
    staged.fake.push_message(bot, user, user, &long_filler(3));
    wait_until(Duration::from_secs(60), "two facts saved", || async {
        let saved = durable().len();
        if saved >= 2 {
            Ok(())
        } else {
            Err(format!("{saved} saved"))
        }
    })
    .await;
    daemon.kill();
    let at_crash = durable();
    assert!(
        (2..FACTS.len()).contains(&at_crash.len()),
        "the crash came in the middle of the saves: {at_crash:?}"
    );
    assert_eq!(flushes_of_the_tellings(&staged.llm), 1);

    embeddings.stall_next(0, Duration::ZERO);
    let daemon = DaemonProcess::start(BINARY, dir.path(), &staged.env).expect("starts again");
    let sent = staged.fake.sent(bot).len();
    staged.fake.push_message(bot, user, user, &long_filler(4));
    wait_until(Duration::from_secs(60), "the facts saved", || async {
        let saved = durable();
        if saved.len() >= FACTS.len() && staged.fake.sent(bot).len() > sent {
            Ok(())
        } else {
            Err(format!("{} saved", saved.len()))
        }
    })
    .await;
    let saved = durable();
    for (fact, _) in FACTS {
        assert_eq!(
            saved.iter().filter(|text| *text == fact).count(),
            1,
            "{fact} saved once across the crash: {saved:?}"
        );
    }
    assert_eq!(
        flushes_of_the_tellings(&staged.llm),
        1,
        "the redo took the recorded facts instead of asking the model about those turns again"
    );
    let _ = daemon.terminate(Duration::from_secs(10));
}
