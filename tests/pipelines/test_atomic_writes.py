"""The one atomic-write helper: complete or untouched targets, umask permissions, nothing left behind."""

import os
import stat
import threading

import pytest

from pipelines.atomic_writes import (atomic_directory, atomic_file, install_directory,
                                     make_staging_directory, staged_path, write_json, write_text)


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _hidden(directory):
    return sorted(name for name in os.listdir(directory) if name.startswith("."))


def test_files_get_the_mode_open_would_give(tmp_path, umask_022):
    text = write_text(tmp_path / "a.txt", "x")
    with staged_path(tmp_path / "b.keras") as temporary:
        assert temporary.endswith(".keras")  # writers that dispatch on the suffix still work
        open(temporary, "w").write("y")
    assert _mode(text) == 0o644
    assert _mode(tmp_path / "b.keras") == 0o644
    plain = tmp_path / "plain.txt"
    plain.write_text("z")
    assert _mode(text) == _mode(plain)


def test_directories_are_readable_by_another_user(tmp_path, umask_022):
    # The export defect: mkdtemp's 0700 made versions unreadable to a server running as another user.
    with atomic_directory(tmp_path / "model") as staging:
        write_text(os.path.join(staging, "config.json"), "{}")
    assert _mode(tmp_path / "model") == 0o755
    assert _mode(make_staging_directory(str(tmp_path / "base"), ".export-1-")) == 0o755


def test_a_failed_write_leaves_the_target_as_it_was(tmp_path):
    path = tmp_path / "results.json"
    write_json(path, {"accuracy": 0.5})
    with pytest.raises(RuntimeError):
        with atomic_file(path) as f:
            f.write('{"accuracy": 0.9')
            raise RuntimeError("killed mid-write")
    assert path.read_text() == '{\n  "accuracy": 0.5\n}\n'
    assert _hidden(tmp_path) == []


def test_a_failed_directory_leaves_nothing(tmp_path):
    with pytest.raises(ValueError):
        with atomic_directory(tmp_path / "model") as staging:
            write_text(os.path.join(staging, "weights"), "half")
            raise ValueError("boom")
    assert os.listdir(tmp_path) == []


def test_merge_keeps_unrelated_files_and_replace_drops_them(tmp_path):
    target = tmp_path / "model"
    with atomic_directory(target) as staging:
        write_text(os.path.join(staging, "old.txt"), "old")
        write_text(os.path.join(staging, "shared.txt"), "1")
    with atomic_directory(target) as staging:
        write_text(os.path.join(staging, "shared.txt"), "2")
    assert sorted(os.listdir(target)) == ["old.txt", "shared.txt"]
    assert (target / "shared.txt").read_text() == "2"
    with atomic_directory(target, replace=True) as staging:
        write_text(os.path.join(staging, "new.txt"), "new")
    assert os.listdir(target) == ["new.txt"]
    assert _hidden(tmp_path) == []


def test_install_directory_refuses_or_replaces(tmp_path):
    target = tmp_path / "1"
    first = make_staging_directory(str(tmp_path), ".s-")
    write_text(os.path.join(first, "saved_model.pb"), "v1")
    install_directory(first, str(target))
    second = make_staging_directory(str(tmp_path), ".s-")
    write_text(os.path.join(second, "saved_model.pb"), "v2")
    with pytest.raises(FileExistsError):
        install_directory(second, str(target))
    install_directory(second, str(target), overwrite=True)
    assert (target / "saved_model.pb").read_text() == "v2"
    assert _hidden(tmp_path) == []


def test_text_mode_only_w_or_wb(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        with atomic_file(tmp_path / "x", "a"):
            pass


def test_an_export_version_is_readable_by_a_server_running_as_another_user(tmp_path, umask_022):
    # Issue 13, item 8: export version directories were created 0700 (mkdtemp).
    from serving.exporter import install_version, make_staging_dir

    model_dir = str(tmp_path / "sentiment")
    staging = make_staging_dir(model_dir, 1)
    write_text(os.path.join(staging, "saved_model.pb"), "graph")
    install_version(staging, os.path.join(model_dir, "1"))
    assert _mode(os.path.join(model_dir, "1")) == 0o755
    assert _mode(os.path.join(model_dir, "1", "saved_model.pb")) == 0o644
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        install_version(make_staging_dir(model_dir, 1), os.path.join(model_dir, "1"))


# -- staging left by a killed run (SIGKILL: no cleanup runs) -------------------------------------

_KILLED_WRITER = """
import importlib.util, os, signal, sys
spec = importlib.util.spec_from_file_location("atomic_writes", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
staging = module.make_staging_directory(sys.argv[2], sys.argv[3])
open(os.path.join(staging, "variables.data"), "wb").write(b"\\0" * 100000)
with module.staged_path(os.path.join(sys.argv[2], "model.keras")) as temporary:
    open(temporary, "wb").write(b"half")
    print(staging, flush=True)
    if sys.argv[4] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.readline()  # "live": wait until the test is done
"""


def _start_writer(parent, prefix, how):
    import subprocess
    import sys

    import pipelines.atomic_writes as module

    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, module.__file__, parent, prefix, how],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    staging = child.stdout.readline().strip()
    assert os.path.isdir(staging)
    return child, staging


def test_the_next_write_removes_staging_of_killed_runs_only(tmp_path):
    from serving.exporter import make_staging_dir

    model_dir = str(tmp_path / "sentiment")
    live, live_staging = _start_writer(model_dir, ".export-2-", "live")
    killed, killed_staging = _start_writer(model_dir, ".export-1-", "kill")
    killed.wait()
    try:
        leftovers = _hidden(model_dir)
        assert len(leftovers) == 4  # two staging directories, two half-written model.keras
        mine = make_staging_dir(model_dir, 3)  # what the next export does first
        # the killed run's directory and temporary file are gone; the live run's stay
        assert sorted(_hidden(model_dir)) == sorted(
            [os.path.basename(live_staging), os.path.basename(mine)]
            + [name for name in leftovers if name.startswith(".model.keras.tmp-o%d." % live.pid)])
    finally:
        live.communicate("\n")
    assert not os.path.exists(killed_staging)


def test_staging_of_a_recycled_pid_or_another_host_is_judged_right(tmp_path):
    from pipelines.atomic_writes import owner_tag, staging_owner_is_gone

    pid, start, host = owner_tag().split("-")[-1][1:].split(".")
    assert not staging_owner_is_gone(f".x.tmp-{owner_tag()}-abc")
    assert staging_owner_is_gone(f".x.tmp-o{pid}.{int(start) + 1}.{host}-abc")  # same pid, another process
    assert not staging_owner_is_gone(f".x.tmp-o999999999.1.{'0' * 8 if host != '0' * 8 else '1' * 8}-abc")
    assert not staging_owner_is_gone("x.tmp-abc") and not staging_owner_is_gone("notes.txt")


def test_a_replaced_directory_moved_aside_by_a_killed_run_is_put_back(tmp_path):
    import subprocess
    import sys

    from pipelines.atomic_writes import owner_tag, remove_stale_staging

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    aside = tmp_path / f".replaced-1-{owner_tag(child.pid)}-abc"
    aside.mkdir()
    (aside / "saved_model.pb").write_text("v1")
    remove_stale_staging(str(tmp_path))  # killed between "old aside" and "new in": the old comes back
    assert (tmp_path / "1" / "saved_model.pb").read_text() == "v1"
    aside.mkdir()
    remove_stale_staging(str(tmp_path))  # killed after "new in": the old copy goes
    assert os.listdir(tmp_path) == ["1"]


def test_a_scratch_directory_left_by_a_killed_run_is_removed_by_the_next(tmp_path, monkeypatch):
    import subprocess
    import sys
    import tempfile

    from pipelines.atomic_writes import owner_tag, scratch_directory

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    left = tmp_path / f".bert-keras-assets-{owner_tag(child.pid)}-abc"  # its export was SIGKILLed
    left.mkdir()
    (left / "vocab.txt").write_text("[PAD]\n")
    (tmp_path / "bert-keras-assets-mine").mkdir()  # not a name this tool gives: left alone
    with scratch_directory("bert-keras-assets-") as scratch:
        assert not left.exists() and stat.S_IMODE(os.stat(scratch).st_mode) == 0o700
    assert os.listdir(tmp_path) == ["bert-keras-assets-mine"]


# -- owners: one live process per run directory ---------------------------------------------

_CLAIM = r'''
import sys, time
import pipelines.atomic_writes as atomic_writes
from pipelines.atomic_writes import claim_owner
judge = atomic_writes.running_owner
def slow_judge(tag):  # a claimant paused between reading a gone owner's tag and acting on it
    time.sleep(0.3)
    return judge(tag)
atomic_writes.running_owner = slow_judge
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # every claimant starts at the same moment
print("won" if claim_owner(sys.argv[1]) is None else "lost", flush=True)
sys.stdin.read()  # alive (the winner: a live owner) until the test has every claimant's answer
'''


@pytest.mark.parametrize("left_by_a_killed_run", [False, True])
def test_claim_owner_of_simultaneous_claims_exactly_one_wins(tmp_path, left_by_a_killed_run):
    import subprocess
    import sys
    import time

    from pipelines.atomic_writes import owner_tag

    path = tmp_path / "run.owner"
    if left_by_a_killed_run:
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        path.write_text(owner_tag(dead.pid) + "\n")
    start = time.time() + 2.0
    claimants = [subprocess.Popen([sys.executable, "-c", _CLAIM, str(path), str(start)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True,
                                  cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
                 for _ in range(6)]
    # The winner lives until every claimant has answered (a fixed 4 s was not enough when a loaded
    # machine started a claimant late: it found the winner gone, took over and won too).
    killer = threading.Timer(120, lambda: [claimant.kill() for claimant in claimants])
    killer.start()
    try:
        outcomes = sorted(claimant.stdout.readline().strip() for claimant in claimants)
    finally:
        killer.cancel()
        for claimant in claimants:
            claimant.stdin.close()
            claimant.wait(60)
    assert outcomes == ["lost"] * 5 + ["won"]
    assert _hidden(tmp_path) == []  # no temporary left by the winner or the losers


def test_claim_owner_refuses_a_live_owner_and_takes_over_a_dead_ones(tmp_path):
    import subprocess
    import sys

    from pipelines.atomic_writes import claim_owner, owner_tag, release_owner

    path = tmp_path / "run.owner"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path.write_text(owner_tag(live.pid) + "\n")
        assert claim_owner(path) == live.pid
        assert path.read_text().strip() == owner_tag(live.pid)  # untouched
        release_owner(path)  # not this process's: it stays
        assert path.exists()
    finally:
        live.kill()
        live.wait()
    assert claim_owner(path) is None  # its owner is gone
    assert path.read_text().strip() == owner_tag()
    release_owner(path)
    assert not path.exists()


def test_a_write_that_cannot_fit_is_refused_before_it_starts(tmp_path, monkeypatch):
    import collections
    import errno
    import shutil

    import numpy as np

    from pipelines.atomic_writes import check_free_space, variables_nbytes

    assert variables_nbytes([np.zeros((3, 4), np.float32), np.zeros(5, np.int64)]) == 3 * 4 * 4 + 5 * 8
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 30_000_000, 30_000_000))
    target = tmp_path / "run" / "not-made-yet"  # judged by its nearest existing parent's file system
    check_free_space(target, 20_000_000, "the weights")  # fits
    with pytest.raises(OSError) as refused:
        check_free_space(target, 276_000_000, "the run's backup")
    assert refused.value.errno == errno.ENOSPC
    assert f"not enough space in {target} for the run's backup: it needs about 280 MB, 30 MB is free" in str(refused.value)
    with pytest.raises(OSError, match="for the weights: it needs"):
        with staged_path(tmp_path / "model.weights.h5", size=10**9, what="the weights"):
            raise AssertionError("the writer must not run")
    assert os.listdir(tmp_path) == []  # nothing staged, nothing left


def test_a_write_error_without_a_file_name_gets_the_target_s(tmp_path):
    import errno

    target = tmp_path / "predictions.jsonl"
    with pytest.raises(OSError) as failed:
        with atomic_file(target) as f:
            f.write("{}\n")
            raise OSError(errno.EFBIG, "File too large")
    assert failed.value.errno == errno.EFBIG
    assert str(failed.value) == (f"[Errno 27] writing {target}: File too large (nothing was written; free some "
                                 "space and run the same command again)")
    with pytest.raises(OSError) as locked:  # not a space problem: no space advice, no "[Errno None]"
        with staged_path(tmp_path / "m.weights.h5"):
            raise OSError("Unable to lock file")
    assert str(locked.value) == f"writing {tmp_path / 'm.weights.h5'}: Unable to lock file (nothing was written)"
    assert os.listdir(tmp_path) == []
    with pytest.raises(OSError, match="8448 requested and 2528 written"):
        with staged_path(tmp_path / "vectors.npy"):
            raise OSError("8448 requested and 2528 written")
    with pytest.raises(FileNotFoundError) as named:  # an error naming its own file stays as it is
        with atomic_file(tmp_path / "a.txt"):
            open(tmp_path / "missing" / "x")
    assert named.value.filename.endswith("x")


def test_files_a_writer_made_private_in_a_directory_are_readable_as_open_makes(tmp_path, umask_022):
    with atomic_directory(tmp_path / "hf") as staging:
        private = os.path.join(staging, "model.safetensors")
        with open(private, "wb") as f:
            f.write(b"\x00")
        os.chmod(private, 0o600)  # what safetensors' writer leaves
    assert _mode(tmp_path / "hf" / "model.safetensors") == 0o644
