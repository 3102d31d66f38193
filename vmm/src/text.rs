//! Text from outside the program (configs, the guest's console, imported files, arguments, host
//! facts) made safe to show: one escaping function that every terminal-bound and SVG-bound
//! string passes through, so a control sequence in a name cannot clear the screen, set the
//! window title or forge a line.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` would act on a terminal instead of being shown: the C0 controls (other than tab
/// and newline), DEL and the C1 controls (U+0080–U+009F; CSI and OSC among them). Carriage return
/// counts: it can overwrite the start of a line with text of the attacker's choosing.
fn acts_on_terminal(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        // Bidirectional overrides and isolates reorder what a reader sees (U+202A–U+202E,
        // U+2066–U+2069); the line and paragraph separators break a line for many readers
        // (U+2028, U+2029).
        || matches!(c, '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character that would act on a terminal written as `\u{1b}` (what Rust's
/// `{:?}` shows), tabs and newlines kept. Borrowed when nothing needs escaping.
///
/// A CR right before a newline (CSV's CRLF line end) is kept: it cannot overwrite anything.
pub fn escape(text: &str) -> Cow<'_, str> {
    let mut chars = text.chars().peekable();
    let mut needed = false;
    while let Some(c) = chars.next() {
        if acts_on_terminal(c) && !(c == '\r' && chars.peek() == Some(&'\n')) {
            needed = true;
            break;
        }
    }
    if !needed {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if acts_on_terminal(c) && !(c == '\r' && chars.peek() == Some(&'\n')) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` as [`escape_line`] shows it, cut after `max` characters with `…`: an argument echoed
/// in an error, which may be of any length.
pub fn escape_clipped(text: &str, max: usize) -> String {
    let shown: String = text.chars().take(max).collect();
    let cut = if shown.len() < text.len() { "…" } else { "" };
    format!("{}{cut}", escape_line(&shown))
}

/// As [`escape`], and newlines and tabs too: for a value shown inside one line (a name, an
/// argument echoed in an error), where a newline would forge the next line.
pub fn escape_line(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c == '\n' || c == '\t' || acts_on_terminal(c))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if acts_on_terminal(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The longest outside text (a name, a description, a path) any text output shows whole: a
/// 1 MB name from an imported file once printed 80 MB for five runs.
pub const OUTSIDE_MAX_CHARS: usize = 200;

/// Text from outside shown inside one line of a text output: [`escape_line`]d and clipped to
/// [`OUTSIDE_MAX_CHARS`] with `…`.
pub fn outside(text: &str) -> Cow<'_, str> {
    if text.chars().nth(OUTSIDE_MAX_CHARS).is_some() {
        return Cow::Owned(escape_clipped(text, OUTSIDE_MAX_CHARS));
    }
    escape_line(text)
}

/// A message that quotes outside text among its own words (a config error naming a value, a
/// filter): [`escape_line`]d, each word longer than [`OUTSIDE_MAX_CHARS`] clipped with `…`.
pub fn escape_message(text: &str) -> Cow<'_, str> {
    let shown = escape_line(text);
    if !shown
        .split(' ')
        .any(|w| w.chars().nth(OUTSIDE_MAX_CHARS).is_some())
    {
        return shown;
    }
    let words: Vec<String> = shown
        .split(' ')
        .map(|w| match w.char_indices().nth(OUTSIDE_MAX_CHARS) {
            Some((at, _)) => format!("{}…", &w[..at]),
            None => w.to_owned(),
        })
        .collect();
    Cow::Owned(words.join(" "))
}

/// Serialized JSON safe for a terminal and still the same JSON: every character that would act
/// on a terminal (serde_json writes DEL, C1 and bidi characters raw) as JSON's own `\uXXXX`
/// escape. Outside a string valid JSON holds only ASCII punctuation, digits, letters and
/// whitespace, so each such character is inside a string, where the escape means the same.
pub fn json_for_terminal(json: &str) -> Cow<'_, str> {
    let needs = |c: char| acts_on_terminal(c) && !matches!(c, '\n' | '\t' | '\r' | ' ');
    if !json.chars().any(needs) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if needs(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{u:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Serialized SVG (XML) safe for a terminal: a DEL, C1 or bidi character as an XML character
/// reference (`&#x202e;`, the same text to an XML reader), a C0 control, which XML 1.0 cannot
/// hold even as a reference, shown as `\u{1b}`.
pub fn xml_for_terminal(xml: &str) -> Cow<'_, str> {
    let needs = |c: char| acts_on_terminal(c) && !matches!(c, '\n' | '\t');
    if !xml.chars().any(needs) {
        return Cow::Borrowed(xml);
    }
    let mut out = String::with_capacity(xml.len() + 8);
    for c in xml.chars() {
        match c {
            c if !needs(c) => out.push(c),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => {
                let _ = write!(out, "&#x{:x};", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// A path shown inside one line (a file an error names): its display form, [`escape_line`]d.
pub fn escape_path(path: impl AsRef<std::path::Path>) -> String {
    outside(&path.as_ref().display().to_string()).into_owned()
}

/// Bytes from outside (a guest's console, a file) as text: invalid UTF-8 as U+FFFD, then
/// [`escape`]d.
pub fn escape_bytes(bytes: &[u8]) -> String {
    escape(&String::from_utf8_lossy(bytes)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ESC (CSI clear screen), OSC (set title, ended by BEL), a bare CR, DEL, a C1 CSI and a
    /// bidi override: none survives, and what is printed shows each one.
    const HOSTILE: &str = "a\u{1b}[2Jb\u{1b}]0;pwned\u{7}c\rd\u{7f}e\u{9b}31mf\u{202e}g";

    fn no_control(s: &str) -> bool {
        !s.bytes()
            .any(|b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
            && !s.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c))
    }

    #[test]
    fn hostile_sequences_are_shown_not_sent() {
        let e = escape(HOSTILE);
        assert!(no_control(&e), "{e:?}");
        assert_eq!(
            e,
            "a\\u{1b}[2Jb\\u{1b}]0;pwned\\u{7}c\\u{d}d\\u{7f}e\\u{9b}31mf\\u{202e}g"
        );
    }

    #[test]
    fn a_crlf_line_end_is_kept_and_a_lone_cr_is_not() {
        assert!(matches!(escape("a,b\r\nc,d\r\n"), Cow::Borrowed(_)));
        assert_eq!(escape("a\rb\r\n"), "a\\u{d}b\r\n");
    }

    #[test]
    fn plain_text_is_borrowed_and_keeps_tabs_and_newlines() {
        let s = "native-popf\t14794 ±98\nµs ≈0 →";
        assert!(matches!(escape(s), Cow::Borrowed(_)));
        assert_eq!(escape_line(s), "native-popf\\t14794 ±98\\nµs ≈0 →");
    }

    #[test]
    fn json_keeps_its_meaning_and_sends_nothing_to_a_terminal() {
        let value = serde_json::json!({ "d": HOSTILE, "n": "\u{1f600}\u{2066}\u{2028}" });
        let json = serde_json::to_string_pretty(&value).unwrap();
        let safe = json_for_terminal(&json);
        assert!(no_control(&safe), "{safe}");
        assert!(
            !safe.contains('\u{202e}') && !safe.contains('\u{2066}') && !safe.contains('\u{2028}'),
            "{safe}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn svg_keeps_bidi_and_c1_as_references_and_shows_c0() {
        let svg = "<text>a\u{202e}b\u{9b}c\u{1b}d\u{7f}</text>";
        let safe = xml_for_terminal(svg);
        assert_eq!(safe, "<text>a&#x202e;b&#x9b;c\\u{1b}d&#x7f;</text>");
        assert!(no_control(&safe));
    }

    #[test]
    fn a_message_keeps_its_words_and_clips_a_long_value() {
        let long = "q".repeat(5000);
        let text = format!("found string \"{long}\"; expected a number\n");
        let shown = escape_message(&text);
        assert!(shown.starts_with("found string \"qqq"), "{shown}");
        assert!(
            shown.ends_with("…; expected a number\\n") || shown.contains("… "),
            "{shown}"
        );
        assert!(shown.len() < 400, "{} bytes", shown.len());
        assert_eq!(escape_message("short words"), "short words");
    }

    #[test]
    fn long_outside_text_is_clipped_with_a_mark() {
        let long = "x\n".repeat(OUTSIDE_MAX_CHARS);
        let shown = outside(&long);
        assert!(shown.ends_with('…') && !shown.contains('\n'), "{shown}");
        assert!(shown.chars().count() < 2 * OUTSIDE_MAX_CHARS + 2);
        assert_eq!(outside("short\tname"), "short\\tname");
    }

    #[test]
    fn invalid_utf8_bytes_become_replacement_characters() {
        let e = escape_bytes(b"ok\xff\x1b[31m");
        assert_eq!(e, "ok\u{fffd}\\u{1b}[31m");
        assert!(no_control(&e));
    }
}
