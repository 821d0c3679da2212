//! Conversions between the SDK types and the types generated from `wit/plugin.wit`. The guest
//! (wit-bindgen) and the host (wasmtime's bindgen) generate the same shapes in different crates;
//! this macro writes the conversions once for both.

/// Defines, in the calling module, the conversions between the SDK's types and the WIT types
/// generated at the given module paths: `to_wit_*`/`from_wit_*` for timestamps, events, errors,
/// descriptions, list options, host events, pg values/rows/lock keys and kube resources/selectors.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_conversions {
    (types = $t:path, pg = $p:path, kube = $k:path, plugin = $g:path) => {
        use $g as __wit_plugin;
        use $k as __wit_kube;
        use $p as __wit_pg;
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
            into_wit_event(e.clone())
        }

        /// The event in the contract's types, its strings and data moved, not copied.
        pub fn into_wit_event(e: $crate::CloudEvent) -> __wit_types::CloudEvent {
            use $crate::ExtensionValue as V;
            __wit_types::CloudEvent {
                id: e.id,
                source: e.source,
                spec_version: e.spec_version,
                type_: e.ty,
                data_content_type: e.data_content_type,
                data_schema: e.data_schema,
                subject: e.subject,
                time: e.time.map(to_wit_time),
                extensions: e
                    .extensions
                    .into_iter()
                    .map(|(name, value)| __wit_types::Extension {
                        name,
                        value: match value {
                            V::Boolean(b) => __wit_types::ExtensionValue::Boolean(b),
                            V::Integer(i) => __wit_types::ExtensionValue::Integer(i),
                            V::String(s) => __wit_types::ExtensionValue::String(s),
                            V::Bytes(b) => __wit_types::ExtensionValue::Bytes(b),
                            V::Uri(s) => __wit_types::ExtensionValue::Uri(s),
                            V::UriRef(s) => __wit_types::ExtensionValue::UriRef(s),
                            V::Timestamp(ts) => __wit_types::ExtensionValue::Timestamp(to_wit_time(ts)),
                        },
                    })
                    .collect(),
                data: e.data,
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

        pub fn to_wit_identity(i: $crate::Identity) -> __wit_types::Identity {
            __wit_types::Identity {
                user: i.user,
                groups: i.groups,
            }
        }

        pub fn from_wit_identity(i: __wit_types::Identity) -> $crate::Identity {
            $crate::Identity {
                user: i.user,
                groups: i.groups,
            }
        }

        pub fn to_wit_error(e: $crate::Error) -> __wit_types::Error {
            use $crate::Error as E;
            match e {
                E::Status(s) => {
                    let d = s.details.clone().unwrap_or_default();
                    __wit_types::Error::Status(__wit_types::Status {
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
                E::NotFound(m) => __wit_types::Error::NotFound(m),
                E::AlreadyExists(m) => __wit_types::Error::AlreadyExists(m),
                E::Conflict(m) => __wit_types::Error::Conflict(m),
                E::Invalid(m) => __wit_types::Error::Invalid(m),
                E::Denied(m) => __wit_types::Error::Denied(m),
                E::Unavailable(m) => __wit_types::Error::Unavailable(m),
                E::Database(d) => __wit_types::Error::Database(__wit_types::DatabaseError {
                    code: d.code,
                    message: d.message,
                }),
                E::Internal(m) => __wit_types::Error::Internal(m),
            }
        }

        pub fn from_wit_error(e: __wit_types::Error) -> $crate::Error {
            use $crate::Error as E;
            match e {
                __wit_types::Error::Status(s) => {
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
                __wit_types::Error::NotFound(m) => E::NotFound(m),
                __wit_types::Error::AlreadyExists(m) => E::AlreadyExists(m),
                __wit_types::Error::Conflict(m) => E::Conflict(m),
                __wit_types::Error::Invalid(m) => E::Invalid(m),
                __wit_types::Error::Denied(m) => E::Denied(m),
                __wit_types::Error::Unavailable(m) => E::Unavailable(m),
                __wit_types::Error::Database(d) => E::Database($crate::DatabaseError {
                    code: d.code,
                    message: d.message,
                }),
                __wit_types::Error::Internal(m) => E::Internal(m),
            }
        }

        /// The WIT description has no capabilities: a component's are read from its imports.
        pub fn to_wit_description(d: $crate::Description) -> __wit_plugin::Description {
            __wit_plugin::Description {
                name: d.name,
                version: d.version,
                sdk_version: d.sdk_version,
                sources: d.sources,
                data_types: d.data_types,
                concurrent_notifications: d.concurrent_notifications,
                metrics: d
                    .metrics
                    .into_iter()
                    .map(|m| __wit_plugin::MetricDescription {
                        name: m.name,
                        kind: match m.kind {
                            $crate::metric::MetricKind::Counter => __wit_plugin::MetricKind::Counter,
                            $crate::metric::MetricKind::Gauge => __wit_plugin::MetricKind::Gauge,
                        },
                        help: m.help,
                        labels: m.labels,
                    })
                    .collect(),
            }
        }

        pub fn from_wit_description(d: __wit_plugin::Description) -> $crate::Description {
            $crate::Description {
                name: d.name,
                version: d.version,
                sdk_version: d.sdk_version,
                sources: d.sources,
                data_types: d.data_types,
                capabilities: vec![],
                concurrent_notifications: d.concurrent_notifications,
                metrics: d
                    .metrics
                    .into_iter()
                    .map(|m| $crate::metric::MetricDescription {
                        name: m.name,
                        kind: match m.kind {
                            __wit_plugin::MetricKind::Counter => $crate::metric::MetricKind::Counter,
                            __wit_plugin::MetricKind::Gauge => $crate::metric::MetricKind::Gauge,
                        },
                        help: m.help,
                        labels: m.labels,
                    })
                    .collect(),
            }
        }

        pub fn to_wit_list_options(o: $crate::ListOptions) -> __wit_plugin::ListOptions {
            __wit_plugin::ListOptions {
                cluster_name: o.cluster_name,
                data_type: o.data_type,
            }
        }

        pub fn from_wit_list_options(o: __wit_plugin::ListOptions) -> $crate::ListOptions {
            $crate::ListOptions {
                cluster_name: o.cluster_name,
                data_type: o.data_type,
            }
        }

        pub fn to_wit_host_event(e: $crate::HostEvent) -> __wit_plugin::HostEvent {
            use $crate::HostEvent as H;
            match e {
                H::Timer(name) => __wit_plugin::HostEvent::Timer(name),
                H::Notification(n) => __wit_plugin::HostEvent::Notification(__wit_pg::Notification {
                    database: n.database,
                    channel: n.channel,
                    payload: n.payload,
                }),
                H::Listening(l) => __wit_plugin::HostEvent::Listening(__wit_pg::Listening {
                    database: l.database,
                    channel: l.channel,
                    reconnected: l.reconnected,
                }),
                H::Watch(w) => __wit_plugin::HostEvent::Watch(__wit_kube::WatchEvent {
                    resource: w.resource,
                    change: match w.change {
                        $crate::kube::Change::Applied => __wit_kube::Change::Applied,
                        $crate::kube::Change::Deleted => __wit_kube::Change::Deleted,
                    },
                    object: w.object,
                }),
            }
        }

        pub fn from_wit_host_event(e: __wit_plugin::HostEvent) -> $crate::HostEvent {
            use $crate::HostEvent as H;
            match e {
                __wit_plugin::HostEvent::Timer(name) => H::Timer(name),
                __wit_plugin::HostEvent::Notification(n) => H::Notification($crate::pg::Notification {
                    database: n.database,
                    channel: n.channel,
                    payload: n.payload,
                }),
                __wit_plugin::HostEvent::Listening(l) => H::Listening($crate::pg::Listening {
                    database: l.database,
                    channel: l.channel,
                    reconnected: l.reconnected,
                }),
                __wit_plugin::HostEvent::Watch(w) => H::Watch($crate::kube::WatchEvent {
                    resource: w.resource,
                    change: match w.change {
                        __wit_kube::Change::Applied => $crate::kube::Change::Applied,
                        __wit_kube::Change::Deleted => $crate::kube::Change::Deleted,
                    },
                    object: w.object,
                }),
            }
        }

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

        pub fn to_wit_statement(s: &$crate::pg::Statement) -> __wit_pg::Statement {
            __wit_pg::Statement {
                sql: s.sql.clone(),
                params: s.params.iter().map(to_wit_value).collect(),
            }
        }

        pub fn from_wit_statement(s: __wit_pg::Statement) -> $crate::pg::Statement {
            $crate::pg::Statement {
                sql: s.sql,
                params: s.params.into_iter().map(from_wit_value).collect(),
            }
        }

        pub fn to_wit_lock_key(k: $crate::pg::LockKey) -> __wit_pg::LockKey {
            match k {
                $crate::pg::LockKey::Pair(a, b) => __wit_pg::LockKey::Pair((a, b)),
                $crate::pg::LockKey::Big(k) => __wit_pg::LockKey::Big(k),
            }
        }

        pub fn from_wit_lock_key(k: __wit_pg::LockKey) -> $crate::pg::LockKey {
            match k {
                __wit_pg::LockKey::Pair((a, b)) => $crate::pg::LockKey::Pair(a, b),
                __wit_pg::LockKey::Big(k) => $crate::pg::LockKey::Big(k),
            }
        }

        pub fn to_wit_api_resource(r: &$crate::kube::ApiResource) -> __wit_kube::ApiResource {
            __wit_kube::ApiResource {
                group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
                plural: r.plural.clone(),
            }
        }

        pub fn from_wit_api_resource(r: __wit_kube::ApiResource) -> $crate::kube::ApiResource {
            $crate::kube::ApiResource {
                group: r.group,
                version: r.version,
                kind: r.kind,
                plural: r.plural,
            }
        }

        pub fn to_wit_selector(s: &$crate::kube::Selector) -> __wit_kube::Selector {
            __wit_kube::Selector {
                labels: s.labels.clone(),
                fields: s.fields.clone(),
            }
        }

        pub fn from_wit_selector(s: __wit_kube::Selector) -> $crate::kube::Selector {
            $crate::kube::Selector {
                labels: s.labels,
                fields: s.fields,
            }
        }

        pub fn to_wit_watch_options(o: $crate::kube::WatchOptions) -> __wit_kube::WatchOptions {
            __wit_kube::WatchOptions {
                skip_status_only: o.skip_status_only,
            }
        }

        pub fn from_wit_watch_options(o: __wit_kube::WatchOptions) -> $crate::kube::WatchOptions {
            $crate::kube::WatchOptions {
                skip_status_only: o.skip_status_only,
            }
        }
    };
}
