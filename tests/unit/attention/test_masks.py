"""Exact mask matrices of every kind, and real-token positions under padding."""

import pytest
import torch

from fairseq_local.attention.masks import MaskSpecError, parse_mask, real_positions, stack_masks


def dense(token: str, n: int = 5) -> torch.Tensor:
    pos = torch.arange(n)
    return parse_mask(token).dense(pos, pos).int()


EXPECTED = {
    "global": [[1] * 5] * 5,
    "identity": torch.eye(5, dtype=torch.int).tolist(),
    # prev-k: query i attends only to key j = i - k (the token k positions before).
    "prev-1": [
        [0, 0, 0, 0, 0],
        [1, 0, 0, 0, 0],
        [0, 1, 0, 0, 0],
        [0, 0, 1, 0, 0],
        [0, 0, 0, 1, 0],
    ],
    "prev-2": [
        [0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0],
        [1, 0, 0, 0, 0],
        [0, 1, 0, 0, 0],
        [0, 0, 1, 0, 0],
    ],
    # next-k: query i attends only to key j = i + k.
    "next-1": [
        [0, 1, 0, 0, 0],
        [0, 0, 1, 0, 0],
        [0, 0, 0, 1, 0],
        [0, 0, 0, 0, 1],
        [0, 0, 0, 0, 0],
    ],
    "next-3": [
        [0, 0, 0, 1, 0],
        [0, 0, 0, 0, 1],
        [0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0],
    ],
    "band-1": [
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [0, 1, 1, 1, 0],
        [0, 0, 1, 1, 1],
        [0, 0, 0, 1, 1],
    ],
    "band-2": [
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1],
        [0, 1, 1, 1, 1],
        [0, 0, 1, 1, 1],
    ],
}


@pytest.mark.parametrize("token", sorted(EXPECTED))
def test_exact_matrix(token):
    assert dense(token).tolist() == EXPECTED[token]


def test_large_k_and_str_roundtrip():
    assert dense("band-7").sum() == 25
    assert dense("prev-5").sum() == 0
    for token in ["global", "identity", "prev-3", "next-12", "band-4"]:
        assert str(parse_mask(token)) == token


@pytest.mark.parametrize(
    "token", ["band", "band-0", "band-x", "prev-1-2", "identity-1", "global-0", "global-x", "foo-1", ""]
)
def test_bad_tokens(token):
    with pytest.raises(MaskSpecError):
        parse_mask(token)


def test_real_positions_left_and_right_padding():
    pad = torch.tensor([[True, True, False, False, False], [False, False, False, True, True]])
    assert real_positions(pad, 5).tolist() == [[-1, -1, 0, 1, 2], [0, 1, 2, -1, -1]]
    assert real_positions(None, 3).tolist() == [0, 1, 2]


def test_stack_masks_batched_positions_follow_real_tokens():
    # With left padding, prev-1 links real token 1 to real token 0 wherever they sit.
    pad = torch.tensor([[True, False, False]])
    pos = real_positions(pad, 3)
    m = stack_masks((parse_mask("prev-1"), parse_mask("global")), pos, pos)
    assert m.shape == (1, 2, 3, 3)
    assert m[0, 0, 2, 1] and m[0, 0].sum() == 2  # (2,1) real pair; (1,0) pairs pad positions -1,0
