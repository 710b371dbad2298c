//! The underlying cause of an error, in words a person can act on.
//!
//! Client libraries (reqwest, hyper, teloxide) wrap the operating system's error several layers
//! deep, and their own `Display` shows only the top layer ("error sending request"). [`chain`]
//! walks `source()` to the bottom so the real reason ("Too many open files (os error 24)")
//! reaches the log, events and Studio; [`advice`] recognises the causes a person must fix on the
//! machine and says what to do; [`explain`] puts the two together, advice first.
//!
//! Invariants: nothing here reads the environment or allocates beyond the returned text; the
//! texts are not redacted here — callers redact (a URL in an error can carry a bot token).

use std::error::Error;

/// `EMFILE`: this process has as many files open as its limit allows.
const EMFILE: i32 = 24;
/// `ENFILE`: the whole system has as many files open as it allows.
const ENFILE: i32 = 23;

/// Advice for a process out of file descriptors (people read this first).
pub const TOO_MANY_OPEN_FILES: &str =
    "this process has too many open files — raise LimitNOFILE (or `ulimit -n`) for the daemon";

/// Every message of `error` and of its sources, joined by ": ", skipping a source whose text
/// the message before it already contains (many libraries repeat their source in their own text).
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !cause_text.is_empty() && !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// What a person can do about the cause of `error`, when it is one they must fix on the machine
/// (too many open files, nothing listening, a name that does not resolve); `None` otherwise.
pub fn advice(error: &(dyn Error + 'static)) -> Option<&'static str> {
    let mut current: Option<&(dyn Error + 'static)> = Some(error);
    while let Some(layer) = current {
        if let Some(io) = layer.downcast_ref::<std::io::Error>()
            && let Some(advice) = io_advice(io)
        {
            return Some(advice);
        }
        current = layer.source();
    }
    // Some layers keep only the text of the error they wrapped.
    text_advice(&chain(error))
}

/// `advice` then the whole chain in parentheses, or the chain alone when there is no advice.
pub fn explain(error: &(dyn Error + 'static)) -> String {
    let chain = chain(error);
    match advice(error) {
        Some(advice) => format!("{advice} ({chain})"),
        None => chain,
    }
}

/// The advice for an operating-system error, if it is a known one.
pub fn io_advice(error: &std::io::Error) -> Option<&'static str> {
    match error.raw_os_error() {
        Some(EMFILE) => Some(TOO_MANY_OPEN_FILES),
        Some(ENFILE) => {
            Some("the system has too many open files — raise fs.file-max or close other programs")
        }
        _ => match error.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                Some("nothing answers at that address — check that the server runs and the address")
            }
            _ => None,
        },
    }
}

/// The advice for an error known only by its text.
pub fn text_advice(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    if lower.contains("too many open files") || lower.contains("os error 24") {
        Some(TOO_MANY_OPEN_FILES)
    } else if lower.contains("connection refused") {
        Some("nothing answers at that address — check that the server runs and the address")
    } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
        Some("the server's name does not resolve — check the address and this machine's DNS")
    } else {
        None
    }
}

/// A reason's words for people, without the technical cause in parentheses at its end (the bot's
/// row keeps the whole reason): "… check this machine's network (error sending request: …)".
pub fn without_technical_tail(reason: &str) -> &str {
    if !reason.ends_with(')') {
        return reason;
    }
    let mut depth = 0usize;
    for (index, character) in reason.char_indices().rev() {
        match character {
            ')' => depth += 1,
            '(' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    let words = reason[..index].trim_end();
                    return if words.is_empty() { reason } else { words };
                }
            }
            _ => {}
        }
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_technical_tail_is_left_to_the_detail() {
        assert_eq!(
            without_technical_tail("check the network (error sending request: client error (x))"),
            "check the network"
        );
        assert_eq!(without_technical_tail("stopped"), "stopped");
        assert_eq!(
            without_technical_tail("(only technical)"),
            "(only technical)"
        );
    }

    /// An error wrapping another, like reqwest's over hyper's over the OS error.
    #[derive(Debug)]
    struct Wrapper(&'static str, Box<dyn Error + Send + Sync>);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self.1.as_ref())
        }
    }

    #[test]
    fn the_os_error_at_the_bottom_reaches_the_text_and_the_advice() {
        let os = std::io::Error::from_raw_os_error(EMFILE);
        let error = Wrapper(
            "error sending request",
            Box::new(Wrapper("client error (Connect)", Box::new(os))),
        );
        let explained = explain(&error);
        assert!(
            explained.starts_with(TOO_MANY_OPEN_FILES),
            "advice first: {explained}"
        );
        assert!(explained.contains("error sending request: client error (Connect): "));
        assert!(explained.contains("os error 24"), "{explained}");
    }

    #[test]
    fn a_repeated_source_is_said_once_and_an_unknown_cause_has_no_advice() {
        let inner = std::io::Error::other("disk on fire");
        let error = Wrapper("write failed: disk on fire", Box::new(inner));
        assert_eq!(chain(&error), "write failed: disk on fire");
        assert_eq!(advice(&error), None);
        assert_eq!(explain(&error), "write failed: disk on fire");
    }

    #[test]
    fn a_cause_kept_only_as_text_is_still_recognised() {
        let error = std::io::Error::other("tcp connect error: Too many open files (os error 24)");
        assert_eq!(advice(&error), Some(TOO_MANY_OPEN_FILES));
        assert_eq!(
            text_advice("dns error: failed to lookup address information"),
            Some("the server's name does not resolve — check the address and this machine's DNS")
        );
    }
}
