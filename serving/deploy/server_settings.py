"""How tensorflow_model_server is started in a deployment: image, ports, paths, flags.

Docker Compose and Kubernetes start the same binary with the same flags; this
is the one place that spells them.

Example:

>>> settings = ServerSettings(model_names=("sentiment",))
>>> settings.image == f"tensorflow/serving:{DEFAULT_TF_SERVING_VERSION}"  # 2.20.0 or 2.21.0
True
>>> settings.server_args()[:2]
['--port=8500', '--rest_api_port=8501']
"""

import dataclasses
import re

from serving.deploy.monitoring_config import METRICS_PATH
from serving.op_sets import matching_release

# The release the op audit targets by default (serving/op_audit.py DEFAULT_RELEASE, the installed
# TensorFlow's): TF Serving X.Y runs SavedModels of TensorFlow X.Y.
DEFAULT_TF_SERVING_VERSION = f"{matching_release()}.0"

_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")

CONFIG_DIR = "/config"      # models.config, batching_parameters.txt, monitoring.config
MODELS_DIR = "/models"      # one directory per model, one sub-directory per version

MODELS_CONFIG = "models.config"
BATCHING_PARAMETERS = "batching_parameters.txt"
MONITORING_CONFIG = "monitoring.config"


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """Settings of one tensorflow_model_server deployment.

    Args:
        model_names: served model names (for health checks and docs).
        version: tensorflow/serving image version ("2.21.0"; default: the installed TensorFlow's release).
        gpu: use the -gpu image and GPU resources.
        grpc_port, rest_port: container ports (8500 / 8501 are TF Serving's defaults).
        file_system_poll_wait_seconds: how often new version directories are picked up.
        model_config_poll_wait_seconds: how often models.config is re-read (0: never).
        has_labels: models.config assigns version labels.
        cpus: CPU threads for TensorFlow (None: let TensorFlow count the machine's cores).
    """

    model_names: tuple
    version: str = DEFAULT_TF_SERVING_VERSION
    gpu: bool = False
    grpc_port: int = 8500
    rest_port: int = 8501
    file_system_poll_wait_seconds: int = 30
    model_config_poll_wait_seconds: int = 60
    has_labels: bool = False
    cpus: int = None

    def __post_init__(self):
        version = str(self.version)
        if version.endswith("-gpu"):
            raise ValueError(f"tensorflow/serving version {version!r} (--serving-version): the -gpu image is chosen "
                             f"by gpu=True (--gpu); give {version[:-len('-gpu')]}")
        if not (_RELEASE.match(version) or version in ("latest", "nightly")):
            # The image's tags are full releases ("2.21.0", "2.21.0-gpu"), "latest" and "nightly": a
            # pull of "tensorflow/serving:2.21" fails with "manifest unknown".
            short = re.match(r"^(\d+\.\d+)$", version)
            raise ValueError(f"tensorflow/serving version {version!r} (--serving-version) is no image tag: give "
                             f"a release X.Y.Z, e.g. {short.group(1) + '.0' if short else DEFAULT_TF_SERVING_VERSION}"
                             " (or latest, nightly)")
        if self.grpc_port == self.rest_port:
            raise ValueError("the gRPC and REST ports must differ (tensorflow_model_server refuses)")

    @property
    def image(self):
        return f"tensorflow/serving:{self.version}{'-gpu' if self.gpu else ''}"

    @property
    def metrics_path(self):
        return METRICS_PATH

    def server_args(self):
        """The tensorflow_model_server flags (the container's command after the binary)."""
        args = [
            f"--port={self.grpc_port}",
            f"--rest_api_port={self.rest_port}",
            f"--model_config_file={CONFIG_DIR}/{MODELS_CONFIG}",
            # Re-read models.config: edit policies/labels without a restart.
            f"--model_config_file_poll_wait_seconds={self.model_config_poll_wait_seconds}",
            # Pick up a new version directory (atomic export -> rename) within this many seconds.
            f"--file_system_poll_wait_seconds={self.file_system_poll_wait_seconds}",
            "--enable_batching=true",
            f"--batching_parameters_file={CONFIG_DIR}/{BATCHING_PARAMETERS}",
            f"--monitoring_config_file={CONFIG_DIR}/{MONITORING_CONFIG}",
            # Replays assets.extra/tf_serving_warmup_requests before a version serves.
            "--enable_model_warmup=true",
        ]
        if self.has_labels:
            # Lets a label name a version that is still loading (a canary being rolled out)
            # instead of failing the whole config reload.
            args.append("--allow_version_labels_for_unavailable_models=true")
        if self.cpus:
            # Inside a CPU-limited container TensorFlow still sees every core of the node and
            # would start that many threads per pool; match the pools to the limit.
            args += [
                f"--tensorflow_intra_op_parallelism={int(self.cpus)}",
                f"--tensorflow_inter_op_parallelism={max(1, int(self.cpus) // 2)}",
            ]
        return args
