"""The corpus loops hand freed memory back after every unit, so peak memory does not grow with the corpus
(the numbers are in BENCHMARKS.md, "Peak memory against the number of documents")."""

import numpy as np

from interp.runtime import memory, parallel


class _Model:
    model_name = "planted"


def test_map_and_fold_release_memory_after_every_unit(monkeypatch):
    calls = []
    seen = []
    monkeypatch.setattr(memory, "release", lambda: calls.append(len(seen)))
    out = parallel.map_items(lambda x: seen.append(x) or x * 2, list(range(7)), model=_Model())
    assert out == [2 * x for x in range(7)]
    assert calls == list(range(1, 8))  # once after each item, the item already done
    calls.clear(), seen.clear()

    def add(state, i, r):
        state["s"] += r

    state = parallel.fold_items(lambda xs: (seen.extend(xs), [float(x) for x in xs])[1], list(range(5)),
                                {"s": np.zeros(1)}, add, model=_Model(), batch_size=2)
    assert state["s"][0] == 10.0
    assert calls == [2, 4, 5]  # units of two items: after each unit


def test_release_calls_the_allocator_where_there_is_one():
    trim = memory._trim()
    if trim is None:
        return  # not glibc: nothing to hand back, and release() must still be callable
    memory.release()


def test_every_analysis_that_reads_a_count_of_documents_has_a_memory_benchmark_row():
    from analyses import registry
    from bench.memory import plan

    counted = {a.name for a in registry.all_analyses() if any(o.name == "n_docs" for o in a.options)}
    measured = set(plan())
    assert counted - measured == set(), "declare @analysis(memory=...) and measure them (python -m bench.memory)"
    assert measured - counted == set(), "these declare a memory run but no longer take --n-docs"
