"""Versioned prompt templates and the one function that renders them."""

from __future__ import annotations

import hashlib
import string
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

TEMPLATE_DIR = Path(__file__).resolve().parent


class RenderedPrompt(BaseModel):
    """A rendered template and the hash of the template it came from (recorded in the ledger)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Template name (file stem).")
    text: str = Field(description="The rendered text.")
    template_hash: str = Field(description="sha256 of the template file's bytes.")


class PromptError(ValueError):
    """A template that does not exist, or variables that do not fit it."""


def template_names() -> list[str]:
    """Every template shipped in prompts/."""
    return sorted(p.stem for p in TEMPLATE_DIR.glob("*.md"))


def template_variables(name: str) -> set[str]:
    """The variables a template uses."""
    template = string.Template(_read(name))
    return set(template.get_identifiers())


def _read(name: str) -> str:
    path = TEMPLATE_DIR / f"{name}.md"
    if not path.is_file():
        raise PromptError(f"no prompt template {name!r}; known: {', '.join(template_names())}")
    return path.read_text(encoding="utf-8")


def render_prompt(name: str, variables: dict[str, str]) -> RenderedPrompt:
    """Render prompts/<name>.md; an undefined or unexpected variable is an error."""
    raw = _read(name)
    template = string.Template(raw)
    needed = set(template.get_identifiers())
    missing, extra = needed - set(variables), set(variables) - needed
    if missing or extra:
        raise PromptError(
            f"template {name!r} needs variables {sorted(needed)}; "
            f"missing {sorted(missing)}, unexpected {sorted(extra)}"
        )
    return RenderedPrompt(
        name=name,
        text=template.substitute(variables),
        template_hash=hashlib.sha256(raw.encode("utf-8")).hexdigest(),
    )
