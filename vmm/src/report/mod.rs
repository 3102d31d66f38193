//! Everything a [`RunReport`](crate::results::RunReport) turns into: the terminal table, JSON,
//! CSV, Markdown, an SVG chart, the per-run output folder, the comparison of two runs and the
//! scaling table.
//!
//! Renderers are pure (`render_* -> String`); only [`folder`] touches the filesystem, so the
//! way files are written can change in one place.

pub(crate) mod answer_lines;
pub(crate) mod columns;
mod comparison;
mod csv;
mod exits;
mod export;
mod folder;
mod forest;
pub(crate) mod format;
mod json;
mod mail;
mod mail_compare;
pub(crate) mod markdown;
mod replicates_text;
mod scaling;
mod summary;
mod svg;
pub(crate) mod table;
mod verdict;
mod warnings;
mod width;

#[cfg(test)]
pub(crate) mod tests;

use std::io;
use std::path::PathBuf;

use thiserror::Error;

pub(crate) use comparison::change_text;
pub use comparison::{render_compare, render_compare_at};
pub use csv::render_csv;
pub use export::{render_export, Export, ExportFormat};
pub use folder::{check_out_base, new_results_dir, OutputDir};
pub use forest::{forest_page_name, render_forest};
pub use json::{convert_v3, read_json, report_from_str, to_json};
pub use mail::{render_mail, MAIL_WIDTH};
pub use mail_compare::render_compare_mail;
pub use markdown::render_markdown;
pub use scaling::{render_scaling, scaling_rows, ScalingRow};
pub use summary::{figures_meaning, render_summary, render_summary_at, WARNINGS_SHOWN};
pub use svg::render_svg;
pub use table::{host_header, render_mixed, render_table, render_table_at, vcpu_spread};
pub use verdict::EXITS_DIFFERENCE_METHOD;
pub use warnings::name_list;
pub use width::{text_width, wrap, DEFAULT_WIDTH};

#[derive(Debug, Error)]
pub enum ReportError {
    /// The bounded reader's message already names the file.
    #[error(transparent)]
    Read(#[from] crate::files::read::BoundedReadError),
    /// The output layer's message already names the file and what it is.
    #[error(transparent)]
    Output(#[from] crate::files::write::OutputError),
    /// Malformed JSON, or JSON that is not a results file; line and column are serde_json's.
    #[error(
        "{path}:{line}:{column}: not a valid irqbench results file",
        path = crate::text::escape_path(.path)
    )]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path} has schema {found:?}, but this irqbench reads only {} (and converts {}); \
         a file of an older schema is read by the irqbench that wrote it",
        crate::results::SCHEMA,
        crate::results::SCHEMA_CONVERTED,
        path = crate::text::escape_path(.path)
    )]
    Schema { path: PathBuf, found: String },
    /// A figure no run can have produced: an inverted or non-finite CI, a median outside its
    /// CI, a count or rate below zero, a magnitude beyond any measurement.
    #[error(
        "{path}: {field} = {value}: {why}; irqbench never writes that, so the file was edited \
         or damaged",
        path = crate::text::escape_path(.path),
        field = crate::text::escape_line(.field),
        value = crate::text::escape_line(.value)
    )]
    Implausible {
        path: PathBuf,
        field: String,
        value: String,
        why: &'static str,
    },
    #[error(
        "cannot create the results folder {path}",
        path = crate::text::escape_path(.path)
    )]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// `--out` names something that exists and is no folder (a file, a FIFO, a device, a link
    /// to one of those).
    #[error(
        "--out {path} exists and is a {kind}, not a folder: --out needs a folder, an existing one \
         or a new path in an existing folder (each run gets a new folder inside it)",
        path = crate::text::escape_path(.path)
    )]
    OutNotAFolder { path: PathBuf, kind: String },
}
