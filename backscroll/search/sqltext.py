"""SQL text from named fragments: the one way a statement is stitched together.

A template names each fragment it takes as `<<NAME>>` (capitals, digits and underscores). Nothing
else in a statement is touched: psycopg's `%(name)s` parameters and `sql.SQL`'s `{name}` fields
pass through, so a composed statement still runs with parameters, or is formatted by
`sql.SQL(...).format(...)` at execution time (identifiers, literals, a model's distance).

`compose` refuses, with a CompositionError naming the placeholder:
- a placeholder the template names and no fragment fills (a misspelt name cannot stay silently
  in a statement);
- a fragment given that the template does not name (a fragment meant for a statement that no
  longer takes it);
- anything that looks like a placeholder but is not one (`<<tsquery>>`, `<< TSQUERY >>`);
- a placeholder left in the result. Fragments are inserted as they are, in one pass: a fragment
  that takes fragments of its own is composed first. So a composed text never holds one.
"""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"<<([A-Z][A-Z0-9_]*)>>")
# Anything a person may have meant as a placeholder: what the checks look for.
LOOKS_LIKE_PLACEHOLDER = re.compile(r"<<\s*[A-Za-z_][A-Za-z0-9_]*\s*>>")


class CompositionError(ValueError):
    """A template and its fragments do not fit: the statement is not built."""


def placeholders(text: str) -> set[str]:
    """The names of the placeholders in `text`."""
    return set(PLACEHOLDER.findall(text))


def compose(template: str, /, **fragments: str) -> str:
    """`template` with each `<<NAME>>` replaced by the fragment NAME; see the module's rules."""
    malformed = sorted({m.group(0) for m in LOOKS_LIKE_PLACEHOLDER.finditer(template)
                        if not PLACEHOLDER.fullmatch(m.group(0))})
    if malformed:
        raise CompositionError(f"not a placeholder (write <<NAME>>, in capitals): {', '.join(malformed)}")
    named = placeholders(template)
    missing = sorted(named - fragments.keys())
    if missing:
        raise CompositionError(f"no fragment for {', '.join(f'<<{n}>>' for n in missing)}")
    unused = sorted(fragments.keys() - named)
    if unused:
        raise CompositionError(f"fragments the template does not use: {', '.join(unused)}")
    composed = PLACEHOLDER.sub(lambda m: fragments[m.group(1)], template)
    left = sorted({m.group(0) for m in LOOKS_LIKE_PLACEHOLDER.finditer(composed)})
    if left:
        raise CompositionError(f"placeholders left after composing (a fragment holds them; compose it "
                               f"first): {', '.join(left)}")
    return composed


def with_ctes(*parts: str) -> str:
    """One statement from CTE bodies and a final select, in order (`name as (...)`, ..., the
    last part ending the statement): how both searches build their statements from shared parts."""
    return "with " + ",\n".join(p.strip() for p in parts)
