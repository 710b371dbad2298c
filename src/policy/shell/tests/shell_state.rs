//! Issue #29 class 2: shell state that becomes code. Every variable of the one table, set in
//! every way, is at least L2 and named; the special built-ins the same.

use super::*;

/// Every way to set a variable; `{}` is the name.
const SETTERS: &[&str] = &[
    "{}=x ls",
    "{}=x",
    "export {}=x",
    "export {}",
    "declare {}=x",
    "declare -x {}",
    "declare -a {}=x",
    "typeset {}=x",
    "local {}=x",
    "readonly {}=x",
    "printf -v {} x",
    "printf -v {} '%s' x",
    "read {} < input.txt",
    "read -r a {} < input.txt",
    "read -a {} < input.txt",
    "mapfile {} < input.txt",
    "readarray -t {} < input.txt",
    "for {} in x; do echo; done",
    "select {} in x; do echo; done",
    "getopts ab {}",
    "env {}=x ls",
];

/// Each table row is a name (a prefix row stands for a name with it): set in each way, the
/// command is at least L2 (at least the row's level for a direct assignment) and names it.
#[test]
fn every_shell_state_variable_set_in_every_way_is_at_least_l2_and_named() {
    let mut failures = Vec::new();
    for (pattern, level, _) in SHELL_STATE_VARIABLES {
        let name = match pattern.strip_suffix('*') {
            Some(prefix) => format!("{prefix}X"),
            None => pattern.to_string(),
        };
        for setter in SETTERS {
            let command = setter.replace("{}", &name);
            let assessment = classify_shell(&command);
            let named = assessment
                .reasons
                .iter()
                .any(|reason| reason.contains(&name));
            let minimum = if setter.starts_with("{}=x") || setter.starts_with("export {}=") {
                (*level).max(L2)
            } else {
                L2
            };
            if assessment.level < minimum || !named {
                failures.push(format!(
                    "{command:?}: {} (want at least {minimum}, named) {:?}",
                    assessment.level, assessment.reasons
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The instances named in the issue and the special built-ins.
#[rustfmt::skip]
const STATE_CASES: &[(&str, RiskLevel)] = &[
    ("BASH_CMDS[ls]=./evil; ls", L3),
    ("BASH_ALIASES[ls]='rm -rf ~'; ls", L3),
    ("BASH_CMDS=./evil", L3),
    ("declare -A BASH_CMDS=([ls]=./evil)", L3),
    ("declare -a BASH_ALIASES=(x)", L3),
    ("printf -v PAGER 'sh -c id'; man ls", L3),
    ("printf -v PATH '/tmp'", L2),
    ("printf -v x '%s' y", L0),
    ("printf -v \"$n\" x", L2),
    ("read LESSOPEN < f; less x", L3),
    ("read -r line < input.txt", L0),
    ("read", L0),
    ("mapfile -t lines < f", L0),
    ("mapfile -C 'rm -rf ~' -c 1 lines < f", L3),
    ("readarray -C cb x < f", L3),
    ("mapfile TAR_OPTIONS < f", L3),
    ("export LESSOPEN", L3),
    ("export LESSKEYIN", L3),
    ("export PAGER", L3),
    ("export TAR_OPTIONS", L3),
    ("export PATH", L2),
    ("export FOO", L0),
    ("export FOO=1", L0),
    ("export \"$n\"", L2),
    ("LESSOPEN='|sh -c id %s' less x", L3),
    ("LESSKEYIN=keys less x", L3),
    ("LESS='+!id' less x", L3),
    ("TAR_OPTIONS=--to-command=sh tar xf a.tar", L3),
    ("GZIP=-S.bashrc gzip x", L2),
    ("XZ_OPT=-9 xz x", L2),
    ("ZSTD_CLEVEL=19 zstd x", L2),
    ("GREP_OPTIONS=-r grep x", L2),
    ("PYTHONSTARTUP=x.py python3 -V", L3),
    ("PERL5OPT=-Mevil perl -v", L3),
    ("RUBYOPT=-revil ruby -v", L3),
    ("NODE_OPTIONS='--require ./x.js' node -v", L3),
    ("GCONV_PATH=. iconv -l", L3),
    ("OPENSSL_CONF=x.cnf openssl version", L3),
    ("HISTFILE=.bashrc", L2),
    ("CDPATH=/tmp; cd x", L2),
    ("for PATH in /tmp; do ls; done", L2),
    ("for f in a b; do echo $f; done", L0),
    ("getopts ab IFS", L3),
    ("getopts ab opt", L0),
    ("history -w .bashrc", L2),
    ("history -a ~/.profile", L2),
    ("history -r evil.txt", L2),
    ("history -n", L2),
    ("history", L0),
    ("history 10", L0),
    ("hash -p ./evil ls", L3),
    ("hash -rp ./evil ls", L3),
    ("hash", L2), // not in the tables: unknown
    ("enable -f ./x.so x", L3),
    ("fc -s", L3),
    ("fc -e vi", L3),
    ("compgen -C 'id' x", L3),
    ("compgen -F f x", L3),
    ("declare -x \"PATH=/tmp\"", L2),
    ("local -a arr", L0),
];

#[test]
fn special_shell_state_is_at_least_l2() {
    run_table(STATE_CASES, |(command, level)| check(command, level));
}
