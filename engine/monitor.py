"""The in-process resource monitor the program talks to (a ``MockMonitor`` doing real engine work).

The SDK calls these methods from its executor threads; each call decodes the request into a ``Goal``,
hands it to the ``Deployment`` and encodes the answer, as the CLI's resource monitor would.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import empty_pb2
from pulumi.runtime.mocks import MockMonitor, Mocks
from pulumi.runtime.proto import resource_pb2

from engine.aliases import AliasSpec, resource_urn
from engine.deployment import STACK_TYPE, Deployment, Goal, display_state
from engine.model import ResourceState, Severity, Step, StepOp
from engine.provider_host import ProviderError
from engine.register import Registrar
from engine.stackrefs import STACK_REFERENCE_TYPE, StackReferenceError, check_inputs
from engine.values import from_struct, strip_secrets, to_struct


class _NoMocks(Mocks):
    """MockMonitor needs a Mocks object; every path that would use it is overridden below."""

    def call(self, args: Any) -> tuple[dict[str, Any], None]:
        raise NotImplementedError(f"invoke {args.token} is not supported by the test engine")

    def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError("unreachable: resources go through EngineMonitor.RegisterResource")


class EngineMonitor(MockMonitor):
    def __init__(self, deployment: Deployment) -> None:
        super().__init__(_NoMocks())
        self.deployment = deployment
        self.registrar = Registrar(deployment)

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        # The real rule (urn.go New): the parent's whole qualified type chain, none for the root stack.
        # (MockMonitor keeps only the parent's last type, which differs from depth 2 on.)
        dep = self.deployment
        return resource_urn(dep.stack, dep.project, parent, type_, name)

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        urn = self.make_urn(request.parent, request.type, request.name)
        goal = Goal(
            urn=urn,
            type=request.type,
            name=request.name,
            custom=bool(request.custom),
            parent=request.parent,
            inputs=from_struct(request.object),
            protect=bool(request.protect),
            dependencies=sorted(set(request.dependencies)),
            property_dependencies={k: sorted(set(v.urns)) for k, v in request.propertyDependencies.items() if v.urns},
            ignore_changes=list(request.ignoreChanges),
            additional_secret_outputs=list(request.additionalSecretOutputs),
            retain_on_delete=bool(request.retainOnDelete),
            replace_on_changes=list(request.replaceOnChanges),
            delete_before_replace=request.deleteBeforeReplace if request.deleteBeforeReplaceDefined else None,
            aliases=[AliasSpec.from_proto(a) for a in request.aliases] + [AliasSpec(urn=u) for u in request.aliasURNs],
        )
        out = self.registrar.register(goal)
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, out.id, out.outputs)
        return resource_pb2.RegisterResourceResponse(
            urn=urn,
            id=out.id,
            object=to_struct(out.outputs),
            result=resource_pb2.Result.SUCCESS if out.ok else resource_pb2.Result.FAIL,
            unknown=out.unknown,
        )

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802
        dep = self.deployment
        outputs = from_struct(request.outputs)
        with dep.lock:
            res = dep.live.get(request.urn)
            if res is not None and res.type == STACK_TYPE:
                # Kept aside and applied when the run ends (Deployment.finalize_outputs), as the step
                # executor saves the stack's outputs event until it knows whether the run failed.
                dep.program_outputs = outputs
            elif res is not None and request.urn in dep.registered:
                dep.live[request.urn] = res.model_copy(update={"outputs": outputs})
                dep.save()
        return empty_pb2.Empty()

    def ReadResource(self, request: Any) -> Any:  # noqa: N802
        """``Resource.get``: read an existing object through its provider; recorded as external."""
        dep = self.deployment
        urn = self.make_urn(request.parent, request.type, request.name)
        props = from_struct(request.properties)
        if request.type == STACK_REFERENCE_TYPE:
            return self._read_stack_reference(urn, request, props)
        try:
            if dep.host is None or not request.type.startswith("pulumi-python:dynamic"):
                raise ProviderError(f"cannot read {request.type}: only dynamic resources are supported")
            id_, outs, _ = dep.host.read(urn, request.id, {}, strip_secrets(props))
        except ProviderError as exn:
            dep.diag(exn.message, Severity.ERROR, urn)
            with dep.lock:
                dep.failed.add(urn)
            raise
        res = ResourceState(
            urn=urn,
            custom=True,
            id=id_,
            type=request.type,
            inputs=props,
            outputs=outs,
            parent=request.parent,
            external=True,
        )
        with dep.lock:
            dep.registered.add(urn)
            dep.live[urn] = res
            dep.save()
        dep.record(Step(op=StepOp.READ, urn=urn, provider=dep.provider_ref, newState=display_state(res)))
        return resource_pb2.ReadResourceResponse(urn=urn, properties=to_struct(outs))

    def _read_stack_reference(self, urn: str, request: Any, props: dict[str, Any]) -> Any:
        """The builtin provider's Read of a stack reference (builtins.go): the referenced stack's outputs.
        An unknown stack fails the step, which cancels the run as any failed step does."""
        dep = self.deployment
        try:
            name = check_inputs(props)
            if dep.stack_refs is None:
                raise StackReferenceError(f"unknown stack {name!r}: no --stack-state is mapped")
            outs, elided = dep.stack_refs.state(name)
        except StackReferenceError as exn:
            dep.step_failed(urn, f"reading stack reference: {exn}")
            raise
        if elided:
            dep.diag(f"eliding undecryptable secrets for stack reference '{name}'", Severity.INFO)
        dep.redact.add(outs)
        res = ResourceState(urn=urn, custom=True, id=request.id or name, type=request.type, inputs={"name": name},
                            outputs=outs, parent=request.parent, external=True)
        with dep.lock:
            old = dep.old.get(urn)
            dep.registered.add(urn)
            dep.live[urn] = res
            dep.save()
        dep.record(Step(op=StepOp.READ, urn=urn, provider=dep.builtin_provider_ref,
                        oldState=display_state(old), newState=display_state(res)))
        return resource_pb2.ReadResourceResponse(urn=urn, properties=to_struct(outs))
