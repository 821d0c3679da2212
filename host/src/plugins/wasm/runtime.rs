//! Linking (WASI and exactly the granted capabilities), instantiation, the pool of instances, and
//! the calls: each runs under the instance's deadline, and a trap replaces the instance.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use conductor_plugin_sdk::native::{PluginReply, PluginRequest};
use conductor_plugin_sdk::{Capability, Description, Error};
use wasmtime::Store;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker};

use super::bindings::conductor::plugin::types;
use super::bindings::{self, ConductorPlugin, TransactionHandle, convert};
use super::engine::{UNGRANTED, WIT_PACKAGE, compile, engine, imported_interfaces, used_capabilities};
use super::imports;
use super::state::{State, arm, store};
use crate::config::PluginLimits;
use crate::plugins::capabilities::Capabilities;
use crate::plugins::pool::{MakeInstance, Pool};
use crate::plugins::runtime::{CallError, LoadError, Runtime, Wait};
use crate::telemetry::PluginMetrics;

/// How long past its deadline a call stuck in a host call is abandoned (a busy guest is
/// interrupted at the deadline itself).
const HOST_CALL_GRACE: Duration = Duration::from_millis(100);

/// A linker with WASI and exactly the granted conductor capabilities; the conductor interfaces
/// a component imports only types of are defined empty.
fn linker(capabilities: &Capabilities, component: &Component) -> Result<Linker<State>, LoadError> {
    let wasm = |e: wasmtime::Error| LoadError::Incompatible(format!("{e:#}"));
    let mut linker = Linker::<State>::new(engine());
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasm)?;
    imports::add_types_to_linker(&mut linker).map_err(wasm)?;
    imports::add_requests_to_linker(&mut linker).map_err(wasm)?;
    let mut linked: Vec<String> = UNGRANTED.iter().map(|i| (*i).to_owned()).collect();
    for capability in Capability::ALL {
        if !capabilities.granted(capability) {
            continue;
        }
        imports::add_to_linker(&mut linker, capability).map_err(wasm)?;
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
    let _running = arm(&mut store, Duration::from_secs(5));
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
/// `describe`; its bytes must hash to `expected` when given. Also returns their digest.
pub async fn describe(
    file: &Path,
    expected: Option<&str>,
) -> Result<(Component, Description, Vec<Capability>, String), LoadError> {
    let (component, digest) = compile(file, expected).await?;
    let capabilities = used_capabilities(&component)?;
    let (mut store, plugin) = sandboxed(&component).await?;
    let d = plugin
        .conductor_plugin_plugin()
        .call_describe(&mut store)
        .await
        .map_err(|e| LoadError::Incompatible(format!("describe failed: {e:#}{}", store.data().output_tail())))?;
    let mut description = convert::from_wit_description(d);
    description.capabilities = capabilities.clone();
    Ok((component, description, capabilities, digest))
}

/// Asks a component whether it takes `config`, with no capability linked.
pub async fn check_config(component: &Component, config: &str) -> Result<(), Error> {
    let (mut store, plugin) = sandboxed(component).await.map_err(|e| Error::Internal(e.to_string()))?;
    plugin
        .conductor_plugin_plugin()
        .call_check_config(&mut store, config)
        .await
        .map_err(|e| Error::Internal(format!("check-config trapped: {e:#}{}", store.data().output_tail())))?
        .map_err(convert::from_wit_error)
}

struct Instance {
    store: Store<State>,
    plugin: ConductorPlugin,
    /// Calls it answered.
    calls: u64,
}

pub struct WasmRuntime {
    pool: Pool<Instance>,
    call_timeout: Duration,
    name: String,
    /// Replace an instance after a call once its linear memory passed this…
    recycle_above: usize,
    /// …or once it answered this many calls (0: never).
    max_calls: u64,
    metrics: PluginMetrics,
}

/// What one call into the plugin asks, in the contract's types, converted once (the event's
/// strings and data moved, not copied): a call that runs again on a fresh instance passes the
/// same values. One lives per call, on the stack: the size of its largest variant costs nothing a
/// box would save.
#[allow(clippy::large_enum_variant)]
enum WitRequest {
    Start,
    List(bindings::exports::conductor::plugin::plugin::ListOptions),
    Handle(types::Identity, types::CloudEvent),
    HandleBatch(Vec<bindings::exports::conductor::plugin::plugin::Request>),
    OnEvents(Vec<bindings::exports::conductor::plugin::plugin::HostEvent>),
}

impl From<PluginRequest> for WitRequest {
    fn from(request: PluginRequest) -> Self {
        match request {
            PluginRequest::Start => Self::Start,
            PluginRequest::List(options) => Self::List(convert::to_wit_list_options(options)),
            PluginRequest::Handle(identity, event) => {
                Self::Handle(convert::to_wit_identity(identity), convert::into_wit_event(event))
            }
            PluginRequest::HandleBatch(requests) => Self::HandleBatch(
                requests
                    .into_iter()
                    .map(|r| bindings::exports::conductor::plugin::plugin::Request {
                        identity: convert::to_wit_identity(r.identity),
                        event: convert::into_wit_event(r.event),
                    })
                    .collect(),
            ),
            PluginRequest::OnEvents(events) => {
                Self::OnEvents(events.into_iter().map(convert::to_wit_host_event).collect())
            }
        }
    }
}

/// How one attempt of a call ended.
enum Attempt {
    Done(Result<PluginReply, CallError>),
    /// The instance ran out of memory: the call may run once more on a fresh one.
    OutOfMemory(CallError),
}

impl Attempt {
    fn into_result(self) -> Result<PluginReply, CallError> {
        match self {
            Attempt::Done(r) => r,
            Attempt::OutOfMemory(e) => Err(e),
        }
    }
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
                    && !UNGRANTED.contains(&interface.as_str())
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
        capabilities.metrics().set_memory_limit(memory);
        let call_timeout = limits.call_timeout.0;
        let name = capabilities.plugin().to_owned();
        let metrics = capabilities.metrics().clone();
        let make: MakeInstance<Instance> = Arc::new(move || {
            let pre = pre.clone();
            let capabilities = Arc::clone(&capabilities);
            let config_json = config_json.clone();
            Box::pin(async move {
                let name = capabilities.plugin().to_owned();
                let mut store = store(State::new(Some(capabilities), memory));
                let running = arm(&mut store, call_timeout);
                let plugin = pre
                    .instantiate_async(&mut store)
                    .await
                    .map_err(|e| Error::Internal(format!("instantiating the plugin failed: {e:#}")))?;
                let init = plugin
                    .conductor_plugin_plugin()
                    .call_init(&mut store, &config_json)
                    .await
                    .map_err(|e| Error::Internal(format!("plugin init trapped: {e:#}")));
                drop(running);
                store.data_mut().pg.end_call(&name).await;
                init?.map_err(convert::from_wit_error)?;
                Ok(Instance {
                    store,
                    plugin,
                    calls: 0,
                })
            })
        });
        let first = make().await.map_err(LoadError::Init)?;
        Ok(Self {
            pool: Pool::new(&name, pool_size, limits.acquire_timeout.0, first, make),
            call_timeout,
            name,
            recycle_above: limits.recycle_above(),
            max_calls: limits.max_calls_per_instance,
            metrics,
        })
    }

    /// Why an instance that just answered a call is to be replaced, if it is.
    fn retirement(&self, instance: &Instance) -> Option<&'static str> {
        if instance.store.data().memory_held() > self.recycle_above {
            Some("memory")
        } else if self.max_calls > 0 && instance.calls >= self.max_calls {
            Some("calls")
        } else {
            None
        }
    }

    /// One attempt of `call` on `instance`: the outcome, and the instance if it may serve again.
    async fn attempt(&self, mut instance: Instance, call: &WitRequest) -> (Attempt, Option<Instance>) {
        let running = arm(&mut instance.store, self.call_timeout);
        // The epoch callback bounds the guest's own time (and reports it as such); this bounds
        // time spent waiting in host calls, just after.
        let outcome = tokio::time::timeout(self.call_timeout + HOST_CALL_GRACE, self.run(&mut instance, call)).await;
        drop(running);
        instance.store.data_mut().pg.end_call(&self.name).await;
        match outcome {
            Ok(Ok(answer)) => {
                instance.calls += 1;
                match self.retirement(&instance) {
                    None => (Attempt::Done(answer.map_err(CallError::from)), Some(instance)),
                    Some(reason) => {
                        tracing::debug!(plugin = %self.name, reason, memory = instance.store.data().memory_held(), calls = instance.calls, "replacing an instance after its call");
                        self.metrics.recycled(reason);
                        drop(instance);
                        self.pool.replace_in_background();
                        (Attempt::Done(answer.map_err(CallError::from)), None)
                    }
                }
            }
            Ok(Err(trap)) if instance.store.data().ran_out_of_memory() => {
                self.metrics.recycled("out_of_memory");
                (Attempt::OutOfMemory(self.trapped(trap)), None)
            }
            Ok(Err(trap)) => (Attempt::Done(Err(self.trapped(trap))), None),
            Err(_elapsed) => {
                tracing::warn!(plugin = %self.name, timeout = ?self.call_timeout, "plugin call timed out in a host call; replacing the instance");
                let timed_out = CallError::TimedOut {
                    plugin: self.name.clone(),
                    timeout: self.call_timeout,
                };
                (Attempt::Done(Err(timed_out)), None)
            }
        }
    }

    /// A failed call's error: a trap becomes an internal error naming what happened (an
    /// interrupt at the deadline, [`CallError::Interrupted`]).
    fn trapped(&self, error: wasmtime::Error) -> CallError {
        let interrupted = matches!(error.downcast_ref::<wasmtime::Trap>(), Some(wasmtime::Trap::Interrupt));
        let reason = if interrupted {
            format!("exceeded its call timeout of {:?}", self.call_timeout)
        } else {
            format!("trapped: {error:#}")
        };
        tracing::warn!(plugin = %self.name, %reason, "plugin call failed; replacing the instance");
        if interrupted {
            CallError::Interrupted {
                plugin: self.name.clone(),
                timeout: self.call_timeout,
            }
        } else {
            CallError::Failed(Error::Internal(format!("plugin {} {reason}", self.name)))
        }
    }

    async fn run(&self, instance: &mut Instance, request: &WitRequest) -> wasmtime::Result<Result<PluginReply, Error>> {
        let source = instance.plugin.conductor_plugin_plugin();
        let store = &mut instance.store;
        let done = |r: Result<(), types::Error>| r.map(|()| PluginReply::Done).map_err(convert::from_wit_error);
        Ok(match request {
            WitRequest::Start => done(source.call_start(store).await?),
            WitRequest::List(options) => source
                .call_list(store, options)
                .await?
                .map(|events| PluginReply::Listed(events.into_iter().map(convert::from_wit_event).collect()))
                .map_err(convert::from_wit_error),
            WitRequest::Handle(identity, event) => done(source.call_handle(store, identity, event).await?),
            WitRequest::HandleBatch(requests) => Ok(PluginReply::Handled(
                source
                    .call_handle_batch(store, requests)
                    .await?
                    .into_iter()
                    .map(|r| r.map_err(convert::from_wit_error))
                    .collect(),
            )),
            WitRequest::OnEvents(events) => done(source.call_on_events(store, events).await?),
        })
    }
}

#[async_trait]
impl Runtime for WasmRuntime {
    async fn call(&self, request: PluginRequest, wait: Wait) -> Result<PluginReply, CallError> {
        let request = WitRequest::from(request);
        let first = self.pool.with(wait, async |i| self.attempt(i, &request).await).await?;
        match first {
            // Host events never run again here: their queue redelivers what fails.
            Attempt::OutOfMemory(e) if matches!(request, WitRequest::OnEvents(_)) => Err(e),
            Attempt::OutOfMemory(e) => {
                tracing::info!(plugin = %self.name, error = %e, "an instance ran out of memory; the call runs once more on a fresh instance");
                self.pool
                    .with_new_instance(wait, async |i| self.attempt(i, &request).await)
                    .await?
                    .into_result()
            }
            done => done.into_result(),
        }
    }

    fn instances(&self) -> usize {
        self.pool.instances()
    }
}
