"""``poslens view --serve`` and the viewer's refusals: loopback only, files of the results folder only, a block's rows
computed on demand; bad inputs (another analysis' folder, a length past the context, a port in use) said before any
work."""

import http.client
import json
import socket

import numpy as np
import pytest
import torch

from poslens.cli import main
from poslens.viewer import ViewerError, view
from poslens.viewer.results import ResultsError
from tests.repo_helpers import tiny_repo


def _get(port: int, path: str, host: str = "127.0.0.1", headers: dict | None = None):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", path, headers=headers or {})  # sent as written: no client-side normalisation of .. or //
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


@pytest.fixture
def results(tmp_path):
    """A folder laid out as a run writes it (provenance naming the analysis, its CSV), a secret beside it."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "sink-rate.csv").write_text("model,layer,head,input,start_token,length,alpha_1,first_token_mass,"
                                          "sink_share\ntiny-rope,0,0,text,0,32,0.5,0.4,1.0\n", encoding="utf-8")
    (folder / "sink-rate.provenance.json").write_text(json.dumps({"analysis": "sink-rate", "models": []}))
    (tmp_path / "secret.txt").write_text("not yours")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    return folder


def test_the_live_server_answers_on_loopback_only_and_serves_the_results_folder_alone(results, tmp_path):
    model = tiny_repo("rope")
    ids = torch.randint(1, 250, (96,), generator=torch.Generator().manual_seed(3)).tolist()
    v = view(model, text=ids, results=results, block=16, page_mb=0, serve=True, port=0)
    try:
        host, port = v.server.server_address
        assert host == "127.0.0.1" and v.url == f"http://127.0.0.1:{port}/"
        status, body = _get(port, "/")
        assert status == 200 and b'"live":true' in body and b"poslens-data" in body
        # a block the file does not hold, computed on demand: every head of the layer, exact rows
        assert v.data["models"][0]["precomputed"] == []
        status, body = _get(port, "/api/rows?model=0&layer=2&head=1&block=3")
        assert status == 200
        rows = json.loads(body)["rows"]
        assert sorted(rows) == ["2|0|3", "2|1|3", "2|2|3", "2|3|3"]
        _, cache = model.run_with_cache(torch.tensor([ids]))
        a = cache["blocks.2.attn.hook_pattern"][0].double()
        assert [q for q, _, _ in rows["2|1|3"]] == [48, 53, 58, 63]
        for q, keys, ws in rows["2|1|3"]:
            np.testing.assert_allclose(ws, a[1, q, keys].numpy(), atol=1e-6)
        assert _get(port, "/api/rows?model=0&layer=9&head=0&block=0")[0] == 400
        assert _get(port, "/api/rows?model=0&layer=0&head=0&block=6")[0] == 400
        assert _get(port, "/api/rows?model=3&layer=0&head=0&block=0")[0] == 400
        # files of the results folder, and nothing else
        status, body = _get(port, "/files/sink-rate.csv")
        assert status == 200 and body == (results / "sink-rate.csv").read_bytes()
        for path in ("/files/../secret.txt", "/files/%2e%2e/secret.txt", "/files//etc/passwd", "/files/link.txt",
                     "/files/..%2fsecret.txt", "/files/sub/../../secret.txt", "/files/"):
            status, body = _get(port, path)
            assert status == 403 and b"not yours" not in body, path
        assert _get(port, "/secret.txt")[0] == 404 and _get(port, "/etc/passwd")[0] == 404
        # a page whose name was rebound to the loopback address (DNS rebinding) sends its own name as the Host
        for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1:1"):
            status, body = _get(port, "/files/sink-rate.csv", headers={"Host": host})
            assert status == 403 and b"tiny-rope" not in body, host
        assert _get(port, "/", headers={"Host": f"localhost:{port}"})[0] == 200
        # the loopback address alone: another address of this machine refuses the connection
        others = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
        for other in [a for a in others if not a.startswith("127.")]:
            with pytest.raises(OSError):
                _get(port, "/", host=other)
    finally:
        v.stop()
    with pytest.raises(OSError):
        _get(port, "/")


def test_a_port_in_use_is_said_before_any_model_loads():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ViewerError, match=f"--port {port}: in use on 127.0.0.1"):
            view("no-such-model-anywhere", serve=True, port=port)  # loading it would fail differently
    finally:
        taken.close()


def test_a_length_past_the_context_is_said_before_the_forward_pass(monkeypatch):
    import poslens.viewer.data as data

    monkeypatch.setattr(data, "head_data", lambda *a, **k: pytest.fail("the forward pass ran"))
    with pytest.raises(ViewerError, match="--length 5000: tiny-rope takes 2 to 1200 tokens"):
        view(tiny_repo("rope"), length=5000)
    with pytest.raises(ViewerError, match="1300 token ids given: tiny-rope takes 2 to 1200"):
        view(tiny_repo("rope"), text=[5] * 1300)


def test_a_folder_of_another_analysis_is_refused_by_name(tmp_path, capsys):
    other = tmp_path / "kl"
    other.mkdir()
    (other / "kl-ablation.csv").write_text("model,layer\n")
    (other / "kl-ablation.provenance.json").write_text(json.dumps({"analysis": "kl-ablation"}))
    with pytest.raises(ResultsError, match="holds results of kl-ablation; the viewer reads head-profiles, "
                                           "along-context, sink-rate, attention-window"):
        view(results=other)
    with pytest.raises(ResultsError, match="no poslens results here"):
        view(results=tmp_path)
    with pytest.raises(ResultsError, match="no such folder"):
        view(results=tmp_path / "absent")
    assert main(["view", "--results", str(other)]) == 2
    assert "holds results of kl-ablation" in capsys.readouterr().err
    assert main(["view"]) == 2
    assert "give --model or --results" in capsys.readouterr().err


def test_the_command_line_writes_the_page(tmp_path, capsys):
    out = tmp_path / "v.html"
    assert main(["view", "--model", "rope-small", "--length", "64", "--page-mb", "2", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}") and out.stat().st_size > 10_000
    assert said.strip().endswith("token rows of every block (32)")
    text = out.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text  # nothing fetched from the network
    assert main(["view", "--model", "rope-small", "--length", "3000", "--out", str(out)]) == 2
    assert "--length 3000: rope-small takes 2 to 2304 tokens" in capsys.readouterr().err
    assert main(["view", "--model", "rope-small", "--page-mb", "-1", "--out", str(out)]) == 2
    assert "--page-mb -1.0: expected a size in MB, 0 or more" in capsys.readouterr().err


def test_view_help_imports_no_heavy_module():
    import subprocess
    import sys

    code = ("import sys\nfrom poslens.cli import main\ntry:\n    main(['view', '--help'])\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'pandas', 'plotly', 'transformers') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--serve" in proc.stdout and proc.stdout.strip().splitlines()[-1] == "[]"


def test_a_file_the_viewer_did_not_write_is_kept_and_named_before_any_model_loads(tmp_path, capsys, monkeypatch):
    import poslens.viewer.data as data

    notes = tmp_path / "notes.html"
    notes.write_text("<html>my notes</html>", encoding="utf-8")
    monkeypatch.setattr(data, "head_data", lambda *a, **k: pytest.fail("the forward pass ran"))
    assert main(["view", "--model", "rope-small", "--length", "64", "--out", str(notes)]) == 2
    err = capsys.readouterr().err
    assert f"--out {notes}: this file was not written by poslens view" in err and "--force" in err
    assert notes.read_text(encoding="utf-8") == "<html>my notes</html>"
    assert main(["view", "--model", "rope-small", "--length", "64", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    monkeypatch.undo()
    page = tmp_path / "page.html"
    for argv in (["--out", str(page)], ["--out", str(page)], ["--out", str(notes), "--force"]):
        assert main(["view", "--model", "rope-small", "--length", "32", "--page-mb", "1", *argv]) == 0
    assert notes.read_text(encoding="utf-8").startswith("<!doctype html>")  # --force overwrote it
    assert page.read_text(encoding="utf-8") == notes.read_text(encoding="utf-8")  # its own page is rewritten
    assert not list(tmp_path.glob(".*partial*"))


def test_an_input_that_is_not_utf8_is_named(tmp_path, capsys):
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 au lait".encode("latin-1"))
    assert main(["view", "--model", "rope-small", "--input", str(latin), "--out", str(tmp_path / "v.html")]) == 2
    err = capsys.readouterr().err
    assert f"--input {latin}: not UTF-8 text (byte 3" in err and "Traceback" not in err
