"""Builds opgraph-backend-c's precompiled Cython extensions (metadata is in pyproject.toml)."""

from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
INCLUDE = ["src/opgraph_c/include", numpy.get_include()]
NUMPY_API = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]

extensions = [
    Extension("opgraph_c._vm", ["src/opgraph_c/_vm.pyx"], include_dirs=INCLUDE),
    Extension(
        "opgraph_c._elemwise",
        ["src/opgraph_c/_elemwise.pyx"],
        include_dirs=INCLUDE,
        define_macros=NUMPY_API,
    ),
]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=[str(HERE / "src")],
        compiler_directives={"language_level": "3"},
    )
)
