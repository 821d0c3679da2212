//! The Kubernetes API server as a plugin reaches it through the host's `kube` capability
//! ([`Host::kube`]): dynamic objects as JSON, watches delivered as host events, TokenRequests.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Host;
use crate::Error;
use crate::kube::{ApiResource, KubeReply, KubeRequest, Selector, WatchOptions};

fn unexpected(reply: KubeReply) -> Error {
    Error::Internal(format!("the host answered a kube call with {reply:?}"))
}

fn parse<T: DeserializeOwned>(json: &str) -> Result<T, Error> {
    serde_json::from_str(json)
        .map_err(|e| Error::Internal(format!("the host returned an object that is not JSON: {e}")))
}

fn one_object<T: DeserializeOwned>(reply: KubeReply) -> Result<T, Error> {
    match reply {
        KubeReply::Object(o) => parse(&o),
        other => Err(unexpected(other)),
    }
}

fn ns(namespace: Option<&str>) -> Option<String> {
    namespace.map(str::to_owned)
}

fn watch_request(resource: &ApiResource, namespace: Option<&str>, selector: &Selector) -> KubeRequest {
    KubeRequest::Watch {
        resource: resource.clone(),
        namespace: ns(namespace),
        selector: selector.clone(),
    }
}

/// A call answered with nothing but its success.
fn done(reply: KubeReply) -> Result<(), Error> {
    match reply {
        KubeReply::Done => Ok(()),
        other => Err(unexpected(other)),
    }
}

/// The Kubernetes API server, as the plugin reaches it ([`Host::kube`]).
pub struct Kube<'h> {
    host: &'h Host,
}

impl<'h> Kube<'h> {
    pub(super) fn new(host: &'h Host) -> Self {
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
        done(self.call(watch_request(resource, namespace, selector))?)
    }

    /// [`Kube::watch`] with `options`: e.g. a plugin that writes the status of the objects it
    /// watches and does not act on status changes asks not to be handed the echo of its writes
    /// (contract 0.6.2). A watch with other options is another watch.
    ///
    /// ```
    /// # use conductor_plugin_sdk::kube::{ApiResource, Selector, WatchOptions};
    /// let fake = conductor_plugin_sdk::fakes::FakeHost::new();
    /// let works = ApiResource::new("work.open-cluster-management.io", "v1", "ManifestWork", "manifestworks");
    /// let options = WatchOptions { skip_status_only: true };
    /// fake.host().kube().watch_with(&works, None, &Selector::default(), options).unwrap();
    /// assert_eq!(fake.recorded().watch_options, [options]);
    /// ```
    pub fn watch_with(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        selector: &Selector,
        options: WatchOptions,
    ) -> Result<(), Error> {
        let request = watch_request(resource, namespace, selector);
        done(self.host.kube_watch_with(request, options)?)
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
        self.list_as(resource, namespace, selector)
    }

    /// As [`Kube::list`], each object decoded as `T`: a struct of only the fields the plugin
    /// reads costs less to decode than a whole object as a `Value`.
    pub fn list_as<T: DeserializeOwned>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Result<Vec<T>, Error> {
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
        self.patch_as(resource, namespace, name, patch, subresource)
    }

    /// As [`Kube::patch`], the object as patched decoded as `T` (`serde::de::IgnoredAny` when
    /// the plugin does not read it).
    pub fn patch_as<T: DeserializeOwned>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
        subresource: Option<&str>,
    ) -> Result<T, Error> {
        one_object(self.call(KubeRequest::Patch {
            resource: resource.clone(),
            namespace: ns(namespace),
            name: name.to_owned(),
            patch: patch.to_string(),
            subresource: subresource.map(str::to_owned),
        })?)
    }

    pub fn delete(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Result<(), Error> {
        done(self.call(KubeRequest::Delete {
            resource: resource.clone(),
            namespace: ns(namespace),
            name: name.to_owned(),
        })?)
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
