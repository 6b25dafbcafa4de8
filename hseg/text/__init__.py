"""Text primitives: exact character spans, sentences, token counting, and markdown structure."""
