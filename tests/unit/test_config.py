"""One declaration of the chunker settings: core, LangChain, LlamaIndex and the CLI agree on it."""

from __future__ import annotations

import argparse

import pytest

from hseg.chunking.chunker import HierarchicalChunker
from hseg.chunking.config import ChunkerConfig
from hseg.cli.options import add_chunker_options, chunk_option_docs
from hseg_testing.chunkers import hashing_chunker
from hseg_testing.fakes import HashingEncoder
from tests.support import REPO


def test_the_adapters_take_exactly_the_core_settings_with_the_same_defaults():
    from langchain_hseg import HierarchicalSegmentTextSplitter
    from llama_index_hseg import HierarchicalSegmentNodeParser

    defaults = ChunkerConfig.defaults()
    assert HierarchicalSegmentTextSplitter().config == ChunkerConfig()
    parser_fields = HierarchicalSegmentNodeParser.model_fields
    for name, default in defaults.items():
        if name == "encoder":  # the parser keeps a serialisable encoder_name beside the object
            assert parser_fields["encoder"].default is None
            continue
        assert parser_fields[name].default == default, name
        assert parser_fields[name].description == ChunkerConfig.docs()[name]
    settings = dict(target_tokens=256, min_segment_tokens=32, segment_vector="encode", batch_size=8)
    assert HierarchicalSegmentTextSplitter(**settings).config == ChunkerConfig(**settings)
    cfg = HierarchicalSegmentNodeParser(**settings).chunker_config
    assert cfg.replace(encoder=None) == ChunkerConfig(**settings)


def test_the_cli_options_default_to_the_core_settings():
    parser = argparse.ArgumentParser()
    add_chunker_options(parser)
    args = parser.parse_args([])
    defaults = ChunkerConfig.defaults()
    for name in ("target_tokens", "k", "max_cluster_tokens", "segmenter"):
        assert getattr(args, name) == defaults[name], name
    shown = " ".join(parser.format_help().split())
    assert all(chunk_option_docs()[name] in shown for name in ("target_tokens", "k", "max_cluster_tokens"))


@pytest.mark.parametrize(("settings", "message"), [
    ({"k": 1.0, "target_tokens": 256}, "not both"),
    ({"target_tokens": 0}, "target_tokens"),
    ({"max_segment_tokens": 300, "max_cluster_tokens": 200}, "max_cluster_tokens"),
    ({"segment_vector": "max"}, "segment_vector"),
    ({"segmenter": "bogus"}, "segmenter"),
    ({"batch_size": 0}, "batch_size"),
    ({"backend": "tensorflow"}, "backend must be one of"),
])
def test_every_entry_point_refuses_bad_settings_with_the_same_message(settings, message):
    from langchain_hseg import HierarchicalSegmentTextSplitter
    from llama_index_hseg import HierarchicalSegmentNodeParser

    for build in (ChunkerConfig, HierarchicalSegmentTextSplitter, HierarchicalSegmentNodeParser,
                  lambda **kw: hashing_chunker(dim=8, **kw)):
        with pytest.raises(ValueError, match=message):
            build(**settings)


def test_a_config_drives_the_chunker_and_describes_it():
    cfg = ChunkerConfig(encoder=HashingEncoder(8), segmenter="texttiling", target_tokens=256)
    chunker = HierarchicalChunker(cfg)
    assert chunker.config is cfg and chunker.max_segment_tokens == 128 and chunker.max_cluster_tokens == 384
    described = cfg.to_dict(runtime=False)
    assert described["encoder"] == HashingEncoder.name and "batch_size" not in described
    assert HierarchicalChunker(cfg, target_tokens=512).max_cluster_tokens == 768  # keywords replace fields
    with pytest.raises(ValueError, match="unknown chunker settings"):
        HierarchicalChunker(targets=3)


def test_the_api_reference_shows_the_declared_settings():

    api = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    assert ChunkerConfig.table() in api, "docs/api.md's settings table is stale: paste ChunkerConfig.table()"
