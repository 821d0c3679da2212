//! Native plugins: shared libraries exporting the SDK's C ABI (`conductor_plugin_v1`), loaded
//! with libloading. The library's ABI version is checked before anything else; libraries are
//! never unloaded (their code may still be on a stack, and Rust `cdylib`s do not support
//! unloading cleanly).
//!
//! Each instance lives on a thread of its own ([`Worker`]), never on an async worker: a call is
//! handed to that thread and answered from it, with no task of tokio's blocking pool per call
//! (the thread spins a few microseconds for the next call before it sleeps, and the caller a few
//! for the answer before it awaits it, so a short call is not two thread wake-ups). A call has a deadline: past `limits.call_timeout` it fails with a
//! clear error at the deadline. Native code cannot be interrupted, so the thread keeps running the
//! call until the plugin returns; the instance is then destroyed on that thread instead of going
//! back to the pool. Those threads are bounded: at `limits.max_abandoned_calls` calls running
//! past their timeout, the plugin's calls are refused (`Unavailable`, counted as a limit refusal,
//! so readiness says so) until some return, and no thread is started for them.

use std::ffi::{CStr, c_void};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use std::time::Duration;

use async_trait::async_trait;
use conductor_plugin_sdk::kube::{KubeReply, KubeRequest};
use conductor_plugin_sdk::native::{
    self as abi, ABI_VERSION, Buffer, ENTRY_SYMBOL, HostApi, HostRequest, HostResponse, PluginApi, PluginReply,
    PluginRequest,
};
use conductor_plugin_sdk::pg::{PgReply, PgRequest};
use conductor_plugin_sdk::{Description, Error};

use super::capabilities::{Capabilities, PgSession};
use super::pool::{MakeInstance, Pool};
use super::runtime::{CallError, LoadError, Runtime, Wait};
use crate::config::PluginLimits;

/// A private copy of the library named by its contents, and their digest. The dynamic loader
/// hands out an already loaded library again for the same path, so without this a replaced file
/// would never reload; and the copy is made of the bytes hashed, so what is loaded is what the
/// digest names.
fn private_copy(path: &Path) -> Result<(std::path::PathBuf, String), LoadError> {
    let open = |path: &Path| {
        let path = path.to_owned();
        move |source| LoadError::Open { path, source }
    };
    let bytes = std::fs::read(path).map_err(open(path))?;
    let digest = crate::oci::sha256_digest(&bytes);
    let dir = std::env::temp_dir().join(format!("conductor-plugins-{}", std::process::id()));
    crate::private_folder::ensure_private_folder(&dir).map_err(|reason| LoadError::NotAPlugin {
        path: dir.clone(),
        reason: format!("the folder of loaded libraries: {reason}"),
    })?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plugin");
    let hex = digest.strip_prefix("sha256:").unwrap_or(&digest);
    let copy = dir.join(format!("{stem}-{}.so", &hex[..16]));
    if !copy.exists() {
        crate::private_folder::write_atomically(&copy, &bytes).map_err(open(&copy))?;
    }
    Ok((copy, digest))
}

/// The plugin's side of the ABI, from a library that stays loaded.
fn open(path: &Path, expected: Option<&str>) -> Result<(&'static PluginApi, String), LoadError> {
    let (copy, digest) = private_copy(path)?;
    if let Some(expected) = expected
        && expected != digest
    {
        return Err(LoadError::NotAPlugin {
            path: path.to_owned(),
            reason: format!("its bytes have digest {digest}, not the verified {expected}"),
        });
    }
    // SAFETY: loading runs the library's initialisers; plugins are trusted code the operator
    // installed, as any native library is.
    let library = unsafe { libloading::Library::new(&copy) }.map_err(|e| LoadError::NotAPlugin {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
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
    Ok((api, digest))
}

/// Loads a plugin library (once) and reads its description, without creating an instance; the
/// library's bytes must hash to `expected` when given. Returns the digest of the bytes loaded.
/// Blocking: it reads and copies the file.
pub fn load_library(
    path: &Path,
    expected: Option<&str>,
) -> Result<(&'static PluginApi, Description, String), LoadError> {
    let (api, digest) = open(path, expected)?;
    Ok((api, describe_api(api)?, digest))
}

/// Asks the library whether it takes `config`, without a host.
pub fn check_config(api: &'static PluginApi, config: &str) -> Result<(), Error> {
    // SAFETY: the API table is valid; the config is borrowed for the call; the buffer is read,
    // then freed by the plugin.
    unsafe {
        let out = (api.check_config)(config.as_ptr(), config.len());
        let answer = (out.len > 0).then(|| abi::decode::<Error>(out.as_slice()));
        (api.free)(out);
        match answer {
            None => Ok(()),
            Some(Ok(e)) => Err(e),
            Some(Err(e)) => Err(Error::Internal(e)),
        }
    }
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

/// The host side of one plugin instance's `HostApi` (what its `ctx` points to): its capabilities
/// behind the C callback, and its open database transactions.
struct InstanceContext {
    capabilities: Arc<Capabilities>,
    pg: tokio::sync::Mutex<PgSession>,
    runtime: tokio::runtime::Handle,
}

impl InstanceContext {
    /// Runs an asynchronous host call for the plugin's (synchronous) call, which runs on a
    /// blocking thread of the runtime.
    fn block_on<T>(&self, call: impl Future<Output = T>) -> T {
        match tokio::runtime::Handle::try_current() {
            // On an async worker (a plugin made in place): lend the thread to blocking work.
            Ok(_) => tokio::task::block_in_place(|| self.runtime.block_on(call)),
            Err(_) => self.runtime.block_on(call),
        }
    }

    fn pg(&self, request: PgRequest) -> Result<PgReply, Error> {
        self.block_on(async { self.pg.lock().await.call(self.capabilities.pg(), request).await })
    }

    fn kube(&self, request: KubeRequest) -> Result<KubeReply, Error> {
        self.block_on(self.capabilities.kube().call(request))
    }
}

unsafe extern "C" fn host_call(ctx: *const c_void, request: *const u8, len: usize) -> Buffer {
    let answer = std::panic::catch_unwind(|| {
        // SAFETY: `ctx` is the `InstanceContext` this host made for the plugin and keeps alive.
        let ctx = unsafe { &*ctx.cast::<InstanceContext>() };
        // SAFETY: the plugin passes a request buffer live for the call.
        let request = unsafe { std::slice::from_raw_parts(request, len) };
        let caps = &ctx.capabilities;
        match abi::decode::<HostRequest>(request) {
            Ok(HostRequest::Emit(event)) => HostResponse::Emitted(caps.emit().send(&event)),
            Ok(HostRequest::Log(level, message)) => {
                caps.log().line(level, &message);
                HostResponse::Done
            }
            Ok(HostRequest::SetTimer(name, after_ms, repeat)) => done(caps.timer().set(&name, after_ms, repeat)),
            Ok(HostRequest::CancelTimer(name)) => {
                caps.timer().cancel(&name);
                HostResponse::Done
            }
            Ok(HostRequest::KvGet(key)) => HostResponse::Value(caps.kv().get(&key)),
            Ok(HostRequest::KvSet(key, value)) => done(caps.kv().set(&key, &value)),
            Ok(HostRequest::KvDelete(key)) => HostResponse::Deleted(caps.kv().delete(&key)),
            Ok(HostRequest::Pg(request)) => HostResponse::Pg(ctx.pg(request)),
            Ok(HostRequest::Kube(request)) => HostResponse::Kube(ctx.kube(request)),
            Ok(HostRequest::Metric(kind, name, labels, value)) => {
                let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
                done(caps.exported_metrics().record(kind, &name, &labels, value))
            }
            Ok(HostRequest::Blob(name)) => match ctx.block_on(caps.blob().read(&name)) {
                Ok(contents) => HostResponse::Blob(contents),
                Err(e) => HostResponse::Refused(e),
            },
            Err(e) => {
                tracing::warn!(plugin = %caps.plugin(), error = %e, "malformed host call");
                HostResponse::Done
            }
        }
    })
    .unwrap_or(HostResponse::Done);
    Buffer::from_vec(abi::encode(&answer))
}

/// The answer to a call that returns nothing else.
fn done(outcome: Result<(), Error>) -> HostResponse {
    match outcome {
        Ok(()) => HostResponse::Done,
        Err(e) => HostResponse::Refused(e),
    }
}

unsafe extern "C" fn host_free(buffer: Buffer) {
    // SAFETY: the buffer was made by `host_call` above.
    drop(unsafe { buffer.into_vec() });
}

/// One plugin instance, with the host table and context it was given.
struct Instance {
    api: &'static PluginApi,
    ptr: *mut c_void,
    /// Kept while the instance lives: its host table points into it.
    _host: Arc<InstanceHost>,
}

/// The `HostApi` of one instance and the context it points to (boxed: their addresses are fixed).
struct InstanceHost {
    context: Box<InstanceContext>,
    api: Box<HostApi>,
}

// SAFETY: `api.ctx` points into `context`, owned alongside and never moved (boxed); the context
// is `Send + Sync` (an `Arc` and a mutex), and the table holds only that pointer and functions.
unsafe impl Send for InstanceHost {}
// SAFETY: as for `Send`.
unsafe impl Sync for InstanceHost {}

impl InstanceHost {
    fn new(capabilities: Arc<Capabilities>, runtime: tokio::runtime::Handle) -> Self {
        let context = Box::new(InstanceContext {
            capabilities,
            pg: tokio::sync::Mutex::default(),
            runtime,
        });
        let api = Box::new(HostApi {
            abi_version: ABI_VERSION,
            ctx: (&*context as *const InstanceContext).cast(),
            call: host_call,
            free: host_free,
        });
        Self { context, api }
    }

    /// Rolls back what the last call left open.
    async fn end_call(&self) {
        let plugin = self.context.capabilities.plugin();
        let mut session = self.context.pg.lock().await;
        if session.has_open() {
            session.end_call(plugin).await;
        }
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

/// How long an instance's thread looks for the next call before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

/// A call handed to an instance's thread.
struct Job {
    request: Vec<u8>,
    span: tracing::Span,
    /// The answer, and whether the instance may serve again (not after a panic).
    reply: tokio::sync::oneshot::Sender<(Result<PluginReply, Error>, bool)>,
}

/// An instance on a thread of its own. Dropping it ends the thread once its call (if any)
/// returns, and the instance is destroyed there.
struct Worker {
    jobs: std::sync::mpsc::SyncSender<Job>,
    host: Arc<InstanceHost>,
    /// [`RUNNING`], [`ABANDONED`] (a call ran past its timeout and the thread was left to it) or
    /// [`ENDED`] (the thread returned).
    thread: Arc<AtomicU8>,
}

const RUNNING: u8 = 0;
const ABANDONED: u8 = 1;
const ENDED: u8 = 2;

/// The calls of one plugin running on past their timeout, and the most it may have.
#[derive(Clone)]
struct Abandoned {
    count: Arc<AtomicUsize>,
    gauge: prometheus::IntGauge,
}

impl Abandoned {
    /// `worker`'s call ran past its timeout: its thread counts until it returns.
    fn leave(&self, worker: &Worker) {
        if worker
            .thread
            .compare_exchange(RUNNING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.count.fetch_add(1, Ordering::SeqCst);
            self.gauge.inc();
        }
    }

    /// A worker's thread returned.
    fn ended(&self, thread: &AtomicU8) {
        if thread.swap(ENDED, Ordering::SeqCst) == ABANDONED {
            self.count.fetch_sub(1, Ordering::SeqCst);
            self.gauge.dec();
        }
    }
}

impl Worker {
    /// Starts a thread that creates an instance and serves its calls; `Err` if `create` failed.
    async fn start(
        name: &str,
        api: &'static PluginApi,
        host: InstanceHost,
        config: Arc<Vec<u8>>,
        abandoned: Abandoned,
    ) -> Result<Self, Error> {
        let host = Arc::new(host);
        let thread = Arc::new(AtomicU8::new(RUNNING));
        let thread_state = Arc::clone(&thread);
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(1);
        let (made_tx, made) = tokio::sync::oneshot::channel();
        let thread_host = Arc::clone(&host);
        std::thread::Builder::new()
            .name(format!("plugin-{name}"))
            .spawn(move || {
                // The host's capabilities (timers, host calls) run on the runtime, as from a
                // thread of its blocking pool.
                let runtime = thread_host.context.runtime.clone();
                let _runtime = runtime.enter();
                match create(api, thread_host, &config) {
                    Ok(instance) => {
                        if made_tx.send(Ok(())).is_ok() {
                            serve(&instance, &queue);
                        }
                    }
                    Err(e) => {
                        let _ = made_tx.send(Err(e));
                    }
                }
                abandoned.ended(&thread_state);
            })
            .map_err(|e| Error::Internal(format!("cannot start a thread for the plugin: {e}")))?;
        made.await
            .map_err(|_| Error::Internal("plugin init panicked".into()))??;
        let worker = Self { jobs, host, thread };
        worker.host.end_call().await;
        Ok(worker)
    }
}

/// Runs the calls handed to `instance` until the worker is dropped.
fn serve(instance: &Instance, queue: &std::sync::mpsc::Receiver<Job>) {
    loop {
        let job = match next_job(queue) {
            Some(job) => job,
            None => return,
        };
        let _in_call = job.span.enter();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(instance, &job.request)));
        let (answer, healthy) = match outcome {
            Ok(result) => (result, true),
            Err(_) => (Err(Error::Internal("the plugin call panicked".into())), false),
        };
        let _ = job.reply.send((answer, healthy));
        if !healthy {
            return;
        }
    }
}

/// The next call: looked for during [`SPIN`], then waited for; `None` once the worker is gone.
fn next_job(queue: &std::sync::mpsc::Receiver<Job>) -> Option<Job> {
    let until = std::time::Instant::now() + SPIN;
    loop {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
            Err(std::sync::mpsc::TryRecvError::Empty) if std::time::Instant::now() < until => std::thread::yield_now(),
            Err(std::sync::mpsc::TryRecvError::Empty) => return queue.recv().ok(),
        }
    }
}

/// How long the caller looks for the answer before it awaits it: a short call's answer is taken at
/// once, without the runtime's thread going to sleep and being woken for it (a component's call
/// holds its thread for all its length; this holds it for at most this long).
const REPLY_SPIN: Duration = Duration::from_micros(25);

/// The instance's answer: looked for during [`REPLY_SPIN`], then awaited.
async fn answered<T>(
    mut answer: tokio::sync::oneshot::Receiver<T>,
) -> Result<T, tokio::sync::oneshot::error::RecvError> {
    let until = std::time::Instant::now() + REPLY_SPIN;
    while std::time::Instant::now() < until {
        match answer.try_recv() {
            Ok(value) => return Ok(value),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => std::thread::yield_now(),
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => break,
        }
    }
    answer.await
}

pub struct NativeRuntime {
    pool: Pool<Worker>,
    call_timeout: Duration,
    name: String,
    abandoned: Abandoned,
    max_abandoned: usize,
    metrics: crate::telemetry::PluginMetrics,
}

impl NativeRuntime {
    /// Starts the first instance of a library opened by [`load_library`].
    pub async fn load(
        api: &'static PluginApi,
        capabilities: Arc<Capabilities>,
        pool_size: usize,
        limits: &PluginLimits,
        config_json: String,
    ) -> Result<Self, LoadError> {
        let name = capabilities.plugin().to_owned();
        let config = Arc::new(config_json.into_bytes());
        let runtime = tokio::runtime::Handle::current();
        let metrics = capabilities.metrics().clone();
        let abandoned = Abandoned {
            count: Arc::default(),
            gauge: metrics.abandoned(),
        };
        let make: MakeInstance<Worker> = {
            let (name, abandoned) = (name.clone(), abandoned.clone());
            Arc::new(move || {
                let (config, name, abandoned) = (Arc::clone(&config), name.clone(), abandoned.clone());
                let host = InstanceHost::new(Arc::clone(&capabilities), runtime.clone());
                Box::pin(async move { Worker::start(&name, api, host, config, abandoned).await })
            })
        };
        let first = make().await.map_err(LoadError::Init)?;
        Ok(Self {
            pool: Pool::new(&name, pool_size, limits.acquire_timeout.0, first, make),
            call_timeout: limits.call_timeout.0,
            name,
            abandoned,
            max_abandoned: limits.max_abandoned_calls,
            metrics,
        })
    }
}

fn create(api: &'static PluginApi, host: Arc<InstanceHost>, config: &[u8]) -> Result<Instance, Error> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: the host table lives in the instance; the config is borrowed for the call; the
    // returned buffer is read, then freed by the plugin.
    unsafe {
        let out = (api.create)(&*host.api, config.as_ptr(), config.len(), &mut ptr);
        let failed = out.len > 0;
        let error = failed.then(|| abi::decode::<Error>(out.as_slice()));
        (api.free)(out);
        match error {
            Some(Ok(e)) => Err(e),
            Some(Err(e)) => Err(Error::Internal(e)),
            None if ptr.is_null() => Err(Error::Internal("the plugin created no instance".into())),
            None => Ok(Instance { api, ptr, _host: host }),
        }
    }
}

fn call(instance: &Instance, request: &[u8]) -> Result<PluginReply, Error> {
    // SAFETY: the instance is live and ours alone for the call; the buffer is read, then freed
    // by the plugin.
    unsafe {
        let out = (instance.api.call)(instance.ptr, request.as_ptr(), request.len());
        let response = abi::decode::<abi::PluginResponse>(out.as_slice());
        (instance.api.free)(out);
        response.map_err(Error::Internal)?
    }
}

#[async_trait]
impl Runtime for NativeRuntime {
    async fn call(&self, request: PluginRequest, wait: Wait) -> Result<PluginReply, CallError> {
        let abandoned = self.abandoned.count.load(Ordering::SeqCst);
        if abandoned >= self.max_abandoned {
            self.metrics.limit_hit("max_abandoned_calls");
            return Err(CallError::Failed(Error::Unavailable(format!(
                "plugin {} has {abandoned} calls still running past their call timeout (limits.max_abandoned_calls = {}): its calls are refused until they return",
                self.name, self.max_abandoned
            ))));
        }
        let request = abi::encode(&request);
        self.pool
            .with(wait, async |worker: Worker| {
                // The plugin's host calls happen on that thread: under the call's span.
                let (reply, answer) = tokio::sync::oneshot::channel();
                let job = Job {
                    request,
                    span: tracing::Span::current(),
                    reply,
                };
                if worker.jobs.try_send(job).is_err() {
                    let gone = Error::Internal(format!("plugin {}: its instance's thread is gone", self.name));
                    return (Err(gone.into()), None);
                }
                match tokio::time::timeout(self.call_timeout, answered(answer)).await {
                    Ok(Ok((result, true))) => {
                        worker.host.end_call().await;
                        (result.map_err(CallError::from), Some(worker))
                    }
                    Ok(Ok((_, false))) | Ok(Err(_)) => {
                        let panicked = Error::Internal(format!("plugin {} call panicked", self.name));
                        (Err(panicked.into()), None)
                    }
                    Err(_elapsed) => {
                        self.abandoned.leave(&worker);
                        tracing::warn!(plugin = %self.name, timeout = ?self.call_timeout, abandoned = self.abandoned.count.load(Ordering::SeqCst), max_abandoned_calls = self.max_abandoned, "native plugin call exceeded its timeout; its thread runs on until the plugin returns, and the instance is discarded");
                        let timed_out = CallError::TimedOut {
                            plugin: self.name.clone(),
                            timeout: self.call_timeout,
                        };
                        (Err(timed_out), None)
                    }
                }
            })
            .await?
    }

    fn instances(&self) -> usize {
        self.pool.instances()
    }
}
