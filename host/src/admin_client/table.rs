//! The inspector's views as aligned text tables, for people.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::admin::views::{Calls, LaneDepth, Plugin, PluginDetail, Routes, Subscriber, Undelivered};

/// Columns padded to their widest cell, two spaces apart.
fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out += cell;
            } else {
                out += &format!("{cell:<w$}  ");
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

/// How long ago `at` was, to the second: `3m12s`.
fn age(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - at).num_seconds().max(0).unsigned_abs();
    humantime::format_duration(Duration::from_secs(secs))
        .to_string()
        .replace(' ', "")
}

fn ms(v: f64) -> String {
    format!("{v:.2}ms")
}

fn counted(p: &Plugin, cell: impl Fn(&Calls) -> String) -> String {
    p.calls.as_ref().map_or_else(|| "-".to_owned(), cell)
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".to_owned()
    } else {
        items.join(",")
    }
}

pub fn subscribers(subs: &[Subscriber], now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = subs
        .iter()
        .map(|s| {
            vec![
                s.cluster.clone(),
                s.data_type.clone(),
                if s.user.is_empty() {
                    "-".to_owned()
                } else {
                    s.user.clone()
                },
                s.remote.clone().unwrap_or_else(|| "-".to_owned()),
                age(s.connected_since, now),
                s.events_sent.to_string(),
                format!("{}/{}", s.queue_depth, s.queue_capacity),
                s.id.clone(),
            ]
        })
        .collect();
    render(
        &[
            "CLUSTER",
            "DATA TYPE",
            "USER",
            "REMOTE",
            "AGE",
            "SENT",
            "QUEUE",
            "SUBSCRIPTION",
        ],
        &rows,
    )
}

pub fn plugins(plugins: &[Plugin], now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = plugins
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.form.clone(),
                p.version.clone().unwrap_or_else(|| "-".to_owned()),
                format!("{}/{}", p.instances, p.pool_size),
                counted(p, |c| c.total.to_string()),
                counted(p, |c| c.errors.to_string()),
                counted(p, |c| ms(c.p50_ms)),
                counted(p, |c| ms(c.p99_ms)),
                p.queued_events.to_string(),
                list(&p.sources),
                list(&p.grants),
                age(p.loaded_at, now),
            ]
        })
        .collect();
    let mut out = render(
        &[
            "NAME",
            "FORM",
            "VERSION",
            "INSTANCES",
            "CALLS",
            "ERRORS",
            "P50",
            "P99",
            "QUEUED",
            "SOURCES",
            "GRANTS",
            "LOADED",
        ],
        &rows,
    );
    for p in plugins {
        if let Some(oci) = &p.oci {
            // The reference is pinned by the manifest's digest.
            let cached = if oci.from_cache { "; loaded from the cache" } else { "" };
            out += &format!(
                "\n{}: {} (component {}{cached})\n",
                p.name, oci.reference, oci.component_digest
            );
        }
        if let Some(e) = p.calls.as_ref().and_then(|c| c.last_error.as_ref()) {
            out += &format!("\n{}: last error {} ago: {}\n", p.name, age(e.at, now), e.message);
        }
        let lanes = &p.host_event_lanes;
        if lanes.waiting > 0 {
            let deepest: Vec<String> = lanes
                .deepest
                .iter()
                .take(LANES_IN_SUMMARY)
                .map(|l| format!("{} {}", lane_name(l), l.events))
                .collect();
            let more = if lanes.waiting > deepest.len() { ", …" } else { "" };
            out += &format!(
                "\n{}: host events waiting in {} lanes; the deepest: {}{more}\n",
                p.name,
                lanes.waiting,
                deepest.join(", ")
            );
        }
        for (limit, refused) in &p.limits_refused {
            out += &format!(
                "\n{}: limits.{limit} refused {} host calls, the last {} ago\n",
                p.name,
                refused.count,
                age(refused.last_at, now)
            );
        }
    }
    out
}

/// The deepest lanes named in `inspect plugins`; `inspect plugin <name>` lists more.
const LANES_IN_SUMMARY: usize = 3;

/// A lane of a plugin's host events as a person reads it.
fn lane_name(lane: &LaneDepth) -> &str {
    lane.namespace.as_deref().unwrap_or("(shared)")
}

/// How much of a `kv` value the table shows; `--output json` shows all of it.
const VALUE_SHOWN: usize = 120;

/// One plugin's row, then what it keeps in `kv`: a key per line with its size and its value
/// (text, shortened; base64 for a value that is not UTF-8).
pub fn plugin_detail(detail: &PluginDetail, now: DateTime<Utc>) -> String {
    let mut out = plugins(std::slice::from_ref(&detail.plugin), now);
    let lanes = &detail.plugin.host_event_lanes;
    if !lanes.deepest.is_empty() {
        let rows: Vec<Vec<String>> = lanes
            .deepest
            .iter()
            .map(|l| vec![lane_name(l).to_owned(), l.events.to_string()])
            .collect();
        out += &format!(
            "\nhost events: {} waiting in {} lanes, the deepest {}:\n",
            detail.plugin.queued_events,
            lanes.waiting,
            rows.len()
        );
        out += &render(&["LANE", "EVENTS"], &rows);
    }
    let Some(kv) = &detail.kv else {
        return out + "\nkv: none (a built-in source)\n";
    };
    out += &format!("\nkv: {} keys, {} bytes\n", kv.keys, kv.bytes);
    if kv.entries.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = kv
        .entries
        .iter()
        .map(|e| {
            let value = match (&e.text, &e.base64) {
                (Some(text), _) => shorten(&text.replace('\n', "\\n")),
                (None, Some(b64)) => format!("base64:{}", shorten(b64)),
                (None, None) => String::new(),
            };
            vec![e.key.clone(), e.bytes.to_string(), value]
        })
        .collect();
    out + &render(&["KEY", "BYTES", "VALUE"], &rows)
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= VALUE_SHOWN {
        return text.to_owned();
    }
    let kept: String = text.chars().take(VALUE_SHOWN).collect();
    format!("{kept}…")
}

pub fn routes(routes: &Routes, now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = routes
        .routes
        .iter()
        .map(|r| vec![r.source.clone(), r.plugin.clone(), list(&r.data_types)])
        .collect();
    let mut out = render(&["SOURCE", "PLUGIN", "DATA TYPES"], &rows);
    out += &format!("\nconfiguration: {}\n", routes.config_file);
    match &routes.last_reload {
        None => out += "last reload: none since start\n",
        Some(r) if r.applied => out += &format!("last reload: {} ago, applied\n", age(r.at, now)),
        Some(r) => {
            out += &format!(
                "last reload: {} ago, refused: {}\n",
                age(r.at, now),
                r.error.as_deref().unwrap_or("")
            )
        }
    }
    out
}

/// Work unanswered past the deadline: who sent it, where, which version, how long ago it was
/// sent and sent again.
pub fn undelivered(works: &[Undelivered], now: DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = works
        .iter()
        .map(|u| {
            vec![
                u.plugin.clone(),
                u.cluster.clone(),
                u.resource_id.clone(),
                u.resource_version.map_or_else(|| "-".to_owned(), |v| v.to_string()),
                age(u.sent_at, now),
                u.resent_at
                    .map_or_else(|| "no".to_owned(), |at| format!("{} ago", age(at, now))),
                u.data_type.clone(),
            ]
        })
        .collect();
    render(
        &[
            "PLUGIN",
            "CLUSTER",
            "RESOURCE",
            "VERSION",
            "SENT",
            "SENT AGAIN",
            "DATA TYPE",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_ages_read_as_durations() {
        let now = Utc::now();
        let sub = Subscriber {
            id: "6f1c".into(),
            cluster: "cluster1".into(),
            data_type: "io.open-cluster-management.works.v1alpha1.manifestbundles".into(),
            user: String::new(),
            remote: Some("10.0.0.7:51234".into()),
            connected_since: now - chrono::Duration::seconds(192),
            events_sent: 42,
            queue_depth: 3,
            queue_capacity: 500,
        };
        let text = subscribers(
            &[
                sub.clone(),
                Subscriber {
                    cluster: "c2".into(),
                    ..sub
                },
            ],
            now,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[1].starts_with("cluster1  io.open"), "{text}");
        assert!(lines[2].starts_with("c2        io.open"), "{text}");
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells[2..],
            ["-", "10.0.0.7:51234", "3m12s", "42", "3/500", "6f1c"],
            "{text}"
        );
        let (sent_at, _) = lines[0].split_once("SENT").unwrap();
        assert_eq!(&lines[2][sent_at.len()..sent_at.len() + 2], "42", "{text}");
    }

    #[test]
    fn a_plugins_waiting_host_events_are_listed_by_lane() {
        use crate::admin::views::HostEventLanes;
        let now = Utc::now();
        let lane = |namespace: Option<&str>, events| LaneDepth {
            namespace: namespace.map(str::to_owned),
            events,
        };
        let plugin = Plugin {
            name: "kube".into(),
            form: "component".into(),
            file: None,
            digest: None,
            oci: None,
            declared_name: None,
            version: None,
            contract: None,
            grants: vec![],
            databases: vec![],
            kube_resources: vec![],
            capabilities: vec![],
            sources: vec![],
            data_types: vec![],
            pool_size: 8,
            instances: 1,
            queued_events: 2003,
            host_event_lanes: HostEventLanes {
                waiting: 5,
                deepest: vec![
                    lane(Some("burst-1"), 1000),
                    lane(Some("burst-2"), 999),
                    lane(Some("steady"), 2),
                    lane(None, 1),
                    lane(Some("other"), 1),
                ],
            },
            calls: None,
            limits_refused: std::collections::BTreeMap::new(),
            loaded_at: now,
        };
        let list = plugins(std::slice::from_ref(&plugin), now);
        assert!(
            list.contains("kube: host events waiting in 5 lanes; the deepest: burst-1 1000, burst-2 999, steady 2, …"),
            "{list}"
        );
        let detail = plugin_detail(&PluginDetail { plugin, kv: None }, now);
        assert!(
            detail.contains("host events: 2003 waiting in 5 lanes, the deepest 5:"),
            "{detail}"
        );
        let rows: Vec<Vec<&str>> = detail
            .lines()
            .skip_while(|l| !l.starts_with("LANE"))
            .take_while(|l| !l.trim().is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                vec!["LANE", "EVENTS"],
                vec!["burst-1", "1000"],
                vec!["burst-2", "999"],
                vec!["steady", "2"],
                vec!["(shared)", "1"],
                vec!["other", "1"],
            ],
            "{detail}"
        );
    }

    #[test]
    fn undelivered_work_reads_as_sent_and_sent_again_ago() {
        let now = Utc::now();
        let text = undelivered(
            &[Undelivered {
                plugin: "maestro".into(),
                cluster: "cluster1".into(),
                data_type: "io.open-cluster-management.works.v1alpha1.manifestbundles".into(),
                resource_id: "4a1f".into(),
                resource_version: Some(3),
                sent_at: now - chrono::Duration::seconds(700),
                resent_at: Some(now - chrono::Duration::seconds(100)),
            }],
            now,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "maestro",
                "cluster1",
                "4a1f",
                "3",
                "11m40s",
                "1m40s",
                "ago",
                "io.open-cluster-management.works.v1alpha1.manifestbundles"
            ],
            "{text}"
        );
    }
}
