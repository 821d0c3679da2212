//! WebAssembly component plugins (`wasm32-wasip2`), run by wasmtime: sandboxed, limited per call
//! (a linear-memory cap, and a wall-clock deadline: the guest yields to the async runtime every
//! epoch tick, so a busy plugin never holds a runtime thread, and is interrupted past its
//! deadline), linked only with the capabilities they were granted, and replaced instance by
//! instance when a call traps. Compilation runs on a blocking thread, never on an async worker.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use conductor_plugin_sdk::kube::KubeRequest;
use conductor_plugin_sdk::native::{PluginReply, PluginRequest};
use conductor_plugin_sdk::pg::{PgReply, PgRequest};
use conductor_plugin_sdk::{Capability, Description, Error};
use parking_lot::Mutex;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{Engine, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::capabilities::Capabilities;
use super::pg::PgSession;
use super::pool::{MakeInstance, Pool, Wait};
use super::{LoadError, Runtime};
use crate::config::PluginLimits;

/// The host's side of a guest's `pg.transaction` handle: its id in the instance's [`PgSession`].
pub struct TransactionHandle;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../plugin-sdk/wit",
        world: "conductor-plugin",
        imports: { default: async },
        exports: { default: async },
        with: {
            "conductor:plugin/pg.transaction": super::TransactionHandle,
        },
    });
}

use bindings::ConductorPlugin;
use bindings::conductor::plugin::{emit, kube, kv, log, pg, timer, types};

mod convert {
    conductor_plugin_sdk::__wit_conversions!(
        types = super::types,
        pg = super::pg,
        kube = super::kube,
        plugin = super::bindings::exports::conductor::plugin::plugin
    );
}

/// The epoch advances this often: a busy guest yields to the async runtime at least this often.
const EPOCH_TICK: Duration = Duration::from_millis(5);
const WIT_PACKAGE: &str = "conductor:plugin/";
/// How long past its deadline a call stuck in a host call is abandoned (a busy guest is
/// interrupted at the deadline itself).
const HOST_CALL_GRACE: Duration = Duration::from_millis(100);

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

/// Compiles a component on a blocking thread (cached by path, mtime and size, so inspecting,
/// loading and reloading an unchanged file compile once).
async fn compile(file: &Path) -> Result<Component, LoadError> {
    type Key = (PathBuf, SystemTime, u64);
    static CACHE: OnceLock<Mutex<HashMap<Key, Component>>> = OnceLock::new();
    let meta = std::fs::metadata(file).map_err(|source| LoadError::Open {
        path: file.to_owned(),
        source,
    })?;
    let key = (
        file.to_owned(),
        meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        meta.len(),
    );
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(c) = cache.lock().get(&key) {
        return Ok(c.clone());
    }
    let path = file.to_owned();
    let component = tokio::task::spawn_blocking(move || Component::from_file(engine(), &path))
        .await
        .map_err(|e| LoadError::Runtime(format!("compiling {}: {e}", file.display())))?
        .map_err(|e| LoadError::NotAPlugin {
            path: file.to_owned(),
            reason: format!("not a WebAssembly component: {e:#}"),
        })?;
    cache.lock().insert(key, component.clone());
    Ok(component)
}

/// The conductor interfaces a component imports, and whether it imports functions of each (a
/// capability it uses) or only types (which every component does for the types its exports
/// mention). Anything else but WASI is refused.
fn imported_interfaces(component: &Component) -> Result<Vec<(String, bool)>, LoadError> {
    let mut interfaces = Vec::new();
    for (name, import) in component.component_type().imports(engine()) {
        if let Some(rest) = name.strip_prefix(WIT_PACKAGE) {
            let interface = rest.split('@').next().unwrap_or(rest).to_owned();
            let uses_functions = match &import.ty {
                ComponentItem::ComponentInstance(instance) => instance
                    .exports(engine())
                    .any(|(_, e)| matches!(e.ty, ComponentItem::ComponentFunc(_))),
                _ => true,
            };
            interfaces.push((interface, uses_functions));
        } else if !name.starts_with("wasi:") {
            return Err(LoadError::Incompatible(format!(
                "imports {name:?}, which this host does not provide"
            )));
        }
    }
    Ok(interfaces)
}

/// The capabilities a component uses: the conductor interfaces it imports functions from.
fn used_capabilities(component: &Component) -> Result<Vec<Capability>, LoadError> {
    let mut caps = Vec::new();
    for (interface, uses_functions) in imported_interfaces(component)? {
        if !uses_functions || interface == "types" {
            continue;
        }
        match Capability::parse(&interface) {
            Some(c) => caps.push(c),
            None => {
                return Err(LoadError::Incompatible(format!(
                    "uses the interface {interface:?}, which this host does not have"
                )));
            }
        }
    }
    caps.sort();
    Ok(caps)
}

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    capabilities: Option<Arc<Capabilities>>,
    pg: PgSession,
    /// When the running call must have returned.
    deadline: Instant,
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
            deadline: Instant::now(),
        }
    }

    fn caps(&self) -> Arc<Capabilities> {
        Arc::clone(
            self.capabilities
                .as_ref()
                .expect("capabilities are linked only with a plugin's state"),
        )
    }

    async fn pg(&mut self, request: PgRequest) -> Result<PgReply, Error> {
        let caps = self.caps();
        self.pg.call(&caps, request).await
    }
}

/// A store whose calls yield every epoch tick and trap past `State::deadline`.
fn store(state: State) -> Store<State> {
    let mut store = Store::new(engine(), state);
    store.limiter(|s| &mut s.limits);
    store.epoch_deadline_callback(|ctx| {
        if Instant::now() >= ctx.data().deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            // tokio's own yield puts the task behind the others that are ready.
            Ok(UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now())))
        }
    });
    store
}

fn arm(store: &mut Store<State>, timeout: Duration) {
    store.data_mut().deadline = Instant::now() + timeout;
    store.set_epoch_deadline(1);
}

fn wit_error(e: Error) -> types::Error {
    convert::to_wit_error(e)
}

impl types::Host for State {}

impl emit::Host for State {
    async fn emit(&mut self, event: types::CloudEvent) -> Result<u32, types::Error> {
        self.caps().emit(&convert::from_wit_event(event)).map_err(wit_error)
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

fn unexpected_pg(reply: PgReply) -> types::Error {
    types::Error::Internal(format!("unexpected pg reply {reply:?}"))
}

fn transaction_id(handle: &Resource<TransactionHandle>) -> u64 {
    u64::from(handle.rep())
}

impl pg::HostTransaction for State {
    async fn query(
        &mut self,
        this: Resource<TransactionHandle>,
        sql: String,
        params: Vec<pg::Value>,
    ) -> Result<pg::Rows, types::Error> {
        let request = PgRequest::Query {
            database: String::new(),
            transaction: Some(transaction_id(&this)),
            sql,
            params: params.into_iter().map(convert::from_wit_value).collect(),
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Rows(rows) => Ok(convert::to_wit_rows(rows)),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn execute(
        &mut self,
        this: Resource<TransactionHandle>,
        sql: String,
        params: Vec<pg::Value>,
    ) -> Result<u64, types::Error> {
        let request = PgRequest::Execute {
            database: String::new(),
            transaction: Some(transaction_id(&this)),
            sql,
            params: params.into_iter().map(convert::from_wit_value).collect(),
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Affected(n) => Ok(n),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn advisory_lock(
        &mut self,
        this: Resource<TransactionHandle>,
        key: pg::LockKey,
        wait: bool,
    ) -> Result<bool, types::Error> {
        let request = PgRequest::AdvisoryLock {
            transaction: transaction_id(&this),
            key: convert::from_wit_lock_key(key),
            wait,
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Locked(taken) => Ok(taken),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn commit(&mut self, this: Resource<TransactionHandle>) -> Result<(), types::Error> {
        let transaction = transaction_id(&this);
        self.pg(PgRequest::Commit { transaction })
            .await
            .map(drop)
            .map_err(wit_error)
    }

    async fn drop(&mut self, this: Resource<TransactionHandle>) -> wasmtime::Result<()> {
        // Committed transactions are gone from the session already; any other is rolled back.
        let transaction = transaction_id(&this);
        let _ = self.pg(PgRequest::Rollback { transaction }).await;
        Ok(())
    }
}

impl pg::Host for State {
    async fn query(&mut self, database: String, sql: String, params: Vec<pg::Value>) -> Result<pg::Rows, types::Error> {
        let request = PgRequest::Query {
            database,
            transaction: None,
            sql,
            params: params.into_iter().map(convert::from_wit_value).collect(),
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Rows(rows) => Ok(convert::to_wit_rows(rows)),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn execute(&mut self, database: String, sql: String, params: Vec<pg::Value>) -> Result<u64, types::Error> {
        let request = PgRequest::Execute {
            database,
            transaction: None,
            sql,
            params: params.into_iter().map(convert::from_wit_value).collect(),
        };
        match self.pg(request).await.map_err(wit_error)? {
            PgReply::Affected(n) => Ok(n),
            other => Err(unexpected_pg(other)),
        }
    }

    async fn begin(&mut self, database: String) -> Result<Resource<TransactionHandle>, types::Error> {
        match self.pg(PgRequest::Begin { database }).await.map_err(wit_error)? {
            PgReply::Begun(id) => {
                let rep = u32::try_from(id).map_err(|_| types::Error::Internal("transaction ids ran out".into()))?;
                Ok(Resource::new_own(rep))
            }
            other => Err(unexpected_pg(other)),
        }
    }

    async fn listen(&mut self, database: String, channel: String) -> Result<(), types::Error> {
        self.pg(PgRequest::Listen { database, channel })
            .await
            .map(drop)
            .map_err(wit_error)
    }
}

impl State {
    async fn kube(&mut self, request: KubeRequest) -> Result<conductor_plugin_sdk::kube::KubeReply, types::Error> {
        self.caps().kube(request).await.map_err(wit_error)
    }
}

fn unexpected_kube(reply: conductor_plugin_sdk::kube::KubeReply) -> types::Error {
    types::Error::Internal(format!("unexpected kube reply {reply:?}"))
}

impl kube::Host for State {
    async fn watch(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        selector: kube::Selector,
    ) -> Result<(), types::Error> {
        let request = KubeRequest::Watch {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            selector: convert::from_wit_selector(selector),
        };
        self.kube(request).await.map(drop)
    }

    async fn get(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, types::Error> {
        let request = KubeRequest::Get {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            name,
        };
        match self.kube(request).await? {
            conductor_plugin_sdk::kube::KubeReply::MaybeObject(o) => Ok(o),
            other => Err(unexpected_kube(other)),
        }
    }

    async fn list(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        selector: kube::Selector,
    ) -> Result<Vec<String>, types::Error> {
        let request = KubeRequest::List {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            selector: convert::from_wit_selector(selector),
        };
        match self.kube(request).await? {
            conductor_plugin_sdk::kube::KubeReply::Objects(o) => Ok(o),
            other => Err(unexpected_kube(other)),
        }
    }

    async fn create(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        object: String,
    ) -> Result<String, types::Error> {
        let request = KubeRequest::Create {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            object,
        };
        self.kube_object(request).await
    }

    async fn update(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        object: String,
        subresource: Option<String>,
    ) -> Result<String, types::Error> {
        let request = KubeRequest::Update {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            object,
            subresource,
        };
        self.kube_object(request).await
    }

    async fn patch(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        name: String,
        patch: String,
        subresource: Option<String>,
    ) -> Result<String, types::Error> {
        let request = KubeRequest::Patch {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            name,
            patch,
            subresource,
        };
        self.kube_object(request).await
    }

    async fn delete(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        name: String,
    ) -> Result<(), types::Error> {
        let request = KubeRequest::Delete {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            name,
        };
        self.kube(request).await.map(drop)
    }

    async fn create_token(&mut self, namespace: String, name: String, request: String) -> Result<String, types::Error> {
        self.kube_object(KubeRequest::CreateToken {
            namespace,
            name,
            request,
        })
        .await
    }
}

impl State {
    async fn kube_object(&mut self, request: KubeRequest) -> Result<String, types::Error> {
        match self.kube(request).await? {
            conductor_plugin_sdk::kube::KubeReply::Object(o) => Ok(o),
            other => Err(unexpected_kube(other)),
        }
    }
}

/// A linker with WASI and exactly the granted conductor capabilities; the conductor interfaces
/// a component imports only types of are defined empty.
fn linker(capabilities: &Capabilities, component: &Component) -> Result<Linker<State>, LoadError> {
    let wasm = |e: wasmtime::Error| LoadError::Incompatible(format!("{e:#}"));
    let mut linker = Linker::<State>::new(engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasm)?;
    types::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wasm)?;
    let mut linked = vec!["types".to_owned()];
    for capability in Capability::ALL {
        if !capabilities.granted(capability) {
            continue;
        }
        match capability {
            Capability::Emit => emit::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Log => log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Timer => timer::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Kv => kv::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Pg => pg::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
            Capability::Kube => kube::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s),
        }
        .map_err(wasm)?;
        linked.push(capability.name().to_owned());
    }
    for (name, _) in component.component_type().imports(engine()) {
        let Some(rest) = name.strip_prefix(WIT_PACKAGE) else {
            continue;
        };
        let interface = rest.split('@').next().unwrap_or(rest);
        if !linked.iter().any(|l| l == interface) {
            // Only types are imported (checked at load): an empty instance satisfies it.
            linker.instance(name).map_err(wasm)?;
        }
    }
    Ok(linker)
}

/// A component instantiated with WASI only (its capability imports trap), for `describe` and
/// `check-config`.
async fn sandboxed(component: &Component) -> Result<(Store<State>, ConductorPlugin), LoadError> {
    let mut linker = Linker::<State>::new(engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| LoadError::Incompatible(format!("{e:#}")))?;
    stub_conductor_imports(&mut linker, component).map_err(|e| LoadError::Incompatible(format!("{e:#}")))?;
    let mut store = store(State::new(None, 64 << 20));
    arm(&mut store, Duration::from_secs(5));
    let plugin = ConductorPlugin::instantiate_async(&mut store, component, &linker)
        .await
        .map_err(|e| LoadError::Incompatible(format!("not a conductor:plugin component: {e:#}")))?;
    Ok((store, plugin))
}

/// Defines every conductor function a component imports as a trap, and its resources as
/// resources nobody can make. Only conductor imports: WASI stays linked by version (a component
/// importing `wasi:cli/environment@0.2.9` is served by the host's 0.2.x through semver matching;
/// `Linker::define_unknown_imports_as_traps` would define that exact name as a trap first, and a
/// guest whose runtime reads its environment in `describe` — CPython, for one — would trap).
fn stub_conductor_imports(linker: &mut Linker<State>, component: &Component) -> wasmtime::Result<()> {
    for (name, import) in component.component_type().imports(engine()) {
        if !name.starts_with(WIT_PACKAGE) {
            continue;
        }
        let ComponentItem::ComponentInstance(instance) = import.ty else {
            continue;
        };
        let mut stubs = linker.instance(name)?;
        for (item, export) in instance.exports(engine()) {
            match export.ty {
                ComponentItem::ComponentFunc(_) => {
                    let what = format!("{name}#{item}");
                    stubs.func_new(item, move |_, _, _, _| {
                        Err(wasmtime::format_err!(
                            "{what}: no capability is linked in describe and check-config"
                        ))
                    })?;
                }
                ComponentItem::Resource(_) => {
                    stubs.resource(
                        item,
                        wasmtime::component::ResourceType::host::<TransactionHandle>(),
                        |_, _| Ok(()),
                    )?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Reads a component's description and the capabilities it uses, running nothing but
/// `describe`.
pub async fn describe(file: &Path) -> Result<(Component, Description, Vec<Capability>), LoadError> {
    let component = compile(file).await?;
    let capabilities = used_capabilities(&component)?;
    let (mut store, plugin) = sandboxed(&component).await?;
    let d = plugin
        .conductor_plugin_plugin()
        .call_describe(&mut store)
        .await
        .map_err(|e| LoadError::Incompatible(format!("describe failed: {e:#}")))?;
    let mut description = convert::from_wit_description(d);
    description.capabilities = capabilities.clone();
    Ok((component, description, capabilities))
}

/// Asks a component whether it takes `config`, with no capability linked.
pub async fn check_config(component: &Component, config: &str) -> Result<(), Error> {
    let (mut store, plugin) = sandboxed(component).await.map_err(|e| Error::Internal(e.to_string()))?;
    plugin
        .conductor_plugin_plugin()
        .call_check_config(&mut store, config)
        .await
        .map_err(|e| Error::Internal(format!("check-config trapped: {e:#}")))?
        .map_err(convert::from_wit_error)
}

struct Instance {
    store: Store<State>,
    plugin: ConductorPlugin,
}

pub struct WasmRuntime {
    pool: Pool<Instance>,
    call_timeout: Duration,
    name: String,
}

impl WasmRuntime {
    /// Starts the first instance of `component` (already described and checked).
    pub async fn load(
        component: &Component,
        capabilities: Arc<Capabilities>,
        pool_size: usize,
        limits: &PluginLimits,
        config_json: String,
    ) -> Result<Self, LoadError> {
        let imported = imported_interfaces(component)?;
        let missing: Vec<String> = imported
            .iter()
            .filter(|(interface, uses_functions)| {
                *uses_functions
                    && interface != "types"
                    && Capability::parse(interface).is_none_or(|c| !capabilities.granted(c))
            })
            .map(|(interface, _)| interface.clone())
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
        let linker = linker(&capabilities, component)?;
        let pre = linker
            .instantiate_pre(component)
            .map_err(|e| LoadError::Incompatible(format!("{e:#}")))?;
        let pre = bindings::ConductorPluginPre::new(pre).map_err(|e| LoadError::Incompatible(format!("{e:#}")))?;
        let memory = limits.memory.as_usize();
        let call_timeout = limits.call_timeout.0;
        let name = capabilities.plugin().to_owned();
        let make: MakeInstance<Instance> = Arc::new(move || {
            let pre = pre.clone();
            let capabilities = Arc::clone(&capabilities);
            let config_json = config_json.clone();
            Box::pin(async move {
                let name = capabilities.plugin().to_owned();
                let mut store = store(State::new(Some(capabilities), memory));
                arm(&mut store, call_timeout);
                let plugin = pre
                    .instantiate_async(&mut store)
                    .await
                    .map_err(|e| Error::Internal(format!("instantiating the plugin failed: {e:#}")))?;
                let init = plugin
                    .conductor_plugin_plugin()
                    .call_init(&mut store, &config_json)
                    .await
                    .map_err(|e| Error::Internal(format!("plugin init trapped: {e:#}")));
                store.data_mut().pg.end_call(&name).await;
                init?.map_err(convert::from_wit_error)?;
                Ok(Instance { store, plugin })
            })
        });
        let first = make().await.map_err(LoadError::Init)?;
        Ok(Self {
            pool: Pool::new(&name, pool_size, limits.acquire_timeout.0, first, make),
            call_timeout,
            name,
        })
    }

    /// A failed call's error: a trap becomes an internal error naming what happened.
    fn trapped(&self, error: wasmtime::Error) -> Error {
        let reason = match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => format!("exceeded its call timeout of {:?}", self.call_timeout),
            _ => format!("trapped: {error:#}"),
        };
        tracing::warn!(plugin = %self.name, %reason, "plugin call failed; replacing the instance");
        Error::Internal(format!("plugin {} {reason}", self.name))
    }

    async fn run(
        &self,
        instance: &mut Instance,
        request: PluginRequest,
    ) -> wasmtime::Result<Result<PluginReply, Error>> {
        let source = instance.plugin.conductor_plugin_plugin();
        let store = &mut instance.store;
        let done = |r: Result<(), types::Error>| r.map(|()| PluginReply::Done).map_err(convert::from_wit_error);
        Ok(match request {
            PluginRequest::Start => done(source.call_start(store).await?),
            PluginRequest::List(options) => source
                .call_list(store, &convert::to_wit_list_options(options))
                .await?
                .map(|events| PluginReply::Listed(events.into_iter().map(convert::from_wit_event).collect()))
                .map_err(convert::from_wit_error),
            PluginRequest::Handle(identity, event) => done(
                source
                    .call_handle(
                        store,
                        &convert::to_wit_identity(identity),
                        &convert::to_wit_event(&event),
                    )
                    .await?,
            ),
            PluginRequest::OnEvents(events) => {
                let events: Vec<_> = events.into_iter().map(convert::to_wit_host_event).collect();
                done(source.call_on_events(store, &events).await?)
            }
        })
    }
}

#[async_trait]
impl Runtime for WasmRuntime {
    async fn call(&self, request: PluginRequest, wait: Wait) -> Result<PluginReply, Error> {
        self.pool
            .with(wait, async |mut instance: Instance| {
                arm(&mut instance.store, self.call_timeout);
                // The epoch callback bounds the guest's own time (and reports it as such); this
                // bounds time spent waiting in host calls, just after.
                let outcome =
                    tokio::time::timeout(self.call_timeout + HOST_CALL_GRACE, self.run(&mut instance, request)).await;
                instance.store.data_mut().pg.end_call(&self.name).await;
                match outcome {
                    Ok(Ok(answer)) => (answer, Some(instance)),
                    Ok(Err(trap)) => (Err(self.trapped(trap)), None),
                    Err(_elapsed) => {
                        tracing::warn!(plugin = %self.name, timeout = ?self.call_timeout, "plugin call timed out in a host call; replacing the instance");
                        (
                            Err(Error::Unavailable(format!(
                                "plugin {} exceeded its call timeout of {:?}",
                                self.name, self.call_timeout
                            ))),
                            None,
                        )
                    }
                }
            })
            .await?
    }

    fn instances(&self) -> usize {
        self.pool.instances()
    }
}
