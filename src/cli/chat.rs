//! `clawvisor chat <agent>`: a terminal conversation through the same actors as every channel.
//!
//! It runs its own runtime on the configured database without Studio, bots or the scheduler, so
//! it can be used beside a running daemon without polling a bot token twice or firing a job twice.
//! Its boot is recorded as `local` (`store::events::BootKind`): operator commands (`jobs`, `mcp`)
//! work on the files beside it instead of calling an API it does not serve.
//! Output streams as the model writes; `/stop` cancels the run, `/new` starts a fresh session,
//! `/quit` (or Ctrl-D) leaves.

use std::io::Write;
use std::process::ExitCode;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::LoadedConfig;
use crate::daemon;
use crate::domain::StartOptions;
use crate::domain::{ChatKey, Inbound, InboundSource, OutEvent, Sender, SessionCommand};
use crate::protocol::agent::Agent;
use crate::protocol::local::LocalChannel;

pub async fn run(loaded: LoadedConfig, agent: &str) -> ExitCode {
    let Some(spec) = loaded.agent(agent).cloned() else {
        let known: Vec<&str> = loaded.agents.iter().map(|a| a.name.as_str()).collect();
        eprintln!("no agent is named `{agent}` (known: {})", known.join(", "));
        return ExitCode::from(daemon::EXIT_CONFIG);
    };
    let daemon = match daemon::start_with(loaded, StartOptions::local_only()).await {
        Ok(daemon) => daemon,
        Err(error) => {
            eprintln!("clawvisor: {error}");
            return ExitCode::from(error.exit_code());
        }
    };
    let user = std::env::var("USER").unwrap_or_else(|_| "operator".into());
    let chat = ChatKey::cli(&user);
    let Some(mut outputs) = LocalChannel::new(&daemon.registry).subscribe(&chat).await else {
        eprintln!("the local channel did not start");
        daemon.stop().await;
        return ExitCode::FAILURE;
    };
    println!(
        "Chatting with {} ({}/{}). /stop cancels, /new starts fresh, /quit leaves.",
        spec.name, spec.provider, spec.model
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut printed = String::new();
    prompt();
    loop {
        tokio::select! {
            line = lines.next_line() => {
                let Ok(Some(line)) = line else { break };
                let line = line.trim().to_string();
                let agent = Agent::new(&daemon.registry, &spec.name);
                let sent = match line.as_str() {
                    "" => { prompt(); Ok(()) }
                    "/quit" | "/exit" => break,
                    "/stop" => agent.command(chat.clone(), SessionCommand::Stop),
                    "/new" => agent.command(chat.clone(), SessionCommand::New),
                    text => {
                        printed.clear();
                        agent.inbound(Inbound {
                            agent: spec.name.clone(),
                            chat: chat.clone(),
                            sender: Sender::new(format!("cli:{user}"), user.clone()),
                            text: text.to_string(),
                            attachments: Vec::new(),
                            source: InboundSource::Local,
                            received_ms: crate::clock::now_ms(),
                            context: None,
                            correlation: None,
                        })
                    }
                };
                if sent.is_err() {
                    println!("(the agent is restarting; try again in a moment)");
                }
            }
            output = outputs.recv() => {
                let Some(output) = output else { break };
                match output.event {
                    OutEvent::Partial { text } => {
                        if let Some(rest) = text.strip_prefix(printed.as_str()) {
                            print!("{rest}");
                            let _ = std::io::stdout().flush();
                            printed = text;
                        }
                    }
                    OutEvent::Final { text, .. } => {
                        match text.strip_prefix(printed.as_str()) {
                            Some(rest) => println!("{rest}"),
                            None => println!("\n{text}"),
                        }
                        printed.clear();
                        prompt();
                    }
                    OutEvent::Notice { text } => {
                        println!("[{text}]");
                        prompt();
                    }
                    OutEvent::Tool { name, status } => println!("  · {name} {status}"),
                    OutEvent::Working | OutEvent::Silent { .. } => {}
                }
            }
        }
    }
    daemon.stop().await;
    ExitCode::SUCCESS
}

fn prompt() {
    print!("> ");
    let _ = std::io::stdout().flush();
}
