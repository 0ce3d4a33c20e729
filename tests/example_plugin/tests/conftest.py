"""The example plugin's tests run against the installed plugin (``pip install
./tests/example_plugin``); where it is not installed, tests/test_example_plugin.py and
tests/test_plugin_guide.py are skipped with that reason, and these files are not collected."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("example_plugin") else ["test_*.py"]
