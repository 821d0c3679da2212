"""Unit tests of the SDK's glue (`conductor_sdk`), in plain CPython against the generated
`wit_world` stubs (scripts/build-polyglot-plugins.sh runs them with the bindings on the path):

    PYTHONPATH=<bindings>:plugin-sdk/python/src python3 -m unittest discover -s plugin-sdk/python/tests
"""

import hashlib
import importlib
import linecache
import os
import random
import shutil
import sys
import tempfile
import unittest
import uuid
from unittest import mock

import conductor_sdk
from componentize_py_types import Err, Ok
from wit_world.exports.plugin import Request
from wit_world.imports.types import Error_Internal, Error_Invalid


class Version(unittest.TestCase):
    def test_the_package_version_is_the_contracts(self):
        import conductor_plugin_wit

        self.assertEqual(conductor_sdk.CONTRACT, conductor_sdk.__version__)
        self.assertEqual(
            conductor_sdk.CONTRACT, conductor_plugin_wit.contract_version(), "move __version__ with the contract"
        )


class Hashes(unittest.TestCase):
    def test_pure_sha1_is_sha1(self):
        # FIPS 180 examples, then every length across the padding boundaries and random data.
        self.assertEqual(conductor_sdk.sha1_pure(b"abc").hex(), "a9993e364706816aba3e25717850c26c9cd0d89d")
        self.assertEqual(conductor_sdk.sha1_pure(b"").hex(), "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        self.assertEqual(
            conductor_sdk.sha1_pure(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").hex(),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
        )
        rng = random.Random(26)
        for n in list(range(0, 200)) + [1000, 4096, 10_001]:
            data = bytes(rng.randrange(256) for _ in range(n))
            self.assertEqual(conductor_sdk.sha1_pure(data), hashlib.sha1(data).digest(), n)
        self.assertEqual(conductor_sdk.sha1_pure("é"), hashlib.sha1("é".encode()).digest())
        self.assertEqual(conductor_sdk.sha1(b"abc"), hashlib.sha1(b"abc").digest())

    def test_uuid5_is_cpythons_with_hashlib_and_without(self):
        namespaces = [
            (conductor_sdk.NAMESPACE_DNS, uuid.NAMESPACE_DNS),
            (conductor_sdk.NAMESPACE_URL, uuid.NAMESPACE_URL),
            (conductor_sdk.NAMESPACE_OID, uuid.NAMESPACE_OID),
            (conductor_sdk.NAMESPACE_X500, uuid.NAMESPACE_X500),
        ]
        custom = uuid.UUID("0f5e6a4c-2d1b-4e8a-9c3f-7a1b2c3d4e5f")
        names = ["", "python.org", "cluster1/web", "ünïcødé/名前", "x" * 300]
        for without_hashlib in (False, True):
            with mock.patch.object(conductor_sdk, "_hashlib", None if without_hashlib else hashlib):
                # CPython's documented example.
                self.assertEqual(
                    conductor_sdk.uuid5(conductor_sdk.NAMESPACE_DNS, "python.org"),
                    "886313e1-3b8a-5372-9b90-0c9aee199e5d",
                )
                for ours, theirs in namespaces:
                    for name in names:
                        self.assertEqual(conductor_sdk.uuid5(ours, name), str(uuid.uuid5(theirs, name)), name)
                for namespace in (custom, str(custom), custom.bytes, custom.urn, str(custom).upper()):
                    self.assertEqual(conductor_sdk.uuid5(namespace, "web"), str(uuid.uuid5(custom, "web")))
                # Bytes names (CPython 3.11's uuid5 takes str only): its algorithm on the bytes.
                self.assertEqual(
                    conductor_sdk.uuid5(custom, b"\x00\xff"), str(uuid.UUID(bytes=_uuid5_bytes(custom, b"\x00\xff")))
                )

    def test_uuid5_refuses_what_is_not_a_uuid(self):
        for bad in ("not-a-uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c", b"short", 12):
            with self.assertRaises(ValueError, msg=repr(bad)):
                conductor_sdk.uuid5(bad, "x")
        with self.assertRaises(TypeError):
            conductor_sdk.uuid5(conductor_sdk.NAMESPACE_DNS, 12)

    def test_stable_hash_is_fnv1a_64(self):
        # The FNV reference values.
        self.assertEqual(conductor_sdk.stable_hash(""), 0xCBF29CE484222325)
        self.assertEqual(conductor_sdk.stable_hash("a"), 0xAF63DC4C8601EC8C)
        self.assertEqual(conductor_sdk.stable_hash(b"foobar"), 0x85944171F73967E8)
        self.assertEqual(conductor_sdk.stable_hash("é"), conductor_sdk.stable_hash("é".encode()))


def _uuid5_bytes(namespace, name):
    """uuid.uuid5 on raw bytes as CPython computes it (its `name` must be str or bytes)."""
    digest = bytearray(hashlib.sha1(namespace.bytes + name).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    return bytes(digest)


class Guard(unittest.TestCase):
    def plugin(self):
        class Plugin(conductor_sdk.Plugin):
            def describe(self):
                return "described"

            def check_config(self, config):
                if config == "bad":
                    raise Err(Error_Invalid("config: bad"))

            def init(self, config):
                return helper(config)

            def start(self):
                pass

            def list(self, options):
                return [options]

            def handle(self, identity, event):
                raise KeyError(event)

            def on_events(self, events):
                raise SystemExit(3)

        def helper(config):
            return 1 // int(config)

        return Plugin()

    def test_an_uncaught_exception_is_an_internal_error_with_its_traceback(self):
        p = self.plugin()
        with self.assertRaises(Err) as raised:
            p.init("0")
        error = raised.exception.value
        self.assertIsInstance(error, Error_Internal)
        lines = error.value.splitlines()
        self.assertEqual(lines[0], "uncaught exception in init:")
        self.assertEqual(lines[1], "Traceback (most recent call last):")
        self.assertIn("in helper", error.value)
        self.assertIn(os.path.basename(__file__), error.value)
        self.assertTrue(lines[-1].startswith("ZeroDivisionError: "), lines[-1])

        with self.assertRaises(Err) as raised:
            p.handle(None, "evt")
        self.assertTrue(raised.exception.value.value.endswith("KeyError: 'evt'"), raised.exception.value)
        with self.assertRaises(Err) as raised:
            p.on_events([])
        self.assertIn("SystemExit: 3", raised.exception.value.value)

    def test_a_traceback_the_traceback_module_cannot_format_is_still_reported(self):
        # In a component, a module `traceback` imports late may be missing: the frames are walked
        # by hand then.
        p = self.plugin()
        with mock.patch.object(conductor_sdk.traceback, "format_exception", side_effect=ModuleNotFoundError("x")):
            with self.assertRaises(Err) as raised:
                p.init("0")
        lines = raised.exception.value.value.splitlines()
        self.assertEqual(lines[:2], ["uncaught exception in init:", "Traceback (most recent call last):"])
        self.assertRegex(lines[-2], r'^  File ".*test_conductor_sdk.py", line \d+, in helper$')
        self.assertTrue(lines[-1].startswith("ZeroDivisionError: "), lines[-1])

    def test_the_traceback_starts_at_the_plugins_frame(self):
        with self.assertRaises(Err) as raised:
            self.plugin().init("0")
        self.assertNotIn("in guarded", raised.exception.value.value)
        self.assertIn("return helper(config)", raised.exception.value.value)

    def test_in_a_component_the_files_are_named_as_the_project_names_them_with_their_lines(self):
        # As in a component: the plugin's module is read while it is built (here: from a folder
        # standing for componentize-py's mount), then its file is gone when it raises.
        mount = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, mount, True)
        with open(os.path.join(mount, "mounted_app.py"), "w") as f:
            f.write("def start():\n    raise RuntimeError('a deliberate bug')\n")
        sys.path.insert(0, mount)
        self.addCleanup(sys.path.remove, mount)
        self.addCleanup(sys.modules.pop, "mounted_app", None)
        module = importlib.import_module("mounted_app")
        filename = module.__file__
        self.addCleanup(linecache.cache.pop, filename, None)
        conductor_sdk.keep_sources((mount,))
        shutil.rmtree(mount)
        linecache.checkcache()
        with self.assertRaises(Err) as raised:
            conductor_sdk.guard("start", module.start)()
        text = raised.exception.value.value
        self.assertIn(f'File "{filename}", line 2, in start\n', text)
        self.assertIn("\n    raise RuntimeError('a deliberate bug')\n", text)
        # A mount (`/<i>/`) is named by the i-th of the build's ROOTS.
        with mock.patch.object(conductor_sdk, "_ROOTS", ("src/", "build/sources")):
            named = conductor_sdk._project_names('  File "/0/app.py", line 3, in handle\n  File "/1/x.py", line 1')
        self.assertEqual(named, '  File "src/app.py", line 3, in handle\n  File "build/sources/x.py", line 1')
        self.assertEqual(conductor_sdk._mount_of("/12/app.py"), "/12")
        self.assertIsNone(conductor_sdk._mount_of("/python/lib/json/__init__.py"))

    def test_what_the_plugin_answers_is_unchanged(self):
        p = self.plugin()
        with self.assertRaises(Err) as raised:
            p.check_config("bad")
        self.assertEqual(raised.exception.value, Error_Invalid("config: bad"))
        self.assertIsNone(p.check_config("good"))
        self.assertEqual(p.init("2"), 0)
        self.assertEqual(p.list("options"), ["options"])
        self.assertEqual(p.describe(), "described")
        # describe has no error channel: it is left as it is.
        self.assertFalse(getattr(type(p).describe, "_conductor_guarded", False))
        self.assertEqual(type(p).handle.__name__, "handle")

    def test_a_subclass_of_a_plugin_is_guarded_once(self):
        base = type(self.plugin())

        class Derived(base):
            def start(self):
                raise ValueError("derived")

        with self.assertRaises(Err) as raised:
            Derived().start()
        message = raised.exception.value.value
        self.assertEqual(message.count("uncaught exception in start"), 1, message)
        self.assertTrue(message.endswith("ValueError: derived"), message)


class Exports(conductor_sdk.Plugin):
    """Every export but `handle`, doing nothing (the world's `Plugin` declares them abstract)."""

    def describe(self):
        pass

    def check_config(self, config):
        pass

    def init(self, config):
        pass

    def start(self):
        pass

    def list(self, options):
        return []

    def on_events(self, events):
        pass


class HandleBatch(unittest.TestCase):
    """The default `handle_batch`: each request to `handle` in turn, one result each."""

    def plugin(self):
        class Plugin(Exports):
            def __init__(self):
                self.handled = []

            def handle(self, identity, event):
                self.handled.append((identity, event))
                if event.startswith("bad"):
                    raise Err(Error_Invalid(f"{event}: refused"))
                if event.startswith("bug"):
                    return {}[event]

        return Plugin()

    def test_a_refused_request_fails_alone_and_every_request_is_handled_in_order(self):
        p = self.plugin()
        requests = [Request("cluster1", "first"), Request("cluster2", "bad second"), Request("cluster3", "third")]
        self.assertEqual(
            p.handle_batch(requests), [Ok(None), Err(Error_Invalid("bad second: refused")), Ok(None)]
        )
        self.assertEqual(p.handled, [("cluster1", "first"), ("cluster2", "bad second"), ("cluster3", "third")])

    def test_an_uncaught_exception_is_its_requests_internal_error(self):
        p = self.plugin()
        results = p.handle_batch([Request("c", "bug"), Request("c", "next")])
        self.assertEqual(len(results), 2)
        self.assertIsInstance(results[0], Err)
        error = results[0].value
        self.assertIsInstance(error, Error_Internal)
        self.assertTrue(error.value.startswith("uncaught exception in handle:\nTraceback"), error.value)
        self.assertIn("return {}[event]", error.value)
        self.assertTrue(error.value.endswith("KeyError: 'bug'"), error.value)
        self.assertEqual(results[1], Ok(None))
        self.assertEqual([e for _, e in p.handled], ["bug", "next"])
        self.assertEqual(p.handle_batch([]), [])

    def test_a_handle_not_guarded_is_answered_the_same(self):
        # A `handle` put on the class after it was defined is not wrapped: the default still
        # answers its exception as that request's `internal` error.
        p = self.plugin()
        type(p).handle = lambda self, identity, event: 1 // 0
        results = p.handle_batch([Request("c", "x")])
        self.assertIn("uncaught exception in handle:", results[0].value.value)
        self.assertIn("ZeroDivisionError", results[0].value.value)

    def test_an_exception_escaping_an_override_answers_every_request(self):
        class Batching(Exports):
            def handle(self, identity, event):
                pass

            def handle_batch(self, requests):
                if requests[0].event == "refuse all":
                    raise Err(Error_Invalid("the batch is refused"))
                if requests[0].event == "bug":
                    raise RuntimeError("a bug in the batch")
                return [Ok(None) if r.event != "bad" else Err(Error_Invalid("bad")) for r in requests]

        p = Batching()
        self.assertEqual(p.handle_batch([Request("c", "ok"), Request("c", "bad")]), [Ok(None), Err(Error_Invalid("bad"))])
        refused = Err(Error_Invalid("the batch is refused"))
        self.assertEqual(p.handle_batch([Request("c", "refuse all"), Request("c", "x")]), [refused, refused])
        results = p.handle_batch([Request("c", "bug"), Request("c", "x"), Request("c", "y")])
        self.assertEqual(len(results), 3)
        for result in results:
            message = result.value.value
            self.assertTrue(message.startswith("uncaught exception in handle_batch:\n"), message)
            self.assertNotIn("in guarded", message)
            self.assertTrue(message.endswith("RuntimeError: a bug in the batch"), message)
        self.assertEqual(Batching.handle_batch.__name__, "handle_batch")

        class Derived(Batching):
            pass

        self.assertIs(Derived.handle_batch, Batching.handle_batch, "guarded once")


if __name__ == "__main__":
    unittest.main()


class FakeRequests(unittest.TestCase):
    """`conductor_sdk.fakes`' `requests`: what waits, handed to the running `handle_batch`."""

    def setUp(self):
        # The stubs of a world importing `requests`, as componentize-py generates them.
        import types

        stub = types.ModuleType("wit_world.imports.requests")

        def take_waiting(max):
            raise NotImplementedError

        stub.take_waiting = take_waiting
        patcher = mock.patch.dict(sys.modules, {"wit_world.imports.requests": stub})
        patcher.start()
        self.addCleanup(patcher.stop)
        self.stub = stub

    def test_take_waiting_hands_over_what_waits_oldest_first_at_most_max(self):
        from conductor_sdk.fakes import FakeHost

        host = FakeHost().install()
        self.addCleanup(host.uninstall)
        host.waiting.extend(["a", "b", "c"])
        self.assertEqual(self.stub.take_waiting(2), ["a", "b"])
        self.assertEqual(self.stub.take_waiting(5), ["c"])
        self.assertEqual(self.stub.take_waiting(5), [])
        host.uninstall()
        with self.assertRaises(NotImplementedError):
            self.stub.take_waiting(1)
