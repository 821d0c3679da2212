//! What `conductor plugins test` prints: the plugin as loaded, then each call with its answer,
//! what it changed in `kv`, what it emitted and logged, and whether it is what the script
//! expects.

use std::fmt::Write as _;
use std::time::Duration;

use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::OcmExtensions;

use super::capture::Line;
use super::replay::{Answer, KvChange, Loaded, StepResult, error_kind, error_message, name_of};

fn took(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{:.1}ms", d.as_secs_f64() * 1000.0)
    }
}

fn logs(out: &mut String, lines: &[Line]) {
    for line in lines {
        let who = match (&line.stream, line.by_plugin) {
            (Some(stream), _) => stream.clone(),
            (None, true) => "log".to_owned(),
            (None, false) => "host".to_owned(),
        };
        let level = line.level.as_str().to_ascii_lowercase();
        for (i, text) in line.message.lines().enumerate() {
            if i == 0 {
                let _ = writeln!(out, "     {who:<6} {level:<5} {text}");
            } else {
                let _ = writeln!(out, "     {:<6} {:<5} {text}", "", "");
            }
        }
    }
}

fn event_line(e: &CloudEvent) -> String {
    let action = e.ty.rsplitn(3, '.').take(2).collect::<Vec<_>>();
    let ty = match action.as_slice() {
        [action, sub] => format!("{sub}.{action}"),
        _ => e.ty.clone(),
    };
    let version = e
        .resource_version()
        .map(|v| format!(" resourceversion={v}"))
        .unwrap_or_default();
    let id = e
        .resource_id()
        .map(|id| format!(" resourceid={id}"))
        .unwrap_or_default();
    format!("{ty} {}{id}{version}", name_of(e))
}

/// The plugin as loaded.
pub fn loaded(script: &str, file: &str, l: &Loaded) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "plugins test {script}");
    let _ = writeln!(out, "plugin:        {} {} ({file})", l.name, l.version);
    let _ = writeln!(out, "contract:      conductor:plugin@{}", l.contract);
    let _ = writeln!(out, "sources:       {}", l.sources.join(", "));
    let _ = writeln!(out, "data types:    {}", l.data_types.join(", "));
    let _ = writeln!(out, "capabilities:  {}", l.capabilities.join(", "));
    let _ = writeln!(
        out,
        "loaded:        read {}, init and start {}",
        took(l.read),
        took(l.started)
    );
    logs(&mut out, &l.logs);
    out
}

/// One step.
pub fn step(index: usize, r: &StepResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{index}. {} ({})", r.what, took(r.elapsed));
    match &r.answer {
        Answer::Listed(events) => {
            let _ = writeln!(
                out,
                "   → ok: {} event{}",
                events.len(),
                if events.len() == 1 { "" } else { "s" }
            );
            for e in events {
                let _ = writeln!(out, "     {}", event_line(e));
            }
        }
        Answer::Done => {
            let _ = writeln!(out, "   → ok");
        }
        Answer::Failed(e) => {
            let message = error_message(e);
            let mut lines = message.lines();
            let _ = writeln!(
                out,
                "   → error {}: {}",
                error_kind(e),
                lines.next().unwrap_or_default()
            );
            for line in lines {
                let _ = writeln!(out, "     {line}");
            }
        }
        Answer::NotMade(why) => {
            let _ = writeln!(out, "   → not made: {why}");
        }
    }
    for change in &r.kv {
        let _ = match change {
            KvChange::Set { key, bytes } => writeln!(out, "     kv     set   {key} ({bytes} bytes)"),
            KvChange::Deleted { key } => writeln!(out, "     kv     del   {key}"),
        };
    }
    for e in &r.emitted {
        let _ = writeln!(
            out,
            "     emit         {} to {}",
            event_line(e),
            e.cluster_name().unwrap_or("?")
        );
    }
    logs(&mut out, &r.logs);
    if r.differences.is_empty() {
        let _ = writeln!(out, "   ✓ as expected");
    } else {
        for d in &r.differences {
            let _ = writeln!(out, "   ✗ {d}");
        }
    }
    out
}

/// The last line: how many steps answered as expected.
pub fn summary(results: &[StepResult]) -> String {
    let differ = results.iter().filter(|r| !r.differences.is_empty()).count();
    let n = results.len();
    if differ == 0 {
        format!("\n{n} steps, {n} as expected\n")
    } else {
        format!("\n{n} steps, {} as expected, {differ} not\n", n - differ)
    }
}
