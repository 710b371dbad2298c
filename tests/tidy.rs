//! Tidy checks on the source tree itself (in the spirit of rust-analyzer's `tidy` test): rules
//! about the code's shape that review keeps missing, checked on every test run.
//!
//! - Only the actor layer (`src/actors/`) and the place that boots it (`src/daemon.rs`) name
//!   `crate::actors` (or `clawvisor::actors`); everything else talks to actors through typed
//!   handles, so the actors can be restructured without touching their callers.
//! - No source file under `src/` (unit-test files aside) is longer than [`MAX_LINES`]: a file
//!   that grows past it holds several concepts and is split by concept. A file that must stay
//!   long (generated code, a table) is listed in [`LONG_FILE_EXCEPTIONS`] with its reason.
//!
//! Each check lists every violation, not just the first, so one run shows all that is left.

use std::path::{Path, PathBuf};

/// The longest a non-test source file under `src/` may be, in lines.
const MAX_LINES: usize = 800;

/// Files allowed past [`MAX_LINES`], each with why (paths relative to the repository, with `/`).
const LONG_FILE_EXCEPTIONS: &[(&str, &str)] = &[];

/// Where `crate::actors` may be named: the actors themselves and the daemon that boots them.
const ACTOR_PATH_ALLOWED: &[&str] = &["src/actors/", "src/daemon.rs"];

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

fn source_files() -> (PathBuf, Vec<PathBuf>) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root, &root.join("src"), &mut files);
    files.sort();
    assert!(
        files.len() > 50,
        "the walk found only {} files under src/: is CARGO_MANIFEST_DIR the repository?",
        files.len()
    );
    (root, files)
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

/// The lines of `text` that name the actors' module in code (comments are not code).
fn actor_path_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.trim_start();
            !code.starts_with("//")
                && (code.contains("crate::actors") || code.contains("clawvisor::actors"))
        })
        .map(|(index, line)| (index + 1, line.trim().to_string()))
        .collect()
}

#[test]
fn only_the_actor_layer_names_crate_actors() {
    let (root, files) = source_files();
    let mut violations = Vec::new();
    for file in &files {
        let path = display(file);
        if ACTOR_PATH_ALLOWED
            .iter()
            .any(|allowed| path.starts_with(allowed))
        {
            continue;
        }
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|error| panic!("cannot read {path}: {error}"));
        for (line, code) in actor_path_lines(&text) {
            violations.push(format!("{path}:{line}: {code}"));
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

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let (root, files) = source_files();
    for (exception, reason) in LONG_FILE_EXCEPTIONS {
        assert!(
            files.iter().any(|file| display(file) == *exception),
            "the exception for {exception} ({reason}) names a file that does not exist; remove it"
        );
    }
    let mut violations = Vec::new();
    for file in &files {
        let path = display(file);
        if is_test_file(&path)
            || LONG_FILE_EXCEPTIONS
                .iter()
                .any(|(exception, _)| *exception == path)
        {
            continue;
        }
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|error| panic!("cannot read {path}: {error}"));
        let lines = text.lines().count();
        if lines > MAX_LINES {
            violations.push(format!("{path}: {lines} lines"));
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

#[test]
fn the_checks_see_what_they_look_for() {
    // The actor-path scan finds code, not comments.
    let found = actor_path_lines(
        "use crate::actors::agent::AgentMsg;\n// crate::actors in a comment\nlet x = clawvisor::actors::root::spawn;\n",
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
}
