//! The names of the CloudEvent attributes OCM uses, and the misspellings of them a person makes:
//! `ce-clustername` in a CloudEvent's JSON (where extensions have no prefix), `clustername` on
//! the wire (where they do), `clusterName` anywhere (they are lowercase). The server names the
//! right key when it refuses an event (`grpc/service.rs`), and `conductor agent` does before
//! sending one (`agent/json.rs`).

use conductor_plugin_sdk::ocm::extensions;

/// The OCM extensions (`docs/protocol.md` §2.6).
pub const OCM_EXTENSIONS: [&str; 9] = [
    extensions::CLUSTER_NAME,
    extensions::ORIGINAL_SOURCE,
    extensions::RESOURCE_ID,
    extensions::RESOURCE_VERSION,
    extensions::DELETION_TIMESTAMP,
    extensions::SEQUENCE_ID,
    extensions::STATUS_HASH,
    extensions::METADATA,
    extensions::LOG_TRACING,
];

/// The CloudEvents attributes besides the extensions.
pub const CLOUDEVENTS_ATTRIBUTES: [&str; 8] = [
    "id",
    "source",
    "specversion",
    "type",
    "datacontenttype",
    "dataschema",
    "subject",
    "time",
];

/// The attribute `key` stands for, when it is written otherwise: another case, `-` or `_`
/// between words, a `ce-` (or `ce_`) prefix. `None` for a name no attribute resembles.
pub fn intended(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    let bare = ["ce-", "ce_", "ce."]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .unwrap_or(&lower);
    let folded: String = bare.chars().filter(char::is_ascii_alphanumeric).collect();
    OCM_EXTENSIONS
        .iter()
        .chain(CLOUDEVENTS_ATTRIBUTES.iter())
        .find(|name| **name == folded)
        .copied()
}

/// A key that is not the attribute it was meant to be, and the key that is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misspelling {
    pub found: String,
    pub expected: String,
}

impl std::fmt::Display for Misspelling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the event has {:?}, which is not {:?}", self.found, self.expected)
    }
}

/// The keys of a wire event's `attributes` map that are misspelt OCM or CloudEvents attributes
/// (`docs/protocol.md` §2.2: `contenttype`, else `ce-<lowercase name>`). Cheap for a well-formed
/// event: only keys off that form are looked at.
pub fn wire_misspellings<'a>(keys: impl Iterator<Item = &'a String>) -> Vec<Misspelling> {
    let well_formed = |key: &str| {
        key == "contenttype"
            || key
                .strip_prefix("ce-")
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
    };
    keys.filter(|key| !well_formed(key))
        .filter_map(|key| {
            let expected = match intended(key)? {
                "datacontenttype" => "contenttype".to_owned(),
                name => format!("ce-{name}"),
            };
            Some(Misspelling {
                found: key.clone(),
                expected,
            })
        })
        .collect()
}

/// The misspellings as one clause for an error message, or `""` when there are none.
pub fn hint(misspellings: &[Misspelling]) -> String {
    if misspellings.is_empty() {
        return String::new();
    }
    let each: Vec<String> = misspellings.iter().map(ToString::to_string).collect();
    format!(" ({})", each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspellings_are_traced_to_the_attribute() {
        for key in [
            "clusterName",
            "ce-clustername",
            "cluster_name",
            "CE-Cluster-Name",
            "clustername",
        ] {
            assert_eq!(intended(key), Some("clustername"), "{key}");
        }
        assert_eq!(intended("resourceID"), Some("resourceid"));
        assert_eq!(intended("specVersion"), Some("specversion"));
        assert_eq!(intended("color"), None);
    }

    #[test]
    fn only_keys_off_the_wire_form_are_reported() {
        let keys: Vec<String> = [
            "ce-clustername",
            "contenttype",
            "clustername",
            "ce-resourceID",
            "ce-x",
            "other",
        ]
        .map(str::to_owned)
        .into();
        let found = wire_misspellings(keys.iter());
        assert_eq!(
            found,
            vec![
                Misspelling {
                    found: "clustername".into(),
                    expected: "ce-clustername".into()
                },
                Misspelling {
                    found: "ce-resourceID".into(),
                    expected: "ce-resourceid".into()
                },
            ]
        );
        assert_eq!(
            hint(&found[..1]),
            r#" (the event has "clustername", which is not "ce-clustername")"#
        );
        assert_eq!(hint(&[]), "");
    }
}
