"""Unknown keyword arguments refused by name, with the closest known one."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["check_keywords", "unknown_keyword"]


def unknown_keyword(what: str, name: str, known: Iterable[str]) -> TypeError:
    """The ``TypeError`` for ``name``, not one of ``known``, given to ``what``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TypeError(f"{what} got an unknown option {name!r}{hint}")


def check_keywords(what: str, fields_of: Any, given: Mapping[str, object]) -> None:
    """Raise :func:`unknown_keyword`'s error for the first key of ``given`` that is not
    a field of the dataclass ``fields_of``."""
    known = {f.name for f in dataclasses.fields(fields_of) if f.init}
    for name in given:
        if name not in known:
            raise unknown_keyword(what, name, known)
