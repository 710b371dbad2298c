//! Tidy checks on the source tree itself (in the spirit of rust-analyzer's `tidy` test): rules
//! about the code's shape that review keeps missing, checked on every test run.
//!
//! - **Ranks.** Every top-level module of `src/` has a rank ([`RANKS`], the same table as in
//!   `ARCHITECTURE.md`); non-test code imports only modules of its own rank or lower. A crate path
//!   (`crate::store::…`, `super::super::config`, `clawvisor::daemon` in the binaries) that names a
//!   higher rank fails the check with the file, the line and both ranks. [`RANK_EXCEPTIONS`] may
//!   let one file import upward, each with its reason; it is empty and should stay so.
//! - Only the actor layer (`src/actors/`) and the place that boots it (`src/daemon.rs`) name
//!   `crate::actors` (or `clawvisor::actors`): the ranks allow the CLI and the testkit to, but
//!   they talk to actors through the typed handles of `protocol/`, so the actors can be
//!   restructured without touching them.
//! - No source file under `src/` (unit-test files aside) is longer than [`MAX_LINES`].
//! - No non-test function (the testkit's included) is longer than [`MAX_FUNCTION_LINES`] unless
//!   its doc comment says why (a sentence starting with [`LONG_FUNCTION_REASON`]), and at most
//!   [`MAX_LONG_FUNCTIONS`] are.
//!
//! Each check lists every violation, not just the first, so one run shows all that is left. The
//! checks read the code through [`code_only`], which blanks comments, the insides of string and
//! character literals and `#[cfg(test)]` items, so that a path in a doc comment, a message or a
//! unit test is not an import.

use std::path::{Path, PathBuf};

/// The rank of each top-level module of `src/` (`main` is `src/main.rs` and the binaries in
/// `src/bin/`). A module imports only its own rank or lower; the reasons for the order are in
/// `ARCHITECTURE.md` ("Ranks").
const RANKS: &[(&str, u8)] = &[
    // 0: plain types and process facts, no I/O of the daemon's own.
    ("clock", 0),
    ("secrets", 0),
    ("domain", 0),
    ("registry", 0),
    ("supervision", 0),
    ("resident", 0),
    ("cause", 0),
    ("fds", 0),
    ("reply_latency", 0),
    // 1: the rules the daemon is configured with.
    ("schedule", 1),
    ("config", 1),
    ("policy", 1),
    ("logging", 1),
    // 2: capabilities: storage, models, memory, the tool contract, job rules.
    ("store", 2),
    ("audit", 2),
    ("events", 2),
    ("llm", 2),
    ("voice", 2),
    ("memory", 2),
    ("sandbox", 2),
    ("browser", 2),
    ("skills", 2),
    ("reload", 2),
    ("backup", 2),
    ("tool", 2),
    ("jobs", 2),
    // 3: how the rest talks to each service.
    ("protocol", 3),
    ("channels", 3),
    // 4: what works through the services' handles.
    ("agent", 4),
    ("tools", 4),
    ("mcp", 4),
    ("node", 4),
    ("telegram", 4),
    ("people", 4),
    ("signal", 4),
    ("channel", 4),
    ("whatsapp", 4),
    ("studio", 4),
    ("triggers", 4),
    // 5: the only place that spawns actors or holds their refs.
    ("actors", 5),
    // 6: boots the tree.
    ("daemon", 6),
    // 7: in-process daemons and fakes for tests, benches and evals.
    ("testkit", 7),
    // 8: the command line and the binaries.
    ("cli", 8),
    ("main", 8),
];

/// Files allowed to import a higher rank: (file, module imported, why). Empty, and should stay so.
const RANK_EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// The longest a non-test source file under `src/` may be, in lines.
const MAX_LINES: usize = 800;

/// Files allowed past [`MAX_LINES`], each with why (paths relative to the repository, with `/`).
const LONG_FILE_EXCEPTIONS: &[(&str, &str)] = &[];

/// Where `crate::actors` may be named: the actors themselves and the daemon that boots them.
const ACTOR_PATH_ALLOWED: &[&str] = &["src/actors/", "src/daemon.rs"];

/// The longest a non-test function may be, in lines (signature to closing brace), without saying
/// why.
const MAX_FUNCTION_LINES: usize = 100;

/// What the doc comment of a longer function says, followed by the reason.
const LONG_FUNCTION_REASON: &str = "Long because";

/// How many functions may be longer than [`MAX_FUNCTION_LINES`], each with its reason.
const MAX_LONG_FUNCTIONS: usize = 5;

/// Every `.rs` file under `dir`, sorted, as paths relative to the repository root.
fn rust_files(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|error| panic!("cannot read an entry of {}: {error}", dir.display()))
            .path();
        if path.is_dir() {
            rust_files(root, &path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(
                path.strip_prefix(root)
                    .expect("every walked path is under the root")
                    .to_path_buf(),
            );
        }
    }
}

/// One source file: its path (with `/`, relative to the repository) and its text.
struct Source {
    path: String,
    text: String,
}

fn source_files() -> Vec<Source> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root, &root.join("src"), &mut files);
    files.sort();
    assert!(
        files.len() > 50,
        "the walk found only {} files under src/: is CARGO_MANIFEST_DIR the repository?",
        files.len()
    );
    files
        .iter()
        .map(|file| {
            let path = display(file);
            let text = std::fs::read_to_string(root.join(file))
                .unwrap_or_else(|error| panic!("cannot read {path}: {error}"));
            Source { path, text }
        })
        .collect()
}

/// The path with `/` separators, for comparing with the tables above and for messages.
fn display(path: &Path) -> String {
    path.components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A unit-test file: `tests.rs` (a `#[cfg(test)] mod tests;` child) or anything in a `tests/`
/// directory under `src/`.
fn is_test_file(path: &str) -> bool {
    path.ends_with("/tests.rs") || path.contains("/tests/")
}

/// `text` with comments and the insides of string and character literals replaced by spaces
/// (line breaks kept, so line numbers stay), and the items under `#[cfg(test)]` blanked too.
fn code_only(text: &str) -> String {
    blank_test_items(&blank_comments_and_literals(text))
}

/// Blanks `//` and (nested) `/* */` comments, and the contents of `"…"`, `r#"…"#`, `b"…"` and
/// `'x'` literals; lifetimes (`'a`) are code and stay.
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"') | Some('#'))
            && starts_literal(&chars, i)
            && raw_string_hashes(&chars, i + 1).is_some()
        {
            let hashes = raw_string_hashes(&chars, i + 1).expect("checked just above");
            // `r`, the hashes and the opening quote stay; the contents go.
            for _ in 0..hashes + 2 {
                out.push(chars[i]);
                i += 1;
            }
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    for _ in 0..hashes + 1 {
                        out.push(chars[i]);
                        i += 1;
                    }
                    break;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            if i < chars.len() {
                out.push('"');
                i += 1;
            }
        } else if c == '\'' {
            // A character literal is `'x'` or `'\…'`; anything else is a lifetime or a label.
            let end = if next == Some('\\') {
                (i + 3..chars.len().min(i + 12)).find(|&k| chars[k] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    out.push('\'');
                    for &inner in &chars[i + 1..end] {
                        blank(&mut out, inner);
                    }
                    out.push('\'');
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether a literal's prefix at `at` (`r`, or the `r` of `br`) starts a token.
fn starts_literal(chars: &[char], at: usize) -> bool {
    let before = |back: usize| at.checked_sub(back).map(|index| chars[index]);
    !is_ident_char(before(1)) || (before(1) == Some('b') && !is_ident_char(before(2)))
}

fn is_ident_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// For a raw string whose `#`s start at `start`: how many `#`s come before its `"`.
fn raw_string_hashes(chars: &[char], start: usize) -> Option<usize> {
    let hashes = chars[start..].iter().take_while(|&&c| c == '#').count();
    (chars.get(start + hashes) == Some(&'"')).then_some(hashes)
}

/// Blanks every item under `#[cfg(test)]` (a `mod tests { … }`, a test-only function or `use`),
/// in text whose comments and literals are already blank.
fn blank_test_items(code: &str) -> String {
    let mut out: Vec<char> = code.chars().collect();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= out.len() {
        if out[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        // The item ends at its first `;` outside braces, or at the brace closing its body.
        let mut end = i + marker.len();
        let mut depth = 0usize;
        while end < out.len() {
            match out[end] {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            end += 1;
        }
        let stop = (end + 1).min(out.len());
        for c in &mut out[i..stop] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = stop;
    }
    out.into_iter().collect()
}

/// The module path of a file under `src/`: `src/store/mod.rs` → `["store"]`,
/// `src/agent/run/budget.rs` → `["agent", "run", "budget"]`; the binaries are `main`.
fn module_path(path: &str) -> Vec<String> {
    let inner = path.strip_prefix("src/").unwrap_or(path);
    if inner == "main.rs" || inner.starts_with("bin/") {
        return vec!["main".to_string()];
    }
    let inner = inner.strip_suffix(".rs").unwrap_or(inner);
    let mut parts: Vec<String> = inner.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        parts.clear();
    }
    parts
}

fn rank_of(module: &str) -> Option<u8> {
    RANKS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, rank)| *rank)
}

/// One import of a top-level module found in code: the line and the module named.
#[derive(Debug, PartialEq)]
struct Import {
    line: usize,
    module: String,
}

/// The top-level modules that `code` (of the file whose module path is `module`) names through
/// `crate::`, `clawvisor::` (the binaries) or enough `super::` to reach the crate's root.
fn imports(code: &str, module: &[String]) -> Vec<Import> {
    let mut found = Vec::new();
    let is_binary = module == ["main"];
    for (index, line) in code.lines().enumerate() {
        let mut start = 0;
        while start < line.len() {
            let Some(offset) = line[start..].find(|c: char| c.is_alphabetic() || c == '_') else {
                break;
            };
            let at = start + offset;
            let word_end = line[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(line.len(), |end| at + end);
            let word = &line[at..word_end];
            let inside_a_path = line[..at].ends_with("::");
            start = word_end;
            if inside_a_path {
                continue;
            }
            let target = match word {
                "crate" if !is_binary => path_segment(line, word_end),
                "clawvisor" if is_binary => path_segment(line, word_end),
                "super" if !is_binary => {
                    // A file's own module is the last segment of its path, so the crate's root
                    // is `module.len()` supers up.
                    let mut supers = 1;
                    let mut cursor = word_end;
                    while line[cursor..].starts_with("::super") {
                        supers += 1;
                        cursor += "::super".len();
                    }
                    if supers == module.len() {
                        path_segment(line, cursor)
                    } else {
                        None
                    }
                }
                _ => None,
            };
            if let Some(target) = target {
                found.push(Import {
                    line: index + 1,
                    module: target,
                });
            }
        }
    }
    found
}

/// The segment after `::` at `at` in `line`, if it is a top-level module of the table.
fn path_segment(line: &str, at: usize) -> Option<String> {
    let rest = line[at..].strip_prefix("::")?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let segment = &rest[..end];
    rank_of(segment).map(|_| segment.to_string())
}

/// Every upward import of the non-test code, as messages.
fn rank_violations(sources: &[Source]) -> Vec<String> {
    let mut violations = Vec::new();
    for source in sources {
        if is_test_file(&source.path) {
            continue;
        }
        let module = module_path(&source.path);
        let Some(top) = module.first() else {
            continue;
        };
        let Some(own_rank) = rank_of(top) else {
            violations.push(format!(
                "{}: the module `{top}` has no rank; add it to RANKS in tests/tidy.rs and to \
                 the table in ARCHITECTURE.md",
                source.path
            ));
            continue;
        };
        for import in imports(&code_only(&source.text), &module) {
            let rank = rank_of(&import.module).expect("imports only returns ranked modules");
            let excepted = RANK_EXCEPTIONS
                .iter()
                .any(|(file, module, _)| *file == source.path && *module == import.module);
            if rank > own_rank && !excepted {
                violations.push(format!(
                    "{}:{}: `{top}` (rank {own_rank}) imports `{}` (rank {rank})",
                    source.path, import.line, import.module
                ));
            }
        }
    }
    violations
}

#[test]
fn every_module_imports_only_its_rank_or_lower() {
    let sources = source_files();
    for (file, module, reason) in RANK_EXCEPTIONS {
        assert!(
            sources.iter().any(|source| source.path == *file),
            "the rank exception for {file} → {module} ({reason}) names a file that does not \
             exist; remove it"
        );
    }
    let violations = rank_violations(&sources);
    assert!(
        violations.is_empty(),
        "{} import(s) reach a higher rank; move the type down to where both can see it (or pass \
         it in from above):\n{}",
        violations.len(),
        violations.join("\n")
    );
}

#[test]
fn only_the_actor_layer_names_crate_actors() {
    let mut violations = Vec::new();
    for source in source_files() {
        if ACTOR_PATH_ALLOWED
            .iter()
            .any(|allowed| source.path.starts_with(allowed))
        {
            continue;
        }
        for (line, code) in actor_path_lines(&source.text) {
            violations.push(format!("{}:{line}: {code}", source.path));
        }
    }
    assert!(
        violations.is_empty(),
        "{} line(s) outside src/actors/ and src/daemon.rs name the actors module; use the typed \
         handles instead:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// The lines of `text` that name the actors' module in code (comments and strings are not code).
fn actor_path_lines(text: &str) -> Vec<(usize, String)> {
    let code = blank_comments_and_literals(text);
    code.lines()
        .zip(text.lines())
        .enumerate()
        .filter(|(_, (code, _))| {
            code.contains("crate::actors") || code.contains("clawvisor::actors")
        })
        .map(|(index, (_, line))| (index + 1, line.trim().to_string()))
        .collect()
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let sources = source_files();
    for (exception, reason) in LONG_FILE_EXCEPTIONS {
        assert!(
            sources.iter().any(|source| source.path == *exception),
            "the exception for {exception} ({reason}) names a file that does not exist; remove it"
        );
    }
    let mut violations = Vec::new();
    for source in &sources {
        if is_test_file(&source.path)
            || LONG_FILE_EXCEPTIONS
                .iter()
                .any(|(exception, _)| *exception == source.path)
        {
            continue;
        }
        let lines = source.text.lines().count();
        if lines > MAX_LINES {
            violations.push(format!("{}: {lines} lines", source.path));
        }
    }
    assert!(
        violations.is_empty(),
        "{} source file(s) are longer than {MAX_LINES} lines; split each by concept (or list it \
         in LONG_FILE_EXCEPTIONS with its reason):\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// One function with a body: where it starts, its name, its length and its doc comment.
#[derive(Debug)]
struct Function {
    line: usize,
    name: String,
    lines: usize,
    doc: String,
}

/// The functions with a body in the non-test code of `text` (`fn` items inside other functions
/// included).
fn functions(text: &str) -> Vec<Function> {
    let code = code_only(text);
    let original: Vec<&str> = text.lines().collect();
    let chars: Vec<char> = code.chars().collect();
    let mut line_starts = vec![0];
    for (index, c) in chars.iter().enumerate() {
        if *c == '\n' {
            line_starts.push(index + 1);
        }
    }
    let line_of = |at: usize| line_starts.partition_point(|&start| start <= at);
    let mut found = Vec::new();
    let mut i = 0;
    while i + 3 < chars.len() {
        let is_fn = chars[i] == 'f'
            && chars[i + 1] == 'n'
            && chars[i + 2].is_whitespace()
            && !is_ident_char(i.checked_sub(1).map(|before| chars[before]));
        if !is_fn {
            i += 1;
            continue;
        }
        let name: String = chars[i + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        // The body starts at the first `{`, unless a `;` ends a declaration without one first.
        let Some(open) = (i..chars.len()).find(|&k| chars[k] == '{' || chars[k] == ';') else {
            break;
        };
        if chars[open] == ';' || name.is_empty() {
            i = open + 1;
            continue;
        }
        let mut depth = 0usize;
        let mut close = chars.len() - 1;
        for (k, c) in chars.iter().enumerate().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = line_of(i);
        found.push(Function {
            line: first,
            name,
            lines: line_of(close) - first + 1,
            doc: doc_comment(&original, first),
        });
        i += 3;
    }
    found
}

/// The `///` lines just above line `line` (1-based), attributes in between skipped.
fn doc_comment(lines: &[&str], line: usize) -> String {
    let mut doc = Vec::new();
    let mut index = line.saturating_sub(1);
    while index > 0 {
        index -= 1;
        let text = lines[index].trim();
        if let Some(comment) = text.strip_prefix("///") {
            doc.push(comment.trim().to_string());
        } else if !text.starts_with("#[") {
            break;
        }
    }
    doc.reverse();
    doc.join(" ")
}

/// Every non-test function longer than [`MAX_FUNCTION_LINES`], longest first: (where, lines,
/// whether its doc comment says why).
fn long_functions(sources: &[Source]) -> Vec<(String, usize, bool)> {
    let mut long = Vec::new();
    for source in sources {
        if is_test_file(&source.path) {
            continue;
        }
        for function in functions(&source.text) {
            if function.lines > MAX_FUNCTION_LINES {
                long.push((
                    format!("{}:{} {}", source.path, function.line, function.name),
                    function.lines,
                    function.doc.contains(LONG_FUNCTION_REASON),
                ));
            }
        }
    }
    long.sort_by_key(|entry| std::cmp::Reverse(entry.1));
    long
}

#[test]
fn long_functions_are_few_and_say_why() {
    let long = long_functions(&source_files());
    let listing = long
        .iter()
        .map(|(place, lines, reason)| {
            let why = if *reason { "" } else { "  ← says not why" };
            format!("{place}: {lines} lines{why}")
        })
        .collect::<Vec<_>>()
        .join("\n");
    eprintln!(
        "{} non-test function(s) over {MAX_FUNCTION_LINES} lines:\n{listing}",
        long.len()
    );
    assert!(
        long.iter().all(|(_, _, reason)| *reason),
        "a function over {MAX_FUNCTION_LINES} lines becomes a short sequence of named steps, or \
         says why it cannot in its doc comment (a sentence starting `{LONG_FUNCTION_REASON}`):\n\
         {listing}"
    );
    assert!(
        long.len() <= MAX_LONG_FUNCTIONS,
        "{} functions are over {MAX_FUNCTION_LINES} lines, more than {MAX_LONG_FUNCTIONS}; split \
         one into named steps before adding another:\n{listing}",
        long.len()
    );
}

#[test]
fn the_checks_see_what_they_look_for() {
    // The actor-path scan finds code, not comments or strings.
    let found = actor_path_lines(
        "use crate::actors::agent::AgentMsg;\n// crate::actors in a comment\nlet x = clawvisor::actors::root::spawn;\nlet s = \"crate::actors\";\n",
    );
    assert_eq!(
        found.iter().map(|(line, _)| *line).collect::<Vec<_>>(),
        [1, 3]
    );
    // Test files are recognised by name and directory, other files are not.
    assert!(is_test_file("src/memory/index/tests.rs"));
    assert!(is_test_file("src/testkit/tests/fixture.rs"));
    assert!(!is_test_file("src/memory/index.rs"));
    assert!(!is_test_file("src/tools/tests_helper.rs"));

    // Imports: `crate::`, `super::` up to the root, and `clawvisor::` in the binaries; not a
    // path inside another path, a comment, a string or a test module.
    let text = "use crate::store::Store;\n\
                // crate::actors in a comment\n\
                let x = super::super::config::Config::default();\n\
                let y = \"crate::cli\"; let c = '{'; let q = '\\''; let l: &'static str = r#\"crate::daemon\"#;\n\
                let z = other::crate::daemon; let w = crate::studio::router();\n\
                #[cfg(test)]\nmod tests {\n    use crate::testkit::Harness;\n}\n";
    let module: Vec<String> = ["agent", "run", "budget"].map(str::to_string).to_vec();
    let found = imports(&code_only(text), &module);
    assert_eq!(
        found,
        [
            Import {
                line: 1,
                module: "store".into()
            },
            Import {
                line: 5,
                module: "studio".into()
            },
        ],
        "`super::super` from agent/run/budget.rs is agent's own module, not the root"
    );
    let found = imports("use super::super::config::X;\n", &module[..2]);
    assert_eq!(
        found.len(),
        1,
        "two supers from agent/run.rs reach the root"
    );
    let binary = imports("clawvisor::cli::main()\n", &["main".to_string()]);
    assert_eq!(binary.len(), 1);
    assert_eq!(module_path("src/store/mod.rs"), ["store"]);
    assert_eq!(module_path("src/bin/tool.rs"), ["main"]);

    // An upward import is reported with the file, the line and both ranks.
    let sources = [Source {
        path: "src/config/mod.rs".into(),
        text: "fn f() {}\nuse crate::tools::ToolSettings;\n".into(),
    }];
    assert_eq!(
        rank_violations(&sources),
        ["src/config/mod.rs:2: `config` (rank 1) imports `tools` (rank 4)"]
    );

    // Functions: lengths from signature to closing brace, braces in literals ignored, doc read.
    let text = "/// Long because it is a table.\n#[inline]\nfn table() {\n    let open = '{';\n    let s = \"}}}\";\n}\ntrait T { fn declared(&self); }\nfn short() { }\n";
    let summary: Vec<(String, usize, bool)> = functions(text)
        .into_iter()
        .map(|f| (f.name, f.lines, f.doc.contains(LONG_FUNCTION_REASON)))
        .collect();
    assert_eq!(
        summary,
        [
            ("table".to_string(), 4, true),
            ("short".to_string(), 1, false)
        ]
    );
}
