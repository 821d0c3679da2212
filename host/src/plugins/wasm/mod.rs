//! WebAssembly component plugins (`wasm32-wasip2`), run by wasmtime: sandboxed, limited per call
//! (a linear-memory cap, and a wall-clock deadline: the guest yields to the async runtime every
//! epoch tick, so a busy plugin never holds a runtime thread, and is interrupted past its
//! deadline), linked only with the capabilities they were granted, and replaced instance by
//! instance when a call traps. Compilation runs on a blocking thread, never on an async worker.
//!
//! - `bindings`: the world's host side, generated from the WIT, and its conversions;
//! - `engine`: the engine, compilation, and what a component imports;
//! - `compiled`: compiled components kept on disk between runs;
//! - `state`: one instance's sandbox (its store and limits);
//! - `output`: its stdout and stderr, line by line into the plugin's log;
//! - `imports`: the host side of each capability interface;
//! - `runtime`: linking, instantiation, the pool of instances and the calls.

mod bindings;
mod compiled;
mod engine;
mod epoch;
mod imports;
mod output;
mod runtime;
mod state;

pub use bindings::TransactionHandle;
pub use compiled::{set_folder as set_compile_cache, set_max_size as set_compile_cache_max_size};
pub use engine::takes_waiting;
pub use runtime::{WasmRuntime, check_config, describe};
