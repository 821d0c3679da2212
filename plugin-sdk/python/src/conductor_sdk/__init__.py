"""The Python side of the conductor plugin SDK, for plugins built with componentize-py: what every
plugin needs and the interpreter in a component does not give it. Installed as the package
`conductor-plugin-sdk` (`pip install <conductor>/plugin-sdk/python`), whose version is the
contract's (`CONTRACT`); its modules need the `wit_world` bindings of the plugin's world
(`componentize-py … bindings`), as the plugin does.

- `Plugin`: the base of a plugin's `class Plugin`. Every export with an error channel
  (`check_config`, `init`, `start`, `list`, `handle`, `on_events`) is wrapped: a raised
  `Err(...)` goes to the host as it is, and any other exception — a bug — becomes the contract's
  `internal` error whose message is the traceback. Without the wrapper componentize-py traps on it:
  the agent sees `wasm trap: wasm 'unreachable' instruction executed` and the instance is
  replaced. With it the agent sees an InternalError (500) holding the traceback, the host logs it
  and counts it in the plugin's last error, and the instance serves on. `describe` has no error
  channel: an exception there still traps, and its traceback is in what `plugins inspect` and the
  log show (the host keeps the plugin's stderr).
  `handle_batch` (requests that waited for the plugin together) has a default: each request goes
  to `handle` in turn, and answers with its own result — `Ok(None)`, or the `Err` it raised (an
  uncaught exception the `internal` error), so a refused request fails alone and the others still
  run. A plugin overriding it returns one `Ok(None)` or `Err(error)` per request, in their order;
  an exception escaping the override answers every request of the batch with it (`guard_batch`).
- `guard(name, function)`: the same wrapping, for a function of your own; `guard_batch(name,
  function)` the wrapping of `handle_batch`.
- `sha1(data)`, `uuid5(namespace, name)`: SHA-1 and name-based UUIDs, the same as CPython's
  `hashlib.sha1` and `uuid.uuid5` (`uuid5` returns the string form). `hashlib` is used where the
  interpreter has it, a pure-Python SHA-1 otherwise.
- `stable_hash(data)`: a 64-bit FNV-1a hash of a string or bytes, the same in every process and
  every language (Python's own `hash()` of a string is salted per process).
- `CONTRACT`: the contract version this SDK is built for (`conductor:plugin@CONTRACT`).

Tracebacks in a component: componentize-py runs the plugin's module once while it builds the
component, with the folders of the app's path mounted at `/0`, `/1`, … (in the order of its `-p`
options, the virtual environment's site-packages last); once the component runs, no file is
reachable. So the SDK keeps the source lines of the plugin's modules when the plugin's class is
defined (`keep_sources`), for its tracebacks to show them, and names each file as the project
does when the build says which folder each mount is: a module `_conductor_sources` on the app's
path whose `ROOTS` lists them, the i-th naming `/i` (the build scripts of `conductor plugins new`
write it), so `File "/0/app.py"` reads `File "src/app.py"`.

Beside it: `conductor_sdk.ocm` (OCM event encoders and status parsers, as the Rust SDK's `ocm`
module), `conductor_sdk.fakes` (a fake host for unit tests) and, in the same package,
`conductor_plugin_wit` (the world generator).

    import conductor_sdk

    class Plugin(conductor_sdk.Plugin):
        def handle(self, identity, event):
            ...   # an exception that is not Err answers `internal`, with its traceback
"""

from __future__ import annotations

import functools
import linecache
import struct
import sys
import traceback
from typing import Any, Callable, List, TypeVar, Union

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports.types import Error_Internal

try:  # imported here, at build time, so the component holds it (see the guide's module table)
    import hashlib as _hashlib
except ImportError:  # pragma: no cover - an interpreter built without it
    _hashlib = None

# The contract this SDK is built for, and the package's version (the same: a test fails if the
# package's version, this or plugin-sdk/wit/plugin.wit's package declaration differ).
__version__ = "0.6.4"
CONTRACT = __version__

# A string, or bytes.
Data = Union[str, bytes, bytearray, memoryview]
F = TypeVar("F", bound=Callable[..., Any])

# The exports of `interface plugin` that answer `result<_, error>`, by their Python names.
EXPORTS = ("check_config", "init", "start", "list", "handle", "on_events")
# The exports of `interface plugin` that answer one `result<_, error>` per request
# (`list<result<_, error>>`): `Ok(None)` or `Err(error)`, in the requests' order.
BATCH_EXPORTS = ("handle_batch",)

# RFC 4122's namespaces, as CPython's `uuid` names them.
NAMESPACE_DNS = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
NAMESPACE_URL = "6ba7b811-9dad-11d1-80b4-00c04fd430c8"
NAMESPACE_OID = "6ba7b812-9dad-11d1-80b4-00c04fd430c8"
NAMESPACE_X500 = "6ba7b814-9dad-11d1-80b4-00c04fd430c8"


try:  # written by the build (see above); absent in plain CPython
    from _conductor_sources import ROOTS as _ROOTS  # type: ignore[import-not-found]
except ImportError:
    _ROOTS = ()


def _mount_of(filename: str) -> "str | None":
    """`/<i>` when `filename` is under a folder componentize-py mounted (`/0/app.py`), else None."""
    head, sep, _ = filename[1:].partition("/")
    return f"/{head}" if filename.startswith("/") and sep and head.isdigit() else None


def keep_sources(prefixes: "tuple[str, ...] | None" = None) -> None:
    """Keeps in `linecache` the source lines of every module loaded from under `prefixes` (by
    default: the folders componentize-py mounted), as entries it never checks against a file:
    in a component, the files are read while it is built and gone when it runs."""
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str):
            continue
        if not (filename.startswith(prefixes) if prefixes is not None else _mount_of(filename)):
            continue
        entry = linecache.cache.get(filename)
        if entry is not None and len(entry) == 4 and entry[1] is None:
            continue  # kept already
        lines = linecache.getlines(filename)
        if lines:
            linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)


def _project_names(text: str) -> str:
    """`text` with each mounted folder named as the build names it (`_conductor_sources`)."""
    for i, root in enumerate(_ROOTS):
        text = text.replace(f'File "/{i}/', f'File "{root.rstrip("/")}/')
    return text


def _plain_traceback(exception: BaseException) -> str:
    """The frames and the exception, without `traceback` (what it cannot format)."""
    lines = ["Traceback (most recent call last):"]
    tb = exception.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        lines.append(f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}')
        tb = tb.tb_next
    try:
        lines.append(f"{type(exception).__qualname__}: {exception}")
    except BaseException:  # noqa: BLE001 - a __str__ that raises
        lines.append(f"{type(exception).__qualname__}: <unprintable>")
    return "\n".join(lines)


def format_traceback(exception: BaseException) -> str:
    """`exception`'s traceback as CPython prints it (chained exceptions and notes included), its
    files named as the project names them."""
    try:
        text = "".join(traceback.format_exception(type(exception), exception, exception.__traceback__)).rstrip()
    except BaseException:  # noqa: BLE001 - never let the report of a bug become a trap
        text = _plain_traceback(exception)
    return _project_names(text)


def internal_error(export: str, exception: BaseException) -> Err:
    """The contract's `internal` error for `exception` escaping `export`: its traceback."""
    return Err(Error_Internal(f"uncaught exception in {export}:\n{format_traceback(exception)}"))


def guard(export: str, function: F) -> F:
    """`function` with any exception but `Err` turned into the contract's `internal` error."""
    if getattr(function, "_conductor_guarded", False):
        return function

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Err:
            raise
        except BaseException as e:  # noqa: BLE001 - every escape is a bug the host must see
            if e.__traceback__ is not None and e.__traceback__.tb_next is not None:
                e.__traceback__ = e.__traceback__.tb_next  # from the plugin's frame on, not this one
            raise internal_error(export, e) from None

    guarded._conductor_guarded = True  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]


def guard_batch(export: str, function: F) -> F:
    """`function` (which answers a list of requests with one result each) with any exception
    escaping it answered as every request's result: an `Err` as it is, anything else as the
    contract's `internal` error. `handle-batch` has no error channel of its own: without this an
    exception traps, and every request of the batch hears the trap."""
    if getattr(function, "_conductor_guarded", False):
        return function

    @functools.wraps(function)
    def guarded(self: Any, requests: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(self, requests, *args, **kwargs)
        except Err as e:
            return [e] * len(requests)
        except BaseException as e:  # noqa: BLE001 - every escape is a bug the host must see
            if e.__traceback__ is not None and e.__traceback__.tb_next is not None:
                e.__traceback__ = e.__traceback__.tb_next  # from the plugin's frame on, not this one
            return [internal_error(export, e)] * len(requests)

    guarded._conductor_guarded = True  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]


def _warm_up() -> None:
    """Formats a few tracebacks while the module is imported. In a component the module is
    imported at build time, and only what was imported then is there at run time: the modules
    `traceback` imports only when it formats (source lines, name suggestions) are loaded now."""
    for raising in (lambda: {}["key"], lambda: undefined_name, lambda: None.attribute, lambda: 1 // 0):  # noqa: F821
        try:
            try:
                raising()
            except Exception as cause:
                raise ValueError("warm-up") from cause
        except ValueError as e:
            format_traceback(e)


_warm_up()


class Plugin(exports.Plugin):
    """Base class of a plugin: its exports (`EXPORTS`) are wrapped with `guard` as the subclass is
    defined, an override of `handle_batch` (`BATCH_EXPORTS`) with `guard_batch`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in EXPORTS:
            function = cls.__dict__.get(name)
            if callable(function):
                setattr(cls, name, guard(name, function))
        for name in BATCH_EXPORTS:
            function = cls.__dict__.get(name)
            if callable(function):
                setattr(cls, name, guard_batch(name, function))
        # In a component: the last moment the plugin's files are readable (see above).
        keep_sources()

    def handle_batch(self, requests: List[Any]) -> List[Union[Ok[None], Err[Any]]]:
        """Agent → hub events that waited for the plugin together, oldest first (each a
        `wit_world.exports.plugin.Request`: `identity`, `event`): one result per request, in
        their order, each going back to its own caller. The host calls `handle` for a request
        that waited alone and this for two or more. By default each request goes to `handle` in
        turn: `Ok(None)`, or the `Err` it raised — an uncaught exception the `internal` error
        with its traceback — so a refused request fails alone and the next ones still run.
        Override it to do the batch's work at once (one transaction for many status updates),
        keeping each request's own answer."""
        results: List[Union[Ok[None], Err[Any]]] = []
        for request in requests:
            try:
                self.handle(request.identity, request.event)
                results.append(Ok(None))
            except Err as e:
                results.append(e)
            except BaseException as e:  # noqa: BLE001 - a `handle` not guarded (defined elsewhere)
                results.append(internal_error("handle", e))
        return results


def _bytes(data: Data) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected str or bytes, not {type(data).__name__}")


def _rotl(x: int, n: int) -> int:
    return ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF


def sha1_pure(data: Data) -> bytes:
    """SHA-1 (FIPS 180-4) of `data` in plain Python: the 20-byte digest."""
    data = _bytes(data)
    h = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0]
    padded = data + b"\x80" + b"\x00" * ((55 - len(data)) % 64) + struct.pack(">Q", len(data) * 8)
    for at in range(0, len(padded), 64):
        w = list(struct.unpack(">16I", padded[at : at + 64]))
        for i in range(16, 80):
            w.append(_rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1))
        a, b, c, d, e = h
        for i in range(80):
            if i < 20:
                f, k = (b & c) | (~b & d), 0x5A827999
            elif i < 40:
                f, k = b ^ c ^ d, 0x6ED9EBA1
            elif i < 60:
                f, k = (b & c) | (b & d) | (c & d), 0x8F1BBCDC
            else:
                f, k = b ^ c ^ d, 0xCA62C1D6
            a, b, c, d, e = (_rotl(a, 5) + f + e + k + w[i]) & 0xFFFFFFFF, a, _rotl(b, 30), c, d
        h = [(x + y) & 0xFFFFFFFF for x, y in zip(h, (a, b, c, d, e))]
    return struct.pack(">5I", *h)


def sha1(data: Data) -> bytes:
    """SHA-1 of `data` (str as UTF-8, or bytes): the 20-byte digest."""
    if _hashlib is not None:
        return _hashlib.sha1(_bytes(data)).digest()
    return sha1_pure(data)


def _uuid_bytes(namespace: Any) -> bytes:
    if isinstance(namespace, (bytes, bytearray)) and len(namespace) == 16:
        return bytes(namespace)
    text = str(namespace)  # a uuid.UUID prints as its string form
    hex_digits = text.replace("-", "").lower()
    if text.startswith("urn:uuid:"):
        hex_digits = text[len("urn:uuid:") :].replace("-", "").lower()
    if len(hex_digits) != 32 or any(c not in "0123456789abcdef" for c in hex_digits):
        raise ValueError(f"not a UUID: {namespace!r}")
    return bytes.fromhex(hex_digits)


def format_uuid(raw: bytes) -> str:
    """The 16 bytes `raw` as a UUID string (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`)."""
    x = raw.hex()
    return f"{x[0:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:32]}"


def uuid5(namespace: Any, name: Data) -> str:
    """The name-based (SHA-1) UUID of `name` (str as UTF-8, or bytes) in `namespace` (a UUID
    string, a `uuid.UUID` or 16 bytes), as a string: `str(uuid.uuid5(namespace, name))`."""
    digest = bytearray(sha1(_uuid_bytes(namespace) + _bytes(name))[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    return format_uuid(bytes(digest))


def stable_hash(data: Data) -> int:
    """64-bit FNV-1a of `data` (str as UTF-8, or bytes), an int in [0, 2**64): the same in every
    process and every language."""
    h = 0xCBF29CE484222325
    for b in _bytes(data):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h
