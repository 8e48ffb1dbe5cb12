"""README's "Known results, reproduced": each published claim beside poslens' number on the same definition.

``types`` holds the table's records (a claim, its verdict rule, the CSVs of one run), ``table`` the rows, ``render``
the Markdown and the keeping of one run's evidence (``python -m poslens.known_results``)."""
