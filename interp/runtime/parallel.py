"""Data-parallel corpus loops: each process of a torchrun launch (or one share of a job split by hand) takes its share
of the items, and every process ends with the one-process result.

Protocol. An analysis runs its corpus loop as ONE call per model, and everything after it is reduction:

    results = map_items(fn, items, model=model)                  # [fn(item) for item in items], in item order
    state = fold_items(fn, items, state, add, model=model)       # add(state, i, fn(item)) for every item, summed

Items are cut into units (one item, or ``batch_size`` consecutive items, so a batch holds the same rows
whatever the number of processes) and share ``r`` of ``n`` takes units ``r, r + n, r + 2n, ...``.
``map_items`` gathers every unit's results to every process, in the original order, so the reduction
that follows is unchanged and gives the single-process numbers exactly. ``fold_items`` keeps only a
flat ``{name: float64/int64 array}`` state per share; shares' states are summed in share order.

Where the share comes from (``session``): torchrun's ``RANK`` / ``WORLD_SIZE`` (gloo on the CPU, nccl on
CUDA, each rank on ``cuda:LOCAL_RANK``), a share given by hand (``share=(i, n)``: one process of a job split
without a launcher), or a single process (share 0 of 1). A session may carry a ``store``: what keeps the
per-unit results on disk so that a rerun resumes and separate shares merge (``poslens.run.shards`` is the one
poslens uses: manifests, safetensors chunks, ``poslens merge``); a store's ``standalone`` share stops after
its part of a call (``StopShare``, caught per model by ``call``), so no second corpus pass may depend on the
first in such a run. From Python under torchrun, wrap the analyses in ``with parallel.session(): ...``;
outside a session every call runs in one process. Results cross processes as safetensors and JSON only.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
from dataclasses import dataclass, field

import numpy as np
import torch


class StopShare(Exception):
    """Raised after a standalone share wrote its part of a call: there is nothing to reduce in this process."""


@dataclass
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def detect_world() -> World:
    """torchrun's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), or one process."""
    env = os.environ
    if int(env.get("WORLD_SIZE", "1")) <= 1:
        return World()
    return World(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", env["RANK"])))


@dataclass
class Session:
    world: World = field(default_factory=World)
    share: int = 0
    n_shares: int = 1
    store: object | None = None  # keeps results between runs (``poslens.run.shards.ShardStore``), or None
    comm_device: str = "cpu"
    calls: dict = field(default_factory=dict)

    @property
    def standalone(self) -> bool:
        """A share computed without the others (a ``--shard I/N`` process): it writes its part and reduces nothing."""
        return bool(getattr(self.store, "standalone", False))

    def writes(self) -> bool:
        return self.world.rank == 0 and not self.standalone


_SESSION = Session()


def current() -> Session:
    return _SESSION


def writes_outputs() -> bool:
    """Whether this process writes the analysis' outputs (rank 0, not a standalone share)."""
    return _SESSION.writes()


def describe() -> dict | None:
    """For provenance: how the results were computed (processes, a store's shards), or None for one plain process."""
    s = _SESSION
    if s.store is not None:
        return s.store.describe(s)
    if not s.world.distributed:
        return None
    return {"processes": s.world.size, "backend": torch.distributed.get_backend()}


def device_for(device):
    """``cuda`` becomes ``cuda:LOCAL_RANK`` under torchrun; anything else is returned as given."""
    w = _SESSION.world
    if w.distributed and device is not None and str(device) == "cuda":
        return f"cuda:{w.local_rank}"
    return device


def session(*, device=None, share: tuple[int, int] | None = None, store=None):
    """Set up this process' share for the analyses run inside (a context manager): torchrun's rank, ``share=(i, n)``
    without a launcher, or one process; ``store`` keeps the results (resume, merge)."""
    return _session(device, share, store)


@contextlib.contextmanager
def _session(device, share: tuple[int, int] | None, store):
    global _SESSION
    world = detect_world()
    if share is not None and world.distributed:
        raise ValueError("--shard I/N runs one share without a launcher; under torchrun each rank is a share already")
    index, n = share if share is not None else (world.rank, world.size)
    s = Session(world, index, n, store)
    if world.distributed and not torch.distributed.is_initialized():
        cuda = device is not None and str(device).startswith("cuda")
        if cuda:
            torch.cuda.set_device(world.local_rank)
        torch.distributed.init_process_group("nccl" if cuda else "gloo")
        atexit.register(torch.distributed.destroy_process_group)  # one group per process, for every analysis run in it
    if world.distributed:
        s.comm_device = f"cuda:{world.local_rank}" if torch.distributed.get_backend() == "nccl" else "cpu"
    if store is not None:
        store.begin(s)
    previous, _SESSION = _SESSION, s
    try:
        yield s
        if store is not None:
            store.end(s)
    finally:
        _SESSION = previous


def call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or None when this process is a standalone share that just wrote its part."""
    try:
        return fn(*args, **kwargs)
    except StopShare:
        return None


def agree(fn):
    """``fn()`` on the writing process only (rank 0), then every rank raises the error it raised, or goes on.

    For decisions that must be the same everywhere before the ranks' collectives (may this folder be written?):
    a refusal seen by rank 0 alone would leave the others waiting for it. Other ranks get the error's builtin
    class (``FileExistsError`` for ``OutputLocked``) and message; they return None, rank 0 ``fn``'s value."""
    s = _SESSION
    if not s.world.distributed:
        return fn()
    value = error = None
    if s.world.rank == 0:
        try:
            value = fn()
        except Exception as err:  # shared with every rank, then raised here as it was
            error = err
    verdict = None
    if error is not None:
        base = next(c for c in type(error).__mro__ if c.__module__ == "builtins")
        message = error.args[0] if len(error.args) == 1 and isinstance(error.args[0], str) else str(error)
        verdict = [base.__name__, message]
    verdict = json.loads(_all_gather_bytes(json.dumps(verdict).encode(), s.comm_device)[0])
    if error is not None:
        raise error
    if verdict is not None:
        import builtins

        raise getattr(builtins, verdict[0])(verdict[1])
    return value


# ---------------------------------------------------------------- the two loops


def _units(n_items: int, batch_size: int | None) -> list[range]:
    step = batch_size or 1
    return [range(i, min(i + step, n_items)) for i in range(0, n_items, step)]


def _call_key(s: Session, model, tag: str) -> str:
    """``MODEL[/TAG]#K``: the K-th call for this model in the session (the same sequence on every rerun)."""
    name = getattr(model, "model_name", None) or "model"
    base = f"{name}/{tag}" if tag else name
    k = s.calls.get(base, 0)
    s.calls[base] = k + 1
    return f"{base}#{k}"


def map_items(fn, items, *, model, batch_size: int | None = None, tag: str = "", desc: str = "") -> list:
    """``[fn(item) for item in items]`` computed data-parallel (``batch_size``: ``fn`` takes a list of items
    and returns one result per item). Results may be tensors, arrays, numbers, strings, None and
    lists / tuples / dicts of them."""
    items = list(items)
    s, store = _SESSION, _SESSION.store
    key = _call_key(s, model, tag)
    units = _units(len(items), batch_size)
    if store is not None and store.serving:
        by_unit = store.served_map(s, key, model, len(items))
        return [r for u in range(len(units)) for r in by_unit[u]]
    mine = list(range(s.share, len(units), s.n_shares))
    computed = dict(store.open_call(s, key, model, len(items), len(units), "map")) if store is not None else {}
    pending: dict[int, list] = {}
    try:
        for u in _released(_progress(mine, desc or key)):
            if u in computed:
                continue
            chunk = [items[i] for i in units[u]]
            out = list(fn(chunk)) if batch_size else [fn(chunk[0])]
            if len(out) != len(chunk):
                raise RuntimeError(f"{key}: fn returned {len(out)} results for {len(chunk)} items")
            computed[u] = pending[u] = out
            if store is not None and len(pending) >= store.flush_every:
                store.flush_map(s, key, pending)
                pending = {}
    finally:
        if store is not None and pending:
            store.flush_map(s, key, pending)
    if s.standalone:
        raise StopShare(key)
    if s.world.distributed:
        gathered = _all_gather_bytes(encode({str(u): computed[u] for u in mine}), s.comm_device)
        computed = {}
        for blob in gathered:
            computed.update({int(u): r for u, r in decode(blob).items()})
    return [r for u in range(len(units)) for r in computed[u]]


def fold_items(fn, items, state: dict, add, *, model, batch_size: int | None = None, tag: str = "",
               desc: str = "") -> dict:
    """``add(state, i, fn(item))`` for every item ``i``, each share on its own copy of ``state`` (a flat dict
    of float64 / int64 numpy arrays, zeros), then the shares' states summed in share order."""
    items = list(items)
    s, store = _SESSION, _SESSION.store
    key = _call_key(s, model, tag)
    units = _units(len(items), batch_size)
    _check_state(state)
    if store is not None and store.serving:
        return _sum_states(store.served_fold(s, key, model, len(items)), state)
    mine = list(range(s.share, len(units), s.n_shares))
    done = store.open_call(s, key, model, len(items), len(units), "fold") if store is not None else {}
    local = {k: v.copy() for k, v in state.items()}
    if done:
        local = store.read_state(s, key)
    finished, since = set(done), 0
    try:
        for u in _released(_progress(mine, desc or key)):
            if u in finished:
                continue
            chunk = [items[i] for i in units[u]]
            out = list(fn(chunk)) if batch_size else [fn(chunk[0])]
            for i, r in zip(units[u], out):
                add(local, i, r)
            finished.add(u)
            since += 1
            if store is not None and since >= store.flush_every:
                store.flush_fold(s, key, local, finished)
                since = 0
    finally:
        if store is not None and since:
            store.flush_fold(s, key, local, finished)
    if s.standalone:
        raise StopShare(key)
    if not s.world.distributed or not local:
        return _sum_states([local], state)
    names = sorted(local)
    flat = torch.from_numpy(np.concatenate([local[k].astype(np.float64).ravel() for k in names]))
    states = []
    for r in range(s.world.size):
        t = flat.to(s.comm_device) if r == s.world.rank else torch.empty_like(flat, device=s.comm_device)
        torch.distributed.broadcast(t, src=r)
        t, states_r, at = t.cpu().numpy(), {}, 0
        for k in names:
            n = local[k].size
            states_r[k] = t[at : at + n].reshape(local[k].shape).astype(local[k].dtype)
            at += n
        states.append(states_r)
    return _sum_states(states, state)


def _released(units):
    """Each unit, then the memory freed while computing it handed back to the system (``interp.runtime.memory``), so a
    corpus loop's peak does not grow with the number of documents."""
    from interp.runtime.memory import release

    for u in units:
        yield u
        release()


def _progress(units: list[int], desc: str):
    from interp.runtime.progress import progress

    return progress(units, desc)


def _check_state(state: dict) -> None:
    for k, v in state.items():
        if not isinstance(v, np.ndarray) or v.dtype not in (np.float64, np.int64):
            raise TypeError(f"fold_items state '{k}' must be a float64 or int64 numpy array")


def _sum_states(states: list[dict], like: dict) -> dict:
    total = {k: np.zeros_like(v) for k, v in like.items()}
    for st in states:
        if not st:
            continue  # a share with no items
        for k in total:
            total[k] += st[k]
    return total


# ---------------------------------------------------------------- encoding (safetensors + JSON, no pickle)


def _flatten(obj, path: str, arrays: dict):
    if isinstance(obj, torch.Tensor):
        arrays[path] = obj.detach().cpu().clone()
        return {"t": path}
    if isinstance(obj, np.ndarray):
        arrays[path] = torch.from_numpy(np.array(obj, copy=True))
        return {"a": path}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    if isinstance(obj, (list, tuple)):
        return {"l" if isinstance(obj, list) else "u": [_flatten(x, f"{path}.{i}", arrays) for i, x in enumerate(obj)]}
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, (str, int)):
                raise TypeError(f"results may only have str or int dict keys, got {k!r}")
        return {"d": [[k, _flatten(v, f"{path}.{j}", arrays)] for j, (k, v) in enumerate(obj.items())]}
    raise TypeError(f"cannot store a {type(obj).__name__} in a shard (tensors, arrays, numbers, strings, "
                    "lists and dicts only)")


def _unflatten(spec, arrays: dict):
    (kind, value), = spec.items()
    if kind == "t":
        return arrays[value]
    if kind == "a":
        return arrays[value].numpy()
    if kind == "v":
        return value
    if kind == "l":
        return [_unflatten(x, arrays) for x in value]
    if kind == "u":
        return tuple(_unflatten(x, arrays) for x in value)
    return {k: _unflatten(v, arrays) for k, v in value}


def encode(obj) -> bytes:
    from safetensors.torch import save

    arrays: dict = {}
    spec = _flatten(obj, "r", arrays)
    arrays["__spec__"] = torch.frombuffer(bytearray(json.dumps(spec).encode()), dtype=torch.uint8)
    return save(arrays)


def decode(blob: bytes):
    from safetensors.torch import load

    arrays = load(bytes(blob))
    spec = json.loads(arrays.pop("__spec__").numpy().tobytes().decode())
    return _unflatten(spec, arrays)


def _all_gather_bytes(blob: bytes, device: str) -> list[bytes]:
    dist = torch.distributed
    data = torch.frombuffer(bytearray(blob), dtype=torch.uint8).to(device)
    size = torch.tensor([data.numel()], dtype=torch.long, device=device)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    longest = int(max(int(x) for x in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: data.numel()] = data
    out = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(out, padded)
    return [o[: int(n)].cpu().numpy().tobytes() for o, n in zip(out, sizes)]
