//! The tables of programs driven by a subcommand (`cargo build`, `npm install`): which
//! subcommands only read, stay in the project, run its code or are blocked, and which reach the
//! network or write outside the workspace when they run.

use super::*;

/// Programs driven by a subcommand (`cargo build`, `npm install`).
pub(super) struct SubcommandRules {
    pub(super) program: &'static str,
    /// Subcommands that only read: L0.
    pub(super) read_only: &'static [&'static str],
    /// Subcommands whose effects stay in the project and that run none of its code: L1.
    pub(super) project_local: &'static [&'static str],
    /// Subcommands that run the project's code (build scripts, tests, package scripts): L2.
    pub(super) runs_project_code: &'static [&'static str],
    /// Subcommands that stop the machine or run code nobody reviews: L3.
    pub(super) blocked: &'static [&'static str],
    /// The level without a subcommand (`cargo` alone prints help, `yarn` alone installs).
    pub(super) bare: RiskLevel,
    /// Options that need approval whatever the subcommand (`cargo --config` can name a program).
    pub(super) options_needing_approval: &'static [&'static str],
    /// Options before the subcommand whose value is the next word (`kubectl -n prod get`).
    pub(super) options_with_value: &'static [&'static str],
}

/// Any other subcommand needs approval (L2): installing, publishing, running downloaded code,
/// changing services or containers.
#[rustfmt::skip]
pub(super) const SUBCOMMAND_RULES: &[SubcommandRules] = &[
    SubcommandRules {
        program: "cargo",
        read_only: &[
            "tree", "metadata", "search", "version", "help", "locate-project", "verify-project",
            "pkgid", "read-manifest",
        ],
        project_local: &["fmt", "new", "init", "clean", "fetch", "generate-lockfile", "vendor"],
        runs_project_code: &[
            "build", "b", "check", "c", "test", "t", "clippy", "doc", "d", "bench", "run", "r",
            "fix", "package", "nextest", "install", "publish",
        ],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &["-C", "-Z", "--color", "--config", "--manifest-path"],
        options_needing_approval: &["--config"],
    },
    SubcommandRules {
        program: "npm",
        read_only: &[
            "ls", "list", "ll", "la", "view", "v", "info", "show", "outdated", "search", "help",
            "explain", "why", "root", "prefix", "query", "doctor", "ping", "whoami", "fund",
        ],
        project_local: &[],
        runs_project_code: &[
            "test", "t", "tst", "run", "run-script", "start", "pack", "install", "i", "ci",
            "exec", "x", "rebuild", "restart", "stop",
        ],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &["--prefix", "-w", "--workspace"],
        options_needing_approval: &["--script-shell"],
    },
    SubcommandRules {
        program: "pnpm",
        read_only: &[
            "ls", "list", "outdated", "why", "view", "info", "help", "root",
        ],
        project_local: &[],
        runs_project_code: &["test", "t", "run", "start", "install", "i", "exec", "dlx"],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &["-C", "--dir", "--filter", "-F"],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "yarn",
        read_only: &["info", "list", "why", "outdated", "help", "versions"],
        project_local: &[],
        runs_project_code: &["test", "run", "build", "start", "lint", "install", "exec", "dlx"],
        blocked: &[],
        bare: RiskLevel::L2,
        options_with_value: &["--cwd"],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "bun",
        read_only: &["pm", "help"],
        project_local: &[],
        runs_project_code: &["test", "run", "build", "install", "x"],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &["--cwd"],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "deno",
        read_only: &["info", "doc", "help", "types"],
        project_local: &["fmt", "lint", "check"],
        runs_project_code: &["test", "bench", "run", "task", "compile"],
        blocked: &["eval", "repl"],
        bare: RiskLevel::L3,
        options_with_value: &[],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "go",
        read_only: &["version", "env", "list", "doc", "help"],
        project_local: &["fmt"],
        runs_project_code: &["build", "test", "vet", "run", "generate", "install"],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &["-C"],
        options_needing_approval: &["-w"],
    },
    SubcommandRules {
        program: "pip",
        read_only: &[
            "list", "show", "freeze", "check", "help", "search", "inspect", "debug",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &[
            "--log", "--proxy", "--retries", "--timeout", "--exists-action", "--trusted-host",
            "--cert", "--client-cert", "--cache-dir", "--python", "--keyring-provider",
            "--use-feature", "--use-deprecated",
        ],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "pip3",
        read_only: &[
            "list", "show", "freeze", "check", "help", "search", "inspect", "debug",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &[
            "--log", "--proxy", "--retries", "--timeout", "--exists-action", "--trusted-host",
            "--cert", "--client-cert", "--cache-dir", "--python", "--keyring-provider",
            "--use-feature", "--use-deprecated",
        ],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "apt",
        read_only: &[
            "list", "search", "show", "policy", "depends", "rdepends", "showpkg", "showsrc",
            "changelog",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &["-o", "-c", "--config-file", "-t", "--target-release"],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "apt-cache",
        read_only: &[
            "search", "show", "policy", "depends", "rdepends", "showpkg", "showsrc", "pkgnames",
            "stats", "madison",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &["-o", "-c", "--config-file"],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "brew",
        read_only: &[
            "list", "ls", "info", "search", "outdated", "deps", "uses", "config", "doctor",
            "leaves",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &[],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "gem",
        read_only: &[
            "list", "search", "info", "query", "specification", "contents", "environment", "help",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &[],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "systemctl",
        read_only: &[
            "status", "show", "is-active", "is-enabled", "is-failed", "list-units",
            "list-unit-files", "list-timers", "list-sockets", "list-dependencies", "list-jobs",
            "cat", "help", "get-default", "is-system-running",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[
            "poweroff", "reboot", "halt", "kexec", "emergency", "rescue", "soft-reboot", "suspend",
            "hibernate", "hybrid-sleep",
        ],
        bare: RiskLevel::L0,
        options_with_value: &[
            "-H", "--host", "-M", "--machine", "-p", "--property", "-t", "--type", "--state", "-n",
            "--lines", "-o", "--output",
        ],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "docker",
        read_only: &[
            "ps", "images", "version", "info", "logs", "inspect", "stats", "top", "port",
            "history", "search", "diff", "events", "help",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &[
            "-H", "--host", "-c", "--context", "--config", "-l", "--log-level",
        ],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "podman",
        read_only: &[
            "ps", "images", "version", "info", "logs", "inspect", "stats", "top", "port",
            "history", "search", "diff", "events", "help",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &[
            "--connection", "-c", "--url", "--log-level", "--root", "--runroot",
        ],
        options_needing_approval: &[],
    },
    SubcommandRules {
        program: "kubectl",
        read_only: &[
            "get", "describe", "logs", "top", "version", "explain", "api-resources", "api-versions",
            "cluster-info", "help",
        ],
        project_local: &[],
        runs_project_code: &[],
        blocked: &[],
        bare: RiskLevel::L0,
        options_with_value: &[
            "-n", "--namespace", "--context", "--cluster", "--kubeconfig", "-s", "--server",
            "--user",
        ],
        options_needing_approval: &[],
    },
];

/// Subcommands that reach the network when they run ([`crate::policy::Reach`]): (program,
/// subcommands; `"*"` is every subcommand, `""` the program without one). The command then
/// needs approval, and its prompt says "network: yes".
#[rustfmt::skip]
pub(super) const NETWORK_SUBCOMMANDS: &[(&str, &[&str])] = &[
    // `git remote`, `git submodule` and `git archive` are read in `reach.rs`: some of their
    // forms stay on this machine.
    ("git", &["clone", "fetch", "pull", "push", "ls-remote", "send-email", "request-pull"]),
    ("npm", &[
        "install", "i", "ci", "add", "update", "up", "upgrade", "publish", "unpublish", "view",
        "v", "info", "show", "outdated", "search", "ping", "whoami", "doctor", "exec", "x",
        "audit", "login", "adduser", "deprecate", "dist-tag", "owner", "access", "token",
        "install-test", "it",
    ]),
    ("pnpm", &["install", "i", "add", "update", "up", "dlx", "outdated", "view", "info", "publish"]),
    ("yarn", &["", "install", "add", "upgrade", "up", "dlx", "info", "outdated", "publish", "npm"]),
    ("bun", &["install", "i", "add", "x", "update", "publish", "outdated"]),
    ("cargo", &[
        "install", "fetch", "publish", "search", "update", "add", "generate-lockfile", "vendor",
        "login", "owner", "yank",
    ]),
    ("go", &["get", "install", "mod"]),
    ("pip", &["install", "download", "search", "index", "wheel"]),
    ("pip3", &["install", "download", "search", "index", "wheel"]),
    ("apt", &[
        "install", "update", "upgrade", "full-upgrade", "dist-upgrade", "download", "source",
        "build-dep", "reinstall", "changelog",
    ]),
    ("brew", &["install", "reinstall", "upgrade", "update", "fetch", "tap", "search"]),
    ("gem", &["install", "update", "fetch", "search", "push"]),
    ("docker", &["pull", "push", "login", "search"]),
    ("podman", &["pull", "push", "login", "search"]),
    ("kubectl", &["*"]),
];

/// Subcommands that write outside the workspace when they run: package caches and
/// installations in the home directory or the system, services and system settings.
#[rustfmt::skip]
pub(super) const SYSTEM_WIDE_SUBCOMMANDS: &[(&str, &[&str])] = &[
    ("npm", &["install", "i", "ci", "add", "update", "up", "upgrade", "exec", "x", "install-test", "it", "link", "uninstall", "rm"]),
    ("pnpm", &["install", "i", "add", "update", "up", "dlx", "link", "remove"]),
    ("yarn", &["", "install", "add", "upgrade", "up", "dlx", "link", "remove", "global"]),
    ("bun", &["install", "i", "add", "x", "update", "link", "remove"]),
    ("cargo", &["install", "uninstall", "fetch", "update", "add", "generate-lockfile", "vendor", "login"]),
    ("go", &["get", "install", "mod"]),
    ("pip", &["install", "uninstall", "cache"]),
    ("pip3", &["install", "uninstall", "cache"]),
    ("apt", &[
        "install", "remove", "purge", "autoremove", "update", "upgrade", "full-upgrade",
        "dist-upgrade", "reinstall", "build-dep",
    ]),
    ("brew", &["install", "reinstall", "uninstall", "remove", "upgrade", "update", "tap", "untap", "link", "unlink", "cleanup"]),
    ("gem", &["install", "update", "uninstall", "cleanup"]),
    ("systemctl", &["*"]),
];

/// Options that make any subcommand write outside the workspace (`npm install -g`).
#[rustfmt::skip]
pub(super) const SYSTEM_WIDE_OPTIONS: &[(&str, &[&str])] = &[
    ("npm", &["-g", "--global"]),
    ("pnpm", &["-g", "--global"]),
    ("yarn", &["--global"]),
    ("bun", &["-g", "--global"]),
    ("git", &["--global", "--system"]),
];
