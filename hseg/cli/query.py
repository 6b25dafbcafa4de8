"""``hseg query`` and ``hseg stats``: ask an index written by ``hseg index``, and count what it holds.

Example::

    hseg query "How are clusters formed?" --db ./hseg-db -k 3
    hseg stats --db ./hseg-db

The embedded ``chromadb.PersistentClient`` at ``--db DIR`` is the default; ``--host/--port``
talk to a Chroma server (``chroma run``) instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hseg.cli.chroma import (
    CliError,
    add_location,
    check_location,
    existing_store,
    id_anchor,
    location_label,
    location_options,
    not_there_yet,
    server_errors,
)
from hseg.cli.options import add_encoder_option, add_search_options, quiet_model_loading, search_settings_from_args

_BOLD_UNDERLINE, _RESET = "\x1b[1;4m", "\x1b[0m"


def register(sub: Any) -> None:
    q = sub.add_parser(
        "query",
        help="retrieve the parents (or passages) that best answer a question",
        description="Embed QUESTION and print the best parents with rank, score, document, character span and "
                    "text, the matched segment highlighted (bold/underlined on a terminal, >>> <<< otherwise).",
        epilog="Example: hseg query 'What is precession?' --db ./hseg-db -k 3 --unit auto",
    )
    q.add_argument("question", metavar="QUESTION", help="the query text")
    add_location(q, db_help="directory of the embedded Chroma database written by 'hseg index'")
    add_search_options(q)
    q.add_argument("--source", default=None, metavar="PATH",
                   help="only search the document with this source (as 'hseg index' recorded it); ANDed with --where")
    add_encoder_option(q, default="the model recorded in the collection")
    q.add_argument("--json", action="store_true", help="print a JSON list of hits (all fields)")
    q.add_argument("--quiet", action="store_true",
                   help="no progress lines on stderr (a first search of a large store may build its lexical index)")
    q.set_defaults(func=run_query)

    s = sub.add_parser(
        "stats",
        help="count documents, segments, clusters and vectors of an index",
        description="Print the documents, segments, clusters and vectors of a collection, its encoder and the "
                    "mean cluster and segment sizes in tokens.",
        epilog="Example: hseg stats --db ./hseg-db --json",
    )
    add_location(s, db_help="directory of the embedded Chroma database written by 'hseg index'")
    s.add_argument("--json", action="store_true", help="print a JSON object")
    s.set_defaults(func=run_stats)


# --------------------------------------------------------------------------- query


def run_query(args: argparse.Namespace) -> int:
    check_location(args)
    if not args.question.strip():
        args._parser.error("QUESTION is empty")
    search_settings_from_args(args)  # the library's one check, as a usage error, before any work
    store = existing_store(args)
    with server_errors(args):
        if store.count() == 0:
            raise CliError(f"collection {args.collection!r} at {location_label(args)} is empty; "
                           + not_there_yet(args, "run 'hseg index' first"))
        where = args.where
        if args.source is not None:
            source = stored_source(store, args.source, id_anchor(args))
            where = {"source": source} if not where else {"$and": [{"source": source}, where]}
    settings = search_settings_from_args(args, where=where)
    quiet_model_loading()  # the answer is the output: no weight-loading bar
    from hseg.encoders import factory

    # a model that cannot load: an EncoderLoadError, which names the fix
    encoder = factory.load_encoder(args.encoder or store.encoder_name, args.backend)
    with server_errors(args):
        store.use_encoder(encoder)  # the collection's encoder, or an EncoderMismatchError
        hits = store.search(args.question, settings=settings)
    over_budget_note(settings.budget_tokens, hits)
    if args.json:
        from hseg.retrieval.results import result_for

        # the metadata schema both framework retrievers return (hseg.chunking.schema.METADATA_KEYS)
        json.dump([{"id": rid, "text": h.text, "metadata": meta} for h in hits for rid, meta in [result_for(h)]],
                  sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return 0
    if not hits:
        print("no results" + (f" in source {args.source!r}" if args.source else ""))
        return 0
    tty = sys.stdout.isatty()
    for rank, hit in enumerate(hits, 1):
        print(format_hit(rank, hit, tty=tty))
    return 0


def over_budget_note(budget: int | None, hits: list[Any]) -> None:
    """Say on stderr when the answer holds more tokens than ``--budget-tokens``: a search returns at least
    one result, and the best one alone may be larger than a small budget."""
    tokens = sum(h.token_count for h in hits)
    if budget is not None and tokens > budget:
        print(f"hseg query: note: the best result alone ({tokens} tokens) is larger than --budget-tokens {budget}; "
              "a search returns at least one result, whole (its smallest unit is a segment)", file=sys.stderr)


def stored_source(store: Any, given: str, anchor: Path | None) -> str:
    """The ``source`` value ``--source`` means: as given when records carry it, else the path as
    ``hseg index`` records it (relative to ``anchor``, see :func:`hseg.ingest.files.doc_id_for`);
    a ``CliError`` naming sources that end like it when neither is stored."""
    from hseg.chunking.schema import CLUSTER, level_is
    from hseg.ingest.files import doc_id_for

    for candidate in dict.fromkeys([given, doc_id_for(given, anchor)]):
        if store.count({"source": candidate}):
            return candidate
    name = Path(given).name
    alike = sorted({str(m["source"]) for _, m in store.iter_metadatas(level_is(CLUSTER))
                    if str(m.get("source", "")).endswith(name)})[:5]
    hint = f"; sources ending in {name!r}: {', '.join(alike)}" if alike else \
        "; 'hseg stats' counts the documents, and a source is a path relative to the folder that holds --db"
    raise CliError(f"no document has source {given!r}{hint}")


def format_hit(rank: int, hit: Any, *, tty: bool = False) -> str:
    """A hit as a header line and its text, indented, with the matched segment marked."""
    source = hit.metadata.get("source", hit.doc_id)
    what = "cluster" if hit.unit == "cluster" else f"passage of {len(hit.segment_ids)} segment(s)"
    if hit.matched_level == "segment":
        matched = f"matched segment {hit.matched_start}-{hit.matched_end}"
    else:
        matched = "matched the cluster vector"
    from hseg.text.provenance import cite_pages  # here: the command's start imports no text module

    # a paged document's hit cites its pages beside the source: "handbook.pdf p. 12–13"
    pages = f" {cite_pages(hit.pages)}" if getattr(hit, "pages", None) else ""
    header = (f"#{rank}  score {hit.score:.4f}  {source}{pages}  chars {hit.start}-{hit.end}  "
              f"({what}, {hit.token_count} tokens; {matched})")
    text = hit.text
    if hit.matched_level == "segment" and hit.start <= hit.matched_start < hit.matched_end <= hit.end:
        a, b = hit.matched_start - hit.start, hit.matched_end - hit.start
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            on, off = (_BOLD_UNDERLINE, _RESET) if tty else (">>> ", " <<<")
            text = text[:a] + on + text[a:b] + off + text[b:]
    body = "\n".join("    " + line if line.strip() else "" for line in text.strip("\n").splitlines())
    return f"{header}\n{body}\n"


# --------------------------------------------------------------------------- stats


def run_stats(args: argparse.Namespace) -> int:
    check_location(args)
    store = existing_store(args)
    with server_errors(args):
        stats = store.stats()
    stats["location"] = location_label(args)
    if args.json:
        print(json.dumps(stats, indent=1))
        return 0
    fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    print(f"collection {stats['collection']!r} at {stats['location']}")
    print(f"encoder    {stats['encoder'] or '(not recorded)'}")
    print(f"documents  {stats['documents']}" + (f"  (last indexed {stats['last_indexed']})"
                                                if stats.get("last_indexed") else ""))
    print(f"clusters   {stats['clusters']}  (mean {fmt(stats['mean_cluster_tokens'])} tokens)")
    print(f"segments   {stats['segments']}  (mean {fmt(stats['mean_segment_tokens'])} tokens)")
    print(f"vectors    {stats['vectors']}" + (f"  (+{stats['other_records']} records of other writers)"
                                              if stats["other_records"] else ""))
    lost, lost_units = stats["records_without_vectors"], stats["unit_records_without_vectors"] or 0
    if lost or lost_units:
        print(f"NO VECTOR  {lost} records and {lost_units} unit-index records (metadata only: no search finds them; "
              "two processes wrote this store at once)")
    if stats["documents_incomplete"]:
        print(f"complete   {stats['documents_complete']} documents; {stats['documents_incomplete']} INCOMPLETE: "
              + "; ".join(incomplete_parts(stats, location_options(args))))
    else:
        print(f"complete   all {stats['documents_complete']} documents")
    if stats["unit_index_segments"] is not None:
        print(f"unit index {stats['unit_index_segments']} of {stats['segments_total']} segments")
    lexical = stats.get("lexical_index")
    if lexical is not None and lexical.get("problem"):
        print(f"lexical    UNAVAILABLE ({lexical['problem']}): searches rank by the dense side alone")
    elif lexical is not None:
        print(f"lexical    {lexical['segments']} of {stats['segments']} segments ({lexical['kind']}"
              + (f", {lexical['path']})" if lexical["path"] else ")"))
    return 0


def incomplete_parts(stats: dict[str, Any], location: str) -> list[str]:
    """Each kind of incomplete document ``stats`` counts, with its remedy: documents of files (``hseg
    index``), and of other writers those lacking unit-index rows alone (``hseg repair``, from their
    records) or records and vectors (their source)."""
    from_files, unit_only = stats["documents_incomplete_from_files"], stats["documents_unit_rows_only"]
    without_path = stats["documents_incomplete_without_path"]
    parts = []
    if from_files:
        parts.append(f"{from_files} of files (an interrupted or failed write, or lost vectors): re-run 'hseg index' "
                     "on their paths")
    if unit_only:
        parts.append(f"{unit_only} lack only unit-index or lexical rows (written around hseg, e.g. by a LlamaIndex "
                     f"IngestionPipeline into a ChromaVectorStore): run 'hseg repair {location}'")
    mixed = stats.get("documents_mixed_versions", 0)
    if mixed:
        names = ", ".join(repr(d) for d in stats.get("mixed_documents", [])[:3])
        parts.append(f"{mixed} hold records of two versions of their text ({names}; written again around hseg "
                     "from an edited text, e.g. a ChromaVectorStore pipeline re-run): searches answer from both; "
                     "add them again from their source through hseg (HierarchicalSegmentVectorStore, store.add), "
                     "which replaces the old version")
    if without_path:
        parts.append(f"{without_path} miss records or vectors and came from no file (another writer): add them "
                     "again from their source")
    return parts
