"""Editing a search space before a session: a template's knobs and an auto space's rules, derived for a
problem and checked as a person edits them (the New-session dialog's space editor)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tunelab.core.search.space.auto import AutoSpace, check_rules, default_auto_space
from tunelab.core.search.space.template import TemplateSpace, check_template

if TYPE_CHECKING:
    from tunelab.core.search.space.base import SearchSpace

__all__ = ["AutoSpace", "TemplateSpace", "check_rules", "check_template", "default_auto_space", "make_space"]


def make_space(*args: Any, **kwargs: Any) -> SearchSpace:
    """`tunelab.core.search.space.factory.make_space` (workload, shape, dtype, target, kind, data), imported
    when called: it imports TVM, so call it off the GUI thread."""
    from tunelab.core.search.space.factory import make_space as build

    return build(*args, **kwargs)
