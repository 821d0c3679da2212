//! Native plugins: shared libraries exporting the SDK's C ABI (`conductor_plugin_v1`), loaded
//! with libloading. The library's ABI version is checked before anything else; libraries are
//! never unloaded (their code may still be on a stack, and Rust `cdylib`s do not support
//! unloading cleanly). Calls run in place on the calling task, one instance per call.

use std::ffi::{CStr, c_void};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use conductor_plugin_sdk::native::{
    self as abi, ABI_VERSION, Buffer, ENTRY_SYMBOL, HostApi, HostRequest, HostResponse, PluginApi, PluginReply,
    PluginRequest,
};
use conductor_plugin_sdk::{Description, SourceError};

use super::capabilities::Capabilities;
use super::pg::PgSession;
use super::pool::{MakeInstance, Pool};
use super::{LoadError, Runtime};
use conductor_plugin_sdk::pg::{PgReply, PgRequest};
use conductor_plugin_sdk::{ApiResource, PgError};

/// A private copy of the library named by its contents. The dynamic loader hands out an already
/// loaded library again for the same path, so without this a replaced file would never reload.
fn private_copy(path: &Path) -> Result<std::path::PathBuf, LoadError> {
    use std::hash::{Hash, Hasher};
    let bytes = std::fs::read(path).map_err(|e| LoadError::Open(format!("{}: {e}", path.display())))?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    let dir = std::env::temp_dir().join(format!("conductor-plugins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| LoadError::Open(format!("{}: {e}", dir.display())))?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plugin");
    let copy = dir.join(format!("{stem}-{:016x}.so", hasher.finish()));
    if !copy.exists() {
        std::fs::write(&copy, &bytes).map_err(|e| LoadError::Open(format!("{}: {e}", copy.display())))?;
    }
    Ok(copy)
}

/// The plugin's side of the ABI, from a library that stays loaded.
fn open(path: &Path) -> Result<&'static PluginApi, LoadError> {
    let copy = private_copy(path)?;
    // SAFETY: loading runs the library's initialisers; plugins are trusted code the operator
    // installed, as any native library is.
    let library =
        unsafe { libloading::Library::new(&copy) }.map_err(|e| LoadError::Open(format!("{}: {e}", path.display())))?;
    // Never unloaded: leak the handle.
    let library: &'static libloading::Library = Box::leak(Box::new(library));
    // SAFETY: the symbol's type is the one `export_plugin!` defines.
    let entry = unsafe { library.get::<unsafe extern "C" fn() -> *const PluginApi>(ENTRY_SYMBOL) }.map_err(|e| {
        LoadError::Incompatible(format!(
            "no {} entry point: {e}",
            String::from_utf8_lossy(&ENTRY_SYMBOL[..ENTRY_SYMBOL.len() - 1])
        ))
    })?;
    // SAFETY: the entry point returns a pointer to a static table.
    let api =
        unsafe { entry().as_ref() }.ok_or_else(|| LoadError::Incompatible("the entry point returned null".into()))?;
    if api.abi_version != ABI_VERSION {
        return Err(LoadError::Incompatible(format!(
            "native ABI version {} (this host speaks {ABI_VERSION})",
            api.abi_version
        )));
    }
    Ok(api)
}

/// Loads a plugin library (once) and reads its description, without creating an instance.
pub fn load_library(path: &Path) -> Result<(&'static PluginApi, Description), LoadError> {
    let api = open(path)?;
    Ok((api, describe_api(api)?))
}

/// Reads a plugin's description without creating an instance.
pub fn describe(path: &Path) -> Result<Description, LoadError> {
    load_library(path).map(|(_, description)| description)
}

fn describe_api(api: &'static PluginApi) -> Result<Description, LoadError> {
    // SAFETY: the API table is valid; the buffer is read, then freed by the plugin.
    let description = unsafe {
        let sdk = CStr::from_ptr(api.sdk_version).to_string_lossy().into_owned();
        let out = (api.describe)();
        let d: Result<Description, String> = abi::decode(out.as_slice());
        (api.free)(out);
        let mut d = d.map_err(LoadError::Incompatible)?;
        // The version compiled into the library's ABI table is authoritative.
        d.sdk_version = sdk;
        d
    };
    Ok(description)
}

/// The host side of one plugin instance's `HostApi`: its capabilities behind the C callback,
/// and its open database transactions.
struct HostContext {
    capabilities: Arc<Capabilities>,
    pg: tokio::sync::Mutex<PgSession>,
}

impl HostContext {
    fn pg(&self, request: PgRequest) -> Result<PgReply, PgError> {
        block_on(async { self.pg.lock().await.call(&self.capabilities, request).await }).map_err(PgError::new)?
    }

    fn kube_watch(&self, resource: &ApiResource, namespace: Option<&str>) -> Result<(), String> {
        block_on(self.capabilities.kube_watch(resource, namespace))?
    }
}

/// Runs an asynchronous host call for a native plugin's (synchronous) call: the plugin runs in
/// place on a worker thread of the multi-threaded runtime, which lends the thread to blocking work.
fn block_on<T>(call: impl Future<Output = T>) -> Result<T, String> {
    let handle = tokio::runtime::Handle::try_current().map_err(|_| "called outside the host's runtime".to_owned())?;
    if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread {
        return Err("native plugins make asynchronous host calls only on the multi-threaded runtime".to_owned());
    }
    Ok(tokio::task::block_in_place(|| handle.block_on(call)))
}

unsafe extern "C" fn host_call(ctx: *const c_void, request: *const u8, len: usize) -> Buffer {
    let answer = std::panic::catch_unwind(|| {
        // SAFETY: `ctx` is the `HostContext` this host made for the plugin and keeps alive.
        let ctx = unsafe { &*ctx.cast::<HostContext>() };
        let request = unsafe { std::slice::from_raw_parts(request, len) };
        let caps = &ctx.capabilities;
        match abi::decode::<HostRequest>(request) {
            Ok(HostRequest::Emit(event)) => HostResponse::Emitted(caps.emit(&event)),
            Ok(HostRequest::Log(level, message)) => {
                caps.log(level, &message);
                HostResponse::Done
            }
            Ok(HostRequest::SetTimer(name, after_ms, repeat)) => {
                caps.set_timer(&name, after_ms, repeat);
                HostResponse::Done
            }
            Ok(HostRequest::CancelTimer(name)) => {
                caps.cancel_timer(&name);
                HostResponse::Done
            }
            Ok(HostRequest::KvGet(key)) => HostResponse::Value(caps.kv_get(&key)),
            Ok(HostRequest::KvSet(key, value)) => {
                caps.kv_set(&key, &value);
                HostResponse::Done
            }
            Ok(HostRequest::KvDelete(key)) => HostResponse::Deleted(caps.kv_delete(&key)),
            Ok(HostRequest::Config) => HostResponse::Config(caps.config()),
            Ok(HostRequest::Pg(request)) => HostResponse::Pg(ctx.pg(request)),
            Ok(HostRequest::KubeWatch(resource, namespace)) => {
                HostResponse::Watching(ctx.kube_watch(&resource, namespace.as_deref()))
            }
            Err(e) => {
                tracing::warn!(plugin = %caps.plugin(), error = %e, "malformed host call");
                HostResponse::Done
            }
        }
    })
    .unwrap_or(HostResponse::Done);
    Buffer::from_vec(abi::encode(&answer))
}

unsafe extern "C" fn host_free(buffer: Buffer) {
    // SAFETY: the buffer was made by `host_call` above.
    drop(unsafe { buffer.into_vec() });
}

/// One plugin instance, with the host table and context it was given.
struct Instance {
    api: &'static PluginApi,
    ptr: *mut c_void,
    host: InstanceHost,
}

/// The `HostApi` of one instance and the context it points to (boxed: their addresses are fixed).
struct InstanceHost {
    context: Box<HostContext>,
    api: Box<HostApi>,
}

// SAFETY: `api.ctx` points into `context`, owned alongside and never moved (boxed); the context
// is `Send + Sync` (an `Arc` and a mutex), and the table holds only that pointer and functions.
unsafe impl Send for InstanceHost {}
unsafe impl Sync for InstanceHost {}

impl InstanceHost {
    fn new(capabilities: Arc<Capabilities>) -> Self {
        let context = Box::new(HostContext {
            capabilities,
            pg: tokio::sync::Mutex::default(),
        });
        let api = Box::new(HostApi {
            abi_version: ABI_VERSION,
            ctx: (&*context as *const HostContext).cast(),
            call: host_call,
            free: host_free,
        });
        Self { context, api }
    }

    /// Rolls back what the last call left open.
    async fn end_call(&self) {
        let plugin = self.context.capabilities.plugin();
        self.context.pg.lock().await.end_call(plugin).await;
    }
}

// SAFETY: an instance is used by one call at a time (the pool hands it out exclusively).
unsafe impl Send for Instance {}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `create` and is destroyed once.
        unsafe { (self.api.destroy)(self.ptr) };
    }
}

pub struct NativeRuntime {
    description: Description,
    pool: Pool<Instance, SourceError>,
}

impl NativeRuntime {
    /// Starts the first instance of a library opened by [`load_library`].
    pub async fn load(
        api: &'static PluginApi,
        description: Description,
        capabilities: Arc<Capabilities>,
        pool_size: usize,
        config_json: String,
    ) -> Result<Self, LoadError> {
        let config = Arc::new(config_json.into_bytes());
        let make: MakeInstance<Instance, SourceError> = Arc::new(move || {
            let config = Arc::clone(&config);
            let host = InstanceHost::new(Arc::clone(&capabilities));
            Box::pin(async move {
                let made = create(api, host, &config);
                if let Ok(instance) = &made {
                    instance.host.end_call().await;
                }
                made
            })
        });
        let first = make().await.map_err(LoadError::Init)?;
        Ok(Self {
            description,
            pool: Pool::new(pool_size, first, make),
        })
    }
}

fn create(api: &'static PluginApi, host: InstanceHost, config: &[u8]) -> Result<Instance, SourceError> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: the host table lives in the instance; the config is borrowed for the call; the
    // returned buffer is read, then freed by the plugin.
    unsafe {
        let out = (api.create)(&*host.api, config.as_ptr(), config.len(), &mut ptr);
        let failed = out.len > 0;
        let error = failed.then(|| abi::decode::<SourceError>(out.as_slice()));
        (api.free)(out);
        match error {
            Some(Ok(e)) => Err(e),
            Some(Err(e)) => Err(SourceError::Internal(e)),
            None if ptr.is_null() => Err(SourceError::Internal("the plugin created no instance".into())),
            None => Ok(Instance { api, ptr, host }),
        }
    }
}

fn call(instance: &Instance, request: &[u8]) -> Result<PluginReply, SourceError> {
    // SAFETY: the instance is live and ours alone for the call; the buffer is read, then freed
    // by the plugin.
    unsafe {
        let out = (instance.api.call)(instance.ptr, request.as_ptr(), request.len());
        let response = abi::decode::<abi::PluginResponse>(out.as_slice());
        (instance.api.free)(out);
        response.map_err(SourceError::Internal)?
    }
}

#[async_trait]
impl Runtime for NativeRuntime {
    fn description(&self) -> &Description {
        &self.description
    }

    async fn call(&self, request: PluginRequest) -> Result<PluginReply, SourceError> {
        let bytes = abi::encode(&request);
        self.pool
            .with(async |instance: Instance| {
                // Called in place, as component calls are: a hand-off to a blocking thread per
                // call cost more than the call itself (BENCHMARKS.md). Native code is trusted.
                let result = call(&instance, &bytes);
                instance.host.end_call().await;
                (result, Some(instance))
            })
            .await?
    }
}
