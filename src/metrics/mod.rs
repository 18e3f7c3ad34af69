//! Metrics as Prometheus text: the one writer of the exposition format,
//! the duration [`Histogram`], and the standard `process_*` metrics.
//!
//! Each subsystem renders its own metrics through an [`Exposition`]: the
//! API its request counters, the store its journal, the database store its
//! pool, the webhook sender its events. Only this module writes `# HELP`
//! and `# TYPE` lines, so every family is introduced the same way and a
//! label value is always escaped.
//!
//! A leaf: imports nothing of the crate. Numbers are written with integers
//! only: float formatting would add about 10 KiB to the binary.

mod histogram;
mod process;

pub use histogram::{Histogram, seconds};
pub use process::render as render_process;

use std::fmt::{Display, Write};

/// What a metric family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Exposition text being written.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// An empty exposition with room for a typical scrape.
    pub fn new() -> Exposition {
        Exposition {
            text: String::with_capacity(8192),
        }
    }

    /// Starts the family `name`: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let _ = writeln!(
            self.text,
            "# HELP {name} {help}\n# TYPE {name} {}",
            kind.as_str()
        );
    }

    /// One sample of `name` (a family's name, or it with a suffix such as
    /// `_bucket`), with `labels` as `(name, value)` pairs.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.write_sample(name, labels, &value);
    }

    /// `sample` once for every type of value: the generic wrapper above is
    /// all that is instantiated per type, which keeps the binary small.
    fn write_sample(&mut self, name: &str, labels: &[(&str, &str)], value: &dyn Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(label);
                self.text.push_str("=\"");
                escape_into(&mut self.text, value);
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    /// A family of one sample without labels.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl Display) {
        self.family(name, kind, help);
        self.write_sample(name, &[], &value);
    }

    /// The text written.
    pub fn into_text(self) -> String {
        self.text
    }
}

/// A label value as the format wants it: `\`, `"` and line feeds escaped.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_labels_are_written_in_the_text_format() {
        let mut out = Exposition::new();
        out.single("up_seconds", Kind::Gauge, "Seconds up.", "1.5");
        out.family("hits_total", Kind::Counter, "Hits, by route.");
        out.sample("hits_total", &[("route", "/a"), ("status", "200")], 3);
        out.sample("hits_total", &[("route", "a\"b\\c\nd")], 0);
        assert_eq!(
            out.into_text(),
            "# HELP up_seconds Seconds up.\n# TYPE up_seconds gauge\nup_seconds 1.5\n\
             # HELP hits_total Hits, by route.\n# TYPE hits_total counter\n\
             hits_total{route=\"/a\",status=\"200\"} 3\n\
             hits_total{route=\"a\\\"b\\\\c\\nd\"} 0\n"
        );
    }
}
