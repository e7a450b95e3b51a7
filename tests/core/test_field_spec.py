"""One field spec, vocabularies written once (issue 30, item 3): a choice list or range that two faces share is a
name in `vitstudio.core.fields`, and every face (CLI options, training settings, analysis parameters, view fields)
takes that object rather than a copy of its values."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from vitstudio.core import fields
from vitstudio.core.fields import FieldSpec, Range

ROOT = Path(__file__).resolve().parents[2]
VOCABULARIES = {name: value for name, value in vars(fields).items()
                if name.isupper() and isinstance(value, tuple) and all(isinstance(v, str) for v in value)}


def _string_sequences(tree: ast.AST):
    """(line, values) of every tuple, list or set literal of two or more strings."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            yield node.lineno, tuple(e.value for e in node.elts)


def _is_run(values: tuple, vocabulary: tuple) -> bool:
    """`values` is `vocabulary[i:i + len(values)]` for some i (two values at least)."""
    n = len(values)
    return n >= 2 and any(vocabulary[i:i + n] == values for i in range(len(vocabulary) - n + 1))


def test_no_vocabulary_is_written_twice():
    """Outside fields.py no literal lists a run of two or more values of a vocabulary in its order (a copy, or a copy
    of part of it: ("to", "by") of the directions), so a new precision, decoder or colormap cannot reach one face
    and miss another. A membership test of other values (`device in ("auto", "cuda")`) is not a copy."""
    assert {"PRECISIONS", "DECODERS", "DEVICES", "FUSIONS", "DIRECTIONS", "COLORMAPS"} <= set(VOCABULARIES)
    copies = []
    for path in sorted((ROOT / "vitstudio").rglob("*.py")):
        if path.name == "fields.py":
            continue
        for line, values in _string_sequences(ast.parse(path.read_text(), str(path))):
            for name, vocabulary in VOCABULARIES.items():
                if _is_run(values, vocabulary):
                    copies.append(f"{path.relative_to(ROOT)}:{line} {values} copies {name}")
    assert not copies, "\n".join(copies)


def test_the_check_finds_a_copy():
    """The scan above is not blind: it finds the copies this code once had.

    The scan finds the copies the code once had (CLI precision list, the panel's ("to", "by"), overlays' colormaps) and
    not a membership test.
    """
    tree = ast.parse('p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"])\n'
                     'direction = Field("to", str, choices=("to", "by"))\n')
    found = [values for _, values in _string_sequences(tree)]
    assert ("auto", "fp32", "bf16", "fp16") in found and ("to", "by") in found
    assert _is_run(found[0], fields.PRECISIONS) and _is_run(found[1], fields.DIRECTIONS)
    old_colormaps = ("inferno", "viridis", "magma", "plasma", "jet", "turbo", "gray", "RdBu_r")  # overlays.py's
    assert _is_run(old_colormaps[:4], fields.COLORMAPS) and not _is_run(("auto", "cuda"), fields.DEVICES)


def test_every_face_takes_the_shared_objects():
    """The CLI's options, the training settings and the analysis parameters hold the vocabulary objects (and the
    view fields that show an analysis parameter hold that parameter's spec).

    The CLI's --precision/--decoder/--fusion/--direction/--cmap choices, TrainConfig's precision choices and device
    suggestions, the rollout/token parameters hold the vocabulary objects themselves.
    """
    from vitstudio.cli.app import build_parser
    from vitstudio.core.analysis import registry
    from vitstudio.core.train.recipes import TrainConfig
    from vitstudio.core.train.schema import settings_of

    parser = build_parser()
    sub = {a.dest: a for a in parser._subparsers._group_actions[0].choices["predict"]._actions}
    assert sub["precision"].choices is fields.PRECISIONS and sub["decoder"].choices is fields.DECODERS
    explain = {a.dest: a for a in parser._subparsers._group_actions[0].choices["explain"]._actions}
    assert explain["fusion"].choices is fields.FUSIONS and explain["direction"].choices is fields.DIRECTIONS
    assert explain["cmap"].choices is fields.COLORMAPS
    settings = {s.name: s for s in settings_of(TrainConfig)}
    assert settings["precision"].choices is fields.PRECISIONS and settings["device"].suggestions is fields.DEVICES
    rollout = registry.get("rollout")
    assert rollout.param("fusion").choices is fields.FUSIONS and rollout.param("discard").range is fields.DISCARD
    assert registry.get("token").param("direction").choices is fields.DIRECTIONS


def test_a_field_spec_refuses_what_its_range_and_choices_refuse():
    """FieldSpec coerces 0 to 0.0, refuses outside a half-open range, a wrong type and an unknown choice, naming the
    field.
    """
    spec = FieldSpec(0.0, float, range=Range(0, 1, hi_open=True))
    assert spec.coerce("discard", 0) == 0.0 and type(spec.coerce("discard", 0)) is float
    for bad in (1.0, -0.1):
        with pytest.raises(ValueError, match=r"discard.*\[0, 1\)"):
            spec.coerce("discard", bad)
    with pytest.raises(TypeError, match="discard"):
        spec.coerce("discard", "0.5")
    with pytest.raises(ValueError, match="'median'"):
        FieldSpec("mean", str, choices=fields.FUSIONS).coerce("fusion", "median")


def test_the_vocabularies_import_without_torch():
    """`import vitstudio.core.fields` loads no torch (subprocess). [subprocess]"""
    code = "import sys, vitstudio.core.fields; assert 'torch' not in sys.modules, 'torch imported'"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_every_registry_reference_resolves():
    """Every "module:function" an entry names (compute, applies, over_folder, view, view_job) imports and is a
    function: a renamed function fails here, not when someone first picks the method (issue 30, item 5)."""
    from vitstudio.core.analysis import registry

    missing = []
    for entry in registry.REGISTRY.values():
        refs = {"compute": entry.compute, "over_folder": entry.over_folder, "view": entry.view,
                "view_job": entry.view_job, **{f"applies[{i}]": ref for i, ref in enumerate(entry.applies)}}
        for role, ref in refs.items():
            if ref is None:
                continue
            try:
                target = registry.load(ref)
            except (ImportError, AttributeError) as exc:
                missing.append(f"{entry.name}.{role} = {ref!r}: {exc}")
                continue
            if not callable(target):
                missing.append(f"{entry.name}.{role} = {ref!r} is not callable")
    assert not missing, "\n".join(missing)
    assert registry.load("vitstudio.core.analysis.attention:explain_rollout").__name__ == "explain_rollout"
    with pytest.raises(AttributeError):
        registry.load("vitstudio.core.analysis.attention:no_such_function")


NAME_LISTS = ("vitstudio.core.fields", "vitstudio.core.train.runs", "vitstudio.core.models.run_record",
              "vitstudio.core.train.recipes", "vitstudio.core.analysis.registry")


def test_no_name_list_is_written_twice():
    """The field-name lists beside the vocabularies (an epoch's metric names, run statuses, training scopes, the
    keys of the shared attention overview) are named once too: no literal in the core, the command line, the app's
    model or the GUI copies a run of one in its order, or three or more of its names in any order."""
    import importlib

    lists = {}
    for module in NAME_LISTS:
        source = importlib.import_module(module)
        defined = {t.id for node in ast.parse(Path(source.__file__).read_text()).body if isinstance(node, ast.Assign)
                   for t in node.targets if isinstance(t, ast.Name)}  # not the names it imports
        lists.update({f"{module}.{name}": value for name, value in vars(source).items()
                      if name.isupper() and name in defined and isinstance(value, tuple) and len(value) >= 2
                      and all(isinstance(v, str) for v in value)})
    assert {"vitstudio.core.fields.EPOCH_CURVES", "vitstudio.core.train.runs.STOPPED",
            "vitstudio.core.models.run_record.FINISHED", "vitstudio.core.analysis.registry.OVERVIEW_KEYS"} <= set(lists)
    copies = []
    for path in sorted((ROOT / "vitstudio").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for line, values in _string_sequences(ast.parse(path.read_text(), str(path))):
            for name, names in lists.items():
                if name.rsplit(".", 1)[0] != module and (_is_run(values, names) or (
                        len(values) >= 3 and set(values) <= set(names))):
                    copies.append(f"{path.relative_to(ROOT)}:{line} {values} copies {name}")
    assert not copies, "\n".join(copies)
