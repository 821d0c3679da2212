#!/usr/bin/env python3
"""The world generator of the Python SDK package (plugin-sdk/python, `conductor_plugin_wit`), run
from the repository without installing anything:

    python3 plugin-sdk/tools/plugin_wit.py --capabilities emit,log,timer,kv OUT_DIR

The same as `conductor-plugin-wit` once the package is installed (`pip install plugin-sdk/python`):
see plugin-sdk/python/src/conductor_plugin_wit/__init__.py. scripts/build-polyglot-plugins.sh
builds the examples with it.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python" / "src"))

from conductor_plugin_wit import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="plugin_wit.py"))
