"""examples/03_lenet.py trains: its loss over the training set falls clearly (issue 15).

The example runs as the user runs it, in a fresh interpreter (``sys.executable``), with
few steps; the test reads the loss lines it prints.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "03_lenet.py"


LOSS_LINE = re.compile(r"^step\s+(\d+)\s+loss\s+([0-9.]+)$", re.MULTILINE)


def test_lenet_example_loss_falls() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "20", "--every", "10"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    losses = [(int(s), float(v)) for s, v in LOSS_LINE.findall(done.stdout)]
    assert [s for s, _ in losses] == [0, 10, 20], done.stdout
    first, last = losses[0][1], losses[-1][1]
    assert first == pytest.approx(2.302585, abs=1e-3)  # log(10): the output layer starts at zero
    assert last < 0.5 * first, done.stdout
    accuracy = float(re.search(r"training accuracy: ([0-9.]+)", done.stdout).group(1))
    assert accuracy > 0.5, done.stdout
