"""The Gumbel-sigmoid temperature τ of the learned masks as a function of the
update number (fairseq hands it to every module through ``set_num_updates``)."""

from dataclasses import dataclass

TAU_SCHEDULES = ("constant", "linear", "exponential")


@dataclass(frozen=True)
class TauSchedule:
    """Gumbel-sigmoid temperature as a function of the update number.

    ``constant``: τ = start.  ``linear``/``exponential``: from ``start`` at
    update 0 to ``end`` at update ``updates`` (linearly, or geometrically),
    then constant at ``end``."""

    start: float = 1.0
    end: float = 1.0
    updates: int = 0
    kind: str = "constant"

    def __post_init__(self) -> None:
        if self.kind not in TAU_SCHEDULES:
            raise ValueError(f"tau schedule must be one of {TAU_SCHEDULES}, not {self.kind!r}")
        if self.start <= 0 or self.end <= 0:
            raise ValueError(f"tau must be > 0 (got start {self.start}, end {self.end})")
        if self.updates < 0:
            raise ValueError(f"the anneal length must be >= 0 updates, not {self.updates}")

    def __call__(self, num_updates: int) -> float:
        if self.kind == "constant" or self.updates <= 0:
            return self.start if self.kind == "constant" else self.end
        t = min(max(num_updates, 0) / self.updates, 1.0)
        if self.kind == "linear":
            return self.start + t * (self.end - self.start)
        return self.start * (self.end / self.start) ** t
