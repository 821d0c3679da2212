//! SubjectAccessReview authorization (`docs/protocol.md` §9.2): what a call does, mapped to
//! the Kubernetes resource attributes a hub's RBAC is written for, and a review per decision
//! (cached briefly).

use std::time::Duration;

use conductor_plugin_sdk::Identity;
use conductor_plugin_sdk::ocm::{DataType, EventType, SubResource};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};

use super::reviews::Reviews;
use crate::telemetry::SecurityMetrics;

/// What a call asks to do.
#[derive(Debug, Clone, Copy)]
pub enum Access<'a> {
    /// Publish `ty` for `cluster`; `data` is the event's payload.
    Publish {
        cluster: &'a str,
        ty: &'a EventType,
        data: Option<&'a [u8]>,
    },
    /// Subscribe to `data_type` for `cluster`.
    Subscribe { cluster: &'a str, data_type: &'a str },
}

/// The attributes of a review: of a resource, or (with `path`) of a non-resource URL such as the
/// admin endpoint's `/metrics`. Empty strings are left out, as Kubernetes' Go client leaves them
/// out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// A non-resource URL: the review names only it and the verb.
    pub path: String,
    pub verb: String,
    pub namespace: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
}

impl Attributes {
    fn to_kube(&self) -> ResourceAttributes {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        ResourceAttributes {
            verb: some(&self.verb),
            namespace: some(&self.namespace),
            group: some(&self.group),
            resource: some(&self.resource),
            subresource: some(&self.subresource),
            name: some(&self.name),
            ..Default::default()
        }
    }
}

impl std::fmt::Display for Attributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.path.is_empty() {
            return write!(f, "{} {}", self.verb, self.path);
        }
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.name.is_empty() {
            write!(f, " {:?}", self.name)?;
        }
        write!(f, " in namespace {:?}", self.namespace)
    }
}

const TOKEN_REQUESTS: (&str, &str, &str) = ("authentication.k8s.io", "v1", "tokenrequests");
/// OCM's data types that map to their own group and resource, and the version of each.
const PLAIN: [(&str, &str, &str); 6] = [
    ("addon.open-cluster-management.io", "v1alpha1", "managedclusteraddons"),
    ("addon.open-cluster-management.io", "v1beta1", "managedclusteraddons"),
    ("certificates.k8s.io", "v1", "certificatesigningrequests"),
    ("events.k8s.io", "v1", "events"),
    ("coordination.k8s.io", "v1", "leases"),
    ("cluster.open-cluster-management.io", "v1", "managedclusters"),
];
const MANIFEST_BUNDLES: (&str, &str, &str) = ("io.open-cluster-management.works", "v1alpha1", "manifestbundles");

fn is(data_type: &DataType, (group, version, resource): (&str, &str, &str)) -> bool {
    data_type.group == group && data_type.version == version && data_type.resource == resource
}

/// Data types beyond OCM's, each with its Kubernetes resource (`<plural>.<group>`).
pub type ExtraDataTypes = std::collections::BTreeMap<String, String>;

/// The attributes of `access`, or why it is denied without asking (§9.2); data types beyond
/// OCM's are authorized as the resource `extra` names for them, or not at all.
pub fn attributes(access: &Access<'_>, extra: &ExtraDataTypes) -> Result<Attributes, String> {
    let (cluster, data_type, subresource, action, data) = match access {
        Access::Publish { cluster, ty, data } => (
            *cluster,
            ty.data_type.clone(),
            ty.subresource,
            ty.action.as_str(),
            *data,
        ),
        Access::Subscribe { cluster, data_type } => {
            let parsed = DataType::parse(data_type).map_err(|e| format!("unsupported event type: {e}"))?;
            (*cluster, parsed, SubResource::Spec, "watch_request", None)
        }
    };
    if cluster.is_empty() {
        return Err("no cluster name".into());
    }
    let verb = match action {
        "create_request" => "create",
        "update_request" => "update",
        "delete_request" => "delete",
        "watch_request" => "watch",
        "resync_request" => "list",
        other => return Err(format!("unsupported action {other:?}")),
    };
    let mut attributes = Attributes {
        verb: verb.into(),
        namespace: cluster.into(),
        subresource: if subresource == SubResource::Status {
            "status".into()
        } else {
            String::new()
        },
        ..Default::default()
    };
    if PLAIN.iter().any(|t| is(&data_type, *t)) {
        attributes.group = data_type.group.clone();
        attributes.resource = data_type.resource.clone();
        if data_type.resource == "managedclusters" {
            attributes.name = cluster.into();
        }
    } else if is(&data_type, MANIFEST_BUNDLES) {
        attributes.group = "work.open-cluster-management.io".into();
        attributes.resource = "manifestworks".into();
    } else if is(&data_type, TOKEN_REQUESTS) {
        attributes.resource = "serviceaccounts".into();
        attributes.subresource = "token".into();
        match verb {
            // Receiving tokens is its own verb, so that RBAC can grant it apart from watch.
            "watch" => attributes.verb = "subscribe".into(),
            "create" => attributes.name = token_request_name(data)?,
            _ => return Err(format!("unsupported action {action:?} for token requests")),
        }
    } else if let Some(resource) = extra.get(&data_type.to_string()) {
        let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
        attributes.resource = resource.into();
        attributes.group = group.into();
    } else {
        return Err(format!(
            "unsupported event type {data_type} (a data type beyond OCM's is authorized once [auth.data_types] names its resource)"
        ));
    }
    Ok(attributes)
}

/// The service account a token is requested for: the payload's `metadata.name`.
fn token_request_name(data: Option<&[u8]>) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Metadata,
    }
    #[derive(serde::Deserialize, Default)]
    struct Metadata {
        #[serde(default)]
        name: String,
    }
    let object: Object = serde_json::from_slice(data.unwrap_or_default())
        .map_err(|e| format!("the token request is not an object with metadata: {e}"))?;
    Ok(object.metadata.name)
}

/// The review request conductor sends.
pub fn review(identity: &Identity, attributes: &Attributes) -> SubjectAccessReview {
    SubjectAccessReview {
        metadata: Default::default(),
        spec: SubjectAccessReviewSpec {
            user: Some(identity.user.clone()),
            groups: Some(identity.groups.clone()),
            resource_attributes: attributes.path.is_empty().then(|| attributes.to_kube()),
            non_resource_attributes: (!attributes.path.is_empty()).then(|| NonResourceAttributes {
                path: Some(attributes.path.clone()),
                verb: Some(attributes.verb.clone()),
            }),
            ..Default::default()
        },
        status: None,
    }
}

/// A question for the API server, kept with its answer for the cache's lifetime (two per agent
/// on a hub that authorizes with reviews): the identity and the attributes packed into one
/// allocation, each part its length (four bytes) and its bytes, the groups last.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Question(Box<[u8]>);

impl Question {
    fn new(identity: &Identity, attributes: &Attributes) -> Self {
        let Attributes {
            path,
            verb,
            namespace,
            group,
            resource,
            subresource,
            name,
        } = attributes;
        let fixed = [
            &identity.user,
            path,
            verb,
            namespace,
            group,
            resource,
            subresource,
            name,
        ];
        let parts = fixed.into_iter().chain(&identity.groups);
        let mut packed = Vec::with_capacity(parts.clone().map(|part| 4 + part.len()).sum());
        for part in parts {
            // A part longer than 4 GiB cannot arrive: requests are limited far below that.
            packed.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_le_bytes());
            packed.extend_from_slice(part.as_bytes());
        }
        Self(packed.into_boxed_slice())
    }
}

/// Decides with SubjectAccessReviews on the hub's API server.
pub struct SarAuthorizer {
    api: Api<SubjectAccessReview>,
    extra: ExtraDataTypes,
    reviews: Reviews<Question, Result<(), String>>,
    ttl: Duration,
}

/// Why a call is not allowed.
#[derive(Debug, thiserror::Error)]
pub enum Denied {
    #[error("access denied: {0}")]
    Denied(String),
    /// The API server could not be asked: the caller may retry.
    #[error("cannot authorize the call: {0}")]
    Unavailable(String),
}

impl SarAuthorizer {
    /// Reviews with `client`, at most `concurrency` at once; decisions are kept for `ttl`.
    pub fn new(
        client: kube::Client,
        extra: ExtraDataTypes,
        ttl: Duration,
        concurrency: usize,
        capacity: usize,
        metrics: SecurityMetrics,
    ) -> Self {
        Self {
            api: Api::all(client),
            extra,
            reviews: Reviews::new("SubjectAccessReview", capacity, concurrency, metrics),
            ttl,
        }
    }

    pub async fn authorize(&self, identity: &Identity, access: &Access<'_>) -> Result<(), Denied> {
        let attributes = attributes(access, &self.extra).map_err(Denied::Denied)?;
        self.decide(identity, attributes).await
    }

    /// Whether `identity` may `verb` the non-resource URL `path` (the admin endpoint's).
    pub async fn authorize_path(&self, identity: &Identity, verb: &str, path: &str) -> Result<(), Denied> {
        let attributes = Attributes {
            path: path.to_owned(),
            verb: verb.to_owned(),
            ..Default::default()
        };
        self.decide(identity, attributes).await
    }

    async fn decide(&self, identity: &Identity, attributes: Attributes) -> Result<(), Denied> {
        self.reviews
            .answer(Question::new(identity, &attributes), || async {
                let answer = self
                    .api
                    .create(&PostParams::default(), &review(identity, &attributes))
                    .await
                    .map_err(|e| format!("SubjectAccessReview for {attributes}: {e}"))?;
                let status = answer.status.unwrap_or_default();
                let decision = if status.allowed && !status.denied.unwrap_or(false) {
                    Ok(())
                } else {
                    Err(denial(identity, &attributes, &status))
                };
                Ok((decision, self.ttl))
            })
            .await
            .map_err(Denied::Unavailable)?
            .map_err(Denied::Denied)
    }
}

fn denial(identity: &Identity, attributes: &Attributes, status: &SubjectAccessReviewStatus) -> String {
    let mut why = format!(
        "user {:?} (groups {:?}) may not {attributes}",
        identity.user, identity.groups
    );
    if let Some(reason) = status.reason.as_deref().filter(|r| !r.is_empty()) {
        why.push_str(&format!(": {reason}"));
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(ty: &str, cluster: &str, data: &str) -> Result<Attributes, String> {
        let ty = EventType::parse(ty).unwrap();
        attributes(
            &Access::Publish {
                cluster,
                ty: &ty,
                data: Some(data.as_bytes()),
            },
            &ExtraDataTypes::new(),
        )
    }

    fn subscribe(data_type: &str, cluster: &str) -> Result<Attributes, String> {
        attributes(&Access::Subscribe { cluster, data_type }, &ExtraDataTypes::new())
    }

    fn attrs(verb: &str, group: &str, resource: &str, subresource: &str, name: &str) -> Attributes {
        Attributes {
            path: String::new(),
            verb: verb.into(),
            namespace: "cluster1".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_mapping_is_upstreams() {
        let works = "io.open-cluster-management.works.v1alpha1.manifestbundles";
        assert_eq!(
            publish(&format!("{works}.status.update_request"), "cluster1", "{}"),
            Ok(attrs(
                "update",
                "work.open-cluster-management.io",
                "manifestworks",
                "status",
                ""
            ))
        );
        assert_eq!(
            publish(&format!("{works}.spec.resync_request"), "cluster1", "{}"),
            Ok(attrs(
                "list",
                "work.open-cluster-management.io",
                "manifestworks",
                "",
                ""
            ))
        );
        assert_eq!(
            subscribe(works, "cluster1"),
            Ok(attrs(
                "watch",
                "work.open-cluster-management.io",
                "manifestworks",
                "",
                ""
            ))
        );
        let clusters = "cluster.open-cluster-management.io.v1.managedclusters";
        assert_eq!(
            publish(&format!("{clusters}.spec.create_request"), "cluster1", "{}"),
            Ok(attrs(
                "create",
                "cluster.open-cluster-management.io",
                "managedclusters",
                "",
                "cluster1"
            ))
        );
        assert_eq!(
            publish(&format!("{clusters}.status.update_request"), "cluster1", "{}"),
            Ok(attrs(
                "update",
                "cluster.open-cluster-management.io",
                "managedclusters",
                "status",
                "cluster1"
            ))
        );
        assert_eq!(
            subscribe("coordination.k8s.io.v1.leases", "cluster1"),
            Ok(attrs("watch", "coordination.k8s.io", "leases", "", ""))
        );
        assert_eq!(
            publish(
                "certificates.k8s.io.v1.certificatesigningrequests.spec.create_request",
                "cluster1",
                "{}"
            ),
            Ok(attrs(
                "create",
                "certificates.k8s.io",
                "certificatesigningrequests",
                "",
                ""
            )),
            "namespace = cluster even for cluster-scoped CSRs"
        );
        assert_eq!(
            publish("events.k8s.io.v1.events.spec.update_request", "cluster1", "{}"),
            Ok(attrs("update", "events.k8s.io", "events", "", ""))
        );
        for version in ["v1alpha1", "v1beta1"] {
            assert_eq!(
                publish(
                    &format!("addon.open-cluster-management.io.{version}.managedclusteraddons.status.update_request"),
                    "cluster1",
                    "{}"
                ),
                Ok(attrs(
                    "update",
                    "addon.open-cluster-management.io",
                    "managedclusteraddons",
                    "status",
                    ""
                ))
            );
        }
        assert_eq!(
            publish(&format!("{clusters}.spec.delete_request"), "cluster1", "{}").map(|a| a.verb),
            Ok("delete".to_owned())
        );
    }

    #[test]
    fn token_requests_are_serviceaccounts_token_with_their_own_verbs() {
        let tokens = "authentication.k8s.io.v1.tokenrequests";
        assert_eq!(
            subscribe(tokens, "cluster1"),
            Ok(attrs("subscribe", "", "serviceaccounts", "token", ""))
        );
        assert_eq!(
            publish(
                &format!("{tokens}.spec.create_request"),
                "cluster1",
                r#"{"metadata":{"name":"addon-agent","namespace":"cluster1"},"spec":{}}"#
            ),
            Ok(attrs("create", "", "serviceaccounts", "token", "addon-agent"))
        );
        assert!(publish(&format!("{tokens}.spec.create_request"), "cluster1", "not json").is_err());
        assert!(publish(&format!("{tokens}.spec.update_request"), "cluster1", "{}").is_err());
        assert!(publish(&format!("{tokens}.spec.resync_request"), "cluster1", "{}").is_err());
    }

    #[test]
    fn anything_else_is_denied_without_asking() {
        let works = "io.open-cluster-management.works.v1alpha1.manifestbundles";
        let err = publish(&format!("{works}.spec.resync_response"), "cluster1", "{}").unwrap_err();
        assert!(err.contains("resync_response"), "{err}");
        assert!(
            publish(&format!("{works}.spec."), "cluster1", "{}").is_err(),
            "empty action"
        );
        assert!(
            publish(&format!("{works}.status.update_request"), "", "{}").is_err(),
            "no cluster"
        );
        let err = subscribe("example.com.v1.widgets", "cluster1").unwrap_err();
        assert!(err.contains("unsupported event type"), "{err}");
        assert!(
            subscribe("io.open-cluster-management.works.v1.manifestbundles", "cluster1").is_err(),
            "another version"
        );
        assert!(subscribe("nodots", "cluster1").is_err());
    }

    #[test]
    fn data_types_beyond_ocms_are_authorized_as_the_resource_configured_for_them() {
        let extra = ExtraDataTypes::from([
            ("example.com.v1.widgets".to_owned(), "widgets.example.com".to_owned()),
            ("core.v1.configmaps".to_owned(), "configmaps".to_owned()),
        ]);
        let access = Access::Subscribe {
            cluster: "cluster1",
            data_type: "example.com.v1.widgets",
        };
        assert_eq!(
            attributes(&access, &extra),
            Ok(attrs("watch", "example.com", "widgets", "", ""))
        );
        let ty = EventType::parse("core.v1.configmaps.status.update_request").unwrap();
        let access = Access::Publish {
            cluster: "cluster1",
            ty: &ty,
            data: None,
        };
        assert_eq!(
            attributes(&access, &extra),
            Ok(attrs("update", "", "configmaps", "status", ""))
        );
    }

    #[test]
    fn the_review_leaves_empty_attributes_out_as_go_does() {
        let identity = Identity {
            user: "system:open-cluster-management:cluster1:agent".into(),
            groups: vec!["system:open-cluster-management:cluster1".into()],
        };
        let body = serde_json::to_value(review(&identity, &attrs("watch", "", "leases", "", ""))).unwrap();
        assert_eq!(body["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(body["kind"], "SubjectAccessReview");
        assert_eq!(
            body["spec"],
            serde_json::json!({
                "user": "system:open-cluster-management:cluster1:agent",
                "groups": ["system:open-cluster-management:cluster1"],
                "resourceAttributes": {"verb": "watch", "namespace": "cluster1", "resource": "leases"},
            })
        );
    }

    /// A kept answer is found only by the same question: parts never run into each other.
    #[test]
    fn questions_are_equal_only_when_every_part_is() {
        let who = |user: &str, groups: &[&str]| Identity {
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        };
        let watch = attrs("watch", "", "leases", "", "");
        let agent = who("agent", &["cluster1"]);
        assert!(Question::new(&agent, &watch) == Question::new(&who("agent", &["cluster1"]), &watch));
        let different = [
            Question::new(&who("agentcluster1", &[]), &watch),
            Question::new(&who("agent", &["cluster", "1"]), &watch),
            Question::new(&who("agent", &[]), &watch),
            Question::new(&agent, &attrs("watch", "leases", "", "", "")),
            Question::new(&agent, &attrs("get", "", "leases", "", "")),
        ];
        for (i, question) in different.iter().enumerate() {
            assert!(*question != Question::new(&agent, &watch), "case {i}");
        }
    }
}
