"""occl: deadlock-free collective communication.

Collectives are registered once under a 64-bit id and submitted any number of times, in any order
on any rank; each submission returns a Future and may take a callback, which runs on occl's poller
thread or inside a ``wait_all`` on the communicator (it holds the GIL only while the callable
runs, and must not block)::

    import numpy as np, occl
    comm = occl.Comm(nranks, unique_id, rank)       # unique_id: occl.get_unique_id() on rank 0
    comm.register(7, "allreduce", 1024, "float32")
    x = np.ones(1024, np.float32)
    comm.submit(7, x, x, callback=lambda f: print("done", f.coll_id)).result()
    comm.close()

Buffers are torch CPU tensors or C-contiguous objects with the buffer protocol (numpy arrays,
bytearray, memoryview); they stay referenced until their callback has fired. Failures raise
occl.OcclError (a RuntimeError) carrying occl's message and code. A shape that changes every step
needs one registration: ``register(..., variable_count=True)`` takes the count as a maximum, and
``submit(..., count=n)`` runs n elements (the same n on every rank for the same run); small n run
the program of their own size where it fits the maximum's connectors (``comm.small_form(id)``
says which, up to what count). Per-peer
counts (an MoE token exchange) take a v-collective: ``register(..., vector_counts=True)`` and
``submit_v(id, send, recv, send_counts=..., recv_counts=...)``. The torch.distributed backend is
occl.torch (import it to register "occl").
"""

import atexit as _atexit
import weakref as _weakref

from ._occl import KINDS, SPLIT_NOCOLOR, Future, OcclError, __version__, get_unique_id
from ._occl import Comm as _Comm

__all__ = ["Comm", "Future", "OcclError", "KINDS", "SPLIT_NOCOLOR", "get_unique_id", "__version__"]

# Communicators still open at interpreter exit are closed before Python tears down, while the
# poller thread may still take the GIL to run callbacks.
_open_comms = _weakref.WeakSet()


class Comm(_Comm):
    __doc__ = _Comm.__doc__

    def __init__(self, nranks, unique_id, rank, **config):
        super().__init__(nranks, unique_id, rank, **config)
        _open_comms.add(self)

    @staticmethod
    def all(n, **config):
        """n ranks as threads of this process (occlCommInitAll); returns their communicators."""
        comms = _Comm.all(n, **config)
        for c in comms:
            _open_comms.add(c)
        return comms

    def split(self, color, key=0, **config):
        """occlCommSplit: every rank calls it; the ranks of one color (an int >= 0) form a new
        communicator, ranked by key and then by their rank here. color=None (SPLIT_NOCOLOR) takes
        part and returns None. Config keywords give the child its own config; without them it
        inherits this one's. The child is independent: close it on its own."""
        child = super().split(color, key, **config)
        if child is not None:
            _open_comms.add(child)
        return child

    def shrink(self, exclude, *, abort=False, **config):
        """occlCommShrink: every rank not in `exclude` calls it with the same list (threads of one
        Comm.all each from their own thread), after a rank died or hangs. abort=True fails this communicator's pending work
        first. The new communicator keeps the registered AllReduces under the same ids; close this
        one afterwards."""
        child = super().shrink(exclude, abort=abort, **config)
        _open_comms.add(child)
        return child


@_atexit.register
def _close_open_comms():
    for comm in list(_open_comms):
        try:
            comm.close()
        except OcclError:
            pass
