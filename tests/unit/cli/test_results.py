"""``fairseq-local results``: the closing comparison with Pande et al.'s claim."""

from fairseq_local_cli.results import claim


def rows(**bleu):
    names = {"a": "Baseline", "f": "8LocHeads All6", "i": "1LocHead 7TiedLoc All6"}
    return [{"config": f"({k}) {names[k]}", "test BLEU": v} for k, v in bleu.items()]


def test_claim_compares_the_baseline_with_the_best_local_config():
    line = claim(rows(a="90.10", f="92.40", i="91.00"))
    assert "(a) 90.10 BLEU, best local (f) 92.40" in line and "matches it (+2.30 BLEU" in line
    assert "trails it (+9.74 BLEU" in claim(rows(a="79.66", f="89.40"))
    assert "beats it (-6.00 BLEU" in claim(rows(a="95.00", f="89.00"))


def test_no_claim_without_the_baseline_or_a_local_config():
    assert claim(rows(f="89.40", i="88.00")) is None
    assert claim(rows(a="89.40")) is None
    assert claim(rows(a="-", f="80.00")) is None
    assert claim([{"config": "dam_s", "test BLEU": "60.00"}]) is None
