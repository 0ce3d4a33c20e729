"""Builds opgraph-backend-c's precompiled Cython extensions (metadata is in pyproject.toml)."""

import shutil
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent

# setuptools copies src/ into build/lib* for a wheel and never deletes what src/ no longer
# has: a renamed kernels module would survive in the next wheel (and register twice).
for stale in HERE.glob("build/lib*"):
    shutil.rmtree(stale, ignore_errors=True)
INCLUDE = ["src/opgraph_c/include", numpy.get_include()]
NUMPY_API = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]

# Every src/opgraph_c/_*.pyx is one extension module (_vm, _elemwise, _blas, ...).
extensions = [
    Extension(
        f"opgraph_c.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=INCLUDE,
        define_macros=NUMPY_API,
    )
    for pyx in sorted((HERE / "src" / "opgraph_c").glob("_*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=[str(HERE / "src")],
        compiler_directives={"language_level": "3"},
    )
)
