//! The inputs of a run: the config argument (a file or a shipped config) and the guest image.

use std::io;
use std::path::Path;

use irqbench::config::plan::Plan;
use irqbench::config::{self, Limits, Setting};
use irqbench::machine::image::GuestImage;

use super::error::{errno_name, warn, CliError};

/// The configs shipped in configs/, runnable by name (`irqbench run strategies`).
pub use irqbench::config::SHIPPED_CONFIGS as BUILTIN_CONFIGS;

/// Ad-hoc changes to the plan, for `run` and `check`.
#[derive(Debug, Default, clap::Args)]
pub struct PlanArgs {
    /// Override a config key for this run: `run.KEY`, `report.KEY`, `bench.KEY` (every
    /// bench), `bench.NAME.KEY` (one bench), `name` or `description`, with a TOML value
    /// (`run.max_seconds=1`, `bench.vcpus=[1,2]`, `'bench.strategies=["pvop-popf"]'`; a bare
    /// word is a string). Checked as the config is. Repeatable; recorded in the report.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Setting::parse)]
    pub set: Vec<Setting>,
    /// Run only the rows whose full names match (as the JSON and warnings name them,
    /// `quick/pvop-skip/n0/none/1v`: `'quick/pvop-*'`; `*` matches `/` too, `?` one
    /// character); each group still measures its `empty` baseline. Repeatable (a row matching any runs); one matching nothing is
    /// an error. Recorded in the report.
    #[arg(long, value_name = "GLOB")]
    pub only: Vec<String>,
}

impl PlanArgs {
    /// `--set K=V` and `--only G`, as the report records them.
    pub fn recorded(&self) -> irqbench::results::Adhoc {
        irqbench::results::Adhoc {
            set: self.set.iter().map(Setting::to_string).collect(),
            only: self.only.clone(),
        }
    }
}

fn shipped(arg: &str) -> Option<(&'static str, &'static str)> {
    BUILTIN_CONFIGS.iter().find(|(n, _)| *n == arg).copied()
}

fn load_shipped(name: &str, text: &str, ctx: &Ctx) -> Result<(Plan, String), CliError> {
    let plan = config::load_str_with(
        text,
        &format!("<shipped config {name}>"),
        ctx.limits,
        &ctx.adhoc.set,
    )?;
    Ok((plan, text.to_owned()))
}

/// What every way of loading needs.
struct Ctx<'a> {
    limits: &'a Limits,
    adhoc: &'a PlanArgs,
}

/// The plan (with `--set` and `--only` applied) and the config text it came from (saved with
/// the run).
pub fn load_plan(
    config: Option<&str>,
    limits: &Limits,
    adhoc: &PlanArgs,
) -> Result<(Plan, String), CliError> {
    let ctx = Ctx { limits, adhoc };
    let (mut plan, text) = load_unselected(config, &ctx)?;
    config::only(&mut plan, &adhoc.only).map_err(|e| CliError::Usage(e.to_string()))?;
    config::round_fits(&plan).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok((plan, text))
}

fn load_unselected(config: Option<&str>, ctx: &Ctx) -> Result<(Plan, String), CliError> {
    let limits = ctx.limits;
    let Some(arg) = config else {
        let text = config::DEFAULT_CONFIG_TOML.to_owned();
        if ctx.adhoc.set.is_empty() {
            return Ok((config::default_plan(limits), text));
        }
        let plan = config::load_str_with(&text, config::DEFAULT_SOURCE, limits, &ctx.adhoc.set)?;
        return Ok((plan, text));
    };
    let path = Path::new(arg);
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => match shipped(arg) {
            Some((name, text)) => {
                warn(format_args!(
                    "note: {} is a folder, not a config: running the shipped config {name}",
                    irqbench::text::escape_path(path)
                ));
                load_shipped(name, text, ctx)
            }
            None => Err(CliError::Usage(format!(
                "config {} is a folder, not a config file; shipped configs: {}",
                irqbench::text::escape_path(path),
                shipped_names()
            ))),
        },
        Ok(_) => load_file(path, ctx),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match shipped(arg) {
            Some((name, text)) => load_shipped(name, text, ctx),
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

fn load_file(path: &Path, ctx: &Ctx) -> Result<(Plan, String), CliError> {
    // Bounded: `irqbench run /dev/zero` or a FIFO must not read without end or block.
    let text = irqbench::files::read::read_text_bounded(
        path,
        irqbench::files::read::MAX_CONFIG_BYTES,
        "config",
    )
    .map_err(CliError::ConfigFile)?;
    let source = path.display().to_string();
    let plan = config::load_str_with(&text, &source, ctx.limits, &ctx.adhoc.set)?;
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
