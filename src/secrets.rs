//! Secrets (bot tokens, API keys): the redactor that keeps them out of logs, errors, Studio, tool
//! output and the model, the check that refuses tool calls carrying them, and the process
//! hardening that keeps them out of reach of the daemon's own tools.
//!
//! Every secret the daemon reads from the environment or from the secrets store
//! (`<data_dir>/secrets.toml`, see `config::secrets_file`) is registered here once. [`redact`] replaces
//! each registered value — and the encoded forms a tool might print or a model might send
//! (URL-encoded, base64 of any text containing it, hex) — with `***`; the tracing writer
//! (src/logging.rs) runs every log line through it, error texts that leave a boundary (LLM errors,
//! Telegram errors, Studio) do too, and the tool dispatcher runs every tool output and every
//! recorded argument through it. Behind the value and its encodings, a second line
//! (`transforms`) finds the common transforms — another case, reversed, rot13, separators between
//! the characters, split in halves, gzip/deflate/zlib or plain bytes in base64. It is a second
//! line, not the guard: a secret a tool can read is a secret it can encode beyond any match, so
//! the guard is that tools never see secrets (the sandbox, the scrubbed environment below).
//! [`contains_secret`] is the same match as a yes/no: the dispatcher
//! refuses any tool call whose arguments carry a secret (so `web_fetch` cannot carry a key out in
//! a query string while the operator sees `***`). A bot token also appears inside Telegram URLs
//! (`/bot<TOKEN>/getMe`), so matching by value is the only way to be sure.
//!
//! [`protect_daemon_process`] is what `serve` and `chat` do before any other thread starts: the
//! process becomes non-dumpable (another process of the same user — a shell command an agent runs
//! — can no longer read `/proc/<pid>/environ` or its memory, and no core dump is written), and the
//! secret variables are removed from the environment and overwritten in the original environment
//! block, which is what `/proc/<pid>/environ` and `ps eww` show (`unsetenv` alone leaves it
//! untouched).
//!
//! Architecture Invariant: `agent::dispatch` refuses any tool call whose arguments carry a
//! registered secret (before the gate, recorded and audited) and redacts every tool output and
//! recorded call before the model, the transcript or Studio sees it.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock, RwLock};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use base64::Engine as _;

mod transforms;

pub use transforms::{reversed, rot13};

/// Secrets shorter than this are not registered: redacting "abc" everywhere would mangle text.
/// (So the secrets store refuses shorter values: they could not be kept out of logs.)
pub const MIN_SECRET_LEN: usize = 8;

/// What replaces a secret (in any form) in a text.
pub const REDACTED: &str = "***";

/// The registered secrets and the automatons over all their forms.
#[derive(Default)]
struct Registry {
    secrets: Vec<String>,
    /// Every form of every secret, deduplicated; `None` while nothing is registered.
    matcher: Option<Arc<Automatons>>,
}

/// The two automatons of `transforms::Matchers`.
struct Automatons {
    /// The values, their [`encoded_forms`] and their plain transforms, in the text as it is.
    plain: AhoCorasick,
    /// The squeezed forms (letters and digits only, halves of long secrets), in the squeezed text.
    squeezed: Option<AhoCorasick>,
}

impl Automatons {
    fn matchers(&self) -> transforms::Matchers<'_> {
        transforms::Matchers {
            plain: &self.plain,
            squeezed: self.squeezed.as_ref(),
        }
    }
}

/// One automaton over `forms`: leftmost-longest (a secret containing another, or one of its
/// forms, is replaced whole), ASCII case-insensitive (a secret in another case is the secret).
/// A contiguous NFA, not the DFA aho-corasick picks for few patterns: with ten bots' tokens
/// (some 150 forms) the DFA took 1.4 MiB of the idle daemon's heap (issue #20).
fn automaton(mut forms: Vec<String>) -> Result<AhoCorasick, aho_corasick::BuildError> {
    forms.sort();
    forms.dedup();
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .ascii_case_insensitive(true)
        .kind(Some(AhoCorasickKind::ContiguousNFA))
        .build(&forms)
}

fn registry() -> &'static RwLock<Registry> {
    static SECRETS: OnceLock<RwLock<Registry>> = OnceLock::new();
    SECRETS.get_or_init(|| RwLock::new(Registry::default()))
}

fn matcher() -> Option<Arc<Automatons>> {
    // A poisoned lock only means another thread panicked while holding it; the list is still valid.
    registry()
        .read()
        .unwrap_or_else(|poison| poison.into_inner())
        .matcher
        .clone()
}

/// Remembers a secret value so that it (and its encoded forms) is redacted from now on.
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut registry = registry()
        .write()
        .unwrap_or_else(|poison| poison.into_inner());
    if registry.secrets.iter().any(|known| known == secret) {
        return;
    }
    registry.secrets.push(secret.to_string());
    let plain: Vec<String> = registry
        .secrets
        .iter()
        .flat_map(|secret| {
            let mut forms = encoded_forms(secret);
            forms.extend(transforms::plain_transforms(secret));
            forms
        })
        .collect();
    let squeezed: Vec<String> = registry
        .secrets
        .iter()
        .flat_map(|secret| transforms::squeezed_forms(secret, MIN_SECRET_LEN))
        .collect();
    let built = automaton(plain).and_then(|plain| {
        let squeezed = (!squeezed.is_empty())
            .then(|| automaton(squeezed))
            .transpose()?;
        Ok(Automatons { plain, squeezed })
    });
    match built {
        Ok(automatons) => registry.matcher = Some(Arc::new(automatons)),
        // Building fails only past aho-corasick's size limits, far beyond a handful of secrets;
        // the previous automatons (without this secret) stay rather than none at all.
        Err(error) => eprintln!("clawvisor: cannot register a secret for redaction: {error}"),
    }
}

/// The forms of `secret` that are matched: the value itself, URL-encoded (upper- and lowercase
/// hex), hex, and base64 (standard and URL-safe alphabets) at each of the three byte alignments it
/// can have inside a longer encoded text — so `base64("user:" + secret)`, as in a Basic
/// authorization header, is caught too. The base64 forms are the characters that depend on the
/// secret's bytes only (the first and last few, shared with neighbouring bytes, are left out).
pub fn encoded_forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let mut forms = vec![secret.to_string()];
    let percent_upper = percent_encode(bytes, false);
    if percent_upper != secret {
        forms.push(percent_upper);
        forms.push(percent_encode(bytes, true));
    }
    forms.push(hex::encode(bytes));
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for offset in 0..3usize {
            let mut shifted = vec![0u8; offset];
            shifted.extend_from_slice(bytes);
            let encoded = engine.encode(&shifted);
            // Character i covers bits [6i, 6i + 6); the secret covers [8 * offset, 8 * (offset + n)).
            let first = (8 * offset).div_ceil(6);
            let end = (8 * (offset + bytes.len())) / 6;
            if let Some(core) = encoded.get(first..end)
                && core.len() >= MIN_SECRET_LEN
            {
                forms.push(core.to_string());
            }
        }
    }
    forms
}

/// Percent-encodes every byte outside RFC 3986's unreserved set.
fn percent_encode(bytes: &[u8], lowercase: bool) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &byte in bytes {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else if lowercase {
            out.push_str(&format!("%{byte:02x}"));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Returns `text` with every registered secret, in any of its [`encoded_forms`] or the
/// transforms of the second line (see the module header), replaced by `***`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let Some(automatons) = matcher() else {
        return Cow::Borrowed(text);
    };
    let spans = automatons.matchers().spans(text.as_bytes(), 0);
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(transforms::replace_spans(text, &spans, REDACTED))
}

/// Whether `text` holds a registered secret in any of its [`encoded_forms`] or transforms — also
/// once percent-decoded (twice at most), which catches URLs that encode only some characters.
pub fn contains_secret(text: &str) -> bool {
    let Some(automatons) = matcher() else {
        return false;
    };
    let matchers = automatons.matchers();
    if matchers.any(text.as_bytes(), 0) {
        return true;
    }
    let mut decoded = Cow::Borrowed(text.as_bytes());
    for _ in 0..2 {
        if !decoded.contains(&b'%') {
            return false;
        }
        decoded = Cow::Owned(percent_decode(&decoded));
        if matchers.any(decoded.as_ref(), 0) {
            return true;
        }
    }
    false
}

/// Decodes every valid `%XX` escape; everything else is kept as is.
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| bytes.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                index += 3;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    out
}

/// Whether any string of `value` (object keys included) holds a registered secret. Checking the
/// parsed strings, not only the JSON text, catches a secret hidden behind JSON escapes (`\u0041`).
pub fn json_contains_secret(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::String(text) => contains_secret(text),
        Value::Array(items) => items.iter().any(json_contains_secret),
        Value::Object(map) => map
            .iter()
            .any(|(key, item)| contains_secret(key) || json_contains_secret(item)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Redacts every string of `value` in place (object keys included).
pub fn redact_json(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(text) => {
            if let Cow::Owned(redacted) = redact(text) {
                *text = redacted;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        Value::Object(map) => {
            if map.keys().any(|key| contains_secret(key)) {
                let entries = std::mem::take(map);
                for (key, item) in entries {
                    map.insert(redact(&key).into_owned(), item);
                }
            }
            map.values_mut().for_each(redact_json);
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A secret value read from the environment or the secrets store. Its `Debug` never shows the
/// value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Reads `var` from the environment and registers the value for redaction.
    pub fn from_env(var: &str) -> Option<Secret> {
        let value = std::env::var(var).ok()?;
        let value = value.trim().to_string();
        if value.is_empty() {
            return None;
        }
        register(&value);
        Some(Secret(value))
    }

    /// Wraps a literal value (tests, tokens handed over by the caller) and registers it.
    pub fn new(value: impl Into<String>) -> Secret {
        let value = value.into();
        register(&value);
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

// ---------------------------------------------------------------------------------------------
// Process hardening

/// What [`protect_daemon_process`] did, to be logged once logging runs.
#[derive(Debug, Default)]
pub struct ProcessProtection {
    /// Whether the process is now non-dumpable.
    pub non_dumpable: bool,
    /// Secret variables removed from the environment.
    pub removed: Vec<String>,
    /// Entries overwritten in the original environment block (`/proc/<pid>/environ`).
    pub overwritten: usize,
    /// What could not be done, each naming the consequence.
    pub problems: Vec<String>,
}

impl ProcessProtection {
    /// Logs the outcome: one info line, and a warning per problem.
    pub fn log(&self) {
        tracing::info!(
            non_dumpable = self.non_dumpable,
            removed = self.removed.len(),
            overwritten = self.overwritten,
            "secrets: process hardened (not dumpable; secret variables removed from the environment)"
        );
        for problem in &self.problems {
            tracing::warn!("secrets: {problem}");
        }
    }
}

/// Makes the process non-dumpable and removes the secret variables `vars` from its environment
/// (the live one and the original block). Call it before any other thread starts (`cli::main`
/// calls it right after the config is loaded, before logging and the async runtime): it checks
/// that the process is single-threaded and leaves the environment alone otherwise.
pub fn protect_daemon_process<'a>(vars: impl IntoIterator<Item = &'a str>) -> ProcessProtection {
    let mut protection = ProcessProtection::default();
    match nix::sys::prctl::set_dumpable(false) {
        Ok(()) => protection.non_dumpable = true,
        Err(error) => protection.problems.push(format!(
            "could not make the process non-dumpable ({error}); other processes of this user can read its memory"
        )),
    }
    let vars: Vec<&str> = vars
        .into_iter()
        .filter(|var| !var.is_empty() && !var.contains('=') && !var.contains('\0'))
        .collect();
    match thread_count() {
        Ok(1) => {}
        Ok(threads) => {
            protection.problems.push(format!(
                "the environment was not scrubbed: {threads} threads were running (it must happen before any thread starts)"
            ));
            return protection;
        }
        Err(error) => {
            protection.problems.push(format!(
                "the environment was not scrubbed: cannot count this process's threads ({error})"
            ));
            return protection;
        }
    }
    for var in &vars {
        if std::env::var_os(var).is_some() {
            // SAFETY: `remove_var` is unsafe because another thread could read or write the
            // environment at the same time. `thread_count` just showed that this process has one
            // thread, this one, and nothing here starts another before the call returns.
            unsafe { std::env::remove_var(var) };
            protection.removed.push(var.to_string());
        }
    }
    match overwrite_original_environment(&vars) {
        Ok(count) => protection.overwritten = count,
        Err(error) => protection.problems.push(format!(
            "the original environment block still holds the secrets (visible as /proc/{}/environ to root): {error}",
            std::process::id()
        )),
    }
    protection
}

/// The number of threads of this process.
fn thread_count() -> std::io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

/// The bounds of the environment block the kernel placed on the stack at `execve`: fields 50 and
/// 51 (`env_start`, `env_end`) of `/proc/self/stat` (Linux ≥ 3.5). `/proc/<pid>/environ` shows
/// exactly these bytes.
fn environment_block() -> Result<(usize, usize), String> {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|error| format!("cannot read /proc/self/stat: {error}"))?;
    // The command name (field 2) is in parentheses and may hold spaces; fields 3.. follow the
    // last `)`.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or("/proc/self/stat has no command field")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |number: usize| -> Result<usize, String> {
        fields
            .get(number - 3)
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| format!("/proc/self/stat has no field {number}"))
    };
    let (start, end) = (field(50)?, field(51)?);
    if start == 0 || end <= start || end - start > 16 * 1024 * 1024 {
        return Err(format!(
            "implausible environment bounds {start:#x}..{end:#x}"
        ));
    }
    Ok((start, end))
}

/// Overwrites with `*` the values of the entries named `vars` in the original environment block;
/// returns how many entries were overwritten.
fn overwrite_original_environment(vars: &[&str]) -> Result<usize, String> {
    if vars.is_empty() {
        return Ok(0);
    }
    let (start, end) = environment_block()?;
    let length = end - start;
    // SAFETY: [start, end) is the environment block the kernel wrote into this process's stack
    // mapping at `execve` (readable and writable, never unmapped while the process lives), as
    // `/proc/self/stat` reports it for this very process. No Rust value refers to it (`std::env`
    // copies what it reads), the process is single-threaded (checked by the caller), and the
    // writes below stay inside the block and only replace value bytes, never a separator.
    let block = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, length) };
    let mut overwritten = 0;
    let mut position = 0;
    while position < block.len() {
        let entry_end = block[position..]
            .iter()
            .position(|&byte| byte == 0)
            .map_or(block.len(), |offset| position + offset);
        let entry = &block[position..entry_end];
        let matched = vars.iter().find_map(|var| {
            let name = var.as_bytes();
            (entry.len() > name.len() && entry.starts_with(name) && entry[name.len()] == b'=')
                .then_some(name.len() + 1)
        });
        if let Some(value_offset) = matched {
            for byte in &mut block[position + value_offset..entry_end] {
                *byte = b'*';
            }
            overwritten += 1;
        }
        position = entry_end + 1;
    }
    Ok(overwritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_redacted_everywhere_in_a_text() {
        let token = Secret::new("123456:AAEsecret-token-value");
        let text = format!(
            "error sending request for url (https://api.telegram.org/bot{}/GetUpdates) twice {}",
            token.expose(),
            token.expose()
        );
        let redacted = redact(&text);
        assert!(!redacted.contains(token.expose()));
        assert_eq!(redacted.matches("***").count(), 2);
        assert_eq!(format!("{token:?}"), "Secret(***)");
    }

    #[test]
    fn short_values_are_not_treated_as_secrets() {
        register("abc");
        assert_eq!(redact("abc def"), "abc def");
    }

    #[test]
    fn encoded_forms_of_a_secret_are_redacted_and_detected() {
        let secret = "987654:ZZEncoded/secret+value";
        register(secret);
        let url_encoded = format!(
            "https://example.com/?k={}",
            percent_encode(secret.as_bytes(), false)
        );
        let lower = format!("q={}", percent_encode(secret.as_bytes(), true));
        let hex_form = format!("0x{}", hex::encode(secret));
        let mut cases = vec![url_encoded, lower, hex_form];
        // Base64 of texts holding the secret at every alignment, in both alphabets.
        for prefix in ["", "u:", "ab:"] {
            let plain = format!("{prefix}{secret} and more");
            cases.push(base64::engine::general_purpose::STANDARD.encode(&plain));
            cases.push(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&plain));
            cases.push(format!(
                "Authorization: Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("user{prefix}{secret}"))
            ));
        }
        for case in &cases {
            assert!(contains_secret(case), "not detected: {case}");
            assert!(redact(case).contains(REDACTED), "not redacted: {case}");
        }
        assert!(!contains_secret("an ordinary text about secrets"));
        // Encoding only some characters hides nothing either.
        assert!(contains_secret(&format!(
            "/x?k={}",
            secret.replace(':', "%3a").replace('Z', "%5A")
        )));
        let mut value = serde_json::json!({"url": cases[0], "nested": [{"x": secret}], secret: 1});
        assert!(json_contains_secret(&value));
        redact_json(&mut value);
        assert!(!json_contains_secret(&value), "{value}");
        // A JSON escape hides nothing from the parsed check.
        let escaped: serde_json::Value =
            serde_json::from_str(r#"{"u": "\u0039\u0038\u0037654:ZZEncoded/secret+value"}"#)
                .unwrap();
        assert!(json_contains_secret(&escaped));
    }

    /// A secret registered for the second line's tests (random enough to be unguessable).
    const TRANSFORMED: &str = "Xq7Lm2Pz9Rw4Tn8Vb3Kc6Hd5J";

    fn assert_caught(form: &str, what: &str) {
        register(TRANSFORMED);
        assert!(contains_secret(form), "{what} not detected: {form}");
        let redacted = redact(form);
        assert!(redacted.contains(REDACTED), "{what} not redacted: {form}");
        assert!(
            !contains_secret(&redacted),
            "{what} still recoverable after redaction: {redacted}"
        );
    }

    #[test]
    fn a_secret_in_another_case_is_caught() {
        assert_caught(&format!("key={}", TRANSFORMED.to_uppercase()), "uppercase");
        assert_caught(&format!("key={}", TRANSFORMED.to_lowercase()), "lowercase");
    }

    #[test]
    fn a_reversed_secret_is_caught() {
        assert_caught(&format!("here: {} done", reversed(TRANSFORMED)), "reversed");
    }

    #[test]
    fn a_rot13_secret_is_caught() {
        assert_caught(&format!("x {} y", rot13(TRANSFORMED)), "rot13");
        assert_caught(
            &format!("x {} y", reversed(&rot13(TRANSFORMED))),
            "rot13 reversed",
        );
    }

    #[test]
    fn separators_between_the_characters_are_caught() {
        for separator in [" ", "-", ".", "_", ",", "\n", ", ", " - ", "\u{200b}"] {
            let spread: Vec<String> = TRANSFORMED.chars().map(String::from).collect();
            let form = format!("the value is {} ok", spread.join(separator));
            assert_caught(&form, &format!("separator {separator:?}"));
            // The separators are redacted with the characters, and the text around them stays.
            let redacted = redact(&form);
            assert!(redacted.starts_with("the value is ") && redacted.ends_with(" ok"));
        }
        let reversed_spaced: Vec<String> =
            reversed(TRANSFORMED).chars().map(String::from).collect();
        assert_caught(&reversed_spaced.join(" "), "reversed and spaced");
    }

    #[test]
    fn a_secret_split_in_two_is_caught_whichever_the_split() {
        for split in [8, 12, 16] {
            let (first, second) = TRANSFORMED.split_at(split);
            let form = format!("part one: {first}\n(some text between)\npart two: {second}");
            assert_caught(&form, &format!("split at {split}"));
        }
    }

    #[test]
    fn compressed_and_base64_encoded_secrets_are_caught() {
        use std::io::Write as _;
        let payload = format!("config dump\nTOKEN={TRANSFORMED}\nmore lines of text\n");
        let gzip = {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(payload.as_bytes()).unwrap();
            encoder.finish().unwrap()
        };
        let zlib = {
            let mut encoder =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            encoder.write_all(payload.as_bytes()).unwrap();
            encoder.finish().unwrap()
        };
        let deflate = {
            let mut encoder =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            encoder.write_all(payload.as_bytes()).unwrap();
            encoder.finish().unwrap()
        };
        let standard = &base64::engine::general_purpose::STANDARD;
        let url_safe = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        for (name, bytes) in [("gzip", &gzip), ("zlib", &zlib), ("deflate", &deflate)] {
            let encoded = standard.encode(bytes);
            assert_caught(&format!("blob: {encoded} end"), name);
            assert_caught(&format!("{name}: {}", url_safe.encode(bytes)), name);
            // `gzip | base64` wraps its output at 76 characters.
            let wrapped: Vec<String> = encoded
                .as_bytes()
                .chunks(76)
                .map(|chunk| String::from_utf8(chunk.to_vec()).unwrap())
                .collect();
            let form = format!("$ gzip -c .env | base64\n{}\n$ ", wrapped.join("\n"));
            assert_caught(&form, &format!("{name} wrapped"));
            assert!(redact(&form).starts_with("$ gzip -c .env | base64\n***"));
        }
        // Base64 of a transform (no compression) too.
        assert_caught(&standard.encode(rot13(TRANSFORMED)), "base64 of rot13");
    }

    #[test]
    fn a_long_ordinary_text_is_left_untouched() {
        register(TRANSFORMED);
        let paragraph = "The quick brown fox jumps over the lazy dog; meanwhile, at 10:42 the \
            build finished (exit 0) and /usr/lib/x86_64-linux-gnu/libssl.so.3 was found. \
            Base64 of hello is aGVsbG8gd29ybGQ= and SGVsbG8sIFdvcmxkISBIb3cgYXJlIHlvdT8= is \
            another. A-B-C-D 1.2.3.4, e_f_g; https://docs.rs/serde/latest/serde/index.html\n";
        let text = paragraph.repeat(200);
        assert!(!contains_secret(&text));
        assert!(matches!(redact(&text), Cow::Borrowed(_)));
    }

    #[test]
    fn the_environment_block_bounds_are_read() {
        let (start, end) = environment_block().unwrap();
        assert!(end > start);
    }
}
