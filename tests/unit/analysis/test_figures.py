"""The analysis figures are written as PNG files."""

import torch

from fairseq_local.analysis import figures
from fairseq_local.analysis.positions import PositionStats

PNG = b"\x89PNG\r\n\x1a\n"


def is_png(path):
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(PNG)


def test_every_figure_is_a_png(tmp_path):
    bias = {
        "local": [[4.0, 1.0, None], [3.5, 0.5, 2.0]],
        "syntactic": [[None, 3.2, 3.1], [0.2, None, 1.0]],
        "sentences": 2,
    }
    no_syntax = {"local": bias["local"], "syntactic": [[None] * 3] * 2, "sentences": 2}
    sensitivity = {
        "local": [[1.0, 2.0, 1.5], [0.5, 0.7, 0.6]],
        "syntactic": [[0.2, None, 0.3], [None, None, None]],
        "unrelated": [[0.0, 0.1, None], [0.2, 0.3, 0.1]],
        "sentences": 3,
    }
    gen = torch.Generator().manual_seed(0)
    stats = PositionStats(max_len=5)
    for length in (3, 5):
        a = torch.rand(2, 2, length, length, generator=gen)
        stats.add(a, prev_contrib=a.flip(-1), input_contrib=a.flip(-2))
    hta = stats.result()

    paths = [
        figures.plot_bias_thresholds(bias, tmp_path / "bias_thresholds.png"),
        figures.plot_bias_thresholds(no_syntax, tmp_path / "nosyntax.png"),
        figures.plot_bias_grid(bias, tmp_path / "grid" / "bias_grid.png", threshold=3.0),
        figures.plot_sensitivity(sensitivity, tmp_path / "sensitivity.png"),
        figures.plot_centres(hta, tmp_path / "centres.png"),
    ]
    correlations = figures.plot_correlations(hta, tmp_path / "correlation")
    histograms = figures.plot_histograms(hta, tmp_path / "histogram")
    assert [p.name for p in correlations] == ["correlation_previous.png", "correlation_input.png"]
    assert [p.name for p in histograms] == ["histogram_attention.png", "histogram_contribution.png"]
    for path in paths + correlations + histograms:
        assert is_png(path), path
