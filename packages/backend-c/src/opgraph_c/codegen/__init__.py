"""Cython source generators for the kernels backend-c compiles at function-compile time."""
