"""``hseg index --ray`` and hseg.ingest.ray where no Ray runs: the arguments refused before Ray is needed,
how the command starts a local Ray or joins a cluster, what the workers get, and the message when Ray
is not installed. The Ray runs are ``tests/e2e/test_distributed.py``.
"""

from __future__ import annotations

import os
import sys

import pytest

from hseg import ingest
from hseg.chunking.chunker import HierarchicalChunker
from hseg.cli import main
from hseg.encoders import factory
from hseg_testing.fakes import HashingEncoder
from tests.support import REPO
from tests.support.ray_scenarios import TIDES


def test_bad_arguments_are_refused_before_ray_is_needed():
    from hseg.ingest.ray import index_dataset

    where = {"host": "127.0.0.1", "port": 8000}
    for bad in ({"num_workers": 0}, {"batch_docs": 0}, {"num_gpus": -1}, {"num_cpus": 0}, {"threads": 0},
                {"host": ""}, {"target_tokens": -5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            index_dataset(None, **{**where, **bad})
    with pytest.raises(ValueError, match="unknown chunker settings"):
        index_dataset(None, **where, target_token=256)


class _FakeRay:
    """Records what the command asks of ``ray``."""

    def __init__(self, initialized: bool) -> None:
        self.initialized = initialized
        self.calls: list[dict] = []

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **kwargs) -> None:
        self.calls.append(kwargs)


def test_the_cli_starts_a_local_ray_or_joins_a_cluster():
    import argparse

    from hseg.cli.index_ray import _connect

    def args(ray, workers=None, quiet=False):
        return argparse.Namespace(ray=ray, workers=workers, quiet=quiet)

    local = _FakeRay(initialized=False)
    assert _connect(local, args("local", workers=64)) is True  # started here: the command shuts it down
    assert local.calls == [{"num_cpus": 64, "include_dashboard": False}]
    local = _FakeRay(initialized=False)
    assert _connect(local, args("local")) is True
    assert local.calls == [{"num_cpus": os.cpu_count(), "include_dashboard": False}]
    cluster = _FakeRay(initialized=False)
    assert _connect(cluster, args("ray://head:10001", quiet=True)) is True
    assert cluster.calls == [{"address": "ray://head:10001", "logging_level": 40, "log_to_driver": False}]
    connected = _FakeRay(initialized=True)
    assert _connect(connected, args("auto")) is False and connected.calls == []


def test_workers_get_a_weights_file_segmenter_loaded_and_a_named_one_by_name(tmp_path):
    import shutil

    from hseg.cli.index_ray import _worker_config

    weights = tmp_path / "mine.pt"  # a file only this machine has
    shutil.copy(REPO / "hseg" / "models" / "bilstm_segmenter.pt", weights)
    for spec in (str(weights), "texttiling"):
        chunker = HierarchicalChunker(encoder=factory.LazyEncoder(), segmenter=spec)
        config = _worker_config(chunker, None)
        assert config.encoder is None  # a name: each worker loads the model, this process never does
        assert (config.segmenter is chunker.segmenter) == (spec != "texttiling")
        worker = HierarchicalChunker(config.replace(encoder=factory.LazyEncoder()))
        assert ingest.chunk_settings(worker) == ingest.chunk_settings(chunker)


def test_ray_without_a_server_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text(TIDES, encoding="utf-8")
    for argv in (["index", "a.md", "--db", "db", "--ray"], ["index", "a.md", "--ray", "--db", "db"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "--ray needs --host" in err and "embedded --db" in err
    with pytest.raises(SystemExit) as exc:  # a PATH taken for the address
        main(["index", "--ray", "a.md", "--host", "127.0.0.1"])
    assert exc.value.code == 2 and "argument --ray: 'a.md' is not a Ray address" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["index", "a.md", "--db", "db", "--workers", "2"])
    assert exc.value.code == 2 and "--workers and --num-gpus go with --ray" in capsys.readouterr().err
    assert not (tmp_path / "db").exists()


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch):
    from hseg.ingest import ray as distributed

    monkeypatch.setitem(sys.modules, "ray", None)  # what an absent package looks like to import
    with pytest.raises(ImportError, match=r'pip install -e "\.\[ray\]" in the hseg clone'):
        distributed.import_ray()
    with pytest.raises(ImportError, match=r'pip install -e "\.\[ray\]" in the hseg clone'):
        distributed.index_dataset(object(), host="127.0.0.1", encoder=HashingEncoder(), segmenter="texttiling")
