"""`python3 -m conductor_plugin_wit …`: the world generator (see the package's docstring)."""

import sys

from . import main

sys.exit(main(sys.argv[1:], prog="python3 -m conductor_plugin_wit"))
