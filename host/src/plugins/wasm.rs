//! WebAssembly component plugins (`wasm32-wasip2`), run by wasmtime: sandboxed, limited per call
//! (linear memory cap, epoch deadline), linked only with the capabilities they were granted, and
//! replaced instance by instance when a call traps.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use conductor_plugin_sdk::native::{PluginReply, PluginRequest};
use conductor_plugin_sdk::{Capability, Description, SourceError};
use parking_lot::Mutex;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::capabilities::Capabilities;
use super::pg::PgSession;
use super::pool::{MakeInstance, Pool};
use super::{LoadError, Runtime};
use crate::config::PluginLimits;
use conductor_plugin_sdk::pg::{PgReply, PgRequest};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../plugin-sdk/wit",
        world: "source-plugin",
        imports: { default: async },
        exports: { default: async },
    });
}

use bindings::SourcePlugin;
use bindings::conductor::plugin::{config, emit, kube, kv, log, pg, timer, types};

mod convert {
    conductor_plugin_sdk::__wit_conversions!(super::types);
    conductor_plugin_sdk::__wit_pg_conversions!(super::pg);
}

/// The epoch advances this often; call deadlines are counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);
const WIT_PACKAGE: &str = "conductor:plugin/";

/// The process-wide engine: async host functions, epoch interruption, the component model.
fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let engine = Engine::new(&config).expect("a valid wasmtime configuration");
        let ticker = engine.weak();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while let Some(engine) = ticker.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .expect("the epoch thread starts");
        engine
    })
}

/// Compiled components by file, so inspecting and loading (and reloading an unchanged file)
/// compile once.
fn compile(file: &Path) -> Result<Component, LoadError> {
    type Key = (PathBuf, SystemTime, u64);
    static CACHE: OnceLock<Mutex<HashMap<Key, Component>>> = OnceLock::new();
    let meta = std::fs::metadata(file).map_err(|e| LoadError::Open(format!("{}: {e}", file.display())))?;
    let key = (
        file.to_owned(),
        meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        meta.len(),
    );
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(c) = cache.lock().get(&key) {
        return Ok(c.clone());
    }
    let component = Component::from_file(engine(), file)
        .map_err(|e| LoadError::Open(format!("{} is not a WebAssembly component: {e:#}", file.display())))?;
    cache.lock().insert(key, component.clone());
    Ok(component)
}

/// The conductor capabilities a component imports (WASI imports are always provided, without
/// files, network or environment).
fn imported_capabilities(component: &Component) -> Result<Vec<String>, LoadError> {
    let mut caps = Vec::new();
    for (name, _) in component.component_type().imports(engine()) {
        if let Some(rest) = name.strip_prefix(WIT_PACKAGE) {
            let interface = rest.split('@').next().unwrap_or(rest);
            if interface != "types" {
                caps.push(interface.to_owned());
            }
        } else if !name.starts_with("wasi:") {
            return Err(LoadError::Incompatible(format!(
                "imports {name:?}, which this host does not provide"
            )));
        }
    }
    Ok(caps)
}

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    capabilities: Option<Arc<Capabilities>>,
    pg: PgSession,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl State {
    fn new(capabilities: Option<Arc<Capabilities>>, memory: usize) -> Self {
        Self {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(memory)
                .trap_on_grow_failure(true)
                .build(),
            capabilities,
            pg: PgSession::default(),
        }
    }

    fn caps(&self) -> &Capabilities {
        self.capabilities
            .as_deref()
            .expect("capabilities are linked only with a plugin's state")
    }
}

impl types::Host for State {}

impl emit::Host for State {
    async fn emit(&mut self, event: types::CloudEvent) -> Result<u32, String> {
        self.caps().emit(&convert::from_wit_event(event))
    }
}

impl log::Host for State {
    async fn log(&mut self, level: log::Level, message: String) {
        let level = match level {
            log::Level::Trace => conductor_plugin_sdk::Level::Trace,
            log::Level::Debug => conductor_plugin_sdk::Level::Debug,
            log::Level::Info => conductor_plugin_sdk::Level::Info,
            log::Level::Warn => conductor_plugin_sdk::Level::Warn,
            log::Level::Error => conductor_plugin_sdk::Level::Error,
        };
        self.caps().log(level, &message)
    }
}

impl timer::Host for State {
    async fn set(&mut self, name: String, after_ms: u64, repeat: bool) {
        self.caps().set_timer(&name, after_ms, repeat)
    }
    async fn cancel(&mut self, name: String) {
        self.caps().cancel_timer(&name)
    }
}

impl kv::Host for State {
    async fn get(&mut self, key: String) -> Option<Vec<u8>> {
        self.caps().kv_get(&key)
    }
    async fn set(&mut self, key: String, value: Vec<u8>) {
        self.caps().kv_set(&key, &value)
    }
    async fn delete(&mut self, key: String) -> bool {
        self.caps().kv_delete(&key)
    }
}

impl config::Host for State {
    async fn get(&mut self) -> String {
        self.caps().config()
    }
}

impl kube::Host for State {
    async fn watch(&mut self, resource: kube::ApiResource, namespace: Option<String>) -> Result<(), String> {
        let resource = conductor_plugin_sdk::ApiResource {
            group: resource.group,
            version: resource.version,
            kind: resource.kind,
            plural: resource.plural,
        };
        self.caps().kube_watch(&resource, namespace.as_deref()).await
    }
}

impl State {
    async fn pg(&mut self, request: PgRequest) -> Result<PgReply, pg::Error> {
        let caps = Arc::clone(
            self.capabilities
                .as_ref()
                .expect("pg is linked only with a plugin's state"),
        );
        self.pg.call(&caps, request).await.map_err(convert::to_wit_pg_error)
    }
}

fn reply_error(reply: PgReply) -> pg::Error {
    convert::to_wit_pg_error(conductor_plugin_sdk::PgError::new(format!(
        "unexpected reply {reply:?}"
    )))
}

impl pg::Host for State {
    async fn query(
        &mut self,
        database: String,
        transaction: Option<u64>,
        sql: String,
        params: Vec<pg::Value>,
    ) -> Result<pg::Rows, pg::Error> {
        let params = params.into_iter().map(convert::from_wit_value).collect();
        match self
            .pg(PgRequest::Query {
                database,
                transaction,
                sql,
                params,
            })
            .await?
        {
            PgReply::Rows(rows) => Ok(convert::to_wit_rows(rows)),
            other => Err(reply_error(other)),
        }
    }

    async fn execute(
        &mut self,
        database: String,
        transaction: Option<u64>,
        sql: String,
        params: Vec<pg::Value>,
    ) -> Result<u64, pg::Error> {
        let params = params.into_iter().map(convert::from_wit_value).collect();
        match self
            .pg(PgRequest::Execute {
                database,
                transaction,
                sql,
                params,
            })
            .await?
        {
            PgReply::Affected(n) => Ok(n),
            other => Err(reply_error(other)),
        }
    }

    async fn begin(&mut self, database: String) -> Result<u64, pg::Error> {
        match self.pg(PgRequest::Begin { database }).await? {
            PgReply::Begun(id) => Ok(id),
            other => Err(reply_error(other)),
        }
    }

    async fn commit(&mut self, transaction: u64) -> Result<(), pg::Error> {
        self.pg(PgRequest::Commit { transaction }).await.map(drop)
    }

    async fn rollback(&mut self, transaction: u64) {
        let _ = self.pg(PgRequest::Rollback { transaction }).await;
    }

    async fn advisory_lock(
        &mut self,
        transaction: u64,
        key: String,
        lock_type: String,
        wait: bool,
    ) -> Result<bool, pg::Error> {
        match self
            .pg(PgRequest::AdvisoryLock {
                transaction,
                key,
                lock_type,
                wait,
            })
            .await?
        {
            PgReply::Locked(taken) => Ok(taken),
            other => Err(reply_error(other)),
        }
    }

    async fn listen(&mut self, database: String, channel: String) -> Result<(), pg::Error> {
        self.pg(PgRequest::Listen { database, channel }).await.map(drop)
    }
}

/// A linker with WASI and exactly the granted conductor capabilities.
fn linker(capabilities: &Capabilities) -> Result<Linker<State>, LoadError> {
    let wasm = |e: wasmtime::Error| LoadError::Incompatible(format!("{e:#}"));
    let mut linker = Linker::<State>::new(engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasm)?;
    types::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wasm)?;
    for capability in Capability::ALL {
        if !capabilities.granted(capability) {
            continue;
        }
        match capability {
            Capability::Emit => emit::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Log => log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Timer => timer::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Kv => kv::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Config => config::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Pg => pg::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Kube => kube::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
        }
        .map_err(wasm)?;
    }
    Ok(linker)
}

/// Reads a component's description: instantiated with WASI only (its capability imports trap),
/// `describe` called, nothing else.
pub async fn describe(file: &Path) -> Result<Description, LoadError> {
    let component = compile(file)?;
    let mut linker = Linker::<State>::new(engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| LoadError::Incompatible(format!("{e:#}")))?;
    linker
        .define_unknown_imports_as_traps(&component)
        .map_err(|e| LoadError::Incompatible(format!("{e:#}")))?;
    let mut store = Store::new(engine(), State::new(None, 64 << 20));
    store.limiter(|s| &mut s.limits);
    store.set_epoch_deadline(ticks(Duration::from_secs(5)));
    let plugin = SourcePlugin::instantiate_async(&mut store, &component, &linker)
        .await
        .map_err(|e| LoadError::Incompatible(format!("not a conductor:plugin source component: {e:#}")))?;
    let d = plugin
        .conductor_plugin_source()
        .call_describe(&mut store)
        .await
        .map_err(|e| LoadError::Incompatible(format!("describe failed: {e:#}")))?;
    Ok(convert::from_wit_description(d))
}

fn ticks(timeout: Duration) -> u64 {
    (timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64 + 1
}

struct Instance {
    store: Store<State>,
    plugin: SourcePlugin,
}

pub struct WasmRuntime {
    description: Description,
    pool: Pool<Instance, SourceError>,
    call_ticks: u64,
    call_timeout: Duration,
    name: String,
}

impl WasmRuntime {
    /// Starts the first instance of the component in `file`, whose `description` the caller
    /// already read (and checked) with [`describe`].
    pub async fn load(
        file: &Path,
        description: Description,
        capabilities: Arc<Capabilities>,
        pool_size: usize,
        limits: &PluginLimits,
        config_json: String,
    ) -> Result<Self, LoadError> {
        let component = compile(file)?;
        let imported = imported_capabilities(&component)?;
        let missing: Vec<String> = imported
            .iter()
            .filter(|c| Capability::parse(c).is_none_or(|c| !capabilities.granted(c)))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(LoadError::Ungranted {
                missing,
                granted: Capability::ALL
                    .iter()
                    .filter(|c| capabilities.granted(**c))
                    .map(|c| c.name().to_owned())
                    .collect(),
            });
        }
        let linker = linker(&capabilities)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Incompatible(format!("{e:#}")))?;
        let pre = bindings::SourcePluginPre::new(pre).map_err(|e| LoadError::Incompatible(format!("{e:#}")))?;
        let memory = limits.memory.as_usize();
        let call_ticks = ticks(limits.call_timeout.0);
        let name = capabilities.plugin().to_owned();
        let make: MakeInstance<Instance, SourceError> = Arc::new(move || {
            let pre = pre.clone();
            let capabilities = Arc::clone(&capabilities);
            let config_json = config_json.clone();
            Box::pin(async move {
                let mut store = Store::new(engine(), State::new(Some(capabilities), memory));
                store.limiter(|s| &mut s.limits);
                store.set_epoch_deadline(call_ticks);
                let plugin = pre
                    .instantiate_async(&mut store)
                    .await
                    .map_err(|e| SourceError::Internal(format!("instantiating the plugin failed: {e:#}")))?;
                let init = plugin
                    .conductor_plugin_source()
                    .call_init(&mut store, &config_json)
                    .await
                    .map_err(|e| SourceError::Internal(format!("plugin init trapped: {e:#}")));
                let name = store.data().caps().plugin().to_owned();
                store.data_mut().pg.end_call(&name).await;
                init?.map_err(convert::from_wit_error)?;
                Ok(Instance { store, plugin })
            })
        });
        let first = make().await.map_err(LoadError::Init)?;
        Ok(Self {
            description,
            pool: Pool::new(pool_size, first, make),
            call_ticks,
            call_timeout: limits.call_timeout.0,
            name,
        })
    }

    /// A failed call's error: a trap becomes an internal error naming what happened.
    fn trapped(&self, error: wasmtime::Error) -> SourceError {
        let reason = match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => format!("exceeded its call timeout of {:?}", self.call_timeout),
            _ => format!("trapped: {error:#}"),
        };
        tracing::warn!(plugin = %self.name, %reason, "plugin call failed; replacing the instance");
        SourceError::Internal(format!("plugin {} {reason}", self.name))
    }
}

// The generated `plugin-error` (with its Kubernetes status) is large; it lives only for a call.
#[allow(clippy::result_large_err)]
#[async_trait]
impl Runtime for WasmRuntime {
    fn description(&self) -> &Description {
        &self.description
    }

    async fn call(&self, request: PluginRequest) -> Result<PluginReply, SourceError> {
        self.pool
            .with(async |mut instance: Instance| {
                instance.store.set_epoch_deadline(self.call_ticks);
                let source = instance.plugin.conductor_plugin_source();
                let outcome = match request {
                    PluginRequest::List(options) => {
                        let options = types::ListOptions {
                            cluster_name: options.cluster_name,
                            data_type: options.data_type,
                        };
                        source.call_list(&mut instance.store, &options).await.map(|r| {
                            r.map(|events| {
                                PluginReply::Listed(events.into_iter().map(convert::from_wit_event).collect())
                            })
                        })
                    }
                    PluginRequest::Handle(identity, event) => {
                        let identity = types::Identity {
                            user: identity.user,
                            groups: identity.groups,
                        };
                        source
                            .call_handle(&mut instance.store, &identity, &convert::to_wit_event(&event))
                            .await
                            .map(|r| r.map(|()| PluginReply::Done))
                    }
                    PluginRequest::OnEvent(event) => source
                        .call_on_event(&mut instance.store, &convert::to_wit_host_event(event))
                        .await
                        .map(|r| r.map(|()| PluginReply::Done)),
                };
                instance.store.data_mut().pg.end_call(&self.name).await;
                match outcome {
                    Ok(answer) => (answer.map_err(convert::from_wit_error), Some(instance)),
                    Err(trap) => (Err(self.trapped(trap)), None),
                }
            })
            .await?
    }
}
