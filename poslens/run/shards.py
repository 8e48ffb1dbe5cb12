"""Shards on disk for data-parallel runs (``interp.runtime.parallel``'s store): resume an interrupted run, compute one
share of a job per process without a launcher (``--shard I/N``, a SLURM array task) and merge the shares (``poslens
merge``).

Each share writes its per-unit results (``map``: one safetensors chunk per flush) or its running state (``fold``)
into the shard directory, beside a JSON manifest per share: the analysis, its arguments and their hash, the
model's weights hash per call, the finished units and the number of shares. It flushes every ``flush_every`` units
and when interrupted, so a rerun with the same arguments skips what is done. ``read_shards`` checks that the
manifests of a directory agree and are complete; a store in ``serve`` mode then hands every call its results
back, so the analysis reruns its reduction from the shards. Only tensors (safetensors) and JSON are written or read.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from interp.fingerprint import weights_sha256
from interp.runtime.parallel import decode, encode
from poslens.run.provenance import jsonable

FORMAT = 1


class ShardError(ValueError):
    """Shards that do not fit together (missing, incomplete, from another run)."""


def parse_share(text: str) -> tuple[int, int]:
    i, sep, n = str(text).partition("/")
    try:
        i, n = int(i), int(n)
    except ValueError:
        i, n = -1, 0
    if not sep or n < 1 or not 0 <= i < n:
        raise ValueError(f"--shard expects I/N with 0 <= I < N (e.g. 0/4), got {text!r}")
    return i, n


def arguments_record(analysis: str, models, options: dict, seed: int, dtype: str | None = None) -> dict:
    """What identifies a run across shards: analysis, models as given, options, seed, the dtype the models run in
    when one was asked for (and their hash)."""
    args = {"models": [str(m) for m in models], "options": jsonable(options), "seed": seed}
    if dtype is not None:  # absent for float32 as loaded: the records of earlier runs keep their hash
        args["dtype"] = str(dtype).removeprefix("torch.")
    digest = hashlib.sha256(json.dumps([analysis, args], sort_keys=True).encode()).hexdigest()
    return {"analysis": analysis, "arguments": args, "args_hash": digest}


def manifest_path(shard_dir: Path, share: int, n: int) -> Path:
    return Path(shard_dir) / f"share-{share}-of-{n}.json"


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)


class ShardStore:
    """``interp.runtime.parallel``'s store for one run: ``shard_dir`` holds a manifest and the results of every share.
    ``standalone``: this process computes its share only (``--shard I/N``); ``serve``: ``{share: manifest}`` of a
    complete directory, whose results every call gets back (``poslens merge``)."""

    def __init__(self, shard_dir, *, record: dict | None = None, flush_every: int = 8, standalone: bool = False,
                 serve: dict | None = None):
        if flush_every < 1:
            raise ValueError(f"--flush-every must be at least 1, got {flush_every}")
        self.shard_dir, self.record, self.flush_every = Path(shard_dir), record, flush_every
        self.standalone, self.serve = standalone, serve

    @property
    def serving(self) -> bool:
        return self.serve is not None

    # -- the session -----------------------------------------------------------------------------------------------
    def begin(self, s) -> None:
        if self.serving:
            s.share, s.n_shares = 0, len(self.serve)
            return
        self._check_resumable(s)

    def end(self, s) -> None:
        if self.standalone and not s.calls:
            analysis = (self.record or {}).get("analysis")
            raise ValueError(f"analysis '{analysis}' has no data-parallel loop to shard; run it without --shard")
        if not self.serving:
            manifest = self._load(s)
            manifest["complete"] = all(c["complete"] for c in manifest["calls"].values())
            self._write(s, manifest)

    def describe(self, s) -> dict:
        if self.serving:
            return {"merged_from": str(self.shard_dir), "shares": s.n_shares}
        import torch

        backend = torch.distributed.get_backend() if s.world.distributed else None
        return {"processes": s.world.size, "backend": backend, "shard_dir": str(self.shard_dir)}

    # -- manifests -------------------------------------------------------------------------------------------------
    def _path(self, s) -> Path:
        return manifest_path(self.shard_dir, s.share, s.n_shares)

    def _load(self, s) -> dict:
        path = self._path(s)
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
        return {"format": FORMAT, **(self.record or {}), "share": s.share, "n_shares": s.n_shares, "calls": {},
                "complete": False}

    def _write(self, s, manifest: dict) -> None:
        path = self._path(s)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

    def _check_resumable(self, s) -> None:
        """A shard directory holds one run: the same arguments and the same number of shares."""
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.shard_dir.glob("share-*-of-*.json")):
            m = json.loads(path.read_text(encoding="utf-8"))
            if m.get("n_shares") != s.n_shares:
                raise ShardError(f"{self.shard_dir} holds shards of a run split {m.get('n_shares')} ways "
                                 f"({path.name}); this run is split {s.n_shares} ways: resume with the same number of "
                                 "processes or use a new --shard-dir")
            if self.record and ((m.get("analysis"), m.get("args_hash"))
                                != (self.record["analysis"], self.record["args_hash"])):
                raise ShardError(f"{path} was written by another run ({m.get('analysis')} "
                                 f"{_diff(m.get('arguments'), self.record['arguments'])}); use a new --shard-dir")

    # -- one call --------------------------------------------------------------------------------------------------
    def open_call(self, s, key: str, model, n_items: int, n_units: int, kind: str) -> dict:
        """Register the call in this share's manifest; return the results already on disk ``{unit: results}``."""
        manifest = self._load(s)
        digest = weights_sha256(model)
        entry = manifest["calls"].get(key)
        if entry is None:
            entry = manifest["calls"][key] = {"kind": kind, "model": model.model_name, "weights": digest,
                                              "n_items": n_items, "n_units": n_units,
                                              "units": list(range(s.share, n_units, s.n_shares)),
                                              "done": [], "chunks": [], "complete": False}
            entry["complete"] = not entry["units"]
            self._write(s, manifest)
            return {}
        if (entry["weights"], entry["n_items"], entry["n_units"]) != (digest, n_items, n_units):
            raise ShardError(f"{self._path(s)}: call {key} was written with other weights or items ({entry['n_items']} "
                             f"items, weights {entry['weights'][:16]}); use a new --shard-dir")
        if kind == "fold":
            return {u: None for u in entry["done"]}
        out = {}
        for chunk in entry["chunks"]:
            out.update({int(u): r for u, r in decode((self.shard_dir / chunk).read_bytes()).items()})
        return out

    def flush_map(self, s, key: str, pending: dict) -> None:
        manifest = self._load(s)
        entry = manifest["calls"][key]
        name = f"{s.share}-of-{s.n_shares}.{_safe(key)}.{len(entry['chunks'])}.safetensors"
        (self.shard_dir / name).write_bytes(encode({str(u): r for u, r in pending.items()}))
        entry["chunks"].append(name)
        entry["done"] = sorted(set(entry["done"]) | set(pending))
        entry["complete"] = set(entry["done"]) >= set(entry["units"])
        self._write(s, manifest)

    def flush_fold(self, s, key: str, local: dict, finished: set) -> None:
        from safetensors.numpy import save_file

        manifest = self._load(s)
        entry = manifest["calls"][key]
        name = f"{s.share}-of-{s.n_shares}.{_safe(key)}.state.safetensors"
        tmp = self.shard_dir / (name + ".tmp")
        save_file({k: np.ascontiguousarray(v) for k, v in local.items()}, str(tmp))
        tmp.replace(self.shard_dir / name)
        entry["chunks"] = [name]
        entry["done"] = sorted(finished)
        entry["complete"] = set(entry["done"]) >= set(entry["units"])
        self._write(s, manifest)

    def read_state(self, s, key: str, share: int | None = None) -> dict:
        from safetensors.numpy import load_file

        manifest = self.serve[share] if self.serving else self._load(s)
        chunks = manifest["calls"][key]["chunks"]
        return load_file(str(self.shard_dir / chunks[0])) if chunks else {}

    # -- merging ---------------------------------------------------------------------------------------------------
    def served_map(self, s, key: str, model, n_items: int) -> dict:
        out = {}
        for share in range(s.n_shares):
            entry = self._served_entry(share, key, model, n_items, "map")
            for chunk in entry["chunks"]:
                out.update({int(u): r for u, r in decode((self.shard_dir / chunk).read_bytes()).items()})
        return out

    def served_fold(self, s, key: str, model, n_items: int) -> list[dict]:
        for share in range(s.n_shares):
            self._served_entry(share, key, model, n_items, "fold")
        return [self.read_state(s, key, share) for share in range(s.n_shares)]

    def _served_entry(self, share: int, key: str, model, n_items: int, kind: str) -> dict:
        entry = self.serve[share]["calls"].get(key)
        if entry is None:
            raise ShardError(f"share {share} of {self.shard_dir} has no results for call {key}")
        if entry["n_items"] != n_items or entry["kind"] != kind:
            raise ShardError(f"share {share} of {self.shard_dir}: call {key} has {entry['n_items']} items, this "
                             f"run {n_items}")
        if entry["weights"] != weights_sha256(model):
            raise ShardError(f"share {share} of {self.shard_dir}: call {key} was computed with other weights than "
                             f"{model.model_name} has now")
        return entry


def _diff(a: dict | None, b: dict) -> str:
    a = a or {}
    keys = sorted(set(a) | set(b))
    parts = [f"{k}: {a.get(k)!r} there, {b.get(k)!r} here" for k in keys if a.get(k) != b.get(k)]
    opts = [f"{k}: {a.get('options', {}).get(k)!r} there, {b.get('options', {}).get(k)!r} here"
            for k in sorted(set(a.get("options", {})) | set(b.get("options", {})))
            if a.get("options", {}).get(k) != b.get("options", {}).get(k)]
    return "; ".join(opts or parts) or "same arguments"


def read_shards(shard_dir) -> tuple[dict, dict]:
    """The manifests of a complete, consistent shard directory: ``(run record, {share: manifest})``."""
    shard_dir = Path(shard_dir)
    if not shard_dir.is_dir():
        raise FileNotFoundError(f"no shard directory {shard_dir}")
    manifests = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(shard_dir.glob("share-*-of-*.json"))]
    if not manifests:
        raise ShardError(f"{shard_dir} holds no shard manifests (share-I-of-N.json)")
    first = manifests[0]
    for m in manifests[1:]:
        if m.get("n_shares") != first.get("n_shares"):
            raise ShardError(f"{shard_dir} mixes runs split {first.get('n_shares')} and {m.get('n_shares')} ways")
        if (m.get("analysis"), m.get("args_hash")) != (first.get("analysis"), first.get("args_hash")):
            raise ShardError(f"share {m['share']} of {shard_dir} was written by another run than "
                             f"share {first['share']} ({m.get('analysis')} "
                             f"vs {first.get('analysis')}; {_diff(first.get('arguments'), m.get('arguments'))})")
    by_share = {m["share"]: m for m in manifests}
    n = first["n_shares"]
    missing = [i for i in range(n) if i not in by_share]
    if missing:
        raise ShardError(f"{shard_dir} lacks share(s) {', '.join(f'{i}/{n}' for i in missing)} (run them with "
                         f"--shard I/{n})")
    keys = set().union(*(m["calls"] for m in manifests))
    for i, m in sorted(by_share.items()):
        for key in sorted(keys):
            entry = m["calls"].get(key)
            if entry is None:
                raise ShardError(f"share {i}/{n} in {shard_dir} has not started call {key}; rerun it with "
                                 f"--shard {i}/{n}")
            left = sorted(set(entry["units"]) - set(entry["done"]))
            if left:
                raise ShardError(f"share {i}/{n} in {shard_dir} is incomplete: call {key} lacks units {_list(left)} "
                                 f"(of {entry['n_units']}); rerun it with --shard {i}/{n} to finish")
        if not m.get("complete"):
            raise ShardError(f"share {i}/{n} in {shard_dir} did not finish; rerun it with --shard {i}/{n}")
    return {k: first[k] for k in ("analysis", "arguments", "args_hash")}, by_share


def _list(values: list[int], most: int = 10) -> str:
    shown = ", ".join(map(str, values[:most]))
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")
