"""Token streams for training: documents concatenated (each followed by EOS), sampled as random windows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from corpora.documents import Document


class ByteStream:
    """UTF-8 bytes of ``docs`` in a seeded shuffled order, each document followed by EOS (256)."""

    def __init__(self, docs: Sequence[Document], seed: int = 0):
        if not docs:
            raise ValueError("ByteStream needs at least one document")
        order = np.random.default_rng(seed).permutation(len(docs))
        from interp.tokenizers import ByteTokenizer  # transformers: not at the command line's import

        eos = ByteTokenizer.eos_id
        parts = []
        for i in order:
            parts.append(np.frombuffer(docs[i].text.encode("utf-8"), dtype=np.uint8).astype(np.int16))
            parts.append(np.array([eos], dtype=np.int16))
        self.ids = np.concatenate(parts)
        self.n_docs = len(docs)

    def __len__(self) -> int:
        return len(self.ids)

    def windows(self, rng: np.random.Generator, count: int, length: int) -> np.ndarray:
        """``[count, length]`` windows starting at uniformly random offsets."""
        if length > len(self.ids):
            raise ValueError(f"window of {length} tokens is longer than the stream ({len(self.ids)} tokens)")
        starts = rng.integers(0, len(self.ids) - length + 1, size=count)
        return np.stack([self.ids[s : s + length] for s in starts]).astype(np.int64)


class MixedStream:
    """Several streams mixed with fixed weights: each window comes whole from one stream."""

    def __init__(self, streams: dict[str, ByteStream], weights: dict[str, float]):
        self.names = list(streams)
        self.streams = streams
        w = np.array([weights[n] for n in self.names], dtype=float)
        self.p = w / w.sum()

    def windows(self, rng: np.random.Generator, count: int, length: int) -> np.ndarray:
        which = rng.choice(len(self.names), size=count, p=self.p)
        out = np.empty((count, length), dtype=np.int64)
        for j, name in enumerate(self.names):
            rows = np.flatnonzero(which == j)
            if len(rows):
                out[rows] = self.streams[name].windows(rng, len(rows), length)
        return out


def bilingual_streams(split: str, seed: int = 0) -> MixedStream:
    """Even byte mix of English (Wikipedia leads) and Chinese (People's Daily + reviews) for ``split``."""
    from corpora.sources import chinese_reviews, english_wikipedia, people_daily

    en = [d for d in english_wikipedia() if d.split == split]
    zh = [d for d in people_daily() + chinese_reviews() if d.split == split]
    return MixedStream({"en": ByteStream(en, seed), "zh": ByteStream(zh, seed)}, {"en": 0.5, "zh": 0.5})
