"""TF-Text is a set of custom ops compiled against one TensorFlow release.

Loading it into another release dies with `undefined symbol`; this check runs
first and says which versions are installed instead.
"""

import os
from importlib import metadata


def _minor(dist):
    try:
        return tuple(int(p) for p in metadata.version(dist).split("+")[0].split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return None


def check_tf_text_pairing():
    if os.environ.get("BERT_KERAS_SKIP_VERSION_CHECK") == "1":
        return
    tf_minor, text_minor = _minor("tensorflow"), _minor("tensorflow-text")
    if tf_minor is None or text_minor is None or tf_minor != text_minor:
        raise ImportError(
            f"pipelines needs tensorflow and tensorflow-text of the same release; installed: "
            f"tensorflow {tf_minor and '.'.join(map(str, tf_minor))}, "
            f"tensorflow-text {text_minor and '.'.join(map(str, text_minor))}. "
            'Fix it with: pip install "tensorflow~=2.20.0" "tensorflow-text~=2.20.0"'
        )
