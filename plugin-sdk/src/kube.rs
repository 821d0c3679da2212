//! Kubernetes resources, selectors and watch events as a plugin sees them, and the `kube` calls
//! as they cross to the host. The calls themselves are [`Host::kube`](crate::Host::kube)'s
//! [`Kube`](crate::Kube): watches (delivered as [`crate::HostEvent::Watch`]), reads served from
//! the watch cache, writes, and TokenRequests. The host holds the client, the credentials and the retries; a plugin reaches only the
//! resources and verbs of its `kube_resources` grant. Errors from the API server arrive as
//! [`crate::Error::Status`] with the server's own status.
//!
//! ```no_run
//! # use conductor_plugin_sdk::{Error, Host, kube::{ApiResource, Selector}};
//! # fn example(host: &Host) -> Result<(), Error> {
//! let works = ApiResource::new("work.open-cluster-management.io", "v1", "ManifestWork", "manifestworks");
//! let kube = host.kube();
//! for work in kube.list(&works, Some("cluster1"), &Selector::default())? {
//!     let name = work["metadata"]["name"].as_str().unwrap_or_default();
//!     kube.patch(&works, Some("cluster1"), name, &serde_json::json!({"metadata": {"labels": {"seen": "yes"}}}), None)?;
//! }
//! # Ok(())
//! # }
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;

/// A kind of object; `group` is empty for the core group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ApiResource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
}

impl ApiResource {
    pub fn new(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        }
    }

    /// `<plural>.<group>` (just `<plural>` for the core group), as grants and watch events name it.
    pub fn name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `<group>/<version>` (just `<version>` for the core group), the objects' `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Label and field selectors in the API server's syntax; empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Selector {
    /// e.g. `app=web,tier in (a,b),!legacy`.
    pub labels: Option<String>,
    /// e.g. `metadata.name=x`.
    pub fields: Option<String>,
}

impl Selector {
    pub fn labels(labels: impl Into<String>) -> Self {
        Self {
            labels: Some(labels.into()),
            fields: None,
        }
    }

    pub fn fields(fields: impl Into<String>) -> Self {
        Self {
            labels: None,
            fields: Some(fields.into()),
        }
    }
}

/// What a watch leaves out ([`Kube::watch_with`](crate::Kube::watch_with)); the default leaves
/// out nothing, as [`Kube::watch`](crate::Kube::watch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WatchOptions {
    /// A change that touched only the object's `status` (its `metadata.resourceVersion` and
    /// `metadata.managedFields` aside) is not delivered: a plugin that writes statuses is not
    /// handed the echo of each write. The watch's cache holds it all the same, and a list (at
    /// start, after a broken watch) delivers every object. A hint: the host may still deliver
    /// such a change (a native library's host does), and the plugin treats it as any other.
    pub skip_status_only: bool,
}

/// What happened to a watched object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    /// It exists as given: listed when the watch (re)starts, or created or changed since.
    Applied,
    Deleted,
}

/// A watched object ([`Kube::watch`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchEvent {
    /// `<plural>.<group>` of the watch.
    pub resource: String,
    pub change: Change,
    /// The object, as JSON.
    pub object: String,
}

impl WatchEvent {
    /// The object, parsed.
    pub fn object(&self) -> Result<Value, Error> {
        serde_json::from_str(&self.object)
            .map_err(|e| Error::Invalid(format!("watched {} object is not JSON: {e}", self.resource)))
    }
}

/// One `kube` call, as it crosses to the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KubeRequest {
    Watch {
        resource: ApiResource,
        namespace: Option<String>,
        selector: Selector,
    },
    Get {
        resource: ApiResource,
        namespace: Option<String>,
        name: String,
    },
    List {
        resource: ApiResource,
        namespace: Option<String>,
        selector: Selector,
    },
    Create {
        resource: ApiResource,
        namespace: Option<String>,
        object: String,
    },
    Update {
        resource: ApiResource,
        namespace: Option<String>,
        object: String,
        subresource: Option<String>,
    },
    Patch {
        resource: ApiResource,
        namespace: Option<String>,
        name: String,
        patch: String,
        subresource: Option<String>,
    },
    Delete {
        resource: ApiResource,
        namespace: Option<String>,
        name: String,
    },
    CreateToken {
        namespace: String,
        name: String,
        request: String,
    },
}

/// The host's answer to a [`KubeRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KubeReply {
    Done,
    Object(String),
    MaybeObject(Option<String>),
    Objects(Vec<String>),
}
