//! Reads and writes of dynamic objects on the API server, JSON in and JSON out (the plugin's text
//! goes to the server as it is, and the server's answer back as it is). An error the API server
//! answers is passed on as the Kubernetes `Status` it is; a server that cannot be reached is
//! `Unavailable`.

use conductor_plugin_sdk::kube::{ApiResource, Selector};
use conductor_plugin_sdk::{Error, Status};
use kube::Client;
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::core::Request;
use serde_json::value::RawValue;

/// The kube-rs description of `resource`.
pub fn api_resource(resource: &ApiResource) -> kube::api::ApiResource {
    let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
    kube::api::ApiResource::from_gvk_with_plural(&gvk, &resource.plural)
}

fn request(resource: &ApiResource, namespace: Option<&str>) -> Request {
    Request::new(<DynamicObject as kube::Resource>::url_path(
        &api_resource(resource),
        namespace,
    ))
}

/// The plugin's error for a failed call.
pub fn error(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(status) => match serde_json::to_value(&*status).and_then(serde_json::from_value::<Status>) {
            Ok(status) => Error::from(status),
            Err(_) => Error::Internal(status.message.clone()),
        },
        kube::Error::BuildRequest(e) => Error::Invalid(e.to_string()),
        kube::Error::SerdeError(e) => Error::Internal(format!("the API server's answer is not JSON: {e}")),
        other => Error::Unavailable(format!("the Kubernetes API server: {other}")),
    }
}

fn build(e: kube::core::request::Error) -> Error {
    Error::Invalid(format!("cannot build the request: {e}"))
}

fn raw(json: &str, what: &str) -> Result<Box<RawValue>, Error> {
    RawValue::from_string(json.to_owned()).map_err(|e| Error::Invalid(format!("the {what} is not JSON: {e}")))
}

fn list_params(selector: &Selector) -> ListParams {
    let mut lp = ListParams::default();
    if let Some(l) = selector.labels.as_deref().filter(|s| !s.is_empty()) {
        lp = lp.labels(l);
    }
    if let Some(f) = selector.fields.as_deref().filter(|s| !s.is_empty()) {
        lp = lp.fields(f);
    }
    lp
}

/// The object's name, read from its JSON.
fn name_of(object: &str) -> Result<String, Error> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Meta,
    }
    let o: Object =
        serde_json::from_str(object).map_err(|e| Error::Invalid(format!("the object has no metadata: {e}")))?;
    if o.metadata.name.is_empty() {
        return Err(Error::Invalid("the object has no metadata.name".into()));
    }
    Ok(o.metadata.name)
}

pub async fn get(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<String>, Error> {
    let req = request(resource, namespace)
        .get(name, &Default::default())
        .map_err(build)?;
    match client.request_text(req).await {
        Ok(text) => Ok(Some(text)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(error(e)),
    }
}

pub async fn list(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    selector: &Selector,
) -> Result<Vec<String>, Error> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        items: Vec<Box<RawValue>>,
    }
    let req = request(resource, namespace)
        .list(&list_params(selector))
        .map_err(build)?;
    let text = client.request_text(req).await.map_err(error)?;
    let list: List =
        serde_json::from_str(&text).map_err(|e| Error::Internal(format!("the API server's list is not JSON: {e}")))?;
    Ok(list.items.iter().map(|item| with_type(resource, item.get())).collect())
}

/// The item of a list with its `apiVersion` and `kind` (typed lists leave them out of items),
/// as a watch delivers it.
fn with_type(resource: &ApiResource, item: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "apiVersion")]
        api_version: Option<serde::de::IgnoredAny>,
        kind: Option<serde::de::IgnoredAny>,
    }
    let typed = serde_json::from_str::<Head>(item).is_ok_and(|h| h.api_version.is_some() && h.kind.is_some());
    match item.strip_prefix('{') {
        Some(rest) if !typed => {
            let sep = if rest.trim_start().starts_with('}') { "" } else { "," };
            format!(
                r#"{{"apiVersion":{},"kind":{}{sep}{rest}"#,
                serde_json::Value::from(resource.api_version()),
                serde_json::Value::from(resource.kind.clone())
            )
        }
        _ => item.to_owned(),
    }
}

pub async fn create(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    object: &str,
) -> Result<String, Error> {
    raw(object, "object")?;
    let req = request(resource, namespace)
        .create(&PostParams::default(), object.as_bytes().to_vec())
        .map_err(build)?;
    client.request_text(req).await.map_err(error)
}

pub async fn update(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    object: &str,
    subresource: Option<&str>,
) -> Result<String, Error> {
    let name = name_of(object)?;
    let data = object.as_bytes().to_vec();
    let r = request(resource, namespace);
    let req = match subresource {
        None => r.replace(&name, &PostParams::default(), data),
        Some(sub) => r.replace_subresource(sub, &name, &PostParams::default(), data),
    }
    .map_err(build)?;
    client.request_text(req).await.map_err(error)
}

pub async fn patch(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    patch: &str,
    subresource: Option<&str>,
) -> Result<String, Error> {
    let patch = Patch::Merge(raw(patch, "patch")?);
    let r = request(resource, namespace);
    let req = match subresource {
        None => r.patch(name, &PatchParams::default(), &patch),
        Some(sub) => r.patch_subresource(sub, name, &PatchParams::default(), &patch),
    }
    .map_err(build)?;
    client.request_text(req).await.map_err(error)
}

pub async fn delete(client: &Client, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Result<(), Error> {
    let req = request(resource, namespace)
        .delete(name, &DeleteParams::default())
        .map_err(build)?;
    client.request_text(req).await.map(drop).map_err(error)
}

/// `POST /api/v1/namespaces/<namespace>/serviceaccounts/<name>/token`.
pub async fn create_token(client: &Client, namespace: &str, name: &str, token_request: &str) -> Result<String, Error> {
    raw(token_request, "TokenRequest")?;
    let service_accounts = ApiResource::new("", "v1", "ServiceAccount", "serviceaccounts");
    let req = request(&service_accounts, Some(namespace))
        .create_subresource("token", name, &PostParams::default(), token_request.as_bytes().to_vec())
        .map_err(build)?;
    client.request_text(req).await.map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_pass_through_as_their_status() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "message": "manifestworks \"w\" already exists", "reason": "AlreadyExists",
            "details": {"name": "w", "group": "work.open-cluster-management.io", "kind": "manifestworks"}, "code": 409
        }))
        .unwrap();
        let e = error(kube::Error::Api(Box::new(status)));
        let s = e.to_status();
        assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
        assert_eq!(s.details.unwrap().name, "w");
        assert!(e.is_already_exists());
    }

    #[test]
    fn list_items_get_their_type_back() {
        let r = ApiResource::new("coordination.k8s.io", "v1", "Lease", "leases");
        let typed: serde_json::Value =
            serde_json::from_str(&with_type(&r, r#"{"metadata":{"name":"l"},"spec":{"kind":"x"}}"#)).unwrap();
        assert_eq!(typed["apiVersion"], "coordination.k8s.io/v1");
        assert_eq!(typed["kind"], "Lease");
        assert_eq!(typed["spec"]["kind"], "x");
        let already = r#"{"apiVersion":"a/v1","kind":"K","metadata":{}}"#;
        assert_eq!(with_type(&r, already), already);
        let empty: serde_json::Value = serde_json::from_str(&with_type(&r, "{}")).unwrap();
        assert_eq!(empty["kind"], "Lease");
    }

    #[test]
    fn objects_need_a_name_to_be_replaced() {
        assert_eq!(name_of(r#"{"metadata":{"name":"w"}}"#).unwrap(), "w");
        assert!(name_of(r#"{"metadata":{}}"#).is_err());
        assert!(name_of("[]").is_err());
    }
}
