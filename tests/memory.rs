//! Memory end to end: the real daemon with a deterministic embeddings server on loopback.
//! Surprise gating (also across a restart), hybrid retrieval, the read model of a hierarchy,
//! governance (redact, purge: gone from facts, full text, vectors and the prompt; audited), index
//! persistence and corruption, bad input, full-text mode, and the tools through a scripted model.

use clawvisor::domain::ChatKey;
use clawvisor::protocol::memory::{
    Governance, MemoryMsg, MemoryStats, SaveOutcome, SaveRequest, SearchRequest, SearchResult,
};
use clawvisor::testkit::fake_embeddings::FakeEmbeddings;
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};

struct World {
    harness: Harness,
    llm: ScriptedLlm,
    embeddings: Option<FakeEmbeddings>,
}

fn options(llm: &ScriptedLlm, embeddings: Option<&FakeEmbeddings>) -> HarnessOptions {
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![
        agent_toml(
            "boss",
            "tools = [\"save_to_memory\", \"search_memory\", \"list_memory_facts\", \"forget\"]",
        ),
        agent_toml("worker", "reports_to = \"boss\""),
        agent_toml("other", ""),
    ];
    if let Some(embeddings) = embeddings {
        options.config_extra = format!(
            "[providers.embed]\nkind = \"openai\"\nbase_url = \"{}\"\nembeddings_model = \"fake-embed\"\nmax_retries = 0\n[memory]\nembeddings_provider = \"embed\"\n",
            embeddings.openai_base_url()
        );
    }
    options
}

async fn world(script: Script, semantic: bool) -> World {
    let llm = ScriptedLlm::start(script).await.unwrap();
    let embeddings = if semantic {
        Some(FakeEmbeddings::start().await.unwrap())
    } else {
        None
    };
    let harness = Harness::start(options(&llm, embeddings.as_ref()))
        .await
        .unwrap();
    World {
        harness,
        llm,
        embeddings,
    }
}

impl World {
    fn memory(&self) -> clawvisor::registry::Mailbox<MemoryMsg> {
        self.harness
            .daemon()
            .registry
            .lookup(&clawvisor::protocol::memory::NAME)
            .expect("the memory actor runs")
    }

    async fn save(
        &self,
        owner: &str,
        class: &str,
        chat: &str,
        text: &str,
    ) -> Result<SaveOutcome, String> {
        let request = SaveRequest {
            owner: owner.into(),
            class: class.into(),
            sensitivity: "normal".into(),
            source: "user_said".into(),
            chat: Some(chat.into()),
            text: text.into(),
            run_id: None,
            message_id: None,
        };
        ractor::call_t!(self.memory(), MemoryMsg::Save, 30_000, request)
            .unwrap()
            .map_err(|error| error.to_string())
    }

    async fn saved(&self, owner: &str, text: &str) -> i64 {
        match self.save(owner, "durable", "cli:test", text).await {
            Ok(SaveOutcome::Saved { id, .. }) => id,
            other => panic!("{text:?} not saved: {other:?}"),
        }
    }

    async fn search(&self, agent: Option<&str>, chat: &str, query: &str) -> SearchResult {
        let request = SearchRequest {
            agent: agent.map(str::to_string),
            chat: Some(chat.into()),
            query: query.into(),
            limit: 20,
            include_secret: false,
        };
        ractor::call_t!(self.memory(), MemoryMsg::Search, 30_000, request)
            .unwrap()
            .unwrap()
    }

    async fn texts(&self, agent: &str, chat: &str, query: &str) -> Vec<String> {
        self.search(Some(agent), chat, query)
            .await
            .hits
            .into_iter()
            .map(|hit| hit.fact.text)
            .collect()
    }

    async fn govern(&self, id: i64, operation: Governance) -> Result<(), String> {
        ractor::call_t!(
            self.memory(),
            |reply| MemoryMsg::Govern {
                id,
                operation,
                by: "operator (test)".into(),
                reply
            },
            10_000
        )
        .unwrap()
        .map_err(|error| error.to_string())
    }

    async fn stats(&self) -> MemoryStats {
        ractor::call_t!(self.memory(), MemoryMsg::Stats, 10_000).unwrap()
    }

    async fn count(&self, sql: &'static str) -> i64 {
        self.harness
            .store()
            .read(move |conn| Ok(conn.query_row(sql, [], |r| r.get(0))?))
            .await
            .unwrap()
    }

    /// Stops and starts the daemon on the same data (and the same fakes).
    async fn restart(self) -> World {
        let dir: ScratchDir = self.harness.stop().await;
        let harness = Harness::start_in(dir, options(&self.llm, self.embeddings.as_ref()))
            .await
            .unwrap();
        World { harness, ..self }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_duplicates_are_gated_out_distinct_facts_kept_and_a_restart_adds_no_duplicate() {
    let w = world(Script::new(), true).await;
    let dentist = w
        .saved("boss", "The user's dentist is Doctor Lee, on Tuesdays")
        .await;
    match w
        .save(
            "boss",
            "durable",
            "cli:test",
            "the user's dentist is doctor Lee on Tuesdays!",
        )
        .await
        .unwrap()
    {
        SaveOutcome::Duplicate { of, similarity } => {
            assert_eq!(of, dentist);
            assert!(similarity.unwrap() > 0.75, "{similarity:?}");
        }
        other => panic!("a near duplicate was saved: {other:?}"),
    }
    let garage = w.saved("boss", "The garage door code is 4411").await;
    assert_ne!(garage, dentist);
    // Another owner may hold the same fact: gating is per owner.
    w.saved("worker", "The user's dentist is Doctor Lee, on Tuesdays")
        .await;
    assert!(w.stats().await.mode.starts_with("semantic"));

    let w = w.restart().await;
    assert!(matches!(
        w.save("boss", "durable", "cli:test", "The user's dentist is Doctor Lee, on Tuesdays")
            .await
            .unwrap(),
        SaveOutcome::Duplicate { of, .. } if of == dentist
    ));
    assert_eq!(w.count("SELECT COUNT(*) FROM memory_facts").await, 3);
    assert_eq!(w.stats().await.indexed, 3, "the index came back whole");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_retrieval_finds_keywords_vectors_miss_and_paraphrases_keywords_miss() {
    let w = world(Script::new(), true).await;
    let embeddings = w.embeddings.as_ref().unwrap();
    let cat = "The family cat answers to Miso";
    let code = "Wifi password is XK7741QZ";
    // A paraphrase that shares no word with the fact, but means it: same vector.
    let paraphrase = "what is our pet called";
    embeddings.set_vector(paraphrase, embeddings.vector_for(cat));
    // A keyword query whose vector points elsewhere (as a rare token often does).
    let keyword = "XK7741QZ";
    embeddings.set_vector(
        keyword,
        embeddings.vector_for("holiday plans in the mountains"),
    );
    let cat_id = w.saved("boss", cat).await;
    let code_id = w.saved("boss", code).await;
    for filler in [
        "Holiday plans in the mountains next summer",
        "The user prefers tea over coffee",
        "Bins go out on Thursday evenings",
    ] {
        w.saved("boss", filler).await;
    }

    let result = w.search(Some("boss"), "cli:test", paraphrase).await;
    assert_eq!(result.mode, "hybrid");
    let top = &result.hits[0];
    assert_eq!(top.fact.id, cat_id, "{:?}", result.hits);
    assert_eq!(top.vector_rank, Some(1));
    assert_eq!(
        top.full_text_rank, None,
        "no shared word: only vectors find it"
    );

    let result = w.search(Some("boss"), "cli:test", keyword).await;
    let top = &result.hits[0];
    assert_eq!(top.fact.id, code_id, "{:?}", result.hits);
    assert_eq!(top.full_text_rank, Some(1));
    assert_ne!(
        top.vector_rank,
        Some(1),
        "the vector ranks it lower; the keyword carries it"
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_agent_of_a_hierarchy_reads_exactly_what_it_should() {
    let w = world(Script::new(), true).await;
    w.saved("boss", "boss note about the budget").await;
    w.saved("worker", "worker note about the budget").await;
    w.saved("other", "other note about the budget").await;
    w.saved("platform", "platform note about the budget").await;
    assert!(matches!(
        w.save(
            "boss",
            "restricted",
            "tg:1",
            "spare budget cash sits in the desk drawer"
        )
        .await
        .unwrap(),
        SaveOutcome::Saved { .. }
    ));
    let mut seen = w.texts("boss", "tg:1", "budget").await;
    seen.sort();
    assert_eq!(
        seen,
        [
            "boss note about the budget",
            "platform note about the budget",
            "spare budget cash sits in the desk drawer",
            "worker note about the budget",
        ]
    );
    let mut seen = w.texts("boss", "tg:2", "budget").await;
    seen.sort();
    assert_eq!(
        seen,
        [
            "boss note about the budget",
            "platform note about the budget",
            "worker note about the budget",
        ],
        "a private memory stays in its chat"
    );
    let mut seen = w.texts("worker", "tg:1", "budget").await;
    seen.sort();
    assert_eq!(
        seen,
        [
            "platform note about the budget",
            "worker note about the budget"
        ],
        "a report does not read its boss"
    );
    let mut seen = w.texts("other", "tg:1", "budget").await;
    seen.sort();
    assert_eq!(
        seen,
        [
            "other note about the budget",
            "platform note about the budget"
        ]
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redacted_and_purged_memories_vanish_everywhere_and_the_audit_says_so() {
    let script = Script::new().rule(Rule::text("noted"));
    let w = world(script, true).await;
    let secret = w.saved("boss", "The safe combination is 31-62-7").await;
    let purged = w
        .saved("boss", "The spare key hides under the blue flowerpot")
        .await;
    w.saved("boss", "The user likes jazz").await;
    assert!(
        !w.texts("boss", "cli:x", "safe combination")
            .await
            .is_empty()
    );

    w.govern(secret, Governance::Redact).await.unwrap();
    w.govern(purged, Governance::Purge).await.unwrap();
    assert!(
        w.govern(purged, Governance::Purge).await.is_err(),
        "purged once"
    );
    for query in ["safe combination 31-62-7", "spare key blue flowerpot"] {
        let texts = w.texts("boss", "cli:x", query).await;
        assert!(
            texts
                .iter()
                .all(|t| !t.contains("31-62-7") && !t.contains("flowerpot")),
            "{query}: {texts:?}"
        );
        let ids: Vec<i64> = w
            .search(None, "cli:x", query)
            .await
            .hits
            .iter()
            .map(|hit| hit.fact.id)
            .collect();
        assert!(!ids.contains(&secret) && !ids.contains(&purged), "{ids:?}");
    }
    assert_eq!(
        w.count("SELECT COUNT(*) FROM memory_fts WHERE memory_fts MATCH '\"flowerpot\" OR \"combination\"'")
            .await,
        0,
        "gone from the full-text index"
    );
    assert_eq!(
        w.count("SELECT COUNT(*) FROM memory_facts WHERE text LIKE '%31-62-7%' OR embedding IS NOT NULL AND id = 1")
            .await,
        0
    );
    assert_eq!(
        w.stats().await.indexed,
        1,
        "only the jazz memory is left in the index"
    );
    // The prompt's memory layer no longer carries them either.
    let reply = w
        .harness
        .ask(
            "boss",
            &ChatKey::cli("x"),
            "what is the safe combination and where is the key?",
        )
        .await
        .unwrap();
    assert_eq!(reply.text, "noted");
    let request = w.llm.requests().last().unwrap().to_string();
    assert!(!request.contains("31-62-7") && !request.contains("flowerpot"));
    assert_eq!(
        w.count("SELECT COUNT(*) FROM audit_log WHERE action IN ('memory.redact', 'memory.purge')")
            .await,
        2
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_survives_a_restart_and_a_corrupt_dump_is_rebuilt_from_sqlite() {
    let w = world(Script::new(), true).await;
    for text in [
        "The boiler was serviced in March",
        "The car insurance renews in October",
        "The user's sister lives in Lyon",
    ] {
        w.saved("boss", text).await;
    }
    let before = w
        .texts("boss", "cli:x", "when does the insurance renew")
        .await;
    let w = w.restart().await;
    assert_eq!(
        w.texts("boss", "cli:x", "when does the insurance renew")
            .await,
        before
    );

    // Damage every file of the dump: the next start rebuilds from SQLite.
    let dir: ScratchDir = w.harness.stop().await;
    let dump = dir.path().join("data/memory");
    let mut damaged = 0;
    for entry in std::fs::read_dir(&dump).unwrap() {
        let path = entry.unwrap().path();
        std::fs::write(&path, b"garbage").unwrap();
        damaged += 1;
    }
    assert!(damaged > 0, "the index was dumped at stop");
    let harness = Harness::start_in(dir, options(&w.llm, w.embeddings.as_ref()))
        .await
        .unwrap();
    let w = World { harness, ..w };
    assert_eq!(w.stats().await.indexed, 3, "rebuilt from SQLite");
    assert_eq!(
        w.texts("boss", "cli:x", "when does the insurance renew")
            .await,
        before
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_clearly_and_nothing_is_stored_half_way() {
    let w = world(Script::new(), true).await;
    let embeddings = w.embeddings.as_ref().unwrap();
    w.saved("boss", "A first memory sets the dimension").await;
    let empty = w.save("boss", "durable", "cli:x", "   ").await.unwrap_err();
    assert!(empty.contains("empty"), "{empty}");
    let huge = w
        .save("boss", "durable", "cli:x", &"word ".repeat(2_000))
        .await
        .unwrap_err();
    assert!(huge.contains("at most"), "{huge}");
    let class = w.save("boss", "eternal", "cli:x", "x y").await.unwrap_err();
    assert!(class.contains("unknown class"), "{class}");
    embeddings.wrong_dimension_next(1);
    let wrong = w
        .save(
            "boss",
            "durable",
            "cli:x",
            "A memory embedded with the wrong size",
        )
        .await
        .unwrap_err();
    assert!(wrong.contains("not saved"), "{wrong}");
    embeddings.nan_next(1);
    let nan = w
        .save("boss", "durable", "cli:x", "A memory embedded as NaN")
        .await
        .unwrap_err();
    assert!(nan.contains("not saved"), "{nan}");
    assert_eq!(w.count("SELECT COUNT(*) FROM memory_facts").await, 1);
    assert_eq!(w.count("SELECT COUNT(*) FROM memory_fts").await, 1);
    // A failing provider leaves search working on full text.
    embeddings.fail_next(1, 500, None);
    let result = w.search(Some("boss"), "cli:x", "first memory").await;
    assert!(result.mode.starts_with("full_text"), "{}", result.mode);
    assert_eq!(result.hits.len(), 1);
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_embeddings_memory_works_in_full_text_mode_through_the_tools() {
    let script = Script::new()
        .rule(Rule::text("I will remember that.").when_after_tool_result("save_to_memory"))
        .rule(
            Rule::tool_call(
                "save_to_memory",
                r#"{"text": "The user's dentist is Doctor Lee"}"#,
            )
            .when_last_user_contains("remember"),
        )
        .rule(Rule::text("Doctor Lee."));
    let w = world(script, false).await;
    let stats = w.stats().await;
    assert!(stats.mode.starts_with("full-text only"), "{}", stats.mode);
    let chat = ChatKey::cli("dentist");
    let reply = w
        .harness
        .ask("boss", &chat, "please remember my dentist is Doctor Lee")
        .await
        .unwrap();
    assert_eq!(reply.text, "I will remember that.");
    // The same fact again, after a restart: not saved twice.
    let w = w.restart().await;
    w.harness
        .ask("boss", &chat, "remember it again: my dentist is Doctor Lee")
        .await
        .unwrap();
    assert_eq!(w.count("SELECT COUNT(*) FROM memory_facts").await, 1);
    // A new conversation recalls it in the prompt's memory layer.
    let reply = w
        .harness
        .ask("boss", &ChatKey::cli("later"), "who is my dentist?")
        .await
        .unwrap();
    assert_eq!(reply.text, "Doctor Lee.");
    let last = w.llm.requests().last().unwrap().to_string();
    assert!(last.contains("The user's dentist is Doctor Lee"), "{last}");
    // Another agent does not see it.
    w.harness
        .ask("other", &ChatKey::cli("later"), "who is my dentist?")
        .await
        .unwrap();
    let last = w.llm.requests().last().unwrap().to_string();
    assert!(!last.contains("Doctor Lee\""), "{last}");
    assert!(!last.contains("The user's dentist is Doctor Lee"), "{last}");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn studio_reviews_searches_and_governs_memory() {
    let w = world(Script::new(), true).await;
    let id = w
        .saved("worker", "The printer toner is in the hall cupboard")
        .await;
    // Scripts on the server send the daemon's local access token.
    let (studio, http) = w.harness.studio_http().await;
    let base = format!("{studio}/api/v1/memory");
    let review: serde_json::Value = http.get(&base).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        review["memories"][0]["text"],
        "The printer toner is in the hall cupboard"
    );
    let found: serde_json::Value = http
        .get(format!("{base}/search?q=toner"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(found["hits"][0]["memory"]["id"], id);
    assert_eq!(found["hits"][0]["full_text_rank"], 1);
    let reclassified = http
        .post(format!("{base}/{id}/reclassify"))
        .json(&serde_json::json!({"sensitivity": "secret"}))
        .send()
        .await
        .unwrap();
    assert_eq!(reclassified.status().as_u16(), 200);
    // Each operation in turn, with the status it must get.
    for (operation, expected) in [
        ("shred", 404),
        ("archive", 200),
        ("archive", 404),
        ("restore", 200),
    ] {
        let response = http
            .post(format!("{base}/{id}/{operation}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected, "{operation}");
    }
    assert_eq!(w.stats().await.indexed, 1, "restored into the index");
    let stats: serde_json::Value = http
        .get(format!("{base}/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        stats["mode"].as_str().unwrap().starts_with("semantic"),
        "{stats}"
    );
    assert_eq!(
        w.count("SELECT COUNT(*) FROM audit_log WHERE action LIKE 'memory.%'")
            .await,
        3,
        "reclassify, archive, restore"
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stats_and_reindex_commands_read_the_database() {
    let w = world(Script::new(), true).await;
    for text in [
        "The porch light is on a timer",
        "The user's bike is a blue Brompton",
    ] {
        w.saved("boss", text).await;
    }
    let dir: ScratchDir = w.harness.stop().await;
    let config = dir.path().join("clawvisor.toml");
    let run = |command: &'static str| {
        let config = config.clone();
        let cwd = dir.path().to_path_buf();
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
                    .current_dir(cwd)
                    .args(["--config", config.to_str().unwrap(), "memory", command])
                    .output()
                    .unwrap()
            })
            .await
            .unwrap()
        }
    };
    let stats = run("stats").await;
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success(), "{text}");
    assert!(text.contains("2 live (2 embedded)"), "{text}");
    assert!(text.contains("provider embeddings"), "{text}");
    let dump = dir.path().join("data/memory");
    std::fs::remove_dir_all(&dump).unwrap();
    let reindex = run("reindex").await;
    assert!(
        reindex.status.success(),
        "{}",
        String::from_utf8_lossy(&reindex.stderr)
    );
    assert!(String::from_utf8_lossy(&reindex.stdout).contains("indexed 2 memories"));
    assert!(std::fs::read_dir(&dump).unwrap().count() > 0, "dumped");
}
