"""Sphinx configuration: the guide (docs/guide/) and the API reference (docs/api/),
built from the docstrings with autodoc.

``python -m sphinx -W --keep-going -n -b html docs docs/_build/html`` is what
``.ci/run`` runs: every warning (a broken cross-reference, a docstring that does not
parse, an example file that is missing) fails the build. Nothing is fetched at build
time: references to Twisted, zope.interface and the standard library are resolved by
``docs/_ext/txnats_refs.py`` into links of their published references, without an
inventory download.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "_ext"))

import txnats  # noqa: E402

project = "txnats"
author = "the txnats developers"
copyright = "the txnats developers"
release = txnats.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "sphinxcontrib.zopeext.autointerface",
    "txnats_autodoc",
    "txnats_refs",
]

root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
nitpicky = True
default_role = "code"
highlight_language = "python3"

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = False
autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
}
autoclass_content = "both"

html_theme = "furo"
html_title = f"txnats {release}"
html_static_path: list[str] = []
html_show_sourcelink = False


#: The modules the API reference documents, each with an ``automodule`` in docs/api/:
#: tests/test_docs.py checks every name in their ``__all__`` for a docstring.
PUBLIC_MODULES = (
    "txnats", "txnats.options", "txnats.tls", "txnats.errors", "txnats.interfaces",
    "txnats.jetstream", "txnats.jetstream.config", "txnats.micro", "txnats.testing",
    "txnats.testing.pytest_plugin", "txnats.bridge", "txnats.bridge.service",
    "txnats.bridge.forward",
)

#: Names a package re-exports from a module documented on a page of its own: each
#: object is documented once, where this table says.
DOCUMENTED_ELSEWHERE = {
    "txnats": ("txnats.errors", "txnats.interfaces"),
    "txnats.jetstream": ("txnats.jetstream.config",),
}


def _skip_reexported(app, what, name, obj, skip, options):  # type: ignore[no-untyped-def]
    """Leave out of a package's page what another page documents."""
    import importlib

    env = app.env
    current = env.temp_data.get("autodoc:module") or env.ref_context.get("py:module")
    for other in DOCUMENTED_ELSEWHERE.get(current, ()):
        if name in getattr(importlib.import_module(other), "__all__", ()):
            return True
    return None


def setup(app):  # type: ignore[no-untyped-def]
    """Connect the hooks of this configuration."""
    app.connect("autodoc-skip-member", _skip_reexported)

#: Packages whose page documents constants defined in their submodules.
txnats_packages = ("txnats", "txnats.jetstream", "txnats.micro", "txnats.testing",
                   "txnats.bridge")

