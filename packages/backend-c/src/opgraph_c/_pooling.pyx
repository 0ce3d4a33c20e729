# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: extra_compile_args = -O3 -fopenmp -fno-math-errno -fno-trapping-math
# distutils: extra_link_args = -fopenmp
"""Precompiled kernels for ``opgraph.tensor.signal.pool``: ``Pool`` (max, sum and both
averages), ``MaxPoolGrad``, ``AveragePoolGrad`` and ``DownsampleFactorMaxGradGrad``, over
the last 2 or 3 axes of a float32 or float64 tensor with any number of leading (batch)
axes. (Not ``_pool``: that module is the elementwise buffer pool.)

One :class:`PoolingThunk` serves the four Ops (``kind``). A 2-d pooling runs as a 3-d one
whose first pooled axis has length, window and stride 1. The input is seen as ``planes``
contiguous blocks (the product of the leading axes) of the pooled shape; planes are shared
among OpenMP threads (one plane per iteration, static schedule) by the package's thread
policy (:mod:`opgraph_c._threads`), so results do not depend on the thread count.

Every kernel follows its Op's ``perform`` (:mod:`opgraph.tensor.signal.pool`) in the order
of its additions: an output's window is read in row-major order starting from 0 (``sum``,
the averages, the grad-grad) or from -inf with NumPy's ``maximum`` rule (NaN propagates;
``max``); an input element's gradient gathers its windows in row-major order (each window
adds to its elements in turn); an average divides the window's sum by its count in the
input's dtype. The max gradient goes to every element equal to the window's maximum.

``ws``, ``stride`` and ``pad`` are read once when they are constants of the graph, per call
otherwise. Values the kernels do not take (other dtypes or ranks, subclasses, misaligned
or byte-swapped arrays, invalid or mismatched parameters and shapes) run the Op's
``perform``, so its results and errors are the reference's.
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport INFINITY
from libc.string cimport memset

from opgraph_c._pool cimport pooled_empty
from opgraph_c._threads cimport Team, monotonic, team_init, team_size, team_timed
from opgraph_c._vm cimport NodeThunk

import numpy as np

from opgraph.graph.basic import Constant

cnp.import_array()


cdef enum:
    # The Ops (``kind``) and the modes.
    K_POOL = 0
    K_MAX_GRAD = 1
    K_AVG_GRAD = 2
    K_GRAD_GRAD = 3
    M_MAX = 0
    M_SUM = 1
    M_INC = 2
    M_EXC = 3


KINDS = {"Pool": K_POOL, "MaxPoolGrad": K_MAX_GRAD, "AveragePoolGrad": K_AVG_GRAD,
         "DownsampleFactorMaxGradGrad": K_GRAD_GRAD}
_MODES = {"max": M_MAX, "sum": M_SUM, "average_inc_pad": M_INC, "average_exc_pad": M_EXC}


ctypedef struct Geom:
    # One plane's geometry, 3 pooled axes (a 2-d pooling: axis 0 of length 1).
    Py_ssize_t n[3]  # input lengths
    Py_ssize_t o[3]  # output lengths (windows)
    Py_ssize_t w[3]  # window
    Py_ssize_t s[3]  # stride
    Py_ssize_t p[3]  # padding (both sides)
    Py_ssize_t in_size, out_size  # elements of an input plane, of an output plane
    int mode


ctypedef fused real:
    float
    double


# ------------------------------------------------------------------------- plane kernels


cdef inline void _bounds(const Geom* g, int a, Py_ssize_t j, Py_ssize_t* lo, Py_ssize_t* hi,
                         Py_ssize_t* inc) noexcept nogil:
    """Window ``j`` of axis ``a``: the input elements ``[lo, hi)`` it covers, and its length
    clipped to the padded input (``average_inc_pad``'s count)."""
    cdef Py_ssize_t start = j * g.s[a] - g.p[a], end = start + g.w[a]
    lo[0] = start if start > 0 else 0
    hi[0] = end if end < g.n[a] else g.n[a]
    inc[0] = (end if end < g.n[a] + g.p[a] else g.n[a] + g.p[a]) - start


cdef void _pool_plane(const real* x, real* z, const Geom* g) noexcept nogil:
    """``Pool``: one output plane ``z`` from one input plane ``x``."""
    cdef Py_ssize_t od, oh, ow, d, h, k, d0, d1, h0, h1, w0, w1, cd, ch, cw
    cdef Py_ssize_t H = g.n[1], W = g.n[2], HW = g.n[1] * g.n[2]
    cdef const real* row
    cdef real acc, v
    cdef int mode = g.mode, nan
    for od in range(g.o[0]):
        _bounds(g, 0, od, &d0, &d1, &cd)
        for oh in range(g.o[1]):
            _bounds(g, 1, oh, &h0, &h1, &ch)
            for ow in range(g.o[2]):
                _bounds(g, 2, ow, &w0, &w1, &cw)
                if mode == M_MAX:
                    # The largest value, branch-free (``v > acc`` keeps the first of equal
                    # values, as np.maximum does); NaN only flagged, then the window again
                    # with np.maximum's rule, which keeps the first NaN.
                    acc = -INFINITY
                    nan = 0
                    for d in range(d0, d1):
                        for h in range(h0, h1):
                            row = x + d * HW + h * W
                            for k in range(w0, w1):
                                v = row[k]
                                acc = v if v > acc else acc
                                nan |= v != v
                    if nan:
                        acc = -INFINITY
                        for d in range(d0, d1):
                            for h in range(h0, h1):
                                row = x + d * HW + h * W
                                for k in range(w0, w1):
                                    acc = _np_maximum(acc, row[k])
                else:
                    acc = 0
                    for d in range(d0, d1):
                        for h in range(h0, h1):
                            row = x + d * HW + h * W
                            for k in range(w0, w1):
                                acc = acc + row[k]
                    if mode == M_INC:
                        acc = acc / <real>(cd * ch * cw)
                    elif mode == M_EXC:
                        acc = acc / <real>((d1 - d0) * (h1 - h0) * (w1 - w0))
                z[(od * g.o[1] + oh) * g.o[2] + ow] = acc


cdef inline real _np_maximum(real acc, real v) noexcept nogil:
    """``np.maximum(acc, v)``: ``acc`` if it is at least ``v`` or NaN, else ``v``."""
    return acc if (acc >= v or acc != acc) else v


cdef void _pool_2x2_max(const real* x, real* z, const Geom* g) noexcept nogil:
    """``Pool`` max with 2x2 windows, stride 2, no padding, all windows whole (the common
    layer): a branch-free row loop (gcc vectorises it), a row holding a NaN again with
    np.maximum's rule. The values are :func:`_pool_plane`'s."""
    cdef Py_ssize_t oh, ow, W = g.n[2], OW = g.o[2]
    cdef const real* r0
    cdef const real* r1
    cdef real* zr
    cdef real m, a, b, c, d
    cdef int nan
    for oh in range(g.o[1]):
        r0 = x + 2 * oh * W
        r1 = r0 + W
        zr = z + oh * OW
        nan = 0
        for ow in range(OW):
            a = r0[2 * ow]
            b = r0[2 * ow + 1]
            c = r1[2 * ow]
            d = r1[2 * ow + 1]
            m = b if b > a else a
            m = c if c > m else m
            m = d if d > m else m
            zr[ow] = m
            nan |= (a != a) | (b != b) | (c != c) | (d != d)
        if nan:
            for ow in range(OW):
                m = _np_maximum(<real>-INFINITY, r0[2 * ow])
                m = _np_maximum(m, r0[2 * ow + 1])
                m = _np_maximum(m, r1[2 * ow])
                zr[ow] = _np_maximum(m, r1[2 * ow + 1])


cdef void _max_grad_2x2(const real* x, const real* mo, const real* gz, real* gx,
                        const Geom* g) noexcept nogil:
    """``MaxPoolGrad`` for the 2x2, stride 2 windows of :func:`_pool_2x2_max`: each element
    is in one window, so its gradient is ``0 + gz`` of the window or 0, as perform's sum."""
    cdef Py_ssize_t oh, ow, W = g.n[2], OW = g.o[2]
    cdef const real* r0
    cdef const real* r1
    cdef real* g0
    cdef real* g1
    cdef real m, gv, zero = 0
    for oh in range(g.o[1]):
        r0 = x + 2 * oh * W
        r1 = r0 + W
        g0 = gx + 2 * oh * W
        g1 = g0 + W
        for ow in range(OW):
            m = mo[oh * OW + ow]
            gv = gz[oh * OW + ow]
            g0[2 * ow] = zero + (gv if r0[2 * ow] == m else zero)
            g0[2 * ow + 1] = zero + (gv if r0[2 * ow + 1] == m else zero)
            g1[2 * ow] = zero + (gv if r1[2 * ow] == m else zero)
            g1[2 * ow + 1] = zero + (gv if r1[2 * ow + 1] == m else zero)


cdef void _max_grad_plane(const real* x, const real* mo, const real* gz, real* gx,
                          const Geom* g) noexcept nogil:
    """``MaxPoolGrad``: every element equal to its window's maximum gets the window's
    ``gz`` (``gx`` starts at zero)."""
    cdef Py_ssize_t od, oh, ow, d, h, k, i, d0, d1, h0, h1, w0, w1, cd, ch, cw, o = 0
    cdef Py_ssize_t H = g.n[1], W = g.n[2], HW = g.n[1] * g.n[2]
    cdef real m, gv, zero = 0
    for od in range(g.o[0]):
        _bounds(g, 0, od, &d0, &d1, &cd)
        for oh in range(g.o[1]):
            _bounds(g, 1, oh, &h0, &h1, &ch)
            for ow in range(g.o[2]):
                _bounds(g, 2, ow, &w0, &w1, &cw)
                m = mo[o]
                gv = gz[o]
                o += 1
                for d in range(d0, d1):
                    for h in range(h0, h1):
                        i = d * HW + h * W
                        for k in range(i + w0, i + w1):
                            # adding 0 leaves gx as it is (it is never -0.0)
                            gx[k] = gx[k] + (gv if x[k] == m else zero)


cdef void _avg_grad_plane(const real* gz, real* gx, const Geom* g) noexcept nogil:
    """``AveragePoolGrad``: every element of a window gets its ``gz`` (over its count for
    the averages; ``gx`` starts at zero)."""
    cdef Py_ssize_t od, oh, ow, d, h, k, i, d0, d1, h0, h1, w0, w1, cd, ch, cw, o = 0
    cdef Py_ssize_t H = g.n[1], W = g.n[2], HW = g.n[1] * g.n[2]
    cdef real val
    cdef int mode = g.mode
    for od in range(g.o[0]):
        _bounds(g, 0, od, &d0, &d1, &cd)
        for oh in range(g.o[1]):
            _bounds(g, 1, oh, &h0, &h1, &ch)
            for ow in range(g.o[2]):
                _bounds(g, 2, ow, &w0, &w1, &cw)
                val = gz[o]
                o += 1
                if mode == M_INC:
                    val = val / <real>(cd * ch * cw)
                elif mode == M_EXC:
                    val = val / <real>((d1 - d0) * (h1 - h0) * (w1 - w0))
                for d in range(d0, d1):
                    for h in range(h0, h1):
                        i = d * HW + h * W
                        for k in range(i + w0, i + w1):
                            gx[k] = gx[k] + val


cdef void _grad_grad_plane(const real* x, const real* mo, const real* ggx, real* ggz,
                           const Geom* g) noexcept nogil:
    """``DownsampleFactorMaxGradGrad``: a window's sum of ``ggx`` over its maxima."""
    cdef Py_ssize_t od, oh, ow, d, h, k, i, d0, d1, h0, h1, w0, w1, cd, ch, cw, o = 0
    cdef Py_ssize_t H = g.n[1], W = g.n[2], HW = g.n[1] * g.n[2]
    cdef real m, acc, zero = 0
    for od in range(g.o[0]):
        _bounds(g, 0, od, &d0, &d1, &cd)
        for oh in range(g.o[1]):
            _bounds(g, 1, oh, &h0, &h1, &ch)
            for ow in range(g.o[2]):
                _bounds(g, 2, ow, &w0, &w1, &cw)
                m = mo[o]
                acc = 0
                for d in range(d0, d1):
                    for h in range(h0, h1):
                        i = d * HW + h * W
                        for k in range(i + w0, i + w1):
                            acc = acc + (ggx[k] if x[k] == m else zero)
                ggz[o] = acc
                o += 1


cdef inline void _plane(int kind, int fast2x2, const real* a, const real* b, const real* c,
                        real* out, const Geom* g, Py_ssize_t i) noexcept nogil:
    """Plane ``i`` of one Op (inputs ``a``, ``b``, ``c`` as the kind reads them).
    ``fast2x2``: 1 for the 2x2 stride-2 max kernels, 2 when their windows also cover the
    whole plane (the gradient then writes every element: no zeroing first)."""
    cdef Py_ssize_t ni = i * g.in_size, no = i * g.out_size
    if kind == K_POOL:
        if fast2x2:
            _pool_2x2_max(a + ni, out + no, g)
        else:
            _pool_plane(a + ni, out + no, g)
        return
    if kind == K_GRAD_GRAD:
        _grad_grad_plane(a + ni, b + no, c + ni, out + no, g)
        return
    if fast2x2 != 2:  # the gradients add to zeros (zeroed here: by this plane's thread)
        memset(out + ni, 0, g.in_size * sizeof(real))
    if kind == K_MAX_GRAD:
        if fast2x2:
            _max_grad_2x2(a + ni, b + no, c + no, out + ni, g)
        else:
            _max_grad_plane(a + ni, b + no, c + no, out + ni, g)
    else:
        _avg_grad_plane(b + no, out + ni, g)


cdef void _run(int kind, int fast2x2, const real* a, const real* b, const real* c,
               real* out, const Geom* g, Py_ssize_t planes, int nt) noexcept nogil:
    """Every plane, on ``nt`` threads."""
    cdef Py_ssize_t i
    if nt > 1:
        for i in prange(planes, num_threads=nt, schedule="static"):
            _plane(kind, fast2x2, a, b, c, out, g, i)
    else:
        for i in range(planes):
            _plane(kind, fast2x2, a, b, c, out, g, i)


# ------------------------------------------------------------------------------- thunk


cdef inline bint _usable(object v, int typenum, int ndim) noexcept:
    """``v`` is an exact ndarray of the node's dtype and rank, aligned and native-endian."""
    if not cnp.PyArray_CheckExact(v):
        return False
    cdef cnp.ndarray a = <cnp.ndarray>v
    return (cnp.PyArray_TYPE(a) == typenum and cnp.PyArray_NDIM(a) == ndim
            and cnp.PyArray_ISALIGNED(a) and cnp.PyArray_ISNOTSWAPPED(a))


cdef bint _read_vector(object v, int nd, Py_ssize_t* out) except -1:
    """A runtime ``ws``/``stride``/``pad`` (an integer ndarray of ``nd`` elements) into
    ``out``; False when it is anything else (perform then says what is wrong)."""
    if not cnp.PyArray_CheckExact(v):
        return False
    cdef cnp.ndarray a = <cnp.ndarray>v
    if cnp.PyArray_NDIM(a) != 1 or cnp.PyArray_DIM(a, 0) != nd:
        return False
    if a.dtype.kind not in "iu":
        return False
    for k in range(nd):
        out[k] = int(a[k])
    return True


cdef class PoolingThunk(NodeThunk):
    """The thunk of a ``Pool``, ``MaxPoolGrad``, ``AveragePoolGrad`` or
    ``DownsampleFactorMaxGradGrad`` node (``kind``, a value of :data:`KINDS`) whose float
    inputs and output share one dtype, float32 or float64.

    ``nthreads``, ``adaptive`` and ``threshold`` make the team
    (:func:`opgraph_c._threads.team_options`).
    """

    cdef int kind, mode, nd, ndim, typenum, nfloat, iparam
    cdef bint ignore_border, const_params
    cdef Py_ssize_t cws[3]
    cdef Py_ssize_t cst[3]
    cdef Py_ssize_t cpad[3]
    cdef Team team

    def __init__(self, node, list in_cells, list out_cells, int kind, int nthreads=1,
                 bint adaptive=True, Py_ssize_t threshold=200000):
        super().__init__(node, in_cells, out_cells)
        op = node.op
        self.kind = kind
        self.mode = _MODES[op.mode]
        self.nd = op.ndim
        if self.nd not in (2, 3):
            raise ValueError(f"{op}: the C kernels pool 2 or 3 axes, not {self.nd}")
        self.ndim = node.inputs[0].type.ndim
        self.typenum = np.dtype(node.outputs[0].type.dtype).num
        self.ignore_border = op.ignore_border
        self.nfloat = 2 if kind == K_AVG_GRAD else (1 if kind == K_POOL else 3)
        self.iparam = self.nfloat
        params = node.inputs[self.iparam:self.iparam + 3]
        self.const_params = all(isinstance(p, Constant) for p in params)
        if self.const_params:
            self.const_params = (
                _read_vector(np.asarray(params[0].data), self.nd, self.cws)
                and _read_vector(np.asarray(params[1].data), self.nd, self.cst)
                and _read_vector(np.asarray(params[2].data), self.nd, self.cpad)
            )
        team_init(&self.team, nthreads, threshold, adaptive)

    cdef int fast(self) except -1:
        cdef int nd = self.nd, ndim = self.ndim, lead = self.ndim - self.nd, k
        cdef Py_ssize_t ws[3]
        cdef Py_ssize_t st[3]
        cdef Py_ssize_t pad[3]
        cdef Geom g
        cdef Py_ssize_t planes = 1, n, size
        cdef object v
        for k in range(self.nfloat):
            if not _usable(self.arg(k), self.typenum, ndim):
                return 1
        if self.const_params:
            for k in range(nd):
                ws[k], st[k], pad[k] = self.cws[k], self.cst[k], self.cpad[k]
        elif not (_read_vector(self.arg(self.iparam), nd, ws)
                  and _read_vector(self.arg(self.iparam + 1), nd, st)
                  and _read_vector(self.arg(self.iparam + 2), nd, pad)):
            return 1
        cdef cnp.ndarray x = <cnp.ndarray>self.arg(0)
        # The geometry; anything perform rejects goes to perform.
        g.mode = self.mode
        g.n[0] = g.o[0] = g.w[0] = g.s[0] = 1
        g.p[0] = 0
        for k in range(nd):
            n = cnp.PyArray_DIM(x, lead + k)
            if ws[k] < 1 or st[k] < 1 or pad[k] < 0 or pad[k] >= ws[k]:
                return 1
            if self.ignore_border:
                if n + 2 * pad[k] < ws[k]:
                    return 1
                size = (n + 2 * pad[k] - ws[k]) // st[k] + 1
            else:
                if pad[k] != 0 or n < ws[k]:
                    return 1
                if st[k] >= ws[k]:
                    size = (n - 1) // st[k] + 1
                else:
                    size = max(0, (n - 1 - ws[k] + st[k]) // st[k]) + 1
            g.n[3 - nd + k], g.o[3 - nd + k] = n, size
            g.w[3 - nd + k], g.s[3 - nd + k], g.p[3 - nd + k] = ws[k], st[k], pad[k]
        for k in range(lead):
            planes *= cnp.PyArray_DIM(x, k)
        g.in_size = g.n[0] * g.n[1] * g.n[2]
        g.out_size = g.o[0] * g.o[1] * g.o[2]
        cdef cnp.npy_intp out_shape[32]
        if ndim > 32:
            return 1
        for k in range(lead):
            out_shape[k] = cnp.PyArray_DIM(x, k)
        for k in range(nd):
            out_shape[lead + k] = g.o[3 - nd + k]
        # The pooled-shape operands must have the output's shape, ggx the input's.
        if self.kind == K_MAX_GRAD or self.kind == K_GRAD_GRAD:
            if not _same_shape(self.arg(1), out_shape, ndim):
                return 1
        if self.kind == K_MAX_GRAD or self.kind == K_AVG_GRAD:
            if not _same_shape(self.arg(self.nfloat - 1), out_shape, ndim):
                return 1
        if self.kind == K_GRAD_GRAD:
            if not _same_shape(self.arg(2), cnp.PyArray_DIMS(x), ndim):
                return 1
        # Operands C-contiguous (a copy only when they are not).
        cdef cnp.ndarray a = cnp.PyArray_GETCONTIGUOUS(x)
        cdef cnp.ndarray b = a
        cdef cnp.ndarray c = a
        if self.nfloat >= 2:
            b = cnp.PyArray_GETCONTIGUOUS(<cnp.ndarray>self.arg(1))
        if self.nfloat == 3:
            c = cnp.PyArray_GETCONTIGUOUS(<cnp.ndarray>self.arg(2))
        # Big outputs come from the buffer pool (fresh pages cost as much as the kernel).
        cdef cnp.ndarray out
        if self.kind == K_POOL or self.kind == K_GRAD_GRAD:
            out = pooled_empty(ndim, out_shape, self.typenum)
        else:
            out = pooled_empty(ndim, cnp.PyArray_DIMS(x), self.typenum)
        cdef int fast2x2 = (self.mode == M_MAX and self.kind <= K_MAX_GRAD
                            and g.o[0] == 1 and g.n[0] == 1
                            and g.w[1] == 2 and g.w[2] == 2 and g.s[1] == 2 and g.s[2] == 2
                            and g.p[1] == 0 and g.p[2] == 0
                            and 2 * g.o[1] <= g.n[1] and 2 * g.o[2] <= g.n[2])
        if fast2x2 and 2 * g.o[1] == g.n[1] and 2 * g.o[2] == g.n[2]:
            fast2x2 = 2
        size = planes * g.in_size
        cdef int nt = team_size(&self.team, size)
        if nt > planes:
            nt = <int>planes if planes > 1 else 1
        cdef bint timed = self.team.nthreads > 1 and size >= self.team.threshold
        cdef double start = monotonic() if timed else 0.0
        if planes > 0 and g.out_size == 0 and g.in_size > 0 and self.kind != K_POOL \
                and self.kind != K_GRAD_GRAD:
            memset(cnp.PyArray_DATA(out), 0, cnp.PyArray_NBYTES(out))  # no window: zeros
        elif planes > 0 and g.out_size > 0:
            if self.typenum == cnp.NPY_FLOAT32:
                with nogil:
                    _run(self.kind, fast2x2, <const float*>cnp.PyArray_DATA(a),
                         <const float*>cnp.PyArray_DATA(b), <const float*>cnp.PyArray_DATA(c),
                         <float*>cnp.PyArray_DATA(out), &g, planes, nt)
            else:
                with nogil:
                    _run(self.kind, fast2x2, <const double*>cnp.PyArray_DATA(a),
                         <const double*>cnp.PyArray_DATA(b), <const double*>cnp.PyArray_DATA(c),
                         <double*>cnp.PyArray_DATA(out), &g, planes, nt)
        if timed:
            team_timed(&self.team, nt, monotonic() - start, size)
        self.set_out(0, out)
        return 0


cdef bint _same_shape(object v, cnp.npy_intp* shape, int ndim) noexcept:
    cdef cnp.ndarray a = <cnp.ndarray>v
    for k in range(ndim):
        if cnp.PyArray_DIM(a, k) != shape[k]:
            return False
    return True
