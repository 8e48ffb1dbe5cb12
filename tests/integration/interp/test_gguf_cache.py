"""Any GGUF file is de-quantised once into the on-disk cache (``interp.loading.converted``), keyed by its sha256: the
first load parses the file once and writes safetensors + JSON; every later load, in this process or another, reads the
cache and gets bit-identical weights; a different file (or the same path rewritten) gets another directory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.gguf_helpers import write_tiny_gguf

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSLENS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def _counting_readers(monkeypatch) -> list:
    import gguf

    built, init = [], gguf.GGUFReader.__init__

    def counted(self, path, *args, **kwargs):
        built.append(str(path))
        init(self, path, *args, **kwargs)

    monkeypatch.setattr(gguf.GGUFReader, "__init__", counted)
    return built


def test_the_first_load_parses_the_file_once_and_later_loads_read_the_cache(cache, tiny, monkeypatch):
    import interp.loading.converted as converted
    from interp.loading import load

    built = _counting_readers(monkeypatch)
    first = load(tiny)
    assert built == [str(tiny)]  # config, tokenizer and weights share one reader
    directory = Path(first.source["path"])
    assert directory.parent == cache and directory.name.startswith("gguf-" + first.source["gguf_sha256"][:16] + "-")
    assert {p.suffix for p in directory.iterdir()} <= {".json", ".safetensors", ".jinja"}  # nothing that unpickles
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no partial directory left behind

    monkeypatch.setattr(converted, "_dequantise", lambda *a: pytest.fail("converted again"))
    again = load(tiny)
    assert built == [str(tiny)]
    assert again is not first and again.model_name == first.model_name == "tiny"
    assert again.source["format"].startswith("gguf") and again.source["sha256"] == first.source["sha256"]
    ours, theirs = first.state_dict(), again.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert again.to_tokens("hello there").tolist() == first.to_tokens("hello there").tolist()


def test_the_cached_weights_and_tokenizer_are_transformers_own_reading_of_the_gguf(cache, tiny):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from interp.loading import load

    model = load(tiny)
    hf = AutoModelForCausalLM.from_pretrained(tiny.parent, gguf_file=tiny.name, dtype=torch.float32)
    cached = load_file(Path(model.source["path"]) / "model.safetensors")
    reference = {k: v for k, v in hf.state_dict().items() if k in cached}
    assert reference.keys() == cached.keys()
    assert all(torch.equal(cached[k], reference[k]) for k in cached)
    tok = AutoTokenizer.from_pretrained(tiny.parent, gguf_file=tiny.name)
    text = "hello the hell"
    assert model.tokenizer.encode(text) == tok(text, add_special_tokens=False)["input_ids"]
    ids = model.to_tokens(text)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=1e-5, rtol=1e-5)


def test_another_file_or_the_same_path_rewritten_gets_another_directory(cache, tiny, tmp_path):
    from interp.loading import load

    first = load(tiny)
    other = load(write_tiny_gguf(tmp_path / "other.gguf", seed=1))
    assert other.source["path"] != first.source["path"]
    assert other.source["weights_sha256"] != first.source["weights_sha256"]
    write_tiny_gguf(tiny, seed=2)
    os.utime(tiny, ns=(1, 1))  # even with a stale modification time: the size and time differ from the first's
    rewritten = load(tiny)
    assert rewritten.source["path"] not in (first.source["path"], other.source["path"])
    assert len([p for p in cache.iterdir() if p.name.startswith("gguf-")]) == 3


def test_a_directory_whose_marker_names_another_file_is_converted_again(cache, tiny, monkeypatch):
    import interp.loading.converted as converted
    from interp.loading import load

    first = load(tiny)
    marker = Path(first.source["path"]) / converted.MARKER
    marker.write_text(json.dumps({"gguf_sha256": "0" * 64}), encoding="utf-8")
    again = load(tiny)
    assert json.loads(marker.read_text(encoding="utf-8"))["gguf_sha256"] == first.source["gguf_sha256"]
    assert again.source["weights_sha256"] == first.source["weights_sha256"]


def test_another_converter_converts_again_beside_the_old_copy(cache, tiny, monkeypatch):
    """Upgrading transformers (or poslens' conversion) converts again into a directory of its own; the old copy stays
    for a process of the old version, and provenance names the converter that ran."""
    import interp.loading.converted as converted
    from interp.loading import load

    first = load(tiny)
    assert first.source["converted"] == converted.converter()
    newer = dict(converted.converter(), transformers="99.0.0")
    monkeypatch.setattr(converted, "converter", lambda: newer)
    again = load(tiny)
    assert again.source["path"] != first.source["path"] and Path(first.source["path"]).is_dir()
    assert json.loads((Path(again.source["path"]) / converted.MARKER).read_text())["converter"] == newer
    assert again.source["converted"]["transformers"] == "99.0.0"
    assert again.source["weights_sha256"] == first.source["weights_sha256"]
    marker = Path(again.source["path"]) / converted.MARKER  # a marker naming another converter is not this one's
    marker.write_text(json.dumps({"gguf_sha256": first.source["gguf_sha256"], "converter": {"conversion": 0}}))
    monkeypatch.setattr(converted, "_dequantise", lambda *a: (_ for _ in ()).throw(AssertionError("converting")))
    with pytest.raises(AssertionError, match="converting"):
        load(tiny)


def test_the_cache_follows_poslens_cache_then_xdg_cache_home(monkeypatch, tmp_path):
    from interp.loading.converted import cache_root

    monkeypatch.delenv("POSLENS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "poslens"
    monkeypatch.setenv("POSLENS_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"


def test_a_second_process_reads_the_cache_without_converting(cache, tiny):
    from interp.loading import load

    first = load(tiny)
    script = ("import sys, interp.loading.converted as c\n"
              "c._dequantise = lambda *a: sys.exit('converted again')\n"
              "from interp.loading import load\n"
              f"print(load({str(tiny)!r}).source['weights_sha256'])\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == first.source["weights_sha256"]


def test_a_truncated_cached_copy_is_converted_again_and_one_that_cannot_be_read_says_how_to_remove_it(cache, tiny,
                                                                                                       monkeypatch):
    """The cache is derived data: a copy whose weights file was cut short is converted again from the GGUF at hand;
    a copy damaged without changing its size is named with the command that removes it."""
    import interp.loading.converted as converted
    from interp.loading import CheckpointError, load

    first = load(tiny)
    weights = Path(first.source["path"]) / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[: len(whole) // 3])
    again = load(tiny)
    assert again.source["path"] == first.source["path"] and weights.read_bytes() == whole
    assert again.source["weights_sha256"] == first.source["weights_sha256"]
    weights.write_bytes(b"\0" * len(whole))  # the same size, unreadable
    monkeypatch.setattr(converted, "_dequantise", lambda *a: pytest.fail("a whole-looking copy was converted"))
    with pytest.raises(CheckpointError, match=rf"{first.source['path']} is poslens' de-quantised copy of a GGUF "
                                              r"file, derived data: delete that directory"):
        load(tiny)


@pytest.mark.parametrize("where", ["POSLENS_CACHE", "XDG_CACHE_HOME"])
def test_a_cache_path_that_is_a_file_is_named_with_the_variable_that_chose_it(where, tiny, tmp_path, monkeypatch):
    from interp.loading import CheckpointError, load

    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    monkeypatch.delenv("POSLENS_CACHE", raising=False)
    monkeypatch.setenv(where, str(taken))
    with pytest.raises(CheckpointError, match=rf"poslens' GGUF cache {taken}\S* \({where}\S*\): {taken} is a file, "
                                              r"not a directory; set POSLENS_CACHE"):
        load(tiny)
    assert taken.read_text() == "mine\n"
