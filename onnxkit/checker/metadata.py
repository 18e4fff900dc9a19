"""Metadata (Clause 5.5), device configurations, quantization annotations, training bindings.

* :func:`check_props` - ``duplicate-metadata-key`` (5.5): two ``metadata_props`` entries of
  one message with the same key (model, graph, node, value info, tensor, function).  The
  ``Image.`` keys of Table 4 are compared without regard to case, as 5.5 requires;
  ``invalid-metadata-value`` (warning) for an ``Image.`` value Table 4 does not list.
* :func:`check_configurations` - model device configurations (B.2.12):
  ``duplicate-device-configuration`` and ``device-count-mismatch`` (warnings).
* :func:`check_node_devices` - ``unknown-device-configuration`` (B.2.6, warning): a node's
  configuration_id names no configuration of the model; ``unknown-sharding-tensor``
  (B.2.7, warning): a sharding spec names a value that is not an input or output of the node;
  ``mandatory-field-missing`` (B.2.9): a simple sharding with neither dim_value nor dim_param.
* :func:`check_annotations` - ``unknown-annotation-tensor`` (B.2.14, warning).
* :func:`check_training` - ``training-binding-invalid`` (B.2.10, warning): a binding key
  that is not an initializer of the main graph, or a value that is not an output of the
  graph it binds from.

These are warnings where Part 1 states no requirement in words and Annex B only implies
one: the model still conforms, but a consumer cannot give the reference a meaning.
"""

from __future__ import annotations

from .. import ir
from .context import Context, q

#: Table 4: the Image.* keys and their values (compared without regard to case).
IMAGE_VALUES = {
    "image.bitmappixelformat": {"gray8", "rgb8", "bgr8", "rgba8", "bgra8"},
    "image.colorspacegamma": {"linear", "srgb"},
    "image.nominalpixelrange": {"nominalrange_0_255", "normalized_0_1", "normalized_1_1", "nominalrange_16_235"},
}


def check_props(ctx: Context, props: list, loc: str) -> None:
    seen: dict = {}
    for i, e in enumerate(props):
        key = e.key
        norm = key.lower() if key.lower().startswith("image.") else key
        if norm in seen:
            ctx.emit("duplicate-metadata-key", f"metadata key {key!r} (entry {i}) repeats entry {seen[norm]}; keys are "
                     "distinct", loc)
        else:
            seen[norm] = i
        allowed = IMAGE_VALUES.get(key.lower())
        if allowed is not None and e.value.lower() not in allowed:
            ctx.emit("invalid-metadata-value", f"{key} is {e.value!r}; Table 4 lists {', '.join(sorted(allowed))}", loc)


def check_configurations(ctx: Context, model: ir.Model) -> None:
    seen = set()
    for i, c in enumerate(model.configuration):
        loc = f"model / configuration {i} {q(c.name)}"
        if c.name in seen:
            ctx.emit("duplicate-device-configuration", f"device configuration {c.name!r} is declared more than once", loc)
        seen.add(c.name)
        if c.device and len(c.device) != c.num_devices:
            ctx.emit("device-count-mismatch", f"num_devices is {c.num_devices} but {len(c.device)} devices are listed",
                     loc)


def check_node_devices(ctx: Context, node: ir.Node, loc: str) -> None:
    if not node.device_configurations:
        return
    declared = {c.name for c in ctx.model.configuration} if ctx.model is not None else set()
    values = {n for n in (*node.input, *node.output) if n}
    for i, dc in enumerate(node.device_configurations):
        where = f"{loc} / device_configuration {i} {q(dc.configuration_id)}"
        if dc.configuration_id not in declared:
            ctx.emit("unknown-device-configuration", f"configuration {dc.configuration_id!r} is not declared by the "
                     "model (ModelProto.configuration)", where)
        for spec in dc.sharding_spec:
            if spec.tensor_name not in values:
                ctx.emit("unknown-sharding-tensor", f"sharding spec names {spec.tensor_name!r}, which is not an input "
                         "or output of the node", where)
            for sd in spec.sharded_dim:
                for k, simple in enumerate(sd.simple_sharding):
                    if simple.dim_value is None and simple.dim_param is None:
                        ctx.emit("mandatory-field-missing", f"simple_sharding {k} of axis {sd.axis} sets neither "
                                 "dim_value nor dim_param (exactly one SHALL be present, B.2.9)", where)


def check_annotations(ctx: Context, graph: ir.Graph, defined, loc: str) -> None:
    for a in graph.quantization_annotation:
        if a.tensor_name not in defined:
            ctx.emit("unknown-annotation-tensor", f"quantization annotation names {a.tensor_name!r}, which the graph "
                     "does not define", f"{loc} / quantization_annotation {q(a.tensor_name)}")


def check_training(ctx: Context, model: ir.Model) -> None:
    if model.graph is None:
        return
    inits = {t.name for t in model.graph.initializer} | {s.values.name for s in model.graph.sparse_initializer
                                                          if s.values is not None}
    for i, ti in enumerate(model.training_info):
        for field, graph in (("initialization_binding", ti.initialization), ("update_binding", ti.algorithm)):
            outputs = {o.name for o in graph.output} if graph is not None else set()
            for e in getattr(ti, field):
                where = f"model / training_info {i} / {field} {q(e.key)}"
                if e.key not in inits:
                    ctx.emit("training-binding-invalid", f"{field} key {e.key!r} is not an initializer of the main "
                             "graph", where)
                if e.value not in outputs:
                    ctx.emit("training-binding-invalid", f"{field} value {e.value!r} is not an output of the "
                             f"{'initialization' if field.startswith('init') else 'algorithm'} graph", where)
