# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The precompiled loop of core's ``Scan`` Op: :class:`ScanThunk`.

``Scan.run_loop`` runs one Python iteration per step. This thunk runs the same loop with the
per-step work in C, for a Scan whose inner graph was compiled by the ``c`` linker (its VM
runner is a :class:`opgraph_c._vm.CRunner`):

- the recurrent buffers are allocated once per call (circular ones when ``info.buffer_sizes``
  says so), nit_sot buffers at the first step, exactly as ``run_loop`` does; big ones come
  from the buffer pool (``opgraph_c._pool``), as elementwise outputs do, so a loop called
  again reuses the pages of the buffers its caller dropped instead of faulting in new ones;
- each inner input that reads a sequence entry or a tap of a recurrent buffer gets an
  ndarray view made once per call; each step only moves that view's data pointer to the
  step's entry (when nothing but the thunk and the inner input cell holds the view, so no
  one can see it move; else a new view is made for the step);
- the inner VM's runner is called through its C entry point (``run_once``), with no Python
  frame;
- an output whose entries take at least ``INPLACE_MIN_BYTES`` and whose inner node can
  compute into an array found in its cell (an elementwise kernel, also at the start of an
  in-place chain: :func:`write_cells`) is written in place: before the step, that cell gets
  a view of the step's buffer entry, and nothing is copied after it;
- any other output is copied into its buffer with ``memmove`` when it is an ndarray of the
  buffer's dtype, C-contiguous, of the entry's shape (shapes are checked every step, as in
  ``run_loop``); any other value takes ``run_loop``'s own assignment (``buf[i] = value``);
- shared states (any Python object: a counter array, a RandomState) are carried as objects,
  an ndarray copied as ``run_loop`` copies it; ``until`` (``as_while``) stops the loop.

Every error message is the Op's (``check_inputs`` and ``_shape_error``, and the note naming
the step). A Scan whose inner VM is not a C runner (``linker="py"``, DEBUG_MODE, a profiled
inner function), and a call with unusual values (an ndarray subclass, more than 64
dimensions) run ``Scan.run_loop`` itself on the thunk's inner function.

Entries are ndarray views, 0-d ones included (``run_loop``'s ``s[t, ...]``).
"""

cimport numpy as cnp
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.string cimport memmove

from opgraph_c._vm cimport CRunner, NodeThunk

import numpy as np

from opgraph.link.utils import augment_exception
from opgraph_c._pool import new_array

cnp.import_array()


cdef extern from "numpy/arrayobject.h":
    PyTypeObject PyArray_Type
    # Steals a reference to descr.
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.PyArray_Descr* descr, int nd,
                                cnp.npy_intp* dims, cnp.npy_intp* strides, void* data,
                                int flags, PyObject* obj)
    ctypedef struct PyArrayObject_fields:
        char* data

cdef extern from "Python.h":
    Py_ssize_t Py_REFCNT(PyObject* o)


cdef enum:
    MAXDIMS = 64
    # Entries of at least this many bytes are written by the inner graph in place (a view
    # made per step costs about what copying 1-2 KB does).
    INPLACE_MIN_BYTES = 4096
    # _put's results.
    PUT_DONE = 0
    PUT_SHAPE = 1   # an ndarray of another shape: the Op's shape error
    PUT_PYTHON = 2  # anything else: run_loop's own ``buf[i] = value``
    PUT_IN_PLACE = 3  # already there: the inner graph wrote it into the entry


cdef cnp.ndarray _view(cnp.ndarray base, int nd, cnp.npy_intp* dims, cnp.npy_intp* strides,
                       char* data):
    """A view of ``base``'s memory with the given shape, strides and first element."""
    cdef cnp.PyArray_Descr* descr = cnp.PyArray_DESCR(base)
    cdef int flags = cnp.NPY_ARRAY_WRITEABLE if cnp.PyArray_ISWRITEABLE(base) else 0
    Py_INCREF(<object><PyObject*>descr)  # stolen by PyArray_NewFromDescr
    cdef cnp.ndarray out = <cnp.ndarray>PyArray_NewFromDescr(
        &PyArray_Type, descr, nd, dims, strides, data, flags, NULL
    )
    cnp.set_array_base(out, base)
    return out


cdef int _put(cnp.ndarray buf, Py_ssize_t row, object value) except -1:
    """Copy ``value`` into ``buf[row]`` when it is an ndarray of the row's shape, of the
    buffer's dtype and C-contiguous (PUT_DONE, or PUT_IN_PLACE when it is that row's memory);
    PUT_SHAPE for an ndarray of another shape, PUT_PYTHON for anything else (nothing
    written in either case)."""
    cdef cnp.ndarray v
    cdef int d, nd = cnp.PyArray_NDIM(buf) - 1
    if not cnp.PyArray_Check(value):
        return PUT_PYTHON
    v = <cnp.ndarray>value
    if cnp.PyArray_NDIM(v) != nd:
        return PUT_SHAPE
    for d in range(nd):
        if cnp.PyArray_DIM(v, d) != cnp.PyArray_DIM(buf, d + 1):
            return PUT_SHAPE
    if not cnp.PyArray_CheckExact(value) or not cnp.PyArray_IS_C_CONTIGUOUS(v):
        return PUT_PYTHON
    if not cnp.PyArray_ISNOTSWAPPED(v) or not cnp.PyArray_EquivTypenums(
        cnp.PyArray_TYPE(v), cnp.PyArray_TYPE(buf)
    ):
        return PUT_PYTHON
    cdef char* dest = cnp.PyArray_BYTES(buf) + row * cnp.PyArray_STRIDE(buf, 0)
    if cnp.PyArray_BYTES(v) == dest:
        return PUT_IN_PLACE
    memmove(dest, cnp.PyArray_BYTES(v), <size_t>cnp.PyArray_NBYTES(v))
    return PUT_DONE


cdef inline object _finish(object op, cnp.ndarray buf, Py_ssize_t used, Py_ssize_t full):
    """``Scan._finish``: the whole buffer when every entry was written in order, else the
    Op's own cut or reordering."""
    cdef Py_ssize_t size = cnp.PyArray_DIM(buf, 0)
    if used == size and size >= full:
        return buf
    return op._finish(buf, used, full)


cdef inline object _owned(object value):
    """``Scan``'s ``_owned_copy``: a copy of an ndarray (inner outputs are borrowed)."""
    if cnp.PyArray_CheckExact(value):
        return cnp.PyArray_NewCopy(<cnp.ndarray>value, cnp.NPY_CORDER)
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def _chain_root(v):
    """The variable whose memory inner output ``v`` is: ``v`` itself, or the first value of
    the in-place chain ending in ``v`` (each node overwriting its input); None when ``v`` is
    an input or a view of one."""
    while v.owner is not None:
        node = v.owner
        k = node.outputs.index(v)
        destroyed = (getattr(node.op, "destroy_map", None) or {}).get(k)
        if destroyed:
            v = node.inputs[destroyed[0]]
            continue
        if k in (getattr(node.op, "view_map", None) or {}):
            return None
        return v
    return None


def write_cells(inner_function, Py_ssize_t n_out):
    """Per recurrent and nit_sot output of the loop (the first ``n_out`` inner outputs): the
    storage cell of the inner node whose array becomes that output (see :func:`_chain_root`)
    when its thunk writes into an array it finds in that cell (``output_reuse``), so that a
    view of the output's buffer entry put there is written in place; else None."""
    vm = inner_function.vm
    fgraph = inner_function.function.maker.fgraph
    storage = getattr(vm, "storage_map", None)
    nodes, thunks = getattr(vm, "nodes", None), getattr(vm, "thunks", None)
    if storage is None or nodes is None or thunks is None:
        return [None] * n_out
    thunk_of = dict(zip(nodes, thunks))
    outputs = list(fgraph.outputs)
    cells, taken = [], set()
    for o in range(n_out):
        root = _chain_root(outputs[o]) if outputs.count(outputs[o]) == 1 else None
        flags = None
        if root is not None and root not in taken and root in storage:
            flags = getattr(thunk_of.get(root.owner), "output_reuse", None)
        if flags and flags[root.owner.outputs.index(root)]:
            taken.add(root)
            cells.append(storage[root])
        else:
            cells.append(None)
    return cells


cdef class ScanThunk(NodeThunk):
    """A Scan node's loop in C (see the module docstring).

    Parameters
    ----------
    node
        The Scan Apply node.
    in_cells, out_cells
        Its storage cells.
    inner_function
        ``node.op.inner_function()``, compiled when the thunk is made (in the mode of the
        function being linked).
    fresh_views
        Make a new view of each step's entries instead of moving one (for measurements).

    Attributes
    ----------
    c_calls
        Calls whose loop ran in C; ``perform_calls`` counts those that ran ``run_loop``.
    inplace_outputs
        Let the inner graph write each step's outputs of at least ``INPLACE_MIN_BYTES``
        straight into their buffer entries (default True; False copies every one, for
        measurements): before the step, a view of the entry goes into the cell of the inner
        node producing the output (:func:`write_cells`), whose thunk computes into it.
    write_cells
        That cell per recurrent and nit_sot output, or None where the output is copied.
    inplace_writes
        Entries the inner graph wrote in place (none of them copied), over all calls.
    """

    cdef public object inner_function
    cdef public Py_ssize_t c_calls, inplace_writes
    cdef public bint fresh_views, inplace_outputs
    cdef public list write_cells
    cdef object op, info, runner
    cdef list inner_in, inner_out
    cdef Py_ssize_t n_seqs, n_rec, n_nit, n_shared, n_slots, state_pos
    cdef bint as_while, has_write_cells
    cdef tuple lags, kept  # kept: info.buffer_size of each recurrent and nit_sot output
    cdef list rec_dtypes, nit_dtypes, nit_ndims
    # Per tap slot (inner inputs n_seqs .. n_slots - 1): its recurrent output and tap.
    cdef list tap_rec, tap_tap

    def __init__(self, node, list in_cells, list out_cells, object inner_function,
                 bint fresh_views=False):
        NodeThunk.__init__(self, node, in_cells, out_cells, MAXDIMS - 1)
        op = node.op
        info = op.info
        self.op, self.info = op, info
        self.inner_function = inner_function
        self.fresh_views = fresh_views
        self.inplace_outputs = True
        runner = getattr(inner_function.vm, "runner", None)
        self.runner = runner if isinstance(runner, CRunner) else None
        self.inner_in = list(inner_function.input_cells)
        self.inner_out = list(inner_function.output_cells)
        self.n_seqs, self.n_rec = info.n_seqs, info.n_rec
        self.n_nit, self.n_shared = info.n_nit_sot, info.n_shared_outs
        self.as_while = info.as_while
        self.lags = tuple(info.rec_lags)
        self.kept = tuple(info.buffer_size(k) for k in range(self.n_rec + self.n_nit))
        self.tap_rec, self.tap_tap = [], []
        for j, taps in enumerate(info.rec_taps):
            for tap in taps:
                self.tap_rec.append(j)
                self.tap_tap.append(tap)
        self.n_slots = self.n_seqs + len(self.tap_rec)
        self.state_pos = self.n_slots
        self.rec_dtypes = [node.outputs[j].type.dtype for j in range(self.n_rec)]
        self.nit_dtypes = [node.outputs[self.n_rec + k].type.dtype for k in range(self.n_nit)]
        self.nit_ndims = [node.outputs[self.n_rec + k].type.ndim for k in range(self.n_nit)]
        self.write_cells = (
            write_cells(inner_function, self.n_rec + self.n_nit)
            if self.runner is not None
            else [None] * (self.n_rec + self.n_nit)
        )
        self.has_write_cells = any(c is not None for c in self.write_cells)

    @property
    def runs_in_c(self):
        """Whether the inner graph's VM is a C runner (else every call runs ``run_loop``)."""
        return self.runner is not None

    cdef int fast(self) except -1:
        cdef list inputs = [(<list>c)[0] for c in self.in_cells]
        if self.runner is None or not self._usual(inputs):
            self.perform_calls += 1
            self.op.run_loop(self.inner_function, self.node, inputs, self.out_cells)
            return 0
        n, seqs = self.op.check_inputs(self.node, inputs)
        self.c_calls += 1
        self._loop(inputs, n, seqs)
        return 0

    cdef bint _usual(self, list inputs):
        """Sequences and initial values are plain ndarrays of at most MAXDIMS - 1 dims."""
        cdef Py_ssize_t i
        for i in range(1, 1 + self.n_seqs + self.n_rec):
            v = inputs[i]
            if not cnp.PyArray_CheckExact(v) or cnp.PyArray_NDIM(<cnp.ndarray>v) < 1:
                return False
        return True

    cdef int _loop(self, list inputs, Py_ssize_t n, list seqs) except -1:
        """``run_loop`` with the steps in C (the values were checked by ``check_inputs``)."""
        cdef Py_ssize_t n_slots = self.n_slots
        cdef Py_ssize_t n_words = 3 * n_slots + 2 * (self.n_rec + self.n_nit) + 1
        # One block: per slot its bytes per row, row offset and rows (0: no wrap); per
        # recurrent output its lag and rows; per nit_sot output its rows.
        cdef cnp.npy_intp* block = <cnp.npy_intp*>PyMem_Malloc(n_words * sizeof(cnp.npy_intp))
        if block == NULL:
            raise MemoryError()
        try:
            self._run(inputs, n, seqs, block)
        finally:
            PyMem_Free(block)
        return 0

    cdef int _run(self, list inputs, Py_ssize_t n, list seqs, cnp.npy_intp* block) except -1:
        op, node, info = self.op, self.node, self.info
        cdef Py_ssize_t n_seqs = self.n_seqs, n_rec = self.n_rec, n_nit = self.n_nit
        cdef Py_ssize_t n_shared = self.n_shared, n_slots = self.n_slots
        cdef Py_ssize_t base = 1 + n_seqs, j, k, s, t, row, lag, size, full, steps_done
        cdef list inner_in = self.inner_in, inner_out = self.inner_out
        cdef list bufs = [], nit_bufs = [None] * n_nit, views = [], sources = []
        cdef list states, tap_rec = self.tap_rec, tap_tap = self.tap_tap
        cdef cnp.ndarray buf, src
        cdef list cell
        cdef int put
        cdef bint fresh = self.fresh_views
        cdef PyObject* held
        cdef CRunner runner = <CRunner>self.runner
        cdef cnp.npy_intp* slot_stride = block
        cdef cnp.npy_intp* slot_off = block + n_slots
        cdef cnp.npy_intp* slot_rows = block + 2 * n_slots
        cdef cnp.npy_intp* lags = block + 3 * n_slots
        cdef cnp.npy_intp* sizes = lags + n_rec
        cdef cnp.npy_intp* nit_sizes = sizes + n_rec
        cdef char* ptr
        cdef bint reverse = info.reverse
        cdef list wcells = self.write_cells
        cdef object wcell
        # Whether some output's inner node may write into its buffer entry (see the class).
        cdef bint writes = self.inplace_outputs and self.has_write_cells

        for j in range(n_rec):
            init = inputs[base + j]
            lag = lags[j] = self.lags[j]
            full = lag + n
            size = self.kept[j] or full
            size = max(min(size, full), lag + 1 if n else lag)
            buf = new_array((size, *init.shape[1:]), self.rec_dtypes[j])
            buf[:lag] = init[:lag]
            bufs.append(buf)
            sizes[j] = size
        for k in range(n_nit):
            nit_sizes[k] = n if info.reverse else self.kept[n_rec + k] or n
        states = op.initial_states(inputs[base + n_rec : base + n_rec + n_shared])
        non_seqs = inputs[base + n_rec + n_shared :]
        for k, value in enumerate(non_seqs):
            (<list>inner_in[self.state_pos + n_shared + k])[0] = value

        for s in range(n_slots):
            if s < n_seqs:
                src = <cnp.ndarray>seqs[s]
                slot_off[s] = 0
                slot_rows[s] = 0
            else:
                j = tap_rec[s - n_seqs]
                src = <cnp.ndarray>bufs[j]
                slot_off[s] = lags[j] + <Py_ssize_t>tap_tap[s - n_seqs]
                slot_rows[s] = sizes[j]
            sources.append(src)
            slot_stride[s] = cnp.PyArray_STRIDE(src, 0)
            views.append(None)

        steps_done = n
        try:
            for t in range(n):
                for s in range(n_slots):
                    src = <cnp.ndarray>sources[s]
                    row = t + slot_off[s]
                    if slot_rows[s]:
                        row = row % slot_rows[s]
                    ptr = cnp.PyArray_BYTES(src) + row * slot_stride[s]
                    cell = <list>inner_in[s]
                    held = PyList_GET_ITEM(views, s)
                    if (
                        not fresh
                        and held != <PyObject*>None
                        and Py_REFCNT(held) == 2
                        and PyList_GET_ITEM(cell, 0) == held
                        and cnp.PyArray_ISALIGNED(src)
                    ):
                        # Only ``views`` and the cell hold it: no one sees it move.
                        (<PyArrayObject_fields*>held).data = ptr
                    else:
                        # (No local keeps the view: its count must stay ``views`` + cell.)
                        views[s] = _view(
                            src,
                            cnp.PyArray_NDIM(src) - 1,
                            cnp.PyArray_DIMS(src) + 1,
                            cnp.PyArray_STRIDES(src) + 1,
                            ptr,
                        )
                        cell[0] = <object>PyList_GET_ITEM(views, s)
                for k in range(n_shared):
                    (<list>inner_in[self.state_pos + k])[0] = states[k]
                if writes:
                    for j in range(n_rec + n_nit):
                        wcell = <object>PyList_GET_ITEM(wcells, j)
                        if wcell is None:
                            continue
                        if j < n_rec:
                            buf = <cnp.ndarray>bufs[j]
                            row = (t + lags[j]) % sizes[j]
                        elif nit_bufs[j - n_rec] is None:  # allocated after the first step
                            continue
                        else:
                            buf = <cnp.ndarray>nit_bufs[j - n_rec]
                            k = j - n_rec
                            row = n - 1 - t if reverse else t % nit_sizes[k]
                        if cnp.PyArray_STRIDE(buf, 0) < INPLACE_MIN_BYTES:
                            continue
                        # Only the cell holds the view: a thunk reusing an unshared array
                        # (an intermediate's) takes it too.
                        (<list>wcell)[0] = _view(
                            buf,
                            cnp.PyArray_NDIM(buf) - 1,
                            cnp.PyArray_DIMS(buf) + 1,
                            cnp.PyArray_STRIDES(buf) + 1,
                            cnp.PyArray_BYTES(buf) + row * cnp.PyArray_STRIDE(buf, 0),
                        )
                try:
                    runner.run_once()
                except Exception as exc:  # run_loop's message, word for word
                    new = augment_exception(exc, f"(raised in step {t} of {n} of the loop {op})")
                    if new is exc:
                        raise
                    raise new from exc
                for j in range(n_rec):
                    value = (<list>inner_out[j])[0]
                    buf = <cnp.ndarray>bufs[j]
                    row = (t + lags[j]) % sizes[j]
                    put = _put(buf, row, value)
                    if put == PUT_IN_PLACE:
                        self.inplace_writes += 1
                    elif put != PUT_DONE:
                        want = (<object>buf).shape[1:]
                        if put == PUT_SHAPE or np.shape(value) != want:
                            raise ValueError(op._shape_error(node, j, value, want, t))
                        buf[row] = value
                for k in range(n_nit):
                    value = (<list>inner_out[n_rec + k])[0]
                    if nit_bufs[k] is None:
                        nit_bufs[k] = new_array((nit_sizes[k], *np.shape(value)), self.nit_dtypes[k])
                    buf = <cnp.ndarray>nit_bufs[k]
                    row = n - 1 - t if reverse else t % nit_sizes[k]
                    put = _put(buf, row, value)
                    if put == PUT_IN_PLACE:
                        self.inplace_writes += 1
                    elif put != PUT_DONE:
                        want = (<object>buf).shape[1:]
                        if put == PUT_SHAPE or np.shape(value) != want:
                            raise ValueError(op._shape_error(node, n_rec + k, value, want, t))
                        buf[row] = value
                for k in range(n_shared):
                    value = (<list>inner_out[n_rec + n_nit + k])[0]
                    # Updated in place (an inner graph's running sum): no copy.
                    states[k] = value if value is states[k] else _owned(value)
                if self.as_while and (<list>inner_out[len(inner_out) - 1])[0]:
                    steps_done = t + 1
                    break
        finally:
            views = sources = None
            self.inner_function.clear()
            if writes:  # no cell keeps a view of an output handed to the caller
                for wcell in wcells:
                    if wcell is not None:
                        (<list>wcell)[0] = None
        for j in range(n_rec):
            self.set_out(j, _finish(op, bufs[j], lags[j] + steps_done, lags[j] + n))
        for k in range(n_nit):
            nbuf = nit_bufs[k]
            if nbuf is None:
                nbuf = np.zeros((0,) * self.nit_ndims[k], dtype=self.nit_dtypes[k])
            self.set_out(n_rec + k, _finish(op, nbuf, steps_done, n))
        for k in range(n_shared):
            self.set_out(n_rec + n_nit + k, states[k])
        return 0
