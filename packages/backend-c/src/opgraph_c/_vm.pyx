# cython: language_level=3, boundscheck=False, wraparound=False
"""The precompiled VM of the ``c`` linker: runs per-node thunks over storage cells.

Built when opgraph-backend-c is installed (see the package README for the rebuild step).

- :class:`CThunk` is the base of thunks with a C entry point (the generated-kernel drivers
  of :mod:`opgraph_c._elemwise`); the VM calls their ``run`` through the C vtable, with no
  Python frame and no argument tuple. Any other thunk (an Op's ``perform`` fallback) is
  called as a Python callable.
- :class:`CLoop` runs the thunks in topological order and, with ``allow_gc``, empties each
  intermediate's cell right after its last reader ran (the plan comes from core's
  ``gc_plan``).
- :class:`CStack` evaluates graphs with lazy nodes (``ifelse``) on demand, iteratively: a
  lazy thunk returns the indices of the inputs it still needs, or a false value when done.

Both call ``fail(index)`` (core's ``VM.fail``, which re-raises with the node's details)
when a thunk raises.

- :class:`Caller` is a compiled function's whole call (``Function.__call__``) in C: checks
  the arguments, stores them, runs the runner and the updates, collects the outputs and
  empties the cells. Calls of one function from several threads are serialized; a call
  holds the update locks of the shared variables it updates (:meth:`Caller.guard`), and a
  child forked while another thread was calling gets the function's lock free again.
"""

cimport numpy as cnp
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyTypeObject, ternaryfunc
from cpython.pythread cimport (
    NOWAIT_LOCK,
    WAIT_LOCK,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_get_thread_ident,
    PyThread_release_lock,
    PyThread_type_lock,
)
from cpython.type cimport PyType_Modified

cnp.import_array()

import os
import weakref

import numpy as np

# Python ints that a float32 holds exactly (every int of at most 24 bits).
cdef long long _F32_EXACT_INT = 16777216


cdef class CThunk:
    """A node's thunk with a C entry point; calling it from Python runs it too."""

    cdef int run(self) except -1:
        raise TypeError(f"{type(self).__name__} must override CThunk.run")

    def __call__(self):
        self.run()


cdef class NodeThunk(CThunk):
    """Base of the precompiled thunks of one node (the structural, joining, indexing ops):
    the node, its cells, and ``perform`` for every value or error the C path leaves.

    Parameters
    ----------
    node
        The Apply node.
    in_cells, out_cells
        Its storage cells.
    maxdims
        The most dimensions an input or output may have (the subclass's C limit).
    """

    def __init__(self, node, list in_cells, list out_cells, int maxdims=64):
        for v in (*node.inputs, *node.outputs):
            if getattr(v.type, "ndim", 0) > maxdims:
                raise ValueError(f"{node.op}: more than {maxdims} dimensions ({v.type})")
        self.node = node
        self.perform_fn = node.op.perform
        self.in_cells, self.out_cells = in_cells, out_cells
        self.inputs, self.outputs = in_cells, out_cells
        self.lazy = False

    cdef int fast(self) except -1:
        """Compute the outputs; return 1 to let ``perform`` do it (nothing written yet)."""
        return 1

    cdef int run(self) except -1:
        if self.fast():
            self.perform_calls += 1
            self.perform_fn(self.node, [(<list>c)[0] for c in self.in_cells], self.out_cells)
        return 0


cdef class CRunner:
    """Base of the runners: ``run_once`` is the C entry point :class:`Caller` uses."""

    cdef int run_once(self) except -1:
        raise TypeError(f"{type(self).__name__} must override CRunner.run_once")


cdef bint _overlap(cnp.ndarray a, cnp.ndarray b):
    """True if the memory spans of ``a`` and ``b`` may intersect (bounds only)."""
    cdef char* lo[2]
    cdef char* hi[2]
    cdef cnp.ndarray x
    cdef int k, d
    cdef Py_ssize_t step
    if cnp.PyArray_SIZE(a) == 0 or cnp.PyArray_SIZE(b) == 0:
        return False
    for k in range(2):
        x = a if k == 0 else b
        lo[k] = hi[k] = cnp.PyArray_BYTES(x)
        for d in range(cnp.PyArray_NDIM(x)):
            step = cnp.PyArray_STRIDE(x, d) * (cnp.PyArray_DIM(x, d) - 1)
            if step < 0:
                lo[k] += step
            else:
                hi[k] += step
        hi[k] += cnp.PyArray_ITEMSIZE(x)
    return lo[0] < hi[1] and lo[1] < hi[0]


cdef int _drop_aliased(list held, list inputs) except -1:
    """Empty each cell of ``held`` whose array overlaps the value of a cell of ``inputs``.

    ``held`` are borrowed outputs' cells, whose arrays the next call may overwrite: not when
    the caller passed one of them (or a view of one) back in as an argument.
    """
    cdef object value, other, cell, source
    for cell in held:
        value = cell[0]
        if value is None or not cnp.PyArray_Check(value):
            continue
        for source in inputs:
            other = source[0]
            if other is not None and cnp.PyArray_Check(other) and _overlap(value, other):
                cell[0] = None
                break
    return 0


cdef unsigned char* _c_flags(list thunks) except NULL:
    cdef Py_ssize_t n = len(thunks)
    cdef unsigned char* flags = <unsigned char*>PyMem_Malloc(max(n, 1))
    if flags == NULL:
        raise MemoryError()
    for i in range(n):
        flags[i] = isinstance(thunks[i], CThunk)
    return flags


cdef class CLoop(CRunner):
    """Runs every thunk once, in order, freeing dead intermediates.

    Parameters
    ----------
    thunks
        One per node, in topological order.
    post_clear
        For each node, the cells to empty right after it ran (empty lists without gc).
    pre_clear
        Cells emptied at the start of each call (outputs handed to the user).
    fail
        ``fail(index)`` re-raises the current exception with node ``index``'s details.
    held, inputs
        Cells of borrowed outputs whose arrays thunks may overwrite, and the cells of the
        graph's inputs: a held array overlapping an input's value is dropped before the run.
    """

    cdef list thunks
    cdef list post_clear
    cdef list pre_clear
    cdef list held, inputs
    cdef object fail
    cdef Py_ssize_t n
    cdef unsigned char* is_c

    def __cinit__(self, list thunks, list post_clear, list pre_clear, object fail,
                  list held=None, list inputs=None):
        self.thunks = thunks
        self.post_clear = [tuple(c) if c else None for c in post_clear]
        self.pre_clear = pre_clear
        self.held = held or None
        self.inputs = inputs or []
        self.fail = fail
        self.n = len(thunks)
        self.is_c = _c_flags(thunks)

    def __dealloc__(self):
        PyMem_Free(self.is_c)

    def run(self):
        """Run the graph once."""
        self.run_once()

    cdef int run_once(self) except -1:
        cdef Py_ssize_t i = 0
        cdef object thunk, clear, cell
        for cell in self.pre_clear:
            cell[0] = None
        if self.held is not None:
            _drop_aliased(self.held, self.inputs)
        try:
            for i in range(self.n):
                thunk = self.thunks[i]
                if self.is_c[i]:
                    (<CThunk>thunk).run()
                else:
                    thunk()
                clear = self.post_clear[i]
                if clear is not None:
                    for cell in <tuple>clear:
                        cell[0] = None
        except Exception:
            self.fail(i)
        return 0


cdef class CStack(CRunner):
    """Demand-driven evaluation for graphs with lazy nodes (``ifelse``), without recursion.

    Parameters
    ----------
    thunks
        One per node, in topological order; lazy ones have ``thunk.lazy`` true.
    in_done, out_done
        Per node, the compute-map cells of its inputs and outputs.
    in_owner
        Per node, the index of the node computing each input (-1 for graph inputs).
    roots
        Indices of the nodes computing the graph's outputs, last evaluated first.
    frees
        Per node, ``(cell, reader indices)`` pairs: the cell is emptied once all its readers
        are done (empty without gc).
    reset_done, pre_clear, post_clear
        Compute cells reset per call; cells emptied before and after each call.
    fail
        ``fail(index)`` re-raises the current exception with node ``index``'s details.
    held, inputs
        As for :class:`CLoop`.
    """

    cdef list thunks, in_done, out_done, in_owner, roots, frees
    cdef list reset_done, pre_clear, post_clear, held, inputs
    cdef object fail
    cdef Py_ssize_t n
    cdef unsigned char* is_c
    cdef unsigned char* is_lazy

    def __cinit__(self, list thunks, list in_done, list out_done, list in_owner, list roots,
                  list frees, list reset_done, list pre_clear, list post_clear, object fail,
                  list held=None, list inputs=None):
        self.thunks = thunks
        self.held = held or None
        self.inputs = inputs or []
        self.in_done = in_done
        self.out_done = out_done
        self.in_owner = in_owner
        self.roots = roots
        self.frees = frees
        self.reset_done = reset_done
        self.pre_clear = pre_clear
        self.post_clear = post_clear
        self.fail = fail
        self.n = len(thunks)
        self.is_c = _c_flags(thunks)
        self.is_lazy = <unsigned char*>PyMem_Malloc(max(self.n, 1))
        if self.is_lazy == NULL:
            raise MemoryError()
        for i in range(self.n):
            self.is_lazy[i] = bool(getattr(thunks[i], "lazy", False))

    def __dealloc__(self):
        PyMem_Free(self.is_c)
        PyMem_Free(self.is_lazy)

    cdef bint _done(self, Py_ssize_t i):
        for d in <list>self.out_done[i]:
            if not d[0]:
                return False
        return True

    cdef bint _all_done(self, list readers):
        for r in readers:
            if not self._done(r):
                return False
        return True

    def run(self):
        """Run the graph once, computing only what the outputs need."""
        self.run_once()

    cdef int run_once(self) except -1:
        cdef object cell
        for cell in self.reset_done:
            cell[0] = False
        for cell in self.pre_clear:
            cell[0] = None
        if self.held is not None:
            _drop_aliased(self.held, self.inputs)
        try:
            self._evaluate()
        finally:
            for cell in self.post_clear:
                cell[0] = None
        return 0

    cdef int _push_owners(self, list stack, Py_ssize_t i, list missing) except -1:
        cdef list owners = self.in_owner[i]
        for k in missing:
            j = owners[k]
            if j < 0:
                raise RuntimeError(
                    f"node {i} needs its input {k}, which has no value and no owner. "
                    "HINT: every graph input must be in the function's inputs."
                )
            stack.append(j)
        return 0

    cdef int _evaluate(self) except -1:
        cdef list stack = list(self.roots)
        cdef list polls = [0] * self.n
        cdef Py_ssize_t i
        cdef list missing
        cdef object requires
        while stack:
            i = stack[len(stack) - 1]  # wraparound is off: no negative indices
            if self._done(i):
                stack.pop()
                continue
            if not self.is_lazy[i]:
                missing = [k for k, d in enumerate(<list>self.in_done[i]) if not d[0]]
                if missing:
                    self._push_owners(stack, i, missing)
                    continue
            requires = None
            try:
                if self.is_c[i]:
                    (<CThunk>self.thunks[i]).run()
                else:
                    requires = self.thunks[i]()
            except Exception:
                self.fail(i)
            if self.is_lazy[i] and requires:
                ins = self.in_done[i]
                missing = [k for k in requires if not ins[k][0]]
                polls[i] = polls[i] + 1 if not missing else 0
                if polls[i] > 1:
                    raise RuntimeError(
                        f"lazy node {i} keeps asking for inputs {list(requires)} that are "
                        "already computed; its thunk must finish once they are."
                    )
                self._push_owners(stack, i, missing)
                continue
            for d in <list>self.out_done[i]:
                d[0] = True
            for cell, readers in <list>self.frees[i]:
                if self._all_done(readers):
                    cell[0] = None
            stack.pop()
        return 0


cdef object _zero_d(int typenum, double d, long long v, bint use_int):
    """A new 0-d array of ``typenum`` holding ``v`` (when ``use_int``) or ``d``."""
    cdef cnp.ndarray a = cnp.PyArray_EMPTY(0, NULL, typenum, 0)
    cdef void* p = cnp.PyArray_DATA(a)
    if typenum == cnp.NPY_FLOAT64:
        (<double*>p)[0] = <double>v if use_int else d
    elif typenum == cnp.NPY_FLOAT32:
        (<float*>p)[0] = <float>v if use_int else <float>d
    elif typenum == cnp.NPY_INT64:
        (<cnp.int64_t*>p)[0] = v
    elif typenum == cnp.NPY_INT32:
        (<cnp.int32_t*>p)[0] = <cnp.int32_t>v
    elif typenum == cnp.NPY_BOOL:
        (<cnp.npy_bool*>p)[0] = v != 0
    return a


cdef class Caller:
    """A compiled function's call in C: ``Function.__call__`` when the C VM runs the graph.

    Called as ``caller(args, kwargs)``, ``caller.call(args, kwargs)`` or, with the
    function's own signature, ``caller.star(*args, **kwargs)``. With exactly one
    positional argument per input and no keywords, it does the whole call here: an argument
    that is an exact ndarray of its TensorType's dtype, ndim and fixed lengths is stored as
    it is (what ``filter`` would return); for a 0-d input that is not ``strict``, a Python
    float, int or bool or a NumPy scalar whose value ``filter`` would take unchanged becomes
    its 0-d array here; any other value goes through its Type's ``filter``, so conversions,
    ``strict``, ``allow_downcast`` and every error message stay the Type's. Anything else
    (keywords, defaults, a wrong number of arguments) goes to ``fallback``, the Python call
    path.

    Parameters
    ----------
    inputs
        Per explicit input: ``(cell, filter, strict, allow_downcast, spec)``; ``spec`` is
        None (always call ``filter``) or ``(dtype, ndim, ((dim, length), ...))``, which an
        ndarray passes unchanged.
    runner
        A :class:`CRunner` (called through C) or any callable running the graph once.
    updates
        Called after the runner to write the updates (all or none), or None.
    outputs
        The cells of the returned outputs.
    clear_in, clear_out
        Cells emptied after every call (also when it fails).
    unpack_single, return_none, output_keys
        How the outputs are returned: the value, None, a dict, else a list.
    fallback
        ``fallback(args, kwargs)``: the full Python call path.
    input_error
        ``input_error(index, value, exc)``: the exception to raise when input ``index``
        rejects ``value``.
    label
        The function's name in messages.

    :meth:`guard` adds the update locks to hold and the aliasing check to run.
    """

    cdef list cells, filters, strict, downcast, dtypes
    cdef Py_ssize_t n_in
    cdef int* ndim
    cdef int* scalar_type
    cdef void** descr
    cdef Py_ssize_t* fix_start
    cdef Py_ssize_t* fix_dim
    cdef Py_ssize_t* fix_len
    cdef object runner, updates, output_keys, fallback, input_error, label
    cdef bint c_runner, single, return_none
    cdef list out_cells, clear_in, clear_out
    # Calls from several threads run one after the other. An uncontended call only sets
    # ``busy`` (the GIL makes its test-and-set atomic: no lock call, no clock read); a
    # thread finding it set counts itself in ``waiters`` and blocks on ``lock``, kept
    # acquired as a semaphore that the finishing call releases to hand its turn over.
    cdef PyThread_type_lock lock
    cdef unsigned long owner
    cdef bint busy
    cdef Py_ssize_t waiters
    cdef public bint trust_input
    cdef tuple acquires, releases
    cdef Py_ssize_t n_locks
    cdef object unalias, relock
    cdef list generation_box
    cdef object generation
    cdef object __weakref__

    def __cinit__(self, *args, **kwargs):
        self.lock = _held_lock()

    def __init__(self, list inputs, object runner, object updates, list outputs,
                 list clear_in, list clear_out, bint unpack_single, bint return_none,
                 object output_keys, object fallback, object input_error, str label):
        cdef Py_ssize_t n = len(inputs), n_fix = 0, i, k
        self.n_in = n
        self.cells = [entry[0] for entry in inputs]
        self.filters = [entry[1] for entry in inputs]
        self.strict = [bool(entry[2]) for entry in inputs]
        self.downcast = [entry[3] for entry in inputs]
        specs = [entry[4] for entry in inputs]
        self.dtypes = [None if spec is None else spec[0] for spec in specs]
        for spec in specs:
            if spec is not None:
                n_fix += len(spec[2])
        self.ndim = <int*>PyMem_Malloc(max(n, 1) * sizeof(int))
        self.descr = <void**>PyMem_Malloc(max(n, 1) * sizeof(void*))
        self.scalar_type = <int*>PyMem_Malloc(max(n, 1) * sizeof(int))
        self.fix_start = <Py_ssize_t*>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
        self.fix_dim = <Py_ssize_t*>PyMem_Malloc(max(n_fix, 1) * sizeof(Py_ssize_t))
        self.fix_len = <Py_ssize_t*>PyMem_Malloc(max(n_fix, 1) * sizeof(Py_ssize_t))
        if (self.ndim == NULL or self.descr == NULL or self.scalar_type == NULL
                or self.fix_start == NULL
                or self.fix_dim == NULL or self.fix_len == NULL):
            raise MemoryError()
        k = 0
        for i in range(n):
            self.fix_start[i] = k
            spec = specs[i]
            self.scalar_type[i] = -1
            if spec is None:
                self.ndim[i] = -1
                self.descr[i] = NULL
                continue
            self.ndim[i] = spec[1]
            self.descr[i] = <void*>self.dtypes[i]
            if spec[1] == 0 and not self.strict[i]:
                self.scalar_type[i] = (<cnp.dtype>self.dtypes[i]).type_num
            for dim, length in spec[2]:
                self.fix_dim[k] = dim
                self.fix_len[k] = length
                k += 1
        self.fix_start[n] = k
        self.runner = runner
        self.c_runner = isinstance(runner, CRunner)
        self.updates = updates
        self.out_cells = outputs
        self.clear_in = clear_in
        self.clear_out = clear_out
        self.single = unpack_single
        self.return_none = return_none
        self.output_keys = output_keys
        self.fallback = fallback
        self.input_error = input_error
        self.label = label
        self.trust_input = False
        self.acquires = self.releases = ()
        self.n_locks = 0
        self.unalias = self.relock = self.generation_box = self.generation = None
        _CALLERS.add(self)

    def guard(self, list locks, object unalias, object relock=None, list generation_box=None):
        """Hold ``locks`` (the shared variables' update locks, in the order to take them)
        from running the graph to writing the updates, and call ``unalias()`` once the
        arguments are stored (None: nothing to check).

        With ``relock``: when ``generation_box[0]`` changes (some function started writing a
        shared variable in place), the next call first takes ``(locks, unalias) =
        relock()``, in its own thread, before holding any lock.
        """
        self._set_guard(locks, unalias)
        self.relock = relock
        self.generation_box = generation_box
        if generation_box is not None:
            self.generation = generation_box[0]

    cdef int _set_guard(self, list locks, object unalias) except -1:
        self.acquires = tuple(lock.acquire for lock in locks)
        self.releases = tuple(lock.release for lock in locks)
        self.n_locks = len(locks)
        self.unalias = unalias
        return 0

    cdef int _relock(self) except -1:
        cdef object generation = self.generation_box[0]
        locks, unalias = self.relock()
        self._set_guard(locks, unalias)
        self.generation = generation
        return 0

    cdef void _reinit_lock(self):
        """In a forked child: free the turn a thread that does not exist here held."""
        cdef PyThread_type_lock fresh
        self.waiters = 0  # the waiting threads do not exist here either
        if self.owner == PyThread_get_thread_ident():
            return  # the forking thread's own call goes on in the child
        try:
            fresh = _held_lock()
        except MemoryError:
            return
        PyThread_free_lock(self.lock)
        self.lock = fresh
        self.busy = False
        self.owner = 0

    cdef int _hold(self) except -1:
        """Take the update locks in order; on an interruption release those taken."""
        cdef Py_ssize_t i = 0
        try:
            while i < self.n_locks:
                self.acquires[i]()
                i += 1
        except BaseException:
            while i > 0:
                i -= 1
                self.releases[i]()
            raise
        return 0

    cdef int _release(self) except -1:
        """Release the update locks, the last taken first."""
        cdef Py_ssize_t i = self.n_locks
        while i > 0:
            i -= 1
            self.releases[i]()
        return 0

    def __dealloc__(self):
        if self.lock != NULL:
            PyThread_free_lock(self.lock)
        PyMem_Free(self.ndim)
        PyMem_Free(self.scalar_type)
        PyMem_Free(self.descr)
        PyMem_Free(self.fix_start)
        PyMem_Free(self.fix_dim)
        PyMem_Free(self.fix_len)

    def __call__(self, tuple args, dict kwargs):
        """Run the function on ``args`` (positional) and ``kwargs`` (by input name)."""
        return self.call(args, kwargs)

    def call(self, tuple args, dict kwargs):
        """``caller(args, kwargs)`` as a method (cheaper to call from Python, as bound)."""
        return self._dispatch(args, kwargs)

    @property
    def star(self):
        """The call with the function's own signature, ``star(*args, **kwargs)``:
        ``Function.__call__`` hands it out, so that a call runs no Python frame."""
        return CallStar(self)

    cdef object _dispatch(self, tuple args, dict kwargs):
        cdef unsigned long me = PyThread_get_thread_ident()
        if self.busy or self.waiters:  # another call runs, or is next: wait for a turn
            if self.owner == me:
                raise RuntimeError(
                    f"{self.label} was called while it is already running in the same "
                    "thread (from inside one of its own nodes); a function cannot call "
                    "itself.\nHINT: call a copy of it instead (f.copy())."
                )
            self.waiters += 1
            with nogil:
                PyThread_acquire_lock(self.lock, WAIT_LOCK)
            self.waiters -= 1  # handed the turn: busy stays set
        else:
            self.busy = True
        self.owner = me
        try:
            if kwargs or len(args) != self.n_in:
                return self.fallback(args, {} if kwargs is None else kwargs)
            return self._call(args)
        finally:
            self.owner = 0
            if self.waiters:
                PyThread_release_lock(self.lock)  # the turn passes to one waiting thread
            else:
                self.busy = False

    cdef inline bint _fits(self, object value, Py_ssize_t i):
        """True if ``value`` is an ndarray that input ``i``'s filter returns unchanged."""
        cdef cnp.ndarray a
        cdef cnp.npy_intp* dims
        cdef Py_ssize_t k
        if self.ndim[i] < 0 or not cnp.PyArray_CheckExact(value):
            return False
        a = <cnp.ndarray>value
        if cnp.PyArray_NDIM(a) != self.ndim[i] or <void*>cnp.PyArray_DESCR(a) != self.descr[i]:
            return False
        dims = cnp.PyArray_DIMS(a)
        for k in range(self.fix_start[i], self.fix_start[i + 1]):
            if dims[self.fix_dim[k]] != self.fix_len[k]:
                return False
        return True

    cdef object _from_scalar(self, object value, Py_ssize_t i):
        """Input ``i``'s 0-d array for a Python or NumPy scalar ``value``, or None where
        ``filter`` must decide (another dtype, a lossy or out-of-range value, strict)."""
        cdef int t = self.scalar_type[i]
        cdef object tp
        cdef double d
        cdef long long v
        cdef int overflow = 0
        if t < 0:
            return None
        tp = type(value)
        if tp is float:
            d = PyFloat_AS_DOUBLE(value)
            if t == cnp.NPY_FLOAT64 or (t == cnp.NPY_FLOAT32 and <double><float>d == d):
                return _zero_d(t, d, 0, False)
            return None
        if tp is bool:
            if t == cnp.NPY_BOOL or t == cnp.NPY_FLOAT64 or t == cnp.NPY_INT64:
                return _zero_d(t, 0.0, value is True, True)
            return None
        if tp is int:
            v = PyLong_AsLongLongAndOverflow(value, &overflow)
            if overflow:
                return None
            if (t == cnp.NPY_INT64 or t == cnp.NPY_FLOAT64
                    or (t == cnp.NPY_INT32 and -2147483648 <= v <= 2147483647)
                    or (t == cnp.NPY_FLOAT32 and -_F32_EXACT_INT <= v <= _F32_EXACT_INT)):
                return _zero_d(t, 0.0, v, True)
            return None
        if isinstance(value, np.generic) and (<cnp.dtype>value.dtype).type_num == t:
            return cnp.PyArray_FROMANY(value, t, 0, 0, cnp.NPY_ARRAY_ENSURECOPY)
        return None

    cdef object _filter(self, object value, Py_ssize_t i):
        try:
            return self.filters[i](value, self.strict[i], self.downcast[i])
        except (TypeError, ValueError) as exc:
            raise self.input_error(i, value, exc) from exc

    cdef object _call(self, tuple args):
        cdef Py_ssize_t i
        cdef object value, outputs, cell, fast
        cdef list cells = self.cells
        try:
            if self.trust_input:
                for i in range(self.n_in):
                    (<list>cells[i])[0] = args[i]
            else:
                for i in range(self.n_in):
                    value = args[i]
                    if not self._fits(value, i):
                        fast = self._from_scalar(value, i)
                        value = self._filter(value, i) if fast is None else fast
                    (<list>cells[i])[0] = value
            if self.relock is not None and self.generation_box[0] is not self.generation:
                self._relock()
            if self.unalias is not None:
                self.unalias()
            if self.n_locks:
                self._hold()
            try:
                if self.c_runner:
                    (<CRunner>self.runner).run_once()
                else:
                    self.runner()
                if self.updates is not None:
                    self.updates()
            finally:
                if self.n_locks:
                    self._release()
        except BaseException:
            for cell in self.clear_in:
                cell[0] = None
            for cell in self.clear_out:
                cell[0] = None
            raise
        for cell in self.clear_in:
            cell[0] = None
        if self.single:
            outputs = (<list>self.out_cells[0])[0]
        else:
            outputs = [(<list>cell)[0] for cell in self.out_cells]
        for cell in self.clear_out:
            cell[0] = None
        if self.output_keys is not None:
            return dict(zip(self.output_keys, outputs))
        if self.return_none:
            return None
        return outputs


cdef class CallStar:
    """A :class:`Caller` called as the function itself: ``star(*args, **kwargs)``.

    Its ``tp_call`` slot is :func:`_star_call` (set below): the argument tuple goes to the
    caller as it comes, with no keyword dict made for a call that passes none (a Cython
    ``def __call__(self, *args, **kwargs)`` builds an empty one on every call).
    """

    cdef Caller caller

    def __cinit__(self, Caller caller):
        self.caller = caller

    def __call__(self, *args, **kwargs):  # the slot below replaces it; kept for Cython's type
        return self.caller._dispatch(args, kwargs)


cdef object _star_call(PyObject* star, PyObject* args, PyObject* kwargs):
    """``CallStar``'s ``tp_call``: ``kwargs`` is NULL when the call passes no keywords."""
    return (<CallStar>star).caller._dispatch(
        <tuple>args, <dict>kwargs if kwargs != NULL else None
    )


(<PyTypeObject*>CallStar).tp_call = <ternaryfunc>_star_call
PyType_Modified(CallStar)


cdef PyThread_type_lock _held_lock() except NULL:
    """A new lock, already acquired: a semaphore at zero, released to hand over a turn."""
    cdef PyThread_type_lock lock = PyThread_allocate_lock()
    if lock == NULL:
        raise MemoryError()
    PyThread_acquire_lock(lock, NOWAIT_LOCK)
    return lock


# Every live Caller, for _reinit_locks_in_child.
_CALLERS = weakref.WeakSet()


def _reinit_locks_in_child():
    """After ``fork``, in the child: a function another thread was calling at the fork is
    free again (that thread does not exist here, and would never release it)."""
    for caller in list(_CALLERS):
        (<Caller>caller)._reinit_lock()


os.register_at_fork(after_in_child=_reinit_locks_in_child)
