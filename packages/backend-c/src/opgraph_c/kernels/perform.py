"""Core's Ops that the ``c`` backend runs with their ``perform`` on purpose, each with why.

Issue 19 asked for C for every core Op whose work NumPy does not already do in one call,
and a written reason for each that stays on ``perform``. These are the reasons: they are
registered with :meth:`~opgraph.link.dispatch.KernelRegistry.register_perform`, so the Ops
run without a fallback warning or a ``[py-fallback]`` mark, and ``registry.perform_reasons()``
lists them. ``tests/test_c_coverage.py`` fails when a core Op has neither a kernel nor a
reason. A reason stops being true when the numbers say so: a C thunk registered for the
class replaces the entry here (delete the row).

What the reasons weigh: a ``perform`` costs one Python call and its argument handling, about
1-3 µs per node. That matters for elementwise work on small arrays (fused into C loops
already) and for structural ops in loops (C thunks in :mod:`opgraph_c._structure` and the
topic modules); it does not for an O(n³) LAPACK call or a NumPy routine that already loops
in C over the whole array.
"""

from __future__ import annotations

from opgraph.compile.builders import OpFromGraph
from opgraph.compile.inner import InnerGraphOp
from opgraph.compile.ops import FromFunctionOp
from opgraph.ifelse import IfElse
from opgraph.link.dispatch import KernelRegistry
from opgraph.printing import Print
from opgraph.sandbox.multinomial import MultinomialFromUniform
from opgraph.sandbox.rng_mrg import DotModulo
from opgraph.tensor import nlinalg, slinalg
from opgraph.tensor.assert_op import Assert
from opgraph.tensor.basic import Choose
from opgraph.tensor.extra_ops import (
    Bartlett,
    BinCountOp,
    CpuContiguous,
    DiffOp,
    FillDiagonal,
    FillDiagonalOffset,
    Nonzero,
    RepeatOp,
    SegmentSum,
)
from opgraph.tensor.fft import IRFFTOp, RFFTOp
from opgraph.tensor.index_ops import RavelMultiIndex, SearchsortedOp, Unique, UnravelIndex
from opgraph.tensor.io import LoadFromDisk, _NoMPIOp
from opgraph.tensor.jacobian import JacobianOp
from opgraph.tensor.nlinalg.tensorops import TensorInv, TensorSolve
from opgraph.tensor.nnet.blocksparse import SparseBlockGemv, SparseBlockOuter
from opgraph.tensor.nnet.conv import ConvOp
from opgraph.tensor.nnet.conv3d2d import DiagonalSubtensor, IncDiagonalSubtensor
from opgraph.tensor.nnet.conv_abstract import (
    AbstractConv,
    AbstractConv2d,
    AbstractConv2d_gradInputs,
    AbstractConv2d_gradWeights,
    AbstractConv3d,
    AbstractConv3d_gradInputs,
    AbstractConv3d_gradWeights,
    AbstractConv_gradInputs,
    AbstractConv_gradWeights,
)
from opgraph.tensor.nnet.conv_shapes import ConvShapeCheck
from opgraph.tensor.nnet.ctc import ConnectionistTemporalClassification
from opgraph.tensor.nnet.neighbours import Images2Neibs, Images2NeibsGrad
from opgraph.tensor.random_ops import RandomFunction
from opgraph.tensor.signal.pool import MaxPoolRop
from opgraph.tensor.sort import ArgSortOp, PermuteAlongAxis, SortOp
from opgraph.tensor.subtensor_advanced import (
    AdvancedBooleanIncSubtensor,
    AdvancedBooleanSubtensor,
    AdvancedSubtensor,
    MakeSlice,
)
from opgraph.tests.breakpoint import PdbBreakpoint
from opgraph.typed_list.basic import _ListOp

__all__ = ["REASONS", "register"]

_LAPACK = (
    "one LAPACK call through NumPy/SciPy: O(n^3) work against about a microsecond of "
    "Python per call, and LAPACK's own errors and conventions stay NumPy's"
)
_ONE_CALL = "one NumPy call that already loops in C over the whole array ({})"
_ABSTRACT_CONV = (
    "an abstract convolution: opgraph-optimizers' conv_opts rewrites it to the CorrMM / "
    "Corr3dMM op that has the C kernel (im2col + BLAS); its perform (the same im2col + "
    "numpy.matmul) runs only where the rewrite is off (FAST_COMPILE, "
    "optimizer_excluding=conv_gemm, or without opgraph-optimizers)"
)
_ABSTRACT_CONV_OPS = [
    AbstractConv,
    AbstractConv_gradWeights,
    AbstractConv_gradInputs,
    AbstractConv2d,
    AbstractConv2d_gradWeights,
    AbstractConv2d_gradInputs,
    AbstractConv3d,
    AbstractConv3d_gradWeights,
    AbstractConv3d_gradInputs,
    ConvOp,
]

_LAPACK_OPS = [
    *(getattr(nlinalg, name) for name in ("MatrixInverse", "MatrixPinv", "Det", "Eig", "Eigh")),
    *(getattr(nlinalg, name) for name in ("EighGrad", "SVD", "SVDGrad", "QRFull", "QRGrad")),
    nlinalg.QRIncomplete,
    *(getattr(slinalg, name) for name in ("Cholesky", "CholeskyGrad", "Solve", "Expm")),
    *(getattr(slinalg, name) for name in ("ExpmGrad", "Eigvalsh", "EigvalshGrad")),
]

#: Op class -> why the ``c`` backend runs its ``perform``.
REASONS: dict[type, str] = {
    # Python by nature
    FromFunctionOp: "wraps the user's Python function (as_op): there is no C to run",
    Print: "its work is Python's print() of the value (an identity otherwise)",
    IfElse: (
        "lazy: the VM evaluates only the taken branch and the Op hands that branch's value "
        "over (no array work to compile)"
    ),
    JacobianOp: (
        "a loop that calls a compiled inner function per row: the work runs in that "
        "function's own C thunks"
    ),
    InnerGraphOp: (
        "the abstract base of Ops defined by a graph: a subclass runs its inner graph's "
        "compiled function, whose nodes use their own C kernels (Scan has a C loop)"
    ),
    OpFromGraph: (
        "runs its inner graph's compiled function (compiled with the outer function's mode), "
        "whose nodes use their own C kernels"
    ),
    RandomFunction: (
        "draws from NumPy's Generator/RandomState so that streams equal NumPy's bit for bit "
        "for the same seed; a C sampler would give other numbers"
    ),
    MakeSlice: "builds a Python slice object from scalars: no array work",
    MultinomialFromUniform: (
        "numpy.cumsum and one comparison per row on small matrices (one row per draw), next "
        "to the uniform draw that feeds it (mrg_uniform has C); covers ChoiceFromUniform"
    ),
    PdbBreakpoint: "its work is opening a Python debugger when the condition holds",
    Assert: (
        "a view of its input plus a truth test of 0-d conditions per call (a debugging "
        "node): perform raises Theano's AssertionError(msg) with the message"
    ),
    DotModulo: "a 3x3 integer product modulo m, once per stream jump (multMatVect)",
    LoadFromDisk: "reads a file with numpy.load: I/O, not arithmetic",
    _NoMPIOp: "cannot be built (opgraph has no MPI ops; mpi4py moves the arrays): never run",
    _ListOp: (
        "typed lists are Python lists of arrays: each op is one list call (append, "
        "insert, index, ...)"
    ),
    # linear algebra: LAPACK
    **dict.fromkeys(_LAPACK_OPS, _LAPACK),
    nlinalg.ExtractDiag: _ONE_CALL.format("numpy.diagonal: a view, O(1)"),
    nlinalg.ExtractDiagGrad: _ONE_CALL.format("zeros, then a write through numpy.diagonal"),
    nlinalg.AllocDiag: _ONE_CALL.format("numpy.diag"),
    TensorInv: _LAPACK,
    TensorSolve: _LAPACK,
    # one NumPy routine each
    SortOp: _ONE_CALL.format("numpy.sort: introsort/radix sort"),
    ArgSortOp: _ONE_CALL.format("numpy.argsort"),
    PermuteAlongAxis: _ONE_CALL.format("numpy.take_along_axis"),
    Unique: _ONE_CALL.format("numpy.unique: a sort"),
    Nonzero: _ONE_CALL.format("numpy.nonzero"),
    BinCountOp: _ONE_CALL.format("numpy.bincount"),
    DiffOp: _ONE_CALL.format("numpy.diff"),
    RepeatOp: _ONE_CALL.format("numpy.repeat"),
    SegmentSum: _ONE_CALL.format("numpy.add.reduceat, the gradient of repeat"),
    FillDiagonal: _ONE_CALL.format("numpy.fill_diagonal on a copy"),
    FillDiagonalOffset: _ONE_CALL.format("a strided write of the diagonal on a copy"),
    Bartlett: _ONE_CALL.format("numpy.bartlett"),
    Choose: _ONE_CALL.format("numpy.choose"),
    CpuContiguous: _ONE_CALL.format("numpy.ascontiguousarray: the input itself if contiguous"),
    SearchsortedOp: _ONE_CALL.format("numpy.searchsorted"),
    RavelMultiIndex: _ONE_CALL.format("numpy.ravel_multi_index"),
    UnravelIndex: _ONE_CALL.format("numpy.unravel_index"),
    AdvancedSubtensor: _ONE_CALL.format(
        "NumPy's general fancy indexing; the axis-0 integer gather, AdvancedSubtensor1, has C"
    ),
    AdvancedBooleanSubtensor: _ONE_CALL.format("NumPy's boolean-mask indexing"),
    AdvancedBooleanIncSubtensor: _ONE_CALL.format("NumPy's boolean-mask assignment"),
    RFFTOp: _ONE_CALL.format("numpy.fft.rfftn (pocketfft)"),
    IRFFTOp: _ONE_CALL.format("numpy.fft.irfftn (pocketfft)"),
    SparseBlockGemv: _ONE_CALL.format("numpy.einsum per example over the selected blocks"),
    SparseBlockOuter: _ONE_CALL.format("numpy.einsum and numpy.add.at over the blocks"),
    **dict.fromkeys(_ABSTRACT_CONV_OPS, _ABSTRACT_CONV),
    ConvShapeCheck: (
        "a view of its input and a comparison of its shape with the shape the user gave "
        "conv2d/conv3d (a tuple compare per call)"
    ),
    DiagonalSubtensor: _ONE_CALL.format("a strided view (numpy.lib.stride_tricks)"),
    IncDiagonalSubtensor: _ONE_CALL.format("an add through a strided view, on a copy"),
    Images2Neibs: _ONE_CALL.format("one fancy-index gather of every patch (all modes)"),
    Images2NeibsGrad: (
        "one strided add per position inside the patch over all patches at once (a NumPy "
        "loop in C each); a few calls for the usual 2x2 to 5x5 patches"
    ),
    MaxPoolRop: (
        "Theano's first-maximum R-operator of max pooling, kept for its API: Pool.R_op "
        "builds DownsampleFactorMaxGradGrad, which has a C kernel; this perform is one "
        "NumPy pass per window offset"
    ),
    ConnectionistTemporalClassification: (
        "a forward-backward recursion over time, each step vectorised over the batch and "
        "the label states in NumPy (Theano called the external warp-ctc library); a C loop "
        "would pay off only for long sequences"
    ),
}


def register(registry: KernelRegistry, owner: str) -> None:
    """Record every reason of :data:`REASONS` in ``registry``."""
    for op_class, reason in REASONS.items():
        registry.register_perform(op_class, reason, owner=owner)
