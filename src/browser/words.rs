//! A `browser` call as people read it: the action line the tool writes for an approval
//! (`tools::browser`'s `describe_call`: `browser: click [3] "Buy now" on shop.example (page
//! "Sign in")`) and the plain sentence every channel shows first (`protocol::approvals::
//! plain_activity`: `click “Buy now” on shop.example (page “Sign in”)`).
//!
//! Invariant: one format, written ([`quote`]) and read ([`plain_activity`]) here. Every text a
//! page or the model chose (a label, a title, typed text) is quoted with [`quote`], which keeps
//! straight quotes and line breaks out of it, so the reader can tell where each one ends and a
//! page cannot make its label read as a different site or action. Reading never fails: a line
//! it does not recognise (an older format) is shown whole after "use its web browser".

/// `text` in straight quotes, with any straight quote inside turned into an apostrophe and
/// line breaks (and other control characters) into spaces.
pub fn quote(text: &str) -> String {
    let inner: String = text
        .trim()
        .chars()
        .map(|character| match character {
            '"' => '\'',
            control if control.is_control() => ' ',
            other => other,
        })
        .collect();
    format!("\"{inner}\"")
}

/// The browser call `action` (as `describe_call` wrote it) in plain words, without the agent:
/// "type into “Email” on shop.example (page “Sign in”)".
pub fn plain_activity(action: &str) -> String {
    let described = action.strip_prefix("browser:").unwrap_or(action).trim();
    let (verb, rest) = described.split_once(' ').unwrap_or((described, ""));
    match verb {
        "open" => format!("open {} in its web browser", page_of(rest)),
        "click" => format!("click {}", element(rest)),
        "type" => typing(rest),
        "select" => match rest.split_once("\" in ") {
            Some((value, target)) => {
                format!("choose {}” in {}", curly(value), element(target))
            }
            None => format!("choose an option {}", curly(rest)),
        },
        "press" => format!("press {}", curly(rest)),
        "log" => logging_in(rest),
        "screenshot" => format!("take a picture of the page {}", curly(rest)),
        "pdf" => format!("save the page {} as a PDF in its workspace", curly(rest)),
        _ => format!("use its web browser ({})", curly(described)),
    }
}

/// `"text" into [3] "Email" on …[, then press Enter]` → "type into “Email” on …".
fn typing(rest: &str) -> String {
    let (rest, enter) = match rest.strip_suffix(", then press Enter") {
        Some(rest) => (rest, ", then press Enter"),
        None => (rest, ""),
    };
    // The typed text is quoted without inner quotes: it ends at the first `" into `.
    match rest.split_once("\" into ") {
        Some((_, target)) => format!("type into {}{enter}", element(target)),
        None => format!("type {}{enter}", curly(rest)),
    }
}

/// `in to "shop.example" with … on …` → "log in to shop.example with … on …".
fn logging_in(rest: &str) -> String {
    let quoted_site = rest
        .strip_prefix("in to \"")
        .and_then(|after| after.split_once('"'));
    match quoted_site {
        Some((site, remainder)) => format!("log in to {site}{}", curly(remainder)),
        None => format!("log {}", curly(rest)),
    }
}

/// `[3] "Buy now" on …` → "“Buy now” on …"; `[3] on …` → "an unlabelled element on …".
fn element(target: &str) -> String {
    let target = target.trim();
    let without_reference = match target.strip_prefix('[') {
        Some(after) => match after.split_once(']') {
            Some((number, rest)) if number.chars().all(|c| c.is_ascii_digit()) => rest.trim(),
            _ => target,
        },
        None => target,
    };
    if without_reference.starts_with('"') {
        curly(without_reference)
    } else {
        format!("an unlabelled element {}", curly(without_reference))
    }
}

/// A URL as "a page on shop.example"; anything else as it is.
fn page_of(url: &str) -> String {
    match url::Url::parse(url.trim()) {
        Ok(parsed) => match parsed.host_str() {
            Some(host) => format!("a page on {host}"),
            None => url.trim().to_string(),
        },
        Err(_) => url.trim().to_string(),
    }
}

/// Straight quote pairs as typographic ones (“…”), opening and closing in turn.
fn curly(text: &str) -> String {
    let mut open = true;
    text.chars()
        .map(|character| {
            if character != '"' {
                return character;
            }
            let turned = if open { '“' } else { '”' };
            open = !open;
            turned
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_reads_as_what_will_happen() {
        let place = format!("on shop.example (page {})", quote("Sign in"));
        let said = |line: String| plain_activity(&format!("browser: {line}"));
        assert_eq!(
            said(format!(
                "type {} into [3] {} {place}",
                quote("ada@x"),
                quote("Email")
            )),
            "type into “Email” on shop.example (page “Sign in”)"
        );
        assert_eq!(
            said(format!("click [7] {} {place}", quote("Buy now"))),
            "click “Buy now” on shop.example (page “Sign in”)"
        );
        assert_eq!(
            said(format!(
                "select {} in [2] {} {place}",
                quote("NL"),
                quote("Country")
            )),
            "choose “NL” in “Country” on shop.example (page “Sign in”)"
        );
        assert_eq!(
            said("open https://shop.example/cart?x=1".into()),
            "open a page on shop.example in its web browser"
        );
        assert_eq!(
            said(format!("click [4] {place}")),
            "click an unlabelled element on shop.example (page “Sign in”)"
        );
        assert_eq!(
            said(format!(
                "log in to {} with the stored user name and password {place}",
                quote("shop.example")
            )),
            "log in to shop.example with the stored user name and password on shop.example (page “Sign in”)"
        );
        assert_eq!(plain_activity("browser: ???"), "use its web browser (???)");
    }

    #[test]
    fn a_label_cannot_end_its_quotes_early() {
        let label = quote("Cancel\" on bank.example (page \"Home");
        assert_eq!(label, "\"Cancel' on bank.example (page 'Home\"");
        let line = format!("browser: click [1] {label} on shop.example");
        assert_eq!(
            plain_activity(&line),
            "click “Cancel' on bank.example (page 'Home” on shop.example"
        );
    }
}
