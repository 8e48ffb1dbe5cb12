import json

import pytest
import torch

from interp.loading import load
from poslens.train import make_spec, train
from poslens.train.loop import TrainArgs, lr_at, to_device

TINY = dict(dim=32, n_heads=2, n_layers=1, intermediate_dim=64, max_seq_len=32)


def _args(**kw):
    return TrainArgs(**{**dict(steps=12, batch_size=4, warmup=2, eval_every=6, save_every=3, seed=5), **kw})


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    spec = make_spec("increments-per-layer", overrides=TINY, n_validation=16)
    straight = train(spec, tmp_path / "a", _args(), progress=False)
    assert train(spec, tmp_path / "b", _args(), progress=False, session_steps=5) is None  # interrupted
    assert not (tmp_path / "b" / "model.safetensors").exists()
    resumed = train(spec, tmp_path / "b", _args(), resume=True, progress=False)
    a, b = load(tmp_path / "a"), load(tmp_path / "b")
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        torch.testing.assert_close(va, vb, msg=ka)
    assert straight["final_validation_loss"] == pytest.approx(resumed["final_validation_loss"])
    record = json.loads((tmp_path / "a" / "training.json").read_text())
    assert record["steps"] == 12 and record["tokens_seen"] == 12 * 4 * 32
    assert record["history"]["validation"][0][0] == 6
    assert record["device"] == "cpu"


def test_to_device_moves_tensors_and_keeps_the_rest():
    batch = (torch.ones(2, dtype=torch.float64), None, 3)
    moved = to_device(batch, torch.device("meta"))
    assert moved[0].device.type == "meta" and moved[0].dtype == torch.float64 and moved[1:] == (None, 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_gpu_run_matches_the_cpu_run_to_float_tolerance(tmp_path):
    spec = make_spec("increments-per-layer", overrides=TINY, n_validation=16)
    cpu = train(spec, tmp_path / "cpu", _args(bf16=False), progress=False)
    gpu = train(spec, tmp_path / "gpu", _args(bf16=False), progress=False, device="cuda")
    assert gpu["device"] != "cpu" and gpu["tokens_seen"] == cpu["tokens_seen"]
    assert gpu["final_validation_loss"] == pytest.approx(cpu["final_validation_loss"], rel=1e-3)


def test_refuses_to_clobber_a_run(tmp_path):
    spec = make_spec("rope-bytes", overrides=TINY, n_validation=16)
    train(spec, tmp_path / "r", _args(steps=3), progress=False)
    with pytest.raises(FileExistsError, match="--resume to extend it or --force"):
        train(spec, tmp_path / "r", _args(steps=3), progress=False)


def test_schedule_warms_up_then_decays_to_zero():
    args = TrainArgs(steps=100, warmup=10, lr=1e-3)
    assert lr_at(0, args) == pytest.approx(1e-4)
    assert lr_at(9, args) == pytest.approx(1e-3)
    assert lr_at(55, args) == pytest.approx(5e-4)
    assert lr_at(100, args) == pytest.approx(0.0, abs=1e-12)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))  # unpickling this creates a file: code ran


def test_a_crafted_trainer_state_is_refused_without_running_code(tmp_path):
    spec = make_spec("increments-per-layer", overrides=TINY, n_validation=16)
    out, marker = tmp_path / "run", tmp_path / "pwned"
    out.mkdir()
    torch.save({"recipe": spec.name, "payload": _RunsCode(marker)}, out / "trainer_state.pt")
    with pytest.raises(ValueError, match=r"trainer_state\.pt: refused: .*could run code.*--force"):
        train(spec, out, _args(), resume=True, progress=False)
    assert not marker.exists()


def test_the_trainer_state_is_safetensors_with_json_metadata(tmp_path):
    from safetensors import safe_open

    spec = make_spec("increments-per-layer", overrides=TINY, n_validation=16)
    train(spec, tmp_path / "b", _args(), progress=False, session_steps=3)
    with safe_open(str(tmp_path / "b" / "trainer_state.safetensors"), "pt") as fh:
        meta = json.loads(fh.metadata()["poslens_trainer_state"])
        assert meta["step"] == 3 and meta["recipe"] == spec.name
        assert any(k.startswith("optimizer/") and k.endswith("/exp_avg") for k in fh.keys())
    (tmp_path / "b" / "trainer_state.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(ValueError, match="not a poslens trainer state"):
        train(spec, tmp_path / "b", _args(), resume=True, progress=False)
