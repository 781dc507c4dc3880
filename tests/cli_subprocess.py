"""Running `bert-keras` as a user does, for the CLI tests: the installed script in a fresh
process, an environment without `TF_CPP_MIN_LOG_LEVEL` (a user's shell), and the stderr
patterns that a quiet command never prints.
"""

import os
import re
import shlex
import subprocess
import sys

BERT_KERAS = os.path.join(os.path.dirname(sys.executable), "bert-keras")

# What the issue saw on every command, and what else TensorFlow and numpy print.
NOISE = {
    "TF C++ log line": re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] ", re.M),
    # TensorFlow 2.21 logs through absl, before absl is initialised, whatever TF_CPP_MIN_LOG_LEVEL says.
    "TF C++ log line (absl)": re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\]|absl::InitializeLog", re.M),
    "CUDA probe": re.compile(r"cuInit"),
    "oneDNN": re.compile(r"oneDNN"),
    "absl checkpoint saver": re.compile(r"Sharding callback duration"),
    "AutoGraph": re.compile(r"AutoGraph could not transform"),
    "TF deprecation / renaming": re.compile(r"is deprecated|Please use .* instead|will be renamed|WARNING:tensorflow"),
    "numpy copy keyword": re.compile(r"copy keyword"),
    "Python warning": re.compile(r"\w+Warning: "),
}


def user_environment():
    """`os.environ` less what tests/conftest.py sets for the test process itself."""
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return env


def noise_in(stderr):
    """{pattern name: first match} of the `NOISE` patterns found in `stderr`."""
    return {name: pattern.search(stderr).group(0) for name, pattern in NOISE.items() if pattern.search(stderr)}


def run_bert_keras(argv, cwd, *, quiet=True):
    """Runs `bert-keras ARGS` (argv[0] may be "bert-keras"); fails on a non-zero exit or,
    with `quiet`, on noise in stderr. Returns the `CompletedProcess`."""
    if argv and argv[0] == "bert-keras":
        argv = argv[1:]
    result = subprocess.run([BERT_KERAS, *argv], capture_output=True, text=True, cwd=cwd,
                            env=user_environment(), timeout=600)
    shown = shlex.join(["bert-keras", *argv])
    assert result.returncode == 0, f"`{shown}` failed:\n{result.stdout}\n{result.stderr}"
    if quiet:
        assert not noise_in(result.stderr), f"`{shown}` printed noise {noise_in(result.stderr)}:\n{result.stderr}"
    return result
