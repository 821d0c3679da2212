//! What a plugin author runs: `conductor plugins new` (a project to start from, [`new`], with
//! the SDK packages the binary carries, [`sdk`]), `conductor plugins tools install` (the pinned
//! componentize tools of one language, [`tools`]) and `conductor plugins test` (the real plugin
//! file replaying a scripted agent conversation with fake capabilities: [`script`] reads the
//! conversation, [`replay`] makes its calls, [`capture`] keeps what the plugin logs, [`report`]
//! prints it).

pub mod capture;
pub mod new;
pub mod replay;
pub mod report;
pub mod script;
pub mod sdk;
#[cfg(test)]
mod sdk_manifest;
mod templates;
pub mod tools;

use std::io::Write as _;
use std::path::Path;

use tracing_subscriber::layer::SubscriberExt as _;

/// Replays the script at `path`, printing each call as it is answered. `Ok(true)` when every
/// answer is what the script expects.
pub async fn test_plugin(path: &Path) -> anyhow::Result<bool> {
    let script = script::Script::load(path)?;
    let captured = capture::Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.layer());
    // The host's own logs go to the report, under the call they belong to.
    // (The command runs nothing else: the subscriber is the process's.)
    tracing::subscriber::set_global_default(subscriber)?;
    let (mut replay, loaded) = replay::Replay::load(&script, captured).await?;
    let mut stdout = std::io::stdout();
    write!(
        stdout,
        "{}",
        report::loaded(&path.display().to_string(), &script.file.display().to_string(), &loaded)
    )?;
    let mut results = vec![];
    for (i, step) in script.steps.iter().enumerate() {
        let result = replay.step(step).await;
        write!(stdout, "{}", report::step(i + 1, &result))?;
        stdout.flush()?;
        results.push(result);
    }
    replay.stop().await;
    write!(stdout, "{}", report::summary(&results))?;
    Ok(results.iter().all(|r| r.differences.is_empty()))
}
