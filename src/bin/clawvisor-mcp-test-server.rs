//! A small MCP server for clawvisor's tests and benchmarks, built on rmcp's server side.
//!
//! Usage: `clawvisor-mcp-test-server [--http 127.0.0.1:0] [--mode normal|no-init|garbage]
//! [--grandchild] [--start-delay-ms N]`.
//!
//! - stdio by default; with `--http ADDR` it serves streamable HTTP at `http://ADDR/mcp` and
//!   prints `listening on http://HOST:PORT/mcp` as its first line on stdout.
//! - Tools: `echo` (read-only), `add`, `write_note` (destructive), `sleep` (read-only, for
//!   timeouts), `crash` (exits the process in the middle of the call), `pid` (read-only).
//! - Fault modes: `no-init` reads its input and never answers; `garbage` answers every line with
//!   text that is not JSON-RPC.
//! - `--grandchild` starts a long `sleep` child first (it inherits the process group and the
//!   environment), to show that a whole group is reaped.
//! - `--start-delay-ms N` sleeps N ms before it reads or answers anything, like a server that is
//!   slow to start (an interpreter loading its packages), to show what waits for it.

use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: f64,
    b: f64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct NoteArgs {
    text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

#[derive(Debug, Clone)]
struct TestServer {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl TestServer {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Echoes the text back",
        annotations(read_only_hint = true)
    )]
    async fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Adds two numbers")]
    async fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(
        description = "Writes a note (pretends to)",
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    async fn write_note(&self, Parameters(NoteArgs { text }): Parameters<NoteArgs>) -> String {
        format!("saved a note of {} characters", text.chars().count())
    }

    #[tool(
        description = "Sleeps, then answers",
        annotations(read_only_hint = true)
    )]
    async fn sleep(&self, Parameters(SleepArgs { ms }): Parameters<SleepArgs>) -> String {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        format!("slept {ms} ms")
    }

    #[tool(description = "Exits the server process in the middle of the call")]
    async fn crash(&self) -> String {
        std::process::exit(3)
    }

    #[tool(
        description = "The server's process id",
        annotations(read_only_hint = true)
    )]
    async fn pid(&self) -> String {
        std::process::id().to_string()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

struct Options {
    http: Option<String>,
    mode: String,
    grandchild: bool,
    start_delay: Duration,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        http: None,
        mode: "normal".into(),
        grandchild: false,
        start_delay: Duration::ZERO,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => options.http = Some(args.next().ok_or("--http needs an address")?),
            "--mode" => options.mode = args.next().ok_or("--mode needs a value")?,
            "--grandchild" => options.grandchild = true,
            "--start-delay-ms" => {
                let value = args.next().ok_or("--start-delay-ms needs a number")?;
                let ms = value.parse().map_err(|_| {
                    format!("--start-delay-ms: `{value}` is not a number of milliseconds")
                })?;
                options.start_delay = Duration::from_millis(ms);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("clawvisor-mcp-test-server: {error}");
            std::process::exit(2);
        }
    };
    // Kept alive for the process's lifetime; the grandchild is meant to outlive a SIGKILL of us.
    let _grandchild = options.grandchild.then(|| {
        std::process::Command::new("sleep")
            .arg("600")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
    });
    tokio::time::sleep(options.start_delay).await;
    let result = match (options.mode.as_str(), &options.http) {
        ("no-init", _) => never_answer().await,
        ("garbage", _) => answer_garbage().await,
        ("normal", None) => serve_stdio().await,
        ("normal", Some(address)) => serve_http(address).await,
        (other, _) => Err(format!("unknown mode {other}")),
    };
    if let Err(error) = result {
        eprintln!("clawvisor-mcp-test-server: {error}");
        std::process::exit(1);
    }
}

async fn serve_stdio() -> Result<(), String> {
    let service = TestServer::new()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| error.to_string())?;
    service.waiting().await.map_err(|error| error.to_string())?;
    Ok(())
}

async fn serve_http(address: &str) -> Result<(), String> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(TestServer::new()),
            Default::default(),
            StreamableHttpServerConfig::default().with_sse_keep_alive(None),
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| format!("cannot bind {address}: {error}"))?;
    let bound = listener.local_addr().map_err(|error| error.to_string())?;
    // Without TCP_NODELAY, small SSE writes wait for the client's delayed ACK (~40 ms a call).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let mut stdout = tokio::io::stdout();
    let line = format!("listening on http://{bound}/mcp\n");
    let _ = stdout.write_all(line.as_bytes()).await;
    let _ = stdout.flush().await;
    axum::serve(listener, router)
        .await
        .map_err(|error| error.to_string())
}

/// Reads requests and never answers (not even `initialize`).
async fn never_answer() -> Result<(), String> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(_)) = lines.next_line().await {}
    // Stdin closed: stay silent until killed, like a hung server.
    std::future::pending::<()>().await;
    Ok(())
}

/// Answers every line with text that is not JSON-RPC.
async fn answer_garbage() -> Result<(), String> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Ok(Some(_)) = lines.next_line().await {
        let _ = stdout
            .write_all(b"this is not json {{{\n\x00\xff garbage\n{\"jsonrpc\": 7}\n")
            .await;
        let _ = stdout.flush().await;
    }
    Ok(())
}
