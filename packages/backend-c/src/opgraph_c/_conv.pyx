# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: extra_compile_args = -O3 -fopenmp
# distutils: extra_link_args = -fopenmp
"""Precompiled correlation kernels: ``CorrMM``, ``CorrMM_gradWeights``, ``CorrMM_gradInputs``
and the 3-d ``Corr3dMM`` family (:mod:`opgraph.tensor.nnet.corr`, ``corr3d``).

One :class:`~opgraph_c._vm.NodeThunk` subclass, :class:`CorrThunk`, runs the three
directions for float32 and float64 (the fused type ``real``). A 2-d correlation is computed
as a 3-d one of depth 1, so every loop below has three spatial axes (``D, H, W``; the
output's ``od, oh, ow``). The C loops are in ``_conv.pxd``.

GEMM. Images are NCHW (NCDHW), C-contiguous. For one group of one image, with
``K = Cg * kd * kh * kw`` and ``N = od * oh * ow`` output pixels, the correlation is the
row-major product ``top_g (Og, N) = W_g (Og, K) @ cols (K, N)``, where
``cols[(c, a, p, q), (z, i, j)] = imgpad[c, z*sd + a*dd, i*sh + p*dh, j*sw + q*dw]`` is
built by ``im2col``; one ``?gemm`` on the transposes (BLAS is column-major), no copy. The
gradients are ``dW_g += top_g @ cols.T`` (summed over the batch) and ``cols = W_g.T @
top_g`` added back into the image by ``col2im``. Columns are built for a band of output
rows (about ``tile_bytes`` = 256 KiB, at least 256 pixels) that is still in L2 when
``?gemm`` reads it; gcc also gives im2col and col2im an AVX2 clone.

DIRECT (unit strides): vector kernels on a zero-padded copy of the image, no columns. With
the padded planes flattened, every tap reads the same image shifted, so a run of output
pixels is one vector load per tap (the flat positions past each row's end are computed and
dropped): the forward pass keeps tiles of output channels x pixels in registers, the
weight gradient tiles of taps x filters (the top gradient transposed, one pixel at a
time), the input gradient tiles of taps x pixels added back into the padded image. Three
vector sets are compiled (AVX-512, AVX2 + FMA, plain vectors) and the best the CPU runs is
taken at import. They are used where at least half their multiply-adds are useful (filters
and taps padded up to a tile, flat positions past the rows) and the forward and input
gradient have filters of 32 weights or more (fewer: columns cost little); otherwise GEMM.

Other direct loops: 1x1 kernels, stride 1, no padding take ``?gemm`` on the image itself;
the forward pass of groups of one input channel and one filter (depthwise) a loop that
copies each plane's rows amid zeros into the thread's buffer and sums every output row's
taps in vector registers (a stride along the rows, or more than 64 taps: scaled, shifted
plane copies; for the gradients, and with more filters, such loops were slower than
GEMM); unshared filters (one per output pixel) a chunk of images at a time, so that the
filters are read once per chunk: the images' columns regrouped by pixel, then per pixel a
dot product per image and output channel (an axpy for the gradients).

Threads. A call's work (``B * O * K * N`` multiply-adds) decides, with the thunk's
:c:type:`~opgraph_c._threads.Team`, whether the call runs on one thread or on the team's
threads (adaptive: timed against one thread, so on a busy machine it moves to one thread).
On ``n`` threads, the batch is split among OpenMP threads (``prange``, static schedule),
each with its own buffers; BLAS calls run on one OpenBLAS thread each (set once before the
region and restored after it: SciPy's OpenBLAS has one count per process). With fewer
images than threads, GEMM runs the images in turn on OpenBLAS's threads and DIRECT on one
thread. Depthwise loops split the planes; unshared filters the images (columns) and the
pixels (products), each pixel's sums running over the images in order. The mode depends
on the shapes only and each image is computed alone, so results do not depend on the
thread count; the weight gradient deals images to ``slots`` partial kernels (image ``b``
to slot ``b % slots``) added in order at the end: the same on any number of threads.

Semantics are the Ops' ``perform`` (``opgraph.tensor.nnet.conv_numpy``): the result is a new
C-contiguous array of the input's dtype. Inputs are made C-contiguous (a copy only for other
layouts). Every case the C path does not take calls ``perform`` itself before anything is
written, so values and error messages are perform's: other dtypes, ndarray subclasses,
wrong ranks, channel or group mismatches, an output or image size that is empty, negative
or inconsistent with the top gradient, empty batches and channels, sizes beyond BLAS's
32-bit integers.

Buffers (each thread's columns or padded copy, the weight gradient's partial kernels, the
packed filters) are kept on the thunk and grown as needed; big outputs come from
backend-c's buffer pool (:mod:`opgraph_c._pool`).

Measured kernel by kernel against PyTorch: docs/cnn.md ("Kernel by kernel").
"""

cimport numpy as cnp
from cython.parallel cimport parallel, prange, threadid
from libc.limits cimport INT_MAX
from libc.string cimport memset

from opgraph_c._blas cimport dgemm_t, sgemm_t
from opgraph_c._pool cimport POOL_MIN_BYTES, pooled_empty
from opgraph_c._threads cimport (
    Team, blas_threads, have_blas_threads, monotonic, team_init, team_size, team_timed
)
from opgraph_c._vm cimport NodeThunk

import numpy as np

cnp.import_array()


# ------------------------------------------------------------------- the BLAS routines

cdef sgemm_t _sgemm = NULL
cdef dgemm_t _dgemm = NULL


def _load_blas():
    """Read ``?gemm``'s addresses from :mod:`opgraph_c._blas` (once, at import), which checks
    them against its ``SIGNATURES``."""
    global _sgemm, _dgemm
    from opgraph_c._blas import routine_address

    _sgemm = <sgemm_t><size_t>routine_address("gemm", "s")
    _dgemm = <dgemm_t><size_t>routine_address("gemm", "d")


_load_blas()


# ------------------------------------------------------------------- typed dispatch
#
# The C loops (opg_im2col_s, ...) and the geometry struct are in _conv.pxd.

ctypedef fused real:
    float
    double


cdef enum:
    # The three directions (the Ops).
    FORWARD = 0
    GRAD_WEIGHTS = 1
    GRAD_INPUTS = 2
    # How a node's groups are computed (see the module's docstring).
    GEMM = 0  # im2col (col2im) and ?gemm, in bands of output rows
    ONE_BY_ONE = 1  # ?gemm on the image itself (1x1 kernel, stride 1, no padding)
    DEPTHWISE = 2  # one input channel and filter per group (forward): direct loops
    UNSHARED = 3  # per pixel over a chunk of images: dot products of taps and filters
    DIRECT = 4  # unit strides: vector kernels on a zero-padded copy, no columns (_conv.pxd)
    # The border modes.
    EXPLICIT = 0  # pads given ("valid": none)
    FULL = 1
    HALF = 2
    # Buffers start on 64-byte boundaries; a thread's share is a multiple of this.
    ALIGN = 64
    # At most this many partial kernels for the weight gradient's batch sum.
    MAX_SLOTS = 8

# Tunables (:func:`configure`): about this many bytes of columns per band of output rows,
# at least this many columns per band, the work (multiply-adds) from which a call may run
# on several threads, the bytes the weight gradient's partial kernels may take, the DIRECT
# kernels' use (0: never, 1: where their useful share of the work is at least
# _direct_share, 2: wherever they apply) and the most filters per group a one-channel
# group may have to take the DEPTHWISE loops (forward only).
cdef Py_ssize_t _tile_bytes = 256 << 10
cdef Py_ssize_t _min_tile_cols = 256
cdef Py_ssize_t _thread_work = 1 << 21
cdef Py_ssize_t _slot_bytes = 32 << 20
cdef int _direct = 1
cdef double _direct_share = 0.5
cdef Py_ssize_t _depthwise_og = 1
# Unshared filters: the bytes of patches a chunk of images keeps (the filters are read once
# per chunk).
cdef Py_ssize_t _unshared_bytes = 64 * 1024 * 1024

opg_ig_select(-1)


def configure(tile_bytes=None, min_tile_cols=None, thread_work=None, slot_bytes=None,
              direct=None, direct_share=None, depthwise_og=None, simd=None,
              unshared_bytes=None) -> dict:
    """Set the kernels' tunables (None keeps one); returns the previous values, to restore.

    ``tile_bytes``: bytes of columns built per band of output rows (0: one band per image);
    ``min_tile_cols``: the fewest output pixels in a band; ``thread_work``: multiply-adds
    from which a call may run on several threads; ``slot_bytes``: the most bytes the weight
    gradient's partial kernels take together; ``direct``: the direct kernels never (0),
    where at least ``direct_share`` of their multiply-adds are useful (1) or wherever they
    apply (2); ``depthwise_og``: the most filters per group of one-channel groups whose
    forward pass runs the depthwise loops; ``simd``: the direct kernels' vector set, at
    most this level (2 AVX-512, 1 AVX2, 0 plain vectors; -1 the best the CPU runs);
    ``unshared_bytes``: the most bytes of patches a chunk of images keeps for unshared
    filters. For tests and benchmarks.
    """
    global _tile_bytes, _min_tile_cols, _thread_work, _slot_bytes, _direct, _direct_share
    global _depthwise_og, _unshared_bytes
    old = {"tile_bytes": _tile_bytes, "min_tile_cols": _min_tile_cols,
           "thread_work": _thread_work, "slot_bytes": _slot_bytes, "direct": _direct,
           "direct_share": _direct_share, "depthwise_og": _depthwise_og,
           "simd": opg_ig_level, "unshared_bytes": _unshared_bytes}
    if tile_bytes is not None:
        _tile_bytes = tile_bytes
    if min_tile_cols is not None:
        _min_tile_cols = max(1, min_tile_cols)
    if thread_work is not None:
        _thread_work = thread_work
    if slot_bytes is not None:
        _slot_bytes = slot_bytes
    if direct is not None:
        _direct = direct
    if direct_share is not None:
        _direct_share = direct_share
    if depthwise_og is not None:
        _depthwise_og = depthwise_og
    if simd is not None:
        opg_ig_select(simd)
    if unshared_bytes is not None:
        _unshared_bytes = max(1, unshared_bytes)
    return old


cdef struct Plan:
    # One call's shapes and how it runs.
    opg_conv_geom g  # one group of one image (g.C: input channels per group)
    Py_ssize_t B, C, O, G, Og
    Py_ssize_t K  # Cg * kd * kh * kw: one filter's length
    Py_ssize_t N  # od * oh * ow: output pixels of one channel
    Py_ssize_t S  # D * H * W: input pixels of one channel
    Py_ssize_t rows  # od * oh: output rows
    Py_ssize_t kstep  # elements of one group's filters: Og * K, unshared Og * N * K
    Py_ssize_t tile  # output rows per band (GEMM)
    Py_ssize_t ldbuf  # elements of one thread's column buffer
    Py_ssize_t slots  # partial kernels of the weight gradient (1: summed in the output)
    int mode
    int direction  # FORWARD, GRAD_WEIGHTS or GRAD_INPUTS
    # DIRECT: the direct kernels' geometry (one group), the block of the packed filters
    # (forward: output channels, input gradient: taps), the elements of one group's
    # packed filters, the taps' offsets and the packed filters of every group (the
    # buffer all threads read, filled before the batch), and that buffer's bytes.
    opg_ig q
    Py_ssize_t blk, wstep
    Py_ssize_t* off
    void* wpk
    Py_ssize_t shared


cdef inline void _gemm(char ta, char tb, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k,
                       const real* a, Py_ssize_t lda, const real* b, Py_ssize_t ldb,
                       real beta, real* c, Py_ssize_t ldc) noexcept nogil:
    """Column-major ``c (m x n) <- op(a) @ op(b) + beta * c`` (sizes checked to fit int)."""
    cdef int M = <int>m, N = <int>n, Kk = <int>k
    cdef int la = <int>lda, lb = <int>ldb, lc = <int>ldc
    cdef real one = 1
    if real is float:
        _sgemm(&ta, &tb, &M, &N, &Kk, &one, <float*>a, &la, <float*>b, &lb, &beta, c, &lc)
    else:
        _dgemm(&ta, &tb, &M, &N, &Kk, &one, <double*>a, &la, <double*>b, &lb, &beta, c, &lc)


cdef inline void _im2col(const opg_conv_geom* g, const real* img, real* cols, Py_ssize_t r0,
                         Py_ssize_t r1) noexcept nogil:
    if real is float:
        opg_im2col_s(g, img, cols, r0, r1)
    else:
        opg_im2col_d(g, img, cols, r0, r1)


cdef inline void _col2im(const opg_conv_geom* g, const real* cols, real* img, Py_ssize_t r0,
                         Py_ssize_t r1) noexcept nogil:
    if real is float:
        opg_col2im_s(g, cols, img, r0, r1)
    else:
        opg_col2im_d(g, cols, img, r0, r1)


cdef inline void _direct_group(const Plan* P, int direction, Py_ssize_t grp, const real* a,
                               const real* b, real* out, real* buf) noexcept nogil:
    """Group ``grp`` of one image by the direct kernels: forward ``out`` = top from image
    ``a``, input gradient ``out`` = image gradient from top ``a``, weight gradient ``out``
    (the group's filters) += from image ``a`` and top ``b``."""
    cdef const real* w = <const real*>P.wpk + grp * P.wstep
    if real is float:
        if direction == FORWARD:
            opg_direct_forward_s(&P.q, P.off, a, w, out, buf)
        elif direction == GRAD_INPUTS:
            opg_direct_grad_inputs_s(&P.q, P.off, a, w, out, buf)
        else:
            opg_direct_grad_weights_s(&P.q, P.off, a, b, out, buf)
    else:
        if direction == FORWARD:
            opg_direct_forward_d(&P.q, P.off, a, w, out, buf)
        elif direction == GRAD_INPUTS:
            opg_direct_grad_inputs_d(&P.q, P.off, a, w, out, buf)
        else:
            opg_direct_grad_weights_d(&P.q, P.off, a, b, out, buf)


# ------------------------------------------------------------------- one image


cdef void _forward_image(const Plan* P, const real* img, const real* kern, real* top,
                         real* cols) noexcept nogil:
    """``top`` (O, N) of one image ``img`` (C, S)."""
    cdef Py_ssize_t grp, r0, r1, nt, ow = P.g.ow
    cdef const real* x
    cdef const real* w
    cdef real* t
    for grp in range(P.G):
        x = img + grp * P.g.C * P.S
        w = kern + grp * P.kstep
        t = top + grp * P.Og * P.N
        if P.mode == ONE_BY_ONE:
            _gemm(c"N", c"N", P.N, P.Og, P.K, x, P.N, w, P.K, 0, t, P.N)
        elif P.mode == DIRECT:
            _direct_group(P, FORWARD, grp, x, x, t, cols)
        else:
            r0 = 0
            while r0 < P.rows:
                r1 = min(r0 + P.tile, P.rows)
                nt = (r1 - r0) * ow
                _im2col(&P.g, x, cols, r0, r1)
                _gemm(c"N", c"N", nt, P.Og, P.K, cols, nt, w, P.K, 0, t + r0 * ow, P.N)
                r0 = r1


cdef void _grad_weights_image(const Plan* P, const real* img, const real* top, real* dw,
                              real* cols) noexcept nogil:
    """``dw`` (O, K; unshared O, N, K) += the weight gradient of one image."""
    cdef Py_ssize_t grp, r0, r1, nt, ow = P.g.ow
    cdef const real* x
    cdef const real* t
    cdef real* d
    for grp in range(P.G):
        x = img + grp * P.g.C * P.S
        t = top + grp * P.Og * P.N
        d = dw + grp * P.kstep
        if P.mode == ONE_BY_ONE:
            _gemm(c"T", c"N", P.K, P.Og, P.N, x, P.N, t, P.N, 1, d, P.K)
        elif P.mode == DIRECT:
            _direct_group(P, GRAD_WEIGHTS, grp, x, t, d, cols)
        else:
            r0 = 0
            while r0 < P.rows:
                r1 = min(r0 + P.tile, P.rows)
                nt = (r1 - r0) * ow
                _im2col(&P.g, x, cols, r0, r1)
                _gemm(c"T", c"N", P.K, P.Og, nt, cols, nt, t + r0 * ow, P.N, 1, d, P.K)
                r0 = r1


cdef void _grad_inputs_image(const Plan* P, const real* kern, const real* top, real* dimg,
                             real* cols) noexcept nogil:
    """``dimg`` (C, S) of one image from its ``top`` gradient (O, N)."""
    cdef Py_ssize_t grp, r0, r1, nt, ow = P.g.ow
    cdef const real* w
    cdef const real* t
    cdef real* x
    if P.mode != ONE_BY_ONE and P.mode != DIRECT:
        memset(dimg, 0, P.C * P.S * sizeof(real))
    for grp in range(P.G):
        w = kern + grp * P.kstep
        t = top + grp * P.Og * P.N
        x = dimg + grp * P.g.C * P.S
        if P.mode == ONE_BY_ONE:
            _gemm(c"N", c"T", P.N, P.K, P.Og, t, P.N, w, P.K, 0, x, P.N)
        elif P.mode == DIRECT:
            _direct_group(P, GRAD_INPUTS, grp, t, t, x, cols)
        else:
            r0 = 0
            while r0 < P.rows:
                r1 = min(r0 + P.tile, P.rows)
                nt = (r1 - r0) * ow
                _gemm(c"N", c"T", nt, P.K, P.Og, t + r0 * ow, P.N, w, P.K, 0, cols, nt)
                _col2im(&P.g, cols, x, r0, r1)
                r0 = r1


# ------------------------------------------------------------------- unshared filters
#
# The whole call in C (include/opgraph_c_unshared.h): a chunk of ``P.tile`` images at a
# time, the chunk's patches per pixel in ``x``, each thread's im2col columns in ``cols``.


cdef void _unshared_call(const Plan* P, int typenum, int direction, char* A, char* Bp,
                         char* R, char* x, char* cols, int threads) noexcept nogil:
    """The unshared path on the thunk's operands: ``A``, ``Bp``, ``R`` are (forward) image,
    filters, output; (filter gradient) image, top gradient, output; (input gradient)
    filters, top gradient, output."""
    cdef opg_unshared_call c
    cdef char* img = R if direction == GRAD_INPUTS else A
    cdef char* kern = A if direction == GRAD_INPUTS else Bp
    cdef char* top = R if direction == FORWARD else Bp
    cdef char* dw = R if direction == GRAD_WEIGHTS else NULL
    c.g = &P.g
    c.G, c.Og, c.K, c.N, c.B = P.G, P.Og, P.K, P.N, P.B
    c.istep, c.gstep, c.rows = P.C * P.S, P.g.C * P.S, P.rows
    c.tile, c.ldbuf = P.tile, P.ldbuf
    c.direction, c.threads = direction, threads
    if typenum == cnp.NPY_FLOAT:
        opg_unshared_run_s(&c, <float*>img, <float*>kern, <float*>top, <float*>dw,
                           <float*>x, <float*>cols)
    else:
        opg_unshared_run_d(&c, <double*>img, <double*>kern, <double*>top, <double*>dw,
                           <double*>x, <double*>cols)


# ------------------------------------------------------------------- direct kernels


cdef void _direct_prepare(Plan* P, const real* kern) noexcept nogil:
    """The taps' offsets and (forward, input gradient) every group's packed filters."""
    cdef Py_ssize_t grp
    opg_ig_offsets(&P.q, P.g.kd, P.g.kh, P.g.kw, P.g.dd, P.g.dh, P.g.dw, P.off)
    for grp in range(P.G if P.wpk != NULL else 0):
        if real is float:
            opg_direct_pack_s(&P.q, P.direction == GRAD_INPUTS, P.blk, kern + grp * P.kstep,
                              <float*>P.wpk + grp * P.wstep)
        else:
            opg_direct_pack_d(&P.q, P.direction == GRAD_INPUTS, P.blk, kern + grp * P.kstep,
                              <double*>P.wpk + grp * P.wstep)


# ------------------------------------------------------------------- depthwise planes
#
# (forward only: for the gradients the depthwise loops were slower than GEMM, measured)


cdef void _dw_forward_plane(const Plan* P, const real* img, const real* kern, real* top,
                            Py_ssize_t i, real* buf) noexcept nogil:
    """Output plane ``i`` (= b * O + o) of a depthwise correlation (``buf``: the thread's
    ``P.ldbuf`` elements for the padded rows, NULL if the plan has none)."""
    cdef Py_ssize_t b = i // P.O, o = i - b * P.O
    cdef const real* x = img + (b * P.C + o // P.Og) * P.S
    if real is float:
        opg_dw_forward_s(&P.g, x, kern + o * P.K, top + i * P.N, buf if P.ldbuf else NULL)
    else:
        opg_dw_forward_d(&P.g, x, kern + o * P.K, top + i * P.N, buf if P.ldbuf else NULL)


# ------------------------------------------------------------------- the batch
#
# ``threads``: the team's choice for this call (1: no parallel region at all, which also
# keeps a forked child off OpenMP). ``blas``: whether to set OpenBLAS's threads for this
# thread (the team has several threads and OpenBLAS's control was found); batch-parallel
# calls always run each thread's products on one OpenBLAS thread. OpenBLAS's pthreads
# build (SciPy's) has one count for the whole process: it is set to one before the
# parallel region and restored after it, never inside, where a thread that finished early
# would give another thread's products several threads (and the count a race).


cdef inline int _blas_one(const Plan* P) noexcept nogil:
    """One OpenBLAS thread if the mode calls BLAS, before a batch-parallel region (the
    count to restore; -1: nothing set) and in each of its threads (OpenMP builds of
    OpenBLAS keep a count per thread; for the pthreads build it is already one)."""
    return blas_threads(1) if P.mode == GEMM or P.mode == ONE_BY_ONE else -1


cdef void _forward(const Plan* P, const real* img, const real* kern, real* top, real* buf,
                   int threads, bint blas) noexcept nogil:
    cdef Py_ssize_t b, i, istep = P.C * P.S, ostep = P.O * P.N
    cdef int tid = 0, before = -1
    if P.mode == DEPTHWISE:
        if threads > 1:
            with parallel(num_threads=threads):
                tid = threadid()
                # planes on demand, a few dozen per thread (a busy core holds no one up)
                for i in prange(P.B * P.O, schedule="dynamic",
                                chunksize=max(1, P.B * P.O // (32 * threads))):
                    _dw_forward_plane(P, img, kern, top, i, buf + tid * P.ldbuf)
        else:
            for i in range(P.B * P.O):
                _dw_forward_plane(P, img, kern, top, i, buf)
    elif threads > 1 and P.B >= threads:
        before = _blas_one(P)
        with parallel(num_threads=threads):
            tid = threadid()
            _blas_one(P)
            for b in prange(P.B, schedule="static"):
                _forward_image(P, img + b * istep, kern, top + b * ostep, buf + tid * P.ldbuf)
        if before > 0:
            blas_threads(before)
    else:
        if blas and P.mode != DIRECT:
            before = blas_threads(threads)
        for b in range(P.B):
            _forward_image(P, img + b * istep, kern, top + b * ostep, buf)
        if before > 0:
            blas_threads(before)


cdef void _grad_inputs(const Plan* P, const real* kern, const real* top, real* dimg,
                       real* buf, int threads, bint blas) noexcept nogil:
    cdef Py_ssize_t b, istep = P.C * P.S, ostep = P.O * P.N
    cdef int tid = 0, before = -1
    if threads > 1 and P.B >= threads:
        before = _blas_one(P)
        with parallel(num_threads=threads):
            tid = threadid()
            _blas_one(P)
            for b in prange(P.B, schedule="static"):
                _grad_inputs_image(P, kern, top + b * ostep, dimg + b * istep,
                                   buf + tid * P.ldbuf)
        if before > 0:
            blas_threads(before)
    else:
        if blas and P.mode != DIRECT:
            before = blas_threads(threads)
        for b in range(P.B):
            _grad_inputs_image(P, kern, top + b * ostep, dimg + b * istep, buf)
        if before > 0:
            blas_threads(before)


cdef void _grad_weights_slot(const Plan* P, const real* img, const real* top, real* dw,
                             real* cols, Py_ssize_t s) noexcept nogil:
    """Slot ``s``'s partial kernel ``dw``: the sum over images ``s, s + slots, ...``."""
    cdef Py_ssize_t b = s
    while b < P.B:
        _grad_weights_image(P, img + b * P.C * P.S, top + b * P.O * P.N, dw, cols)
        b += P.slots


cdef void _grad_weights(const Plan* P, const real* img, const real* top, real* out,
                        real* partial, real* buf, int threads, bint blas) noexcept nogil:
    cdef Py_ssize_t s, i, total = P.G * P.kstep
    cdef int tid = 0, before = -1
    cdef real* acc
    acc = out if P.slots == 1 else partial
    memset(acc, 0, P.slots * total * sizeof(real))
    if threads > 1 and P.slots >= threads:
        before = _blas_one(P)
        with parallel(num_threads=threads):
            tid = threadid()
            _blas_one(P)
            for s in prange(P.slots, schedule="static"):
                _grad_weights_slot(P, img, top, acc + s * total, buf + tid * P.ldbuf, s)
        if before > 0:
            blas_threads(before)
    else:
        if blas and P.mode != DIRECT:
            before = blas_threads(threads)
        for s in range(P.slots):
            _grad_weights_slot(P, img, top, acc + s * total, buf, s)
        if before > 0:
            blas_threads(before)
    if P.slots > 1:  # the slots' sum, in slot order
        for i in range(total):
            out[i] = partial[i]
        for s in range(1, P.slots):
            acc = partial + s * total
            for i in range(total):
                out[i] += acc[i]


# ------------------------------------------------------------------- the thunk


cdef inline bint _fits(Py_ssize_t n) noexcept:
    return 0 < n <= INT_MAX


cdef object _c_array(object a, int typenum, int ndim):
    """``a`` as an aligned C-contiguous ndarray (a copy if it is not one), or None when it
    is not an exact ndarray of the node's dtype and rank in native byte order."""
    if type(a) is not np.ndarray:
        return None
    cdef cnp.ndarray arr = <cnp.ndarray>a
    if (cnp.PyArray_TYPE(arr) != typenum or cnp.PyArray_NDIM(arr) != ndim
            or not cnp.PyArray_ISNOTSWAPPED(arr)):
        return None
    if not (cnp.PyArray_IS_C_CONTIGUOUS(arr) and cnp.PyArray_ISALIGNED(arr)):
        arr = np.array(arr, order="C", copy=True)
    return arr


cdef object _new(tuple shape, int typenum, int itemsize):
    """A new C-ordered array for an output: big ones from backend-c's buffer pool (a freed
    output's pages instead of fresh ones, which the kernel zero-fills on first touch)."""
    cdef cnp.npy_intp dims[8]
    cdef int i, nd = len(shape)
    cdef Py_ssize_t nbytes = itemsize
    for i in range(nd):
        dims[i] = shape[i]
        nbytes *= dims[i]
    if nbytes >= POOL_MIN_BYTES:
        return pooled_empty(nd, dims, typenum)
    return cnp.PyArray_EMPTY(nd, dims, typenum, 0)


cdef inline char* _aligned(cnp.ndarray buf):
    cdef size_t p = <size_t>cnp.PyArray_BYTES(buf)
    return <char*>((p + ALIGN - 1) // ALIGN * ALIGN)


cdef class CorrThunk(NodeThunk):
    """One ``CorrMM`` / ``Corr3dMM`` node (``direction`` 0), its weight gradient (1) or its
    input gradient (2), float32 or float64 (see the module's docstring).

    Parameters
    ----------
    node, in_cells, out_cells
        The Apply node and its storage cells.
    direction
        ``FORWARD``, ``GRAD_WEIGHTS`` or ``GRAD_INPUTS`` (0, 1, 2).
    nthreads, adaptive, threshold
        The thread team (:mod:`opgraph_c._threads`): up to ``nthreads`` threads (1: one
        thread, OpenBLAS's own thread count untouched), chosen against one thread by the
        times of recent calls if ``adaptive``; one thread below ``threshold`` multiply-adds
        (and below the module's ``thread_work``, see :func:`configure`).
    """

    cdef int direction, nd, typenum, itemsize
    cdef Py_ssize_t groups
    cdef bint unshared
    cdef int border_code  # EXPLICIT (pads below; "valid": zeros), FULL or HALF
    cdef Py_ssize_t pad_before[3]
    cdef Py_ssize_t pad_after[3]
    cdef Py_ssize_t sub[3]
    cdef Py_ssize_t dil[3]
    cdef Team team
    cdef cnp.ndarray _cols, _partial, _shared  # the reused buffers (bytes)
    # Calls run on several threads; the last call's mode (GEMM 0, ONE_BY_ONE 1, DEPTHWISE 2,
    # UNSHARED 3, DIRECT 4). Diagnostics: the tests read them.
    cdef public Py_ssize_t threaded_calls
    cdef public int last_mode

    def __init__(self, node, list in_cells, list out_cells, int direction, int nthreads=1,
                 bint adaptive=True, Py_ssize_t threshold=0):
        NodeThunk.__init__(self, node, in_cells, out_cells)
        op = node.op
        dtype = np.dtype(node.outputs[0].type.dtype)
        if dtype.num not in (cnp.NPY_FLOAT, cnp.NPY_DOUBLE):
            raise TypeError(f"CorrThunk runs float32 or float64, not {dtype}")
        self.direction = direction
        self.typenum = dtype.num
        self.itemsize = dtype.itemsize
        self.nd = len(op.subsample)
        if self.nd not in (2, 3):
            raise ValueError(f"{op}: CorrThunk runs 2-d and 3-d correlations")
        self.groups = op.num_groups
        self.unshared = bool(op.unshared)
        cdef int i
        for i in range(3):
            self.sub[i] = 1
            self.dil[i] = 1
            self.pad_before[i] = self.pad_after[i] = 0
        border = op.border_mode
        self.border_code = FULL if border == "full" else HALF if border == "half" else EXPLICIT
        if self.border_code == EXPLICIT and border != "valid":
            for i in range(self.nd):  # per axis: an int, or a (before, after) pair
                m = border[i]
                self.pad_before[i], self.pad_after[i] = m if isinstance(m, tuple) else (m, m)
        for i in range(self.nd):
            self.sub[3 - self.nd + i] = op.subsample[i]
            self.dil[3 - self.nd + i] = op.filter_dilation[i]
        team_init(&self.team, nthreads, threshold, adaptive)
        self._cols = self._partial = self._shared = None

    # ------------------------------------------------------------- shapes

    cdef tuple _pads(self, tuple kshape):
        """(before, after) per spatial axis for a kernel of spatial shape ``kshape`` (the
        Op's ``pads``)."""
        cdef int i
        cdef Py_ssize_t dk
        out = []
        for i in range(self.nd):
            dk = (<Py_ssize_t>kshape[i] - 1) * self.dil[3 - self.nd + i] + 1
            if self.border_code == FULL:
                out.append((dk - 1, dk - 1))
            elif self.border_code == HALF:
                out.append((dk // 2, dk // 2))
            else:
                out.append((self.pad_before[i], self.pad_after[i]))
        return tuple(out)

    cdef int _shape_args(self, Py_ssize_t* out) except -1:
        """Read the node's optional spatial ``shape`` inputs into ``out``: 1 (given), 0 (the
        node has none) or 2 (values the C path does not take: perform decides)."""
        cdef Py_ssize_t i, n = len(self.node.inputs) - 2
        if n == 0:
            return 0
        if n != self.nd:
            return 2
        for i in range(n):
            v = self.arg(2 + i)
            try:
                out[i] = int(v)
            except (TypeError, ValueError, OverflowError):
                return 2
            if out[i] < 1 or np.ndim(v) != 0:
                return 2
        return 1

    cdef bint _plan(self, Plan* P, tuple img_shape, tuple kshape, tuple out_shape,
                    Py_ssize_t B, Py_ssize_t C, Py_ssize_t O):
        """Fill ``P`` for spatial shapes image / kernel / output (of ``nd`` axes each) and
        ``B`` images of ``C`` channels, ``O`` filters; False when the C path does not run
        these shapes (perform then decides, raising its error where they are wrong)."""
        cdef int nd = self.nd, i, lead = 3 - nd
        cdef Py_ssize_t sp[3]
        cdef Py_ssize_t ks[3]
        cdef Py_ssize_t os[3]
        cdef Py_ssize_t pb[3]
        cdef Py_ssize_t dk, G = self.groups
        pads = self._pads(kshape)
        for i in range(3):
            sp[i] = ks[i] = os[i] = 1
            pb[i] = 0
        for i in range(nd):
            sp[lead + i] = img_shape[i]
            ks[lead + i] = kshape[i]
            os[lead + i] = out_shape[i]
            pb[lead + i] = pads[i][0]
            if pads[i][0] < 0 or pads[i][1] < 0 or sp[lead + i] < 1 or ks[lead + i] < 1:
                return False
            dk = (ks[lead + i] - 1) * self.dil[lead + i] + 1
            if sp[lead + i] + pads[i][0] + pads[i][1] < dk:
                return False
            if (sp[lead + i] + pads[i][0] + pads[i][1] - dk) // self.sub[lead + i] + 1 \
                    != os[lead + i]:
                return False
        if B < 1 or C < 1 or O < 1 or C % G or O % G:
            return False
        P.B, P.C, P.O, P.G = B, C, O, G
        P.Og = O // G
        P.g.C = C // G
        P.g.D, P.g.H, P.g.W = sp[0], sp[1], sp[2]
        P.g.kd, P.g.kh, P.g.kw = ks[0], ks[1], ks[2]
        P.g.sd, P.g.sh, P.g.sw = self.sub[0], self.sub[1], self.sub[2]
        P.g.dd, P.g.dh, P.g.dw = self.dil[0], self.dil[1], self.dil[2]
        P.g.pd, P.g.ph, P.g.pw = pb[0], pb[1], pb[2]
        P.g.od, P.g.oh, P.g.ow = os[0], os[1], os[2]
        P.K = P.g.C * ks[0] * ks[1] * ks[2]
        P.N = os[0] * os[1] * os[2]
        P.S = sp[0] * sp[1] * sp[2]
        P.rows = os[0] * os[1]
        if not (_fits(P.K) and _fits(P.N) and _fits(P.Og) and _fits(P.S)):
            return False
        P.kstep = P.Og * P.K * (P.N if self.unshared else 1)
        P.tile = P.rows
        P.ldbuf = 0
        if self.unshared:
            P.mode = UNSHARED
            P.ldbuf = P.K * P.N  # one image's columns per thread
            # images per chunk: their patches take at most _unshared_bytes
            P.tile = max(1, min(B, _unshared_bytes // (G * P.N * P.K * self.itemsize)))
        elif P.g.C == 1 and P.Og <= _depthwise_og and self.direction == FORWARD:
            P.mode = DEPTHWISE
            P.ldbuf = P.g.D * P.g.H * opg_dw_row_len(&P.g)  # 0: the strided loop
        elif (P.K == P.g.C and P.g.sd == 1 and P.g.sh == 1 and P.g.sw == 1
                and not any(a or b for a, b in pads)):
            P.mode = ONE_BY_ONE
        else:
            P.mode = GEMM
            if _tile_bytes > 0:
                P.tile = max(_tile_bytes // (P.K * P.g.ow * self.itemsize),
                             (_min_tile_cols + P.g.ow - 1) // P.g.ow)
                P.tile = max(1, min(P.tile, P.rows))
            P.ldbuf = P.K * P.tile * P.g.ow
        P.ldbuf = (P.ldbuf * self.itemsize + ALIGN - 1) // ALIGN * ALIGN // self.itemsize
        P.slots = 1
        if self.direction == GRAD_WEIGHTS and P.mode != UNSHARED:
            P.slots = max(1, min(B, MAX_SLOTS, _slot_bytes // (G * P.kstep * self.itemsize)))
        P.off, P.wpk, P.shared = NULL, NULL, 0
        P.direction = self.direction
        if P.mode == GEMM:
            self._plan_direct(P, pads)
        return True

    cdef bint _plan_direct(self, Plan* P, tuple pads):
        """Make ``P`` a DIRECT plan where the direct kernels apply (unit strides) and, with
        ``direct`` 1, pay: at least ``direct_share`` of their multiply-adds are useful (the
        rest: filters or taps padded up to a tile, the flat outputs past each row) and
        (forward, input gradient) a filter has 32 weights or more (fewer: columns cost
        little). The mode depends on the shapes only, never on the threads."""
        cdef opg_ig* q = &P.q
        cdef opg_conv_geom* g = &P.g
        cdef Py_ssize_t ob, step, kb, ov, ki, z = self.itemsize, ldbuf, offs
        cdef double share
        if _direct == 0 or g.sd != 1 or g.sh != 1 or g.sw != 1:
            return False
        opg_ig_tiles(z, &ob, &step, &kb, &ov, &ki)
        q.C, q.D, q.H, q.W, q.O, q.K = g.C, g.D, g.H, g.W, P.Og, P.K
        q.pd, q.ph, q.pw = g.pd, g.ph, g.pw
        q.Dp = g.D + g.pd + (pads[0][1] if self.nd == 3 else 0)
        q.Hp = g.H + g.ph + pads[self.nd - 2][1]
        q.Wp = g.W + g.pw + pads[self.nd - 1][1]
        q.od, q.oh, q.ow = g.od, g.oh, g.ow
        q.xlen = q.C * q.Dp * q.Hp * q.Wp
        q.Nf = ((q.od - 1) * q.Hp + q.oh - 1) * q.Wp + q.ow
        q.Nc = (q.Nf + step - 1) // step * step
        q.Kp, q.ldt = q.K, q.O
        if self.direction == GRAD_WEIGHTS:
            q.ldt = (q.O + ov - 1) // ov * ov
            q.Kp = (q.K + kb - 1) // kb * kb
            share = <double>q.O / q.ldt * q.K / q.Kp
            ldbuf = opg_ig_round(q.xlen, z) + opg_ig_round(P.N * q.ldt, z) + q.Kp * q.ldt
            P.blk, P.wstep = 0, 0
        else:
            q.xlen += q.Nc - q.Nf  # the last tile's reads past the last plane
            if self.direction == FORWARD:
                q.ldt = (q.O + ob - 1) // ob * ob
                P.blk, P.wstep = ob, q.ldt * q.K
            else:
                q.Kp = (q.K + ki - 1) // ki * ki
                P.blk, P.wstep = ki, q.Kp * q.O
            share = <double>q.O * q.K * P.N / (q.ldt * q.Kp * q.Nf)
            ldbuf = opg_ig_round(q.xlen, z) + q.ldt * q.Nc
            if q.K < 32 and _direct == 1:
                return False
        if _direct == 1 and share < _direct_share:
            return False
        offs = opg_ig_round(q.Kp * sizeof(Py_ssize_t), 1)
        P.mode = DIRECT
        P.ldbuf = opg_ig_round(ldbuf, z)
        P.shared = offs + P.G * P.wstep * z
        return True

    cdef char* _buffer(self, int which, Py_ssize_t nbytes):
        """The reused buffer ``which`` (0: the threads' columns or padded copies, 1: partial
        kernels or an unshared chunk's patches, 2: the direct kernels' shared offsets and
        filters), at least ``nbytes``
        long, 64-byte aligned; grown (never shrunk) as needed."""
        cdef cnp.ndarray buf = (self._cols, self._partial, self._shared)[which]
        if buf is None or cnp.PyArray_SIZE(buf) < nbytes + ALIGN:
            buf = np.empty(nbytes + ALIGN, dtype=np.uint8)
            if which == 0:
                self._cols = buf
            elif which == 1:
                self._partial = buf
            else:
                self._shared = buf
        return _aligned(buf)

    def buffer_bytes(self) -> int:
        """Bytes of the buffers this thunk keeps for its next calls (a diagnostic)."""
        return sum(
            0 if b is None else b.nbytes for b in (self._cols, self._partial, self._shared)
        )

    # ------------------------------------------------------------- a call

    cdef int fast(self) except -1:
        cdef int t = self.typenum, nd = self.nd, ndk = 2 + (2 * nd if self.unshared else nd)
        cdef Plan P
        cdef Py_ssize_t given[3]
        cdef int shape_args
        cdef object a, b, out  # ndarrays (untyped: their ``shape`` is a tuple)
        cdef tuple kshape, imshape, oshape
        if self.direction == FORWARD:
            a = _c_array(self.arg(0), t, 2 + nd)
            b = _c_array(self.arg(1), t, ndk)
            if a is None or b is None or a.shape[1] != b.shape[ndk - nd - 1] * self.groups:
                return 1
            kshape = b.shape[ndk - nd:]
            pads = self._pads(kshape)
            oshape = tuple(
                (a.shape[2 + i] + pads[i][0] + pads[i][1] - (kshape[i] - 1)
                 * self.dil[3 - nd + i] - 1) // self.sub[3 - nd + i] + 1
                for i in range(nd)
            )
            if self.unshared and b.shape[1:1 + nd] != oshape:
                return 1
            if not self._plan(&P, a.shape[2:], kshape, oshape, a.shape[0], a.shape[1],
                              b.shape[0]):
                return 1
            out = _new((P.B, P.O, *oshape), t, self.itemsize)
        elif self.direction == GRAD_WEIGHTS:
            a = _c_array(self.arg(0), t, 2 + nd)  # img
            b = _c_array(self.arg(1), t, 2 + nd)  # topgrad
            shape_args = self._shape_args(given)
            if a is None or b is None or shape_args == 2 or a.shape[0] != b.shape[0]:
                return 1
            oshape = b.shape[2:]
            kshape = self._kernel_shape(a.shape[2:], oshape, given, shape_args)
            if kshape is None or not self._plan(&P, a.shape[2:], kshape, oshape, a.shape[0],
                                                a.shape[1], b.shape[1]):
                return 1
            if self.unshared:
                out = _new((P.O, *oshape, P.g.C, *kshape), t, self.itemsize)
            else:
                out = _new((P.O, P.g.C, *kshape), t, self.itemsize)
        else:
            a = _c_array(self.arg(0), t, ndk)  # kern
            b = _c_array(self.arg(1), t, 2 + nd)  # topgrad
            shape_args = self._shape_args(given)
            if a is None or b is None or shape_args == 2 or a.shape[0] != b.shape[1]:
                return 1
            kshape = a.shape[ndk - nd:]
            oshape = b.shape[2:]
            if self.unshared and a.shape[1:1 + nd] != oshape:
                return 1
            imshape = self._image_shape(kshape, oshape, given, shape_args)
            if imshape is None or not self._plan(&P, imshape, kshape, oshape, b.shape[0],
                                                 a.shape[ndk - nd - 1] * self.groups,
                                                 a.shape[0]):
                return 1
            out = _new((P.B, P.C, *imshape), t, self.itemsize)
        self._compute(&P, a, b, out)
        self.set_out(0, out)
        return 0

    cdef tuple _kernel_shape(self, tuple imshape, tuple oshape, Py_ssize_t* given, int n):
        """The weight gradient's kernel shape: the ``shape`` inputs, or inferred."""
        cdef int i, lead = 3 - self.nd
        if n == 1:
            return tuple(given[i] for i in range(self.nd))
        cdef Py_ssize_t dk
        if self.border_code == HALF:
            return None
        out = []
        for i in range(self.nd):  # stride 1 (make_node asks for the shape otherwise)
            if self.sub[lead + i] != 1:
                return None
            if self.border_code == FULL:
                dk = <Py_ssize_t>oshape[i] - <Py_ssize_t>imshape[i] + 1
            else:
                dk = (<Py_ssize_t>imshape[i] + self.pad_before[i] + self.pad_after[i]
                      - <Py_ssize_t>oshape[i] + 1)
            if dk < 1:
                return None
            out.append((dk - 1) // self.dil[lead + i] + 1)
        return tuple(out)

    cdef tuple _image_shape(self, tuple kshape, tuple oshape, Py_ssize_t* given, int n):
        """The input gradient's image shape: the ``shape`` inputs, or inferred."""
        cdef int i, lead = 3 - self.nd
        if n == 1:
            return tuple(given[i] for i in range(self.nd))
        pads = self._pads(kshape)
        return tuple(
            (oshape[i] - 1) * self.sub[lead + i] + (kshape[i] - 1) * self.dil[lead + i] + 1
            - pads[i][0] - pads[i][1]
            for i in range(self.nd)
        )

    cdef int _compute(self, Plan* P, cnp.ndarray a, cnp.ndarray b, cnp.ndarray out) except -1:
        """Run the planned call on C-contiguous operands into ``out``, on the team's choice of
        threads."""
        cdef Py_ssize_t work = P.B * P.O * P.K * P.N
        cdef bint uses_blas = P.mode == GEMM or P.mode == ONE_BY_ONE
        cdef bint blas = self.team.nthreads > 1 and have_blas_threads()
        cdef bint timed = False
        cdef int threads = 1
        cdef double start = 0
        cdef Py_ssize_t units
        cdef char* cols = NULL
        cdef char* partial = NULL
        cdef char* shared = NULL
        units = P.slots if self.direction == GRAD_WEIGHTS else P.B
        if P.mode == DEPTHWISE:  # threads take planes
            units = P.B * P.O
        elif P.mode == UNSHARED:  # threads take images (and pixels)
            units = P.B
        # (the direct kernels thread the batch only: fewer images than threads, one thread)
        if (self.team.nthreads > 1 and work >= _thread_work and (blas or not uses_blas)
                and (P.mode != DIRECT or units >= self.team.nthreads)):
            threads = team_size(&self.team, work)
            timed = True
        if P.ldbuf:  # one buffer per thread of a parallel region (depthwise and unshared
            # calls always open one on several threads: any thread may take any item)
            cols = self._buffer(0, P.ldbuf * self.itemsize * (threads if threads > 1 and (
                units >= threads or P.mode == DEPTHWISE or P.mode == UNSHARED) else 1))
        if P.slots > 1:
            partial = self._buffer(1, P.slots * P.G * P.kstep * self.itemsize)
        elif P.mode == UNSHARED:  # the chunk's patches
            partial = self._buffer(1, P.G * P.N * P.tile * P.K * self.itemsize)
        if P.mode == DIRECT:
            shared = self._buffer(2, P.shared)
            P.off = <Py_ssize_t*>shared
            if P.wstep:
                P.wpk = shared + opg_ig_round(P.q.Kp * sizeof(Py_ssize_t), 1)
        cdef char* A = cnp.PyArray_BYTES(a)
        cdef char* Bp = cnp.PyArray_BYTES(b)
        cdef char* R = cnp.PyArray_BYTES(out)
        self.last_mode = P.mode
        if timed:
            start = monotonic()
        cdef char* kern = Bp if self.direction == FORWARD else A
        with nogil:
            if P.mode == UNSHARED:
                _unshared_call(P, self.typenum, self.direction, A, Bp, R, partial, cols,
                               threads)
            else:
                if P.mode == DIRECT and self.typenum == cnp.NPY_FLOAT:
                    _direct_prepare(P, <float*>kern)
                elif P.mode == DIRECT:
                    _direct_prepare(P, <double*>kern)
                if self.typenum == cnp.NPY_FLOAT:
                    if self.direction == FORWARD:
                        _forward(P, <float*>A, <float*>Bp, <float*>R, <float*>cols, threads, blas)
                    elif self.direction == GRAD_WEIGHTS:
                        _grad_weights(P, <float*>A, <float*>Bp, <float*>R, <float*>partial,
                                      <float*>cols, threads, blas)
                    else:
                        _grad_inputs(P, <float*>A, <float*>Bp, <float*>R, <float*>cols, threads,
                                     blas)
                else:
                    if self.direction == FORWARD:
                        _forward(P, <double*>A, <double*>Bp, <double*>R, <double*>cols, threads,
                                 blas)
                    elif self.direction == GRAD_WEIGHTS:
                        _grad_weights(P, <double*>A, <double*>Bp, <double*>R, <double*>partial,
                                      <double*>cols, threads, blas)
                    else:
                        _grad_inputs(P, <double*>A, <double*>Bp, <double*>R, <double*>cols,
                                     threads, blas)
        if timed:
            team_timed(&self.team, threads, monotonic() - start, work)
        if threads > 1:
            self.threaded_calls += 1
        return 0
