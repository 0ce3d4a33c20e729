"""Signal processing on tensors (Theano's ``tensor.signal``): pooling and 2-d convolution.

``from opgraph.tensor.signal import pool`` then ``pool.pool_2d(x, ws=(2, 2),
ignore_border=True)``; ``opgraph.tensor.signal.conv.conv2d`` convolves 2-d and 3-d inputs
that have no channel axis. Both are importable as attributes after ``import opgraph``.
"""

from __future__ import annotations

from opgraph.tensor.signal import conv, pool

__all__ = ["conv", "pool"]
