//! The sandbox of one instance: its store's data (WASI with nothing inherited but stdout and
//! stderr, which go to the plugin's log; the memory cap, the plugin's capabilities and database
//! session, the running call's deadline) and the store that yields every epoch tick and traps past
//! the deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use conductor_plugin_sdk::Error;
use conductor_plugin_sdk::pg::{PgReply, PgRequest};
use wasmtime::component::ResourceTable;
use wasmtime::{Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::output::{Output, Tail};

use super::bindings::conductor::plugin::types;
use super::bindings::convert;
use super::engine::engine;
use super::epoch::Running;
use crate::plugins::capabilities::{Capabilities, OutputStream, PgSession};

pub(super) struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: Limiter,
    capabilities: Option<Arc<Capabilities>>,
    pub(super) pg: PgSession,
    /// When the running call must have returned.
    deadline: Instant,
    /// What a sandboxed instance (no capabilities) wrote last.
    tail: Option<Arc<parking_lot::Mutex<Tail>>>,
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
    /// An instance's state: with `capabilities`, its stdout and stderr go to the plugin's log;
    /// without (describe, check-config), their last lines are kept for [`Self::output_tail`].
    pub(super) fn new(capabilities: Option<Arc<Capabilities>>, memory: usize) -> Self {
        let mut wasi = WasiCtx::builder();
        let tail = match &capabilities {
            Some(caps) => {
                wasi.stdout(Output::log(Arc::clone(caps), OutputStream::Stdout))
                    .stderr(Output::log(Arc::clone(caps), OutputStream::Stderr));
                None
            }
            None => {
                let tail = Arc::default();
                wasi.stdout(Output::keep(Arc::clone(&tail)))
                    .stderr(Output::keep(Arc::clone(&tail)));
                Some(tail)
            }
        };
        Self {
            wasi: wasi.build(),
            tail,
            table: ResourceTable::new(),
            limits: Limiter {
                limits: StoreLimitsBuilder::new()
                    .memory_size(memory)
                    .trap_on_grow_failure(true)
                    .build(),
                held: 0,
                refused: false,
                gauge: capabilities.as_ref().map(|c| c.metrics().memory()),
            },
            capabilities,
            pg: PgSession::default(),
            deadline: Instant::now(),
        }
    }

    /// What a sandboxed instance wrote last, as a suffix for the error of its failed call ("" if
    /// nothing, or if its output went to the plugin's log).
    pub(super) fn output_tail(&self) -> String {
        self.tail.as_ref().map(|t| t.lock().suffix()).unwrap_or_default()
    }

    /// The linear memory the instance holds.
    pub(super) fn memory_held(&self) -> usize {
        self.limits.held
    }

    /// Whether the instance asked for more memory than its limit (and trapped).
    pub(super) fn ran_out_of_memory(&self) -> bool {
        self.limits.refused
    }

    pub(super) fn caps(&self) -> Arc<Capabilities> {
        Arc::clone(
            self.capabilities
                .as_ref()
                .expect("capabilities are linked only with a plugin's state"),
        )
    }

    pub(super) async fn pg(&mut self, request: PgRequest) -> Result<PgReply, Error> {
        let caps = self.caps();
        self.pg.call(caps.pg(), request).await
    }
}

/// The memory limit of one instance, and the linear memory it holds, counted into the plugin's
/// `conductor_plugin_memory_bytes` (and out again when the instance is dropped).
struct Limiter {
    limits: StoreLimits,
    held: usize,
    /// A growth past the limit was asked for.
    refused: bool,
    gauge: Option<prometheus::IntGauge>,
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum);
        self.refused |= !matches!(allowed, Ok(true));
        let allowed = allowed?;
        if allowed {
            let grown = desired.saturating_sub(current);
            self.held += grown;
            if let Some(gauge) = &self.gauge {
                gauge.add(i64::try_from(grown).unwrap_or(i64::MAX));
            }
        }
        Ok(allowed)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl Drop for Limiter {
    fn drop(&mut self) {
        if let Some(gauge) = &self.gauge {
            gauge.sub(i64::try_from(self.held).unwrap_or(i64::MAX));
        }
    }
}

/// A store whose calls yield every epoch tick and trap past `State::deadline`.
pub(super) fn store(state: State) -> Store<State> {
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

/// Arms `store` for a call of at most `timeout`; the call counts as running (for the epoch's
/// pace) while the returned guard is held.
pub(super) fn arm(store: &mut Store<State>, timeout: Duration) -> Running {
    store.data_mut().deadline = Instant::now() + timeout;
    store.set_epoch_deadline(1);
    Running::start()
}

pub(super) fn wit_error(e: Error) -> types::Error {
    convert::to_wit_error(e)
}
