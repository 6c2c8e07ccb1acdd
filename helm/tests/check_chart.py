#!/usr/bin/env python3
"""Checks the pilotage Helm chart with Helm's own template engine and linter and the
Kubernetes API schemas; no cluster and no helm binary needed.

- Helm: helm-python-sdk, a binding of Helm's Go library (libhelm_c, in the wheel).
- Kubernetes: kubernetes-validate, the API's JSON schemas per version (strict: an
  unknown field is an error). The ServiceMonitor is a custom resource, not in those
  schemas: it is validated against helm/tests/servicemonitor.schema.json instead.

What it checks:
1. `helm lint --strict` (Kubernetes 1.30) is clean, with the default values and with
   ci/production-values.yaml: no warning, no error.
2. Both value sets render, and every object is valid for Kubernetes 1.30; the objects
   fit together (ports, selectors, the migration hook, the security context, the
   settings file and its flag).
3. Values that break values.schema.json, or leave the server without a JWT issuer,
   make rendering fail.

It prints one line per check and, last, a JSON report (read by
platform/cli/tests/all/helm.rs, which also parses the rendered settings with the
server's own `Settings`). Exit status 0 when every check passed, 1 otherwise.

By hand, from the repository root:

    python3 -m venv target/helm-py
    target/helm-py/bin/pip install -r helm/tests/requirements.txt
    target/helm-py/bin/python helm/tests/check_chart.py
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any, Callable

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.version import __version__ as KUBERNETES_VALIDATE_VERSION

HERE = Path(__file__).resolve().parent
CHART = HERE.parent / "pilotage"
PRODUCTION_VALUES = CHART / "ci" / "production-values.yaml"
SERVICE_MONITOR_SCHEMA = HERE / "servicemonitor.schema.json"
# A version kubernetes-validate bundles, and the oldest the chart is meant for in
# practice (autoscaling/v2 and policy/v1 have been served since 1.23).
KUBERNETES = "1.30.0"
RELEASE = "pilotage"
NAMESPACE = "pilotage"


class Checks:
    """Runs named checks, printing each outcome; a failing check does not stop the
    others, so one run shows every problem."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []

    def check(self, name: str, condition: bool, detail: str = "") -> bool:
        if condition:
            self.passed += 1
            print(f"ok    {name}")
        else:
            self.failed.append(f"{name}: {detail}" if detail else name)
            print(f"FAIL  {name}" + (f": {detail}" if detail else ""))
        return condition

    def run(self, name: str, body: Callable[[], Any]) -> Any:
        """Runs `body`; an exception fails the check with its message."""
        try:
            result = body()
        except Exception as error:  # noqa: BLE001 - every failure is reported, not raised
            self.check(name, False, f"{type(error).__name__}: {error}")
            return None
        self.check(name, True)
        return result


def render(values: dict[str, Any] | None) -> dict[str, str]:
    """`helm template` of the chart: template path -> rendered text (hooks included)."""
    with helm.Chart.load(CHART) as chart:
        return chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)


def objects_of(manifests: dict[str, str]) -> list[dict[str, Any]]:
    """The Kubernetes objects of a render, NOTES.txt and empty templates left out."""
    found = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for document in yaml.safe_load_all(text):
            if document:
                found.append(document)
    return found


def lint(checks: Checks, label: str, values: dict[str, Any] | None) -> None:
    report = helm.lint(CHART, values, strict=True, kube_version="v" + KUBERNETES)
    for message in report["messages"]:
        print(f"      lint {label}: severity {message['severity']} {message['path']}: {message['error']}")
    # Severity 1 is INFO (e.g. "icon is recommended"); 2 WARNING and 3 ERROR are not clean.
    bad = [m for m in report["messages"] if m["severity"] >= 2] + [{"error": e} for e in report["errors"]]
    checks.check(
        f"helm lint --strict ({label} values, Kubernetes {KUBERNETES})",
        report["total_charts_linted"] == 1 and not bad,
        json.dumps(bad),
    )


def validate_object(checks: Checks, label: str, obj: dict[str, Any], monitor_schema: dict[str, Any]) -> None:
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    if obj.get("apiVersion") == "monitoring.coreos.com/v1":
        # Not a Kubernetes API type: the hand-written schema of the fields the chart uses.
        errors = sorted(jsonschema.Draft7Validator(monitor_schema).iter_errors(obj), key=str)
        checks.check(
            f"{label}: {name} valid against {SERVICE_MONITOR_SCHEMA.name} (a CRD, not in the API schemas)",
            not errors,
            "; ".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors),
        )
        return
    try:
        version = kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        checks.check(f"{label}: {name} valid for Kubernetes {version} (strict)", True)
    except kubernetes_validate.ValidationError as error:
        path = "/".join(str(p) for p in error.path)
        checks.check(f"{label}: {name} valid for Kubernetes {KUBERNETES} (strict)", False, f"{path}: {error.message}")
    except kubernetes_validate.SchemaNotFoundError as error:
        checks.check(f"{label}: {name} has a Kubernetes schema", False, error.message)


def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for obj in objects:
        assert obj["kind"] not in table, f"two objects of kind {obj['kind']}"
        table[obj["kind"]] = obj
    return table


def check_render(checks: Checks, label: str, values: dict[str, Any] | None, expected_kinds: set[str]) -> dict[str, Any]:
    """Renders with `values`, validates every object and checks how they fit together.
    Returns what the Rust test needs: the settings file, the server's and the
    migration's arguments and environment variable names."""
    manifests = checks.run(f"{label}: the chart renders", lambda: render(values))
    if manifests is None:
        return {}
    objects = objects_of(manifests)
    monitor_schema = json.loads(SERVICE_MONITOR_SCHEMA.read_text())
    for obj in objects:
        validate_object(checks, label, obj, monitor_schema)
    kinds = by_kind(objects)
    checks.check(f"{label}: objects are {sorted(expected_kinds)}", set(kinds) == expected_kinds, str(sorted(kinds)))

    deployment = kinds["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (server,) = pod["containers"]
    security = server["securityContext"]
    checks.check(
        f"{label}: server container is locked down",
        security.get("readOnlyRootFilesystem") is True
        and security.get("allowPrivilegeEscalation") is False
        and security.get("capabilities", {}).get("drop") == ["ALL"]
        and pod["securityContext"].get("runAsNonRoot") is True,
        json.dumps(security),
    )
    checks.check(
        f"{label}: probes are /healthz (liveness, startup) and /readyz (readiness) on the http port",
        server["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        and server["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        and server.get("startupProbe", {}).get("httpGet", {"path": "/healthz", "port": "http"})
        == {"path": "/healthz", "port": "http"},
    )
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    env = {e["name"]: e for e in server["env"]}
    data_dir = env["PILOTAGE_DATA_DIR"]["value"]
    checks.check(
        f"{label}: the data folder and /tmp are emptyDir volumes",
        "emptyDir" in volumes[mounts[data_dir]] and "emptyDir" in volumes[mounts["/tmp"]],
        json.dumps(mounts),
    )
    args = server["args"]
    config_path = args[args.index("--config") + 1] if "--config" in args else ""
    config_dir, _, config_file = config_path.rpartition("/")
    config_map = kinds["ConfigMap"]
    checks.check(
        f"{label}: `serve --config` names the mounted ConfigMap's file",
        args[0] == "serve"
        and mounts.get(config_dir) == "config"
        and volumes["config"]["configMap"]["name"] == config_map["metadata"]["name"]
        and config_file in config_map["data"],
        f"args {args}",
    )
    settings_text = config_map["data"].get(config_file, "")
    settings = checks.run(f"{label}: the settings file is TOML", lambda: tomllib.loads(settings_text)) or {}
    port = server["ports"][0]
    checks.check(
        f"{label}: the server listens on all interfaces, on the container port, with JWT auth and no demo",
        settings.get("listen") == f"0.0.0.0:{port['containerPort']}"
        and settings.get("auth", {}).get("mode") == "jwt"
        and settings.get("demo") is False,
        json.dumps(settings),
    )
    for name in ("PILOTAGE_DATABASE_URL", "PILOTAGE_SECRET_KEY"):
        checks.check(
            f"{label}: {name} comes from a Secret",
            "secretKeyRef" in env.get(name, {}).get("valueFrom", {}),
            json.dumps(env.get(name)),
        )

    service = kinds["Service"]
    service_ports = {p["name"]: p for p in service["spec"]["ports"]}
    service_port = service_ports["http"]
    checks.check(
        f"{label}: the Service selects the server pods on its http port",
        service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        and service_port["targetPort"] == port["name"] == "http"
        and deployment["spec"]["template"]["metadata"]["labels"].items() >= service["spec"]["selector"].items(),
    )

    job = kinds["Job"]
    (migrate,) = job["spec"]["template"]["spec"]["containers"]
    job_env = {e["name"]: e for e in migrate["env"]}
    checks.check(
        f"{label}: the migration Job is a pre-install,pre-upgrade hook running `pilotage migrate`",
        job["metadata"]["annotations"].get("helm.sh/hook") == "pre-install,pre-upgrade"
        and migrate["args"] == ["migrate"]
        and migrate["image"] == server["image"],
    )
    checks.check(
        f"{label}: the migration Job uses the server's database Secret",
        job_env.get("PILOTAGE_DATABASE_URL") == env["PILOTAGE_DATABASE_URL"],
    )
    checks.check(
        f"{label}: the migration Job runs locked down too",
        migrate["securityContext"] == security
        and job["spec"]["template"]["spec"]["securityContext"] == pod["securityContext"],
    )

    if "HorizontalPodAutoscaler" in kinds:
        target = kinds["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
        checks.check(
            f"{label}: the autoscaler scales the Deployment, which leaves its replica count alone",
            target == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]}
            and "replicas" not in deployment["spec"],
        )
    else:
        checks.check(f"{label}: without an autoscaler the Deployment sets replicas", "replicas" in deployment["spec"])
    if "PodDisruptionBudget" in kinds:
        checks.check(
            f"{label}: the disruption budget selects the server pods",
            kinds["PodDisruptionBudget"]["spec"]["selector"] == deployment["spec"]["selector"],
        )
    if "Ingress" in kinds:
        backends = [
            path["backend"]["service"]
            for rule in kinds["Ingress"]["spec"]["rules"]
            for path in rule["http"]["paths"]
        ]
        checks.check(
            f"{label}: the Ingress routes to the Service's port",
            backends
            and all(b == {"name": service["metadata"]["name"], "port": {"number": service_port["port"]}} for b in backends),
        )
    container_ports = {p["name"]: p for p in server["ports"]}
    if "metrics" in container_ports:
        checks.check(
            f"{label}: the server serves /metrics on the pod's and the Service's metrics port",
            settings.get("metrics_listen") == f"0.0.0.0:{container_ports['metrics']['containerPort']}"
            and service_ports.get("metrics", {}).get("targetPort") == "metrics",
            json.dumps(settings),
        )
    else:
        checks.check(
            f"{label}: without metrics neither the settings nor the Service name a metrics port",
            "metrics_listen" not in settings and "metrics" not in service_ports,
        )
    console_on = bool((values or {}).get("console", {}).get("enabled", False))
    checks.check(
        f"{label}: the server serves the console exactly when console.enabled is set",
        settings.get("console", False) is console_on,
        json.dumps(settings),
    )
    if "ServiceMonitor" in kinds:
        monitor = kinds["ServiceMonitor"]["spec"]
        checks.check(
            f"{label}: the ServiceMonitor scrapes the Service's metrics port at /metrics",
            monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
            and monitor["endpoints"][0]["port"] == "metrics" == service_ports.get("metrics", {}).get("name")
            and monitor["endpoints"][0]["path"] == "/metrics",
        )
    if label == "production":
        check_validators_refuse(checks, deployment, kinds["ServiceMonitor"], monitor_schema)
    return {
        "kinds": sorted(kinds),
        "settings_toml": settings_text,
        "server_args": args,
        "server_env": sorted(env),
        "migration_args": migrate["args"],
        "migration_env": sorted(job_env),
    }


def check_validators_refuse(
    checks: Checks, deployment: dict[str, Any], monitor: dict[str, Any], monitor_schema: dict[str, Any]
) -> None:
    """The other polarity of validation: the same objects with one field misspelt must
    fail, or a passing validation above would prove nothing."""
    broken = json.loads(json.dumps(deployment))
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    try:
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)
        checks.check("kubernetes-validate refuses a Deployment with a misspelt field", False, "it passed")
    except kubernetes_validate.ValidationError as error:
        checks.check("kubernetes-validate refuses a Deployment with a misspelt field", True)
        print(f"      {error.message}")
    broken = json.loads(json.dumps(monitor))
    broken["spec"]["endpoints"][0]["scrapeInterval"] = broken["spec"]["endpoints"][0].pop("interval")
    errors = list(jsonschema.Draft7Validator(monitor_schema).iter_errors(broken))
    checks.check("the ServiceMonitor schema refuses a misspelt field", bool(errors))
    for error in errors:
        print(f"      {error.message}")


def check_refused(checks: Checks, label: str, values: dict[str, Any], expected: str) -> None:
    """Rendering with `values` must fail, with `expected` in the message."""
    try:
        render(values)
    except helm.HelmError as error:
        message = str(error)
        checks.check(f"refused: {label}", expected in message, f"message lacks {expected!r}: {message}")
        print(f"      {' '.join(message.split())}")
        return
    checks.check(f"refused: {label}", False, "it rendered")


def main() -> int:
    print(
        f"helm {helm.helm_sdk_version()} (helm-python-sdk, libhelm_c {helm.helm_c_version()}), "
        f"kubernetes-validate {KUBERNETES_VALIDATE_VERSION}, Kubernetes {KUBERNETES}"
    )
    checks = Checks()
    production = yaml.safe_load(PRODUCTION_VALUES.read_text())

    lint(checks, "default", None)
    lint(checks, "production", production)

    base = {"ConfigMap", "Deployment", "Job", "Service", "ServiceAccount"}
    renders = {
        "default": check_render(checks, "default", None, base),
        "production": check_render(
            checks,
            "production",
            production,
            base | {"HorizontalPodAutoscaler", "PodDisruptionBudget", "Ingress", "ServiceMonitor"},
        ),
    }

    check_refused(checks, "replicaCount of the wrong type", {"replicaCount": "three"}, "replicaCount")
    check_refused(checks, "an unknown top-level value", {"replicas": 3}, "replicas")
    check_refused(checks, "an unknown nested value", {"ingress": {"enable": True}}, "enable")
    check_refused(
        checks, "an issuer without its JWKS URL", {"auth": {"issuers": [{"issuer": "https://a/"}]}}, "jwksUrl"
    )
    check_refused(checks, "a pull policy outside the closed set", {"image": {"pullPolicy": "Sometimes"}}, "pullPolicy")
    check_refused(
        checks,
        "a policy decision outside the closed set",
        {"policies": {"acme": {"rules": [{"risk": "write", "decision": "maybe"}]}}},
        "decision",
    )
    check_refused(
        checks,
        "no JWT issuer at all (neither auth.issuers nor a Secret)",
        {"secrets": {"jwtIssuers": {"name": ""}}},
        "no JWT issuer",
    )

    report = {
        "ok": not checks.failed,
        "passed": checks.passed,
        "failed": checks.failed,
        "helm": helm.helm_sdk_version(),
        "kubernetes_validate": KUBERNETES_VALIDATE_VERSION,
        "kubernetes": KUBERNETES,
        "renders": renders,
    }
    print(f"{checks.passed} passed, {len(checks.failed)} failed")
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
