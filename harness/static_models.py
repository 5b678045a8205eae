"""What the static checks report: rules, findings, the report, and checkable CONSTRAINTs."""

from __future__ import annotations

import enum
import re

from pydantic import BaseModel, ConfigDict, Field

_CONSTRAINT_FORM = re.compile(r"^forbid\s+(?P<target>\S+)$")


class Rule(enum.StrEnum):
    """Which static rule a finding breaks."""

    SYNTAX = "syntax"
    FORBIDDEN_IMPORT = "forbidden_import"
    FORBIDDEN_CALL = "forbidden_call"
    SHAPE_SPECIAL_CASE = "shape_special_case"
    FORBIDDEN_ATTRIBUTE = "forbidden_attribute"
    MONKEYPATCH = "monkeypatch"
    MISSING_ENTRY_POINT = "missing_entry_point"
    TUNABLE_OUT_OF_SPACE = "tunable_out_of_space"
    CONSTRAINT = "constraint"


class Finding(BaseModel):
    """One violation, located."""

    model_config = ConfigDict(frozen=True)

    rule: Rule = Field(description="The rule broken.")
    file: str = Field(description="File name inside the candidate tree.")
    line: int = Field(description="1-based line number (0 when not tied to a line).")
    message: str = Field(description="What is wrong and how to fix it.")


class StaticReport(BaseModel):
    """All findings of the static stage; passed when there are none."""

    model_config = ConfigDict(frozen=True)

    findings: list[Finding] = Field(default_factory=list, description="Violations found.")

    @property
    def passed(self) -> bool:
        """No findings."""
        return not self.findings

    def summary(self) -> str:
        """One line per finding."""
        return "\n".join(f"{f.file}:{f.line}: [{f.rule}] {f.message}" for f in self.findings)


class Constraint(BaseModel):
    """A checkable CONSTRAINT: 'forbid NAME=VALUE' (a tunable setting) or 'forbid DOTTED.NAME'."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(description="The constraint as written by its author.")
    tunable: str | None = Field(default=None, description="Tunable name for NAME=VALUE.")
    value: str | None = Field(default=None, description="Forbidden tunable value.")
    name: str | None = Field(default=None, description="Forbidden (dotted) name in the source.")


def parse_constraint(text: str) -> Constraint:
    """Parse 'forbid NAME=VALUE' or 'forbid dotted.name'; ValueError shows the expected form."""
    match = _CONSTRAINT_FORM.match(text.strip())
    if not match:
        raise ValueError(
            f"constraint {text!r} is not checkable; expected 'forbid TUNABLE=VALUE' "
            "(e.g. 'forbid matmul_precision=bf16') or 'forbid NAME' (e.g. 'forbid torch.compile')"
        )
    target = match["target"]
    if "=" in target:
        tunable, _, value = target.partition("=")
        if not tunable or not value:
            raise ValueError(f"constraint {text!r}: expected 'forbid TUNABLE=VALUE'")
        return Constraint(text=text, tunable=tunable, value=value)
    if not re.fullmatch(r"[A-Za-z_][\w.]*", target):
        raise ValueError(f"constraint {text!r}: {target!r} is not a (dotted) Python name")
    return Constraint(text=text, name=target)
