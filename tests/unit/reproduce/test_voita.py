"""``reproduce voita``: the plan at every scale, and the report's findings
and tables on hand-made roles, importances and pruning rows whose verdicts
are known."""

import json
from pathlib import Path

import pytest

from fairseq_local.reproduce import pande, voita
from fairseq_local.reproduce import voita_report as rep
from fairseq_local.reproduce.plan import dependencies, estimate
from fairseq_local.reproduce.report import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED


def _flag(cmd, name):
    return cmd[cmd.index(name) + 1]


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_every_experiment_is_planned(tmp_path, scale):
    plan = voita.build(scale, tmp_path)
    ids = [s.id for s in plan.steps]
    assert len(ids) == len(set(ids))
    for step in ("heads/dump", "heads/roles", "heads/importance", "prune"):
        assert f"voita/{step}" in ids
    prune = next(s for s in plan.steps if s.id == "voita/prune")
    s = voita.SCALES[scale]
    assert _flag(prune.cmd, "--lambdas") == ",".join(f"{x:g}" for x in s.lambdas)
    assert ("--gates-only" in prune.cmd) == (scale != "paper")  # the paper fine-tunes every weight
    imp = next(x for x in plan.steps if x.id == "voita/heads/importance")
    assert _flag(imp.cmd, "--method") == "lrp" and _flag(imp.cmd, "--out") == str(voita.heads_dir(plan))
    # the importance is added to the roles' roles.json: it waits for them
    assert "voita/heads/roles" in dependencies(plan.steps)["voita/heads/importance"]


def test_tiny_plan_shares_pandes_data_and_fits_its_budget(tmp_path):
    plan = voita.build("tiny", tmp_path)
    assert [s.id for s in plan.steps[:1]] == ["data-tiny/nmt-hard"]
    assert plan.steps[0] == pande.build("tiny", tmp_path).steps[0]  # the same step: a second paper skips it
    assert not any("bert" in s.id for s in plan.steps)
    train = next(s for s in plan.steps if s.id == "voita/nmt/base/train")
    assert train.cmd.count("--decoder-layers") == 1 and _flag(train.cmd, "--decoder-layers") == "2"
    assert _flag(train.cmd, "--arch") == "a"
    assert estimate(plan, 2) <= 45 and estimate(voita.build("small", tmp_path), 2) <= 180


def test_paper_plan_is_wmt_en_ru_with_every_weight_fine_tuned(tmp_path):
    plan = voita.build("paper", tmp_path)
    assert plan.steps[0].cmd[:3] == ("bash", "scripts/prepare-wmt14.sh", "en-ru")
    assert plan.steps[1].cmd[:4] == ("bash", "scripts/train-wmt14.sh", "en-ru", "a")
    prune = plan.steps[-1]
    assert prune.cmd[2].endswith("wmt14_en-ru/a/checkpoint_best.pt") and _flag(prune.cmd, "--ref").endswith("tok/test.ru")
    assert plan.minutes() is None


def _points(special_high: bool, n: int = 12):
    """Heads whose importance rises with confidence; the specialised ones
    the most (or the least) important."""
    roles = ["syntactic", "positional", "rare", "other"] * (n // 4)
    pts = []
    for k, role in enumerate(roles):
        conf = k / n
        imp = conf + (1.0 if (role != "other") == special_high else 0.0)
        pts.append({"layer": 1 + k // 4, "head": 1 + k % 4, "confidence": conf, "importance": imp, "role": role})
    return pts


def test_head_findings():
    v1, v2 = rep.head_findings(_points(True, 40))
    assert v1.verdict == REPRODUCED and v2.verdict == REPRODUCED
    v1, v2 = rep.head_findings(_points(False, 40))
    assert v2.verdict == NOT_REPRODUCED
    flat = [dict(p, importance=1.0 - p["confidence"]) for p in _points(True, 40)]
    assert rep.head_findings(flat)[0].verdict == NOT_REPRODUCED  # importance falls with confidence
    assert [f.verdict for f in rep.head_findings([])] == [NOT_COMPARABLE, NOT_COMPARABLE]
    only = [dict(p, role="other") for p in _points(True, 40)]
    assert rep.head_findings(only)[1].verdict == NOT_COMPARABLE


def test_head_points_read_roles_and_importance():
    roles = {"confidence": [[0.5, None], [0.9, 0.1]], "roles": [["syntactic", "other"], ["positional", "other"]],
             "importance": {"lrp": [[0.2, 0.3], [0.4, 0.1]]}}
    pts = rep.head_points(roles)
    assert [(p["layer"], p["head"], p["role"], p["importance"]) for p in pts] == [
        (1, 1, "syntactic", 0.2), (2, 1, "positional", 0.4), (2, 2, "other", 0.1)]
    assert rep.head_points({"confidence": [[0.5]], "roles": [["other"]]}) == []  # no importance yet


def _row(lam, enc, dec_self, cross, bleu, roles):
    return {"lambda": lam, "kept": {"enc-self": enc, "dec-self": dec_self, "dec-cross": cross},
            "heads": {"enc-self": 48, "dec-self": 16, "dec-cross": 16}, "bleu": bleu,
            "roles": dict(zip(("positional", "syntactic", "rare", "other"), roles))}


def test_prune_findings():
    base = _row(None, 48, 16, 16, 30.0, (2, 10, 0, 36))
    rows = [base, _row(0.1, 20, 10, 16, 29.5, (2, 10, 0, 8)), _row(0.5, 10, 4, 12, 27.0, (2, 8, 0, 0))]
    v3, v4, v5 = rep.prune_findings(rows)
    # 10 of the 10 kept are specialised against 12 of 48: far beyond chance
    assert v3.verdict == REPRODUCED and "12 of 48" in v3.evidence and "10 of the 10 kept at λ = 0.5" in v3.evidence
    # within 1 BLEU the fewest encoder heads are 20 (42 %): more than the paper's 10 of 48
    assert v4.verdict == NOT_REPRODUCED and "20 of 48 at λ = 0.1" in v4.evidence
    assert v5.verdict == REPRODUCED and v5.evidence.index("encoder-decoder") < v5.evidence.index("decoder self")
    rows[2] = _row(0.5, 9, 4, 12, 29.2, (0, 1, 0, 8))
    v3, v4, _ = rep.prune_findings(rows)
    assert v3.verdict == NOT_REPRODUCED and v4.verdict == REPRODUCED
    rows = [base, _row(0.1, 48, 16, 16, 30.0, (2, 10, 0, 36))]  # nothing closed
    assert [f.verdict for f in rep.prune_findings(rows)] == [NOT_COMPARABLE, NOT_REPRODUCED, NOT_COMPARABLE]
    assert [f.verdict for f in rep.prune_findings([])] == [NOT_COMPARABLE] * 3


def test_report_from_finished_steps(tmp_path, monkeypatch):
    from fairseq_local.reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = voita.build("tiny", tmp_path)
    heads = voita.heads_dir(plan)
    heads.mkdir(parents=True)
    pts = _points(True, 48)
    roles = {"confidence": [[p["confidence"] for p in pts[k:k + 8]] for k in range(0, 48, 8)],
             "roles": [[p["role"] for p in pts[k:k + 8]] for k in range(0, 48, 8)],
             "importance": {"lrp": [[p["importance"] for p in pts[k:k + 8]] for k in range(0, 48, 8)]}}
    (heads / "roles.json").write_text(json.dumps(roles))
    prune = voita.prune_dir(plan)
    prune.mkdir(parents=True)
    rows = [_row(None, 48, 16, 16, 30.0, (12, 24, 0, 12)), _row(0.5, 10, 4, 12, 29.5, (4, 6, 0, 0))]
    (prune / "prune_curve.json").write_text(json.dumps({"rows": rows}))
    path = rep.write_report(plan)
    text = path.read_text()
    assert text.startswith(voita.TITLE + " at `tiny` scale")
    assert "5 findings: 5 reproduced, 0 not reproduced, 0 not comparable." in text
    assert "| 0.5 | 10/48 (21 %) | 4/16 (25 %) | 12/16 (75 %) |" in text
    for png in ("report_heads.png", "report_curve.png", "report_roles.png"):
        assert (plan.out / png).read_bytes()[:4] == b"\x89PNG" and f"]({png})" in text
    # before any step finished: every finding "not comparable" but V4 has nothing to go on either
    empty = voita.build("tiny", tmp_path / "none")
    assert "5 findings: 0 reproduced, 0 not reproduced, 5 not comparable." in Path(rep.write_report(empty)).read_text()
