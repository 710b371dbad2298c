//! The kernel-confinement cases of the shell, as one table run by two drivers: the daemon's own
//! shell (`tests/confinement.rs`, each command with exactly the case's profile, standing in for a
//! command the classifier misread) and a paired node's shell over the wire (`tests/nodes.rs`,
//! where the node's own classifier picks the profile and the daemon's approval token must match).
//!
//! Each case says which profile it runs with, what the kernel must make of it, and what a node
//! does with it: `OnNode::Runs` when the classifier rates the command with exactly that profile
//! (the daemon would approve it with that level, and the node runs it confined the same way), or
//! `OnNode::RefusesTheToken` when the classifier rates it higher (an L3, or a wider profile): a
//! token claiming the case's narrower rating is refused by the node, which re-classifies.
//! Both facts about the classifier are asserted, so the table cannot drift from it.

#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawvisor::policy::{Reach, RiskLevel, Writes, classify_shell};
use clawvisor::testkit::wait_until;

/// The sandbox profile a case runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// L0: reads only, no network.
    ReadOnly,
    /// L1: writes the workspace, no network.
    Workspace,
    /// An approved L2 with the network and writes outside the workspace.
    Network,
}

impl Profile {
    pub fn reach(self) -> Reach {
        match self {
            Profile::ReadOnly => Reach::READ_ONLY,
            Profile::Workspace => Reach::WORKSPACE,
            Profile::Network => Reach {
                writes: Writes::Anywhere,
                network: true,
            },
        }
    }

    /// The level a daemon would claim in a token for this profile.
    pub fn level(self) -> RiskLevel {
        match self {
            Profile::ReadOnly => RiskLevel::L0,
            Profile::Workspace => RiskLevel::L1,
            Profile::Network => RiskLevel::L2,
        }
    }
}

/// What the kernel must make of a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// It fails with a permission or network error.
    Refused,
    /// It succeeds and prints exactly this on stdout.
    Prints(&'static str),
    /// It reaches the host's loopback listener.
    ReachesTheListener,
}

/// What a node does with a case (see the module's header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnNode {
    Runs,
    RefusesTheToken,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub command: String,
    pub profile: Profile,
    pub expect: Expect,
    pub on_node: OnNode,
}

impl Case {
    /// Asserts what the case says about the classifier: the daemon and the node rate the command
    /// with the case's profile at a level a person may approve, or they rate it higher.
    pub fn check_the_classifier(&self) {
        let assessment = classify_shell(&self.command);
        let same = assessment.reach == self.profile.reach() && assessment.level <= RiskLevel::L2;
        let higher =
            assessment.level > self.profile.level() || assessment.reach != self.profile.reach();
        match self.on_node {
            OnNode::Runs => assert!(
                same,
                "`{}` is rated {} with {}, not the case's {:?}",
                self.command,
                assessment.level.as_str(),
                assessment.reach.describe(),
                self.profile
            ),
            OnNode::RefusesTheToken => assert!(
                higher && !same,
                "`{}` is rated {} with {}: the case's {:?} is not a misreading",
                self.command,
                assessment.level.as_str(),
                assessment.reach.describe(),
                self.profile
            ),
        }
    }
}

/// What a driver got for a case.
pub enum Outcome {
    /// The command ran; the tool's text.
    Ran(String),
    /// A node refused the token (the text of its refusal).
    TokenRefused(String),
}

pub const RAW_SOCKET: &str = "python3 -c 'import socket; socket.socket(socket.AF_INET, \
                              socket.SOCK_RAW, socket.IPPROTO_ICMP)'";
pub const PACKET_SOCKET: &str =
    "python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)'";
/// Text that must never appear in any output.
const SECRETS: &[&str] = &[
    "data-dir-secret",
    "studio-token-secret",
    "sibling-secret",
    "config-secret",
    "CARGO",
];

/// Where the cases run: the workspace, the protected directories, the process standing for the
/// daemon (or the node), a sibling process with a secret in its environment and a listener on
/// the host's loopback.
pub struct Setting {
    pub workspace: PathBuf,
    pub data: PathBuf,
    pub config: PathBuf,
    pub host_pid: u32,
    pub port: u16,
    listener: std::net::TcpListener,
    sibling: std::process::Child,
    tag: String,
}

impl Setting {
    pub fn new(workspace: &Path, data: &Path, config: &Path, host_pid: u32) -> Setting {
        std::fs::create_dir_all(workspace).unwrap();
        std::fs::write(workspace.join("notes.txt"), "kept notes\n").unwrap();
        std::fs::write(data.join("secret.txt"), "data-dir-secret").unwrap();
        std::fs::write(data.join("studio.token"), "studio-token-secret").unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let sibling = std::process::Command::new("sleep")
            .arg("60")
            .env("SIBLING_SECRET", "sibling-secret")
            .spawn()
            .unwrap();
        Setting {
            workspace: workspace.to_path_buf(),
            data: data.to_path_buf(),
            config: config.to_path_buf(),
            host_pid,
            port,
            listener,
            sibling,
            tag: format!("{}-{port}", std::process::id()),
        }
    }

    fn outside(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/clawvisor-profile-escape-{}", self.tag))
    }

    /// `command` after a network client (to a closed port, so it fails at once): the classifier
    /// rates the whole line with the network and writes outside the workspace.
    fn with_network(&self, command: &str) -> String {
        format!(
            "curl -s -m 2 -o /tmp/clawvisor-curl-{} http://127.0.0.1:9/; {command}",
            self.tag
        )
    }

    /// The table.
    pub fn cases(&self) -> Vec<Case> {
        use Expect::*;
        use OnNode::*;
        use Profile::*;
        let port = self.port;
        let case = |command: String, profile, expect, on_node| Case {
            command,
            profile,
            expect,
            on_node,
        };
        let tcp = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
        let connect = format!(
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}))'"
        );
        let sibling = format!("cat /proc/{}/environ", self.sibling.id());
        let host = format!("cat /proc/{}/environ", self.host_pid);
        let secret = format!("cat {}", self.data.join("secret.txt").display());
        let token = format!("cat {}", self.data.join("studio.token").display());
        vec![
            // L0: writes nothing, reaches no network, sees no process, runs as 65534.
            case(
                "touch planted.txt".into(),
                ReadOnly,
                Refused,
                RefusesTheToken,
            ),
            case(
                "echo planted > planted.txt".into(),
                ReadOnly,
                Refused,
                RefusesTheToken,
            ),
            case("mkdir planted.d".into(), ReadOnly, Refused, RefusesTheToken),
            case(tcp.clone(), ReadOnly, Refused, RefusesTheToken),
            case(connect, ReadOnly, Refused, RefusesTheToken),
            case(RAW_SOCKET.into(), ReadOnly, Refused, RefusesTheToken),
            case(PACKET_SOCKET.into(), ReadOnly, Refused, RefusesTheToken),
            case(sibling, ReadOnly, Refused, Runs),
            case(host.clone(), ReadOnly, Refused, Runs),
            case(secret.clone(), ReadOnly, Refused, Runs),
            case(
                "cat notes.txt; id -u; ls /usr/bin | grep -cx bash".into(),
                ReadOnly,
                Prints("kept notes\n65534\n1\n"),
                Runs,
            ),
            // L1: writes the workspace only, no network.
            case(
                "echo made > made.txt && cat made.txt".into(),
                Workspace,
                Prints("made\n"),
                Runs,
            ),
            case(
                format!("touch {}", self.outside().display()),
                Workspace,
                Refused,
                RefusesTheToken,
            ),
            case(tcp.clone(), Workspace, Refused, RefusesTheToken),
            case(RAW_SOCKET.into(), Workspace, Refused, RefusesTheToken),
            // Approved with the network: reaches the host's listener, holds no capability, and
            // reads none of the daemon's (the node's) files or process.
            case(
                format!("{tcp} && echo connected"),
                Network,
                ReachesTheListener,
                RefusesTheToken,
            ),
            case(
                format!(
                    "curl -s -m 1 -o /tmp/clawvisor-curl-{} http://127.0.0.1:{port}/; echo tried",
                    self.tag
                ),
                Network,
                ReachesTheListener,
                Runs,
            ),
            case(PACKET_SOCKET.into(), Network, Refused, RefusesTheToken),
            case(RAW_SOCKET.into(), Network, Refused, RefusesTheToken),
            case(self.with_network(&secret), Network, Refused, Runs),
            case(self.with_network(&token), Network, Refused, Runs),
            case(self.with_network(&host), Network, Refused, Runs),
            case(
                self.with_network(&format!("touch {}", self.config.join("planted").display())),
                Network,
                Refused,
                Runs,
            ),
        ]
    }

    /// Runs every case of `profile` through `run` and checks what the kernel (or the node) made
    /// of it, then that nothing was planted and the listener saw only what it should.
    pub async fn run_profile<F, Fut>(&self, profile: Profile, run: F)
    where
        F: Fn(Case) -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let mut connections_expected = 0;
        for case in self
            .cases()
            .into_iter()
            .filter(|case| case.profile == profile)
        {
            let command = case.command.clone();
            let expect = case.expect.clone();
            match run(case).await {
                Outcome::TokenRefused(text) => {
                    assert!(
                        text.contains("the node refused"),
                        "`{command}` ({profile:?}): {text}"
                    );
                }
                Outcome::Ran(text) => {
                    for secret in SECRETS {
                        assert!(!text.contains(secret), "`{command}` leaked: {text}");
                    }
                    match expect {
                        Expect::Refused => assert!(
                            refused(&text),
                            "`{command}` ({profile:?}) should have failed: {text}"
                        ),
                        Expect::Prints(stdout) => assert_eq!(
                            text,
                            format!("exit code: 0\n--- stdout ---\n{stdout}"),
                            "`{command}` ({profile:?})"
                        ),
                        Expect::ReachesTheListener => {
                            connections_expected += 1;
                            wait_until(
                                Duration::from_secs(10),
                                "the connection arrived",
                                || async {
                                    self.listener
                                        .accept()
                                        .map(|_| ())
                                        .map_err(|error| format!("`{command}`: {error}: {text}"))
                                },
                            )
                            .await;
                        }
                    }
                }
            }
        }
        if connections_expected == 0 {
            assert!(
                matches!(self.listener.accept(), Err(error) if error.kind() == std::io::ErrorKind::WouldBlock),
                "a {profile:?} command reached the host's loopback"
            );
        }
        for planted in ["planted.txt", "planted.d"] {
            assert!(!self.workspace.join(planted).exists(), "{planted}");
        }
        assert!(!self.outside().exists());
        assert!(!self.config.join("planted").exists());
    }
}

impl Drop for Setting {
    fn drop(&mut self) {
        let _ = self.sibling.kill();
        let _ = self.sibling.wait();
    }
}

/// A command's text says it failed with a permission or network error.
pub fn refused(text: &str) -> bool {
    !text.starts_with("exit code: 0")
        && [
            "Permission denied",
            "Operation not permitted",
            "Network is unreachable",
            "Read-only",
        ]
        .iter()
        .any(|error| text.contains(error))
}
