"""Messages that say what happened (issue 12, part 4), across packages: the locations
``rewrite_report()`` gives opgraph-optimizers' rewrites, and what a user with core alone
is told (the one-time FAST_RUN warning, what ``linker=auto`` is). Each runs in a fresh
process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

#: Run in a fresh process: the rewrite database and the plugin manager are process-wide,
#: and other suites' tests replace them.
ALL_INSTALLED = """
import json, warnings
import numpy as np
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
x = T.dmatrix("x")
w, v = T.dvector("w"), T.dvector("v")
cost = T.log(1 + T.exp(-T.dot(x, w))).mean() + (v**2).sum()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    f = function([x, w, v], cost, mode=Mode("py", "fast_run"))
    g = function([v], T.log(1 + T.exp(v)), mode="FAST_RUN")
print(json.dumps({
    "report": f.maker.rewrite_report(),
    "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
    "finite": bool(np.isfinite(g(np.array([1000.0]))).all()),
}))
"""


def run_script(code: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_extra}
    for name in ("OPGRAPH_PLUGINS", "OPGRAPH_FLAGS"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_fast_run_rewrites_report_their_own_source_lines_and_do_not_warn() -> None:
    proc = run_script(ALL_INSTALLED)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    report = result["report"]
    rows = {line.split()[0]: line.split()[-1] for line in report.splitlines()[2:]}
    assert rows and not any("compile/mode.py" in loc for loc in rows.values()), report
    assert not any(loc.startswith("opgraph/rewriting/db.py") for loc in rows.values()), report
    # node rewriters the databases wrap in a walker: their own files
    assert rows["local_gemm_to_ger"].startswith("opgraph_optimizers/blas.py:"), report
    assert rows["local_inplace_setsubtensor"].startswith("opgraph_optimizers/inplace.py:")
    # with opgraph-optimizers installed, FAST_RUN says nothing and is stabilized
    assert not [w for w in result["warnings"] if "OptimizersMissingWarning" in w]
    assert result["finite"]


CORE_ALONE = """
import numpy as np
import opgraph, opgraph.tensor as T
from opgraph.__main__ import main
from opgraph.compile.mode import FAST_RUN
x, y = T.dmatrix("x"), T.dvector("y")
w = opgraph.shared(np.zeros(3), name="w")
p_1 = 1 / (1 + T.exp(-T.dot(x, w)))
xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)
train = opgraph.function([x, y], xent.mean())
cost = opgraph.function([x, y], xent.sum(), mode="FAST_RUN")
print(FAST_RUN)
main(["plugins"])
"""


def test_core_alone_is_told_what_fast_run_lacks_once() -> None:
    proc = run_script(CORE_ALONE, OPGRAPH_DISABLE_PLUGIN_AUTOLOAD="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("OptimizersMissingWarning: FAST_RUN") == 1, proc.stderr
    assert "stabilization (such as log(1 + exp(x)) -> softplus(x)" in proc.stderr
    assert "HINT: pip install opgraph-optimizers" in proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "Mode(linker=auto -> vm (VMLinker), optimizer=fast_run)"
    assert any(line.startswith("linker=auto -> vm (VMLinker) here; auto is") for line in out)
