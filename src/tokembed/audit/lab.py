"""The failure lab as data: 84 named ways a model's input state breaks while every shape stays valid.

Each :class:`Scenario` has an id ``"<group>.<n>"``, its group, its title (the
scenario's stable name, as written) and the code of the guard that rejects it.
A scenario is *guarded* when its code is registered in
:data:`tokembed.errors.CODES`; that is all the package can know about itself.
The tests that trigger a scenario carry ``@pytest.mark.failure_lab("<id>")``
and assert its code; the test suite collects them and fails when a scenario
has none. Nothing here reads test files.

Example::

    >>> scenario("6.3").code
    'DIVERGENT_ALIAS_VALUES'
    >>> lab_coverage().total.scenarios
    84
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tokembed.audit._scenarios import GROUP_NAMES, ROWS
from tokembed.errors import CODES, UsageError

__all__ = [
    "GROUP_SIZES",
    "SCENARIOS",
    "GroupCoverage",
    "LabCoverage",
    "Scenario",
    "ScenarioStatus",
    "lab_coverage",
    "scenario",
]

ScenarioStatus = Literal["guarded", "unguarded"]

# Scenarios per group, in group order: 4+5+15+4+13+12+11+4+4+3+5+4 = 84.
GROUP_SIZES: tuple[int, ...] = (4, 5, 15, 4, 13, 12, 11, 4, 4, 3, 5, 4)


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One failure-lab scenario and how it is closed.

    Attributes:
        id: ``"<group>.<n>"``, e.g. ``"6.3"``.
        group: the group number, 1 to 12.
        group_name: the group's name.
        title: the scenario's name (lookups match it case-insensitively).
        code: the stable error code of the guard that rejects it.
    """

    id: str
    group: int
    group_name: str
    title: str
    code: str

    @property
    def guarded(self) -> bool:
        """The guard's code is registered in ``tokembed.errors.CODES``."""
        return self.code in CODES

    @property
    def status(self) -> ScenarioStatus:
        return "guarded" if self.guarded else "unguarded"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "group": self.group,
            "group_name": self.group_name,
            "title": self.title,
            "code": self.code,
            "status": self.status,
        }


def _build() -> tuple[Scenario, ...]:
    out = []
    for sid, code, title in ROWS:
        group = int(sid.split(".")[0])
        out.append(
            Scenario(
                id=sid,
                group=group,
                group_name=GROUP_NAMES[group],
                title=title,
                code=code,
            )
        )
    return tuple(out)


SCENARIOS: tuple[Scenario, ...] = _build()
_BY_KEY: dict[str, Scenario] = {s.id: s for s in SCENARIOS} | {
    s.title.lower(): s for s in SCENARIOS
}


def scenario(key: str) -> Scenario:
    """The scenario with id ``key`` (``"6.3"``) or title ``key`` (any case, trailing period ignored).

    Raises:
        UsageError INVALID_ARGUMENT: no scenario has that id or title.
    """
    found = _BY_KEY.get(key.strip().lower().rstrip("."))
    if found is None:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"no failure-lab scenario has id or title {key!r}",
            value=key,
            fix="give an id or a title from SCENARIOS (`tokembed explain` lists them)",
        )
    return found


@dataclass(frozen=True, kw_only=True)
class GroupCoverage:
    """Counts of one group (or of all: ``group`` 0) by status."""

    group: int
    name: str
    scenarios: int
    guarded: int
    unguarded: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "name": self.name,
            "scenarios": self.scenarios,
            "guarded": self.guarded,
            "unguarded": self.unguarded,
        }


@dataclass(frozen=True, kw_only=True)
class LabCoverage:
    """The scenarios selected, their per-group coverage and the total."""

    scenarios: tuple[Scenario, ...]
    groups: tuple[GroupCoverage, ...]
    total: GroupCoverage

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenarios": [s.to_dict() for s in self.scenarios],
            "groups": [g.to_dict() for g in self.groups],
            "total": self.total.to_dict(),
        }

    def format(self) -> str:
        """A table: one line per scenario, then the counts per group and in total."""
        width = max((len(s.code) for s in self.scenarios), default=4)
        lines = [f"{'id':<5}  {'code':<{width}}  {'status':<9}  title"]
        for s in self.scenarios:
            lines.append(f"{s.id:<5}  {s.code:<{width}}  {s.status:<9}  {s.title}")
        lines.append("")
        lines.append(f"{'group':<48}  guarded  unguarded  scenarios")
        for g in (*self.groups, self.total):
            label = "total" if g.group == 0 else f"{g.group:>2} {g.name}"
            lines.append(f"{label:<48}  {g.guarded:>7}  {g.unguarded:>9}  {g.scenarios:>9}")
        return "\n".join(lines)


def _count(group: int, name: str, rows: tuple[Scenario, ...]) -> GroupCoverage:
    statuses = [s.status for s in rows]
    return GroupCoverage(
        group=group,
        name=name,
        scenarios=len(rows),
        guarded=statuses.count("guarded"),
        unguarded=statuses.count("unguarded"),
    )


def lab_coverage(*, group: int | None = None) -> LabCoverage:
    """Coverage of the whole lab, or of one ``group``.

    Raises:
        UsageError INVALID_ARGUMENT: ``group`` is not 1 to 12.
    """
    if group is not None and group not in GROUP_NAMES:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"the failure lab has groups 1 to {len(GROUP_NAMES)}, not {group}",
            value=group,
            fix=f"pick a group from 1 to {len(GROUP_NAMES)}",
        )
    chosen = tuple(s for s in SCENARIOS if group is None or s.group == group)
    groups = tuple(
        _count(g, name, tuple(s for s in chosen if s.group == g))
        for g, name in GROUP_NAMES.items()
        if group is None or g == group
    )
    return LabCoverage(scenarios=chosen, groups=groups, total=_count(0, "total", chosen))
