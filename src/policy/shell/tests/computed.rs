//! Issue #29 class 1: arguments the shell computes are never low, and awk and sed programs are
//! read as programs.

use super::*;

/// Each case must come out at exactly this level; a computed argument names why.
#[rustfmt::skip]
const COMPUTED_CASES: &[(&str, RiskLevel)] = &[
    // An option from a variable: the option tables cannot see it.
    ("o=--output=.bashrc; sort $o data", L2),
    ("sort \"$o\" data", L2),
    ("sort ${o} data", L2),
    ("sort -$o data", L2),
    ("sort -\"$o\" data", L2),
    ("sort data $o", L2),
    ("sort -k \"$key\" data", L2),
    ("rg $flags pattern", L2),
    ("rg \"$flag\" pattern", L2),
    ("tree $x", L2),
    ("date $x", L2),
    ("git $sub", L2),
    ("git log \"$range\"", L2),
    ("git -C \"$dir\" status", L2),
    ("find . \"$action\"", L2),
    ("find . $action", L2),
    ("tar $mode a.tar", L2),
    ("cargo $cmd", L2),
    ("man $page", L2),
    ("timeout $t ls", L2),
    ("env $x ls", L3),
    ("printf \"$fmt\" x", L2),
    ("printf $fmt x", L2),
    ("less $f", L2),
    ("file $f", L2),
    ("xxd $in", L2),
    // Word splitting of an unquoted value anywhere in a word.
    ("sort file$x", L2),
    ("sort x${y}z", L2),
    // A glob at the start of a word may match a file named like an option (`-rf`).
    ("sort *", L2),
    ("git add *", L2),
    ("rm *", L2),
    ("cp * dest/", L2),
    ("tar cf a.tar *", L2),
    // Program texts: any expansion in them is code the reviewer cannot see.
    ("awk \"{print $1}\" data", L2),
    ("awk -v x=\"$y\" '{print x}' data", L2),
    ("sed \"s/$a/b/\" file", L2),
    ("sed -e \"$script\" file", L2),
    // A computed value stays one operand: quoted, not first, not an option; or after `--`.
    ("sort -- \"$f\"", L0),
    ("sort \"data-$suffix\"", L0),
    ("printf '%s\\n' \"$x\" $y", L0),
    ("printf -- '%s' $x", L0),
    ("git log -- \"$path\"", L0),
    ("sort src/*.txt", L0),
    ("sort data-*.txt", L0),
    // Programs whose every option only changes what they read or print.
    ("echo $x", L0),
    ("echo $HOME", L0),
    ("cat \"$f\"", L0),
    ("cat $f", L0),
    ("wc -l $f", L0),
    ("grep -rn \"$pattern\" src", L0),
    ("grep $opts pattern file", L0),
    ("ls *", L0),
    ("head -n \"$n\" file", L0),
    ("jq \"$filter\" data.json", L0),
    ("for f in *.txt; do wc -l \"$f\"; done", L0),
    ("exit $?", L0),
    // `test`/`[`: a computed operand in an operand position is harmless; as an operator, or
    // split, or with `-v` (which evaluates an array subscript) it is not.
    ("[ -f \"$f\" ]", L0),
    ("[ \"$a\" = \"$b\" ]", L0),
    ("test -n \"$x\"", L0),
    ("[ \"$x\" ]", L0),
    ("[ -f $f ]", L2),
    ("[ \"$op\" \"$x\" ]", L2),
    ("[ a \"$op\" b ]", L2),
    ("test -v \"$name\"", L2),
    ("[ \"$a\" = b -o \"$c\" = d ]", L2),
    // `cd` to a computed place leaves the working directory: later writes need approval.
    ("cd \"$d\"", L0),
    ("cd \"$d\" && touch x", L2),
];

/// awk and sed programs are tokenized as programs: strings do not end statements.
#[rustfmt::skip]
const PROGRAM_CASES: &[(&str, RiskLevel)] = &[
    // `;` inside a string must not split the program.
    ("awk 'BEGIN { print \"a;b\" > \"/tmp/x\" }'", L2),
    ("awk '{ print \"x;\" | \"sh\" }'", L3),
    ("awk '{ print \";\" | \"sh\" }'", L3),
    ("awk '{ printf \"%s;\", $0 | \"sh\" }'", L3),
    ("awk '{ print $0 \"}\" > \"out\" }'", L2),
    ("awk '{ x = \"a;\"; print x > \"out\" }'", L2),
    ("awk '{ print > \"out\" }'", L2),
    ("awk '{ print $1 >> \"log\" }'", L2),
    ("awk '{ print | \"cat 1>&2\" }'", L3),
    ("awk '{ \"date\" | getline d; print d }'", L3),
    ("awk '{ cmd = \"id\"; cmd | getline x }'", L3),
    ("awk '{ print |& \"sh\" }'", L3),
    ("awk 'BEGIN { system(\"id\") }'", L3),
    ("awk 'BEGIN { sys = \"system\"; @sys(\"id\") }'", L3),
    ("awk '@load \"filefuncs\"; BEGIN {}'", L3),
    ("awk 'BEGIN { getline line < \"data.txt\"; print line }'", L0),
    ("awk '{ print ($1 > 3) }' data", L0),
    ("awk '$3 > 100 {print $1}' data.txt", L0),
    ("awk '{ if (a > b) print a }' data", L0),
    ("awk '{ print a || b }' data", L0),
    ("awk -F';' '{print $2}' data", L0),
    ("awk '{ s = \"x > y | sh\"; print s }' data", L0),
    ("awk -W exec prog.awk", L2),
    ("awk --exec=prog.awk", L2),
    ("gawk -W exec=prog.awk", L2),
    ("awk -f prog.awk data", L2),
    ("awk -f \"$p\" data", L2),
    // sed: `w`, `W`, `e` commands and the `w`/`e` flags, also after strings and in blocks.
    ("sed 's/;/x/w out' file", L2),
    ("sed 's/a/;/;w out' file", L2),
    ("sed '/;/e id' file", L3),
    ("sed '1{s/a/b/;e id\n}' file", L3),
    ("sed 's/a/b/e' file", L3),
    ("sed 's/a/b/gw out' file", L2),
    ("sed 'W out' file", L2),
    ("sed -n '/x;y/p' file", L0),
    ("sed 's/a\\/;/b/g' file", L0),
    ("sed -f script.sed file", L2),
    ("sed --file=script.sed file", L2),
];

fn check_with_reason(case: (&str, RiskLevel)) -> Result<(), String> {
    check(case.0, case.1)?;
    let assessment = classify_shell(case.0);
    let computed_named = assessment
        .reasons
        .iter()
        .any(|reason| reason.contains("computed at run time"));
    // A computed argument that made the level says so in its reason.
    if case.1 == L2
        && case.0.contains('$')
        && !case.0.contains("-f ")
        && !computed_named
        && !case.0.contains("cd ")
    {
        return Err(format!(
            "{:?}: L2 without naming `computed at run time`: {:?}",
            case.0, assessment.reasons
        ));
    }
    Ok(())
}

#[test]
fn computed_arguments_are_never_low_and_say_so() {
    run_table(COMPUTED_CASES, check_with_reason);
}

#[test]
fn awk_and_sed_programs_are_read_as_programs() {
    run_table(PROGRAM_CASES, |(command, level)| check(command, level));
}

/// An option that consumes the next word: when the tables do not know whether it takes a
/// value, both readings are classified and the higher wins.
#[rustfmt::skip]
const CONSUMED_WORD_CASES: &[(&str, RiskLevel)] = &[
    ("pip --log list install evil", L2),
    ("pip --lo list install evil", L2),
    ("pip3 --proxy list install evil", L2),
    ("npm --registry ls install evil", L2),
    ("npm --foo ls install evil", L2),
    ("cargo --frobnicate tree install evil", L2),
    ("apt -c list install vim", L2),
    ("apt -c planted.conf list", L2),
    ("git --attr-source log push origin", L2),
    ("env -a ls rm -rf /tmp/x", L3),
    ("env --argv0 ls rm -rf /tmp/x", L3),
    ("env --frob ls rm -rf /tmp/x", L3),
    ("timeout --frob 5 ls", L0),
    ("nice --frob ls rm -rf x", L3),
    ("env -i ls", L0),
    ("pip list", L0),
    ("pip --verbose list", L0),
    ("npm ls", L0),
    ("cargo tree", L0),
];

#[test]
fn an_option_that_may_consume_the_next_word_is_read_both_ways() {
    run_table(CONSUMED_WORD_CASES, |(command, level)| {
        check(command, level)
    });
}
