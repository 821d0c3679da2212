//! Kubernetes through the host's `kube` capability: watches (delivered as
//! [`crate::HostEvent::Watch`]), reads served from the watch cache, writes, and TokenRequests.
//! The host holds the client, the credentials and the retries; a plugin reaches only the
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
use crate::host::Host;

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

fn unexpected(reply: KubeReply) -> Error {
    Error::Internal(format!("the host answered a kube call with {reply:?}"))
}

fn parse(json: &str) -> Result<Value, Error> {
    serde_json::from_str(json)
        .map_err(|e| Error::Internal(format!("the host returned an object that is not JSON: {e}")))
}

fn one_object(reply: KubeReply) -> Result<Value, Error> {
    match reply {
        KubeReply::Object(o) => parse(&o),
        other => Err(unexpected(other)),
    }
}

fn ns(namespace: Option<&str>) -> Option<String> {
    namespace.map(str::to_owned)
}

/// The Kubernetes API server, as the plugin reaches it ([`Host::kube`]).
pub struct Kube<'h> {
    host: &'h Host,
}

impl<'h> Kube<'h> {
    pub(crate) fn new(host: &'h Host) -> Self {
        Self { host }
    }

    fn call(&self, request: KubeRequest) -> Result<KubeReply, Error> {
        self.host.kube_call(request)
    }

    /// Watches `resource` (in `namespace`, or everywhere): each object arrives as
    /// [`crate::HostEvent::Watch`], first every existing one, then each change. The host resumes
    /// a broken watch and keeps a cache that [`Kube::list`] and [`Kube::get`] are served from.
    /// Watching twice is one watch. Call it from [`crate::Plugin::start`].
    pub fn watch(&self, resource: &ApiResource, namespace: Option<&str>, selector: &Selector) -> Result<(), Error> {
        match self.call(KubeRequest::Watch {
            resource: resource.clone(),
            namespace: ns(namespace),
            selector: selector.clone(),
        })? {
            KubeReply::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// The object, or `None` if it does not exist.
    pub fn get(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Result<Option<Value>, Error> {
        match self.call(KubeRequest::Get {
            resource: resource.clone(),
            namespace: ns(namespace),
            name: name.to_owned(),
        })? {
            KubeReply::MaybeObject(o) => o.as_deref().map(parse).transpose(),
            other => Err(unexpected(other)),
        }
    }

    /// The objects matching `selector`: from the cache of a running watch that covers them, from
    /// the API server otherwise.
    pub fn list(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Result<Vec<Value>, Error> {
        match self.call(KubeRequest::List {
            resource: resource.clone(),
            namespace: ns(namespace),
            selector: selector.clone(),
        })? {
            KubeReply::Objects(objects) => objects.iter().map(|o| parse(o)).collect(),
            other => Err(unexpected(other)),
        }
    }

    /// Creates `object`; returns it as the API server stored it.
    pub fn create(&self, resource: &ApiResource, namespace: Option<&str>, object: &Value) -> Result<Value, Error> {
        one_object(self.call(KubeRequest::Create {
            resource: resource.clone(),
            namespace: ns(namespace),
            object: object.to_string(),
        })?)
    }

    /// Replaces `object` (or its `subresource`, e.g. `"status"`); its
    /// `metadata.resourceVersion` makes the write conditional.
    pub fn update(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        object: &Value,
        subresource: Option<&str>,
    ) -> Result<Value, Error> {
        one_object(self.call(KubeRequest::Update {
            resource: resource.clone(),
            namespace: ns(namespace),
            object: object.to_string(),
            subresource: subresource.map(str::to_owned),
        })?)
    }

    /// Applies a JSON merge patch (RFC 7386) to the object or its `subresource`; returns the
    /// object as patched.
    pub fn patch(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
        subresource: Option<&str>,
    ) -> Result<Value, Error> {
        one_object(self.call(KubeRequest::Patch {
            resource: resource.clone(),
            namespace: ns(namespace),
            name: name.to_owned(),
            patch: patch.to_string(),
            subresource: subresource.map(str::to_owned),
        })?)
    }

    pub fn delete(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Result<(), Error> {
        match self.call(KubeRequest::Delete {
            resource: resource.clone(),
            namespace: ns(namespace),
            name: name.to_owned(),
        })? {
            KubeReply::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Asks for a token of the ServiceAccount `name` in `namespace` (`request` is an
    /// `authentication.k8s.io/v1` TokenRequest); returns the TokenRequest with its status.
    pub fn create_token(&self, namespace: &str, name: &str, request: &Value) -> Result<Value, Error> {
        one_object(self.call(KubeRequest::CreateToken {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            request: request.to_string(),
        })?)
    }
}
