# cython: language_level=3, boundscheck=False, wraparound=False
"""A bounded pool of large array buffers, handed to NumPy through its memory-handler API.

Why: glibc serves allocations over its mmap threshold (32 MiB at most) with fresh ``mmap``
pages, and the kernel zero-fills each page on first touch. For a big elementwise output
that costs about as much as the loop itself (10M float64: ~6.5 ms of page faults on top of
the ~6 ms loop). Keeping a few freed big buffers and handing them back out skips those
faults, while every call still returns a new array (a buffer is reused only after NumPy
freed the array that owned it, so two live results never share memory).

How: :data:`HANDLER` is a ``PyDataMem_Handler`` (capsule ``"mem_handler"``, see NumPy's
"Memory management in NumPy") whose functions call libc. :func:`pooled_empty` makes it the
current handler only while it allocates one output (``PyDataMem_SetHandler`` returns the
previous handler, put back right after, also on error): nothing else in the process
allocates through it. NumPy stores the handler in each array it allocates, so an output's
buffer comes back to :c:func:`_pool_free` when the user drops the array, and lands in the
pool instead of going back to the OS.

The pool: at most ``POOL_SLOTS`` buffers of at least ``POOL_MIN_BYTES`` each, holding at
most ``c__buffer_pool_mb`` MiB together. ``malloc`` takes a buffer of exactly the asked size
(the most recently freed first); ``free`` evicts the oldest buffers when the new one would
not fit. Exact sizes are enough: a compiled function asks for the same shapes call after
call. ``calloc`` never takes a pooled buffer (fresh ``calloc`` pages are already zero, a
pooled buffer would need a memset as slow as the faults we avoid).

Every buffer starts with a ``HEADER``-byte prefix holding its size: NumPy passes ``free``
the array's current ``nbytes``, which is not always what was allocated (``size == 0``
arrays, ``ndarray.resize``), and the pool must know a buffer's true size to reuse it.

Locking: NumPy allocates and frees array data with the GIL held, so the GIL alone would
serialize the pool today; a ``PyThread`` lock guards it anyway, for callers that free
without the GIL (free-threaded Python, other C extensions). It is held only for a few
pointer moves, never across malloc or free.
"""

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_New
from cpython.pythread cimport (
    WAIT_LOCK,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)
from libc.stdint cimport SIZE_MAX
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport strncpy
from posix.stdlib cimport posix_memalign

import numpy as np

try:
    from numpy._core import multiarray as _multiarray
except ImportError:  # NumPy < 2
    from numpy.core import multiarray as _multiarray

cnp.import_array()


cdef extern from "numpy/ndarraytypes.h":
    # Declared here (not taken from numpy's .pxd, which declares ``name`` as a pointer):
    # the layout must match the C header exactly, NumPy reads these fields.
    ctypedef struct _Allocator "PyDataMemAllocator":
        void* ctx
        void* (*malloc)(void* ctx, size_t size) noexcept nogil
        void* (*calloc)(void* ctx, size_t nelem, size_t elsize) noexcept nogil
        void* (*realloc)(void* ctx, void* ptr, size_t new_size) noexcept nogil
        void (*free)(void* ctx, void* ptr, size_t size) noexcept nogil

    ctypedef struct _Handler "PyDataMem_Handler":
        char name[127]
        unsigned char version
        _Allocator allocator


cdef extern from *:
    """
    #include <stdint.h>
    #include <unistd.h>
    #include <sys/mman.h>

    /* madvise(MADV_HUGEPAGE) on the whole pages inside [p, p + size), as NumPy's default
       allocator does for buffers of 4 MiB and more: the kernel may back them with 2 MiB
       pages (512 times fewer faults and TLB misses). madvise needs a page-aligned start.
       A no-op where the platform has no transparent huge pages. */
    static void opg_pool_hugepage(void *p, size_t size) {
    #ifdef MADV_HUGEPAGE
        long ps = sysconf(_SC_PAGESIZE);
        uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096u;
        uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
        uintptr_t hi = ((uintptr_t)p + size) & ~(page - 1);
        if (hi > lo) {
            madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
        }
    #else
        (void)p;
        (void)size;
    #endif
    }
    """
    void opg_pool_hugepage(void* p, size_t size) noexcept nogil


cdef enum:
    # Bytes before the data, holding the buffer's size; 64 keeps the data as aligned as
    # the block (posix_memalign'd to 64: whole cache lines for the vector loops).
    HEADER = 64
    ALIGN = 64
    # The most buffers kept: a few outputs alive at once (the user's last result while the
    # next call runs, several outputs of one node), not a general-purpose cache.
    POOL_SLOTS = 8

#: The size (bytes) from which outputs are allocated through the pool.
MIN_BYTES = POOL_MIN_BYTES
#: ``c__buffer_pool_mb`` where the flag is not declared (backend-c's plugin not loaded).
DEFAULT_MB = 256
_FLAG = "c__buffer_pool_mb"

cdef PyThread_type_lock _lock = PyThread_allocate_lock()
if _lock == NULL:
    raise MemoryError("opgraph_c._pool: cannot allocate the pool's lock")
# The pool, oldest first: _bases[i] is a block (header included) of _sizes[i] data bytes.
cdef void* _bases[POOL_SLOTS]
cdef size_t _sizes[POOL_SLOTS]
cdef int _count = 0
cdef size_t _bytes = 0
cdef size_t _cap = <size_t>DEFAULT_MB << 20
cdef size_t _hits = 0
cdef size_t _misses = 0
# Whether fresh big buffers get MADV_HUGEPAGE (NumPy's own switch, read per allocation).
cdef bint _hugepage = True


cdef inline char* _data(void* base) noexcept nogil:
    return <char*>base + HEADER


cdef inline void* _base(void* data) noexcept nogil:
    return <char*>data - HEADER


cdef inline void* _fresh(size_t size) noexcept nogil:
    """A new libc block for ``size`` data bytes, header filled in; NULL if out of memory."""
    cdef void* base = NULL
    if size > SIZE_MAX - HEADER:
        return NULL
    if posix_memalign(&base, ALIGN, size + HEADER) != 0:
        return NULL
    (<size_t*>base)[0] = size
    return base


cdef void* _take(size_t size) noexcept nogil:
    """Remove and return the newest pooled block of exactly ``size`` bytes, or NULL."""
    global _count, _bytes, _hits, _misses
    cdef int i, k
    cdef void* base
    PyThread_acquire_lock(_lock, WAIT_LOCK)
    for i in range(_count - 1, -1, -1):
        if _sizes[i] == size:
            base = _bases[i]
            for k in range(i, _count - 1):
                _bases[k] = _bases[k + 1]
                _sizes[k] = _sizes[k + 1]
            _count -= 1
            _bytes -= size
            _hits += 1
            PyThread_release_lock(_lock)
            return base
    _misses += 1
    PyThread_release_lock(_lock)
    return NULL


cdef int _evict(size_t room, void** out) noexcept nogil:
    """With the lock held: remove the oldest blocks until one more block of ``room`` bytes
    fits in the slots and the cap (``room`` 0: until the pool is within the cap). The
    removed blocks go to ``out`` (freed by the caller, after unlocking); returns their count.
    """
    global _count, _bytes
    cdef int n = 0, k
    while _count > 0 and (
        (room > 0 and _count >= POOL_SLOTS) or _bytes + room > _cap
    ):
        out[n] = _bases[0]
        _bytes -= _sizes[0]
        n += 1
        for k in range(_count - 1):
            _bases[k] = _bases[k + 1]
            _sizes[k] = _sizes[k + 1]
        _count -= 1
    return n


cdef void* _pool_malloc(void* ctx, size_t size) noexcept nogil:
    cdef void* base = NULL
    if size >= POOL_MIN_BYTES:
        base = _take(size)
        if base != NULL:
            return _data(base)  # already faulted in (and advised) when first used
    base = _fresh(size)
    if base == NULL:
        return NULL
    if size >= POOL_MIN_BYTES and _hugepage:
        opg_pool_hugepage(_data(base), size)
    return _data(base)


cdef void* _pool_calloc(void* ctx, size_t nelem, size_t elsize) noexcept nogil:
    # Fresh zeroed pages from libc, never a pooled buffer: see the module docstring.
    cdef size_t size
    cdef void* base
    if elsize != 0 and nelem > (SIZE_MAX - HEADER) // elsize:
        return NULL
    size = nelem * elsize
    base = calloc(1, size + HEADER)
    if base == NULL:
        return NULL
    (<size_t*>base)[0] = size
    if size >= POOL_MIN_BYTES and _hugepage:
        opg_pool_hugepage(_data(base), size)
    return _data(base)


cdef void* _pool_realloc(void* ctx, void* ptr, size_t new_size) noexcept nogil:
    # ndarray.resize: the block moves or grows in libc; only the header needs updating.
    cdef void* base
    if ptr == NULL:
        return _pool_malloc(ctx, new_size)
    if new_size > SIZE_MAX - HEADER:
        return NULL
    base = realloc(_base(ptr), new_size + HEADER)
    if base == NULL:
        return NULL  # the old block is still valid, as with realloc
    (<size_t*>base)[0] = new_size
    return _data(base)


cdef void _pool_free(void* ctx, void* ptr, size_t size) noexcept nogil:
    # ``size`` (NumPy's idea of it) is ignored: the header has the block's real size.
    global _count, _bytes
    cdef void* base
    cdef void* evicted[POOL_SLOTS]
    cdef size_t n
    cdef int k, nev = 0
    cdef bint kept = False
    if ptr == NULL:
        return
    base = _base(ptr)
    n = (<size_t*>base)[0]
    if n >= POOL_MIN_BYTES:
        PyThread_acquire_lock(_lock, WAIT_LOCK)
        if n <= _cap:
            nev = _evict(n, evicted)
            _bases[_count] = base
            _sizes[_count] = n
            _count += 1
            _bytes += n
            kept = True
        PyThread_release_lock(_lock)
    for k in range(nev):
        free(evicted[k])
    if not kept:
        free(base)


cdef _Handler _handler
strncpy(_handler.name, b"opgraph_c_buffer_pool", sizeof(_handler.name) - 1)
_handler.version = 1
_handler.allocator.ctx = NULL
_handler.allocator.malloc = _pool_malloc
_handler.allocator.calloc = _pool_calloc
_handler.allocator.realloc = _pool_realloc
_handler.allocator.free = _pool_free

#: The pool's ``PyDataMem_Handler`` capsule. NumPy's ``get_handler_name(array)``
#: (``numpy._core.multiarray``) says ``opgraph_c_buffer_pool`` for arrays allocated with it.
HANDLER = PyCapsule_New(&_handler, b"mem_handler", NULL)

cdef object _config = None
cdef object _madvise_getter = None


cdef void _set_cap(size_t cap) noexcept nogil:
    """Set the cap and free what no longer fits."""
    global _cap
    cdef void* evicted[POOL_SLOTS]
    cdef int k, nev
    PyThread_acquire_lock(_lock, WAIT_LOCK)
    _cap = cap
    nev = _evict(0, evicted)
    PyThread_release_lock(_lock)
    for k in range(nev):
        free(evicted[k])


cdef size_t _configured_cap() except? 0:
    """``c__buffer_pool_mb`` in bytes, applied to the pool (read per pooled allocation: a
    dictionary lookup through ``config.current``, nothing next to a 4 MiB+ allocation, and a
    changed flag takes effect at the next call)."""
    global _config, _madvise_getter, _hugepage
    cdef object mb
    cdef size_t cap
    if _config is None:
        # Imported on first use: opgraph's config may still be loading when this loads.
        from opgraph.configdefaults import config

        _config = config
        # NumPy's switch for MADV_HUGEPAGE (off on kernels where it hurts); NumPy >= 2.
        _madvise_getter = getattr(_multiarray, "_get_madvise_hugepage", None)
    mb = _config.current(_FLAG) if _FLAG in _config else DEFAULT_MB
    cap = <size_t>max(int(mb), 0) << 20
    if cap != _cap:
        _set_cap(cap)
    if _madvise_getter is not None:
        _hugepage = bool(_madvise_getter())
    return cap


cdef cnp.ndarray pooled_empty(int nd, cnp.npy_intp* shape, int typenum):
    """``PyArray_EMPTY(nd, shape, typenum, 0)`` with the data from the pool's handler (a
    fresh buffer when the pool has none of this size, or the plain handler when
    ``c__buffer_pool_mb`` is 0). For outputs of ``POOL_MIN_BYTES`` or more."""
    if _configured_cap() == 0:
        return cnp.PyArray_EMPTY(nd, shape, typenum, 0)
    previous = cnp.PyDataMem_SetHandler(HANDLER)
    try:
        return cnp.PyArray_EMPTY(nd, shape, typenum, 0)
    finally:
        cnp.PyDataMem_SetHandler(previous)


def new_array(shape, dtype, bint zeroed=False) -> cnp.ndarray:
    """A C-contiguous array allocated as the kernel drivers allocate outputs: through the
    pool when it has ``MIN_BYTES`` or more. ``zeroed``: filled with zeros (NumPy's calloc
    path). For tests, and for drivers written in Python."""
    cdef cnp.npy_intp dims[32]
    cdef int nd = len(shape), d
    cdef size_t nbytes
    dt = np.dtype(dtype)
    if nd > 32:
        raise ValueError(f"at most 32 dimensions, got {nd}")
    nbytes = <size_t>dt.itemsize
    for d in range(nd):
        dims[d] = shape[d]
        nbytes *= <size_t>dims[d]
    if nbytes < POOL_MIN_BYTES or _configured_cap() == 0:
        return cnp.PyArray_ZEROS(nd, dims, dt.num, 0) if zeroed else cnp.PyArray_EMPTY(
            nd, dims, dt.num, 0
        )
    if not zeroed:
        return pooled_empty(nd, dims, dt.num)
    previous = cnp.PyDataMem_SetHandler(HANDLER)
    try:
        return cnp.PyArray_ZEROS(nd, dims, dt.num, 0)
    finally:
        cnp.PyDataMem_SetHandler(previous)


def info() -> dict:
    """The pool now: ``buffers`` and ``bytes`` kept, ``cap_bytes``, ``min_bytes`` (the size
    from which outputs use the pool), ``hits`` and ``misses`` (pooled allocations served
    from the pool or not, since the process started)."""
    cdef size_t snapshot[5]
    # Copy under the lock, build the dict after: allocating Python objects may run the
    # garbage collector, which may free a pooled array, whose free takes the lock.
    PyThread_acquire_lock(_lock, WAIT_LOCK)
    snapshot[:] = [<size_t>_count, _bytes, _cap, _hits, _misses]
    PyThread_release_lock(_lock)
    return {
        "buffers": snapshot[0],
        "bytes": snapshot[1],
        "cap_bytes": snapshot[2],
        "min_bytes": POOL_MIN_BYTES,
        "hits": snapshot[3],
        "misses": snapshot[4],
    }


def release() -> int:
    """Free every pooled buffer (the cap stays); returns the bytes given back."""
    global _count, _bytes
    cdef void* evicted[POOL_SLOTS]
    cdef int k, nev
    cdef size_t freed
    PyThread_acquire_lock(_lock, WAIT_LOCK)
    freed = _bytes
    nev = _count
    for k in range(nev):
        evicted[k] = _bases[k]
    _count = 0
    _bytes = 0
    PyThread_release_lock(_lock)
    for k in range(nev):
        free(evicted[k])
    return freed
