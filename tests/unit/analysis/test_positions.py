"""Attention/contribution correlations and relative-position histograms (Pascual et al. §6-9)."""

import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import stats

from fairseq_local.analysis.positions import PositionStats, hta_table, row_correlations
from fairseq_local.analysis.relations import RecordError


def rows(x):
    """Row-normalised positive random maps."""
    return x / x.sum(-1, keepdim=True)


def test_correlations_equal_scipys_and_are_nan_on_constant_rows():
    gen = torch.Generator().manual_seed(0)
    a = rows(torch.rand(2, 3, 6, 6, generator=gen))
    c = rows(torch.rand(2, 3, 6, 6, generator=gen))
    c[1, 2, 4] = torch.tensor([0.5, 0.5, 0.0, 0.0, 0.0, 0.0])  # ties for the ranks
    a[0, 1, 3] = 1 / 6  # a constant (uniform) row
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pearson, spearman = row_correlations(a, c)
    assert pearson.shape == spearman.shape == (2, 3, 6)
    for l, h, j in np.ndindex(2, 3, 6):
        if (l, h, j) == (0, 1, 3):
            continue
        x, y = a[l, h, j].double().numpy(), c[l, h, j].double().numpy()
        assert pearson[l, h, j] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
        assert spearman[l, h, j] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert np.isnan(pearson[0, 1, 3]) and np.isnan(spearman[0, 1, 3])
    assert np.isnan(pearson).sum() == 1


def test_head_means_skip_undefined_rows():
    gen = torch.Generator().manual_seed(1)
    a = rows(torch.rand(1, 2, 5, 5, generator=gen))
    c = rows(torch.rand(1, 2, 5, 5, generator=gen))
    a[0, 0, 2] = 0.2
    stats_ = PositionStats(max_len=8)
    stats_.add(a, prev_contrib=c)
    result = stats_.result()
    pearson, spearman = row_correlations(a, c)
    assert result["rows_previous"] == [[4, 5]]
    assert result["pearson_previous"][0][0] == pytest.approx(np.nanmean(pearson[0, 0]))
    assert result["spearman_previous"][0][1] == pytest.approx(np.mean(spearman[0, 1]))
    # no input contribution was given
    assert result["pearson_input"] is None and result["contribution_histogram"] is None
    assert result["contribution_centre"] is None


def test_histogram_bins_are_divided_by_how_often_each_offset_occurs():
    stats_ = PositionStats(max_len=4)
    stats_.add(torch.tensor([[1.0, 2.0], [3.0, 4.0]]).reshape(1, 1, 2, 2))
    third = torch.arange(5.0, 14.0).reshape(1, 1, 3, 3)
    stats_.add(third, input_contrib=third)
    result = stats_.result()
    assert result["offsets"] == [-3, -2, -1, 0, 1, 2, 3]
    assert result["attention_offset_counts"] == [0, 1, 3, 5, 3, 1, 0]
    # offsets -2..2 (key - query) over the entries of both sentences, divided by 1, 3, 5, 3, 1 pairs
    expected = [None, 11, Fraction(3 + 8 + 12, 3), Fraction(1 + 4 + 5 + 9 + 13, 5), Fraction(2 + 6 + 10, 3),
                7, None]
    hist = result["attention_histogram"][0][0]
    assert hist[0] is None and hist[6] is None
    assert hist[1:6] == pytest.approx([float(v) for v in expected[1:6]])
    # centre of mass: sum(offset * hist) / sum(hist) = (-29/3) / (571/15)
    assert result["attention_centre"][0] == pytest.approx(float(Fraction(-145, 571)))
    # the contribution histogram counts only the sentence that had one
    assert result["contribution_offset_counts"] == [0, 1, 2, 3, 2, 1, 0]
    assert result["contribution_histogram"][0][0][2] == pytest.approx(10.0)  # (8 + 12) / 2
    assert result["sentences"] == 2


def prev1_and_uniform(length):
    """(1, 2, T, T): head 0 puts 1 on the previous token (row 0 closed), head 1 is uniform."""
    attn = torch.zeros(1, 2, length, length)
    attn[0, 0, torch.arange(1, length), torch.arange(length - 1)] = 1.0
    attn[0, 1] = 1 / length
    return attn


def test_prev1_head_has_its_centre_of_mass_exactly_at_minus_one():
    stats_ = PositionStats(max_len=7)
    stats_.add(prev1_and_uniform(5))
    stats_.add(prev1_and_uniform(3))
    result = stats_.result()
    assert result["attention_centre_per_head"][0][0] == -1.0
    assert result["attention_centre_per_head"][0][1] == pytest.approx(0, abs=1e-12)
    assert result["attention_centre"][0] == pytest.approx(-0.5)
    hist = result["attention_histogram"][0][0]
    assert hist[5] == 1.0 and hist[6] == 0.0 and hist[0] is None  # offsets -1, 0, -6


def test_closed_head_has_no_centre():
    stats_ = PositionStats(max_len=3)
    stats_.add(torch.zeros(1, 1, 3, 3))
    assert stats_.result()["attention_centre"] == [None]


def test_bad_shapes():
    stats_ = PositionStats(max_len=3)
    with pytest.raises(RecordError, match="a sentence of 4 tokens is longer than max_len 3"):
        stats_.add(torch.zeros(1, 1, 4, 4))
    with pytest.raises(RecordError, match="input contribution has shape"):
        stats_.add(torch.zeros(1, 1, 3, 3), input_contrib=torch.zeros(1, 1, 2, 2))
    stats_.add(torch.zeros(1, 1, 3, 3))
    with pytest.raises(RecordError, match="attention has 2 layers x 1 heads, expected 1 x 1"):
        stats_.add(torch.zeros(2, 1, 3, 3))


def test_table():
    gen = torch.Generator().manual_seed(2)
    a = rows(torch.rand(2, 2, 4, 4, generator=gen))
    stats_ = PositionStats(max_len=4)
    stats_.add(a, prev_contrib=a, input_contrib=a)
    lines = hta_table(stats_.result()).splitlines()
    assert len(lines) == 4
    assert lines[2].startswith("| 0 | 1.000 | 1.000 | 1.000 | 1.000 | ")
