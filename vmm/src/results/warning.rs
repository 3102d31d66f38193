//! A warning about a run's figures, typed where it is made (measure) and rendered by report:
//! its kind groups the warnings that say the same about different rows or groups, so a report
//! never reads its own text back. The results file keeps each one as its rendered line.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a warning is about: warnings of one kind about different subjects merge into one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarningKind {
    /// A row's guest took fewer of its LAPIC timer's ticks than its period asks for.
    TicksShort,
    /// A row's guest took fewer of its inject load's interrupts than asked (or the load could
    /// not keep its rate).
    InjectShort,
    /// Rows kept no round, so they have no figure.
    NoData,
    /// A group's budget ran out before every comparison's CI was within the precision.
    ComparisonsImprecise,
    /// A group's host changed speed while it ran.
    SpeedSteps,
    /// A group kept fewer than `run.min_rounds` rounds: its cap of 10 × `run.max_seconds`
    /// ran out first.
    RoundsCapped,
    /// A group kept fewer than `run.min_rounds` rounds: it keeps no more in memory.
    RoundsInMemory,
    /// A figure moved between the replicates (fresh VMs) beyond their own CIs.
    ReplicatesMoved,
    /// Exit counts that break a law of their accounting.
    InvariantBroken,
    /// `--trace-exits` could not count, or counted nothing.
    ExitTrace,
    /// Comparisons whose rerun interval (from earlier runs) is wider than the precision asked.
    RerunWide,
    /// Read back from a results file: its line as written, about no subject of its own.
    Recorded,
}

/// One warning: its kind, the row, group or comparison it is about, and what it says.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub kind: WarningKind,
    /// The row, group or comparison (its full name); `None`: the run as a whole.
    pub subject: Option<String>,
    /// What it says about the subject, its figures included (the subject not repeated).
    pub figures: String,
}

impl Warning {
    /// A warning about one row, group or comparison.
    pub fn about(kind: WarningKind, subject: impl std::fmt::Display, figures: String) -> Warning {
        Warning {
            kind,
            subject: Some(subject.to_string()),
            figures,
        }
    }

    /// A warning about the run as a whole.
    pub fn run(kind: WarningKind, figures: String) -> Warning {
        Warning {
            kind,
            subject: None,
            figures,
        }
    }
}

/// `SUBJECT: figures`, or the figures alone: the line the results file keeps.
impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.subject {
            Some(subject) => write!(f, "{subject}: {}", self.figures),
            None => f.write_str(&self.figures),
        }
    }
}

impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Warning {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Warning, D::Error> {
        String::deserialize(deserializer).map(|line| Warning::run(WarningKind::Recorded, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file keeps the rendered line, and reads it back as that line.
    #[test]
    fn a_warning_is_its_line_in_the_file_and_back() {
        let w = Warning::about(
            WarningKind::SpeedSteps,
            "g/n0",
            "the host changed speed".into(),
        );
        let json = serde_json::to_string(&w).expect("serialise");
        assert_eq!(json, "\"g/n0: the host changed speed\"");
        let back: Warning = serde_json::from_str(&json).expect("read");
        assert_eq!(back.kind, WarningKind::Recorded);
        assert_eq!(back.to_string(), w.to_string());
    }
}
