"""The plugin manager: finds plugins, calls each hook once, and keeps the tables they return.

Plugins come from entry points in the group ``onnxkit`` (found with importlib-metadata)
and from :func:`register_plugin` (tests, notebooks).  Two environment variables help:

* ``ONNXKIT_PLUGINS=onnxkit-default-domain,onnxkit-cpu`` loads only the named plugins
  (distribution names or entry-point names), so "not installed" is testable in place.
* ``ONNXKIT_TRACE=1`` prints every hook call, which plugin answered and what it returned.

A broken plugin never takes the others down: an import error, an exception in a hook,
a result of the wrong shape, or a claim another plugin already made becomes a
:class:`PluginFault` naming the plugin; that contribution is left out and the rest load.
Plugins are consulted in a fixed order (registered name), so the first claim of a key wins.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

from onnxkit import records
from onnxkit import record_methods
import pluggy

from . import hookspecs
from .domains import display_domain, is_default_domain, normalize_domain  # re-exported: the host's imports
from .kernel_traits import traits_of

ENTRY_POINT_GROUP = "onnxkit"
#: The storage external data is read through by default, and the host entry point that owns it.
RESERVED_STORAGE = "file"
HOST_STORAGE_PLUGIN = "local_storage"


@records.define
class Backend:
    """A place kernels run.  ``asarray`` turns a numpy array into a backend value, ``to_numpy`` back.

    ``to_numpy`` returns a numpy array it is given as it is (a value that stayed on the host).
    ``element_types``: the element type tags (Table 5) whose tensors — and sequences and
    optionals of them — this backend computes exactly; None: every type, maps and sparse
    tensors included.  ``fallback``: the name of the backend that runs, per node, what this one
    cannot (no kernel for the definition, or a type outside ``element_types``), decided when a
    session is planned and reported (:mod:`onnxkit.runtime.fallback`); None: such a node is
    unsupported.  ``asarray`` keeps on the host (returns as it is) an array whose element type
    is outside ``element_types``: only nodes planned on the fallback read such values.

    ``namespace``: a callable returning the backend's array namespace (the Python array API
    standard, e.g. ``array_api_compat.numpy`` or ``array_api_compat.torch``), called when the
    first kernel is prepared, not when the registry is built.  A backend with a namespace runs
    every *portable* kernel (:func:`~onnxkit.hookspecs.onnxkit_portable_kernels`) it has no
    override for; its kernels read it as ``ctx.xp``.  ``host_arrays``: its values are numpy
    arrays on the host, so it also runs the portable kernels marked ``host_only`` (those that
    need numpy itself: strings, maps, the 4/2-bit types...).  ``dtype``: maps a numpy dtype to
    the namespace's dtype, or None where the backend has none (default: the numpy dtype itself).
    ``array_kind``: what the backend's values are, as a session's feeds and outputs see them:
    ``"numpy"`` (numpy arrays on the host; such a backend also declares ``host_arrays``),
    ``"torch"`` (torch tensors: a torch tensor fed stays one, outputs stay on the device unless
    asked for on the host), or None (values of another kind: fed and returned as numpy arrays).
    """

    name: str
    device: str = "cpu"
    description: str = ""
    asarray: Optional[Callable] = None
    to_numpy: Optional[Callable] = None
    element_types: Optional[frozenset] = None
    fallback: Optional[str] = None
    namespace: Optional[Callable] = None
    host_arrays: bool = False
    dtype: Optional[Callable] = None
    array_kind: Optional[str] = None
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def xp(self):
        """The backend's array namespace (see ``namespace``), or None if it declares none."""
        return None if self.namespace is None else self.namespace()

    def dtype_of(self, np_dtype):
        """The namespace dtype of a numpy dtype (None if the backend has none)."""
        return np_dtype if self.dtype is None else self.dtype(np_dtype)


@records.define
class PluginInfo:
    """One loaded plugin: its name, the distribution and version it came from, its module."""

    name: str
    distribution: Optional[str] = None
    version: Optional[str] = None
    module: Any = None
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ


def __getattr__(name: str):
    """:class:`OpaqueTypeDef` and :class:`PluginFault`, defined in :mod:`onnxkit.registry_records`
    when first asked for (a registry without faults or opaque types makes none)."""
    if name in ("OpaqueTypeDef", "PluginFault"):
        from . import registry_records

        return getattr(registry_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _plugin_fault(plugin: str, hook: str, message: str):
    """A :class:`PluginFault` (its class defined on the first fault)."""
    from .registry_records import PluginFault

    return PluginFault(plugin, hook, message)


_registered: list[tuple[str, Any]] = []
_default: Optional["Registry"] = None
_lock = threading.Lock()


def register_plugin(plugin: Any, name: Optional[str] = None) -> None:
    """Register an in-process plugin (a module or object with hookimpls) for every later registry."""
    global _default
    with _lock:
        _registered.append((name or getattr(plugin, "__name__", repr(plugin)), plugin))
        _default = None


def unregister_plugin(name: str) -> None:
    """Undo :func:`register_plugin`."""
    global _default
    with _lock:
        _registered[:] = [(n, p) for n, p in _registered if n != name]
        _default = None


def get_registry() -> "Registry":
    """The registry of this process, built on first use from every installed plugin."""
    global _default
    with _lock:
        if _default is None:
            _default = build_registry()
        return _default


def reset_registry() -> None:
    """Forget the cached registry (the next :func:`get_registry` rebuilds it)."""
    global _default
    with _lock:
        _default = None


def _wanted() -> Optional[set]:
    env = os.environ.get("ONNXKIT_PLUGINS")
    if env is None:
        return None
    return {s.strip() for s in env.split(",") if s.strip()}


def _entry_points():
    """The entry points of the group, by name: read from the installed distributions' metadata
    (:mod:`onnxkit.entry_scan`: the same entry points as importlib.metadata finds, without
    importlib.metadata's import cost in a fresh process; it defers to importlib.metadata where
    they could differ)."""
    from .entry_scan import group_entry_points

    return sorted(group_entry_points(ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def build_registry(
    include: Optional[Iterable[str]] = None,
    exclude: Iterable[str] = (),
    extra: Iterable[tuple[str, Any]] = (),
    entry_points: bool = True,
) -> "Registry":
    """Build a registry.

    ``include``: only these plugins (distribution or entry-point names; default: all, or
    ``$ONNXKIT_PLUGINS``).  ``exclude``: leave these out.  ``extra``: more ``(name, plugin)``
    pairs besides those of :func:`register_plugin`.  ``entry_points=False`` skips discovery.
    """
    wanted = set(include) if include is not None else _wanted()
    excluded = set(exclude)
    faults: list[PluginFault] = []
    infos: list[PluginInfo] = []

    seen: set = set()

    def keep(*names) -> bool:
        names = {n for n in names if n}
        seen.update(names)
        if names & excluded:
            return False
        return wanted is None or bool(names & wanted)

    if entry_points:
        for ep in _entry_points():
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            version = dist.version if dist is not None else None
            if not keep(ep.name, dist_name):
                continue
            try:
                module = ep.load()
            except Exception as exc:  # noqa: BLE001
                # Broad by design: importing a plugin runs its code, which may raise anything, and a
                # broken plugin must not take the host down.  Shown as a PluginFault naming it
                # (Registry.faults: `onnxkit plugins`, and logged on onnxkit.plugins by a session).
                faults.append(_plugin_fault(dist_name or ep.name, "import", f"cannot load entry point {ep.value!r}: {type(exc).__name__}: {exc}"))
                continue
            infos.append(PluginInfo(ep.name, dist_name, version, module))
    for name, plugin in [*_registered, *extra]:
        if keep(name):
            infos.append(PluginInfo(name, None, None, plugin))
    for name in sorted((wanted or set()) - seen):  # a misspelt name must not go unnoticed
        source = "ONNXKIT_PLUGINS" if include is None else "include"
        faults.append(_plugin_fault(name, "select", f"{source} names {name!r}, which no installed plugin is "
                                  f"(distribution or entry-point names: {sorted(seen)})"))
    return Registry(infos, faults)


class Registry:
    """Tables built from the plugins' hooks.  Read-only after construction.

    ``operator_sets[(domain, version)]`` -> OperatorSet;  ``inference[(domain, op, since)]`` -> fn;
    ``backends[name]`` -> Backend;  ``kernels[backend][(domain, op, since)]`` -> kernel;
    ``storages[name]`` -> Storage;  ``opaque_types[(domain, name)]`` -> OpaqueTypeDef;
    ``extensions[(domain, op)]`` -> the extension definitions of ``op`` another plugin added to a
    domain it does not own (:func:`~onnxkit.hookspecs.onnxkit_extension_operators`), by since_version;
    ``owner[(hook, key)]`` names the plugin that provided each entry; for kernels the key is
    ``(backend, (domain, op, since))``.

    ``kernels[backend]`` is what that backend runs: its overrides (``onnxkit_kernels``) and,
    where it has none, the portable kernels (``portable[(domain, op, since)]``) it can run -
    every one on a backend with a ``namespace``, those marked ``host_only`` only on a backend
    with ``host_arrays``.  A portable kernel a backend runs is owned by the plugin that
    provided it (``owner[("onnxkit_portable_kernels", key)]``).
    """

    def __init__(self, plugins: list[PluginInfo], faults: Optional[list[PluginFault]] = None):
        self.plugins = plugins
        self.faults: list[PluginFault] = list(faults or [])
        self.operator_sets: dict = {}
        self.inference: dict = {}
        self.backends: dict = {}
        self.kernels: dict = {}
        self.portable: dict = {}
        self.storages: dict = {}
        self.opaque_types: dict = {}
        self.extensions: dict = {}
        self.owner: dict = {}
        self._trace = bool(os.environ.get("ONNXKIT_TRACE"))
        self._pm = pluggy.PluginManager("onnxkit")
        self._pm.add_hookspecs(hookspecs)
        for info in plugins:
            try:
                self._pm.register(info.module, name=info.name)
            except Exception as exc:  # noqa: BLE001
                # Broad by design: registering reads the plugin's attributes (its code); shown as a
                # PluginFault naming the plugin, as every plugin fault is (see build_registry).
                self.faults.append(_plugin_fault(info.name, "register", f"{type(exc).__name__}: {exc}"))
        self._load()

    # -- calling hooks, one plugin at a time --------------------------------------------
    def _call(self, hook: str, **kwargs):
        for impl in getattr(self._pm.hook, hook).get_hookimpls():
            name = impl.plugin_name
            try:
                result = impl.function(**{k: kwargs[k] for k in impl.argnames})
            except Exception as exc:  # noqa: BLE001
                # Broad by design: a hook is plugin code; whatever it raises is that plugin's fault,
                # shown as a PluginFault naming the plugin and the hook, and the others still load.
                self._fault(name, hook, f"raised {type(exc).__name__}: {exc}")
                continue
            if self._trace:
                print(f"[onnxkit trace] {hook}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) <- {name}: {_summary(result)}", file=sys.stderr)
            if result is not None:
                yield name, result

    def _fault(self, plugin: str, hook: str, message: str) -> None:
        self.faults.append(_plugin_fault(plugin, hook, message))
        if self._trace:
            print(f"[onnxkit trace] FAULT {plugin} {hook}: {message}", file=sys.stderr)

    def _claim(self, table: dict, key, value, plugin: str, hook: str, what, owner_key=None) -> None:
        """Put ``value`` under ``key`` in ``table`` unless a plugin already did; record its owner.

        The owner is recorded under ``(hook, owner_key)`` (default ``key``): kernels pass
        ``(backend, key)``, because one (domain, op_type, since_version) has a kernel per backend.
        ``what`` names the entry in a fault: a string, or a function making it (called only then:
        a registry claims some 1,800 entries).
        """
        owner_key = key if owner_key is None else owner_key
        if key in table:
            what = what() if callable(what) else what
            self._fault(plugin, hook, f"{what} is already provided by plugin {self.owner[(hook, owner_key)]!r}; ignored")
            return
        table[key] = value
        self.owner[(hook, owner_key)] = plugin

    def _claim_pairs(self, table: dict, pairs: list, plugin: str, hook: str, what: str, backend=None) -> None:
        """:meth:`_claim` of each ``(key, value)`` of ``pairs`` (from :func:`_triples`): a fault
        names the entry as ``what`` followed by the key; the owner key is ``(backend, key)`` where
        ``backend`` is given, else ``key``."""
        owner = self.owner
        for key, value in pairs:
            owner_key = key if backend is None else (backend, key)
            if key in table:
                self._fault(plugin, hook, f"{what} for {_fmt(key)} is already provided by plugin "
                                          f"{owner[(hook, owner_key)]!r}; ignored")
                continue
            table[key] = value
            owner[(hook, owner_key)] = plugin

    def _load(self) -> None:
        for plugin, result in self._call("onnxkit_operator_sets"):
            for opset in _iterable(result, plugin, "onnxkit_operator_sets", self):
                problem = _check_opset(opset)
                if problem:
                    self._fault(plugin, "onnxkit_operator_sets", problem)
                    continue
                key = (normalize_domain(opset.domain), int(opset.version))
                self._claim(self.operator_sets, key, opset, plugin, "onnxkit_operator_sets",
                            f"operator set {display_domain(key[0])} v{key[1]}")
        self._load_extensions()
        for plugin, result in self._call("onnxkit_opaque_types"):
            for t in _iterable(result, plugin, "onnxkit_opaque_types", self):
                if not (isinstance(getattr(t, "name", None), str) and t.name and isinstance(getattr(t, "domain", None), str)):
                    self._fault(plugin, "onnxkit_opaque_types", f"not an OpaqueTypeDef with a name: {t!r}")
                    continue
                self._claim(self.opaque_types, (normalize_domain(t.domain), t.name), t, plugin,
                            "onnxkit_opaque_types", f"opaque type {t.domain}::{t.name}")
        for plugin, result in self._call("onnxkit_inference_functions"):
            self._claim_pairs(self.inference, _triples(result, plugin, "onnxkit_inference_functions", self), plugin,
                              "onnxkit_inference_functions", "inference function")
        for plugin, result in self._call("onnxkit_backends"):
            for b in _iterable(result, plugin, "onnxkit_backends", self):
                if not isinstance(getattr(b, "name", None), str) or not b.name:
                    self._fault(plugin, "onnxkit_backends", f"not a Backend with a name: {b!r}")
                    continue
                self._claim(self.backends, b.name, b, plugin, "onnxkit_backends", f"backend {b.name!r}")
        for plugin, result in self._call("onnxkit_portable_kernels"):
            self._claim_pairs(self.portable, _triples(result, plugin, "onnxkit_portable_kernels", self), plugin,
                              "onnxkit_portable_kernels", "portable kernel")
        for backend in list(self.backends):
            table = self.kernels.setdefault(backend, {})
            for plugin, result in self._call("onnxkit_kernels", backend=backend):
                self._claim_pairs(table, _triples(result, plugin, "onnxkit_kernels", self), plugin, "onnxkit_kernels",
                                  f"{backend} kernel", backend)
            b = self.backends[backend]
            if getattr(b, "namespace", None) is None:
                continue
            for key, kernel in self.portable.items():
                if key in table or (traits_of(kernel).host_only and not getattr(b, "host_arrays", False)):
                    continue
                table[key] = kernel
                self.owner[("onnxkit_kernels", (backend, key))] = self.owner[("onnxkit_portable_kernels", key)]
        for plugin, result in self._call("onnxkit_storage"):
            for s in _iterable(result, plugin, "onnxkit_storage", self):
                if not isinstance(getattr(s, "name", None), str) or not s.name:
                    self._fault(plugin, "onnxkit_storage", f"not a Storage with a name: {s!r}")
                    continue
                if s.name == RESERVED_STORAGE and plugin != HOST_STORAGE_PLUGIN:
                    self._fault(plugin, "onnxkit_storage", f"the storage name {s.name!r} is reserved for onnxkit's own "
                                                          "local-filesystem storage (Clause 15.3); ignored")
                    continue
                self._claim(self.storages, s.name, s, plugin, "onnxkit_storage", f"storage {s.name!r}")

    def _load_extensions(self) -> None:
        """The extension operators (after the operator sets, whose owners always win)."""
        hook = "onnxkit_extension_operators"
        owners: dict = {}  # domain -> plugins providing its operator sets
        for d, v in self.operator_sets:
            owners.setdefault(d, set()).add(self.owner[("onnxkit_operator_sets", (d, v))])
        firsts: dict = {}  # domain -> {op_type: the first version its owner defines it} (read on demand)
        accepted: dict = {}
        for plugin, result in self._call(hook):
            for schema in _iterable(result, plugin, hook, self):
                if not (isinstance(getattr(schema, "domain", None), str) and isinstance(getattr(schema, "name", None), str)
                        and schema.name and isinstance(getattr(schema, "since_version", None), int)
                        and schema.since_version > 0):
                    self._fault(plugin, hook, f"not an OpSchema with a domain, a name and a since_version: {schema!r}")
                    continue
                d = normalize_domain(schema.domain)
                key = (d, schema.name, int(schema.since_version))
                what = f"extension {_fmt(key)}"
                if d not in owners:
                    self._fault(plugin, hook, f"{what}: no installed plugin provides domain {display_domain(d)!r}; "
                                              "an extension does not create a domain; ignored")
                    continue
                if plugin in owners[d]:
                    self._fault(plugin, hook, f"{what}: the plugin provides {display_domain(d)!r} itself; its "
                                              "operator sets are where the definition belongs; ignored")
                    continue
                if d not in firsts:
                    firsts[d] = {}
                    for (dd, v), opset in sorted(self.operator_sets.items()):
                        if dd == d:
                            for op in opset.op_types():
                                firsts[d].setdefault(op, v)
                first = firsts[d].get(schema.name)
                if first is not None and first <= schema.since_version:
                    owner = ", ".join(sorted(owners[d]))
                    self._fault(plugin, hook, f"{what} refused: {display_domain(d)} (plugin {owner!r}) defines "
                                              f"{schema.name!r} from version {first}; the owner of a domain always wins")
                    continue
                self._claim(accepted, key, schema, plugin, hook, what)
        for (d, op, _since), schema in sorted(accepted.items()):
            self.extensions.setdefault((d, op), []).append(schema)
        self.extensions = {k: tuple(v) for k, v in self.extensions.items()}

    # -- questions ------------------------------------------------------------------------
    def domains(self) -> dict:
        """``{domain: sorted versions}`` of every operator set known."""
        out: dict = {}
        for d, v in self.operator_sets:
            out.setdefault(d, []).append(v)
        return {d: sorted(vs) for d, vs in sorted(out.items())}

    def operator_set(self, domain: str, version: int):
        """The operator set (domain, version), or None."""
        return self.operator_sets.get((normalize_domain(domain), int(version)))

    def bind(self, domain: str, op_type: str, opset_version: int):
        """The definition a node binds to (Clause 5.3.2, 14.3): greatest since_version <= the import.

        Returns the OpSchema, or None when the operator set or the operator is unknown.  Where the
        operator set lacks ``op_type``, an extension another plugin added to the domain is bound
        (:meth:`extension`); :meth:`is_extension` tells the two apart.
        """
        opset = self.operator_set(domain, opset_version)
        if opset is None:
            return None
        schema = opset.get(op_type)
        if schema is None and self.extensions:
            return self.extension(domain, op_type, opset_version)
        return schema

    def extension(self, domain: str, op_type: str, opset_version: int):
        """The extension definition of ``op_type`` a node importing ``opset_version`` of ``domain``
        binds to (greatest since_version <= the import), or None."""
        found = None
        for schema in self.extensions.get((normalize_domain(domain), op_type), ()):
            if schema.since_version <= int(opset_version):
                found = schema
        return found

    def is_extension(self, schema) -> bool:
        """True if ``schema`` is an extension definition (not one of its domain's operator sets)."""
        return schema is not None and ("onnxkit_extension_operators", schema_key(schema)) in self.owner

    def distribution_of(self, plugin: str) -> str:
        """The distribution a plugin came from ('(registered in process)' for in-process plugins)."""
        for info in self.plugins:
            if info.name == plugin:
                return info.distribution or "(registered in process)"
        return plugin

    def extension_provider(self, schema) -> Optional[str]:
        """The distribution that provides the extension ``schema`` (None if it is not one)."""
        plugin = self.owner.get(("onnxkit_extension_operators", schema_key(schema))) if schema is not None else None
        return None if plugin is None else self.distribution_of(plugin)

    def kernel(self, backend: str, domain: str, op_type: str, since_version: int):
        """The kernel for exactly this definition on ``backend``, or None."""
        return self.kernels.get(backend, {}).get((normalize_domain(domain), op_type, int(since_version)))

    def provided_by(self, plugin: str) -> dict:
        """What one plugin contributed: ``{'operator_sets': [...], 'backends': [...], 'kernels': {backend: n}, ...}``."""
        out: dict = {"operator_sets": [], "backends": [], "kernels": {}, "inference": 0, "storages": [], "opaque_types": [],
                     "extensions": []}
        for (hook, key), owner in self.owner.items():
            if owner != plugin:
                continue
            if hook == "onnxkit_operator_sets":
                out["operator_sets"].append(key)
            elif hook == "onnxkit_backends":
                out["backends"].append(key)
            elif hook == "onnxkit_inference_functions":
                out["inference"] += 1
            elif hook == "onnxkit_portable_kernels":
                out["portable_kernels"] = out.get("portable_kernels", 0) + 1
            elif hook == "onnxkit_storage":
                out["storages"].append(key)
            elif hook == "onnxkit_opaque_types":
                out["opaque_types"].append(key)
            elif hook == "onnxkit_extension_operators":
                out["extensions"].append(key)
        for backend, table in self.kernels.items():
            n = sum(1 for k in table if self.owner.get(("onnxkit_kernels", (backend, k))) == plugin)
            if n:
                out["kernels"][backend] = n
        out["operator_sets"].sort()
        out["extensions"].sort()
        return out


def schema_key(schema) -> tuple:
    """``(domain, op_type, since_version)`` of a definition, the domain normalised (Clause 14.3)."""
    return (normalize_domain(schema.domain), schema.name, int(schema.since_version))


def _fmt(key) -> str:
    d, op, v = key
    return f"{display_domain(d)}::{op}-{v}"


def _summary(result) -> str:
    if isinstance(result, Mapping):
        return f"mapping of {len(result)}"
    if isinstance(result, (list, tuple)):
        return f"{type(result).__name__} of {len(result)}"
    return type(result).__name__


def _iterable(result, plugin, hook, reg):
    if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
        reg._fault(plugin, hook, f"must return an iterable, returned {type(result).__name__}")
        return []
    try:
        return list(result)
    except Exception as exc:  # noqa: BLE001
        # Broad by design: iterating runs the plugin's generator; shown as a PluginFault naming it.
        reg._fault(plugin, hook, f"iterating the result raised {type(exc).__name__}: {exc}")
        return []


def _triples(result, plugin, hook, reg):
    if not isinstance(result, Mapping):
        reg._fault(plugin, hook, f"must return a mapping {{(domain, op_type, since_version): ...}}, returned {type(result).__name__}")
        return []
    out = []
    domains: dict = {}  # each domain string normalized once
    append = out.append
    for key, value in result.items():
        # the common case first (plain tuple, str, str, positive int, a callable value): the same
        # outcome as the checks below, without their per-entry calls
        if type(key) is tuple and len(key) == 3:
            domain, op, since = key
            if type(domain) is str and type(op) is str and type(since) is int and since > 0 and callable(value):
                normal = domains.get(domain)
                if normal is None:
                    normal = domains[domain] = normalize_domain(domain)
                append((key if normal is domain else (normal, op, since), value))
                continue
        if not (isinstance(key, tuple) and len(key) == 3 and isinstance(key[0], str) and isinstance(key[1], str)
                and isinstance(key[2], int) and key[2] > 0):
            reg._fault(plugin, hook, f"key {key!r} is not a (domain, op_type, since_version) triple")
            continue
        if not callable(value):
            reg._fault(plugin, hook, f"value for {_fmt(key)} is not callable")
            continue
        domain = key[0]
        normal = domains.get(domain)
        if normal is None:
            normal = domains[domain] = normalize_domain(domain)
        out.append((key if normal is domain and type(key) is tuple else (normal, key[1], key[2]), value))
    return out


def _check_opset(opset) -> Optional[str]:
    for attr in ("domain", "version", "get"):
        if not hasattr(opset, attr):
            return f"not an OperatorSet (no {attr!r}): {opset!r}"
    if not isinstance(opset.domain, str) or not isinstance(opset.version, int) or opset.version < 1:
        return f"operator set has a bad domain or version: {opset.domain!r} v{opset.version!r}"
    return None
