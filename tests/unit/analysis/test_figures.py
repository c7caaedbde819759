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


def _drawn(monkeypatch, module):
    """The figures ``module``'s functions save, drawn (tick labels made)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    made = []

    def keep(fig, path):
        FigureCanvasAgg(fig).draw()
        made.append(fig)
        return path

    monkeypatch.setattr(module, "save", keep)
    return made


def _first(labels):
    return labels[0].get_text()


def test_figures_number_layers_and_heads_from_1(tmp_path, monkeypatch):
    """Every tick label, panel title and example title counts layers and heads
    from 1 (the JSON and the arrays from 0)."""
    from fairseq_local.analysis import roles_figures

    made = _drawn(monkeypatch, figures)
    bias = {"local": [[4.0, 1.0, None], [3.5, 0.5, 2.0]], "syntactic": [[None, 3.2, 3.1], [0.2, None, 1.0]]}
    figures.plot_bias_grid(bias, tmp_path / "grid.png")
    ax = made[-1].axes[0]
    assert _first(ax.get_yticklabels()) == "1" and _first(ax.get_xticklabels()) == "1"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2"]

    sensitivity = {"local": [[1.0, 2.0], [0.5, 0.7]], "syntactic": [[0.2, 0.3], [0.1, 0.2]],
                   "unrelated": [[0.0, 0.1], [0.2, 0.3]]}
    figures.plot_sensitivity(sensitivity, tmp_path / "s.png")
    assert [t.get_text() for t in made[-1].axes[0].get_xticklabels()] == ["1", "2"]

    gen = torch.Generator().manual_seed(0)
    stats = PositionStats(max_len=4)
    a = torch.rand(2, 3, 4, 4, generator=gen)
    stats.add(a, prev_contrib=a.flip(-1), input_contrib=a.flip(-2))
    hta = stats.result()
    figures.plot_correlations(hta, tmp_path / "c")
    for ax in made[-1].axes[:2]:
        assert _first(ax.get_yticklabels()) == "1" and _first(ax.get_xticklabels()) == "1"
    figures.plot_histograms(hta, tmp_path / "h")
    top_left = made[-1].axes[0]
    assert top_left.get_title() == "head 1" and top_left.get_ylabel() == "layer 1"
    assert made[-1].axes[3].get_ylabel() == "layer 2"
    figures.plot_centres(hta, tmp_path / "centres.png")
    ax = made[-1].axes[0]
    assert list(ax.lines[0].get_xdata()) == [1, 2] and _first(ax.get_xticklabels()) == "1"
    figures.plot_centres_overlay([("m", hta)], tmp_path / "overlay.png")
    ax = made[-1].axes[0]
    assert list(ax.lines[0].get_xdata()) == [1, 2] and _first(ax.get_xticklabels()) == "1"
    figures.plot_example_maps(["a", "b", "c", "d"], a, a, [(0, 0), (1, 2)], tmp_path / "ex.png")
    assert [ax.get_title() for ax in made[-1].axes[:2]] == ["L1 H1: attention", "L2 H3: attention"]

    made = _drawn(monkeypatch, roles_figures)
    roles = {"roles": [["positional", "other"], ["syntactic", "rare"]], "confidence": [[0.9, 0.2], [0.5, None]],
             "positional_offset": [[-1, None], [None, None]], "positional_share": [[0.95, 0.1], [0.2, 0.1]],
             "rare_share": [[0.0, 0.0], [0.0, 0.6]], "syntactic": {}, "sentences": 3}
    roles_figures.plot_roles(roles, tmp_path / "roles.png")
    ax = made[-1].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2"] and _first(ax.get_xticklabels()) == "1"
