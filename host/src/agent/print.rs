//! One line per event, for a person watching: when, what happened, to which resource.
//!
//! `2026-05-04T10:00:00Z spec.create_request manifestbundles hello id=0b6f… version=1 source=memory`,
//! with `deleting` after the version when the event carries a `deletiontimestamp`.

use conductor_plugin_sdk::CloudEvent;
use conductor_plugin_sdk::ocm::{EventType, OcmExtensions};

/// The resource's name: from the `metadata` extension, else the payload's `metadata.name`.
pub fn name(event: &CloudEvent) -> Option<String> {
    let from_metadata = event
        .metadata_json()
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|m| m["name"].as_str().map(str::to_owned));
    from_metadata.or_else(|| {
        event
            .data_json::<serde_json::Value>()
            .ok()
            .and_then(|d| d["metadata"]["name"].as_str().map(str::to_owned))
    })
}

/// The line for `event`, received at `now` (its `time` when it has one).
pub fn line(event: &CloudEvent, now: chrono::DateTime<chrono::Utc>) -> String {
    let time = event
        .time
        .unwrap_or(now)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (what, kind) = match EventType::parse(&event.ty) {
        Ok(ty) => (format!("{}.{}", ty.subresource, ty.action), ty.data_type.resource),
        Err(_) => (event.ty.clone(), "-".to_owned()),
    };
    let mut out = format!("{time} {what} {kind} {}", name(event).as_deref().unwrap_or("-"));
    if let Ok(id) = event.resource_id() {
        out.push_str(&format!(" id={id}"));
    }
    if let Ok(version) = event.resource_version() {
        out.push_str(&format!(" version={version}"));
    }
    if event.deletion_timestamp().is_some() {
        out.push_str(" deleting");
    }
    out.push_str(&format!(" source={}", event.source));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_in_one_line() {
        let mut e = CloudEvent::new(
            "1",
            "memory",
            "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
        );
        e.set_extension("resourceid", "r1");
        e.set_extension("resourceversion", 1);
        e.set_extension("metadata", r#"{"name":"hello"}"#);
        let now = chrono::DateTime::parse_from_rfc3339("2026-05-04T10:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(
            line(&e, now),
            "2026-05-04T10:00:00Z spec.create_request manifestbundles hello id=r1 version=1 source=memory"
        );
    }
}
