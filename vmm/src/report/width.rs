//! How wide text output may be, and wrapping to it: the terminal's width, or `COLUMNS`, or
//! [`DEFAULT_WIDTH`] when neither says (a pipe, a file, CI).

use std::io;

/// The width when no terminal and no `COLUMNS` say otherwise; also the width of the table file
/// in a results folder, which is read later on some other screen.
pub const DEFAULT_WIDTH: usize = 100;
/// Below this the tables cannot keep a row's name beside a number: a smaller width is raised.
const MIN_WIDTH: usize = 40;

/// `COLUMNS` when set to a number (a user who exports it means it, as for `ls`), else the
/// width of the terminal on stdout or stderr, else [`DEFAULT_WIDTH`].
pub fn text_width() -> usize {
    let terminal = terminal_size::terminal_size_of(io::stdout())
        .or_else(|| terminal_size::terminal_size_of(io::stderr()))
        .map(|(w, _)| usize::from(w.0));
    width_from(std::env::var("COLUMNS").ok().as_deref(), terminal)
}

pub(crate) fn width_from(columns: Option<&str>, terminal: Option<usize>) -> usize {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|w| *w > 0)
        .or(terminal.filter(|w| *w > 0))
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// `text` with every line longer than `width` columns broken at spaces. A continuation line
/// takes its line's indent plus two spaces; a word longer than a whole line is broken inside.
/// Lines that fit (table rows among them) are kept byte for byte.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        wrap_line(&mut out, line, width.max(MIN_WIDTH));
    }
    out
}

fn wrap_line(out: &mut String, line: &str, width: usize) {
    if line.chars().count() <= width {
        out.push_str(line);
        return;
    }
    let body = line.trim_start_matches(' ');
    let indent = line.len() - body.len();
    let continuation = " ".repeat((indent + 2).min(width / 2));
    let mut current = line[..indent].to_string();
    let mut len = indent;
    let mut fresh = true;
    for (gap, word) in words(body) {
        let mut rest = word;
        let mut n = rest.chars().count();
        if !fresh && len + gap + n > width {
            out.push_str(&current);
            out.push('\n');
            current.clone_from(&continuation);
            len = continuation.len();
        } else if !fresh {
            // Inside a line the original spacing stays (two spaces before a verdict, say).
            current.extend(std::iter::repeat_n(' ', gap));
            len += gap;
        }
        // Only a word wider than a whole line gets here with too little room.
        while len + n > width {
            let room = width - len;
            let split = rest.char_indices().nth(room).map_or(rest.len(), |(b, _)| b);
            current.push_str(&rest[..split]);
            out.push_str(&current);
            out.push('\n');
            current.clone_from(&continuation);
            len = continuation.len();
            rest = &rest[split..];
            n -= room;
        }
        current.push_str(rest);
        len += n;
        fresh = false;
    }
    out.push_str(&current);
}

/// The words of `text` with how many spaces stood before each.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut gap = 0;
    text.split(' ').filter_map(move |w| {
        if w.is_empty() {
            gap += 1;
            None
        } else {
            let spaces = gap + 1;
            gap = 0;
            Some((spaces, w))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widest(text: &str) -> usize {
        text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    #[test]
    fn columns_wins_then_the_terminal_then_the_default() {
        assert_eq!(width_from(Some("80"), Some(200)), 80);
        assert_eq!(width_from(Some(" 132 "), None), 132);
        assert_eq!(width_from(Some("wide"), Some(90)), 90);
        assert_eq!(width_from(Some("0"), None), DEFAULT_WIDTH);
        assert_eq!(width_from(None, None), DEFAULT_WIDTH);
        assert_eq!(width_from(Some("10"), None), MIN_WIDTH);
    }

    #[test]
    fn long_lines_break_at_spaces_with_their_indent_and_short_ones_stay() {
        let text = "  why: other work competes for the CPUs: preempted blocks are left out (the \
                    `disturbed` column), but rounds get fewer and drift larger\n  a   b  kept";
        let wrapped = wrap(text, 50);
        assert!(widest(&wrapped) <= 50, "{wrapped}");
        let lines: Vec<&str> = wrapped.lines().collect();
        assert!(lines[0].starts_with("  why: other"), "{wrapped}");
        assert!(lines[1..lines.len() - 1]
            .iter()
            .all(|l| l.starts_with("    ") && !l.starts_with("     ")));
        assert_eq!(*lines.last().unwrap(), "  a   b  kept");
        // No word is lost or split when every word fits.
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&wrapped), words(text));
        let verdict = "  native-skip vs native-popf  cycles/op −0.1% [−1.9, +1.0] (593 rounds)  \
                       no difference beyond noise";
        let wrapped = wrap(verdict, 80);
        assert!(
            wrapped.starts_with("  native-skip vs native-popf  cycles/op"),
            "{wrapped}"
        );
        assert!(
            wrapped.contains("rounds)  no\n    difference beyond"),
            "{wrapped}"
        );
    }

    #[test]
    fn a_word_wider_than_the_line_is_broken_inside_and_wide_characters_count_once() {
        let path = format!("see /{}/x", "d".repeat(120));
        let wrapped = wrap(&path, 40);
        assert!(widest(&wrapped) <= 40, "{wrapped}");
        assert_eq!(
            wrapped.replace("\n  ", "").replace(' ', ""),
            path.replace(' ', "")
        );
        let signs = "±≈−… ".repeat(20);
        assert!(widest(&wrap(&signs, 40)) <= 40);
        assert_eq!(wrap("", 80), "");
        assert_eq!(wrap("a\n\nb\n", 80), "a\n\nb\n");
    }
}
