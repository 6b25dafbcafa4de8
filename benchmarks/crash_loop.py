"""Kill ``hseg index`` with SIGKILL at random moments and check the store it leaves behind.

    python -m benchmarks.crash_loop --kills 25

Each round writes 60 small files to a temporary folder, starts ``hseg index docs --db db
--batch-docs 8`` (the hashing test encoder, TextTiling: the same child script as
``tests/stress/test_faults_kill_9.py``), waits until its first write begins, sleeps a random 0-0.6 s and
sends SIGKILL. The database as the crash left it is copied and every document in it is checked
for completeness (``hseg_testing.checks.document_problems``). Exits 1 if any document was
incomplete.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    import chromadb

    from hseg_testing import REPO
    from hseg_testing.checks import document_problems, stored_documents
    from hseg_testing.fakes import CLI_CHILD as CHILD
    from hseg_testing.fakes import FAKE_CLI, synthetic_book

    rnd = random.Random(args.seed)
    files = {f"docs/f{i:03d}.md": synthetic_book(1_500 + 37 * i, seed=i) for i in range(60)}
    present, incomplete = [], 0
    for round_ in range(args.kills):
        tmp = Path(tempfile.mkdtemp(prefix="hseg-crash-"))
        try:
            for name, text in files.items():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp / name).write_text(text, encoding="utf-8")
            (tmp / "child.py").write_text(CHILD.format(repo=str(REPO)))
            proc = subprocess.Popen(
                [sys.executable, str(tmp / "child.py"), "index", "docs", "--db", "db", "--batch-docs", "8", *FAKE_CLI],
                cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )
            assert proc.stdout is not None  # stdout=PIPE
            proc.stdout.readline()  # the first write begins
            time.sleep(rnd.uniform(0, 0.6))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
            if not (tmp / "db").exists():
                present.append(0)
                continue
            shutil.copytree(tmp / "db", tmp / "crashed")
            client = chromadb.PersistentClient(path=str(tmp / "crashed"))
            try:
                docs = stored_documents(client.get_collection("hseg"))
            except Exception:  # killed before the collection was created
                docs = {}
            bad = [d for d, recs in docs.items() if document_problems(recs, files[d])]
            present.append(len(docs))
            incomplete += len(bad)
            print(f"kill {round_ + 1}: {len(docs)} documents present, {len(bad)} incomplete", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.kills} kills; documents present after each: {sorted(set(present))}; "
          f"incomplete documents: {incomplete}")
    return 1 if incomplete else 0


if __name__ == "__main__":
    sys.exit(main())
