"""Media projectors: both ends declared, features checked on the way in, trainability before step 0."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tokembed.errors import HandoffError, UsageError
from tokembed.inputs.kinds import Kind, Representation, declare, representation_of
from tokembed.inputs.media_projector import (
    MediaProjector,
    ProjectorContract,
    Trainability,
    check_trainability,
)
from tokembed.inputs.rows import MediaRows, RowType

# LLaVA-1.5's interface: CLIP ViT-L/14-336 penultimate layer (1024 wide) into Vicuna-7B (4096).
CLIP = Representation(kind=Kind.CONTEXTUAL, model="clip-vit-large-patch14-336", layer=23)
LLAVA = ProjectorContract(
    source=CLIP,
    d_media=1024,
    target="vicuna-7b-v1.5",
    d_model=4096,
    trainability=Trainability.TRAINED,
)


def _features(rep: Representation, b: int = 1, n: int = 3, d: int = 1024) -> MediaRows:
    return MediaRows(rows=declare(torch.rand(b, n, d) + 0.5, rep), row_type=RowType.IMAGE)


def _tiny_vit_patches() -> tuple[MediaRows, Representation]:
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(
        hidden_size=12,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        image_size=8,
        patch_size=4,
        num_channels=3,
    )
    with torch.no_grad():
        out = ViTModel(config).eval()(torch.rand(2, 3, 8, 8), output_hidden_states=True)
    rep = Representation(kind=Kind.CONTEXTUAL, model="tiny-vit", layer=2)
    patches = declare(out.hidden_states[2][:, 1:], rep)  # drop CLS: [2, 4, 12], a 2x2 grid
    grid = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]).expand(2, 4, 2)
    return MediaRows(rows=patches, row_type=RowType.IMAGE, geometry=grid), rep


def test_linear_projector_on_a_real_encoder_output() -> None:
    media, vit = _tiny_vit_patches()
    contract = ProjectorContract(
        source=vit, d_media=12, target="tiny-lm", d_model=8, trainability=Trainability.TRAINED
    )
    proj = MediaProjector(contract)
    out = proj(media)
    assert out.rows.shape == (2, 4, 8)
    lin = proj.proj
    assert isinstance(lin, nn.Linear)
    torch.testing.assert_close(out.rows, media.rows @ lin.weight.T + lin.bias, rtol=0, atol=0)
    assert representation_of(out.rows) == Representation(
        kind=Kind.PROJECTED_MEDIA, model="tiny-lm", encoder="contextual model=tiny-vit layer=2"
    )
    assert out.geometry is media.geometry
    assert out.row_type is RowType.IMAGE
    contract.check_target(model="tiny-lm", d_model=8)


def test_mlp_projector_is_linear_gelu_linear() -> None:
    media, vit = _tiny_vit_patches()
    contract = ProjectorContract(
        source=vit, d_media=12, target="tiny-lm", d_model=8, trainability=Trainability.FROZEN
    )
    proj = MediaProjector(contract, hidden=16)
    first, act, second = proj.proj  # type: ignore[misc]
    expected = second(act(first(media.rows)))
    assert torch.equal(proj(media).rows, expected)
    assert not any(p.requires_grad for p in proj.parameters())


@pytest.mark.failure_lab("8.1")
def test_d_media_mistaken_for_d_model() -> None:
    """Mistaking d_media for d_model.

    A contract built with the encoder's 1024 as the model width is refused by a
    4096-wide model, and model-width rows fed back in are refused by width (with the
    specific code, before FeatureProjector's generic SHAPE_MISMATCH).
    """
    wrong = ProjectorContract(
        source=CLIP,
        d_media=1024,
        target="vicuna-7b-v1.5",
        d_model=1024,
        trainability=Trainability.TRAINED,
    )
    with pytest.raises(HandoffError) as e:
        wrong.check_target(model="vicuna-7b-v1.5", d_model=4096)
    assert e.value.code == "PROJECTOR_WIDTH_MISMATCH"
    assert e.value.value == (1024, 4096)
    assert "(that is d_media)" in e.value.message
    with pytest.raises(HandoffError) as e:
        MediaProjector(LLAVA)(_features(CLIP, d=4096))
    assert e.value.code == "PROJECTOR_WIDTH_MISMATCH"
    assert e.value.value == 4096
    assert "already projected?" in e.value.message


@pytest.mark.failure_lab("8.2")
def test_right_width_wrong_semantic_space() -> None:
    """Projector maps to the correct width but wrong semantic space.

    Vicuna-7B and Llama-2-7B are both 4096 wide; a connector aligned to one does not
    feed the other.
    """
    with pytest.raises(HandoffError) as e:
        LLAVA.check_target(model="llama-2-7b", d_model=4096)
    assert e.value.code == "PROJECTOR_SPACE_MISMATCH"
    assert e.value.value == ("vicuna-7b-v1.5", "llama-2-7b")


@pytest.mark.failure_lab("8.3")
def test_projector_from_another_encoder() -> None:
    """Projector trained for one encoder is used with another encoder.

    DINOv2-L features are also 1024 wide; another layer of the same CLIP is another
    feature distribution too; undeclared features cannot be vouched for.
    """
    dino = Representation(kind=Kind.CONTEXTUAL, model="dinov2-large", layer=24)
    proj = MediaProjector(LLAVA)
    with pytest.raises(HandoffError) as e:
        proj(_features(dino))
    assert e.value.code == "PROJECTOR_ENCODER_MISMATCH"
    assert e.value.value == ["model", "layer"]
    last_layer = Representation(kind=Kind.CONTEXTUAL, model=CLIP.model, layer=24)
    with pytest.raises(HandoffError) as e:
        proj(_features(last_layer))
    assert e.value.value == ["layer"]
    with pytest.raises(HandoffError) as e:
        proj(MediaRows(rows=torch.rand(1, 3, 1024) + 0.5, row_type=RowType.IMAGE))
    assert e.value.code == "PROJECTOR_ENCODER_MISMATCH"
    assert proj(_features(CLIP)).rows.shape == (1, 3, 4096)


def _small(trainability: Trainability) -> MediaProjector:
    contract = ProjectorContract(
        source=CLIP, d_media=6, target="tiny-lm", d_model=4, trainability=trainability
    )
    return MediaProjector(contract)


@pytest.mark.failure_lab("8.4")
def test_trainability_contrary_to_the_setup() -> None:
    """Projector frozen or trained contrary to the setup.

    LLaVA's first stage trains the connector alone; a frozen connector, or one left
    out of the optimizer, silently reproduces another set-up. A connector declared
    frozen but handed to the optimizer is the opposite mistake.
    """
    lm = nn.Linear(4, 4)
    trained = _small(Trainability.TRAINED)
    check_trainability(trained, trained.contract, optimizer=torch.optim.AdamW(trained.parameters()))
    stepped = torch.optim.AdamW(trained.parameters())
    trained.requires_grad_(False)  # stepped by the optimizer, but frozen by requires_grad
    with pytest.raises(HandoffError) as e:
        check_trainability(trained, trained.contract, optimizer=stepped)
    assert e.value.code == "PROJECTOR_TRAINABILITY_MISMATCH"
    assert e.value.value == "proj.weight"
    assert "requires_grad=False" in e.value.message
    trained.requires_grad_(True)
    with pytest.raises(HandoffError) as e:  # the optimizer only holds the language model
        check_trainability(trained, trained.contract, optimizer=torch.optim.AdamW(lm.parameters()))
    assert e.value.code == "PROJECTOR_TRAINABILITY_MISMATCH"
    assert "not stepped" in e.value.message
    zero_lr = torch.optim.SGD(trained.parameters(), lr=0.0)
    with pytest.raises(HandoffError) as e:
        check_trainability(trained, trained.contract, optimizer=zero_lr)
    assert e.value.code == "PROJECTOR_TRAINABILITY_MISMATCH"

    frozen = _small(Trainability.FROZEN)
    check_trainability(frozen, frozen.contract, optimizer=torch.optim.AdamW(lm.parameters()))
    check_trainability(frozen, frozen.contract, optimizer=None)
    groups = [{"params": lm.parameters()}, {"params": frozen.parameters(), "lr": 1e-4}]
    with pytest.raises(HandoffError) as e:
        check_trainability(frozen, frozen.contract, optimizer=torch.optim.AdamW(groups))
    assert e.value.code == "PROJECTOR_TRAINABILITY_MISMATCH"
    assert "in an optimizer group with lr > 0" in e.value.message


def test_frozen_contract_freezes_and_training_moves_only_declared_parameters() -> None:
    frozen = _small(Trainability.FROZEN)
    before = [p.detach().clone() for p in frozen.parameters()]
    lm = nn.Linear(4, 4)
    opt = torch.optim.AdamW(lm.parameters(), lr=0.1)
    check_trainability(frozen, frozen.contract, optimizer=opt)
    lm(frozen(_features(CLIP, d=6)).rows).sum().backward()
    opt.step()
    assert all(torch.equal(a, b) for a, b in zip(before, frozen.parameters(), strict=True))
    assert all(p.grad is None for p in frozen.parameters())


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"d_media": 0}, "width"),
        ({"target": ""}, "target"),
        ({"source": Representation(kind=Kind.LOOKUP, model="gpt2")}, "source kind"),
    ],
)
def test_contract_validation(fields: dict[str, object], why: str) -> None:
    base: dict[str, object] = {
        "source": CLIP,
        "d_media": 6,
        "target": "m",
        "d_model": 4,
        "trainability": Trainability.TRAINED,
    }
    with pytest.raises(UsageError) as e:
        ProjectorContract(**(base | fields))  # type: ignore[arg-type]
    assert e.value.code == "INVALID_ARGUMENT", why
