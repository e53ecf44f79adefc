"""The dependency catalog (validation, ordering), add-on config comparison, Pod Identity policies, the helm adapter."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from instantstart.errors import PreconditionFailed
from instantstart.kube.helm import Connection, Helm, HelmError, kubeconfig, redact
from instantstart.manifests.iam_policies import Scope, csi_data_policy, pod_identity_trust
from instantstart.services.dependencies.catalog import load_catalog, parse_catalog
from instantstart.services.dependencies.reconcile import desired_config, parse_config


def _catalog(entries: list[dict[str, Any]]) -> str:
    return yaml.safe_dump({"dependencies": entries})


ADDON = {"name": "a", "source": "addon", "addon": "a", "namespace": "kube-system"}


def test_shipped_catalog_defaults_and_order() -> None:
    catalog = load_catalog()
    assert catalog.defaults == [
        "eks-pod-identity-agent", "hyperpod-dependencies", "aws-mountpoint-s3-csi-driver", "metrics-server",
        "priority-classes"]
    optional = {"cert-manager", "aws-fsx-csi-driver", "amazon-sagemaker-hyperpod-training-operator",
                "amazon-sagemaker-hyperpod-inference", "kuberay-operator", "keda",
                "amazon-sagemaker-hyperpod-taskgovernance"}
    assert optional <= set(catalog.names)
    assert not any(catalog.get(n).default for n in optional)
    hp = catalog.get("hyperpod-dependencies")
    assert (hp.source, hp.release, hp.namespace) == ("helm", "dependencies", "kube-system")
    assert hp.values["health-monitoring-agent"]["enabled"] is True
    assert hp.values["nvidia-device-plugin"]["devicePlugin"]["enabled"] is True
    assert hp.values["aws-efa-k8s-device-plugin"]["enabled"] is True
    s3 = catalog.get("aws-mountpoint-s3-csi-driver")
    assert s3.pod_identity is not None and s3.pod_identity.service_account == "s3-csi-driver-sa"
    assert s3.depends_on == ("eks-pod-identity-agent",)
    # A feature asking for the inference operator brings what it needs, dependencies first.
    order = [d.name for d in catalog.order(["amazon-sagemaker-hyperpod-inference"])]
    assert order[-1] == "amazon-sagemaker-hyperpod-inference"
    assert set(order[:-1]) == {"eks-pod-identity-agent", "aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver",
                               "metrics-server", "cert-manager"}
    assert order.index("eks-pod-identity-agent") < order.index("aws-mountpoint-s3-csi-driver")
    with pytest.raises(KeyError):
        catalog.order(["no-such-thing"])


@pytest.mark.parametrize(
    ("entries", "text"),
    [
        ([ADDON, ADDON], "duplicate dependency names: a"),
        ([{**ADDON, "dependsOn": ["b"]}], "unknown dependencies: b"),
        ([{**ADDON, "dependsOn": ["b"]}, {**ADDON, "name": "b", "dependsOn": ["a"]}], "dependency cycle"),
        ([{**ADDON, "default": True, "dependsOn": ["b"]}, {**ADDON, "name": "b"}], "depends on the optional b"),
        ([{"name": "h", "source": "helm", "chart": "c", "namespace": "x"}], "needs `chart`, `release` and `version`"),
        ([{**ADDON, "chart": "c"}], "belong to helm entries"),
        ([{"name": "h", "source": "helm", "chart": "c", "release": "r", "version": "1.0.0", "namespace": "x",
           "repository": "https://x.example/charts; rm -rf /"}], "repository"),
        ([{**ADDON, "name": "Bad_Name"}], "name"),
        ([{**ADDON, "source": "manifest"}], "source"),
        ([{**ADDON, "unknownKey": 1}], "unknownKey"),
    ],
)
def test_invalid_catalogs_are_refused(entries: list[dict[str, Any]], text: str) -> None:
    with pytest.raises(ValueError, match="invalid") as info:
        parse_catalog(_catalog(entries))
    assert text in str(info.value)


def test_catalog_must_be_yaml() -> None:
    with pytest.raises(ValueError, match="not valid YAML"):
        parse_catalog("dependencies: [")


def test_addon_configuration_values_compare_by_content() -> None:
    assert desired_config({}) is None
    assert desired_config({"b": 1, "a": {"c": True}}) == '{"a": {"c": true}, "b": 1}'
    assert parse_config(None) == {} and parse_config("") == {}
    assert parse_config('{"a": 1}') == {"a": 1}
    assert parse_config("a: 1\nb: [x]\n") == {"a": 1, "b": ["x"]}


def test_pod_identity_role_documents() -> None:
    trust = pod_identity_trust("123456789012", "eks-cluster-a", "kube-system", "s3-csi-driver-sa")["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert trust["Condition"]["StringEquals"]["aws:SourceAccount"] == "123456789012"
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/eks-cluster-name"] == "eks-cluster-a"
    policy = csi_data_policy(Scope("123456789012", "us-west-2", "a", "eks-cluster-a", "my-bucket"))
    resources = {r for s in policy["Statement"] if s["Effect"] == "Allow" for r in s["Resource"]}
    assert resources == {"arn:aws:s3:::my-bucket", "arn:aws:s3:::my-bucket/clusters/a/data/*"}
    assert policy["Statement"][-1]["Effect"] == "Deny"  # the lifecycle guard ends every workload policy
    assert not any(r == "*" for s in policy["Statement"] for r in s["Resource"])


def test_kubeconfig_is_private_and_removed() -> None:
    conn = Connection("https://127.0.0.1:6443", "k8s-aws-v1.secret", "/tmp/ca.crt")
    with kubeconfig(conn) as path:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == 0o600
        document = yaml.safe_load(Path(path).read_text())
        assert document["clusters"][0]["cluster"] == {"server": conn.endpoint, "certificate-authority": "/tmp/ca.crt"}
        assert document["users"][0]["user"]["token"] == "k8s-aws-v1.secret"
    assert not os.path.exists(path)
    assert "secret" not in repr(conn)
    assert redact("failed: Bearer abc.def token k8s-aws-v1.aGVsbG8") == "failed: <redacted> token <redacted>"


FAKE_HELM = """#!{python}
import json, os, stat, sys
args = sys.argv[1:]
config = args[args.index("--kubeconfig") + 1]
record = {{"args": args, "mode": stat.S_IMODE(os.stat(config).st_mode), "env": sorted(k for k in os.environ
          if k.startswith("HELM_"))}}
if "--values" in args:
    record["values"] = open(args[args.index("--values") + 1]).read()
with open({log!r}, "a") as handle:
    handle.write(json.dumps(record) + "\\n")
if args[0] == "list":
    print(json.dumps([{{"name": "dependencies", "revision": "3", "status": "deployed",
                       "chart": "hyperpod-dependencies-0.1.0"}}]))
elif args[0] == "status":
    sys.stderr.write("Error: release: not found\\n")
    sys.exit(1)
elif args[0] == "upgrade" and "bad" in args:
    sys.stderr.write("Error: looks like the repo is not a valid chart repository, token Bearer xyz\\n")
    sys.exit(1)
else:
    print("{{}}")
"""


@pytest.fixture
def fake_helm(tmp_path: Path) -> tuple[Helm, Path]:
    log = tmp_path / "calls.jsonl"
    binary = tmp_path / "helm"
    binary.write_text(FAKE_HELM.format(python=sys.executable, log=str(log)))
    binary.chmod(0o755)
    helm = Helm(str(binary), tmp_path / "home", Connection("https://127.0.0.1:1", "k8s-aws-v1.tok", None))
    return helm, log


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_helm_upgrade_install_argument_list(fake_helm: tuple[Helm, Path]) -> None:
    helm, log = fake_helm
    helm.upgrade_install(release="dependencies", chart="hyperpod-dependencies", namespace="kube-system",
                         version="0.1.0", repo="http://127.0.0.1:8/charts", values={"a": {"enabled": True}},
                         timeout_seconds=120, wait=True)
    call = _calls(log)[0]
    args = call["args"]
    assert args[:4] == ["upgrade", "--install", "dependencies", "hyperpod-dependencies"]
    for flag, value in (("--namespace", "kube-system"), ("--version", "0.1.0"),
                        ("--repo", "http://127.0.0.1:8/charts"), ("--timeout", "120s")):
        assert args[args.index(flag) + 1] == value
    assert "--create-namespace" in args and "--wait" in args
    assert call["mode"] == 0o600
    assert yaml.safe_load(call["values"]) == {"a": {"enabled": True}}
    assert {"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} <= set(call["env"])
    assert not any("k8s-aws-v1" in a for a in args)  # the token only travels in the kubeconfig file
    assert helm.release("dependencies", "kube-system") == {
        "name": "dependencies", "revision": "3", "status": "deployed", "chart": "hyperpod-dependencies-0.1.0"}
    assert helm.release("other", "kube-system") is None
    assert helm.status("dependencies", "kube-system") is None


def test_helm_refuses_unsafe_values_and_redacts_errors(fake_helm: tuple[Helm, Path]) -> None:
    helm, log = fake_helm
    for bad in ({"release": "Bad;rm"}, {"namespace": "kube system"}, {"repo": "http://x/$(id)"},
                {"version": "1.0 --post-renderer=/bin/sh"}):
        kwargs: dict[str, Any] = {"release": "r", "chart": "c", "namespace": "n", "version": "1.0.0",
                                  "repo": "http://127.0.0.1:8/charts", "values": {}, **bad}
        with pytest.raises(PreconditionFailed):
            helm.upgrade_install(**kwargs)
    assert not log.exists()  # nothing ran
    with pytest.raises(HelmError) as info:
        helm.upgrade_install(release="bad", chart="c", namespace="n", version="1.0.0", repo=None, values={})
    assert "not a valid chart repository" in info.value.message
    assert "xyz" not in info.value.stderr and "<redacted>" in info.value.stderr
    missing = Helm("/nonexistent/helm", Path("/tmp"), Connection("https://x", "t", None))
    with pytest.raises(PreconditionFailed, match="helm is not installed"):
        missing.list_releases("n")
