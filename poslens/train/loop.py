"""A small training loop: AdamW, warmup + cosine, gradient clipping, bf16 autocast, validation loss,
progress bar, and resumption from ``trainer_state.safetensors`` so a killed run continues where it stopped.

The trainer state is tensors (model weights, AdamW moments) in a safetensors file whose metadata holds the
rest as JSON (step, history, optimizer hyper-parameters): reading it can never run code. A
``trainer_state.pt`` from an older poslens is read with ``torch.load(weights_only=True)`` (tensors and plain
containers only) and anything else in it is refused.
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from tqdm import tqdm

from interp.loading import save

STATE_FILE = "trainer_state.safetensors"
LEGACY_STATE_FILE = "trainer_state.pt"


@dataclass
class TrainSpec:
    """What a recipe provides: how to build the model, draw a batch, score it and evaluate it."""

    name: str
    build_model: Callable[[], torch.nn.Module]
    sample_batch: Callable[[np.random.Generator, int], tuple]
    loss: Callable[[torch.nn.Module, tuple], torch.Tensor]
    validation: Callable[[], list[tuple]]
    description: str = ""
    data: dict = field(default_factory=dict)
    tokens_per_batch: Callable[[tuple], int] = lambda batch: int(batch[0].numel())
    extra_eval: Callable[[torch.nn.Module], dict] | None = None
    save_dtype: torch.dtype | None = None  # store weights in this dtype (e.g. float16 for large embeddings)


@dataclass
class TrainArgs:
    steps: int = 2000
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: int = 100
    grad_clip: float = 1.0
    eval_every: int = 200
    save_every: int = 100
    seed: int = 0
    bf16: bool = True

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def lr_at(step: int, args: TrainArgs) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


@torch.no_grad()
def validation_loss(model, spec: TrainSpec, batches: list[tuple]) -> float:
    model.eval()
    total, count = 0.0, 0
    for batch in batches:
        n = spec.tokens_per_batch(batch)
        total += float(spec.loss(model, batch)) * n
        count += n
    model.train()
    return total / max(1, count)


def to_device(batch: tuple, device: torch.device) -> tuple:
    return tuple(x.to(device, non_blocking=True) if isinstance(x, torch.Tensor) else x for x in batch)


def train(spec: TrainSpec, out_dir, args: TrainArgs, *, resume: bool = False, force: bool = False,
          progress: bool = True, session_steps: int | None = None, device: str | torch.device = "cpu") -> dict | None:
    """Train ``spec`` into ``out_dir`` on ``device``; returns the training record written beside the weights.

    Batches are drawn on the CPU from a generator seeded by (seed, step), so the data order does not depend
    on the device; the arithmetic does (a GPU run matches a CPU run to float tolerance, not bit for bit).

    ``session_steps`` stops this invocation after that many steps (state saved, no final model, returns
    None); a later ``resume=True`` call continues on the same schedule.
    """
    out = Path(out_dir)
    state_path = out / STATE_FILE
    found = _unfinished(out, state_path, resume, force)
    out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(args.seed)
    device = torch.device(device)
    model = spec.build_model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    step, history, tokens_seen, elapsed = 0, {"train": [], "validation": []}, 0, 0.0
    if resume and found is not None:
        step, history, tokens_seen, elapsed = _resume(found, state_path, spec, args, model, opt, device)

    val_batches = [to_device(b, device) for b in spec.validation()]
    model.train()
    bar = tqdm(total=args.steps, initial=step, desc=spec.name, disable=not progress, dynamic_ncols=True)
    t0 = time.time() - elapsed
    running = []
    stop_at = args.steps if session_steps is None else min(args.steps, step + session_steps)
    while step < stop_at:
        loss, tokens = _step(spec, args, model, opt, step, device)
        step += 1
        tokens_seen += tokens
        running.append(float(loss.detach()))
        if step % 20 == 0 or step == args.steps:
            history["train"].append([step, float(np.mean(running))])
            bar.set_postfix(loss=f"{np.mean(running):.3f}")
            running = []
        if step % args.eval_every == 0 or step == args.steps:
            history["validation"].append([step, validation_loss(model, spec, val_batches)])
            bar.set_postfix(val=f"{history['validation'][-1][1]:.3f}")
        if step % args.save_every == 0 or step == stop_at:
            _save_state(state_path, spec, args, model, opt, step, history, tokens_seen, time.time() - t0)
        bar.update(1)
    bar.close()
    if step < args.steps:
        return None

    model.eval()
    record = _record(spec, args, model, step, tokens_seen, history, t0, device)
    save(model, out, training=record, name=spec.name, overwrite=True, dtype=spec.save_dtype)
    return record


def _unfinished(out: Path, state_path: Path, resume: bool, force: bool) -> Path | None:
    """The unfinished run's state file in ``out``, if any; an error where ``out`` holds a trained model or an
    unfinished run and neither ``resume`` nor ``force`` says what to do with it."""
    found = next((p for p in (state_path, out / LEGACY_STATE_FILE) if p.exists()), None)
    if (out / "model.safetensors").exists() and not (force or resume):
        raise FileExistsError(f"{out} already holds a trained model; pass --resume to extend it or --force to "
                              "start over")
    if found is not None and not (resume or force):
        raise FileExistsError(f"{out} holds an unfinished run ({found.name}); pass --resume to continue or --force "
                              "to restart")
    return found


def _resume(found: Path, state_path: Path, spec: TrainSpec, args: TrainArgs, model, opt, device) -> tuple:
    """Loads the saved weights and optimizer state into ``model`` and ``opt``; returns the step, history, tokens
    seen and seconds elapsed. The state must be of the same recipe and seed."""
    state = read_state(found)
    if state["recipe"] != spec.name or state["args"]["seed"] != args.seed:
        raise ValueError(f"{state_path} is a run of {state['recipe']} (seed {state['args']['seed']}), "
                         f"not {spec.name} (seed {args.seed})")
    model.load_state_dict({k: v.to(device) for k, v in state["model"].items()})
    opt.load_state_dict(state["optimizer"])
    return state["step"], state["history"], state["tokens_seen"], state["elapsed"]


def _step(spec: TrainSpec, args: TrainArgs, model, opt, step: int, device) -> tuple:
    """One optimizer step on the batch seeded by (seed, step); returns its loss and its tokens."""
    batch = to_device(spec.sample_batch(np.random.default_rng([args.seed, step]), args.batch_size), device)
    for group in opt.param_groups:
        group["lr"] = lr_at(step, args)
    with torch.autocast("cpu" if model_device(model).type == "cpu" else "cuda", dtype=torch.bfloat16,
                        enabled=args.bf16):
        loss = spec.loss(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss, spec.tokens_per_batch(batch)


def _record(spec: TrainSpec, args: TrainArgs, model, step: int, tokens_seen: int, history: dict, t0: float,
            device: torch.device) -> dict:
    """The training record written beside the weights: the run, its losses, the machine and any extra evaluation."""
    record = {
        "recipe": spec.name,
        "description": spec.description,
        "steps": step,
        "tokens_seen": tokens_seen,
        "final_validation_loss": history["validation"][-1][1] if history["validation"] else None,
        "validation_loss_unit": "nats per token",
        "history": history,
        "args": args.as_dict(),
        "data": spec.data,
        "wall_seconds": round(time.time() - t0, 1),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else device.type,
    }
    if spec.extra_eval is not None:
        record.update(spec.extra_eval(model))
    return record


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def _save_state(path: Path, spec, args, model, opt, step, history, tokens_seen, elapsed):
    """Write the state aside, then rename it over the old one: a kill mid-write leaves the last good state."""
    tensors = {f"model/{k}": v for k, v in model.state_dict().items()}
    optim = opt.state_dict()
    scalars: dict[str, dict] = {}
    for pid, entry in optim["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer/{pid}/{key}"] = value
            else:
                scalars.setdefault(str(pid), {})[key] = value
    meta = {"recipe": spec.name, "args": args.as_dict(), "step": step, "history": history, "tokens_seen": tokens_seen,
            "elapsed": elapsed, "param_groups": optim["param_groups"], "optimizer_scalars": scalars}
    tmp = path.with_name(f".{path.name}.partial")
    save_file({k: v.detach().cpu().clone().contiguous() for k, v in tensors.items()}, str(tmp),
              metadata={"poslens_trainer_state": json.dumps(meta)})
    tmp.replace(path)


def read_state(path: Path) -> dict:
    """The trainer state in ``path``, without unpickling anything beyond tensors and plain containers."""
    if path.suffix == ".pt":
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # UnpicklingError for foreign objects, others for truncated files
            raise ValueError(f"{path}: refused: a trainer state may hold only tensors, numbers, strings, lists "
                             f"and dicts (unpickling anything else could run code); pass --force to restart the run "
                             f"({type(err).__name__}: {str(err).splitlines()[0]})") from None
    try:
        with safe_open(str(path), "pt") as fh:
            meta = json.loads((fh.metadata() or {})["poslens_trainer_state"])
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except (SafetensorError, OSError, KeyError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a poslens trainer state (truncated or corrupt?): {err}; pass --force "
                         "to restart") from None
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer/"):
            _, pid, name = key.split("/", 2)
            state.setdefault(int(pid), {})[name] = value
    for pid, extra in meta.pop("optimizer_scalars").items():
        state.setdefault(int(pid), {}).update(extra)
    meta["model"] = {k.removeprefix("model/"): v for k, v in tensors.items() if k.startswith("model/")}
    meta["optimizer"] = {"state": state, "param_groups": meta.pop("param_groups")}
    return meta
