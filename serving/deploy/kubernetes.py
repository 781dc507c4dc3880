"""Kubernetes manifests for tensorflow_model_server: ConfigMap, PVC, Deployment, Service, HPA.

* ConfigMap: models.config, batching_parameters.txt, monitoring.config, mounted as a
  directory (updates propagate, and the server re-reads models.config).
* PersistentVolumeClaim: the model base path, read-only in the pods.
* Deployment: readiness = every model AVAILABLE (REST /v1/models/NAME), liveness =
  the gRPC port accepts connections, a startup probe long enough for load + warmup.
* Service: gRPC 8500 and REST 8501 inside the cluster.
* HorizontalPodAutoscaler (autoscaling/v2): scales on CPU utilisation of the requests.

Example:

>>> from serving.deploy.server_settings import ServerSettings
>>> manifests = format_kubernetes(ServerSettings(model_names=("sentiment",)), KubernetesOptions())
>>> sorted(manifests)
['configmap.yaml', 'deployment.yaml', 'hpa.yaml', 'models-pvc.yaml', 'service.yaml']
"""

import dataclasses
import json
import re

from pipelines.command_options import field_values, option

from serving.deploy.health_check import readiness_script
from serving.deploy.server_settings import (
    BATCHING_PARAMETERS, CONFIG_DIR, MODELS_CONFIG, MODELS_DIR, MONITORING_CONFIG,
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A Kubernetes quantity ("2", "500m", "1.5", "2Gi", "512Mi", "1e3"): what the API server accepts.
_QUANTITY = re.compile(r"^\+?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")


def _option(default, help, name=None, metavar="Q"):
    """A field with its `bert-keras deploy-kit` flag (a Kubernetes quantity's metavar Q by default)."""
    return option(default, help, name, metavar=metavar)


@dataclasses.dataclass(frozen=True)
class KubernetesOptions:
    """Sizes and names of the Kubernetes objects.

    Args:
        name: app name (Deployment, Service, HPA, ConfigMap "<name>-config", PVC "<name>-models").
        cpu_request, cpu_limit: CPU per pod; the HPA target is relative to the request.
        memory_request, memory_limit: memory per pod (a BERT-base model needs ~1.5 GB loaded).
        min_replicas, max_replicas: HPA bounds.
        target_cpu_utilization: HPA target, percent of cpu_request.
        models_storage: size of the models PVC.
    """

    name: str = _option("bert-serving", "Kubernetes app name (default bert-serving)", metavar="NAME")
    cpu_request: str = _option("2", "Kubernetes CPU request per pod (default 2)", name="--cpu")
    cpu_limit: str = _option("4", "Kubernetes CPU limit per pod (default 4)")
    memory_request: str = _option("2Gi", "Kubernetes memory request (default 2Gi)", name="--memory")
    memory_limit: str = _option("4Gi", "Kubernetes memory limit (default 4Gi)")
    min_replicas: int = _option(1, "HPA minimum (default 1)", metavar=None)
    max_replicas: int = _option(4, "HPA maximum (default 4)", metavar=None)
    target_cpu_utilization: int = 70
    models_storage: str = "10Gi"

    @classmethod
    def from_namespace(cls, namespace):
        """The options an `argparse.Namespace` holds (attributes named as the fields; others ignored)."""
        return cls(**field_values(cls, namespace))

    def __post_init__(self):
        if not _DNS_LABEL.match(self.name):
            raise ValueError(
                f"Kubernetes name {self.name!r} must be lowercase letters, digits and '-' (max 63)"
            )
        for field in ("cpu_request", "cpu_limit", "memory_request", "memory_limit", "models_storage"):
            if not _QUANTITY.match(str(getattr(self, field))):
                raise ValueError(f"{field} {getattr(self, field)!r} is not a Kubernetes quantity (e.g. 2, 500m, "
                                 "4Gi, 512Mi)")
        for request, limit, flags in (("cpu_request", "cpu_limit", ("--cpu", "--cpu-limit")),
                                      ("memory_request", "memory_limit", ("--memory", "--memory-limit"))):
            wanted, allowed = getattr(self, request), getattr(self, limit)
            if quantity_value(wanted) > quantity_value(allowed):
                # The API server refuses such a pod ("must be less than or equal to cpu limit").
                raise ValueError(f"{request} {wanted!r} ({flags[0]}) is above {limit} {allowed!r} ({flags[1]}): "
                                 f"Kubernetes refuses a pod whose request exceeds its limit; give {flags[0]} "
                                 f"{allowed} or {flags[1]} {wanted}")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"need 1 <= min_replicas ({self.min_replicas}) <= max_replicas ({self.max_replicas})")
        if not 1 <= self.target_cpu_utilization <= 100:
            raise ValueError("target_cpu_utilization is a percentage (1-100)")


_SUFFIXES = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
             "E": 1e18, "Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40, "Pi": 2.0 ** 50,
             "Ei": 2.0 ** 60}


def quantity_value(quantity):
    """The number a Kubernetes quantity stands for: "500m" -> 0.5, "2Gi" -> 2147483648.0, "1e3" -> 1000.0."""
    match = _QUANTITY.match(str(quantity))
    if not match:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi, 512Mi)")
    number, suffix = match.group(1), match.group(2) or ""
    if suffix[:1] in ("e", "E") and len(suffix) > 1:  # an exponent, not the exa suffix "E"
        return float(number + suffix)
    return float(number) * _SUFFIXES[suffix]


def _q(value):
    return json.dumps(str(value))


def _block(text, indent):
    pad = " " * indent
    return [pad + line if line else "" for line in text.rstrip("\n").split("\n")]


def format_configmap(options, files):
    """ConfigMap holding the server's config files ({file name: text})."""
    lines = [
        "# The server's config files. Edit models.config here (kubectl apply) to change version",
        "# policies or labels: the kubelet updates the mounted files and the server re-reads them.",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        f"  name: {options.name}-config",
        "  labels:",
        f"    app: {options.name}",
        "data:",
    ]
    for file_name in sorted(files):
        lines.append(f"  {file_name}: |")
        lines += _block(files[file_name], 4)
    return "\n".join(lines) + "\n"


def format_models_pvc(options):
    return "\n".join([
        "# The model base path: <model>/<version>/saved_model.pb, read-only in every pod.",
        "# ReadOnlyMany lets all replicas mount it on any node; it needs a storage class that supports it",
        "# (NFS, Filestore, EFS, Azure Files, GCS Fuse CSI ...). Copy models in once, e.g. from a pod",
        "# mounting the claim read-write: kubectl cp models/sentiment POD:/models/sentiment",
        "# Alternative: bake the models into an image (FROM tensorflow/serving:VERSION, COPY models /models)",
        "# and drop this claim and its volume.",
        "apiVersion: v1",
        "kind: PersistentVolumeClaim",
        "metadata:",
        f"  name: {options.name}-models",
        "  labels:",
        f"    app: {options.name}",
        "spec:",
        "  accessModes: [\"ReadOnlyMany\"]",
        "  resources:",
        "    requests:",
        f"      storage: {_q(options.models_storage)}",
    ]) + "\n"


def format_deployment(settings, options):
    """Deployment of tensorflow_model_server pods."""
    name = options.name
    readiness = readiness_script(settings.model_names, settings.rest_port)
    lines = [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        f"  name: {name}",
        "  labels:",
        f"    app: {name}",
        "spec:",
        f"  replicas: {options.min_replicas}   # the HPA takes over from here",
        "  selector:",
        "    matchLabels:",
        f"      app: {name}",
        "  strategy:",
        "    rollingUpdate:",
        "      maxUnavailable: 0   # a new pod must be ready (models loaded) before an old one goes",
        "      maxSurge: 1",
        "  template:",
        "    metadata:",
        "      labels:",
        f"        app: {name}",
        "      annotations:",
        "        prometheus.io/scrape: \"true\"",
        f"        prometheus.io/port: {_q(settings.rest_port)}",
        f"        prometheus.io/path: {_q(settings.metrics_path)}",
        "    spec:",
        "      terminationGracePeriodSeconds: 60   # in-flight requests finish on SIGTERM",
        "      containers:",
        "        - name: tensorflow-serving",
        f"          image: {_q(settings.image)}",
        "          command: [\"tensorflow_model_server\"]",
        "          args:",
    ]
    lines += [f"            - {_q(arg)}" for arg in settings.server_args()]
    lines += [
        "          ports:",
        "            - name: grpc",
        f"              containerPort: {settings.grpc_port}",
        "            - name: http",
        f"              containerPort: {settings.rest_port}",
        "          resources:",
        "            requests:",
        f"              cpu: {_q(options.cpu_request)}",
        f"              memory: {_q(options.memory_request)}",
        "            limits:",
        f"              cpu: {_q(options.cpu_limit)}",
        f"              memory: {_q(options.memory_limit)}",
    ]
    if settings.gpu:
        lines += ["              nvidia.com/gpu: 1   # needs the NVIDIA device plugin"]
    lines += [
        "          # Loading and warming up BERT takes a while: no liveness kill during start-up.",
        "          startupProbe:",
        "            tcpSocket:",
        "              port: grpc",
        "            periodSeconds: 5",
        "            failureThreshold: 60",
        "          # Ready = every model has an AVAILABLE version; GET /v1/models/NAME alone answers",
        "          # 200 while a version is still LOADING, so the body is checked (bash /dev/tcp:",
        "          # the image has no curl).",
        "          readinessProbe:",
        "            exec:",
        f"              command: [\"bash\", \"-c\", {_q(readiness)}]",
        "            periodSeconds: 10",
        "            timeoutSeconds: 5",
        "            failureThreshold: 3",
        "          livenessProbe:",
        "            tcpSocket:",
        "              port: grpc",
        "            periodSeconds: 20",
        "            failureThreshold: 3",
        "          volumeMounts:",
        "            - name: models",
        f"              mountPath: {MODELS_DIR}",
        "              readOnly: true",
        "            - name: config",
        f"              mountPath: {CONFIG_DIR}",
        "              readOnly: true",
        "      volumes:",
        "        - name: models",
        "          persistentVolumeClaim:",
        f"            claimName: {name}-models",
        "            readOnly: true",
        "        - name: config",
        "          configMap:",
        f"            name: {name}-config",
    ]
    return "\n".join(lines) + "\n"


def format_service(settings, options):
    return "\n".join([
        "# In-cluster address: <name>:8500 (gRPC) and http://<name>:8501 (REST).",
        "# gRPC uses long-lived HTTP/2 connections: a plain ClusterIP Service balances connections,",
        "# not requests; use a gRPC-aware proxy (or several client channels) to spread load.",
        "apiVersion: v1",
        "kind: Service",
        "metadata:",
        f"  name: {options.name}",
        "  labels:",
        f"    app: {options.name}",
        "spec:",
        "  type: ClusterIP",
        "  selector:",
        f"    app: {options.name}",
        "  ports:",
        "    - name: grpc",
        f"      port: {settings.grpc_port}",
        "      targetPort: grpc",
        "    - name: http",
        f"      port: {settings.rest_port}",
        "      targetPort: http",
    ]) + "\n"


def format_hpa(settings, options):
    note = (
        ["# On GPU pods CPU utilisation understates load; scale on a request-rate or queue metric",
         "# (Prometheus adapter) instead when you can."]
        if settings.gpu else []
    )
    return "\n".join([
        "# Scales pods on CPU utilisation, relative to the container's cpu request.",
        "# Needs the metrics-server in the cluster.",
        *note,
        "apiVersion: autoscaling/v2",
        "kind: HorizontalPodAutoscaler",
        "metadata:",
        f"  name: {options.name}",
        "  labels:",
        f"    app: {options.name}",
        "spec:",
        "  scaleTargetRef:",
        "    apiVersion: apps/v1",
        "    kind: Deployment",
        f"    name: {options.name}",
        f"  minReplicas: {options.min_replicas}",
        f"  maxReplicas: {options.max_replicas}",
        "  metrics:",
        "    - type: Resource",
        "      resource:",
        "        name: cpu",
        "        target:",
        "          type: Utilization",
        f"          averageUtilization: {options.target_cpu_utilization}",
        "  behavior:",
        "    scaleDown:",
        "      stabilizationWindowSeconds: 300   # new pods load models for a while: do not flap",
    ]) + "\n"


def format_kubernetes(settings, options, config_files=None):
    """{file name: manifest text} for the k8s/ directory of the kit.

    Args:
        settings: `ServerSettings`.
        options: `KubernetesOptions`.
        config_files: {models.config, batching_parameters.txt, monitoring.config: text}.
    """
    files = config_files or {MODELS_CONFIG: "", BATCHING_PARAMETERS: "", MONITORING_CONFIG: ""}
    return {
        "configmap.yaml": format_configmap(options, files),
        "models-pvc.yaml": format_models_pvc(options),
        "deployment.yaml": format_deployment(settings, options),
        "service.yaml": format_service(settings, options),
        "hpa.yaml": format_hpa(settings, options),
    }
