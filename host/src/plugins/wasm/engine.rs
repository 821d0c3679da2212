//! The process-wide wasmtime engine (component model, epoch interruption, the thread that ticks
//! the epoch: [`epoch`]), compilation, and what a compiled component imports.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use conductor_plugin_sdk::Capability;
use parking_lot::Mutex;
use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use super::{compiled, epoch};
use crate::plugins::runtime::LoadError;

pub(super) const WIT_PACKAGE: &str = "conductor:plugin/";

/// The conductor interfaces every component may import, granted or not: the shared types, and
/// the line of requests a batch call may take from (it reaches nothing outside the plugin).
pub(super) const UNGRANTED: [&str; 2] = ["types", "requests"];

/// The process-wide engine: async host functions, epoch interruption, the component model.
pub(super) fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        // Guest code named in a profile: `perf` reads the map the engine writes (/tmp/perf-<pid>.map).
        if std::env::var_os("CONDUCTOR_WASM_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).expect("a valid wasmtime configuration");
        epoch::start_ticker(engine.weak());
        engine
    })
}

/// Compiles a component on a blocking thread from the bytes of `file`, which must hash to
/// `expected` when given (the digest an artifact was verified by: what is loaded is exactly what
/// was verified); returns it and the digest of the bytes it was made from. Cached in memory by
/// that digest, so inspecting, loading and reloading the same bytes compile once; and on disk,
/// see [`compiled`], so a restart does not compile again.
pub(super) async fn compile(file: &Path, expected: Option<&str>) -> Result<(Component, String), LoadError> {
    static CACHE: OnceLock<Mutex<HashMap<String, Component>>> = OnceLock::new();
    let path = file.to_owned();
    let expected = expected.map(str::to_owned);
    tokio::task::spawn_blocking(move || {
        let bytes = std::fs::read(&path).map_err(|source| LoadError::Open {
            path: path.clone(),
            source,
        })?;
        let digest = crate::oci::sha256_digest(&bytes);
        if let Some(expected) = expected
            && expected != digest
        {
            return Err(LoadError::NotAPlugin {
                path: path.clone(),
                reason: format!("its bytes have digest {digest}, not the verified {expected}"),
            });
        }
        if let Some(reason) = not_a_component(&bytes) {
            return Err(LoadError::NotAPlugin { path, reason });
        }
        let cache = CACHE.get_or_init(Mutex::default);
        if let Some(c) = cache.lock().get(&digest) {
            return Ok((c.clone(), digest));
        }
        let component = compiled::compile_or_load(engine(), &path, &bytes).map_err(|e| LoadError::NotAPlugin {
            path: path.clone(),
            reason: format!("not a WebAssembly component: {e:#}"),
        })?;
        cache.lock().insert(digest.clone(), component.clone());
        Ok((component, digest))
    })
    .await
    .map_err(|e| LoadError::Runtime(format!("compiling {}: {e}", file.display())))?
}

/// Why `bytes` are not a WebAssembly component, told from their first bytes in a few words (the
/// parser's refusal dumps the header it expected byte by byte); none when they start as one.
fn not_a_component(bytes: &[u8]) -> Option<String> {
    const MAGIC: &[u8] = b"\0asm";
    /// A component's version and layer after the magic; a core module has version 1, layer 0.
    const CORE_MODULE: &[u8] = &[1, 0, 0, 0];
    let head = &bytes[..bytes.len().min(8)];
    Some(if bytes.is_empty() {
        "not a WebAssembly component (the file is empty)".to_owned()
    } else if bytes.starts_with(b"\x7fELF") {
        "not a WebAssembly component (an ELF file: a native library is loaded with kind = \"native\")".to_owned()
    } else if !bytes.starts_with(MAGIC) {
        let start = if head.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            format!("{:?}", String::from_utf8_lossy(head))
        } else {
            head.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
        };
        format!("not a WebAssembly component (it starts with {start})")
    } else if bytes.get(4..8) == Some(CORE_MODULE) {
        "not a WebAssembly component but a core module: build it for wasm32-wasip2, or make a component of it (`wasm-tools component new`)".to_owned()
    } else {
        return None;
    })
}

/// The conductor interfaces a component imports, and whether it imports functions of each (a
/// capability it uses) or only types (which every component does for the types its exports
/// mention). Anything else but WASI is refused.
pub(super) fn imported_interfaces(component: &Component) -> Result<Vec<(String, bool)>, LoadError> {
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

/// Whether a component takes waiting requests into its `handle-batch` calls (it imports
/// `requests.take-waiting`).
pub fn takes_waiting(component: &Component) -> bool {
    imported_interfaces(component).is_ok_and(|imports| {
        imports
            .iter()
            .any(|(interface, uses_functions)| interface == "requests" && *uses_functions)
    })
}

/// The capabilities a component uses: the conductor interfaces it imports functions from.
pub(super) fn used_capabilities(component: &Component) -> Result<Vec<Capability>, LoadError> {
    let mut caps = Vec::new();
    for (interface, uses_functions) in imported_interfaces(component)? {
        if !uses_functions || UNGRANTED.contains(&interface.as_str()) {
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

#[cfg(test)]
mod tests {
    use super::not_a_component;

    #[test]
    fn what_is_not_a_component_is_said_in_a_few_words() {
        let text = not_a_component(b"hello world\n").unwrap();
        assert_eq!(text, r#"not a WebAssembly component (it starts with "hello wo")"#);
        let binary = not_a_component(&[0xff, 0xd8, 0xff, 0xe0, 0, 0x10]).unwrap();
        assert_eq!(binary, "not a WebAssembly component (it starts with ff d8 ff e0 00 10)");
        assert!(not_a_component(b"\x7fELF\x02\x01\x01\0").unwrap().contains("ELF"));
        assert!(not_a_component(b"").unwrap().contains("empty"));
        let module = not_a_component(b"\0asm\x01\0\0\0").unwrap();
        assert!(module.contains("core module"), "{module}");
        assert_eq!(not_a_component(b"\0asm\x0d\0\x01\0"), None, "a component's preamble");
    }
}
