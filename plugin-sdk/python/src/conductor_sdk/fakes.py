"""`conductor_sdk.fakes`: a fake conductor host for unit tests of Python plugins: the plugin's own module, run in plain
CPython (unittest or pytest), with no host, no WebAssembly and no componentize-py at test time but
its generated bindings.

The bindings are the `wit_world` stubs `componentize-py bindings` generates from the same world the
plugin is built against (their functions raise NotImplementedError); `FakeHost.install()` puts
in-memory capabilities in their place:

    from conductor_sdk.fakes import FakeHost

    host = FakeHost().install()       # before the plugin calls anything
    plugin = app.Plugin()
    plugin.init(json.dumps(config))
    plugin.handle(identity, event)
    assert host.kv["status/cluster1/web"] == b'{"conditions":[]}'
    assert host.logs[-1] == ("info", "status of cluster1/web stored (17 bytes)")
    # requests that waited together, as the host hands them over: one result each
    # (`Request` of wit_world.exports.plugin, `Ok` of componentize_py_types)
    assert plugin.handle_batch([Request(identity, event)]) == [Ok(None)]

What it records, like the Rust SDK's `fakes::FakeHost`: `kv` (a dict), `logs` ((level, message)
pairs), `timers` (name -> (after_ms, repeat)), `emitted` (the events, `take_emitted()` empties
it), `metrics` ((name, (label values)) -> value: counters summed, gauges as last set); `blobs`
(name -> bytes) holds the files the plugin may read; `waiting` holds the requests
(`wit_world.imports.requests.Waiting`, oldest first) that `requests.take_waiting` hands the running
`handle_batch`, as the host hands over what arrives while a batch runs. `emit` answers `subscribers` (1 unless set). A plugin calls capabilities through their
modules (`kv.get(...)`, not `from wit_world.imports.kv import get`), so the fake reaches every call.
`pg` and `kube` are not faked: test SQL against a real PostgreSQL, as tests/maestro.rs does.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Optional, Tuple


class FakeHost:
    """In-memory `emit`, `log`, `timer`, `kv`, `metrics`, `blob` and `requests`, recording what the plugin did."""

    kv: Dict[str, bytes]
    logs: List[Tuple[str, str]]
    timers: Dict[str, Tuple[int, bool]]
    emitted: List[Any]
    metrics: Dict[Tuple[str, Tuple[str, ...]], float]
    blobs: Dict[str, bytes]
    waiting: List[Any]

    def __init__(self, subscribers: int = 1) -> None:
        self.kv = {}
        self.logs = []
        self.timers = {}
        self.emitted = []
        self.metrics = {}
        self.blobs = {}
        self.waiting = []
        self.subscribers = subscribers
        self._patched = []

    def take_emitted(self) -> List[Any]:
        emitted, self.emitted = self.emitted, []
        return emitted

    def install(self) -> "FakeHost":
        """Puts the fake in place of the capabilities the world imports; returns the fake."""
        fakes = {
            "emit": {"emit": self._emit},
            "log": {"log": self._log},
            "timer": {"set": self._set_timer, "cancel": self._cancel_timer},
            "kv": {"get": self._kv_get, "set": self._kv_set, "delete": self._kv_delete},
            "metrics": {"counter_add": self._counter_add, "gauge_set": self._gauge_set},
            "blob": {"read": self._blob_read},
            "requests": {"take_waiting": self._take_waiting},
        }
        for interface, functions in fakes.items():
            try:
                module = importlib.import_module(f"wit_world.imports.{interface}")
            except ModuleNotFoundError:
                continue  # the plugin's world does not import this capability
            for name, fake in functions.items():
                self._patched.append((module, name, getattr(module, name)))
                setattr(module, name, fake)
        return self

    def uninstall(self) -> None:
        """Puts the generated stubs back."""
        for module, name, original in reversed(self._patched):
            setattr(module, name, original)
        self._patched = []

    def _emit(self, event: Any) -> int:
        self.emitted.append(event)
        return self.subscribers

    def _log(self, level: Any, message: str) -> None:
        self.logs.append((level.name.lower(), message))

    def _set_timer(self, name: str, after_ms: int, repeat: bool) -> None:
        self.timers[name] = (after_ms, repeat)

    def _cancel_timer(self, name: str) -> None:
        self.timers.pop(name, None)

    def _kv_get(self, key: str) -> Optional[bytes]:
        return self.kv.get(key)

    def _kv_set(self, key: str, value: bytes) -> None:
        self.kv[key] = bytes(value)

    def _kv_delete(self, key: str) -> bool:
        return self.kv.pop(key, None) is not None

    def _counter_add(self, name: str, labels: List[str], value: float) -> None:
        if value < 0:
            raise ValueError(f"counter {name}: {value} is negative")
        key = (name, tuple(labels))
        self.metrics[key] = self.metrics.get(key, 0.0) + value

    def _gauge_set(self, name: str, labels: List[str], value: float) -> None:
        self.metrics[(name, tuple(labels))] = value

    def _blob_read(self, name: str) -> bytes:
        if name not in self.blobs:
            raise KeyError(f"no file named {name!r} (put it in FakeHost.blobs)")
        return self.blobs[name]

    def _take_waiting(self, max: int) -> List[Any]:
        taken, self.waiting = self.waiting[:max], self.waiting[max:]
        return taken
