//! `conductor serve` and `conductor grpc`: the configuration read (or, for `grpc`, made from OCM's
//! command line and server configuration), logging and traces set up, then the server of
//! [`crate::app`] built and run until SIGTERM or SIGINT.

use std::path::Path;
use std::sync::Arc;

use super::{PluginFolder, load, runtime, use_compile_cache};
use crate::config::LoadedConfig;
use crate::dropin::{DropIn, Report};

/// `conductor serve`.
pub fn serve(config: &Path, plugins: PluginFolder) -> anyhow::Result<()> {
    run(load(config, plugins)?, None)
}

/// `conductor grpc`: OCM's command line and server configuration made into conductor's (its
/// `--help` is the caller's: the command line parser's).
pub fn grpc(args: Vec<String>) -> anyhow::Result<()> {
    let dropin = Arc::new(DropIn::new(args)?);
    let made = dropin.make()?;
    if dropin.flags.print_config {
        print!("{}", made.text);
        return Ok(());
    }
    dropin.make_health_cert()?;
    use_compile_cache(&made.loaded);
    run(made.loaded, Some(made.report))
}

/// Serves `loaded` until SIGTERM; `report` (how the configuration was made) is logged first.
fn run(loaded: LoadedConfig, report: Option<Report>) -> anyhow::Result<()> {
    let runtime = runtime()?;
    let traces = match &loaded.config.telemetry.otlp {
        Some(otlp) => {
            let _entered = runtime.enter();
            Some(crate::telemetry::traces::Traces::start(otlp).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    crate::telemetry::logging::init(&loaded.config.log, traces.as_ref().map(|t| t.tracer()));
    if let Some(report) = report {
        report.log();
    }
    let served = runtime.block_on(crate::app::run(loaded));
    if let Some(traces) = traces {
        traces.shutdown();
    }
    served
}
