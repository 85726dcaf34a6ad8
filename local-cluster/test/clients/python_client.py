"""The local cluster driven by the official Python client (kubernetes-client/python,
Debian's python3-kubernetes), as admin scripts drive a real cluster: a CRD and
its custom objects (create, get, list, merge patch, a stale update refused
409, watch, delete, server-side apply with its conflict), a CEL rule's 422, a batch/v1 Job and a coordination.k8s.io Lease (a leader
election's renew, and its conflict). The client deserialises every answer
into its typed models, so a field the local cluster shapes differently from
kube-apiserver (a time format, a missing list field) fails here.

Usage: python3 python_client.py <kubeconfig> <namespace>
Prints one line per step ("ok <step>") and exits 1 at the first failure.
"""
import datetime
import json
import sys
import time

from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "python.example.com", "v1", "gadgets"


def step(name):
    print("ok " + name, flush=True)


def expect_status(code, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except ApiException as e:
        if e.status != code:
            raise AssertionError("expected HTTP %d, got %d: %s" % (code, e.status, e.body))
        return e
    raise AssertionError("expected HTTP %d, the call succeeded" % code)


def crd():
    return client.V1CustomResourceDefinition(
        metadata=client.V1ObjectMeta(name=PLURAL + "." + GROUP),
        spec=client.V1CustomResourceDefinitionSpec(
            group=GROUP,
            scope="Namespaced",
            names=client.V1CustomResourceDefinitionNames(plural=PLURAL, singular="gadget", kind="Gadget"),
            versions=[client.V1CustomResourceDefinitionVersion(
                name=VERSION, served=True, storage=True,
                subresources=client.V1CustomResourceSubresources(status={}),
                schema=client.V1CustomResourceValidation(open_apiv3_schema=client.V1JSONSchemaProps(
                    type="object",
                    properties={
                        "spec": client.V1JSONSchemaProps(type="object", properties={
                            "size": client.V1JSONSchemaProps(type="integer", minimum=1),
                            "color": client.V1JSONSchemaProps(type="string"),
                        }),
                        "status": client.V1JSONSchemaProps(type="object", x_kubernetes_preserve_unknown_fields=True),
                    },
                )),
            )],
        ),
    )


def wait_established(ext, name):
    for _ in range(100):
        got = ext.read_custom_resource_definition(name)
        if any(c.type == "Established" and c.status == "True" for c in (got.status.conditions or [])):
            return
        time.sleep(0.1)
    raise AssertionError("the CRD never became Established")


def custom_objects(ext, custom, ns):
    ext.create_custom_resource_definition(crd())
    wait_established(ext, PLURAL + "." + GROUP)
    step("crd established")

    body = {"apiVersion": GROUP + "/" + VERSION, "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 2, "color": "red"}}
    made = custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    assert made["metadata"]["uid"] and made["metadata"]["resourceVersion"], made
    step("custom object created")

    e = expect_status(422, custom.create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                      {**body, "metadata": {"name": "g-bad"}, "spec": {"size": 0}})
    assert "spec.size" in e.body, e.body
    step("invalid custom object refused 422")

    listed = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["g1"], listed
    rv = listed["metadata"]["resourceVersion"]
    step("custom objects listed")

    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "g1", {"spec": {"color": "blue"}})
    assert patched["spec"] == {"size": 2, "color": "blue"}, patched
    step("custom object merge-patched")

    stale = dict(made, spec={"size": 3, "color": "green"})
    e = expect_status(409, custom.replace_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "g1", stale)
    assert "the object has been modified" in e.body, e.body
    step("stale update refused 409")

    status = custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, PLURAL, "g1", {"status": {"phase": "Ready"}})
    assert status["status"] == {"phase": "Ready"} and status["spec"]["color"] == "blue", status
    step("status subresource patched")

    custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, {**body, "metadata": {"name": "g2"}})
    seen = []
    for ev in watch.Watch().stream(custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                                   resource_version=rv, timeout_seconds=5):
        seen.append((ev["type"], ev["object"]["metadata"]["name"]))
        if ("ADDED", "g2") in seen:
            break
    assert ("MODIFIED", "g1") in seen and ("ADDED", "g2") in seen, seen
    step("watch from a resourceVersion")

    custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "g2")
    expect_status(404, custom.get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "g2")
    step("custom object deleted")


def cel_rules(ext, custom, ns):
    """A CRD with a CEL rule: the client's 1.22-era models have no x_kubernetes_validations, so it goes as a dict."""
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "ranges." + GROUP},
        "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "ranges", "kind": "Range"},
                 "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {
                         "type": "object",
                         "properties": {"low": {"type": "integer"}, "high": {"type": "integer"}},
                         "x-kubernetes-validations": [{"rule": "self.low < self.high", "message": "low must be below high"}],
                     }},
                 }}}]},
    })
    wait_established(ext, "ranges." + GROUP)
    body = {"apiVersion": GROUP + "/" + VERSION, "kind": "Range", "metadata": {"name": "r1"}, "spec": {"low": 1, "high": 2}}
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "ranges", body)
    e = expect_status(422, custom.patch_namespaced_custom_object, GROUP, VERSION, ns, "ranges", "r1", {"spec": {"low": 5}})
    want = 'Range.python.example.com \\"r1\\" is invalid: spec: Invalid value: \\"object\\": low must be below high'
    assert want in e.body, e.body
    step("cel rule refused 422")


def jobs(batch, ns):
    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="py-job", labels={"made-by": "python"}),
        spec=client.V1JobSpec(
            backoff_limit=0,
            ttl_seconds_after_finished=60,
            template=client.V1PodTemplateSpec(spec=client.V1PodSpec(
                restart_policy="Never",
                containers=[client.V1Container(name="main", image="example/does-not-run:1", args=["x"])],
            )),
        ),
    )
    made = batch.create_namespaced_job(ns, job)
    assert made.metadata.uid and made.spec.template.spec.containers[0].image == "example/does-not-run:1"
    listed = batch.list_namespaced_job(ns, label_selector="made-by=python")
    assert [j.metadata.name for j in listed.items] == ["py-job"]
    got = batch.read_namespaced_job("py-job", ns)
    assert got.metadata.creation_timestamp.tzinfo is not None, got.metadata.creation_timestamp
    batch.delete_namespaced_job("py-job", ns, propagation_policy="Background")
    step("job created, listed, read, deleted")


def leases(coord, ns):
    now = datetime.datetime.now(datetime.timezone.utc)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="py-leader"),
        spec=client.V1LeaseSpec(holder_identity="py-1", lease_duration_seconds=15, acquire_time=now, renew_time=now),
    )
    made = coord.create_namespaced_lease(ns, lease)
    assert made.spec.holder_identity == "py-1" and made.spec.renew_time is not None
    renewed = coord.read_namespaced_lease("py-leader", ns)
    renewed.spec.renew_time = datetime.datetime.now(datetime.timezone.utc)
    after = coord.replace_namespaced_lease("py-leader", ns, renewed)
    assert after.metadata.resource_version != made.metadata.resource_version
    step("lease renewed")
    # Another candidate that read the Lease before the renew loses the race, as leader election expects.
    made.spec.holder_identity = "py-2"
    expect_status(409, coord.replace_namespaced_lease, "py-leader", ns, made)
    step("stale lease takeover refused 409")


def server_side_apply(api, ns):
    gadgets = dynamic.DynamicClient(api).resources.get(api_version=GROUP + "/" + VERSION, kind="Gadget")
    # This client's REST layer sends a non-JSON content type only for a body given as text.
    def apply(spec, manager, force=None):
        body = {"apiVersion": GROUP + "/" + VERSION, "kind": "Gadget", "metadata": {"name": "g3"}, "spec": spec}
        return gadgets.server_side_apply(body=json.dumps(body), name="g3", namespace=ns, field_manager=manager, force_conflicts=force)

    applied = apply({"size": 1, "color": "red"}, "py-deployer")
    entries = [(e.manager, e.operation) for e in applied.metadata.managedFields]
    assert entries == [("py-deployer", "Apply")], entries
    step("custom object server-side applied")

    try:
        apply({"size": 1, "color": "green"}, "py-other")
        raise AssertionError("expected a 409 conflict")
    except dynamic.exceptions.ConflictError as e:
        message = json.loads(e.body)["message"]
        assert message == 'Apply failed with 1 conflict: conflict with "py-deployer": .spec.color', message
    forced = apply({"size": 1, "color": "green"}, "py-other", force=True)
    assert forced.spec.color == "green", forced
    step("apply conflict 409, then forced")


def main():
    kubeconfig, ns = sys.argv[1], sys.argv[2]
    config.load_kube_config(config_file=kubeconfig)
    api = client.ApiClient()
    custom_objects(client.ApiextensionsV1Api(api), client.CustomObjectsApi(api), ns)
    cel_rules(client.ApiextensionsV1Api(api), client.CustomObjectsApi(api), ns)
    server_side_apply(api, ns)
    jobs(client.BatchV1Api(api), ns)
    leases(client.CoordinationV1Api(api), ns)
    step("done")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the test reads the message; the traceback helps whoever runs it by hand
        import traceback
        traceback.print_exc()
        print("failed: %s: %s" % (type(e).__name__, e), flush=True)
        sys.exit(1)
