"""Builds opgraph-backend-c's precompiled Cython extensions (metadata is in pyproject.toml)."""

from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
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
