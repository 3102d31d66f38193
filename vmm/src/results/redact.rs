//! Facts a user may keep out of every output and the history (`--redact cmdline,hostname`):
//! the report says which were left out, so a reader knows the field is empty on purpose.

use super::{Readable, RunReport};

/// A fact that can be redacted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Redaction {
    /// The host kernel's command line (`/proc/cmdline`): it may name disks, hosts, tokens.
    Cmdline,
    /// The host's name, wherever it appears in the report's text (the command line, warnings,
    /// validation notes, failures, the description, the config's path and `--set` values) and
    /// in the config text the history keeps ([`redact_text`]).
    Hostname,
}

impl Redaction {
    pub const ALL: [Redaction; 2] = [Redaction::Cmdline, Redaction::Hostname];

    pub fn name(self) -> &'static str {
        match self {
            Redaction::Cmdline => "cmdline",
            Redaction::Hostname => "hostname",
        }
    }

    pub fn from_name(name: &str) -> Option<Redaction> {
        Redaction::ALL.into_iter().find(|r| r.name() == name)
    }
}

const REDACTED: &str = "<redacted>";

/// `text` with every occurrence of `name` that stands as a word of its own (not inside a longer
/// name: host `vm` must not blank the `vm` of `/dev/kvm`) replaced; `None` when there is none.
fn replace_word(text: &str, name: &str) -> Option<String> {
    let part_of_name = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut found = false;
    while let Some(i) = rest.find(name) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + name.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(part_of_name) || after.is_some_and(part_of_name) {
            out.push_str(name);
        } else {
            out.push_str(REDACTED);
            found = true;
        }
        rest = &rest[i + name.len()..];
    }
    out.push_str(rest);
    found.then_some(out)
}

/// Every text field of a report a host name could reach.
fn text_fields(report: &mut RunReport) -> Vec<&mut String> {
    let mut out: Vec<&mut String> = Vec::new();
    let host = &mut report.host;
    if let Readable::Value(c) = &mut host.kernel_cmdline {
        out.push(c);
    }
    out.extend(host.warnings.iter_mut());
    if let Some(v) = &mut host.validation {
        for c in &mut v.checks {
            out.push(&mut c.measured);
            out.push(&mut c.note);
        }
    }
    for w in &mut report.warnings {
        out.extend(w.subject.as_mut());
        out.push(&mut w.figures);
    }
    for f in &mut report.failures {
        out.push(&mut f.error);
    }
    out.push(&mut report.description);
    out.push(&mut report.config_source);
    out.extend(report.adhoc.set.iter_mut());
    out
}

/// The host name to scrub: names shorter than 2 characters are not searched for (they would
/// blank unrelated text).
fn scrubbed_name(hostname: Option<&str>) -> Option<&str> {
    hostname.map(str::trim).filter(|n| n.len() >= 2)
}

/// `text` (the config text the history keeps with a run) with the host's name replaced when
/// [`Redaction::Hostname`] is among `what`.
pub fn redact_text<'a>(
    text: &'a str,
    what: &[Redaction],
    hostname: Option<&str>,
) -> std::borrow::Cow<'a, str> {
    let name = scrubbed_name(hostname).filter(|_| what.contains(&Redaction::Hostname));
    match name.and_then(|n| replace_word(text, n)) {
        Some(scrubbed) => std::borrow::Cow::Owned(scrubbed),
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// Removes `what` from `report` and records it in `host.redacted`. `hostname` is the name to
/// scrub for [`Redaction::Hostname`] (names shorter than 2 characters are not searched for:
/// they would blank unrelated text).
pub fn redact(report: &mut RunReport, what: &[Redaction], hostname: Option<&str>) {
    for r in what {
        match r {
            Redaction::Cmdline => {
                report.host.kernel_cmdline =
                    Readable::Unavailable(format!("redacted (--redact {})", r.name()));
            }
            Redaction::Hostname => {
                if let Some(name) = scrubbed_name(hostname) {
                    for field in text_fields(report) {
                        if let Some(scrubbed) = replace_word(field, name) {
                            *field = scrubbed;
                        }
                    }
                }
            }
        }
        if !report.host.redacted.iter().any(|n| n == r.name()) {
            report.host.redacted.push(r.name().to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::PhaseFailure;

    #[test]
    fn redacted_facts_leave_no_trace_and_are_named() {
        let mut r = RunReport::default();
        r.host.kernel_cmdline = Readable::Value("root=/dev/vda1 nfsroot=buildhost7:/srv".into());
        r.host.warnings.push("buildhost7 is busy".into());
        r.failures.push(PhaseFailure {
            name: "x".into(),
            error: "ssh buildhost7 failed".into(),
        });
        redact(
            &mut r,
            &[Redaction::Cmdline, Redaction::Hostname],
            Some("buildhost7\n"),
        );
        r.description = "measured on buildhost7".into();
        r.config_source = "/home/u/buildhost7/q.toml".into();
        r.adhoc.set.push("description=\"buildhost7\"".into());
        redact(
            &mut r,
            &[Redaction::Cmdline, Redaction::Hostname],
            Some("buildhost7\n"),
        );
        let json = serde_json::to_string(&r).expect("json");
        assert!(
            !json.contains("nfsroot") && !json.contains("buildhost7"),
            "{json}"
        );
        let text = "description = \"on buildhost7\"\n";
        assert_eq!(
            redact_text(text, &[Redaction::Hostname], Some("buildhost7")),
            "description = \"on <redacted>\"\n"
        );
        assert_eq!(
            redact_text(text, &[Redaction::Cmdline], Some("buildhost7")),
            text
        );
        assert_eq!(r.host.redacted, ["cmdline", "hostname"]);
        assert!(json.contains("redacted (--redact cmdline)"));
        // A name inside a longer word is not the host's.
        let mut r = RunReport::default();
        r.host
            .warnings
            .push("/dev/kvm on vm (vm.local), kvm_pvm".into());
        redact(&mut r, &[Redaction::Hostname], Some("vm"));
        assert_eq!(
            r.host.warnings,
            ["/dev/kvm on <redacted> (<redacted>.local), kvm_pvm"]
        );
        // A one-letter name is not searched for.
        let mut r = RunReport::default();
        r.host.warnings.push("a warning".into());
        redact(&mut r, &[Redaction::Hostname], Some("a"));
        assert_eq!(r.host.warnings, ["a warning"]);
        for x in Redaction::ALL {
            assert_eq!(Redaction::from_name(x.name()), Some(x));
        }
    }
}
