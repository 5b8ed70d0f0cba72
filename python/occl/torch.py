"""occl's torch.distributed backend.

Importing this module registers the backend "occl"::

    import torch, torch.distributed as dist
    import occl.torch
    dist.init_process_group("occl", init_method="env://")   # or any store / init method
    dist.all_reduce(t)

Every call becomes an occl collective whose id is derived from the call's signature (kind, dtype,
reduction, element count, root or send/recv pair and tag), registered on first use and cached.
Calls with different signatures may be issued in any order on each rank; calls with the same
signature pair up in the order each rank issues them. To free the order of calls that share a
signature, tag them::

    with occl.torch.coll_id(7):
        a_work = dist.all_reduce(a, async_op=True)
    with occl.torch.coll_id(8):
        b_work = dist.all_reduce(b, async_op=True)

and another rank may issue tag 8 before tag 7. A tag applies to every call in its block on the
calling thread; blocks nest (the innermost tag wins).

Shapes that change every step would register a collective per shape. Inside a size_classes() block
the element count enters the signature as its size class (the next power of two), and each call
submits its own count under that one registration::

    with occl.torch.size_classes():
        for batch in loader:                 # a different length every step
            dist.all_reduce(batch.grad_like)  # one registration per power of two, not per shape

Calls of one class then pair up in issue order, as calls of one signature do (tags free them);
ranks that issue different counts for the same call fail it, both counts named.

Tested with torch 1.13 (Debian 12's) and a current torch 2.x from pip (CI runs the same tests on
both); CPU tensors only. In torch 2.x a process group holds one backend per device type: occl
registers for "cpu".

Subgroups. A group of dist.new_group meets through the store, as the world did, unless torch
splits (2.8 and later, where the world was made with a device: init_process_group("occl",
device_id=torch.device("cpu", 0))): then it is an occlCommSplit of the world's communicator,
without a rendezvous, and dist.split_group works too. origin(group) tells which.
"""

import atexit
import contextlib

import torch
import torch.distributed as dist

from . import _occl_torch as _C

__all__ = ["coll_id", "current_coll_id", "origin", "peer_transport", "registered_bytes", "registered_count",
           "shrink", "size_classes", "BACKEND"]

BACKEND = "occl"


_TORCH_2 = int(torch.__version__.split(".")[0]) >= 2


def _create_1_13(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


def _splits(opts):
    """Whether torch asks for this group as a split of `opts.split_from` that every rank of that
    group takes part in. torch passes split_from (where the world was made with a device and its
    backend supports splitting) and has the ranks outside the group call perform_nocolor_split,
    but only when every rank calls new_group: with use_local_synchronization=True the others never
    come, and that group is named by a hash of its ranks instead of by torch's group counter."""
    split_from = getattr(opts, "split_from", None)
    return (hasattr(_C, "ProcessGroupOccl") and isinstance(split_from, _C.ProcessGroupOccl)
            and str(opts.group_id).isdigit())


def _create_2(opts, _pg_options=None):
    # extended_api=True: DistributedBackendOptions (store, group_rank, group_size, timeout, ...).
    if _splits(opts):
        return opts.split_from.split_ranks(list(opts.global_ranks_in_group), opts.timeout)
    return _C.create_process_group(opts.store, opts.group_rank, opts.group_size, opts.timeout)


def _register():
    if BACKEND.upper() in dist.Backend._plugins:
        return
    if _TORCH_2:
        dist.Backend.register_backend(BACKEND, _create_2, extended_api=True, devices=["cpu"])
    else:
        dist.Backend.register_backend(BACKEND, _create_1_13)


_register()


def _backend(group):
    """occl's backend of `group` (default: the world): in torch 2.x the group's backend for "cpu",
    in 1.13 the group itself."""
    group = group or dist.distributed_c10d._get_default_group()
    return group._get_backend(torch.device("cpu")) if _TORCH_2 else group


def _group_of(backend):
    """A process group to pass as group= over `backend` (torch 2.x wraps it; 1.13 takes it as is)."""
    if not _TORCH_2:
        return backend
    group = dist.ProcessGroup(backend.rank(), backend.size())
    kind = dist.ProcessGroup.BackendType.CUSTOM
    group._set_default_backend(kind)
    group._register_backend(torch.device("cpu"), kind, backend)
    return group


@contextlib.contextmanager
def coll_id(tag):
    """Tags the collectives this thread issues inside the block with `tag` (an int >= 0)."""
    if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag < 2**64:
        raise ValueError(f"coll_id tag {tag!r}: expected an int in [0, 2**64)")
    previous = _C.set_coll_tag(tag)
    try:
        yield tag
    finally:
        _C.set_coll_tag(previous)


@contextlib.contextmanager
def size_classes(on=True):
    """Inside the block, this thread's calls register by size class (see the module's help)."""
    previous = _C.set_size_classes(bool(on))
    try:
        yield
    finally:
        _C.set_size_classes(previous)


def current_coll_id():
    """The tag of the innermost coll_id block of this thread, or None."""
    return _C.coll_tag()


def peer_transport(peer, group=None):
    """What carries this rank's traffic to `peer` in `group` ("shm", "in-process", "net")."""
    return _C.peer_transport(_backend(group), peer)


def origin(group=None):
    """How `group`'s occl communicator was made: "rendezvous" (through the store), "split" (from
    the world's, by dist.new_group or dist.split_group where torch splits) or "shrink"."""
    return _C.origin(_backend(group))


def registered_count(group=None):
    """How many occl collectives `group` has registered (one per distinct call signature)."""
    return _C.registered_count(_backend(group))


def registered_bytes(group=None):
    """Connector and scratch bytes of `group`'s registered collectives on this rank."""
    return _C.registered_bytes(_backend(group))


def shrink(exclude, group=None, abort=True):
    """After a rank of `group` (default: the world) died or hangs, every survivor calls this with
    the same list of group ranks to leave out; returns a process group of the survivors (ranked in
    order) to pass as group= to the calls that follow (dist.all_reduce(t, group=g), ...). It keeps
    the group's registered all_reduces, so the same calls go on at once. abort=True (the default)
    fails what is pending on `group` first (occlCommShrink's OCCL_SHRINK_ABORT); abort=False
    refuses while anything is pending. The group is not one of torch's named groups:
    dist.get_rank(g) does not know it; use g.rank() and g.size()."""
    return _group_of(_C.shrink(_backend(group), [int(r) for r in exclude], abort))


# Groups left open at exit are finalized while the poller thread can still take the GIL.
atexit.register(_C.shutdown_all)
