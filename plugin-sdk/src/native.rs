//! The native plugin ABI: a versioned C ABI for plugins built as `cdylib`s and loaded with
//! `libloading`. `export_plugin!` generates the plugin side; the host implements the other.
//!
//! - One entry symbol, [`ENTRY_SYMBOL`], returning a static [`PluginApi`] whose `abi_version` the
//!   host checks before anything else (the handshake).
//! - Messages cross as bytes: [`PluginRequest`]/[`PluginResponse`] and
//!   [`HostRequest`]/[`HostResponse`], encoded with postcard. No Rust types cross the boundary.
//!   Byte payloads are `serde_bytes`, so postcard copies them as one block.
//! - A [`Buffer`] is freed by the side that allocated it: the plugin's with `PluginApi::free`, the
//!   host's with `HostApi::free`. Inputs are borrowed for the duration of a call.
//! - Every entry point catches panics and answers with an error instead.

use std::ffi::{c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::{Deserialize, Serialize};

use crate::calls::{HostCalls, Level};
use crate::host::Host;
use crate::kube::{KubeReply, KubeRequest};
use crate::metric::MetricKind;
use crate::pg::{PgReply, PgRequest};
use crate::plugin::{Description, HostEvent, ListOptions, Plugin, Request, parse_config};
use crate::{CloudEvent, Error, Identity};

/// The version of this ABI; the host refuses libraries with another. It moves whenever the table
/// below or a message changes (`tests::the_abi_version_moves_with_its_messages` holds the
/// messages' fingerprint).
pub const ABI_VERSION: u32 = 5;
/// The contract version this ABI carries (`SDK_VERSION`'s major.minor).
pub const ABI_CONTRACT: &str = "0.6";
/// The symbol every native plugin exports.
pub const ENTRY_SYMBOL: &[u8] = b"conductor_plugin_v1\0";
/// `SDK_VERSION` as a C string, for [`PluginApi::sdk_version`].
pub const SDK_VERSION_C: &str = concat!(env!("CONDUCTOR_CONTRACT_VERSION"), "\0");

/// Bytes owned by the side that produced them.
#[repr(C)]
pub struct Buffer {
    pub ptr: *mut u8,
    pub len: usize,
    pub cap: usize,
}

impl Buffer {
    pub fn from_vec(v: Vec<u8>) -> Self {
        let mut v = std::mem::ManuallyDrop::new(v);
        Self {
            ptr: v.as_mut_ptr(),
            len: v.len(),
            cap: v.capacity(),
        }
    }

    /// Takes back a buffer this side allocated.
    ///
    /// # Safety
    /// `self` must come from [`Buffer::from_vec`] in this same library, and be used once.
    pub unsafe fn into_vec(self) -> Vec<u8> {
        // SAFETY: the caller guarantees the buffer came from `from_vec` here.
        unsafe { Vec::from_raw_parts(self.ptr, self.len, self.cap) }
    }

    /// The bytes, borrowed.
    ///
    /// # Safety
    /// `self` must be a live buffer from either side.
    pub unsafe fn as_slice(&self) -> &[u8] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the caller guarantees the buffer is live.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// What the host gives a plugin instance: its capabilities behind one call.
#[repr(C)]
pub struct HostApi {
    pub abi_version: u32,
    pub ctx: *const c_void,
    /// Answers an encoded [`HostRequest`] with an encoded [`HostResponse`].
    pub call: unsafe extern "C" fn(ctx: *const c_void, request: *const u8, len: usize) -> Buffer,
    pub free: unsafe extern "C" fn(Buffer),
}

/// What a plugin library gives the host.
#[repr(C)]
pub struct PluginApi {
    pub abi_version: u32,
    /// The contract version, NUL-terminated.
    pub sdk_version: *const c_char,
    /// An encoded [`Description`].
    pub describe: unsafe extern "C" fn() -> Buffer,
    /// Checks a configuration (JSON) without a host: an empty buffer if it is good, or an encoded
    /// [`Error`].
    pub check_config: unsafe extern "C" fn(config: *const u8, len: usize) -> Buffer,
    /// Creates an instance with the configuration (JSON); writes it to `instance` and returns an
    /// empty buffer, or returns an encoded [`Error`].
    pub create:
        unsafe extern "C" fn(host: *const HostApi, config: *const u8, len: usize, instance: *mut *mut c_void) -> Buffer,
    /// Answers an encoded [`PluginRequest`] with an encoded [`PluginResponse`].
    pub call: unsafe extern "C" fn(instance: *mut c_void, request: *const u8, len: usize) -> Buffer,
    pub destroy: unsafe extern "C" fn(instance: *mut c_void),
    pub free: unsafe extern "C" fn(Buffer),
}

// SAFETY: the API is a table of functions and a pointer to a static string.
unsafe impl Sync for PluginApi {}

/// Host → plugin calls. (Built once per call and moved, never stored: the size difference
/// between the variants costs nothing.)
#[derive(Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum PluginRequest {
    Start,
    List(ListOptions),
    Handle(Identity, CloudEvent),
    /// Two or more requests that waited together ([`Plugin::handle_batch`]).
    HandleBatch(Vec<Request>),
    OnEvents(Vec<HostEvent>),
}

/// Plugin → host answers.
pub type PluginResponse = Result<PluginReply, Error>;

#[derive(Debug, Serialize, Deserialize)]
pub enum PluginReply {
    Listed(Vec<CloudEvent>),
    Done,
    /// One result per request of a [`PluginRequest::HandleBatch`], in its order.
    Handled(Vec<Result<(), Error>>),
}

/// Plugin → host calls.
#[derive(Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum HostRequest {
    Emit(CloudEvent),
    Log(Level, String),
    SetTimer(String, u64, bool),
    CancelTimer(String),
    KvGet(String),
    KvSet(String, #[serde(with = "serde_bytes")] Vec<u8>),
    KvDelete(String),
    Pg(PgRequest),
    Kube(KubeRequest),
    Metric(MetricKind, String, Vec<String>, f64),
    Blob(String),
}

/// Host → plugin answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum HostResponse {
    Emitted(Result<u32, Error>),
    Value(#[serde(with = "serde_bytes")] Option<Vec<u8>>),
    Deleted(bool),
    Pg(Result<PgReply, Error>),
    Kube(Result<KubeReply, Error>),
    Done,
    /// A call that returns nothing else was refused (a limit, an undeclared metric).
    Refused(Error),
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// Encodes an ABI message.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_allocvec(value).unwrap_or_default()
}

/// Decodes an ABI message.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("malformed ABI message: {e}"))
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}

/// The host as a native plugin reaches it.
struct NativeHost(*const HostApi);

// SAFETY: the host keeps its `HostApi` alive and thread-safe for the instance's lifetime.
unsafe impl Send for NativeHost {}
// SAFETY: as for `Send`: the table and its context are the host's, shared safely.
unsafe impl Sync for NativeHost {}

impl NativeHost {
    fn call(&self, request: &HostRequest) -> HostResponse {
        let bytes = encode(request);
        // SAFETY: the host guarantees `HostApi` outlives the instance; the buffer it returns is
        // read, then handed back to its `free`.
        unsafe {
            let api = &*self.0;
            let out = (api.call)(api.ctx, bytes.as_ptr(), bytes.len());
            let response = decode(out.as_slice()).unwrap_or(HostResponse::Done);
            (api.free)(out);
            response
        }
    }
}

impl HostCalls for NativeHost {
    fn emit(&self, event: &CloudEvent) -> Result<u32, Error> {
        match self.call(&HostRequest::Emit(event.clone())) {
            HostResponse::Emitted(r) => r,
            _ => Err(Error::Internal("the host gave no answer to emit".to_owned())),
        }
    }
    fn log(&self, level: Level, message: &str) {
        self.call(&HostRequest::Log(level, message.to_owned()));
    }
    fn set_timer(&self, name: &str, after_ms: u64, repeat: bool) -> Result<(), Error> {
        done(
            self.call(&HostRequest::SetTimer(name.to_owned(), after_ms, repeat)),
            "set_timer",
        )
    }
    fn cancel_timer(&self, name: &str) {
        self.call(&HostRequest::CancelTimer(name.to_owned()));
    }
    fn kv_get(&self, key: &str) -> Option<Vec<u8>> {
        match self.call(&HostRequest::KvGet(key.to_owned())) {
            HostResponse::Value(v) => v,
            _ => None,
        }
    }
    fn kv_set(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        done(self.call(&HostRequest::KvSet(key.to_owned(), value.to_vec())), "kv_set")
    }
    fn kv_delete(&self, key: &str) -> bool {
        matches!(
            self.call(&HostRequest::KvDelete(key.to_owned())),
            HostResponse::Deleted(true)
        )
    }
    fn pg(&self, request: PgRequest) -> Result<PgReply, Error> {
        match self.call(&HostRequest::Pg(request)) {
            HostResponse::Pg(r) => r,
            _ => Err(Error::Internal("the host gave no answer to a pg call".to_owned())),
        }
    }
    fn kube(&self, request: KubeRequest) -> Result<KubeReply, Error> {
        match self.call(&HostRequest::Kube(request)) {
            HostResponse::Kube(r) => r,
            _ => Err(Error::Internal("the host gave no answer to a kube call".to_owned())),
        }
    }
    fn metric(&self, kind: MetricKind, name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
        let labels = labels.iter().map(|l| (*l).to_owned()).collect();
        done(
            self.call(&HostRequest::Metric(kind, name.to_owned(), labels, value)),
            "metric",
        )
    }
    fn blob(&self, name: &str) -> Result<Vec<u8>, Error> {
        match self.call(&HostRequest::Blob(name.to_owned())) {
            HostResponse::Blob(contents) => Ok(contents),
            HostResponse::Refused(e) => Err(e),
            _ => Err(Error::Internal("the host gave no answer to a blob read".to_owned())),
        }
    }
}

/// The answer of a call that returns nothing: done, or refused with the host's error.
fn done(response: HostResponse, call: &str) -> Result<(), Error> {
    match response {
        HostResponse::Done => Ok(()),
        HostResponse::Refused(e) => Err(e),
        _ => Err(Error::Internal(format!("the host gave no answer to {call}"))),
    }
}

struct Instance<P> {
    plugin: P,
    host: Host,
}

/// The plugin side of the ABI for `P`; `export_plugin!` returns it from the entry symbol.
pub fn plugin_api<P: Plugin>() -> &'static PluginApi {
    unsafe extern "C" fn describe<P: Plugin>() -> Buffer {
        // The host takes the contract version from `sdk_version` of the table, not from here.
        let description = catch_unwind(P::describe).unwrap_or_else(|_| Description::new("<describe panicked>", ""));
        Buffer::from_vec(encode(&description))
    }

    unsafe extern "C" fn check_config<P: Plugin>(config: *const u8, len: usize) -> Buffer {
        // SAFETY: the host passes a live config buffer.
        let config = unsafe { std::slice::from_raw_parts(config, len) };
        let checked = catch_unwind(AssertUnwindSafe(|| {
            let json = std::str::from_utf8(config).map_err(|e| Error::Invalid(format!("config: {e}")))?;
            P::check(&parse_config::<P::Config>(json)?)
        }))
        .unwrap_or_else(|p| {
            Err(Error::Internal(format!(
                "plugin panicked in check: {}",
                panic_message(p)
            )))
        });
        match checked {
            Ok(()) => Buffer::from_vec(Vec::new()),
            Err(e) => Buffer::from_vec(encode(&e)),
        }
    }

    unsafe extern "C" fn create<P: Plugin>(
        host: *const HostApi,
        config: *const u8,
        len: usize,
        instance: *mut *mut c_void,
    ) -> Buffer {
        // SAFETY: the host passes a live config buffer and a place for the instance.
        let config = unsafe { std::slice::from_raw_parts(config, len) };
        let made = catch_unwind(AssertUnwindSafe(|| {
            let json = std::str::from_utf8(config).map_err(|e| Error::Invalid(format!("config: {e}")))?;
            let config = parse_config::<P::Config>(json)?;
            let host = Host::new(Box::new(NativeHost(host)));
            let plugin = P::init(&host, config)?;
            Ok::<_, Error>(Box::new(Instance { plugin, host }))
        }))
        .unwrap_or_else(|p| {
            Err(Error::Internal(format!(
                "plugin panicked in init: {}",
                panic_message(p)
            )))
        });
        match made {
            Ok(boxed) => {
                // SAFETY: the host passes a writable pointer.
                unsafe { *instance = Box::into_raw(boxed).cast() };
                Buffer::from_vec(Vec::new())
            }
            Err(e) => Buffer::from_vec(encode(&e)),
        }
    }

    unsafe extern "C" fn call<P: Plugin>(instance: *mut c_void, request: *const u8, len: usize) -> Buffer {
        // SAFETY: `instance` came from `create` and calls on it never overlap (the host's pool).
        let instance = unsafe { &mut *instance.cast::<Instance<P>>() };
        // SAFETY: the host passes a request buffer live for the call.
        let request = unsafe { std::slice::from_raw_parts(request, len) };
        let response: PluginResponse = catch_unwind(AssertUnwindSafe(|| {
            let Instance { plugin, host } = instance;
            match decode::<PluginRequest>(request).map_err(Error::Invalid)? {
                PluginRequest::Start => plugin.start(host).map(|()| PluginReply::Done),
                PluginRequest::List(options) => plugin.list(host, options).map(PluginReply::Listed),
                PluginRequest::Handle(identity, event) => {
                    plugin.handle(host, identity, event).map(|()| PluginReply::Done)
                }
                PluginRequest::HandleBatch(requests) => Ok(PluginReply::Handled(plugin.handle_batch(host, requests))),
                PluginRequest::OnEvents(events) => plugin.on_events(host, events).map(|()| PluginReply::Done),
            }
        }))
        .unwrap_or_else(|p| Err(Error::Internal(format!("plugin panicked: {}", panic_message(p)))));
        Buffer::from_vec(encode(&response))
    }

    unsafe extern "C" fn destroy<P: Plugin>(instance: *mut c_void) {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `instance` came from `create` and is destroyed once.
            drop(unsafe { Box::from_raw(instance.cast::<Instance<P>>()) })
        }));
    }

    unsafe extern "C" fn free(buffer: Buffer) {
        // SAFETY: the buffer was allocated by this library.
        drop(unsafe { buffer.into_vec() });
    }

    struct Api<P>(std::marker::PhantomData<P>);
    impl<P: Plugin> Api<P> {
        const API: PluginApi = PluginApi {
            abi_version: ABI_VERSION,
            sdk_version: SDK_VERSION_C.as_ptr().cast(),
            describe: describe::<P>,
            check_config: check_config::<P>,
            create: create::<P>,
            call: call::<P>,
            destroy: destroy::<P>,
            free,
        };
    }
    &Api::<P>::API
}

#[cfg(test)]
mod tests {
    //! One source of truth for the contract version (the WIT package), and an ABI version that
    //! moves whenever the native ABI's messages or tables change: every message, with every
    //! variant of every enum in it, is encoded and fingerprinted. A new variant fails to compile
    //! in the `match`es below until it has a sample; a new or changed field moves the fingerprint.

    use super::*;
    use crate::kube::{ApiResource, Change, KubeReply, KubeRequest, Selector, WatchEvent};
    use crate::pg::{Listening, LockKey, Notification, PgReply, PgRequest};
    use crate::{Capability, DatabaseError, ExtensionValue, PgRows, PgValue, SDK_VERSION, Status, StatusDetails};

    /// The fingerprint of the ABI messages recorded for each ABI version.
    const FINGERPRINTS: &[(u32, u64)] = &[
        (2, 0x0103_d9f0_5cea_cba7),
        (3, 0x6852_9242_ed46_41a8),
        (4, 0x6cb1_c2aa_eba2_ba58),
        (5, 0x7f08_5e30_fc9d_3e8c),
    ];

    fn fnv1a64(bytes: &[u8], mut hash: u64) -> u64 {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash
    }

    fn time() -> crate::Timestamp {
        crate::event::timestamp_from_parts(1_750_000_000, 5)
    }

    fn extension_values() -> Vec<ExtensionValue> {
        let all = vec![
            ExtensionValue::Boolean(true),
            ExtensionValue::Integer(7),
            ExtensionValue::String("s".into()),
            ExtensionValue::Bytes(vec![1, 2]),
            ExtensionValue::Uri("u".into()),
            ExtensionValue::UriRef("r".into()),
            ExtensionValue::Timestamp(time()),
        ];
        for v in &all {
            match v {
                ExtensionValue::Boolean(_)
                | ExtensionValue::Integer(_)
                | ExtensionValue::String(_)
                | ExtensionValue::Bytes(_)
                | ExtensionValue::Uri(_)
                | ExtensionValue::UriRef(_)
                | ExtensionValue::Timestamp(_) => {}
            }
        }
        all
    }

    fn event() -> CloudEvent {
        CloudEvent {
            id: "id".into(),
            source: "src".into(),
            spec_version: "1.0".into(),
            ty: "a.v1.b.spec.create_request".into(),
            data_content_type: Some("application/json".into()),
            data_schema: Some("schema".into()),
            subject: Some("subject".into()),
            time: Some(time()),
            extensions: extension_values()
                .into_iter()
                .enumerate()
                .map(|(i, v)| (format!("x{i}"), v))
                .collect(),
            data: Some(b"{}".to_vec()),
        }
    }

    fn errors() -> Vec<Error> {
        let all = vec![
            Error::Status(Box::new(Status {
                status: "Failure".into(),
                message: "m".into(),
                reason: "Conflict".into(),
                details: Some(StatusDetails {
                    name: "n".into(),
                    group: "g".into(),
                    kind: "k".into(),
                    uid: "u".into(),
                }),
                code: 409,
            })),
            Error::NotFound("a".into()),
            Error::AlreadyExists("b".into()),
            Error::Conflict("c".into()),
            Error::Invalid("d".into()),
            Error::Denied("e".into()),
            Error::Unavailable("f".into()),
            Error::Database(DatabaseError {
                code: Some("42P01".into()),
                message: "g".into(),
            }),
            Error::Internal("h".into()),
        ];
        for e in &all {
            match e {
                Error::Status(_)
                | Error::NotFound(_)
                | Error::AlreadyExists(_)
                | Error::Conflict(_)
                | Error::Invalid(_)
                | Error::Denied(_)
                | Error::Unavailable(_)
                | Error::Database(_)
                | Error::Internal(_) => {}
            }
        }
        all
    }

    fn pg_values() -> Vec<PgValue> {
        let all = vec![
            PgValue::Null,
            PgValue::Bool(true),
            PgValue::Int4(4),
            PgValue::Int8(8),
            PgValue::Float8(0.5),
            PgValue::Text("t".into()),
            PgValue::Json("{}".into()),
            PgValue::Timestamp(time()),
            PgValue::Bytea(vec![0]),
        ];
        for v in &all {
            match v {
                PgValue::Null
                | PgValue::Bool(_)
                | PgValue::Int4(_)
                | PgValue::Int8(_)
                | PgValue::Float8(_)
                | PgValue::Text(_)
                | PgValue::Json(_)
                | PgValue::Timestamp(_)
                | PgValue::Bytea(_) => {}
            }
        }
        all
    }

    fn pg_requests() -> Vec<PgRequest> {
        let all = vec![
            PgRequest::Query {
                database: "d".into(),
                transaction: Some(1),
                sql: "q".into(),
                params: pg_values(),
            },
            PgRequest::Execute {
                database: "d".into(),
                transaction: None,
                sql: "e".into(),
                params: vec![],
            },
            PgRequest::Begin { database: "d".into() },
            PgRequest::Commit { transaction: 1 },
            PgRequest::Rollback { transaction: 2 },
            PgRequest::AdvisoryLock {
                transaction: 1,
                key: LockKey::Pair(1, 2),
                wait: true,
            },
            PgRequest::AdvisoryLock {
                transaction: 1,
                key: LockKey::Big(3),
                wait: false,
            },
            PgRequest::Listen {
                database: "d".into(),
                channel: "c".into(),
            },
        ];
        for r in &all {
            match r {
                PgRequest::Query { .. }
                | PgRequest::Execute { .. }
                | PgRequest::Begin { .. }
                | PgRequest::Commit { .. }
                | PgRequest::Rollback { .. }
                | PgRequest::AdvisoryLock {
                    key: LockKey::Pair(..) | LockKey::Big(_),
                    ..
                }
                | PgRequest::Listen { .. } => {}
            }
        }
        all
    }

    fn pg_replies() -> Vec<Result<PgReply, Error>> {
        let all = vec![
            PgReply::Rows(PgRows {
                columns: vec!["c".into()],
                rows: vec![pg_values()],
            }),
            PgReply::Affected(3),
            PgReply::Begun(4),
            PgReply::Locked(true),
            PgReply::Done,
        ];
        for r in &all {
            match r {
                PgReply::Rows(_) | PgReply::Affected(_) | PgReply::Begun(_) | PgReply::Locked(_) | PgReply::Done => {}
            }
        }
        all.into_iter().map(Ok).chain(errors().into_iter().map(Err)).collect()
    }

    fn resource() -> ApiResource {
        ApiResource::new("g", "v1", "K", "ks")
    }

    fn kube_requests() -> Vec<KubeRequest> {
        let selector = Selector {
            labels: Some("a=b".into()),
            fields: Some("metadata.name=n".into()),
        };
        let all = vec![
            KubeRequest::Watch {
                resource: resource(),
                namespace: Some("ns".into()),
                selector: selector.clone(),
            },
            KubeRequest::Get {
                resource: resource(),
                namespace: None,
                name: "n".into(),
            },
            KubeRequest::List {
                resource: resource(),
                namespace: None,
                selector,
            },
            KubeRequest::Create {
                resource: resource(),
                namespace: None,
                object: "{}".into(),
            },
            KubeRequest::Update {
                resource: resource(),
                namespace: None,
                object: "{}".into(),
                subresource: Some("status".into()),
            },
            KubeRequest::Patch {
                resource: resource(),
                namespace: None,
                name: "n".into(),
                patch: "{}".into(),
                subresource: None,
            },
            KubeRequest::Delete {
                resource: resource(),
                namespace: None,
                name: "n".into(),
            },
            KubeRequest::CreateToken {
                namespace: "ns".into(),
                name: "sa".into(),
                request: "{}".into(),
            },
        ];
        for r in &all {
            match r {
                KubeRequest::Watch { .. }
                | KubeRequest::Get { .. }
                | KubeRequest::List { .. }
                | KubeRequest::Create { .. }
                | KubeRequest::Update { .. }
                | KubeRequest::Patch { .. }
                | KubeRequest::Delete { .. }
                | KubeRequest::CreateToken { .. } => {}
            }
        }
        all
    }

    fn kube_replies() -> Vec<Result<KubeReply, Error>> {
        let all = vec![
            KubeReply::Done,
            KubeReply::Object("{}".into()),
            KubeReply::MaybeObject(None),
            KubeReply::Objects(vec!["{}".into()]),
        ];
        for r in &all {
            match r {
                KubeReply::Done | KubeReply::Object(_) | KubeReply::MaybeObject(_) | KubeReply::Objects(_) => {}
            }
        }
        all.into_iter().map(Ok).chain(errors().into_iter().map(Err)).collect()
    }

    fn host_events() -> Vec<HostEvent> {
        let all = vec![
            HostEvent::Timer("t".into()),
            HostEvent::Notification(Notification {
                database: "d".into(),
                channel: "c".into(),
                payload: "p".into(),
            }),
            HostEvent::Listening(Listening {
                database: "d".into(),
                channel: "c".into(),
                reconnected: true,
            }),
            HostEvent::Watch(WatchEvent {
                resource: "ks.g".into(),
                change: Change::Applied,
                object: "{}".into(),
            }),
            HostEvent::Watch(WatchEvent {
                resource: "ks.g".into(),
                change: Change::Deleted,
                object: "{}".into(),
            }),
        ];
        for e in &all {
            match e {
                HostEvent::Timer(_)
                | HostEvent::Notification(_)
                | HostEvent::Listening(_)
                | HostEvent::Watch(WatchEvent {
                    change: Change::Applied | Change::Deleted,
                    ..
                }) => {}
            }
        }
        all
    }

    /// Every message of the ABI, encoded.
    fn encoded_messages() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let description = Description {
            name: "p".into(),
            version: "1".into(),
            sdk_version: "x".into(),
            sources: vec!["s".into()],
            data_types: vec!["a.v1.b".into()],
            capabilities: Capability::ALL.to_vec(),
            concurrent_notifications: 2,
            metrics: vec![crate::metric::MetricDescription {
                name: "p_things".into(),
                kind: MetricKind::Gauge,
                help: "h".into(),
                labels: vec!["l".into()],
            }],
        };
        out.push(encode(&description));
        let plugin_requests = vec![
            PluginRequest::Start,
            PluginRequest::List(ListOptions {
                cluster_name: "c".into(),
                data_type: "a.v1.b".into(),
            }),
            PluginRequest::Handle(
                Identity {
                    user: "u".into(),
                    groups: vec!["g".into()],
                },
                event(),
            ),
            PluginRequest::HandleBatch(vec![Request {
                identity: Identity {
                    user: "u".into(),
                    groups: vec![],
                },
                event: event(),
            }]),
            PluginRequest::OnEvents(host_events()),
        ];
        for r in &plugin_requests {
            match r {
                PluginRequest::Start
                | PluginRequest::List(_)
                | PluginRequest::Handle(..)
                | PluginRequest::HandleBatch(_)
                | PluginRequest::OnEvents(_) => {}
            }
        }
        out.extend(plugin_requests.iter().map(encode));
        let handled = PluginReply::Handled(vec![Ok(()), Err(Error::Invalid("m".into()))]);
        let replies: Vec<PluginResponse> = [PluginReply::Listed(vec![event()]), PluginReply::Done, handled]
            .into_iter()
            .map(Ok)
            .chain(errors().into_iter().map(Err))
            .collect();
        out.extend(replies.iter().map(encode));
        let host_requests = vec![
            HostRequest::Emit(event()),
            HostRequest::Log(Level::Warn, "m".into()),
            HostRequest::SetTimer("t".into(), 5, true),
            HostRequest::CancelTimer("t".into()),
            HostRequest::KvGet("k".into()),
            HostRequest::KvSet("k".into(), vec![1]),
            HostRequest::KvDelete("k".into()),
            HostRequest::Metric(MetricKind::Counter, "p_things".into(), vec!["v".into()], 1.5),
            HostRequest::Blob("b".into()),
        ]
        .into_iter()
        .chain(pg_requests().into_iter().map(HostRequest::Pg))
        .chain(kube_requests().into_iter().map(HostRequest::Kube))
        .collect::<Vec<_>>();
        for r in &host_requests {
            match r {
                HostRequest::Emit(_)
                | HostRequest::Log(..)
                | HostRequest::SetTimer(..)
                | HostRequest::CancelTimer(_)
                | HostRequest::KvGet(_)
                | HostRequest::KvSet(..)
                | HostRequest::KvDelete(_)
                | HostRequest::Pg(_)
                | HostRequest::Kube(_)
                | HostRequest::Metric(..)
                | HostRequest::Blob(_) => {}
            }
        }
        out.extend(host_requests.iter().map(encode));
        let host_responses = vec![
            HostResponse::Emitted(Ok(2)),
            HostResponse::Emitted(Err(Error::Denied("no".into()))),
            HostResponse::Value(Some(vec![1])),
            HostResponse::Deleted(true),
            HostResponse::Done,
            HostResponse::Refused(Error::Unavailable("limit".into())),
            HostResponse::Blob(vec![1, 2]),
        ]
        .into_iter()
        .chain(pg_replies().into_iter().map(HostResponse::Pg))
        .chain(kube_replies().into_iter().map(HostResponse::Kube))
        .collect::<Vec<_>>();
        for r in &host_responses {
            match r {
                HostResponse::Emitted(_)
                | HostResponse::Value(_)
                | HostResponse::Deleted(_)
                | HostResponse::Pg(_)
                | HostResponse::Kube(_)
                | HostResponse::Done
                | HostResponse::Refused(_)
                | HostResponse::Blob(_) => {}
            }
        }
        out.extend(host_responses.iter().map(encode));
        // The tables' layout is part of the ABI too.
        for size in [
            std::mem::size_of::<PluginApi>(),
            std::mem::size_of::<HostApi>(),
            std::mem::size_of::<Buffer>(),
        ] {
            out.push(size.to_le_bytes().to_vec());
        }
        out
    }

    #[test]
    fn the_abi_version_moves_with_its_messages() {
        let fingerprint = encoded_messages().iter().fold(0xcbf2_9ce4_8422_2325, |hash, bytes| {
            fnv1a64(bytes, fnv1a64(&bytes.len().to_le_bytes(), hash))
        });
        let recorded = FINGERPRINTS.iter().find(|(v, _)| *v == ABI_VERSION).map(|(_, f)| *f);
        assert_eq!(
            recorded,
            Some(fingerprint),
            "the native ABI's messages changed (fingerprint {fingerprint:#018x}): bump ABI_VERSION and record ({}, {fingerprint:#018x}) in FINGERPRINTS",
            ABI_VERSION + u32::from(recorded.is_some())
        );
    }

    #[test]
    fn the_contract_version_has_one_source() {
        let wit = include_str!("../wit/plugin.wit");
        let package = wit
            .lines()
            .find_map(|l| l.strip_prefix("package conductor:plugin@"))
            .and_then(|v| v.strip_suffix(';'))
            .unwrap();
        assert_eq!(package, SDK_VERSION, "the WIT package and SDK_VERSION");
        assert_eq!(
            SDK_VERSION_C.strip_suffix('\0'),
            Some(SDK_VERSION),
            "the C string of the ABI table"
        );
        let minor = SDK_VERSION.rsplit_once('.').map(|(m, _)| m).unwrap();
        assert_eq!(ABI_CONTRACT, minor, "the contract the native ABI carries");
    }
}
