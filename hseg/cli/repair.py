"""``hseg repair``: give a store's documents back what their own records hold, for a store written
around hseg's writers (a LlamaIndex ``IngestionPipeline`` into a ``ChromaVectorStore`` writes records
but no unit-index rows, and its documents have no paths for ``hseg index`` to re-run on).

Example::

    hseg repair --db ./chroma-db

Each document whose records are whole (they tile its text, each with its vector) but whose unit-index
rows are missing or out of step gets them built from its records (``store.sync_unit_index``), and its
lexical rows too. A document that misses records or vectors cannot be made whole from the store: the
command names how many, and exits 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from hseg.cli.chroma import add_location, check_location, existing_store, location_label, server_errors


def register(sub: Any) -> None:
    p = sub.add_parser(
        "repair",
        help="build missing unit-index and lexical rows from a store's records (e.g. after a LlamaIndex pipeline)",
        description="Build the unit-index and lexical rows of every document whose records are whole but "
                    "whose rows are missing or out of step: what a LlamaIndex IngestionPipeline into a "
                    "ChromaVectorStore leaves. Loads no model. Documents that miss records or vectors, or hold "
                    "records of two versions of their text, are named, not repaired (add them again from "
                    "their source, or re-run 'hseg index' on their paths); the exit code is then 1.",
        epilog="Example: hseg repair --db ./chroma-db",
    )
    add_location(p, db_help="directory of the embedded Chroma database")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run_repair)


def run_repair(args: argparse.Namespace) -> int:
    check_location(args)
    store = existing_store(args)  # no encoder: the records' vectors are used
    with server_errors(args):
        done = store.maintenance.repair()
    repair, rows, lost, mixed = done.repaired, done.rows, done.lost, done.mixed
    where = f"collection {args.collection!r} at {location_label(args)}"
    if repair:
        print(f"repaired   {len(repair)} documents of {where}: {rows} unit-index rows and their lexical rows built "
              "from their records")
    if mixed:
        print(f"left       {len(mixed)} documents hold records of two versions of their text "
              f"({', '.join(mixed[:3])}{', ...' if len(mixed) > 3 else ''}; written again around hseg from an edited "
              "text), and only their source says which is current: add them again from it through hseg "
              "(HierarchicalSegmentVectorStore, store.add), which replaces the old version")
    if lost:
        print(f"left       {len(lost)} documents miss records or vectors, which the store cannot give back "
              f"({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''}): re-run 'hseg index' on their paths, "
              "or add them again from their source")
    if not repair and not lost and not mixed:
        print(f"nothing to repair: all {done.documents} documents of {where} are complete")
    return 1 if lost or mixed else 0
