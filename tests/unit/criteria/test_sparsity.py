"""The sparsity mixin on a real model and criterion: the penalties, the task
loss as ``loss``, the weights of the penalties, rates as (sum, count) pairs."""

import math

import pytest
import torch

import fairseq_local  # noqa: F401
from fairseq import metrics
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
from helpers.criteria import translation_setup
from fairseq_local.criteria import LabelSmoothedCrossEntropyWithSparsity, SparsityLoss, SparsityLossConfig
from fairseq_local.criteria.penalized import mask_images

LAYOUT = "[aaa,dam-s,global:gate,band-1]*2"


def setup(**criterion):
    model, crit, task, sample = translation_setup(LAYOUT, **criterion)
    return model, crit, LabelSmoothedCrossEntropyCriterion(task, False, 0.1), sample


@pytest.mark.parametrize("training", [True, False])
def test_loss_is_the_task_loss_and_penalties_are_separate(training):
    model, crit, plain, sample = setup(dam_lambda=1e-3, aaa_alpha=2.0, aaa_target=0.95, gate_lambda=0.1)
    model.train(training)
    torch.manual_seed(1)
    total, size, log = crit(model, sample)
    torch.manual_seed(1)  # the same noise: the same forward pass
    task, _, task_log = plain(model, sample)
    torch.manual_seed(1)
    terms = model.get_sparsity_terms(model(**sample["net_input"]))
    assert size == 7 and float(log["loss"]) == pytest.approx(float(task_log["loss"]), rel=1e-5)
    penalties = {"dam_loss": 1e-3 * terms.penalties["dam"],
                 "aaa_loss": 2.0 * torch.relu(0.95 - terms.hinge_rho("aaa")), "gate_loss": 0.1 * terms.gate}
    for name, value in penalties.items():
        assert log[name] == pytest.approx(float(value) * 7, rel=1e-4), name
    assert float(total) == pytest.approx(float(task) + sum(log[n] for n in penalties), rel=1e-4)
    assert log["aaa_alpha_sum"] == 2.0 and log["aaa_alpha_count"] == 1.0


def test_rates_survive_summed_logging_outputs():
    """fairseq sums the logging outputs of micro-batches and workers into one
    before reduce_metrics: rates must come out as the rate, not a multiple."""
    model, crit, _, sample = setup(aaa_alpha=0.7, aaa_target=0.5)
    model.train()
    logs = [crit(model, sample)[2] for _ in range(4)]  # e.g. 2 workers x --update-freq 2
    summed = {k: sum(float(log.get(k, 0)) for log in logs) for k in logs[0]}
    for outputs in ([summed], logs):
        with metrics.aggregate() as agg:
            LabelSmoothedCrossEntropyWithSparsity.reduce_metrics(outputs)
        values = agg.get_smoothed_values()
        assert values["aaa_alpha"] == pytest.approx(0.7) and values["tau"] == pytest.approx(1.0)
        assert 0 <= values["gates_open"] <= 1 and 0 < values["rho"] < 1
        assert 0 < values["dam_density"] <= 1 and 0 <= values["aaa_rows"] <= 1
        assert values["loss"] == pytest.approx(summed["loss"] / summed["sample_size"] / math.log(2), rel=1e-3)


def test_aaa_alpha_linear_schedule():
    crit = SparsityLoss()
    crit.init_sparsity(SparsityLossConfig(aaa_alpha=4.0, aaa_alpha_updates=100))
    assert [crit.aaa_weight(n) for n in (0, 25, 100, 500)] == [0.0, 1.0, 4.0, 4.0]
    constant = SparsityLoss()
    constant.init_sparsity(SparsityLossConfig(aaa_alpha=4.0))
    assert constant.aaa_weight(0) == 4.0


@pytest.mark.parametrize("cfg", [dict(dam_lambda=-1.0), dict(aaa_target=1.5), dict(gate_lambda=-2.0)])
def test_bad_criterion_options(cfg):
    with pytest.raises(ValueError, match="--"):
        SparsityLoss().init_sparsity(SparsityLossConfig(**cfg))


def test_models_without_learned_heads_add_nothing():
    model, crit, plain, sample = setup()
    model.eval()
    _, _, log = crit(model, sample)
    assert not any(k in log for k in ("dam_loss", "aaa_loss", "gate_loss")) or log.get("dam_loss") == 0.0


def test_mask_images_one_per_shared_dam_head_and_aaa_layer():
    model, _, _, sample = setup()
    model.train()
    terms = model.get_sparsity_terms(model(**sample["net_input"]))
    images = mask_images(terms, 16)
    assert sorted(images) == ["masks/l1_aaa", "masks/l1_h2_dam-s_P", "masks/l2_aaa"]
    assert images["masks/l1_aaa"].shape == (128, 128)  # sentence 0's 4 real tokens, upscaled
    assert all(img.dim() == 2 and 0 <= img.min() and img.max() <= 1 for img in images.values())
