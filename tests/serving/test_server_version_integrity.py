"""A version is served only whole (issue 40, cases 1 and 2).

- The exporter writes `assets.extra/export_manifest.json` last (sizes and SHA-256 of every file);
  the server loads a copy of the version only when every listed file is there at its size and
  the checksums match.
- A half-copied version never replaces the serving one: `labels.txt` arriving last and slowly is
  waited for, and no request is ever answered with a label "".
- A label table built from a `labels.txt` with fewer lines than the model has labels fails the
  request by name (in the graph, so TF Serving answers the same), never `""`.
- A served version whose files change after it loaded is loaded again; changed files that do not
  load leave the old graph serving.
- The window limit is read from the graph: without a model card (nor a manifest) the export
  refuses what an intact export refuses.
"""

import os
import shutil
import threading
import time

import numpy as np
import pytest

from serving.export_manifest import (COMPLETE, DAMAGED, MANIFEST_FILE, WRITING, check_manifest,
                                     write_manifest)

PAIR = {"text": np.array([b"good film", b"bad film"], dtype=object),
        "text_b": np.array([b"i liked it", b"i did not"], dtype=object)}
LABELS = {b"neg", b"neutral", b"pos"}


def _copy_version(exported_model, base, version):
    base_path, name, exported = exported_model("classification")
    target = os.path.join(base, str(version))
    shutil.copytree(os.path.join(base_path, name, str(exported)), target)
    return target


def _wait_for(condition, seconds=300.0):
    # A safety net, not a bound: on a loaded CI machine (two test workers on two cores) loading a
    # version took over 30 s; the wait ends as soon as the condition holds.
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_the_manifest_tells_a_whole_copy_from_a_partial_or_damaged_one(exported_model, tmp_path):
    version = _copy_version(exported_model, str(tmp_path), 1)
    assert check_manifest(version, checksums=True).state == COMPLETE
    labels = os.path.join(version, "assets", "labels.txt")
    whole = open(labels, "rb").read()
    with open(labels, "wb") as f:
        f.write(whole[:5])  # a copy under way
    partial = check_manifest(version)
    assert (partial.state, partial.problem) == (WRITING, f"assets/labels.txt: 5 of {len(whole)} bytes")
    with open(labels, "wb") as f:
        f.write(whole.replace(b"neg", b"NEG"))  # same size, other bytes
    assert check_manifest(version).state == COMPLETE  # sizes alone cannot tell ...
    damaged = check_manifest(version, checksums=True)  # ... the checksums do
    assert damaged.state == DAMAGED and "assets/labels.txt" in damaged.problem
    os.remove(labels)
    assert check_manifest(version).problem == "assets/labels.txt: not there yet"
    manifest = os.path.join(version, MANIFEST_FILE)
    with open(manifest, "r+b") as f:
        f.truncate(40)  # the manifest itself half copied
    assert check_manifest(version).state == WRITING
    os.remove(manifest)
    assert check_manifest(version).state == "absent"


def test_a_version_whose_labels_arrive_last_and_slowly_never_answers_a_wrong_label(exported_model, tmp_path):
    from serving.server import InferenceEngine, ModelSource

    base = str(tmp_path / "model")
    os.makedirs(base)
    _copy_version(exported_model, base, 1)
    engine = InferenceEngine([ModelSource("pairs", base)], poll_interval_s=0.05)
    engine.start()
    answers, errors, stop = [], [], threading.Event()

    def client():
        while not stop.is_set():
            try:
                version, _, outputs = engine.predict_arrays("pairs", inputs=PAIR)
                answers.append((version, set(outputs["label"].tolist())))
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                errors.append(exc)

    reader = threading.Thread(target=client)
    reader.start()
    try:
        # Version 2 arrives file by file, labels.txt last, 7 bytes every 0.3 s.
        staging = str(tmp_path / "staging")
        _copy_version(exported_model, staging, 2)
        labels = open(os.path.join(staging, "2", "assets", "labels.txt"), "rb").read()
        os.remove(os.path.join(staging, "2", "assets", "labels.txt"))
        shutil.copytree(os.path.join(staging, "2"), os.path.join(base, "2"))
        with open(os.path.join(base, "2", "assets", "labels.txt"), "wb") as f:
            for start in range(0, len(labels), 7):
                f.write(labels[start:start + 7])
                f.flush()
                time.sleep(0.3)
                assert engine.model_status("pairs")[0]["version"] != 2 or \
                    engine.model_status("pairs")[0]["state"] != "AVAILABLE"
        assert _wait_for(lambda: any(v == 2 for v, _ in answers[-5:])), engine.model_status("pairs")
    finally:
        stop.set()
        reader.join()
        engine.stop(drain_timeout_s=5)
    assert not errors, errors[:3]
    assert answers and all(labels <= LABELS for _, labels in answers), [a for a in answers if not a[1] <= LABELS][:3]
    assert {v for v, _ in answers} == {1, 2}


def test_a_label_table_shorter_than_the_labels_fails_by_name_and_the_old_version_serves(exported_model, tmp_path):
    from serving.server import InferenceEngine, ModelSource

    base = str(tmp_path / "model")
    os.makedirs(base)
    _copy_version(exported_model, base, 1)
    broken = _copy_version(exported_model, base, 2)
    os.remove(os.path.join(broken, MANIFEST_FILE))  # not one of our copies: the settle rule only
    with open(os.path.join(broken, "assets", "labels.txt"), "w", encoding="utf-8") as f:
        f.write("neg\n")  # one of the three labels
    old = time.time() - 60
    for root, _, files in os.walk(broken):
        for name in files:
            os.utime(os.path.join(root, name), (old, old))
    engine = InferenceEngine([ModelSource("pairs", base)], poll_interval_s=0)
    engine.start()
    try:
        (two, one) = engine.model_status("pairs")
        assert two["state"] == "END" and "labels.txt" in two["error_message"], two  # warmup caught it
        assert one["state"] == "AVAILABLE"
        version, _, outputs = engine.predict_arrays("pairs", inputs=PAIR)
        assert version == 1 and set(outputs["label"].tolist()) <= LABELS
    finally:
        engine.stop(drain_timeout_s=5)
    # Served directly (as TF Serving would, without the warmup): an error naming the file, never "".
    import tensorflow as tf

    signature = tf.saved_model.load(broken).signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels.txt does not hold all 3 labels of the model"):
        signature(text=tf.constant(PAIR["text"].astype(bytes)), text_b=tf.constant(PAIR["text_b"].astype(bytes)))


def test_a_served_version_whose_files_change_is_loaded_again(exported_model, tmp_path):
    from serving.server import InferenceEngine, ModelSource

    base = str(tmp_path / "model")
    os.makedirs(base)
    version = _copy_version(exported_model, base, 1)
    engine = InferenceEngine([ModelSource("pairs", base)], poll_interval_s=0.05)
    engine.start()
    labels = os.path.join(version, "assets", "labels.txt")
    try:
        assert set(engine.predict_arrays("pairs", inputs=PAIR)[2]["label"].tolist()) <= LABELS
        # Changed against the manifest: the changed files do not load, the loaded graph serves on.
        with open(labels, "w", encoding="utf-8") as f:
            f.write("negative\nneutral\npositive\n")
        time.sleep(0.5)
        assert set(engine.predict_arrays("pairs", inputs=PAIR)[2]["label"].tolist()) <= LABELS
        # Re-exported by hand without a manifest: loaded again with the new names.
        os.remove(os.path.join(version, MANIFEST_FILE))
        renamed = {b"negative", b"neutral", b"positive"}
        assert _wait_for(lambda: set(engine.predict_arrays("pairs", inputs=PAIR)[2]["label"].tolist()) <= renamed)
    finally:
        engine.stop(drain_timeout_s=5)


def test_write_manifest_lists_every_file_but_itself(tmp_path):
    (tmp_path / "variables").mkdir()
    (tmp_path / "saved_model.pb").write_bytes(b"x" * 10)
    (tmp_path / "variables" / "variables.index").write_bytes(b"")
    write_manifest(str(tmp_path))
    import json

    files = json.loads((tmp_path / MANIFEST_FILE).read_text())["files"]
    assert sorted(files) == ["saved_model.pb", "variables/variables.index"]
    assert files["saved_model.pb"]["size"] == 10
    assert files["variables/variables.index"]["sha256"] == \
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # SHA-256 of b""
