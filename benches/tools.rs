//! The cost of the built-in tools' own machinery: confining a path (the explained checks and the
//! descriptor walk), reducing a 100 KB HTML page to text, a whole `read_file` call, and a whole
//! `shell` call of `true` (spawn, capture, group clean-up), and the sandbox's own cost per call in
//! each profile (namespaces + Landlock + exec of `true`). Prints median and p99.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use clawvisor::domain::ChatKey;
use clawvisor::registry::Registry;
use clawvisor::store::{Store, StoreOptions};
use clawvisor::tool::{Tool, ToolContext, ToolSettings};
use clawvisor::tools::files::ReadFileTool;
use clawvisor::tools::shell::{ShellTool, run_confined};
use clawvisor::tools::web_fetch::html_to_text;
use clawvisor::tools::workspace::{Purpose, Workspace};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn context(dir: &tempfile::TempDir) -> ToolContext {
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(workspace.join("notes/2024/march")).unwrap();
    std::fs::write(workspace.join("notes/2024/march/todo.md"), "x".repeat(4096)).unwrap();
    ToolContext {
        agent: "bench".to_string(),
        chat: ChatKey::cli("bench"),
        run_id: 1,
        workspace,
        settings: Arc::new(ToolSettings {
            shell_enabled: true,
            ..ToolSettings::default()
        }),
        registry: Registry::new(),
        store: Store::open(&dir.path().join("clawvisor.db"), StoreOptions::default()).unwrap(),
        cancel: CancellationToken::new(),
        timezone: chrono_tz::Tz::UTC,
        egress: Default::default(),
    }
}

fn sample_page() -> String {
    let mut page =
        String::from("<html><head><title>Bench</title><style>body{margin:0}</style></head><body>");
    while page.len() < 100 * 1024 {
        page.push_str(
            "<div class=\"post\"><h2>Heading &amp; more</h2><p>Some <b>bold</b> and \
             <a href=\"/x\">linked</a> text, with entities &lt;like&gt; these.</p>\
             <script>var tracking = 1;</script><ul><li>one</li><li>two</li></ul></div>\n",
        );
    }
    page.push_str("</body></html>");
    page
}

fn confinement(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir);
    let workspace = Workspace::new(&ctx.workspace).unwrap();
    let path = "notes/2024/march/todo.md";

    c.bench_function("workspace_resolve_4_components", |b| {
        b.iter(|| workspace.resolve(path, Purpose::Read).unwrap())
    });
    c.bench_function("workspace_resolve_and_open", |b| {
        b.iter(|| {
            let resolved = workspace.resolve(path, Purpose::Read).unwrap();
            workspace.open_read(&resolved).unwrap()
        })
    });

    let mut samples = Vec::with_capacity(20_000);
    for _ in 0..20_000 {
        let start = Instant::now();
        let resolved = workspace.resolve(path, Purpose::Read).unwrap();
        let file = workspace.open_read(&resolved).unwrap();
        samples.push(start.elapsed());
        drop(file);
    }
    support::report("confinement: resolve + open (4 components)", &mut samples);
    ctx.store.stop_writer();
}

fn html(c: &mut Criterion) {
    let page = sample_page();
    c.bench_function("html_to_text_100kb", |b| b.iter(|| html_to_text(&page)));
    let mut samples = Vec::with_capacity(500);
    for _ in 0..500 {
        let start = Instant::now();
        let text = html_to_text(&page);
        samples.push(start.elapsed());
        assert!(!text.is_empty());
    }
    support::report("html_to_text: 100 KB page", &mut samples);
}

fn tool_calls(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir);
    let read_args = json!({"path": "notes/2024/march/todo.md"});
    let shell_args = json!({"command": "true"});

    c.bench_function("read_file_4kb_call", |b| {
        b.to_async(&rt)
            .iter(|| async { ReadFileTool.call(read_args.clone(), &ctx).await.unwrap() })
    });

    let (read_samples, shell_samples) = rt.block_on(async {
        let mut read_samples = Vec::with_capacity(5_000);
        for _ in 0..5_000 {
            let start = Instant::now();
            ReadFileTool.call(read_args.clone(), &ctx).await.unwrap();
            read_samples.push(start.elapsed());
        }
        let mut shell_samples = Vec::with_capacity(300);
        for _ in 0..300 {
            let start = Instant::now();
            let output = ShellTool.call(shell_args.clone(), &ctx).await.unwrap();
            shell_samples.push(start.elapsed());
            assert!(output.text.starts_with("exit code: 0"));
        }
        (read_samples, shell_samples)
    });
    // Per profile: the call of `true` through the sandbox (HOME, ruleset, namespaces, exec).
    let profile_samples: Vec<(&str, Vec<Duration>)> = rt.block_on(async {
        let mut all = Vec::new();
        for (name, reach) in clawvisor::sandbox::PROFILES {
            let mut samples = Vec::with_capacity(300);
            for _ in 0..300 {
                let start = Instant::now();
                let output = run_confined("true", reach, &ctx).await.unwrap();
                samples.push(start.elapsed());
                assert!(output.text.starts_with("exit code: 0"), "{}", output.text);
            }
            all.push((name, samples));
        }
        all
    });
    // The same `true` started without any sandbox (bash, piped output, wait): the baseline the
    // profiles above are compared with.
    let bare_samples: Vec<Duration> = rt.block_on(async {
        let bash = clawvisor::sandbox::find_bash(&clawvisor::sandbox::shell_path()).unwrap();
        let mut samples = Vec::with_capacity(300);
        for _ in 0..300 {
            let start = Instant::now();
            let output = tokio::process::Command::new(&bash)
                .args(["--noprofile", "--norc", "-c", "true"])
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .unwrap();
            samples.push(start.elapsed());
            assert!(output.status.success());
        }
        samples
    });
    support::report(
        "bash -c true without any sandbox (baseline)",
        &mut bare_samples.clone(),
    );
    eprintln!(
        "sandbox on this machine: {}",
        clawvisor::sandbox::protections().summary()
    );
    for (name, mut samples) in profile_samples {
        support::report(&format!("shell `true`, profile {name}"), &mut samples);
    }
    support::report(
        "read_file: whole call, 4 KB file",
        &mut read_samples.clone(),
    );
    support::report(
        "shell: whole call of `true` (spawn, capture, group kill)",
        &mut shell_samples.clone(),
    );
    ctx.store.stop_writer();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = confinement, html, tool_calls
}
criterion_main!(benches);
