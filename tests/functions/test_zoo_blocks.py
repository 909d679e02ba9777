"""The zoo's models as blocks: each composes to the model and the blocks hold all its
parameters; GPT-2 large's layout counted from its shapes, its twin built and trained."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from functions import datasets, models, zoo
from functions.blocks import block_names, check_blocks_compose, model_blocks
from functions.model_spec import ModelError

TINY = "functions/zoo.py:build_gpt2_tiny"
TINY_INPUT, TINY_VOCAB = (16,), 97
ZOO_MODELS = [
    ("mlp", (1, 8, 8), 10),
    ("cnn", (3, 32, 32), 10),
    ("resnet18", (3, 32, 32), 10),
    ("mobilenetv2", (3, 32, 32), 10),
    (TINY, TINY_INPUT, TINY_VOCAB),
]


@pytest.mark.parametrize(("spec", "shape", "classes"), ZOO_MODELS)
def test_each_zoo_model_is_its_blocks(spec: str, shape: tuple[int, ...], classes: int) -> None:
    model = models.build(spec, shape, classes, seed=0)
    check_blocks_compose(model, shape)
    held = [id(p) for block in model_blocks(model) for p in block.parameters()]
    assert sorted(held) == sorted(id(p) for p in model.parameters())
    assert len(held) == len(set(held))  # no parameter in two blocks


def test_the_image_models_are_cut_at_their_stem_residual_blocks_and_head() -> None:
    resnet = models.build("resnet18", (3, 32, 32), 10, seed=0)
    assert len(block_names(resnet)) == 1 + 8 + 1
    assert block_names(resnet)[1] == "1:_BasicBlock"
    mobilenet = models.build("mobilenetv2", (3, 32, 32), 10, seed=0)
    assert len(block_names(mobilenet)) == 1 + 17 + 1
    assert block_names(mobilenet)[-2] == "17:_InvertedResidual"


def test_gpt2_tiny_is_embedding_transformer_blocks_and_head() -> None:
    model = models.build(TINY, TINY_INPUT, TINY_VOCAB, seed=0)
    assert block_names(model) == [
        "0:Embeddings", "1:TransformerBlock", "2:TransformerBlock", "3:NextTokenHead",
    ]  # fmt: skip
    models.check_output(model, TINY, TINY_INPUT, TINY_VOCAB)
    assert models.parameter_count(model) == zoo.gpt2_parameter_count(zoo.GPT2_TINY, TINY_VOCAB)


def test_gpt2_attention_is_causal_and_predicts_from_the_last_position() -> None:
    model = models.build(TINY, TINY_INPUT, TINY_VOCAB, seed=0)
    ids = torch.randint(0, TINY_VOCAB, (1, 16)).float()
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % TINY_VOCAB
    hidden = nn.Sequential(*model_blocks(model)[:-1])
    with torch.no_grad():
        before, after = hidden(ids), hidden(changed)
    # a later token changes no earlier position's state, and does change the last one's
    assert torch.equal(before[:, :-1], after[:, :-1])
    assert not torch.allclose(before[:, -1], after[:, -1])


def test_gpt2_large_has_its_layout_counted_without_building_it() -> None:
    assert zoo.gpt2_parameter_count(zoo.GPT2_LARGE, 50_257) == 774_030_080 + 50_257 * 1280
    with torch.device("meta"):  # the real code path, no memory for the weights
        model = zoo.build_gpt2_large((zoo.GPT2_SEQUENCE,), 50_257)
    assert models.parameter_count(model) == 838_359_040
    assert len(model_blocks(model)) == 38


def test_gpt2_refuses_images_and_sequences_past_its_positions_in_one_line() -> None:
    with pytest.raises(ModelError, match=r"gpt2 needs token input \(sequence,\) of 1 to 256 "):
        models.build(TINY, (3, 32, 32), 10, seed=0)
    with pytest.raises(ModelError, match=r"got \(257,\)$"):
        models.build(TINY, (257,), 10, seed=0)


def test_synthetic_tokens_give_the_vocabulary_and_a_learnable_next_token() -> None:
    x, y, synthetic = datasets.load_source("synthetic-tokens:64", seed=3)
    assert synthetic and x.shape == (64, 256) and x.dtype.name == "float32"
    assert int(y.max()) + 1 == datasets.SYNTHETIC_TOKENS_VOCAB
    assert x.min() >= 0 and x.max() < datasets.SYNTHETIC_TOKENS_VOCAB
    again, _, _ = datasets.load_source("synthetic-tokens:64", seed=3)
    assert (x == again).all()


def test_a_tiny_gpt2_step_lowers_its_loss() -> None:
    torch.manual_seed(0)
    model = models.build(TINY, TINY_INPUT, TINY_VOCAB, seed=0)
    ids = torch.randint(0, TINY_VOCAB, (8, 16)).float()
    labels = torch.randint(0, TINY_VOCAB, (8,))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = models.loss_function(TINY)(model(ids), labels)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
