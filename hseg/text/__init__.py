"""Text primitives: exact character spans, sentences, token counting, and markdown structure."""

#: no names of its own: a stage folder whose modules are imported by their own names
#: (users reach spans and sentences from :mod:`hseg`)
__all__: list[str] = []
