"""bench.load's table: process 1 of each tree against the median of its later (cached) processes."""

from bench.load import section


def test_the_table_compares_each_tree_with_its_own_first_process():
    rows = [dict(tree="this tree", model="smollm2", process=i + 1, load_s=s, load_cpu_s=s / 2, wall_s=s + 1, cpu_s=s)
            for i, s in enumerate((40.0, 4.0, 6.0))]
    text = section(dict(rows=rows, load=[(1.0, 1.0, 1.0), (2.0, 2.0, 2.0)], started="2026-11-27 08:00 UTC", cores=2,
                        command="python -m bench.load"))
    assert "| smollm2 | this tree | 1 (empty cache) | 40.0 | 20.0 | 41.0 | 40.0 | 1.0x |" in text
    assert "| smollm2 | this tree | 2-3 (median) | 5.0 | 2.5 | 6.0 | 5.0 | 8.0x faster |" in text
    assert "load average 1.0 / 1.0 / 1.0" in text
