"""Theano's ``theano.tests`` names that user code imports: :mod:`opgraph.tests.breakpoint`.

(opgraph's own test suites live outside the package, under ``packages/*/tests``.)
"""

from __future__ import annotations

from opgraph.tests import breakpoint

__all__ = ["breakpoint"]
