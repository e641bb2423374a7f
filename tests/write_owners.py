"""Who writes which table, read from the source (AST), never by importing it.

Every table has one owner, declared once, in code: a module-level `WRITES = ("table", ...)` in the
module that writes it (ingest/: one module per product table) or in a package's `__init__.py`
(search/, embeddings/, access/, store/: their derived tables, written by any module of theirs). A
write is any string constant (an f-string's literal parts included) holding INSERT INTO, UPDATE
... SET, DELETE FROM, TRUNCATE or MERGE INTO, and any `psycopg.sql.SQL(...).format(sql.Identifier(
...))` composition whose identifier is a literal (or a comprehension over literals). The tables of
the migrated schema are those `sql/` creates (store.purge.CREATED reads them the same way).

tests/unit/test_write_owners.py holds the tree to it; `python -m tests.write_owners` rewrites the
"Write owners" block of docs/architecture.md, which the same test holds current.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- generated: write owners -->"
END = "<!-- end generated -->"

NAME = r"([a-z_][a-z0-9_]*|\{[a-z_]*\})"
# `update x [alias] set`: the `set` keeps out `for update of c` and `do update set` (whose target
# would be `set`, refused below).
WRITE = re.compile(
    rf"\b(?:insert\s+into|delete\s+from|truncate(?:\s+table)?|merge\s+into)\s+(?:only\s+)?{NAME}"
    rf"|\bupdate\s+(?:only\s+)?{NAME}(?:\s+(?:as\s+)?[a-z_][a-z0-9_]*)?\s+set\b",
    re.IGNORECASE)


@dataclass(frozen=True)
class Write:
    module: str      # backscroll.search.turns
    constant: str    # the name the statement is bound to (or `<line N>`)
    table: str
    line: int


@dataclass
class Tree:
    writes: list[Write] = field(default_factory=list)
    declared: dict[str, list[str]] = field(default_factory=dict)  # table -> the modules/packages declaring it
    writers: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (module, constant) -> functions using it
    unresolved: list[str] = field(default_factory=list)
    packages: set[str] = field(default_factory=set)  # the declaring modules that are packages (__init__.py)
    constants: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # module -> write constant -> tables


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else " {} " for v in node.values)
    return None


def _is_call(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr == attr)
        or (isinstance(node.func, ast.Name) and node.func.id == attr))


def _literals(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[str] | None:
    """The tables a `sql.Identifier(...)` argument can be: a literal, or a comprehension's name
    over a tuple of literals; None when it is neither (a parameter: not statically known)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        up = parents.get(node)
        while up is not None:
            for gen in getattr(up, "generators", []):
                if isinstance(gen.target, ast.Name) and gen.target.id == node.id \
                        and isinstance(gen.iter, ast.Tuple | ast.List) \
                        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in gen.iter.elts):
                    return [e.value for e in gen.iter.elts]
            up = parents.get(up)
    return None


def _bound_name(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    up = parents.get(node)
    while up is not None:
        if isinstance(up, ast.Assign) and isinstance(up.targets[0], ast.Name):
            return up.targets[0].id
        if isinstance(up, ast.AnnAssign) and isinstance(up.target, ast.Name):
            return up.target.id
        if isinstance(up, ast.FunctionDef | ast.ClassDef | ast.Module):
            break
        up = parents.get(up)
    return f"<line {node.lineno}>"


def _enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    up = parents.get(node)
    while up is not None:
        if isinstance(up, ast.FunctionDef):
            return up.name
        up = parents.get(up)
    return None


def _in_raise(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    up = parents.get(node)
    while up is not None and not isinstance(up, ast.stmt):
        up = parents.get(up)
    return isinstance(up, ast.Raise)


def _absolute(module: str, is_package: bool, name: str | None, level: int) -> str:
    """The module an import names, from `module` (`from ..ingest import x`, level 2)."""
    if level == 0:
        return name or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _tables_of(node: ast.AST, text: str, parents: dict[ast.AST, ast.AST]) -> list[str] | None:
    found = []
    for match in WRITE.finditer(text):
        table = (match.group(1) or match.group(2)).lower()
        if table == "set":
            continue
        if table.startswith("{"):
            # a psycopg.sql template: its table is the Identifier the enclosing .format() gives
            call = parents.get(node)
            outer = parents.get(call) if call is not None else None
            fmt = parents.get(outer) if outer is not None else None
            if not (_is_call(call, "SQL") and isinstance(outer, ast.Attribute) and outer.attr == "format"
                    and isinstance(fmt, ast.Call)):
                return None
            key = table.strip("{}")
            args = [a for a in fmt.args] if not key else [k.value for k in fmt.keywords if k.arg == key]
            idents = [a for a in args if _is_call(a, "Identifier") and len(a.args) == 1]
            if len(idents) != 1:
                return None
            names = _literals(idents[0].args[0], parents)
            if names is None:
                return None
            found += names
        else:
            found.append(table)
    return found


def read_tree(root: Path) -> Tree:
    """Every write and every declaration under root/backscroll."""
    tree = Tree()
    parsed_modules: dict[str, tuple[ast.Module, dict, bool]] = {}
    for path in sorted((root / "backscroll").rglob("*.py")):
        module = module_name(root, path)
        if path.name == "__init__.py":
            tree.packages.add(module)
        parsed = ast.parse(path.read_text(), filename=str(path))
        parents = {child: node for node in ast.walk(parsed) for child in ast.iter_child_nodes(node)}
        constants: dict[str, set[str]] = {}  # module-level name -> tables it writes
        for node in ast.walk(parsed):
            text = _text(node)
            if text is None or isinstance(parents.get(node), ast.JoinedStr) or not WRITE.search(text) \
                    or _in_raise(node, parents):  # an error message naming a statement to run by hand
                continue
            name = _bound_name(node, parents)
            tables = _tables_of(node, text, parents)
            if tables is None:
                tree.unresolved.append(f"{module}.{name} (line {node.lineno}): a write whose table is not a literal")
                continue
            for table in tables:
                tree.writes.append(Write(module, name, table, node.lineno))
                constants.setdefault(name, set()).add(table)
                function = _enclosing_function(node, parents)
                if function is not None:
                    tree.writers.setdefault((module, name), set()).add(f"{module}.{function}")
        for node in parsed.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "WRITES" for t in node.targets):
                for element in getattr(node.value, "elts", []):
                    tree.declared.setdefault(element.value, []).append(module)
        tree.constants[module] = constants
        parsed_modules[module] = (parsed, parents, path.name == "__init__.py")
    # the functions that use each write constant: by its name in its module, or imported by another
    # (`from .history_sql import ADD_EVIDENCE`, `history_sql.INSERT_AUDIT`); a module-level constant
    # composed from one (`FINISH_SEARCH = compose(... ADD_EVIDENCE ...)`) writes what it holds
    for _ in range(4):  # until no composed constant is new
        found = sum(_link(tree, module, *entry) for module, entry in parsed_modules.items())
        if not found:
            break
    return tree


def _link(tree: Tree, module: str, parsed: ast.Module, parents: dict, is_package: bool) -> int:
    """Record the functions of `module` that use a write constant; how many composed constants were new."""
    names: dict[str, tuple[str, str]] = {name: (module, name) for name in tree.constants.get(module, ())}
    modules: dict[str, str] = {}
    for node in ast.walk(parsed):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.module, node.level)
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name in tree.constants.get(base, ()):
                    names[local] = (base, alias.name)
                elif f"{base}.{alias.name}" in tree.constants:
                    modules[local] = f"{base}.{alias.name}"
    new = 0
    for node in ast.walk(parsed):
        key = None
        if isinstance(node, ast.Name) and node.id in names:
            key = names[node.id]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and node.attr in tree.constants[modules[node.value.id]]:
            key = (modules[node.value.id], node.attr)
        if key is None:
            continue
        function = _enclosing_function(node, parents)
        if function is not None:
            tree.writers.setdefault(key, set()).add(f"{module}.{function}")
            continue
        composed = _bound_name(node, parents)
        if not composed.startswith("<") and (module, composed) != key:
            tables = tree.constants.setdefault(module, {}).setdefault(composed, set())
            before = len(tables)
            tables |= tree.constants[key[0]][key[1]]
            new += len(tables) > before
    return new


def migrated_tables(root: Path) -> set[str]:
    from backscroll.store.purge import CREATED

    tables = set()
    for path in sorted((root / "sql").glob("[0-9]*.sql")):
        tables |= {name for kind, name in CREATED.findall(path.read_text()) if kind.lower() == "table"}
    migrate = (root / "backscroll" / "store" / "migrate.py").read_text()  # its own ledger, made before any file
    tables |= {name for kind, name in CREATED.findall(migrate) if kind.lower() == "table"}
    return tables


def owns(tree: Tree, owner: str, module: str) -> bool:
    """A module owns what it declares; a package, what any module under it writes."""
    return module == owner or (owner in tree.packages and module.startswith(owner + "."))


def problems(root: Path) -> list[str]:
    """Every breach of the rule, named: a write outside its table's owner, a table declared twice,
    a table of the schema with no owner, a declared table the schema does not have."""
    tree = read_tree(root)
    out = list(tree.unresolved)
    for table, owners in sorted(tree.declared.items()):
        if len(owners) > 1:
            out.append(f"{table}: declared by {' and '.join(owners)} (one owner each)")
    for w in tree.writes:
        owners = tree.declared.get(w.table, [])
        if not owners:
            out.append(f"{w.module}.{w.constant} (line {w.line}) writes {w.table}, which no module declares")
        elif not any(owns(tree, o, w.module) for o in owners):
            out.append(f"{w.module}.{w.constant} (line {w.line}) writes {w.table}, owned by {owners[0]}")
    direct = {(w.module, w.constant) for w in tree.writes}
    for module, constants in sorted(tree.constants.items()):
        for constant, tables in sorted(constants.items()):
            for table in sorted(tables):
                owner = tree.declared.get(table, ["nobody"])[0]
                if (module, constant) not in direct and not owns(tree, owner, module):
                    out.append(f"{module}.{constant} is composed from a write of {table}, owned by {owner}")
                for function in sorted(tree.writers.get((module, constant), ())):
                    user = function.rsplit(".", 1)[0]
                    if user != module and not owns(tree, owner, user):
                        out.append(f"{function} runs {module}.{constant}, a write of {table} owned by {owner}")
    schema = migrated_tables(root)
    for table in sorted(schema - set(tree.declared)):
        out.append(f"{table}: a table of the migrated schema with no owner (declare it in its writer's WRITES)")
    for table in sorted(set(tree.declared) - schema):
        out.append(f"{table}: declared by {', '.join(tree.declared[table])} but not a table of the migrated schema")
    return out


def block(root: Path = ROOT) -> str:
    """The generated "Write owners" block: table, its owner, the functions that write it."""
    tree = read_tree(root)
    by_table: dict[str, set[str]] = {}
    for (module, constant), tables in ((k, t) for m, c in tree.constants.items() for k, t in
                                       (((m, n), ts) for n, ts in c.items())):
        for function in tree.writers.get((module, constant), ()):
            for table in tables:
                by_table.setdefault(table, set()).add(function.removeprefix("backscroll."))
    lines = [BEGIN,
             "Generated by `python -m tests.write_owners` from the `WRITES` declarations and the write statements",
             "of backscroll/ (tests/unit/test_write_owners.py fails when it is stale, and when a module writes a",
             "table it does not own). An owner that is a package lets any of its modules write the table; the",
             "database's triggers (\"What a write sets off\") write more of the derived ones.", "",
             "| table | owner | written by |", "|---|---|---|"]
    for table in sorted(tree.declared):
        owner = tree.declared[table][0]
        owner = owner.removeprefix("backscroll.") + ("/" if owner in tree.packages else "")
        functions = ", ".join(f"`{f}`" for f in sorted(by_table.get(table, ()))) or "triggers and migrations only"
        lines.append(f"| `{table}` | `{owner}` | {functions} |")
    lines.append(END)
    return "\n".join(lines)


def current(text: str) -> str | None:
    start = text.find(BEGIN)
    if start < 0:
        return None
    return text[start:text.index(END, start) + len(END)]


def write(path: Path = ARCHITECTURE) -> bool:
    """Rewrite the block in place (or add it, after the tree, when it is missing); whether it changed."""
    text = path.read_text()
    fresh = block()
    old = current(text)
    if old == fresh:
        return False
    if old is None:
        anchor = text.index("\n## The one rule")
        text = text[:anchor] + "\n## Write owners\n\n" + fresh + "\n" + text[anchor:]
    else:
        text = text.replace(old, fresh)
    path.write_text(text)
    return True


if __name__ == "__main__":
    changed = write()
    print(f"{ARCHITECTURE.relative_to(ROOT)}: write owners {'rewritten' if changed else 'already current'}")
    sys.exit(0)
