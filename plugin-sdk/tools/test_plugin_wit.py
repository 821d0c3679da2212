"""Tests of plugin_wit.py (scripts/build-polyglot-plugins.sh runs them):

    python3 -m unittest discover -s plugin-sdk/tools
"""

import pathlib
import re
import tempfile
import unittest

import plugin_wit

CONTRACT = pathlib.Path(__file__).resolve().parent.parent / "wit"


def interface(text, name):
    """The body of `interface name { … }` in generated WIT."""
    items, _ = plugin_wit.split_items(text)
    for item in items:
        if plugin_wit.code_of(item).startswith(f"interface {name} "):
            return plugin_wit.block_parts(item)[1]
    raise AssertionError(f"no interface {name}")


def functions(body):
    code = re.sub(r"//[^\n]*", "", body)
    return re.findall(r"([%\w-]+)\s*:\s*(?:static\s+|async\s+)?func\b", code)


class DerivedWorld(unittest.TestCase):
    def test_capabilities_not_named_keep_their_types_only(self):
        text = plugin_wit.generate(CONTRACT, ["emit", "log", "timer", "kv"], "conductor-source")
        contract = (CONTRACT / "plugin.wit").read_text()
        self.assertIn(re.search(r"^package [^;]+;", contract, re.M).group(0), text)
        for name in ["pg", "kube"]:
            body = interface(text, name)
            self.assertEqual(functions(body), [], name)
            self.assertNotIn("resource transaction", body)
        self.assertIn("record notification", interface(text, "pg"))
        self.assertIn("record watch-event", interface(text, "kube"))
        self.assertEqual(functions(interface(text, "kv")), ["get", "set", "delete"])
        self.assertEqual(functions(interface(text, "emit")), ["emit"])
        self.assertEqual(
            len(functions(interface(text, "plugin"))), 7, "the exported interface is untouched"
        )
        world = text[text.index("world conductor-source") :]
        self.assertEqual(re.findall(r"import ([\w-]+);", world), ["emit", "log", "timer", "kv"])
        self.assertIn("export plugin;", world)
        self.assertNotIn("world conductor-plugin", text)

    def test_every_capability_keeps_every_function(self):
        text = plugin_wit.generate(CONTRACT, ["emit", "log", "timer", "kv", "pg", "kube"], "all")
        self.assertIn("begin", functions(interface(text, "pg")))
        self.assertIn("resource transaction", interface(text, "pg"))
        self.assertIn("create-token", functions(interface(text, "kube")))

    def test_an_unknown_capability_is_refused_naming_the_known_ones(self):
        with self.assertRaises(plugin_wit.WitError) as refused:
            plugin_wit.generate(CONTRACT, ["kv", "http"], "w")
        self.assertIn("http", str(refused.exception))
        self.assertIn("emit, log, timer, kv, pg, kube", str(refused.exception))

    def test_comments_and_attributes_do_not_confuse_the_split(self):
        wit = """
/// A package; braces in docs: `{"a": 1}` and a semicolon; here.
package x:y@1.2.3;

/// Which cap { is this }?
interface cap {
    /* a block comment with } and ; */
    record r { a: u32, }
    /// f's doc { ; }
    @since(version = 1.2.0)
    f: func(x: r) -> u32;
    resource h {
        g: static func() -> h;
    }
    // a trailing comment
}

interface plugin {
    use cap.{r};
    run: func(x: r);
}

world conductor-plugin {
    import cap;
    export plugin;
}
"""
        with tempfile.TemporaryDirectory() as d:
            (pathlib.Path(d) / "x.wit").write_text(wit)
            text = plugin_wit.generate(d, [], "w")
        body = interface(text, "cap")
        self.assertEqual(functions(body), [])
        self.assertIn("record r", body)
        self.assertNotIn("resource h", body)
        self.assertNotIn("f's doc", body, "an item's docs go with it")
        self.assertIn("package x:y@1.2.3;", text)
        self.assertEqual(functions(interface(text, "plugin")), ["run"])


if __name__ == "__main__":
    unittest.main()
