"""examples/05_dask_training.py trains on a dask cluster over data larger than its workers'
memory (issue 17).

The example runs as the user runs it, in a fresh interpreter, with fewer rows and a smaller
memory limit that the data still exceeds; the test reads the cost lines it prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "05_dask_training.py"

pytest.importorskip("opgraph_dask", reason="the example needs opgraph-dask")
pytest.importorskip("distributed", reason="the example needs dask.distributed")

FINAL = re.compile(r"^cost ([0-9.]+) -> ([0-9.]+) \(falls\)$", re.MULTILINE)


def test_dask_example_trains_on_data_larger_than_the_workers_memory(tmp_path: Path) -> None:
    """With an empty compile cache, as on a fresh machine: the block kernels are compiled
    once on the client (a worker compiling one in-process outgrew its 200 MB and was
    killed, task after task)."""
    env = {**os.environ, "OPGRAPH_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--rows", "1200000", "--memory-limit", "200MB"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dashboard:" in done.stdout
    before, after = (float(v) for v in FINAL.search(done.stdout).groups())  # type: ignore[union-attr]
    assert before == pytest.approx(0.693147, abs=1e-3)  # log(2): the weights start at zero
    assert after < 0.8 * before, done.stdout
    steps = re.findall(r"^epoch \d+ step\s+\d+\s+batch cost ([0-9.]+)$", done.stdout, re.MULTILINE)
    assert len(steps) >= 2, done.stdout
