"""`bert-keras deploy-kit`: files to run exported models on the official tensorflow/serving image."""

import argparse
import sys

from pipelines.command_options import add_field_options, add_option


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "deploy-kit",
        help=summary,
        description=(
            "Write a deployment kit for tensorflow_model_server (the official tensorflow/serving\n"
            "image): models.config (version policies and labels), batching_parameters.txt,\n"
            "monitoring.config (Prometheus), docker-compose.yml, Kubernetes manifests\n"
            "(ConfigMap, PVC, Deployment, Service, HorizontalPodAutoscaler) and README_DEPLOY.md.\n"
            "Each --model-name must be a directory under --base-path holding integer version\n"
            "directories, as `bert-keras export` writes them."
        ),
        epilog=(
            "model specs (--model-name NAME[:POLICY]):\n"
            "  sentiment                 latest version only\n"
            "  sentiment:latest=2        the two highest versions\n"
            "  sentiment:all             every version\n"
            "  sentiment:specific=1,3    exactly versions 1 and 3\n"
            "version labels (--label NAME:LABEL=VERSION), e.g. --label sentiment:stable=1\n"
            "\n"
            "examples:\n"
            "  bert-keras deploy-kit --base-path models --model-name sentiment --output-dir deploy\n"
            "  bert-keras deploy-kit --base-path models --model-name sentiment:specific=1,2 \\\n"
            "      --label sentiment:stable=1 --label sentiment:canary=2 --model-name ner \\\n"
            "      --output-dir deploy --gpu"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base-path", required=True, metavar="DIR",
                        help="directory with one directory per model (<DIR>/<model>/<version>/)")
    add_option(parser, "--model-name", "--model", dest="model", action="append", required=True,
               metavar="NAME[:POLICY]", help="a model to serve (repeat for several)")
    parser.add_argument("--label", action="append", default=[], metavar="NAME:LABEL=VERSION",
                        help="a version label (repeat for several)")
    add_option(parser, "--output-dir", "-o", "--output", required=True, metavar="DIR",
               help="where to write the kit")
    parser.add_argument("--gpu", action="store_true", help="GPU image, batching and resources")
    parser.add_argument("--serving-version", default=None, metavar="X.Y.Z",
                        help="tensorflow/serving image version (default: the audited release, the installed TensorFlow's: 2.20.0 or 2.21.0)")
    from serving.deploy.kubernetes import KubernetesOptions  # no TensorFlow: --help stays fast

    add_field_options(parser, KubernetesOptions)  # --name, --cpu, --cpu-limit, ... --max-replicas
    parser.add_argument("--overwrite", action="store_true", help="replace the files of an existing kit")
    parser.set_defaults(func=run)


def run(args):
    from serving.deploy import DeployKitOptions, KubernetesOptions, build_deploy_kit, write_deploy_kit

    # Bad model specs, Kubernetes options or CPU quantities are ValueErrors, an existing kit a
    # FileExistsError: `bert-keras` prints their messages.
    options = DeployKitOptions(
        base_path=args.base_path, models=args.model, labels=args.label, output=args.output_dir,
        gpu=args.gpu, kubernetes=KubernetesOptions.from_namespace(args),
        **({"version": args.serving_version} if args.serving_version else {}))
    kit = build_deploy_kit(options)
    written = write_deploy_kit(kit, args.output_dir, overwrite=args.overwrite)
    for warning in kit.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(kit.report(written, args.output_dir))
    return 0

