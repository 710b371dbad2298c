//! The command tables: which programs are read-only, project-local, need approval or are
//! blocked, and the options and wrappers the rules look for.

use super::*;

use OptionSpelling::{Long, Short};

// ---------------------------------------------------------------------------------------------
// Command tables. Each group is (reason shown to the operator, commands). A program in no table
// and with no dedicated rule is unknown, which is L2.
// ---------------------------------------------------------------------------------------------

/// A group of commands that share a level and a reason.
pub(super) type CommandGroup = (&'static str, &'static [&'static str]);

/// L0: commands that only read and print. Running one changes nothing, so it runs automatically.
/// Options that make some of them write or run programs are in `OPTIONS_THAT_WRITE_OR_RUN`.
#[rustfmt::skip]
pub(super) const READ_ONLY_GROUPS: &[CommandGroup] = &[
    // Listing and reading files; checksums.
    (
        "only reads files or lists directories",
        &[
            "ls", "dir", "vdir", "tree", "cat", "tac", "nl", "head", "tail", "less", "more", "wc",
            "stat", "file", "realpath", "readlink", "basename", "dirname", "du", "df", "locate",
            "md5sum", "sha1sum", "sha256sum", "sha512sum", "b2sum", "cksum",
        ],
    ),
    // Searching and transforming text to standard output.
    (
        "only filters text to its output",
        &[
            "grep", "egrep", "fgrep", "rg", "ag", "ack", "sort", "uniq", "cut", "tr", "paste",
            "join", "comm", "diff", "cmp", "fold", "fmt", "pr", "expand", "unexpand", "rev",
            "column", "od", "xxd", "hexdump", "strings", "base64", "base32", "jq", "yq",
        ],
    ),
    // Printing, and shell built-ins whose effect ends with the shell.
    (
        "only prints or sets shell state",
        &[
            "echo", "printf", "pwd", "true", "false", ":", "test", "[", "seq", "yes",
            "sleep", "expr", "wait", "read", "exit", "return", "break", "continue", "shift",
            "getopts", "unset", "ulimit", "umask", "type", "jobs", "dirs", "history",
            "help", "clear", "tput",
        ],
    ),
    // Facts about the system, its users and its processes.
    (
        "only reports on the system",
        &[
            "date", "cal", "whoami", "id", "groups", "who", "w", "last", "users", "tty", "uname",
            "hostname", "uptime", "free", "ps", "pgrep", "pidof", "pstree", "top", "htop", "vmstat",
            "iostat", "nproc", "arch", "lscpu", "lsblk", "lsusb", "lspci", "lsmod", "lsof",
            "findmnt", "locale", "getent", "which", "whereis", "man", "whatis", "apropos",
            "journalctl", "dmesg",
        ],
    ),
    // Network look-ups that send a query and change nothing.
    (
        "only looks up network information",
        &["dig", "nslookup", "host", "ss", "netstat"],
    ),
];

/// L1: print environment variables. The daemon's environment may hold API keys, so the operator
/// is told.
#[rustfmt::skip]
pub(super) const ENVIRONMENT_PRINTERS: &[CommandGroup] = &[(
    "prints environment variables, which may hold secrets",
    &["printenv"],
)];

/// L1: writes that stay in the working directory and are easy to undo. Their operands are the
/// paths they write, checked for configuration files and for leaving the working directory.
#[rustfmt::skip]
pub(super) const WORKING_DIRECTORY_WRITES: &[CommandGroup] = &[(
    "writes inside the working directory",
    &[
        "mkdir", "touch", "rmdir", "mktemp", "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz",
        "zstd", "unzstd", "zip",
    ],
)];

/// L1: formatters and checkers that read the project and run none of its code (no build
/// scripts, no configuration written in a programming language).
#[rustfmt::skip]
pub(super) const BUILD_AND_TEST_TOOLS: &[CommandGroup] = &[(
    "formats or checks the project without running its code",
    &["rustfmt", "black", "ruff", "gofmt", "tsc"],
)];

/// L2: build tools, test runners and compilers run code the agent may have written (a
/// Makefile's recipes, a test, a build script, a linter's JavaScript configuration, a compiler
/// plugin or wrapper). A reviewer approves them.
#[rustfmt::skip]
pub(super) const RUNS_PROJECT_CODE: &[CommandGroup] = &[(
    "runs the project's code (build recipes, tests, scripts or plugins the agent may have written)",
    &[
        "make", "gmake", "bmake", "cmake", "ctest", "ninja", "meson", "scons", "bazel", "buck",
        "just", "task", "rake", "gradle", "gradlew", "mvn", "mvnw", "ant", "sbt", "lein",
        "pytest", "py.test", "tox", "nox", "hatch", "poetry", "pdm", "uv", "pipenv", "bundle",
        "rspec", "jest", "vitest", "mocha", "karma", "phpunit", "composer", "mix", "dotnet",
        "swift", "javac", "rustc", "gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "eslint",
        "prettier", "mypy", "pylint", "webpack", "vite", "rollup", "esbuild", "turbo", "nx",
        "lerna", "configure", "autoreconf", "automake", "autoconf",
    ],
)];

/// The approval groups whose commands need more than the workspace when they run
/// ([`crate::policy::Reach`]).
pub(super) const NETWORK_GROUP: &str = "reaches the network or another machine";
pub(super) const SOFTWARE_GROUP: &str = "installs or removes software";
pub(super) const SYSTEM_GROUP: &str = "changes services, processes or system settings";

/// L2: writes beyond the project, the network, software and the system. An operator approves them.
/// (`rm`, `chmod`, `chown`, `crontab`, `nc`, `iptables`, … also have L3 forms in their rules.)
#[rustfmt::skip]
pub(super) const APPROVAL_GROUPS: &[CommandGroup] = &[
    // Moving, deleting, linking and re-permissioning files.
    (
        "changes or deletes files",
        &[
            "unlink", "shred", "mv", "ln", "install", "tee", "truncate", "patch", "rsync", "scp",
            "sftp", "ftp",
        ],
    ),
    // Talking to other machines: downloads, uploads, remote shells.
    (
        NETWORK_GROUP,
        &["curl", "wget", "ssh", "telnet", "aria2c"],
    ),
    // Installing software.
    (
        SOFTWARE_GROUP,
        &[
            "apt-get", "aptitude", "yum", "dnf", "zypper", "pacman", "apk", "npx", "pnpx", "bunx",
        ],
    ),
    // Services, processes, users, mounts and network settings.
    (
        SYSTEM_GROUP,
        &[
            "kill", "pkill", "killall", "mount", "umount", "ip", "ifconfig", "route", "sysctl",
            "useradd", "userdel", "usermod", "groupadd", "groupdel", "passwd", "chpasswd",
            "hostnamectl", "timedatectl",
        ],
    ),
];

/// L3: commands that are never run for an agent.
#[rustfmt::skip]
pub(super) const BLOCKED_GROUPS: &[CommandGroup] = &[
    // An agent never acts as another user.
    (
        "runs a command as another user",
        &["sudo", "su", "doas", "pkexec", "runuser"],
    ),
    // The code they run is not in the command line the reviewer sees.
    (
        "runs code that is not in the command line",
        &["eval", "exec", "source", ".", "at", "batch"],
    ),
    // They hand their arguments to `sh -c`, like an interpreter given inline code.
    ("runs its arguments as a shell command string", &["watch"]),
    // Raw disks and partitions: one mistake loses everything on them.
    (
        "writes raw disks or partitions",
        &[
            "dd", "fdisk", "sfdisk", "cfdisk", "gdisk", "parted", "wipefs", "mkswap", "cryptsetup",
        ],
    ),
    // The machine the daemon runs on must stay up.
    (
        "stops or restarts the machine",
        &[
            "shutdown", "reboot", "halt", "poweroff", "init", "telinit", "kexec",
        ],
    ),
    // Kernel modules and sudoers change the machine's trust base.
    (
        "changes the kernel or the sudo rules",
        &["insmod", "modprobe", "rmmod", "visudo"],
    ),
];

/// L3 by name prefix: every `mkfs.*` formats a file system.
pub(super) const BLOCKED_PREFIXES: &[&str] = &["mkfs"];

/// An option spelling: a letter inside a short-option cluster (`-uo` holds `o`), or a long option
/// (`--output` also matches `--output=file`).
#[derive(Debug, Clone, Copy)]
pub(super) enum OptionSpelling {
    Short(char),
    Long(&'static str),
}

/// Options that turn an otherwise read-only command into one that writes files, changes the
/// system or runs another program: (command, option, level, reason).
#[rustfmt::skip]
pub(super) const OPTIONS_THAT_WRITE_OR_RUN: &[(&str, OptionSpelling, RiskLevel, &str)] = &[
    ("sort", Short('o'), RiskLevel::L2, "writes its output to a file"),
    ("sort", Long("--output"), RiskLevel::L2, "writes its output to a file"),
    ("sort", Long("--compress-program"), RiskLevel::L2, "runs a compression program"),
    ("tree", Short('o'), RiskLevel::L2, "writes its output to a file"),
    ("date", Short('s'), RiskLevel::L2, "sets the system clock"),
    ("date", Long("--set"), RiskLevel::L2, "sets the system clock"),
    ("rg", Long("--pre"), RiskLevel::L2, "runs a preprocessor program on every file"),
    ("man", Short('P'), RiskLevel::L2, "runs the given pager program"),
    ("man", Long("--pager"), RiskLevel::L2, "runs the given pager program"),
    ("man", Short('H'), RiskLevel::L2, "runs the given browser program"),
    ("journalctl", Long("--vacuum"), RiskLevel::L2, "deletes journal files"),
    ("journalctl", Long("--rotate"), RiskLevel::L2, "rotates journal files"),
    ("journalctl", Long("--flush"), RiskLevel::L2, "moves journal files"),
    ("dmesg", Short('c'), RiskLevel::L2, "clears the kernel log"),
    ("dmesg", Short('C'), RiskLevel::L2, "clears the kernel log"),
    ("dmesg", Long("--clear"), RiskLevel::L2, "clears the kernel log"),
    ("dmesg", Long("--read-clear"), RiskLevel::L2, "clears the kernel log"),
    ("yq", Short('i'), RiskLevel::L2, "edits files in place"),
    ("yq", Long("--inplace"), RiskLevel::L2, "edits files in place"),
];

/// Read-only commands that write (or set) something when given more operands than this:
/// `uniq in out` and `xxd in out` write `out`, `hostname name` renames the machine.
#[rustfmt::skip]
pub(super) const READ_ONLY_OPERAND_LIMITS: &[(&str, usize, &str)] = &[
    ("uniq", 1, "writes its output to the second file"),
    ("xxd", 1, "writes its output to the second file"),
    ("hostname", 0, "sets the host name"),
];

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
        options_with_value: &[],
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
        options_with_value: &[],
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
        options_with_value: &["-o"],
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
        options_with_value: &["-o"],
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

/// Wrappers run the command after their own options; that command is classified instead.
pub(super) struct Wrapper {
    pub(super) name: &'static str,
    /// Options whose value is the next word (`timeout -s KILL`).
    pub(super) options_with_value: &'static [&'static str],
    /// Operands the wrapper itself takes before the command (`timeout 10 cmd`).
    pub(super) leading_operands: usize,
}

#[rustfmt::skip]
pub(super) const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        name: "env",
        options_with_value: &["-u", "--unset", "-C", "--chdir"],
        leading_operands: 0,
    },
    Wrapper {
        name: "nice",
        options_with_value: &["-n", "--adjustment"],
        leading_operands: 0,
    },
    Wrapper {
        name: "timeout",
        options_with_value: &["-s", "--signal", "-k", "--kill-after"],
        leading_operands: 1,
    },
    Wrapper {
        name: "nohup",
        options_with_value: &[],
        leading_operands: 0,
    },
    Wrapper {
        name: "time",
        options_with_value: &["-f", "--format", "-o", "--output"],
        leading_operands: 0,
    },
    Wrapper {
        name: "command",
        options_with_value: &[],
        leading_operands: 0,
    },
    Wrapper {
        name: "builtin",
        options_with_value: &[],
        leading_operands: 0,
    },
    Wrapper {
        name: "stdbuf",
        options_with_value: &["-i", "-o", "-e", "--input", "--output", "--error"],
        leading_operands: 0,
    },
    Wrapper {
        name: "ionice",
        options_with_value: &["-c", "--class", "-n", "--classdata"],
        leading_operands: 0,
    },
    Wrapper {
        name: "setsid",
        options_with_value: &[],
        leading_operands: 0,
    },
    Wrapper {
        name: "busybox",
        options_with_value: &[],
        leading_operands: 0,
    },
];

/// Directories whose programs are the system's own (a program named by a path elsewhere may be
/// a file the agent wrote).
#[rustfmt::skip]
pub(super) const SYSTEM_PROGRAM_DIRECTORIES: &[&str] = &[
    "/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin",
];

/// `xargs` options whose value is the next word.
#[rustfmt::skip]
pub(super) const XARGS_OPTIONS_WITH_VALUE: &[&str] = &[
    "-n", "-L", "-P", "-I", "-d", "-E", "-s", "-a", "--arg-file", "--delimiter", "--max-args",
    "--max-lines", "--max-procs", "--eof", "--max-chars", "--process-slot-var",
];

/// Shell reserved words that may start a simple command; the command after them is classified.
#[rustfmt::skip]
pub(super) const SHELL_KEYWORDS: &[&str] = &[
    "{", "}", "!", "if", "then", "else", "elif", "fi", "while", "until", "do", "done", "esac",
];

/// Shell words that start a loop or case header; the header itself runs nothing.
pub(super) const SHELL_HEADERS: &[&str] = &["for", "select", "case"];

/// Environment variables that make the next program load or run other code: setting one is L3.
#[rustfmt::skip]
pub(super) const CODE_LOADING_VARIABLES: &[&str] = &[
    "BASH_ENV", "ENV", "IFS", "PROMPT_COMMAND", "PS4", "SHELLOPTS", "BASHOPTS", "PYTHONPATH",
    "PYTHONSTARTUP", "PYTHONHOME", "PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYLIB", "RUBYOPT",
    "NODE_OPTIONS", "NODE_PATH", "PAGER", "EDITOR", "VISUAL", "MANPAGER", "LESSOPEN", "LESSCLOSE",
    "SSH_ASKPASS", "RUSTC_WRAPPER", "RUSTC", "CARGO_BUILD_RUSTC_WRAPPER",
];

/// Every variable starting with one of these is treated as code-loading too (`LD_PRELOAD`,
/// `GIT_SSH_COMMAND`, exported bash functions).
pub(super) const CODE_LOADING_VARIABLE_PREFIXES: &[&str] = &["LD_", "DYLD_", "GIT_", "BASH_FUNC_"];

/// Options that point a project-local (L1) command at another directory; outside the working
/// directory, the command needs approval.
#[rustfmt::skip]
pub(super) const DIRECTORY_OPTIONS: &[&str] = &[
    "-C", "--directory", "--manifest-path", "--prefix", "--cwd", "--dir", "--git-dir", "--work-tree",
];
