"""What runs an analysis' passes, whatever the model: data-parallel sessions and their reductions (``parallel``), the
memory a run will take and the chunk sizes that keep it in bounds (``memory``), and the progress lines of long loops
(``progress``)."""
