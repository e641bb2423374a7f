"""Settings by concern (issue 33, item 4): every setting in one group, read under the variable it
always had, handed to code as a group and never looked up by name."""

from __future__ import annotations

import ast
import re
import subprocess
import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError

from backscroll.config import ENV_FILE, Settings, explain

ROOT = Path(__file__).resolve().parents[2]
GROUPS = {name: field.annotation for name, field in Settings.model_fields.items()}
GROUP_OF = {field: group for group, cls in GROUPS.items() for field in cls.model_fields}


def test_every_setting_is_in_exactly_one_group_under_the_one_prefix():
    fields = [field for cls in GROUPS.values() for field in cls.model_fields]
    assert len(fields) == len(set(fields)), "a field in two groups would be one variable read twice"
    for cls in GROUPS.values():
        assert cls.model_config["env_prefix"] == "BACKSCROLL_" and cls.model_config["env_file"] == ENV_FILE
        for name, info in cls.model_fields.items():
            assert info.description, f"{cls.__name__}.{name} has no help text for `backscroll settings`"


def test_a_variable_reaches_its_group_from_the_environment_and_from_a_dotenv_file(monkeypatch, tmp_path):
    monkeypatch.setenv("BACKSCROLL_HYBRID_EXACT_MAX_ROWS", "7")
    monkeypatch.setenv("BACKSCROLL_WORKER_POLL_S", "0.25")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ENV_FILE).write_text("BACKSCROLL_BODY_MAX_CHARS=99\nBACKSCROLL_PORT=9090\n")
    settings = Settings()
    assert settings.search.hybrid_exact_max_rows == 7 and settings.worker.worker_poll_s == 0.25
    assert settings.ingest.body_max_chars == 99 and settings.api.port == 9090
    assert Settings(_env_file=None).ingest.body_max_chars == Settings.declared().ingest.body_max_chars


def test_an_invalid_value_is_refused_under_its_variables_name(monkeypatch, capsys):
    from backscroll import cli
    from backscroll.config import get_settings

    monkeypatch.setenv("BACKSCROLL_HYBRID_EXACT_MAX_ROWS", "many")
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None)
    assert [e["loc"] for e in refused.value.errors()] == [("hybrid_exact_max_rows",)]
    get_settings.cache_clear()
    try:
        assert cli.main(["settings"]) == 2
    finally:
        get_settings.cache_clear()
    assert "invalid setting BACKSCROLL_HYBRID_EXACT_MAX_ROWS" in capsys.readouterr().err


def test_a_replaced_field_is_validated_and_must_belong_to_its_group():
    settings = Settings.declared()
    assert settings.replace(search={"hybrid_exact_max_rows": 0}).search.hybrid_exact_max_rows == 0
    assert settings.search.hybrid_exact_max_rows != 0, "a copy: the original is unchanged"
    with pytest.raises(ValidationError):
        settings.replace(search={"hybrid_exact_max_rows": -1})
    with pytest.raises(TypeError, match="SearchSettings has no worker_poll_s"):
        settings.replace(search={"worker_poll_s": 1.0})


def test_backscroll_settings_explains_every_one_under_its_group_with_secrets_masked():
    settings = Settings.declared().replace(access={"master_key": "a secret"})
    lines = "\n".join(explain(settings)).splitlines()
    headings = [line for line in lines if line.startswith("# ")]
    assert [h.split(":")[0].removeprefix("# ") for h in headings] == list(GROUPS)
    group = None
    for line in lines:
        if line.startswith("# "):
            group = line.split(":")[0].removeprefix("# ")
        elif line.startswith("BACKSCROLL_"):
            name = line.split()[0].removeprefix("BACKSCROLL_").lower()
            assert GROUP_OF[name] == group
    listed = {line.split()[0] for line in lines if line.startswith("BACKSCROLL_")}
    assert listed == {f"BACKSCROLL_{name.upper()}" for name in GROUP_OF}
    assert "a secret" not in "\n".join(lines) and "BACKSCROLL_MASTER_KEY" in "\n".join(lines)


def test_the_variables_the_operator_and_the_chart_render_are_settings():
    """The operator and the chart write these names into the API's, the worker's and the Jobs'
    pods: each must still be a setting's variable."""
    sources = [*(ROOT / "operator" / "backscroll_operator").glob("*.py"), *(ROOT / "charts").rglob("*.yaml")]
    rendered = {name for path in sources for name in re.findall(r"\bBACKSCROLL_[A-Z0-9_]*[A-Z0-9]\b", path.read_text())
                if not name.startswith(NOT_SETTINGS)}
    assert {"BACKSCROLL_DATABASE_URL", "BACKSCROLL_EMBEDDINGS_MODEL", "BACKSCROLL_BM25_K1"} <= rendered
    unknown = {name for name in rendered if name.removeprefix("BACKSCROLL_").lower() not in GROUP_OF}
    assert not unknown, f"rendered, but no setting reads them: {sorted(unknown)}"


# What the operator and the chart name BACKSCROLL_ that is not a setting of the application: the
# operator's own settings, CloudNativePG's parts of a URL, the pods' security profiles, tokens.
NOT_SETTINGS = ("BACKSCROLL_OPERATOR_", "BACKSCROLL_CNPG_", "BACKSCROLL_POD_SECURITY", "BACKSCROLL_CONTAINER_SECURITY",
                "BACKSCROLL_STATUS_TOKEN", "BACKSCROLL_TOKEN_", "BACKSCROLL_WORKSPACE_TOKENS")



# -- settings are passed as groups, never read flat or by name ---------------------------------

def _flat_reads(source: str) -> list[str]:
    """`settings.<field>` of a field that lives in a group, `config.setting(...)`, or a field
    named at the top level: `getattr(settings, "<field>")`, `Settings(<field>=...)`,
    `settings.model_copy(update={"<field>": ...})`."""
    found = []
    with warnings.catch_warnings():  # a file's own invalid escapes are not this test's to report
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in (*GROUP_OF, "embeddings_enabled") \
                and _names_settings(node.value):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name == "setting" or (name == "Settings" and any(k.arg in GROUP_OF for k in node.keywords)):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
            elif name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and node.args[1].value in GROUP_OF:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
            elif name == "model_copy" and _names_settings(func.value) and any(
                    k.arg == "update" and isinstance(k.value, ast.Dict)
                    and any(isinstance(key, ast.Constant) and key.value in GROUP_OF for key in k.value.keys)
                    for k in node.keywords):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def _names_settings(node: ast.expr) -> bool:
    """An expression that is a whole Settings: `settings`, `self.settings`, `svc.settings`, ...,
    `Settings(...)`, `get_settings()`, `Settings.declared()`."""
    if isinstance(node, ast.Call):
        func = node.func
        return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) in (
            "Settings", "get_settings", "declared", "settings_for")
    return (isinstance(node, ast.Name) and node.id == "settings") or \
        (isinstance(node, ast.Attribute) and node.attr == "settings")


def _sources() -> list[str]:
    """The Python files that may read these settings (what git tracks or would: not bench/out's
    checkouts of old trees). The operator reads none: its `settings` are kopf's OperatorSettings."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.py"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [p for p in listed if p.startswith(("backscroll/", "tests/", "bench/")) and (ROOT / p).exists()]


def test_no_setting_is_read_flat_or_looked_up_by_name():
    offenders = {}
    for path in _sources():
        reads = _flat_reads((ROOT / path).read_text(encoding="utf-8"))
        if reads:
            offenders[path] = reads
    assert not offenders, f"read a setting through its group (settings.search.x), passed as a group: {offenders}"


@pytest.mark.parametrize("source", [
    "def f(settings): return settings.hybrid_exact_max_rows",
    "def f(svc): return svc.settings.body_max_chars",
    "def f(settings): return settings.embeddings_enabled",
    "from backscroll.config import setting\nsetting(None, 'hybrid_exact_max_rows')",
    "def f(s): return getattr(s, 'hnsw_ef_search')",
    "def f(settings): return settings.model_copy(update={'worker_poll_s': 1})",
    "Settings(database_url='postgresql://x')",
    "Settings(_env_file=None).text_search_config",
    "get_settings().embeddings_model",
])
def test_the_check_bites(source):
    assert _flat_reads(source)


def test_the_check_lets_grouped_reads_pass():
    assert not _flat_reads("def f(settings, search): return settings.search.hybrid_exact_max_rows, "
                           "search.hnsw_ef_search, settings.embeddings.enabled")
