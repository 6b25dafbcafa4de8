"""Text primitives: exact character spans, sentences, token counting, and markdown structure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hseg.faces import lazy_names

if TYPE_CHECKING:  # the names of _HOME, for type checkers
    from hseg.text.pages import (  # noqa: F401
        DEFAULT_PAGE_MODE,
        PAGE_MODES,
        JoinedDocument,
        join_documents,
        join_pages,
        loader_page_key,
    )
    from hseg.text.provenance import SourceMap, cite_pages  # noqa: F401
    from hseg.text.sentences import split_sentences, word_count  # noqa: F401
    from hseg.text.spans import Span  # noqa: F401
    from hseg.text.structure import STRUCTURES, source_name  # noqa: F401
    from hseg.text.tokens import TokenCounter, as_token_counter  # noqa: F401

#: each public name and the module that holds it, imported on first use
#: (the tokenizer and the markdown readers load when asked for)
_HOME = {
    "Span": "hseg.text.spans", "split_sentences": "hseg.text.sentences", "word_count": "hseg.text.sentences",
    "PAGE_MODES": "hseg.text.pages", "DEFAULT_PAGE_MODE": "hseg.text.pages", "JoinedDocument": "hseg.text.pages",
    "join_documents": "hseg.text.pages", "join_pages": "hseg.text.pages", "loader_page_key": "hseg.text.pages",
    "SourceMap": "hseg.text.provenance", "cite_pages": "hseg.text.provenance", "STRUCTURES": "hseg.text.structure",
    "source_name": "hseg.text.structure", "TokenCounter": "hseg.text.tokens", "as_token_counter": "hseg.text.tokens",
}

__all__ = list(_HOME)

__getattr__ = lazy_names(__name__, _HOME)
