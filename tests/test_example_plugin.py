"""The example plugin's own suite (tests/example_plugin/tests) without opgraph-backend-c.

``nox -s tests`` collects that suite with every package installed; this test runs it once
more in a fresh interpreter where ``opgraph_c`` and ``opgraph_optimizers`` cannot be
imported and only the example plugin's entry point is loaded: opgraph-core plus the plugin,
the plugin's declared dependencies. The C kernel's tests skip there, the test of the
plugin without backend-c runs, and everything else must pass the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_example_plugin

SUITE = Path(__file__).parent / "example_plugin" / "tests"

#: Run in the child: hide the packages, check that the plugin loads without a warning, then
#: run the suite.
RUNNER = """\
import sys, warnings
for name in ("opgraph_c", "opgraph_optimizers"):
    sys.modules[name] = None  # import raises ModuleNotFoundError, as if not installed
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import opgraph
bad = [f"{type(w.message).__name__}: {w.message}" for w in caught
       if type(w.message).__name__ == "PluginWarning"]
if bad:
    sys.exit("loading the plugins warned:\\n" + "\\n".join(bad))
import pytest
sys.exit(pytest.main([sys.argv[1], "-v", "-p", "no:cacheprovider", "-rs",
                     "-W", "ignore::pytest.PytestAssertRewriteWarning"]))
"""


def test_the_plugin_suite_passes_without_backend_c() -> None:
    env = {
        **os.environ,
        "OPGRAPH_DISABLE_PLUGIN_AUTOLOAD": "1",
        "OPGRAPH_PLUGINS": "example",
        "OPGRAPH_STRICT_PLUGINS": "1",
    }
    env.pop("OPGRAPH_FLAGS", None)  # e.g. linker=c from a tests_modes run
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(SUITE)],
        capture_output=True,
        text=True,
        env=env,
        cwd=SUITE.parents[2],
        timeout=600,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "test_without_backend_c_cube_runs_perform_and_the_c_hook_is_never_called PASSED" in out
    assert "opgraph-backend-c is not installed: no c linker" in out  # the C tests skipped
