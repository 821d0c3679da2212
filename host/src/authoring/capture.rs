//! What a plugin logs while `conductor plugins test` replays a script: a `tracing` layer that
//! keeps each event (its level, its message and whether it carries the plugin's own words), for
//! the report to show under the call that caused it.

use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer};

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub level: tracing::Level,
    pub message: String,
    /// Written by the plugin (its `log` capability, its standard output or error), not the host.
    pub by_plugin: bool,
    /// `stdout` or `stderr` for a line the plugin printed.
    pub stream: Option<String>,
}

/// The lines kept since the last [`Captured::take`].
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<Line>>>);

impl Captured {
    pub fn take(&self) -> Vec<Line> {
        std::mem::take(&mut *self.0.lock())
    }

    /// A layer keeping the plugin's lines (every level from debug) and the host's warnings and
    /// errors.
    pub fn layer(&self) -> CaptureLayer {
        CaptureLayer(self.clone())
    }
}

pub struct CaptureLayer(Captured);

/// The module the plugins' own lines are logged from (its capabilities, one module each).
const PLUGIN_LINES: &str = "conductor::plugins::capabilities";

/// Whether `target` is [`PLUGIN_LINES`] or one of its modules.
fn by_plugin(target: &str) -> bool {
    target
        .strip_prefix(PLUGIN_LINES)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

#[derive(Default)]
struct Fields {
    message: String,
    plugin: bool,
    stream: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "plugin" => self.plugin = true,
            "stream" => self.stream = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "plugin" => self.plugin = true,
            "stream" => self.stream = Some(format!("{value:?}").trim_matches('"').to_owned()),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for CaptureLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let level = *meta.level();
        let by_plugin = by_plugin(meta.target());
        if (by_plugin && level > tracing::Level::DEBUG) || (!by_plugin && level > tracing::Level::WARN) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0.0.lock().push(Line {
            level,
            message: fields.message,
            by_plugin: by_plugin && fields.plugin,
            stream: fields.stream,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn the_plugins_lines_and_the_hosts_warnings_are_kept() {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::registry().with(captured.layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "conductor::plugins::capabilities", plugin = "p", "stored {}", 3);
            tracing::trace!(target: "conductor::plugins::capabilities", plugin = "p", "too fine");
            tracing::warn!(target: "conductor::plugins::capabilities", plugin = "p", stream = "stderr", "Traceback");
            tracing::info!(target: "conductor::plugins", plugin = "p", "plugin loaded");
            tracing::warn!(target: "conductor::plugins", plugin = "p", "plugin call failed");
        });
        let lines = captured.take();
        let seen: Vec<(&str, bool, Option<&str>)> = lines
            .iter()
            .map(|l| (l.message.as_str(), l.by_plugin, l.stream.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                ("stored 3", true, None),
                ("Traceback", true, Some("stderr")),
                ("plugin call failed", false, None)
            ]
        );
        assert!(captured.take().is_empty());
    }
}
