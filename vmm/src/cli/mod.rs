//! The command line: one module per command family; `main.rs` parses and dispatches.

pub mod history;
pub mod inspect;
pub mod validate;
