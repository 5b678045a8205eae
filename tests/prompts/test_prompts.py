"""Prompt templates: every template renders, is hashed by its bytes, and rejects bad variables."""

from __future__ import annotations

import hashlib

import pytest

from prompts import (
    TEMPLATE_DIR,
    PromptError,
    RenderedPrompt,
    render_prompt,
    template_names,
    template_variables,
)


def values_for(name: str) -> dict[str, str]:
    """A distinct, recognisable value for every variable of a template."""
    return {var: f"<<{var}-value-{i}>>" for i, var in enumerate(sorted(template_variables(name)))}


def test_templates_are_the_md_files() -> None:
    names = template_names()
    assert "offline_commit" in names
    assert names == sorted(p.stem for p in TEMPLATE_DIR.glob("*.md"))


def test_offline_commit_variables() -> None:
    assert template_variables("offline_commit") == {
        "title",
        "idea_text",
        "hypothesis",
        "prediction",
        "changes",
        "parent_sha",
        "operator",
    }


@pytest.mark.parametrize("name", template_names())
def test_every_template_renders_every_value(name: str) -> None:
    variables = values_for(name)
    assert variables, f"template {name} has no variables"
    rendered = render_prompt(name, variables)
    assert isinstance(rendered, RenderedPrompt) and rendered.name == name
    for var, value in variables.items():
        assert value in rendered.text, var
        assert f"${var}" not in rendered.text and f"${{{var}}}" not in rendered.text
    raw = (TEMPLATE_DIR / f"{name}.md").read_bytes()
    assert rendered.template_hash == hashlib.sha256(raw).hexdigest()
    # The hash is of the template, not of the rendered text.
    other = render_prompt(name, {var: "x" for var in variables})
    assert other.template_hash == rendered.template_hash and other.text != rendered.text


def test_offline_commit_layout() -> None:
    variables = {var: var.upper() for var in template_variables("offline_commit")}
    lines = render_prompt("offline_commit", variables).text.splitlines()
    assert lines[0] == "TITLE"
    for line in ("Idea: IDEA_TEXT", "Hypothesis: HYPOTHESIS", "Predicted effect: PREDICTION"):
        assert line in lines
    assert "Declared parent: PARENT_SHA" in lines


@pytest.mark.parametrize("name", template_names())
def test_missing_variable_is_named(name: str) -> None:
    variables = values_for(name)
    dropped = sorted(variables)[0]
    del variables[dropped]
    with pytest.raises(PromptError, match=f"missing \\['{dropped}'\\]"):
        render_prompt(name, variables)


@pytest.mark.parametrize("name", template_names())
def test_unexpected_variable_is_named(name: str) -> None:
    variables = {**values_for(name), "surprise_var": "boo"}
    with pytest.raises(PromptError, match=r"unexpected \['surprise_var'\]"):
        render_prompt(name, variables)


def test_unknown_template_is_an_error() -> None:
    with pytest.raises(PromptError, match="no prompt template 'no_such_template'") as info:
        render_prompt("no_such_template", {})
    assert "offline_commit" in str(info.value)
    with pytest.raises(PromptError):
        template_variables("no_such_template")
    assert isinstance(info.value, ValueError)


def test_values_are_not_re_expanded() -> None:
    variables = values_for("offline_commit")
    variables["title"] = "costs $5 and ${idea_text}"
    rendered = render_prompt("offline_commit", variables)
    assert "costs $5 and ${idea_text}" in rendered.text
