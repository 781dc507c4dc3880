"""The import-time check of the TensorFlow stack against the tested matrix."""

import subprocess
import sys

import pytest

from bert_keras import compat


def test_installed_stack_is_the_tested_matrix():
    assert compat.problems() == []


@pytest.mark.parametrize(
    "found, expected",
    [
        ({"tensorflow": "2.19.0", "tensorflow-text": "2.20.1", "keras": "3.15.1"},
         ["tensorflow: 2.19.0 installed", "different releases"]),
        ({"tensorflow": "2.20.0", "tensorflow-text": None, "keras": "3.15.1"},
         ["tensorflow-text: not installed"]),
        ({"tensorflow": "2.20.0", "tensorflow-text": "2.20.1", "keras": "2.15.0"},
         ["keras: 2.15.0 installed, need >=3.15"]),
    ],
)
def test_mismatches_are_named(found, expected):
    lines = "\n".join(compat.problems(found))
    for fragment in expected:
        assert fragment in lines


def test_import_raises_one_clear_message_before_tensorflow_loads():
    code = (
        "import sys\n"
        "from bert_keras import compat\n"
        "compat.installed_versions = lambda: {'tensorflow': '2.16.1', 'tensorflow-text': '2.20.1', 'keras': '3.15.1'}\n"
        "try:\n"
        "    compat.check_environment()\n"
        "except compat.IncompatibleEnvironmentError as e:\n"
        "    print(e)\n"
        "assert 'tensorflow' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "tensorflow: 2.16.1 installed, need ~=2.20.0" in out.stdout
    assert "pip install" in out.stdout
