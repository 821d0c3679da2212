//! The payload of a spec resync request: the versions of the resources an agent holds.

use serde::{Deserialize, Serialize};

/// `{"resourceVersions":[{"resourceID":"…","resourceVersion":3}, …]}`; `null` reads as empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceVersionList {
    #[serde(rename = "resourceVersions", default, deserialize_with = "null_as_empty")]
    pub resource_versions: Vec<ResourceVersion>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceVersion {
    #[serde(rename = "resourceID")]
    pub resource_id: String,
    #[serde(rename = "resourceVersion")]
    pub resource_version: i64,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ResourceVersion>, D::Error> {
    Ok(Option::<Vec<ResourceVersion>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_missing_lists_are_empty() {
        let l: ResourceVersionList = serde_json::from_str(r#"{"resourceVersions":null}"#).unwrap();
        assert!(l.resource_versions.is_empty());
        let l: ResourceVersionList = serde_json::from_str("{}").unwrap();
        assert!(l.resource_versions.is_empty());
        let l: ResourceVersionList =
            serde_json::from_str(r#"{"resourceVersions":[{"resourceID":"a","resourceVersion":3}]}"#).unwrap();
        assert_eq!(l.resource_versions[0].resource_version, 3);
    }
}
