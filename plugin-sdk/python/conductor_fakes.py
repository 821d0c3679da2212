"""A fake conductor host for unit tests of Python plugins: the plugin's own module, run in plain
CPython (unittest or pytest), with no host, no WebAssembly and no componentize-py at test time but
its generated bindings.

The bindings are the `wit_world` stubs `componentize-py bindings` generates from the same world the
plugin is built against (their functions raise NotImplementedError); `FakeHost.install()` puts
in-memory capabilities in their place:

    host = FakeHost().install()       # before the plugin calls anything
    plugin = app.Plugin()
    plugin.init(json.dumps(config))
    plugin.handle(identity, event)
    assert host.kv["status/cluster1/web"] == b'{"conditions":[]}'
    assert host.logs[-1] == ("info", "status of cluster1/web stored (17 bytes)")

What it records, like the Rust SDK's `fakes::FakeHost`: `kv` (a dict), `logs` ((level, message)
pairs), `timers` (name -> (after_ms, repeat)), `emitted` (the events, `take_emitted()` empties
it), `metrics` ((name, (label values)) -> value: counters summed, gauges as last set); `blobs`
(name -> bytes) holds the files the plugin may read. `emit` answers `subscribers` (1 unless set). A plugin calls capabilities through their
modules (`kv.get(...)`, not `from wit_world.imports.kv import get`), so the fake reaches every call.
`pg` and `kube` are not faked: test SQL against a real PostgreSQL, as tests/maestro.rs does.
"""

import importlib


class FakeHost:
    def __init__(self, subscribers=1):
        self.kv = {}
        self.logs = []
        self.timers = {}
        self.emitted = []
        self.metrics = {}
        self.blobs = {}
        self.subscribers = subscribers
        self._patched = []

    def take_emitted(self):
        emitted, self.emitted = self.emitted, []
        return emitted

    def install(self):
        """Puts the fake in place of the capabilities the world imports; returns the fake."""
        fakes = {
            "emit": {"emit": self._emit},
            "log": {"log": self._log},
            "timer": {"set": self._set_timer, "cancel": self._cancel_timer},
            "kv": {"get": self._kv_get, "set": self._kv_set, "delete": self._kv_delete},
            "metrics": {"counter_add": self._counter_add, "gauge_set": self._gauge_set},
            "blob": {"read": self._blob_read},
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

    def uninstall(self):
        """Puts the generated stubs back."""
        for module, name, original in reversed(self._patched):
            setattr(module, name, original)
        self._patched = []

    def _emit(self, event):
        self.emitted.append(event)
        return self.subscribers

    def _log(self, level, message):
        self.logs.append((level.name.lower(), message))

    def _set_timer(self, name, after_ms, repeat):
        self.timers[name] = (after_ms, repeat)

    def _cancel_timer(self, name):
        self.timers.pop(name, None)

    def _kv_get(self, key):
        return self.kv.get(key)

    def _kv_set(self, key, value):
        self.kv[key] = bytes(value)

    def _kv_delete(self, key):
        return self.kv.pop(key, None) is not None

    def _counter_add(self, name, labels, value):
        if value < 0:
            raise ValueError(f"counter {name}: {value} is negative")
        key = (name, tuple(labels))
        self.metrics[key] = self.metrics.get(key, 0.0) + value

    def _gauge_set(self, name, labels, value):
        self.metrics[(name, tuple(labels))] = value

    def _blob_read(self, name):
        if name not in self.blobs:
            raise KeyError(f"no file named {name!r} (put it in FakeHost.blobs)")
        return self.blobs[name]
