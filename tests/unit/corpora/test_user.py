import hashlib
import json

import pytest

from corpora.user import Document, as_documents, input_record, read_documents, token_windows
from interp.base import InputError
from interp.tokenizers import ByteTokenizer, WordPieceTokenizer


def test_txt_jsonl_and_directory(tmp_path):
    (tmp_path / "a.txt").write_text("first document", encoding="utf-8")
    assert read_documents(tmp_path / "a.txt") == [Document("a.txt", "first document")]
    lines = [json.dumps({"text": "one"}), "", json.dumps({"id": "x", "text": "two"}),
             json.dumps({"text": "three", "id": 7})]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read_documents(tmp_path / "d.jsonl") == [Document("1", "one"), Document("x", "two"), Document("7", "three")]
    folder = tmp_path / "dir"
    folder.mkdir()
    for name, text in (("b.txt", "bee"), ("a.txt", "ay"), ("skip.md", "no")):
        (folder / name).write_text(text, encoding="utf-8")
    assert [(d.id, d.text) for d in read_documents(folder)] == [("a.txt", "ay"), ("b.txt", "bee")]


def test_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2: not valid JSON"):
        read_documents(bad)
    bad.write_text('{"text": "ok"}\n{"body": "x"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2: a line needs a 'text' field"):
        read_documents(bad)
    bad.write_bytes(b'{"text": "ok"}\n{"text": "\xff"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: not UTF-8"):
        read_documents(bad)
    (tmp_path / "e.txt").write_text("  \n", encoding="utf-8")
    with pytest.raises(InputError, match=r"e.txt.*empty"):
        read_documents(tmp_path / "e.txt")
    (tmp_path / "x.csv").write_text("a", encoding="utf-8")
    with pytest.raises(InputError, match=r"unknown suffix '.csv'"):
        read_documents(tmp_path / "x.csv")
    with pytest.raises(InputError, match="no such file"):
        read_documents(tmp_path / "missing.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no .txt files"):
        read_documents(tmp_path / "empty")
    with pytest.raises(InputError, match=r"documents\[1\] is a int"):
        as_documents(["fine", 3])


def test_input_record_hashes_the_bytes(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes("héllo".encode("utf-8"))
    rec = input_record(f)
    assert rec == dict(path=str(f), bytes=6, sha256=hashlib.sha256("héllo".encode("utf-8")).hexdigest())
    assert read_documents(f).source == rec
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "a.txt").write_text("one", encoding="utf-8")
    before = input_record(folder)
    (folder / "a.txt").write_text("two", encoding="utf-8")
    after = input_record(folder)
    assert before["bytes"] == after["bytes"] == 3 and before["sha256"] != after["sha256"]


@pytest.mark.parametrize("tokenizer", [ByteTokenizer(), WordPieceTokenizer()], ids=["bytes", "wordpiece"])
def test_windows_cover_every_token_once(tokenizer):
    text = "The cat sat on the mat. " * 30
    windows = token_windows(tokenizer, [Document("d", text)], 40)
    whole = tokenizer.encode(text, doc_start=True)
    specials = 2 if isinstance(tokenizer, WordPieceTokenizer) else 1
    content = whole[1:-1] if specials == 2 else whole[1:]
    assert all(len(w.ids) <= 40 for w in windows) and len(windows) == -(-len(content) // (40 - specials))
    assert all(w.ids[0] == whole[0] for w in windows)
    got = [i for w in windows for i in (w.ids[1:-1] if specials == 2 else w.ids[1:])]
    assert got == content
    assert [w.start for w in windows] == list(range(0, len(content), 40 - specials))
