//! The inputs of a run: the config argument (a file or a shipped config) and the guest image.

use std::io;
use std::path::Path;

use irqbench::config::plan::Plan;
use irqbench::config::{self, Limits};
use irqbench::machine::image::GuestImage;

use super::error::{errno_name, warn, CliError};

/// The configs shipped in configs/, runnable by name (`irqbench run strategies`).
pub const BUILTIN_CONFIGS: [(&str, &str); 7] = [
    ("quick", include_str!("../../../configs/quick.toml")),
    (
        "strategies",
        include_str!("../../../configs/strategies.toml"),
    ),
    ("insn-cost", include_str!("../../../configs/insn-cost.toml")),
    (
        "pv-restore-skip",
        include_str!("../../../configs/pv-restore-skip.toml"),
    ),
    (
        "epoll-irqsave-vs-irq",
        include_str!("../../../configs/epoll-irqsave-vs-irq.toml"),
    ),
    ("soak", include_str!("../../../configs/soak.toml")),
    (
        "answers-load",
        include_str!("../../../configs/answers-load.toml"),
    ),
];

fn shipped(arg: &str) -> Option<(&'static str, &'static str)> {
    BUILTIN_CONFIGS.iter().find(|(n, _)| *n == arg).copied()
}

fn load_shipped(name: &str, text: &str, limits: &Limits) -> Result<(Plan, String), CliError> {
    let plan = config::load_str(text, &format!("<shipped config {name}>"), limits)?;
    Ok((plan, text.to_owned()))
}

/// The plan and the config text it came from (saved with the run).
pub fn load_plan(config: Option<&str>, limits: &Limits) -> Result<(Plan, String), CliError> {
    let Some(arg) = config else {
        let text = config::DEFAULT_CONFIG_TOML.to_owned();
        return Ok((config::default_plan(limits), text));
    };
    let path = Path::new(arg);
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => match shipped(arg) {
            Some((name, text)) => {
                warn(format_args!(
                    "note: {} is a folder, not a config: running the shipped config {name}",
                    path.display()
                ));
                load_shipped(name, text, limits)
            }
            None => Err(CliError::Usage(format!(
                "config {} is a folder, not a config file; shipped configs: {}",
                path.display(),
                shipped_names()
            ))),
        },
        Ok(_) => load_file(path, limits),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match shipped(arg) {
            Some((name, text)) => load_shipped(name, text, limits),
            None => Err(CliError::Usage(format!(
                "config `{}` is neither a file nor a shipped config; shipped: {}",
                arg.escape_debug(),
                shipped_names()
            ))),
        },
        Err(source) => Err(CliError::ConfigPath {
            path: path.to_owned(),
            errno: errno_name(&source),
            source,
        }),
    }
}

fn shipped_names() -> String {
    let names: Vec<&str> = BUILTIN_CONFIGS.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}

fn load_file(path: &Path, limits: &Limits) -> Result<(Plan, String), CliError> {
    // Bounded: `irqbench run /dev/zero` or a FIFO must not read without end or block.
    let text = irqbench::files::read::read_text_bounded(
        path,
        irqbench::files::read::MAX_CONFIG_BYTES,
        "config",
    )
    .map_err(CliError::ConfigFile)?;
    let plan = config::load_str(&text, &path.display().to_string(), limits)?;
    Ok((plan, text))
}

/// The guest ELF, `--guest` or the embedded one; a missing symbol table is a warning.
pub fn load_image(guest: Option<&Path>) -> Result<GuestImage, CliError> {
    let image = match guest {
        Some(p) => GuestImage::from_file(p),
        None => GuestImage::embedded(),
    }?;
    if let Some(w) = image.symbol_warning() {
        warn(format_args!("warning: {w}"));
    }
    Ok(image)
}
