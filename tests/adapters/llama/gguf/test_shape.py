"""The target's shape read off a log's load lines, and the MTP head's share of a forward
it gives: one layer and the head over the target's layers and the head."""

import pytest

from adapters.llama.gguf.shape import ModelShape, model_shape
from adapters.llama.log.facts import ServerInfo
from adapters.llama.log.sources import read_log
from tests.adapters.llama.log.test_reader import FIXTURES

BUILD = FIXTURES / "builds" / "0.3.36"


def test_the_load_lines_give_the_targets_shape() -> None:
    shape = model_shape(read_log(BUILD / "ngram-mod.log.gz").server)
    # print_info: n_layer = 8, n_embd = 128, n_vocab = 259, model params = 2.00 M;
    # qwen35.nextn_predict_layers = 1
    assert shape == ModelShape(n_layer=8, nextn_layers=1, n_embd=128, n_vocab=259,
                               params=2.0e6)


def test_the_mtp_share_is_one_layer_and_the_head_over_the_forward() -> None:
    shape = ModelShape(n_layer=8, nextn_layers=1, n_embd=100, n_vocab=1000, params=2.0e6)
    layer = (2.0e6 - 2 * 1000 * 100) / 9
    assert shape.layer_params == pytest.approx(layer)
    assert shape.mtp_share() == pytest.approx((layer + 1e5) / (8 * layer + 1e5))
    assert shape.describe().startswith("from the model's shape: 1 of 8 layers + the head")


def test_no_shape_without_its_lines_or_without_an_mtp_layer() -> None:
    assert model_shape(ServerInfo()) is None
    assert model_shape(ServerInfo(n_layer=8, nextn_layers=0, n_embd=128, n_vocab=259,
                                  model_params="2.00 M")) is None
