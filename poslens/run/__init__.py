"""One analysis run, from checked options to files: ``execute.run_analysis`` binds the options once, runs the analysis
on each model and writes ``NAME.csv``, its figure and ``NAME.provenance.json`` at once (``outputs``), recording what
ran (``provenance``); ``shards`` keeps a data-parallel run's per-unit results on disk, ``threads`` chooses torch's CPU
threads, ``summary`` makes a result's compact Markdown table."""
