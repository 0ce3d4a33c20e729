"""``MRG_RandomStreams`` draws on the GPU: :class:`GpuMRG_uniform` and its lifter.

Theano's ``GPUA_mrg_uniform`` (``theano.gpuarray.rng_mrg``): core's ``mrg_uniform``
(``opgraph.sandbox.rng_mrg``) with its samples drawn by a CUDA kernel
(:mod:`opgraph_cuda.kernels.rng_mrg`), one thread per stream, bit-identical to the CPU op
(float32 with Theano's C rounding, float64 too). Under the GPU lift a float32
``mrg_uniform`` node becomes a ``GpuMRG_uniform`` whose sample feeds the GPU ops after it
directly (``low + u * (high - low)``, Box-Muller's logs and cosines, binomial's compare).

Where the state lives. ``MRG_RandomStreams`` keeps each draw's stream states in an int32
``(n_streams, 6)`` shared variable, and ``opgraph.shared`` keeps integer arrays on the host
even under ``device=cuda`` (only float32/float16 values move; Theano moved every
non-scalar array, which is how its states ended up on the GPU). So by default the state
stays a host shared variable: each call copies it to the device (``GpuFromHost``, 24 bytes
a stream), the kernel advances the copy in place (the in-place rewrite makes the op
``inplace`` on it), and the new state comes back (``HostFromGpu``) as the update:
``get_value()``, ``seed()`` and pickling behave exactly as on the CPU. A state that is
already on the device (a GPU shared variable: ``shared(rstate, target="cuda")`` or
``gpuarray_shared_constructor(rstate)``) never leaves it: Theano's layout, with no transfer
per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.sandbox.rng_mrg import M1, check_size_value, mrg_uniform, mrg_uniform_base
from opgraph.tensor.type import TensorType
from opgraph_cuda.array import GpuArray
from opgraph_cuda.kernels.rng_mrg import CONVERSIONS, KERNEL_NAME, mrg_source
from opgraph_cuda.ops import GpuOp, Run, as_gpuarray_variable
from opgraph_cuda.opt import KeepOnCpu, register_lifter
from opgraph_cuda.runtime import get_runtime
from opgraph_cuda.type import GpuArrayType

__all__ = ["GPUA_mrg_uniform", "GpuMRG_uniform", "lift_mrg_uniform"]

#: Threads per block (one stream each); blocks loop over the streams past the grid.
BLOCK = 128


class GpuMRG_uniform(GpuOp, mrg_uniform_base):  # Theano's naming style (GPUA_mrg_uniform)
    """Uniform samples in ``(0, 1)`` from MRG31k3p streams, drawn on the GPU.

    ``(rstate, size) -> [new_rstate, sample]`` as core's ``mrg_uniform``: ``rstate`` is a
    GPU int32 ``(n_streams, 6)`` matrix of stream states, ``size`` a host integer vector.
    Element ``i`` of the sample (C order) is the next value of stream ``i % n_streams``,
    bit for bit the CPU op's.

    Parameters
    ----------
    output_type
        The sample's host type (a float32 or float64 TensorType), as for ``mrg_uniform``.
    inplace
        Advance ``rstate`` itself (``destroy_map``) rather than a copy.
    """

    def __init__(self, output_type: TensorType, inplace: bool = False) -> None:
        mrg_uniform_base.__init__(self, output_type, inplace)
        if output_type.dtype not in CONVERSIONS:
            raise TypeError(
                f"{type(self).__name__}: no GPU kernel for {output_type.dtype} samples "
                f"(only {', '.join(CONVERSIONS)}); float16 draws run mrg_uniform on the CPU"
            )

    def make_node(self, rstate: Any, size: Any) -> Apply:
        rstate = as_gpuarray_variable(rstate)
        size, bcast = self.checked_inputs(rstate, size)
        sample = GpuArrayType(self.output_type.dtype, bcast, rstate.type.context_name)()
        return Apply(self, [rstate, size], [rstate.type(), sample])

    def prepare_gpu(self, node: Apply) -> Run:
        runtime = get_runtime()
        dtype = node.outputs[1].type.dtype
        title = f"{self} for node {self}({', '.join(str(v.type) for v in node.inputs)})"
        launch = runtime.load(mrg_source(dtype, title))[KERNEL_NAME]
        ndim = self.output_type.ndim

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            rstate, size = inputs
            shape = check_size_value(self, size, ndim)
            n_elements = math.prod(shape)
            if n_elements > M1:
                raise ValueError(f"{self}: rng_mrg does not support more than (2**31 - 1) samples")
            if rstate.ndim != 2 or rstate.shape[1] != 6:
                raise ValueError(
                    f"{self}: rstate must be an int32 matrix of shape (n_streams, 6), got "
                    f"{rstate.dtype} of shape {rstate.shape}"
                )
            n_streams = rstate.shape[0]
            if n_streams == 0:
                raise ValueError(f"{self}: rstate has no stream (shape {rstate.shape})")
            state = rstate if self.inplace else rstate.copy()
            sample = GpuArray.empty(shape, dtype, runtime)
            if n_elements:
                active = min(n_streams, n_elements)
                grid = (max(1, min(-(-active // BLOCK), runtime.max_blocks)), 1, 1)
                ss0, ss1 = state.elem_strides
                launch(grid, (BLOCK, 1, 1), sample.ptr, state.ptr, n_streams, n_elements, ss0, ss1)
            return [state, sample]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        size = node.inputs[1]
        return [input_shapes[0], tuple(size[i] for i in range(self.output_type.ndim))]


#: Theano's name (``theano.gpuarray.rng_mrg.GPUA_mrg_uniform``).
GPUA_mrg_uniform = GpuMRG_uniform


@register_lifter(mrg_uniform, source=True)
def lift_mrg_uniform(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    """``mrg_uniform`` -> :class:`GpuMRG_uniform` with the same ``inplace``: the state is
    taken on the device (a GPU state as it is, a host one through ``GpuFromHost``), the new
    state and the sample are GPU variables. It moves even though its inputs are integers
    (``source=True``); the lift's dtype rule keeps float64 and float16 draws on the CPU."""
    if type(node.op) is not mrg_uniform:
        return None
    dtype = node.op.output_type.dtype
    if dtype not in CONVERSIONS:
        raise KeepOnCpu(f"{dtype} samples stay on the CPU")
    op = GpuMRG_uniform(node.op.output_type, inplace=node.op.inplace)
    return op(inputs[0], node.inputs[1], return_list=True)
