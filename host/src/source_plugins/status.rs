//! Each replica's report in a `SourcePlugin`'s status: one entry of `status.replicas`, keyed by the
//! replica's name and written by server-side apply under a field manager of the replica's own
//! (`conductor/<replica>`), so replicas never overwrite each other's entries. The entry says
//! whether the plugin is loaded, its digest, and — as the conditions `Admitted` and `Loaded` —
//! why not, with the last error.

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{API_VERSION, KIND, api_resource};

/// What became of a resource on this replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Loaded (or kept running), from the artifact with this digest.
    Loaded { digest: String },
    /// Not admitted: the reason (a CamelCase word) and the message; `running` is the digest of
    /// the earlier version still serving in its place, if any.
    Refused {
        reason: String,
        message: String,
        running: Option<String>,
    },
    /// Admitted, but it did not load; `running` is the digest of the earlier version still
    /// serving in its place, if any.
    Failed { message: String, running: Option<String> },
}

fn condition(
    kind: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: i64,
    previous: Option<&Value>,
    now: &str,
) -> Value {
    let status = if ok { "True" } else { "False" };
    // The time of the last change of this condition's status.
    let since = previous
        .and_then(|p| p["conditions"].as_array())
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .unwrap_or(now);
    json!({
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since,
    })
}

/// This replica's entry for `outcome` at the resource's `generation`; `previous` is the entry
/// the resource holds now (its transition times are kept where a condition did not change).
pub fn entry(replica: &str, generation: i64, outcome: &Outcome, previous: Option<&Value>, now: &str) -> Value {
    let c = |kind: &str, ok: bool, reason: &str, message: &str| {
        condition(kind, ok, reason, message, generation, previous, now)
    };
    let (loaded, digest, conditions) = match outcome {
        Outcome::Loaded { digest } => (
            true,
            Some(digest.clone()),
            vec![
                c("Admitted", true, "Admitted", "within what conductor.toml allows"),
                c("Loaded", true, "Loaded", &format!("serving, from {digest}")),
            ],
        ),
        Outcome::Refused {
            reason,
            message,
            running: None,
        } => (
            false,
            None,
            vec![
                c("Admitted", false, reason, message),
                c("Loaded", false, "NotAdmitted", message),
            ],
        ),
        Outcome::Refused {
            reason,
            message,
            running: Some(d),
        } => (
            true,
            Some(d.clone()),
            vec![
                c("Admitted", false, reason, message),
                c(
                    "Loaded",
                    true,
                    "EarlierVersionServing",
                    &format!("the earlier version ({d}) keeps serving; this spec is refused: {message}"),
                ),
            ],
        ),
        Outcome::Failed { message, running } => {
            let message = match running {
                Some(d) => format!("{message}; the earlier version ({d}) keeps serving"),
                None => message.clone(),
            };
            (
                running.is_some(),
                running.clone(),
                vec![
                    c("Admitted", true, "Admitted", "within what conductor.toml allows"),
                    c("Loaded", false, "LoadFailed", &message),
                ],
            )
        }
    };
    let mut e = json!({
        "name": replica,
        "heartbeatTime": now,
        "loaded": loaded,
        "observedGeneration": generation,
        "conditions": conditions,
    });
    if let Some(d) = digest {
        e["digest"] = json!(d);
    }
    e
}

/// Whether two entries say the same (transition and heartbeat times aside).
pub fn same(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("heartbeatTime");
        }
        if let Some(cs) = v["conditions"].as_array_mut() {
            for c in cs {
                if let Some(o) = c.as_object_mut() {
                    o.remove("lastTransitionTime");
                }
            }
        }
        v
    };
    strip(a) == strip(b)
}

/// Whether an entry renewed at `heartbeat` (RFC 3339) is older than `timeout` at `now`: its
/// replica stopped without taking it out (killed). An entry with no heartbeat is left alone.
pub fn stale(heartbeat: Option<&str>, now: chrono::DateTime<chrono::Utc>, timeout: std::time::Duration) -> bool {
    let Some(at) = heartbeat.and_then(|h| chrono::DateTime::parse_from_rfc3339(h).ok()) else {
        return false;
    };
    let age = now.signed_duration_since(at.with_timezone(&chrono::Utc));
    age.to_std().is_ok_and(|age| age > timeout)
}

fn manager(replica: &str) -> String {
    let mut m = format!("conductor/{replica}");
    m.truncate(128);
    m
}

/// Applies this replica's `entry` (or, with `None`, removes it) in the status of `name`.
pub async fn apply(client: &Client, name: &str, replica: &str, entry: Option<Value>) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource());
    let replicas: Vec<Value> = entry.into_iter().collect();
    let patch = json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": { "name": name },
        "status": { "replicas": replicas },
    });
    api.patch_status(
        name,
        &PatchParams::apply(&manager(replica)).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_not_renewed_within_the_timeout_is_stale() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:10:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let timeout = std::time::Duration::from_secs(180);
        assert!(stale(Some("2026-01-01T00:06:59Z"), now, timeout));
        assert!(!stale(Some("2026-01-01T00:07:01Z"), now, timeout));
        assert!(
            !stale(Some("2026-01-01T00:11:00Z"), now, timeout),
            "a clock ahead is not stale"
        );
        assert!(!stale(None, now, timeout), "written by a version without heartbeats");
        assert!(!stale(Some("yesterday"), now, timeout));
        let a = entry(
            "r1",
            1,
            &Outcome::Loaded { digest: "d".into() },
            None,
            "2026-01-01T00:00:00Z",
        );
        let b = entry(
            "r1",
            1,
            &Outcome::Loaded { digest: "d".into() },
            Some(&a),
            "2026-01-01T00:05:00Z",
        );
        assert_eq!(b["heartbeatTime"], "2026-01-01T00:05:00Z");
        assert!(same(&a, &b), "a renewed heartbeat says nothing new");
    }

    #[test]
    fn an_entry_says_loaded_and_digest_and_keeps_transition_times_of_unchanged_conditions() {
        let loaded = Outcome::Loaded {
            digest: "sha256:aa".into(),
        };
        let first = entry("r1", 1, &loaded, None, "2026-01-01T00:00:00Z");
        assert_eq!(first["loaded"], true);
        assert_eq!(first["digest"], "sha256:aa");
        assert_eq!(first["conditions"][1]["type"], "Loaded");
        assert_eq!(first["conditions"][1]["status"], "True");
        let again = entry("r1", 1, &loaded, Some(&first), "2026-01-02T00:00:00Z");
        assert!(same(&first, &again));
        assert_eq!(again["conditions"][1]["lastTransitionTime"], "2026-01-01T00:00:00Z");

        let failed = Outcome::Failed {
            message: "registry down".into(),
            running: Some("sha256:aa".into()),
        };
        let later = entry("r1", 2, &failed, Some(&first), "2026-01-03T00:00:00Z");
        assert!(!same(&first, &later));
        assert_eq!(later["loaded"], true, "the earlier version serves");
        assert_eq!(
            later["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z",
            "Admitted did not change"
        );
        assert_eq!(later["conditions"][1]["lastTransitionTime"], "2026-01-03T00:00:00Z");
        assert_eq!(later["conditions"][1]["reason"], "LoadFailed");
        assert!(
            later["conditions"][1]["message"]
                .as_str()
                .unwrap()
                .contains("registry down; the earlier version (sha256:aa) keeps serving")
        );

        let refused = entry(
            "r1",
            3,
            &Outcome::Refused {
                reason: "GrantsExceeded".into(),
                message: "spec.grants: [\"pg\"]".into(),
                running: None,
            },
            None,
            "t",
        );
        assert_eq!(refused["loaded"], false);
        assert!(refused.get("digest").is_none());
        assert_eq!(refused["conditions"][0]["reason"], "GrantsExceeded");

        let kept = entry(
            "r1",
            4,
            &Outcome::Refused {
                reason: "LimitsExceeded".into(),
                message: "spec.limits.kv_bytes: …".into(),
                running: Some("sha256:aa".into()),
            },
            None,
            "t",
        );
        assert_eq!(
            (kept["loaded"].clone(), kept["digest"].clone()),
            (json!(true), json!("sha256:aa"))
        );
        assert_eq!(kept["conditions"][0]["status"], "False");
        assert_eq!(kept["conditions"][1]["reason"], "EarlierVersionServing");
        assert!(
            kept["conditions"][1]["message"]
                .as_str()
                .unwrap()
                .contains("keeps serving")
        );
    }
}
