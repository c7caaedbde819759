"""``--checkpoint-activations`` gives the gradients of training without it,
for every learned arch and every penalty (issue 18, point 5: fairseq runs a
checkpointed layer's forward under ``torch.no_grad``, so a penalty computed
from that pass's attention records, the AAA hinge or ``--dam-l1 density``,
silently loses its gradient).  The loss is the real criterion's: task loss
plus every penalty, with nonzero weights."""

import pytest
import torch

from helpers.precision import PenaltySpy, one_thread, setup  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

MIXED = "[dam-u,dam-s,aaa,global:gate,band-1,prev-1@t,next-1@t,global]*2"
CASES = [
    ("transformer_dam_u", {}, {}),
    ("transformer_dam_u", {"dam_l1": "density"}, {"dam_lambda": 0.5}),
    ("transformer_dam_s", {}, {}),
    ("transformer_dam_s", {"dam_l1": "density"}, {"dam_lambda": 0.5}),
    ("transformer_aaa", {}, {}),
    ("transformer_head_gates", {}, {}),
    ("transformer_local", {"attn_layout": MIXED, "encoder_layers": 2}, {}),
    ("transformer_local", {"attn_layout": MIXED, "encoder_layers": 2, "dam_l1": "density", "mask_mode": "pre"},
     {"dam_lambda": 0.5}),
    ("roberta_dam_s", {"dam_l1": "density"}, {"dam_lambda": 0.5}),
    ("roberta_aaa", {}, {}),
]
IDS = ["dam_u", "dam_u-density", "dam_s", "dam_s-density", "aaa", "head_gates", "mixed", "mixed-density-pre",
       "roberta_dam_s-density", "roberta_aaa"]


def gradients(arch, overrides, criterion, checkpoint, state=None):
    # dropout on: the recomputed forward must redraw the same masks and noise
    model, crit, sample = setup(arch, dict(overrides, checkpoint_activations=checkpoint, dropout=0.1,
                                           attention_dropout=0.1), **criterion)
    if state is not None:
        model.load_state_dict(state)
    spy = PenaltySpy(crit)
    model.train()
    model.set_num_updates(3)
    torch.manual_seed(7)
    loss, sample_size, _ = crit(model, sample)
    penalties = {name: bool(t.requires_grad) for name, t in spy.tensors().items()}
    loss.backward()
    grads = {n: p.grad.clone() if p.grad is not None else torch.zeros_like(p) for n, p in model.named_parameters()}
    return model.state_dict(), float(loss), penalties, grads


@pytest.mark.parametrize("arch, overrides, criterion", CASES, ids=IDS)
def test_checkpointed_gradients_equal_plain_ones(arch, overrides, criterion):
    state, loss, penalties, plain = gradients(arch, overrides, criterion, checkpoint=False)
    _, ckpt_loss, ckpt_penalties, ckpt = gradients(arch, overrides, criterion, checkpoint=True, state=state)
    assert penalties and all(penalties.values()), penalties  # every penalty has a gradient without checkpointing
    assert ckpt_penalties == penalties, "penalties that lose their gradient under checkpointing"
    assert ckpt_loss == pytest.approx(loss, rel=1e-6, abs=1e-6)
    assert plain.keys() == ckpt.keys()
    differ = []
    for name, g in plain.items():
        # 1e-5 of the tensor's scale (about 80 fp32 roundings): a mask shared by six layers sums their
        # gradients in another order, and LayerNorm gains sum over every token; a lost term is of order 1
        if float((ckpt[name] - g).abs().max()) > 1e-5 * max(1.0, float(g.abs().max())):
            differ.append(f"{name}: max |diff| {float((ckpt[name] - g).abs().max()):.3g}, "
                          f"max |grad| {float(g.abs().max()):.3g}")
    assert not differ, "\n".join(differ)
