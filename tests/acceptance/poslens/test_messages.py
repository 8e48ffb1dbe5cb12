"""Errors name the thing that is wrong: the file, the reference, the option, the key, the hook, the row."""


import pytest
import torch

from analyses.stats import roc_auc
from analyses.word_boundaries import word_boundaries
from corpora.documents import Document
from interp.extract import run_and_collect
from interp.families.encoder.checkpoints import export
from interp.loading import CheckpointError, load, save
from poslens.cli import main
from tests.encoder_helpers import tiny_encoder, token_ids
from tests.helpers import tiny_model


def test_a_non_utf8_entities_file_is_named_with_its_line(tmp_path, capsys):
    save(tiny_model("shared", max_seq_len=512), tmp_path / "m")
    entities = tmp_path / "entities.txt"
    entities.write_bytes("New York\n".encode() + "Zürich Bern\n".encode("latin-1"))
    assert main(["analyze", "entity-spacing", "--model", str(tmp_path / "m"), "--entities", str(entities),
                 "--out", str(tmp_path / "out")]) == 2
    assert f"{entities}:2: not UTF-8 text (byte 0xfc" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_roc_auc_names_the_reference_and_why():
    with pytest.raises(ValueError, match="layer L0 against gold needs both positive and negative labels, "
                                         "but all 3 are negative"):
        roc_auc([0, 0, 0], [0.1, 0.2, 0.3], "layer L0 against gold")
    model = tiny_model("per-layer", max_seq_len=256)
    one_word = [Document("t", "中华人民共和国", "test", ("中华人民共和国",))]  # no boundary inside
    with pytest.raises(ValueError, match=r"ROC-AUC of layer L0 against the (jieba|gold) segmentation "
                                         r"\(6 gaps in 1 documents\) needs both .* all 6 are negative"):
        word_boundaries(model, documents=one_word, length=128, n_boot=10)


def test_zero_documents_is_reported_as_zero_documents():
    model = tiny_model("per-layer", max_seq_len=256)
    # refused by the declaration, before any work
    with pytest.raises(ValueError, match=r"n_docs 0: must be at least 1"):
        word_boundaries(model, n_docs=0, length=128, n_boot=10)
    with pytest.raises(ValueError, match=r"word-boundaries: documents= holds nothing"):
        word_boundaries(model, documents=[], length=128, n_boot=10)
    with pytest.raises(ValueError, match="the 1 documents contain no gap between two CJK"):
        word_boundaries(model, documents=["plain English only"], length=128)


@pytest.mark.parametrize("shape", [(49, 7), (8, 49), (49,)])
def test_a_corrupt_dstg_position_table_is_blamed_on_itself(tmp_path, shape):
    _, state = export(tiny_encoder("disentangled"))
    state["model.positional_embedding.weight"] = torch.randn(shape)
    torch.save(state, tmp_path / "state_dict.pt")
    with pytest.raises(CheckpointError, match=rf"'model\.positional_embedding\.weight' has shape {list(shape)}"
                       .replace("[", r"\[").replace("]", r"\]")) as err:
        load(tmp_path / "state_dict.pt")
    assert "qkv_pos" not in str(err.value).split("positional_embedding")[0]


def test_run_and_collect_names_close_hooks_and_hooks_that_never_run():
    model = tiny_model("per-layer")
    tokens = torch.tensor([[1, 2, 3]])
    with pytest.raises(KeyError) as err:
        run_and_collect(model, tokens, ["hook_delta"])
    assert str(err.value) == ("tiny-per-layer has no hook 'hook_delta'; "
                              "did you mean blocks.0.hook_delta, blocks.1.hook_delta? "
                              "(model.hook_table() lists every hook this model has, with its shape and meaning)")
    with pytest.raises(KeyError, match=r"no hook 'blocks\.0\.attn\.hook_patern'; "
                                       r"did you mean blocks\.0\.attn\.hook_pattern"):
        run_and_collect(model, tokens, ["blocks.0.attn.hook_patern"])
    with pytest.raises(TypeError, match=r"got the string 'blocks\.0\.hook_delta'"):
        run_and_collect(model, tokens, "blocks.0.hook_delta")


@pytest.mark.parametrize("make", [lambda: tiny_model("per-layer"), lambda: tiny_encoder("disentangled")])
def test_query_rows_refuses_fractions_and_rows_past_the_sequence(make):
    model = make()
    tokens = (token_ids(model, 1, 6) if hasattr(model, "cfg") and not hasattr(model, "increment_sources")
              else torch.tensor([[1, 2, 3, 4, 5, 6]]))
    seen = []
    hook = ("blocks.0.attn.hook_pattern", lambda t, hook: seen.append(t.shape))
    with pytest.raises(ValueError, match="query_rows takes integer positions, got 2.7"):
        model.query_rows([2.7])
    with pytest.raises(ValueError, match="from 0, got -1"):
        model.query_rows([-1])
    with model.query_rows([1000]), model.hooks(fwd_hooks=[hook]):
        with pytest.raises(IndexError, match=r"query position 1000, "
                                             r"but this forward pass has 6 query positions \(0\.\.5\)"):
            model(tokens)
    with model.query_rows(torch.tensor([2.0, 5.0])), model.hooks(fwd_hooks=[hook]):
        model(tokens)
    assert seen[-1][-2:] == (2, 6)


def test_a_truncated_generic_checkpoint_is_one_named_line(tmp_path, capsys):
    from tests.hf_helpers import write_tiny_hf

    write_tiny_hf("qwen2", tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(CheckpointError, match=f"{weights}: cannot be read as safetensors"):
        load(tmp_path / "m")
    capsys.readouterr()
    assert main(["analyze", "position-ranges", "--model", str(tmp_path / "m"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(weights) in err[0] and "Traceback" not in err[0]


def test_python_dash_m_poslens_runs_the_command_line():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "poslens", "analyze", "kl-ablation", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "--n-docs" in out.stdout and "--threads" in out.stdout


@pytest.mark.parametrize("content, said", [("", "no documents"), ('{"text": "  "}\n', "document '1' is empty")])
def test_an_input_error_names_the_option_and_file_once(tmp_path, capsys, content, said):
    given = tmp_path / "docs.jsonl"
    given.write_text(content)
    assert main(["analyze", "kl-ablation", "--model", "dstg-small", "--input", str(given),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"poslens: error: --input {given}: ") and err.count(str(given)) == 1 and said in err
