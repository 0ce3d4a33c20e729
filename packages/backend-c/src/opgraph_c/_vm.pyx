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
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc


cdef class CThunk:
    """A node's thunk with a C entry point; calling it from Python runs it too."""

    cdef int run(self) except -1:
        raise TypeError(f"{type(self).__name__} must override CThunk.run")

    def __call__(self):
        self.run()


cdef unsigned char* _c_flags(list thunks) except NULL:
    cdef Py_ssize_t n = len(thunks)
    cdef unsigned char* flags = <unsigned char*>PyMem_Malloc(max(n, 1))
    if flags == NULL:
        raise MemoryError()
    for i in range(n):
        flags[i] = isinstance(thunks[i], CThunk)
    return flags


cdef class CLoop:
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
    """

    cdef list thunks
    cdef list post_clear
    cdef list pre_clear
    cdef object fail
    cdef Py_ssize_t n
    cdef unsigned char* is_c

    def __cinit__(self, list thunks, list post_clear, list pre_clear, object fail):
        self.thunks = thunks
        self.post_clear = [tuple(c) if c else None for c in post_clear]
        self.pre_clear = pre_clear
        self.fail = fail
        self.n = len(thunks)
        self.is_c = _c_flags(thunks)

    def __dealloc__(self):
        PyMem_Free(self.is_c)

    def run(self):
        """Run the graph once."""
        cdef Py_ssize_t i = 0
        cdef object thunk, clear, cell
        for cell in self.pre_clear:
            cell[0] = None
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


cdef class CStack:
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
    """

    cdef list thunks, in_done, out_done, in_owner, roots, frees
    cdef list reset_done, pre_clear, post_clear
    cdef object fail
    cdef Py_ssize_t n
    cdef unsigned char* is_c
    cdef unsigned char* is_lazy

    def __cinit__(self, list thunks, list in_done, list out_done, list in_owner, list roots,
                  list frees, list reset_done, list pre_clear, list post_clear, object fail):
        self.thunks = thunks
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
        cdef object cell
        for cell in self.reset_done:
            cell[0] = False
        for cell in self.pre_clear:
            cell[0] = None
        try:
            self._evaluate()
        finally:
            for cell in self.post_clear:
                cell[0] = None

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
