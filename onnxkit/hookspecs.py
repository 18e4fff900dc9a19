"""The whole plugin contract of onnxkit: eight pluggy hooks, project name ``onnxkit``.

Every hook returns a *table* and is called exactly once per plugin when a
:class:`onnxkit.registry.Registry` is built (never per model, never per node).  A plugin
implements any subset of them with ``@onnxkit.hookimpl``.  What every hook shares:

* It must not import a model, touch the network, start threads or mutate its arguments.
* It must be quick: the registry is built on first use of onnxkit in a process.
* What it returns is checked by the host.  A wrong shape, an exception, or a claim that
  another plugin already made is reported against the plugin by name
  (:attr:`Registry.faults`, ``onnxkit plugins``) and that contribution is left out; the
  other plugins keep working.

Who provides what.  A *domain* package provides its operator sets, inference functions and
*portable kernels*: each operator written once against an array namespace (``ctx.xp``, the
Python array API standard) so it runs on every backend.  A *backend* provides a
:class:`~onnxkit.registry.Backend` (its namespace, device and the transfers to and from numpy)
and *overrides*: kernels of its own, through ``onnxkit_kernels``, where a native routine is
much faster (torch's convolution, an im2col convolution in numpy...) and computes the same
result.  An override wins over the portable kernel of the same definition on its backend.
Plugin authors import everything they need from :mod:`onnxkit.plugin`.

Keys are ``(domain, op_type, since_version)`` triples, ``domain`` '' for ai.onnx (the
host also accepts 'ai.onnx' and normalises it), per Clause 14.3 which identifies an
operator definition by that triple.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("onnxkit")
hookimpl = pluggy.HookimplMarker("onnxkit")


@hookspec
def onnxkit_operator_sets():
    """Operator sets this plugin defines (Part 2 definitions; Clause 5.3.2, 14.3).

    Return an iterable of :class:`onnxkit.schema.OperatorSet`, one per (domain, version).
    Each carries the *complete* inventory of that version: every operator definition in
    force there (those introduced at earlier versions included), as
    :class:`onnxkit.schema.OpSchema` objects.  A (domain, version) pair may be defined by
    one plugin only.
    """


@hookspec
def onnxkit_extension_operators():
    """Operators this plugin adds to a domain *another* plugin owns: *extension* operators.

    Return an iterable of :class:`onnxkit.schema.OpSchema` whose ``domain`` is provided by another
    plugin's operator sets (onnxkit-microsoft adds ``SimplifiedLayerNormalization`` to ai.onnx,
    where onnxruntime registers it).  The owner always wins: an extension whose name the owner
    defines at a version at or below its ``since_version`` (so it could never bind) is refused, as
    is one for a domain no plugin provides or the plugin provides itself, or a definition another
    plugin already extended (each a
    :class:`~onnxkit.registry.PluginFault`).  A node importing version v of the domain whose
    operator set lacks its op_type binds to the extension with the greatest ``since_version <= v``
    (onnxruntime's LayerNormalization-1 binds below ai.onnx 17, where ai.onnx's first is);
    the checker reports every such node (``extension-operator``, naming the distribution): it is
    not part of the domain's standard (Clause 5.3.2), never silently accepted.  Kernels and
    inference functions of an extension are keyed ``(domain, op_type, since_version)`` as usual.
    """


@hookspec
def onnxkit_opaque_types():
    """Opaque types (Clause 6.8.4) this plugin's domains introduce.

    Return an iterable of :class:`onnxkit.registry.OpaqueTypeDef` (domain, name,
    python_type, description).  Values of that type are instances of ``python_type``;
    the host treats them as unanalysable beyond their identity.
    """


@hookspec
def onnxkit_inference_functions():
    """Shape and type inference functions (Clause 9.2).

    Return a mapping ``{(domain, op_type, since_version): fn}``: a
    :class:`onnxkit.plugin.FunctionTable` (``FUNCTIONS.register(op_types, first, last)``
    registers ``fn`` for every since_version of the operators' definitions in that range), or a
    package's families through :func:`onnxkit.plugin.lazy_family_tables`.  ``fn(ctx)`` receives
    an inference context (input types, constant inputs where known, attributes) and returns
    the output types; it must yield unknown rather than guess (9.4) and must never equate
    two distinct dimension variables (9.3).
    """


@hookspec
def onnxkit_backends():
    """Backends (devices) this plugin provides.

    Return an iterable of :class:`onnxkit.registry.Backend`.  A backend name ('cpu', 'gpu')
    may be provided by one plugin only.  Kernels for a backend may come from any plugin
    (a domain package carries its own CPU kernels, for example).

    A backend that cannot compute every operator or element type declares
    ``element_types`` (the tags it computes exactly) and ``fallback`` (the name of a backend
    that can, e.g. ``'cpu'``).  A node of a session planned on it whose definition has no
    kernel there (and no function body), or whose input or output types are outside
    ``element_types``, is then planned on the fallback with explicit transfers
    (``to_numpy`` of one backend, ``asarray`` of the other): decided at planning, listed in
    ``InferenceSession.fallbacks`` and by ``onnxkit unsupported MODEL --backend NAME``, never a
    run-time surprise, and never an approximation (Clause 4.4).  A backend without
    ``fallback`` reports such a node unsupported; a fallback's own ``fallback`` is not followed.

    A backend declares what its values are with ``array_kind``: ``"numpy"`` (numpy arrays on the
    host, with ``host_arrays``), ``"torch"`` (torch tensors: fed and returned as they are), or
    None; the host reads that, never the backend's description.
    """


@hookspec
def onnxkit_kernels(backend):
    """Kernels this plugin provides for the backend named ``backend``: a backend's overrides.

    Called once for each backend known to the registry.  Return a mapping
    ``{(domain, op_type, since_version): kernel}`` for that backend (empty or None for
    backends this plugin has no kernels for).  The triple is the definition the kernel
    implements exactly: a node bound to another definition never gets this kernel
    (Clause 4.4 forbids substituting another version's behaviour).
    """


@hookspec
def onnxkit_portable_kernels():
    """Kernels written once for every backend (a domain package's kernels).

    Return a mapping ``{(domain, op_type, since_version): kernel}`` (a
    :class:`onnxkit.plugin.KernelTable`).  A kernel is a factory ``kernel(ctx)`` as for
    :func:`onnxkit_kernels`; it computes with the namespace ``ctx.xp`` of the backend the node
    is planned on (array API functions only, values of that backend), moves values to the host
    with ``ctx.to_host`` where it needs their contents (a shape, indices...), and makes dtypes
    with ``ctx.dtype``.  Every backend with a ``namespace`` runs it unless it overrides that
    definition.  A kernel that needs numpy itself (object arrays of strings, maps, ml_dtypes'
    narrow types) is registered with ``host_only=True``: it runs on backends whose values are
    numpy arrays (``host_arrays``, the cpu backend), and elsewhere through the backend's
    per-node fallback.

    The portable kernel is also where the domain package declares what the host must know of the
    *operator*, whichever backend's kernel runs it (:func:`onnxkit.kernel_traits.operator_traits`;
    the host keeps no list of operator names): ``@size_guard(kind)``, the run-time size check its
    nodes need before the kernel runs (:data:`onnxkit.kernel_traits.SIZE_GUARDS`);
    ``@nondeterministic``, never evaluated at planning; ``@fails_on_values``, never dropped unread
    by the shape specializer (all from :mod:`onnxkit.plugin`).
    """


@hookspec
def onnxkit_storage():
    """Storages through which external data locations are opened (Clause 13, 15.3).

    Return an iterable of :class:`onnxkit.storage.Storage`.  A storage name ('file',
    'zip', ...) may be provided by one plugin only.  The host's own local-filesystem
    storage is registered through this same hook.
    """
