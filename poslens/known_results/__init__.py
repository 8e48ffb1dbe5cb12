"""README's "Known results, reproduced": each published claim beside poslens' number on the same definition.

``claims`` holds the rows, one module each (``claims/GROUP/NAME.py``, registered in one line of ``claims.MODULES``),
``models`` the models they ran on, ``types`` the table's records (a claim, its verdict rule, the CSVs of one run),
``render`` the Markdown and the keeping of one run's evidence (``python -m poslens.known_results``)."""
