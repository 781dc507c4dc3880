"""serving.deploy + `bert-keras deploy-kit`: the files for the official tensorflow/serving image.

The text protos are checked with protobuf's own text parser against the TF Serving
schemas (ModelServerConfig, BatchingParameters, MonitoringConfig), rebuilt here from the
.proto definitions, since the installed tensorflow-serving-api ships only
file_system_storage_path_source_pb2 (which supplies the real ServableVersionPolicy).
"""

import http.server
import os
import shutil
import subprocess
import threading

import pytest

from serving.deploy import (
    DeployKitOptions,
    KitExistsError,
    KubernetesOptions,
    ModelSpecError,
    build_deploy_kit,
    write_deploy_kit,
)
from serving.deploy.batching_config import BatchingSettings, format_batching_parameters
from serving.deploy.health_check import readiness_script
from serving.deploy.model_specs import inspect_model_dir, parse_label, parse_model_spec
from serving.deploy.server_settings import DEFAULT_TF_SERVING_VERSION
from serving.server.model_config import parse_models_config

import yaml  # noqa: E402  (pyyaml: the test extra)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture
def model_base(tmp_path):
    """models/sentiment/{1,2,3} and models/ner/1, each with a (fake) saved_model.pb."""
    base = tmp_path / "models"
    for name, versions in (("sentiment", (1, 2, 3)), ("ner", (1,))):
        for version in versions:
            (base / name / str(version)).mkdir(parents=True)
            (base / name / str(version) / "saved_model.pb").write_bytes(b"")
    return base


def _kit(model_base, tmp_path, **overrides):
    options = dict(
        base_path=str(model_base),
        models=["sentiment:specific=2,3", "ner"],
        labels=["sentiment:stable=2", "sentiment:canary=3"],
        output=str(tmp_path / "deploy"),
    )
    options.update(overrides)
    return build_deploy_kit(DeployKitOptions(**options))


# ----------------------------------------------------------------------------- TF Serving schemas


def _schemas():
    """Message classes for ModelServerConfig, BatchingParameters and MonitoringConfig."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2
    from tensorflow_serving.config import file_system_storage_path_source_pb2 as fs

    pool = descriptor_pool.DescriptorPool()
    for module in (wrappers_pb2, fs):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        pool.Add(proto)
    F = descriptor_pb2.FieldDescriptorProto
    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED

    def message(file, name, fields, nested=()):
        msg = file.message_type.add(name=name)
        for entry in nested:
            msg.nested_type.add().CopyFrom(entry)
        for number, (field_name, label, kind, type_name) in enumerate(fields, start=1):
            field = msg.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = type_name
        return msg

    file = descriptor_pb2.FileDescriptorProto(
        name="schemas.proto", package="tensorflow.serving", syntax="proto3",
        dependency=["google/protobuf/wrappers.proto", fs.DESCRIPTOR.name],
    )
    labels_entry = descriptor_pb2.DescriptorProto(name="VersionLabelsEntry")
    labels_entry.field.add(name="key", number=1, label=opt, type=F.TYPE_STRING)
    labels_entry.field.add(name="value", number=2, label=opt, type=F.TYPE_INT64)
    labels_entry.options.map_entry = True
    config = message(file, "ModelConfig", [
        ("name", opt, F.TYPE_STRING, None), ("base_path", opt, F.TYPE_STRING, None),
        ("model_type", opt, F.TYPE_INT32, None), ("model_platform", opt, F.TYPE_STRING, None),
    ], nested=[labels_entry])
    config.field.add(name="model_version_policy", number=7, label=opt, type=F.TYPE_MESSAGE,
                     type_name=".tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy")
    config.field.add(name="version_labels", number=8, label=rep, type=F.TYPE_MESSAGE,
                     type_name=".tensorflow.serving.ModelConfig.VersionLabelsEntry")
    message(file, "ModelConfigList", [("config", rep, F.TYPE_MESSAGE, ".tensorflow.serving.ModelConfig")])
    message(file, "ModelServerConfig", [
        ("model_config_list", opt, F.TYPE_MESSAGE, ".tensorflow.serving.ModelConfigList")])
    int64 = ".google.protobuf.Int64Value"
    batching = message(file, "BatchingParameters", [
        ("max_batch_size", opt, F.TYPE_MESSAGE, int64), ("batch_timeout_micros", opt, F.TYPE_MESSAGE, int64),
        ("max_enqueued_batches", opt, F.TYPE_MESSAGE, int64), ("num_batch_threads", opt, F.TYPE_MESSAGE, int64),
        ("thread_pool_name", opt, F.TYPE_MESSAGE, ".google.protobuf.StringValue"),
        ("allowed_batch_sizes", rep, F.TYPE_INT64, None),
        ("pad_variable_length_inputs", opt, F.TYPE_BOOL, None),
    ])
    assert batching.field[5].number == 6
    message(file, "PrometheusConfig", [("enable", opt, F.TYPE_BOOL, None), ("path", opt, F.TYPE_STRING, None)])
    message(file, "MonitoringConfig", [
        ("prometheus_config", opt, F.TYPE_MESSAGE, ".tensorflow.serving.PrometheusConfig")])
    pool.Add(file)
    def get(name):
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.serving.{name}"))

    return get("ModelServerConfig"), get("BatchingParameters"), get("MonitoringConfig")


def _parse(cls, text):
    from google.protobuf import text_format

    return text_format.Parse(text, cls())


# ----------------------------------------------------------------------------- specs


def test_model_specs_and_labels_parse():
    assert parse_model_spec("sentiment") == parse_model_spec("sentiment:latest")
    assert parse_model_spec("sentiment").version_policy == "latest"
    assert parse_model_spec("s:latest=3").num_versions == 3
    assert parse_model_spec("s:all").version_policy == "all"
    assert parse_model_spec("s:specific=3,1,3").versions == (1, 3)
    assert parse_label("sentiment:canary=12") == ("sentiment", "canary", 12)
    for bad in ("s:newest", "s:latest=0", "s:specific=", "s:specific=a", ":all", "s:all=2"):
        with pytest.raises(ModelSpecError, match="--model"):
            parse_model_spec(bad)
    for bad in ("sentiment:1=2", "sentiment=2", "sentiment:canary=x"):
        with pytest.raises(ModelSpecError, match="--label"):
            parse_label(bad)


def test_versions_in_specs_and_labels_are_what_tf_serving_reads():
    """A version is an int64 in ASCII digits, "0" and "-1" included (TF Serving's safe_strto64 serves such
    directories): `specific=0` was refused as not positive, `--label s:canary=９` was read as version 9 and
    a label past int64 was written into a models.config TF Serving cannot parse."""
    assert parse_model_spec("s:specific=0,007,-1").versions == (-1, 0, 7)
    assert parse_label("s:canary=0") == ("s", "canary", 0) and parse_label("s:old=-2") == ("s", "old", -2)
    with pytest.raises(ModelSpecError, match="--label 's:canary=９'"):
        parse_label("s:canary=９")
    with pytest.raises(ModelSpecError, match="past int64"):
        parse_label(f"s:canary={2 ** 63}")
    with pytest.raises(ModelSpecError, match="int64"):
        parse_model_spec(f"s:specific=1,{2 ** 63}")


def test_model_directories_are_checked(model_base, tmp_path):
    report = inspect_model_dir(model_base / "sentiment")
    assert report.versions == (1, 2, 3) and report.incomplete == ()
    with pytest.raises(ModelSpecError, match="does not exist"):
        inspect_model_dir(model_base / "missing")
    with pytest.raises(ModelSpecError, match=r"is a SavedModel itself.*numbered directory"):
        inspect_model_dir(model_base / "sentiment" / "1")
    (tmp_path / "named" / "v1").mkdir(parents=True)
    with pytest.raises(ModelSpecError, match=r"no integer version directories \(found v1\)"):
        inspect_model_dir(tmp_path / "named")
    (tmp_path / "empty").mkdir()
    assert inspect_model_dir(tmp_path / "empty").versions == ()


def test_two_names_of_one_version_are_one_version_read_from_the_name_the_server_loads(tmp_path):
    """`01` and `1` are both version 1 for the server, which loads `1` (the last name, sorted):
    the report listed [1, 1], and judged completeness by `1` whatever the name."""
    (tmp_path / "m" / "01").mkdir(parents=True)
    (tmp_path / "m" / "01" / "saved_model.pb").write_bytes(b"")
    (tmp_path / "m" / "1").mkdir()
    (tmp_path / "m" / "002").mkdir()
    (tmp_path / "m" / "002" / "saved_model.pb").write_bytes(b"")
    report = inspect_model_dir(tmp_path / "m")
    assert report.versions == (1, 2)
    assert report.incomplete == (1,)  # "1", the directory the server loads, has no saved_model.pb
    # Under `all` TF Serving loads the first name sorted ("01", which is complete): judged by it
    assert inspect_model_dir(tmp_path / "m", "all").incomplete == ()


# ----------------------------------------------------------------------------- config files


def test_models_config_has_policies_and_labels(model_base, tmp_path):
    kit = _kit(model_base, tmp_path, models=["sentiment:specific=2,3", "ner:latest=2"])
    text = kit.files["config/models.config"]
    parsed = {m.name: m for m in parse_models_config(text)}  # the embedded server's parser
    assert parsed["sentiment"].version_policy == "specific" and parsed["sentiment"].versions == (2, 3)
    assert parsed["sentiment"].labels == {"stable": 2, "canary": 3}
    assert parsed["sentiment"].base_path == "/models/sentiment"
    assert parsed["ner"].version_policy == "latest" and parsed["ner"].num_versions == 2

    server_config, _, _ = _schemas()
    proto = _parse(server_config, text)  # protobuf's text parser, TF Serving's schema
    configs = {c.name: c for c in proto.model_config_list.config}
    assert list(configs["sentiment"].model_version_policy.specific.versions) == [2, 3]
    assert dict(configs["sentiment"].version_labels) == {"stable": 2, "canary": 3}
    assert configs["ner"].model_version_policy.latest.num_versions == 2
    assert configs["ner"].model_platform == "tensorflow"

    all_kit = _kit(model_base, tmp_path, models=["sentiment:all"], labels=[])
    assert _parse(server_config, all_kit.files["config/models.config"]).model_config_list.config[0] \
        .model_version_policy.HasField("all")


@pytest.mark.parametrize("gpu", [False, True])
def test_batching_and_monitoring_configs_parse(gpu):
    _, batching_cls, monitoring_cls = _schemas()
    text = format_batching_parameters(gpu=gpu)
    batching = _parse(batching_cls, text)
    assert batching.pad_variable_length_inputs is False
    if gpu:
        assert batching.max_batch_size.value == 64 and list(batching.allowed_batch_sizes) == [8, 16, 32, 64]
        assert batching.num_batch_threads.value == 2
    else:
        assert batching.max_batch_size.value == 32 and list(batching.allowed_batch_sizes) == []
        assert batching.batch_timeout_micros.value == 2000
    for field in ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches",
                  "pad_variable_length_inputs", "allowed_batch_sizes"):
        assert f"# {field}:" in text  # every setting is explained
    assert "FIRST ELEMENT" in text  # why padding stays off
    with pytest.raises(ValueError, match="Last entry in allowed_batch_sizes must match max_batch_size; last entry "
                                         "was 16; expected 32"):
        BatchingSettings(32, 1000, 2, 10, allowed_batch_sizes=(8, 16))
    # The kit had its own, looser copy of the rule: 8.0 was written as "allowed_batch_sizes: 8.0", which TF
    # Serving's text-proto parser refuses; "8" raised a TypeError from sorted(). One rule now, the server's.
    with pytest.raises(ValueError, match="BatchingSettings.allowed_batch_sizes: 8.0 is not a positive integer"):
        BatchingSettings(32, 1000, 2, 10, allowed_batch_sizes=(8.0, 32))
    with pytest.raises(ValueError, match="BatchingSettings.allowed_batch_sizes: '8' is not a positive integer"):
        BatchingSettings(32, 1000, 2, 10, allowed_batch_sizes=("8", 32))
    assert BatchingSettings(32, 1000, 2, 10, allowed_batch_sizes=[8, 32]).allowed_batch_sizes == (8, 32)

    from serving.deploy.monitoring_config import format_monitoring_config

    monitoring = _parse(monitoring_cls, format_monitoring_config())
    assert monitoring.prometheus_config.enable is True
    assert monitoring.prometheus_config.path == "/monitoring/prometheus/metrics"


# ----------------------------------------------------------------------------- compose and k8s


def test_compose_uses_the_audited_image_ports_and_mounts(model_base, tmp_path):
    kit = _kit(model_base, tmp_path)
    compose = yaml.safe_load(kit.files["docker-compose.yml"])
    service = compose["services"]["tensorflow-serving"]
    assert service["image"] == f"tensorflow/serving:{DEFAULT_TF_SERVING_VERSION}"
    assert service["ports"] == ["8500:8500", "8501:8501"]
    assert service["volumes"] == ["../models:/models:ro", "./config:/config:ro"]
    assert service["entrypoint"] == ["tensorflow_model_server"]
    flags = service["command"]
    for flag in ("--port=8500", "--rest_api_port=8501", "--model_config_file=/config/models.config",
                 "--enable_batching=true", "--batching_parameters_file=/config/batching_parameters.txt",
                 "--monitoring_config_file=/config/monitoring.config",
                 "--file_system_poll_wait_seconds=30", "--allow_version_labels_for_unavailable_models=true"):
        assert flag in flags
    assert service["healthcheck"]["test"][:3] == ["CMD", "bash", "-c"]
    assert "$$m" in service["healthcheck"]["test"][3]  # Compose would interpolate a single $
    assert "deploy" not in service  # no GPU reservation on CPU

    gpu = yaml.safe_load(_kit(model_base, tmp_path, gpu=True).files["docker-compose.yml"])
    gpu_service = gpu["services"]["tensorflow-serving"]
    assert gpu_service["image"] == f"tensorflow/serving:{DEFAULT_TF_SERVING_VERSION}-gpu"
    assert gpu_service["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


def test_kubernetes_manifests(model_base, tmp_path):
    kit = _kit(model_base, tmp_path, kubernetes=KubernetesOptions(name="bert", cpu_limit="3", max_replicas=6))
    docs = {path: yaml.safe_load(text) for path, text in kit.files.items() if path.startswith("k8s/")}
    kinds = {path: doc["kind"] for path, doc in docs.items()}
    assert kinds == {
        "k8s/configmap.yaml": "ConfigMap", "k8s/models-pvc.yaml": "PersistentVolumeClaim",
        "k8s/deployment.yaml": "Deployment", "k8s/service.yaml": "Service",
        "k8s/hpa.yaml": "HorizontalPodAutoscaler",
    }
    config_map = docs["k8s/configmap.yaml"]
    for name in ("models.config", "batching_parameters.txt", "monitoring.config"):
        assert config_map["data"][name] == kit.files[f"config/{name}"]

    deployment = docs["k8s/deployment.yaml"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == f"tensorflow/serving:{DEFAULT_TF_SERVING_VERSION}"
    assert {p["containerPort"] for p in container["ports"]} == {8500, 8501}
    assert container["resources"]["limits"]["cpu"] == "3"
    assert "--tensorflow_intra_op_parallelism=3" in container["args"]
    readiness = container["readinessProbe"]["exec"]["command"]
    assert readiness[:2] == ["bash", "-c"] and "/v1/models/%s" in readiness[2]
    assert "for m in sentiment ner;" in readiness[2]
    assert container["livenessProbe"]["tcpSocket"]["port"] == "grpc"
    assert {v["name"] for v in pod["volumes"]} == {"models", "config"}
    assert pod["volumes"][1]["configMap"]["name"] == "bert-config"

    service = docs["k8s/service.yaml"]
    assert {p["port"] for p in service["spec"]["ports"]} == {8500, 8501}
    hpa = docs["k8s/hpa.yaml"]
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["spec"]["maxReplicas"] == 6
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert hpa["spec"]["scaleTargetRef"]["name"] == "bert"
    assert "num_batch_threads { value: 3 }" in kit.files["config/batching_parameters.txt"]

    gpu_kit = _kit(model_base, tmp_path, gpu=True)
    gpu = yaml.safe_load(gpu_kit.files["k8s/deployment.yaml"])
    assert gpu["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    # Each README says what its pods pass: a GPU kit's set no thread pools (it said they did).
    for each, passes in ((kit, True), (gpu_kit, False)):
        args = yaml.safe_load(each.files["k8s/deployment.yaml"])["spec"]["template"]["spec"]["containers"][0]["args"]
        assert any(a.startswith("--tensorflow_intra_op_parallelism=") for a in args) == passes
        assert ("pods pass `--tensorflow_intra_op_parallelism`" in each.files["README_DEPLOY.md"]) == passes


class _StatusHandler(http.server.BaseHTTPRequestHandler):
    states = {}

    def do_GET(self):  # noqa: N802 (http.server API)
        name = self.path.rsplit("/", 1)[-1]
        state = self.states.get(name)
        body = (
            '{"model_version_status": [{"version": "1", "state": "%s"}]}' % state
            if state else '{"error": "Could not find any versions of model %s"}' % name
        ).encode()
        self.send_response(200 if state else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_health_check_needs_every_model_available():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StatusHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        script = readiness_script(["sentiment", "ner"], rest_port=server.server_address[1])

        def check(states):
            _StatusHandler.states = states
            return subprocess.run(["bash", "-c", script], timeout=20).returncode

        assert check({"sentiment": "AVAILABLE", "ner": "AVAILABLE"}) == 0
        assert check({"sentiment": "AVAILABLE", "ner": "LOADING"}) == 1
        assert check({"sentiment": "AVAILABLE"}) == 1  # 404: not known yet
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------------------- kit and CLI


def test_labels_and_missing_versions(model_base, tmp_path):
    with pytest.raises(ModelSpecError, match=r"serves only versions \[2, 3\]"):
        _kit(model_base, tmp_path, labels=["sentiment:stable=1"])
    with pytest.raises(ModelSpecError, match="no --model-name ner2"):
        _kit(model_base, tmp_path, labels=["ner2:stable=1"])
    kit = _kit(model_base, tmp_path, models=["sentiment:latest=1"], labels=["sentiment:stable=1"])
    assert any("label 'stable' -> version 1" in w for w in kit.warnings)
    (model_base / "fresh").mkdir()
    kit = _kit(model_base, tmp_path, models=["fresh"], labels=[])
    assert any("has no version yet" in w for w in kit.warnings)
    assert "has no version yet" in kit.files["README_DEPLOY.md"]


def test_write_is_atomic_and_keeps_other_files(model_base, tmp_path):
    output = tmp_path / "deploy"
    kit = _kit(model_base, tmp_path)
    written = write_deploy_kit(kit, output)
    assert len(written) == 10 and all(os.path.isfile(p) for p in written)
    (output / "notes.txt").write_text("mine")
    with pytest.raises(KitExistsError, match="pass overwrite=True"):  # a Python call: the argument
        write_deploy_kit(kit, output)
    write_deploy_kit(_kit(model_base, tmp_path, gpu=True), output, overwrite=True)
    assert (output / "notes.txt").read_text() == "mine"
    assert f"{DEFAULT_TF_SERVING_VERSION}-gpu" in (output / "docker-compose.yml").read_text()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".deploy")]  # no staging left over


def test_cli_writes_the_kit(model_base, tmp_path, capsys, monkeypatch):
    from bert_keras.cli.main import main

    monkeypatch.chdir(tmp_path)
    argv = ["deploy-kit", "--base-path", "models", "--model", "sentiment:specific=2,3",
            "--label", "sentiment:canary=3", "--model", "ner", "--output", "deploy"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "wrote 10 files to deploy" in out and "kubectl apply -f deploy/k8s" in out
    # Pasted in order, each line runs from here (a `cd deploy &&` first left kubectl's path wrong).
    assert "docker compose -f deploy/docker-compose.yml up -d" in out and "cd deploy" not in out
    assert "model sentiment: serves versions 2, 3; labels canary -> 3" in out
    assert (tmp_path / "deploy" / "k8s" / "hpa.yaml").is_file()
    assert "../models:/models:ro" in (tmp_path / "deploy" / "docker-compose.yml").read_text()

    assert main(argv) == 2  # exists, no --overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert main(["deploy-kit", "--base-path", "models", "--model", "absent", "--output", "d2"]) == 2
    assert "models/absent does not exist" in capsys.readouterr().err
    assert main(["deploy-kit", "--base-path", "models", "--model", "ner", "--output", "d3",
                 "--name", "Bad_Name"]) == 2
    assert "lowercase" in capsys.readouterr().err


def test_sizes_that_are_not_kubernetes_quantities_are_refused():
    from serving.deploy.kubernetes import KubernetesOptions

    KubernetesOptions(cpu_request="500m", memory_request="512Mi", memory_limit="1.5Gi", models_storage="20G")
    KubernetesOptions(cpu_request=".5", cpu_limit="1.", memory_request="100n", memory_limit="+1")  # apimachinery's
    for field, bad in (("memory_request", "lots"), ("cpu_limit", "4 cores"), ("models_storage", "-1Gi")):
        with pytest.raises(ValueError, match=f"{field} '{bad}' is not a Kubernetes quantity"):
            KubernetesOptions(**{field: bad})


def test_a_request_above_its_limit_is_refused_naming_both_flags(tmp_path, capsys):
    """`deploy-kit --cpu-limit 500m` kept the default request of 2 CPUs: the API server refuses the
    Deployment's pods ("must be less than or equal to cpu limit") after `kubectl apply`."""
    from bert_keras.cli.main import main
    from serving.deploy.kubernetes import KubernetesOptions, quantity_value

    assert [quantity_value(q) for q in ("500m", "2", "1.5Gi", "1e3", "2E", "+1", "100n")] == pytest.approx(
        [0.5, 2.0, 1.5 * 2 ** 30, 1000.0, 2e18, 1.0, 100e-9])
    KubernetesOptions(cpu_request="4", cpu_limit="4000m", memory_request="1024Mi", memory_limit="1Gi")  # equal
    with pytest.raises(ValueError, match=r"cpu_request '2' \(--cpu\) is above cpu_limit '500m' \(--cpu-limit\): "
                                         r"Kubernetes refuses .* give --cpu 500m or --cpu-limit 2"):
        KubernetesOptions(cpu_limit="500m")
    with pytest.raises(ValueError, match=r"memory_request '3G' \(--memory\) is above memory_limit '2Gi'"):
        KubernetesOptions(memory_request="3G", memory_limit="2Gi")
    (tmp_path / "models" / "ner" / "1").mkdir(parents=True)
    (tmp_path / "models" / "ner" / "1" / "saved_model.pb").write_bytes(b"")
    assert main(["deploy-kit", "--base-path", str(tmp_path / "models"), "--model", "ner",
                 "--output", str(tmp_path / "kit"), "--cpu-limit", "500m"]) == 2
    assert "give --cpu 500m or --cpu-limit 2" in capsys.readouterr().err
    assert not (tmp_path / "kit").exists()


def test_a_serving_version_that_is_no_image_tag_is_refused():
    """`--serving-version 2.21.0-gpu --gpu` wrote image "tensorflow/serving:2.21.0-gpu-gpu" and
    `--serving-version 2.21` "tensorflow/serving:2.21": tags the registry does not have (the pods
    sit in ImagePullBackOff)."""
    from serving.deploy.server_settings import ServerSettings

    assert ServerSettings(model_names=("m",), version="2.20.0", gpu=True).image == "tensorflow/serving:2.20.0-gpu"
    assert ServerSettings(model_names=("m",), version="latest").image == "tensorflow/serving:latest"
    with pytest.raises(ValueError, match=r"'2.21.0-gpu' \(--serving-version\): the -gpu image is chosen by "
                                         r"gpu=True \(--gpu\); give 2.21.0"):
        ServerSettings(model_names=("m",), version="2.21.0-gpu", gpu=True)
    with pytest.raises(ValueError, match=r"'2.21' \(--serving-version\) is no image tag: give a release X.Y.Z, "
                                         r"e.g. 2.21.0"):
        ServerSettings(model_names=("m",), version="2.21")
    with pytest.raises(ValueError, match="'v2.21.0' .* is no image tag"):
        ServerSettings(model_names=("m",), version="v2.21.0")


def test_a_served_version_audited_for_another_release_than_the_image_is_warned_about(model_base, tmp_path):
    """`deploy-kit --serving-version 2.20.0` over versions exported (and op-audited) for 2.21 wrote
    the kit without a word: the server may then fail to load them ("Op type not registered")."""
    import json

    from serving.deploy.server_settings import DEFAULT_TF_SERVING_VERSION

    def card(name, version, release):
        (model_base / name / str(version) / "assets.extra").mkdir()
        (model_base / name / str(version) / "assets.extra" / "model_card.json").write_text(
            json.dumps({"op_audit": {"tf_serving_release": release}}))

    card("sentiment", 1, "2.19")  # not served (specific=2,3): no warning
    card("sentiment", 3, "2.21")
    card("ner", 1, "2.20")
    kit = _kit(model_base, tmp_path, version="2.20.0")
    assert [w for w in kit.warnings if "op audit" in w] == [
        "sentiment/3 was exported for tensorflow/serving 2.21 (its model card's op audit); this kit runs "
        "tensorflow/serving:2.20.0, which may lack an op it uses: give --serving-version 2.21.0, or export it "
        "again with --release 2.20"]
    assert "sentiment/3 was exported for tensorflow/serving 2.21" in kit.files["README_DEPLOY.md"]
    assert [w for w in _kit(model_base, tmp_path, version="latest").warnings if "op audit" in w] == []
    # A (c) Korean model's clients split its text: the kit's curl examples send it raw.
    (model_base / "sentiment" / "3" / "assets.extra" / "model_card.json").write_text(
        json.dumps({"op_audit": {"tf_serving_release": "2.20"}, "tokenization": {"pre_tokenizer": "kiwi"}}))
    kit = _kit(model_base, tmp_path, version="2.20.0")
    assert kit.warnings == [
        "sentiment/3 reads text split by kiwi at morpheme boundaries (its model card's pre_tokenizer), which no "
        "server runs: its clients split the text (bert-keras query --pre-tokenizer kiwi, "
        "serving.text_requests.split_morphemes); raw text, as the curl examples send it, is answered as other words"]
    assert "bert-keras query --model-name sentiment --pre-tokenizer kiwi" in kit.files["README_DEPLOY.md"]
    release = ".".join(DEFAULT_TF_SERVING_VERSION.split(".")[:2])
    assert len([w for w in _kit(model_base, tmp_path).warnings if "op audit" in w]) == 2 * (release != "2.20")
