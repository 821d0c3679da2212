//! Conversions between the SDK types and the types generated from `wit/plugin.wit`. The guest
//! (wit-bindgen) and the host (wasmtime's bindgen) generate the same shapes in different crates;
//! this macro writes the conversions once for both.

/// Defines `to_wit_event`/`from_wit_event`, `to_wit_description`/`from_wit_description` and
/// `to_wit_error`/`from_wit_error` in the calling
/// module for the WIT `types` interface generated at `$t`.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_conversions {
    ($t:path) => {
        use $t as __wit_types;

        pub fn to_wit_time(t: $crate::Timestamp) -> __wit_types::Timestamp {
            __wit_types::Timestamp {
                seconds: t.timestamp(),
                nanos: t.timestamp_subsec_nanos(),
            }
        }

        pub fn from_wit_time(t: __wit_types::Timestamp) -> $crate::Timestamp {
            $crate::event::timestamp_from_parts(t.seconds, t.nanos)
        }

        pub fn to_wit_event(e: &$crate::CloudEvent) -> __wit_types::CloudEvent {
            use $crate::ExtensionValue as V;
            __wit_types::CloudEvent {
                id: e.id.clone(),
                source: e.source.clone(),
                spec_version: e.spec_version.clone(),
                type_: e.ty.clone(),
                data_content_type: e.data_content_type.clone(),
                data_schema: e.data_schema.clone(),
                subject: e.subject.clone(),
                time: e.time.map(to_wit_time),
                extensions: e
                    .extensions
                    .iter()
                    .map(|(name, value)| __wit_types::Extension {
                        name: name.clone(),
                        value: match value {
                            V::Boolean(b) => __wit_types::ExtensionValue::Boolean(*b),
                            V::Integer(i) => __wit_types::ExtensionValue::Integer(*i),
                            V::String(s) => __wit_types::ExtensionValue::String(s.clone()),
                            V::Bytes(b) => __wit_types::ExtensionValue::Bytes(b.clone()),
                            V::Uri(s) => __wit_types::ExtensionValue::Uri(s.clone()),
                            V::UriRef(s) => __wit_types::ExtensionValue::UriRef(s.clone()),
                            V::Timestamp(ts) => __wit_types::ExtensionValue::Timestamp(to_wit_time(*ts)),
                        },
                    })
                    .collect(),
                data: e.data.clone(),
            }
        }

        pub fn from_wit_event(e: __wit_types::CloudEvent) -> $crate::CloudEvent {
            use $crate::ExtensionValue as V;
            $crate::CloudEvent {
                id: e.id,
                source: e.source,
                spec_version: e.spec_version,
                ty: e.type_,
                data_content_type: e.data_content_type,
                data_schema: e.data_schema,
                subject: e.subject,
                time: e.time.map(from_wit_time),
                extensions: e
                    .extensions
                    .into_iter()
                    .map(|x| {
                        let value = match x.value {
                            __wit_types::ExtensionValue::Boolean(b) => V::Boolean(b),
                            __wit_types::ExtensionValue::Integer(i) => V::Integer(i),
                            __wit_types::ExtensionValue::String(s) => V::String(s),
                            __wit_types::ExtensionValue::Bytes(b) => V::Bytes(b),
                            __wit_types::ExtensionValue::Uri(s) => V::Uri(s),
                            __wit_types::ExtensionValue::UriRef(s) => V::UriRef(s),
                            __wit_types::ExtensionValue::Timestamp(ts) => V::Timestamp(from_wit_time(ts)),
                        };
                        (x.name, value)
                    })
                    .collect(),
                data: e.data,
            }
        }

        pub fn to_wit_description(d: $crate::Description) -> __wit_types::Description {
            __wit_types::Description {
                name: d.name,
                version: d.version,
                sdk_version: d.sdk_version,
                sources: d.sources,
                data_types: d.data_types,
                capabilities: d.capabilities,
            }
        }

        pub fn from_wit_description(d: __wit_types::Description) -> $crate::Description {
            $crate::Description {
                name: d.name,
                version: d.version,
                sdk_version: d.sdk_version,
                sources: d.sources,
                data_types: d.data_types,
                capabilities: d.capabilities,
            }
        }

        pub fn to_wit_host_event(e: $crate::HostEvent) -> __wit_types::HostEvent {
            use $crate::HostEvent as H;
            match e {
                H::Timer(name) => __wit_types::HostEvent::Timer(name),
                H::Notification {
                    database,
                    channel,
                    payload,
                } => __wit_types::HostEvent::Notification(__wit_types::Notification {
                    database,
                    channel,
                    payload,
                }),
                H::Listening {
                    database,
                    channel,
                    reconnected,
                } => __wit_types::HostEvent::Listening(__wit_types::Listening {
                    database,
                    channel,
                    reconnected,
                }),
                H::Kube {
                    resource,
                    change,
                    object,
                } => __wit_types::HostEvent::Kube(__wit_types::KubeEvent {
                    resource,
                    change: match change {
                        $crate::KubeChange::Applied => __wit_types::KubeChange::Applied,
                        $crate::KubeChange::Deleted => __wit_types::KubeChange::Deleted,
                    },
                    object,
                }),
            }
        }

        pub fn from_wit_host_event(e: __wit_types::HostEvent) -> $crate::HostEvent {
            use $crate::HostEvent as H;
            match e {
                __wit_types::HostEvent::Timer(name) => H::Timer(name),
                __wit_types::HostEvent::Notification(n) => H::Notification {
                    database: n.database,
                    channel: n.channel,
                    payload: n.payload,
                },
                __wit_types::HostEvent::Listening(l) => H::Listening {
                    database: l.database,
                    channel: l.channel,
                    reconnected: l.reconnected,
                },
                __wit_types::HostEvent::Kube(k) => H::Kube {
                    resource: k.resource,
                    change: match k.change {
                        __wit_types::KubeChange::Applied => $crate::KubeChange::Applied,
                        __wit_types::KubeChange::Deleted => $crate::KubeChange::Deleted,
                    },
                    object: k.object,
                },
            }
        }

        pub fn to_wit_error(e: $crate::SourceError) -> __wit_types::PluginError {
            use $crate::SourceError as E;
            match e {
                E::Status(s) => {
                    let d = s.details.clone().unwrap_or_default();
                    __wit_types::PluginError::Status(__wit_types::Status {
                        status: s.status.clone(),
                        message: s.message.clone(),
                        reason: s.reason.clone(),
                        code: s.code,
                        details_name: d.name,
                        details_group: d.group,
                        details_kind: d.kind,
                        details_uid: d.uid,
                    })
                }
                E::NotFound(m) => __wit_types::PluginError::NotFound(m),
                E::AlreadyExists(m) => __wit_types::PluginError::AlreadyExists(m),
                E::Conflict(m) => __wit_types::PluginError::Conflict(m),
                E::Invalid(m) => __wit_types::PluginError::Invalid(m),
                E::Internal(m) => __wit_types::PluginError::Internal(m),
            }
        }

        pub fn from_wit_error(e: __wit_types::PluginError) -> $crate::SourceError {
            use $crate::SourceError as E;
            match e {
                __wit_types::PluginError::Status(s) => {
                    let has_details = [&s.details_name, &s.details_group, &s.details_kind, &s.details_uid]
                        .iter()
                        .any(|v| !v.is_empty());
                    E::from($crate::Status {
                        status: s.status,
                        message: s.message,
                        reason: s.reason,
                        code: s.code,
                        details: has_details.then(|| $crate::StatusDetails {
                            name: s.details_name,
                            group: s.details_group,
                            kind: s.details_kind,
                            uid: s.details_uid,
                        }),
                    })
                }
                __wit_types::PluginError::NotFound(m) => E::NotFound(m),
                __wit_types::PluginError::AlreadyExists(m) => E::AlreadyExists(m),
                __wit_types::PluginError::Conflict(m) => E::Conflict(m),
                __wit_types::PluginError::Invalid(m) => E::Invalid(m),
                __wit_types::PluginError::Internal(m) => E::Internal(m),
            }
        }
    };
}

/// Defines the conversions of the WIT `pg` interface generated at `$p`, next to
/// [`__wit_conversions!`] (whose timestamp conversions they use).
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_pg_conversions {
    ($p:path) => {
        use $p as __wit_pg;

        pub fn to_wit_value(v: &$crate::PgValue) -> __wit_pg::Value {
            use $crate::PgValue as V;
            match v {
                V::Null => __wit_pg::Value::Null,
                V::Bool(b) => __wit_pg::Value::Boolean(*b),
                V::Int4(i) => __wit_pg::Value::Int4(*i),
                V::Int8(i) => __wit_pg::Value::Int8(*i),
                V::Float8(f) => __wit_pg::Value::Float8(*f),
                V::Text(s) => __wit_pg::Value::Text(s.clone()),
                V::Json(s) => __wit_pg::Value::Json(s.clone()),
                V::Timestamp(t) => __wit_pg::Value::Timestamp(to_wit_time(*t)),
                V::Bytea(b) => __wit_pg::Value::Bytea(b.clone()),
            }
        }

        pub fn from_wit_value(v: __wit_pg::Value) -> $crate::PgValue {
            use $crate::PgValue as V;
            match v {
                __wit_pg::Value::Null => V::Null,
                __wit_pg::Value::Boolean(b) => V::Bool(b),
                __wit_pg::Value::Int4(i) => V::Int4(i),
                __wit_pg::Value::Int8(i) => V::Int8(i),
                __wit_pg::Value::Float8(f) => V::Float8(f),
                __wit_pg::Value::Text(s) => V::Text(s),
                __wit_pg::Value::Json(s) => V::Json(s),
                __wit_pg::Value::Timestamp(t) => V::Timestamp(from_wit_time(t)),
                __wit_pg::Value::Bytea(b) => V::Bytea(b),
            }
        }

        pub fn to_wit_rows(r: $crate::PgRows) -> __wit_pg::Rows {
            __wit_pg::Rows {
                columns: r.columns,
                rows: r
                    .rows
                    .iter()
                    .map(|row| row.iter().map(to_wit_value).collect())
                    .collect(),
            }
        }

        pub fn from_wit_rows(r: __wit_pg::Rows) -> $crate::PgRows {
            $crate::PgRows {
                columns: r.columns,
                rows: r
                    .rows
                    .into_iter()
                    .map(|row| row.into_iter().map(from_wit_value).collect())
                    .collect(),
            }
        }

        pub fn to_wit_pg_error(e: $crate::PgError) -> __wit_pg::Error {
            __wit_pg::Error {
                code: e.code,
                message: e.message,
            }
        }

        pub fn from_wit_pg_error(e: __wit_pg::Error) -> $crate::PgError {
            $crate::PgError {
                code: e.code,
                message: e.message,
            }
        }
    };
}
