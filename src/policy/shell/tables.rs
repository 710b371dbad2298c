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
    // The machine's own sockets (a network look-up is in the network group: it needs the
    // network, which only an approved command gets).
    (
        "only reports this machine's network state",
        &["ss", "netstat"],
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
pub(super) const FILE_CHANGES_GROUP: &str = "changes or deletes files";
pub(super) const NETWORK_GROUP: &str = "reaches the network or another machine";
pub(super) const SOFTWARE_GROUP: &str = "installs or removes software";
pub(super) const SYSTEM_GROUP: &str = "changes services, processes or system settings";

/// L2: writes beyond the project, the network, software and the system. An operator approves them.
/// (`rm`, `chmod`, `chown`, `crontab`, `nc`, `iptables`, … also have L3 forms in their rules.)
#[rustfmt::skip]
pub(super) const APPROVAL_GROUPS: &[CommandGroup] = &[
    // Moving, deleting, linking and re-permissioning files.
    (
        FILE_CHANGES_GROUP,
        &[
            "unlink", "shred", "mv", "ln", "install", "tee", "truncate", "patch", "rsync",
        ],
    ),
    // Talking to other machines: downloads, uploads, remote shells, look-ups, cloud clients.
    (
        NETWORK_GROUP,
        &[
            "curl", "wget", "ssh", "scp", "sftp", "ftp", "lftp", "telnet", "aria2c", "mosh",
            "dig", "nslookup", "host", "whois", "traceroute", "tracepath", "mtr", "nmap", "http",
            "https", "xh", "rclone", "s3cmd", "gsutil", "aws", "gcloud", "az", "gh", "glab",
            "helm",
        ],
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
        options_with_value: &["-u", "--unset", "-C", "--chdir", "-a", "--argv0"],
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

/// Shell state that becomes code: variables that make a program (or bash itself) load or run
/// code, read options, or look for files elsewhere, and bash's special arrays. Setting one in
/// any way (`NAME=`, `export NAME`, `declare`, `printf -v`, `read`, `mapfile`, `for NAME in`,
/// `getopts`) is at least the level given, naming the variable. (pattern, level, what it
/// does); a pattern ending in `*` is a prefix. L3: it names code or a library to run; L2: it
/// changes options or where programs look for files.
#[rustfmt::skip]
pub(super) const SHELL_STATE_VARIABLES: &[(&str, RiskLevel, &str)] = &[
    // The dynamic loader and glibc.
    ("LD_*", RiskLevel::L3, "makes every program load a library"),
    ("DYLD_*", RiskLevel::L3, "makes every program load a library"),
    ("GCONV_PATH", RiskLevel::L3, "makes glibc load character-set modules from a directory"),
    ("LOCPATH", RiskLevel::L2, "makes glibc load locale files from a directory"),
    ("NLSPATH", RiskLevel::L2, "makes programs load message catalogs from a directory"),
    ("HOSTALIASES", RiskLevel::L2, "makes programs read host aliases from a file"),
    // Bash itself.
    ("BASH_ENV", RiskLevel::L3, "names a file every non-interactive bash runs at start"),
    ("ENV", RiskLevel::L3, "names a file sh runs at start"),
    ("BASH_FUNC_*", RiskLevel::L3, "defines a shell function for child shells"),
    ("BASH_CMDS", RiskLevel::L3, "is bash's command hash table: it binds a command name to another program"),
    ("BASH_ALIASES", RiskLevel::L3, "is bash's alias table: it binds a command name to other code"),
    ("BASH_COMPAT", RiskLevel::L3, "changes how bash reads the lines after it"),
    ("BASH_LOADABLES_PATH", RiskLevel::L3, "is where `enable -f` loads built-ins from"),
    ("BASH_XTRACEFD", RiskLevel::L2, "sends bash's trace to another file"),
    ("BASHOPTS", RiskLevel::L3, "changes how bash reads the lines after it"),
    ("SHELLOPTS", RiskLevel::L3, "changes how bash reads the lines after it"),
    ("POSIXLY_CORRECT", RiskLevel::L3, "puts bash (and GNU tools) in POSIX mode, which reads commands differently"),
    ("PROMPT_COMMAND", RiskLevel::L3, "is a command bash runs before each prompt"),
    ("PS0", RiskLevel::L3, "is a prompt bash expands (and so runs) later"),
    ("PS1", RiskLevel::L3, "is a prompt bash expands (and so runs) later"),
    ("PS2", RiskLevel::L3, "is a prompt bash expands (and so runs) later"),
    ("PS3", RiskLevel::L3, "is a prompt bash expands (and so runs) later"),
    ("PS4", RiskLevel::L3, "is expanded (and so run) before every traced command"),
    ("IFS", RiskLevel::L3, "changes how bash splits every later word"),
    ("MAILPATH", RiskLevel::L3, "names files bash checks, with messages it expands (and so runs)"),
    ("MAILCHECK", RiskLevel::L2, "makes bash check mail files"),
    ("MAIL", RiskLevel::L2, "names a file bash checks"),
    ("PATH", RiskLevel::L2, "changes which programs run"),
    ("CDPATH", RiskLevel::L2, "changes where `cd` goes, so later relative paths point elsewhere"),
    ("GLOBIGNORE", RiskLevel::L2, "changes what globs match"),
    ("FIGNORE", RiskLevel::L2, "changes how names are completed"),
    ("EXECIGNORE", RiskLevel::L2, "changes which programs run"),
    ("HISTFILE", RiskLevel::L2, "names the file bash writes its history into"),
    ("HISTFILESIZE", RiskLevel::L2, "truncates the history file"),
    ("INPUTRC", RiskLevel::L2, "names a readline configuration to load"),
    ("HOME", RiskLevel::L2, "moves where programs load their configuration from"),
    ("XDG_CONFIG_HOME", RiskLevel::L2, "moves where programs load their configuration from"),
    ("XDG_CONFIG_DIRS", RiskLevel::L2, "moves where programs load their configuration from"),
    ("ZDOTDIR", RiskLevel::L3, "names the directory zsh loads its start-up files from"),
    ("SHELL", RiskLevel::L2, "names the shell other programs start"),
    // Pagers, editors, browsers: programs other programs run.
    ("PAGER", RiskLevel::L3, "names a program other programs run"),
    ("MANPAGER", RiskLevel::L3, "names a program `man` runs"),
    ("MANOPT", RiskLevel::L3, "gives `man` options, which can name a program to run"),
    ("MANPATH", RiskLevel::L2, "changes where `man` reads pages from"),
    ("SYSTEMD_PAGER", RiskLevel::L3, "names a program systemd tools run"),
    ("EDITOR", RiskLevel::L3, "names a program other programs run"),
    ("VISUAL", RiskLevel::L3, "names a program other programs run"),
    ("BROWSER", RiskLevel::L3, "names a program other programs run"),
    ("TERMINAL", RiskLevel::L3, "names a program other programs run"),
    ("LESS*", RiskLevel::L3, "gives `less` options, key bindings or an input filter (LESSOPEN, LESSCLOSE, LESSKEY, LESSEDIT), which run commands"),
    ("MORE", RiskLevel::L2, "gives `more` options"),
    ("VIMINIT", RiskLevel::L3, "is a command vim runs at start"),
    ("EXINIT", RiskLevel::L3, "is a command vi runs at start"),
    ("MYVIMRC", RiskLevel::L3, "names a file vim runs at start"),
    // Interpreters and their module paths.
    ("PYTHON*", RiskLevel::L3, "makes python load code or options (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONWARNINGS, …)"),
    ("PERL*", RiskLevel::L3, "makes perl load code or options (PERL5LIB, PERL5OPT, PERL5DB, …)"),
    ("RUBY*", RiskLevel::L3, "makes ruby load code or options (RUBYOPT, RUBYLIB)"),
    ("NODE_OPTIONS", RiskLevel::L3, "gives node options, which can load code (`--require`)"),
    ("NODE_PATH", RiskLevel::L3, "makes node load modules from a directory"),
    ("NODE_REPL_EXTERNAL_MODULE", RiskLevel::L3, "makes node load a module"),
    ("JAVA_TOOL_OPTIONS", RiskLevel::L3, "gives java options, which can load an agent"),
    ("_JAVA_OPTIONS", RiskLevel::L3, "gives java options, which can load an agent"),
    ("JDK_JAVA_OPTIONS", RiskLevel::L3, "gives java options, which can load an agent"),
    ("CLASSPATH", RiskLevel::L2, "makes java load classes from a directory"),
    ("AWKPATH", RiskLevel::L3, "makes gawk load programs from a directory"),
    ("AWKLIBPATH", RiskLevel::L3, "makes gawk load extensions from a directory"),
    ("TCLLIBPATH", RiskLevel::L3, "makes tcl load code from a directory"),
    ("LUA_PATH*", RiskLevel::L3, "makes lua load code from a directory"),
    ("LUA_CPATH*", RiskLevel::L3, "makes lua load libraries from a directory"),
    ("LUA_INIT*", RiskLevel::L3, "is code lua runs at start"),
    ("PHPRC", RiskLevel::L3, "names a php configuration, which can load code"),
    ("PHP_INI_SCAN_DIR", RiskLevel::L3, "names php configuration, which can load code"),
    // Build tools, compilers, package managers.
    ("RUSTC*", RiskLevel::L3, "names the compiler or a wrapper cargo runs"),
    ("RUSTFLAGS", RiskLevel::L3, "gives rustc options, which can name a linker to run"),
    ("RUSTDOCFLAGS", RiskLevel::L3, "gives rustdoc options, which can name a program to run"),
    ("CARGO_*", RiskLevel::L3, "changes cargo's configuration, which can name programs to run"),
    ("GOFLAGS", RiskLevel::L3, "gives go options, which can name a program to run (`-toolexec`)"),
    ("GOENV", RiskLevel::L3, "names go's configuration file, which can set `GOFLAGS`"),
    ("GOROOT", RiskLevel::L3, "names the go installation whose tools run"),
    ("GOTOOLCHAIN", RiskLevel::L3, "makes go download and run another toolchain"),
    ("GOPATH", RiskLevel::L2, "moves go's module cache and installed programs"),
    ("GOBIN", RiskLevel::L2, "moves where `go install` writes programs"),
    ("GOPROXY", RiskLevel::L2, "changes where go downloads modules from"),
    ("MAKEFLAGS", RiskLevel::L3, "gives make options, which can load makefiles"),
    ("MAKEFILES", RiskLevel::L3, "names makefiles make loads"),
    ("CC", RiskLevel::L2, "names the compiler a build runs"),
    ("CXX", RiskLevel::L2, "names the compiler a build runs"),
    ("NPM_CONFIG_*", RiskLevel::L3, "changes npm's configuration, which can name a shell to run scripts"),
    ("npm_config_*", RiskLevel::L3, "changes npm's configuration, which can name a shell to run scripts"),
    ("PIP_*", RiskLevel::L2, "changes pip's configuration (index, options)"),
    ("OPENSSL_CONF", RiskLevel::L3, "names an OpenSSL configuration, which can load an engine"),
    ("OPENSSL_ENGINES", RiskLevel::L3, "is where OpenSSL loads engines from"),
    // Archivers and filters whose options come from the environment.
    ("TAR_OPTIONS", RiskLevel::L3, "gives tar options, which can run programs (`--to-command`, `--use-compress-program`)"),
    ("GZIP", RiskLevel::L2, "gives gzip options"),
    ("BZIP2", RiskLevel::L2, "gives bzip2 options"),
    ("BZIP", RiskLevel::L2, "gives bzip2 options"),
    ("XZ_OPT", RiskLevel::L2, "gives xz options"),
    ("XZ_DEFAULTS", RiskLevel::L2, "gives xz options"),
    ("ZSTD_*", RiskLevel::L2, "gives zstd options"),
    ("GREP_OPTIONS", RiskLevel::L2, "gives grep options"),
    ("ZIPOPT", RiskLevel::L3, "gives zip options, which can run a program (`-TT`)"),
    ("UNZIP", RiskLevel::L2, "gives unzip options"),
    ("RSYNC_RSH", RiskLevel::L3, "names the program rsync runs to connect"),
    ("RSYNC_CONNECT_PROG", RiskLevel::L3, "names a program rsync runs"),
    // Network clients, git, ssh, containers.
    ("GIT_*", RiskLevel::L3, "changes git's configuration, which can name programs to run"),
    ("SSH_*", RiskLevel::L3, "changes ssh's programs or agent (SSH_ASKPASS, SSH_AUTH_SOCK)"),
    ("GNUPGHOME", RiskLevel::L2, "moves where gpg loads its configuration from"),
    ("CURL_HOME", RiskLevel::L2, "moves where curl loads `.curlrc` from"),
    ("WGETRC", RiskLevel::L2, "names a wget configuration, which can change where files go"),
    ("KUBECONFIG", RiskLevel::L2, "names a kubectl configuration, which can name programs to run"),
    ("DOCKER_HOST", RiskLevel::L2, "points docker at another daemon"),
    ("DOCKER_CONFIG", RiskLevel::L2, "names a docker configuration, which can name helper programs"),
];

/// Options that point a project-local (L1) command at another directory; outside the working
/// directory, the command needs approval.
#[rustfmt::skip]
pub(super) const DIRECTORY_OPTIONS: &[&str] = &[
    "-C", "--directory", "--manifest-path", "--prefix", "--cwd", "--dir", "--git-dir", "--work-tree",
];

/// Programs whose every option only changes what they read or print, so an option computed at
/// run time does no more than a literal one (`wc -l "$f"`, `grep -rn "$pattern" src`).
/// Programs with an option that writes, runs or loads something are not here (`sort -o`,
/// `file -C`, `less`, `xxd out`, `date -s`).
#[rustfmt::skip]
pub(super) const COMPUTED_ARGUMENTS_ARE_HARMLESS: &[&str] = &[
    "echo", "ls", "dir", "vdir", "cat", "tac", "nl", "head", "tail", "wc", "stat", "realpath",
    "readlink", "basename", "dirname", "du", "df", "md5sum", "sha1sum", "sha256sum",
    "sha512sum", "b2sum", "cksum", "grep", "egrep", "fgrep", "cut", "tr", "paste", "comm",
    "diff", "cmp", "fold", "fmt", "expand", "unexpand", "rev", "column", "od", "hexdump",
    "strings", "base64", "base32", "jq", "seq", "true", "false", ":", "pwd", "sleep", "expr",
    "exit", "return", "shift", "break", "continue", "wait", "cd", "pushd", "popd", "type",
    "which", "whereis", "id", "groups", "getent", "nproc", "whoami", "uname",
];

/// Programs whose argument is a program text: any expansion in it makes the code computed.
pub(super) const PROGRAM_TEXT_TOOLS: &[&str] = &["sed", "awk", "gawk", "mawk", "nawk"];

/// Options that name a file (or directory) a program loads as configuration or code:
/// (program, option, what it is loaded as). A plantable file makes the command at least L2
/// (`loads.rs`). Options that name a program to run are in the rules as L3.
#[rustfmt::skip]
pub(super) const LOADED_FILE_OPTIONS: &[(&str, &str, &str)] = &[
    ("git", "--git-dir", "the repository (its configuration and hooks name programs to run)"),
    ("git", "--work-tree", "the working tree (its `.gitattributes` name filters to run)"),
    ("git", "-C", "the repository it finds there (its configuration and hooks name programs to run)"),
    ("less", "-k", "key bindings (which can run shell commands)"),
    ("less", "--lesskey-file", "key bindings (which can run shell commands)"),
    ("less", "--lesskey-src", "key bindings (which can run shell commands)"),
    ("less", "--lesskey-content", "key bindings (which can run shell commands)"),
    ("man", "-C", "its configuration (which names programs to run)"),
    ("man", "--config-file", "its configuration (which names programs to run)"),
    ("awk", "-f", "the awk program"),
    ("awk", "--file", "the awk program"),
    ("awk", "-i", "an awk library"),
    ("awk", "--include", "an awk library"),
    ("gawk", "-f", "the awk program"),
    ("gawk", "--include", "an awk library"),
    ("sed", "-f", "the sed program"),
    ("sed", "--file", "the sed program"),
    ("make", "-f", "the makefile (its recipes run)"),
    ("make", "--file", "the makefile (its recipes run)"),
    ("make", "--makefile", "the makefile (its recipes run)"),
    ("make", "-I", "a directory of included makefiles"),
    ("bash", "--rcfile", "start-up commands"),
    ("bash", "--init-file", "start-up commands"),
    ("vim", "-u", "start-up commands"),
    ("vim", "-S", "a script of commands"),
    ("nvim", "-u", "start-up commands"),
    ("gdb", "-x", "a script of commands"),
    ("gdb", "--command", "a script of commands"),
    ("ssh", "-F", "its configuration (which can name programs to run)"),
    ("scp", "-F", "ssh's configuration (which can name programs to run)"),
    ("curl", "-K", "its configuration (which can write files)"),
    ("curl", "--config", "its configuration (which can write files)"),
    ("wget", "--config", "its configuration (which can write files)"),
    ("kubectl", "--kubeconfig", "its configuration (which can name programs to run)"),
    ("docker", "--config", "its configuration (which can name helper programs)"),
    ("cargo", "--config", "configuration (which can name programs to run)"),
    ("npm", "--userconfig", "its configuration (which can name the shell for scripts)"),
    ("npm", "--globalconfig", "its configuration (which can name the shell for scripts)"),
    ("node", "-r", "a module run before the program"),
    ("node", "--require", "a module run before the program"),
    ("node", "--import", "a module run before the program"),
    ("node", "--loader", "a module loader"),
    ("perl", "-I", "a directory of modules"),
    ("ruby", "-I", "a directory of modules"),
    ("ruby", "-r", "a library run before the program"),
    ("apt", "-c", "its configuration (which can name commands to run)"),
    ("apt", "--config-file", "its configuration (which can name commands to run)"),
    ("apt-cache", "-c", "its configuration (which can name commands to run)"),
    ("apt-get", "-c", "its configuration (which can name commands to run)"),
    ("pip", "--config-file", "its configuration"),
    ("gem", "--config-file", "its configuration (which can load code)"),
    ("sqlite3", "-init", "start-up commands (which can run shell commands)"),
    ("psql", "-f", "a script of commands (which can run shell commands)"),
    ("tmux", "-f", "its configuration (which can run shell commands)"),
    ("screen", "-c", "its configuration (which can run shell commands)"),
];
