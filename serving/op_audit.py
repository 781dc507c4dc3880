"""Can the official tensorflow/serving release run this SavedModel? An audit of its op types.

A SavedModel that loads in Python can still fail in tensorflow_model_server with
"Op type not registered": the server links its own, older copy of the TF-Text ops
(tensorflow/serving#2267, tensorflow/text#200) and has no kernel for Python-only
ops such as `PyFunc`. This module lists every op type in `saved_model.pb` (the
graphs and every function of their libraries, so ops inside `tf.while_loop` and
`tf.cond` bodies count) and checks each against the op set shipped for the
targeted release in `serving/data/tf_serving_ops_<release>.txt`.

Example:

>>> from serving.op_audit import audit_saved_model
>>> audit = audit_saved_model("models/sentiment/1", release="2.20")
>>> audit.ok, audit.unsupported
(True, ())
>>> print(audit.summary())
Op audit of models/sentiment/1 for tensorflow/serving 2.20 ...: OK.
  ... op types, 2 from TF-Text (FastBertNormalize, FastWordpieceTokenizeWithOffsets); all of them run in tensorflow_model_server 2.20.
>>> audit.raise_if_unsupported().ok      # OpAuditError naming the ops, when not ok
True

Command line (exit status 1 with --strict when an op is unsupported):

    python -m serving.op_audit models/sentiment/1 [--release 2.20] [--strict] [--json]
    python -m serving.op_audit --freeze [--release 2.20]      # regenerate the data file
"""

import argparse
import dataclasses
import json
import os
import sys

from serving.op_sets import load_op_set, matching_release, onednn_only_kernels
from serving.server.version_files import is_version_name

# The release of the installed TensorFlow (TF Serving X.Y runs SavedModels of TensorFlow X.Y).
DEFAULT_RELEASE = matching_release()


class OpAuditError(ValueError):
    """The SavedModel uses op types the targeted tensorflow/serving release cannot run."""


@dataclasses.dataclass(frozen=True)
class OpAudit:
    """Result of `audit_saved_model`.

    Args:
        release: the targeted tensorflow/serving release ("2.20").
        ops: sorted op type names of the graphs and their function libraries.
        tf_text_ops: the subset registered by tensorflow_text.
        unsupported: the subset the release cannot run (sorted).
        reasons: {unsupported op: why}.
        saved_model_dir: the audited directory.
        warnings: problems that do not make an op unsupported but can still fail
            in the server (functions compiled with XLA, `jit_compile=True`).
        conditional_kernels: {op: condition} for ops the release registers but
            whose CPU kernel runs only in oneDNN builds with oneDNN on (the
            quantized matmuls of an int8 export: x86-64 images yes, ARM no;
            `serving/data/onednn_only_kernels.txt` has the evidence).
    """

    release: str
    ops: tuple
    tf_text_ops: tuple
    unsupported: tuple
    reasons: dict
    saved_model_dir: str = ""
    warnings: tuple = ()
    conditional_kernels: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self):
        return not self.unsupported

    @property
    def docker_image(self):
        return f"tensorflow/serving:{self.release}.0"

    def to_json(self):
        """A JSON-ready dict (goes into assets.extra/model_card.json)."""
        return {
            "tf_serving_release": self.release,
            "docker_image": self.docker_image,
            "ok": self.ok,
            "num_ops": len(self.ops),
            "ops": list(self.ops),
            "tf_text_ops": list(self.tf_text_ops),
            "unsupported": list(self.unsupported),
            "reasons": {op: self.reasons[op] for op in self.unsupported},
            "warnings": list(self.warnings),
            "conditional_kernels": dict(self.conditional_kernels),
        }

    def summary(self):
        """Readable multi-line report."""
        where = f" of {self.saved_model_dir}" if self.saved_model_dir else ""
        head = f"Op audit{where} for tensorflow/serving {self.release} ({self.docker_image}):"
        text_note = (
            f"{len(self.tf_text_ops)} from TF-Text ({', '.join(self.tf_text_ops)})"
            if self.tf_text_ops else "none from TF-Text"
        )
        notes = [f"  Warning: {warning}" for warning in self.warnings]
        if self.conditional_kernels:
            notes.append(
                f"  Warning: {', '.join(sorted(self.conditional_kernels))}: "
                f"{next(iter(self.conditional_kernels.values()))}. tensorflow/serving:{self.release}.0 "
                f"on x86-64 runs them; an ARM image, a build without oneDNN or "
                f"TF_ENABLE_ONEDNN_OPTS=0 fails with \"Missing 0-th output\" (export float32 there)."
            )
        if self.ok:
            return "\n".join([
                f"{head} OK.",
                f"  {len(self.ops)} op types, {text_note}; all of them run in tensorflow_model_server "
                f"{self.release}.",
            ] + notes)
        lines = [f"{head} {len(self.unsupported)} of {len(self.ops)} op types cannot run there."]
        lines += [f"  - {op}: {self.reasons[op]}" for op in self.unsupported]
        if set(self.unsupported) & set(self.tf_text_ops):
            lines.append(
                "  Fix: export with the core-op tokenizer (`bert-keras export --tokenizer core`), which "
                "uses stock TensorFlow ops only, or serve with a model server built with a newer TF-Text."
            )
        if any(op in ("PyFunc", "PyFuncStateless", "EagerPyFunc") for op in self.unsupported):
            lines.append(
                "  Fix: remove tf.py_function / tf.numpy_function from the exported functions; a model "
                "server has no Python interpreter."
            )
        return "\n".join(lines + notes)

    def raise_if_unsupported(self):
        """Raises `OpAuditError` naming the unsupported ops; returns self when ok."""
        if not self.ok:
            raise OpAuditError(
                f"the SavedModel {self.saved_model_dir or ''} uses op types that tensorflow/serving "
                f"{self.release} cannot run: {', '.join(self.unsupported)}\n{self.summary()}"
            )
        return self


def read_saved_model(saved_model_dir):
    """The parsed `SavedModel` proto of `saved_model_dir` (saved_model.pb or .pbtxt)."""
    from tensorflow.core.protobuf import saved_model_pb2

    binary = os.path.join(saved_model_dir, "saved_model.pb")
    text = os.path.join(saved_model_dir, "saved_model.pbtxt")
    proto = saved_model_pb2.SavedModel()
    if os.path.isfile(binary):
        with open(binary, "rb") as handle:
            proto.ParseFromString(handle.read())
    elif os.path.isfile(text):
        from google.protobuf import text_format

        with open(text, encoding="utf-8") as handle:
            text_format.Parse(handle.read(), proto)
    else:
        hint = ""
        if os.path.isdir(saved_model_dir):
            versions = sorted(
                (int(n) for n in os.listdir(saved_model_dir)
                 if is_version_name(n) and os.path.isdir(os.path.join(saved_model_dir, n))),
            )
            if versions:
                hint = f" (it holds versions {versions}: pass {os.path.join(saved_model_dir, str(versions[-1]))})"
        raise FileNotFoundError(f"{binary}: no saved_model.pb in {saved_model_dir}{hint}")
    return proto


def saved_model_op_types(saved_model):
    """Sorted op type names of every graph and function in a `SavedModel` proto.

    Nodes that call a library function by its name are calls, not op types, and
    are left out; the called function's own nodes are counted.
    """
    types = set()
    for meta_graph in saved_model.meta_graphs:
        graph = meta_graph.graph_def
        function_names = {f.signature.name for f in graph.library.function}
        function_names |= {g.function_name for g in graph.library.gradient}
        types |= {node.op for node in graph.node}
        for function in graph.library.function:
            types |= {node.op for node in function.node_def}
        types -= function_names
    return sorted(types)


def xla_compiled_functions(saved_model):
    """Names of the functions saved with `jit_compile=True` (attr `_XlaMustCompile`)."""
    names = set()
    for meta_graph in saved_model.meta_graphs:
        for function in meta_graph.graph_def.library.function:
            attr = function.attr.get("_XlaMustCompile")
            if attr is not None and attr.b:
                names.add(function.signature.name)
    return sorted(names)


def audit_op_types(op_types, release=DEFAULT_RELEASE, saved_model_dir="", warnings=()):
    """Audits a collection of op type names against the shipped op set of `release`."""
    op_set = load_op_set(release)
    ops = tuple(sorted(set(op_types)))
    reasons = {op: op_set.reason_unsupported(op) for op in ops}
    unsupported = tuple(op for op in ops if reasons[op] is not None)
    onednn_only = onednn_only_kernels()
    return OpAudit(
        release=op_set.release,
        ops=ops,
        tf_text_ops=tuple(op for op in ops if op in op_set.all_tf_text),
        unsupported=unsupported,
        reasons={op: reasons[op] for op in unsupported},
        saved_model_dir=str(saved_model_dir),
        warnings=tuple(warnings),
        conditional_kernels={op: onednn_only[op] for op in ops if op in onednn_only},
    )


def audit_saved_model(saved_model_dir, release=DEFAULT_RELEASE):
    """Audits the SavedModel in `saved_model_dir` for tensorflow/serving `release`.

    Args:
        saved_model_dir: a directory holding saved_model.pb (one version directory).
        release: "2.20" (a release with a data file in serving/data/).

    Returns:
        `OpAudit`.
    """
    saved_model_dir = os.fspath(saved_model_dir)
    proto = read_saved_model(saved_model_dir)
    warnings = []
    xla = xla_compiled_functions(proto)
    if xla:
        # tensorflow/serving main.cc: "Enable XLA:CPU JIT (default is disabled). With XLA:CPU JIT
        # disabled, models utilizing this feature will return bad Status".
        warnings.append(
            f"{len(xla)} function(s) saved with jit_compile=True ({', '.join(xla[:3])}"
            f"{', ...' if len(xla) > 3 else ''}): tensorflow_model_server {release} refuses to compile "
            f"them on CPU unless started with --xla_cpu_compilation_enabled=true; export without "
            f"jit_compile instead."
        )
    return audit_op_types(
        saved_model_op_types(proto), release=release, saved_model_dir=saved_model_dir, warnings=warnings,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m serving.op_audit",
        description="Check that a SavedModel only uses op types the official tensorflow/serving "
                    "release can run, or regenerate the shipped op list (--freeze).",
    )
    parser.add_argument("saved_model_dir", nargs="?", help="a SavedModel version directory")
    parser.add_argument("--release", default=DEFAULT_RELEASE,
                        help=f"tensorflow/serving release (default {DEFAULT_RELEASE})")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when an op is unsupported")
    parser.add_argument("--json", action="store_true", help="print the audit as JSON")
    parser.add_argument("--freeze", action="store_true",
                        help="regenerate serving/data/tf_serving_ops_RELEASE.txt from the installed TensorFlow")
    parser.add_argument("--output", help="with --freeze: write here instead of the package data file")
    args = parser.parse_args(argv)
    try:
        if args.freeze:
            from serving.op_freeze import freeze_op_set

            print(f"wrote {freeze_op_set(args.release, args.output)}")
            return 0
        if not args.saved_model_dir:
            parser.error("give a SavedModel directory, or --freeze")
        audit = audit_saved_model(args.saved_model_dir, release=args.release)
    except (OSError, ValueError) as error:
        print(f"op_audit: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(audit.to_json(), indent=2) if args.json else audit.summary())
    return 1 if (args.strict and not audit.ok) else 0


if __name__ == "__main__":
    sys.exit(main())
