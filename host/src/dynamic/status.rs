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
    /// Not admitted: the reason (a CamelCase word) and the message.
    Refused { reason: String, message: String },
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
        Outcome::Refused { reason, message } => (
            false,
            None,
            vec![
                c("Admitted", false, reason, message),
                c("Loaded", false, "NotAdmitted", message),
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
        "loaded": loaded,
        "observedGeneration": generation,
        "conditions": conditions,
    });
    if let Some(d) = digest {
        e["digest"] = json!(d);
    }
    e
}

/// Whether two entries say the same (transition times aside).
pub fn same(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
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
            },
            None,
            "t",
        );
        assert_eq!(refused["loaded"], false);
        assert!(refused.get("digest").is_none());
        assert_eq!(refused["conditions"][0]["reason"], "GrantsExceeded");
    }
}
