"""Fingerprints of what determines an exported program, for the export cache.

Two kinds, both blind to how the code that produced them is arranged:

- ``graph_fingerprint``: a traced ``torch.export`` program (after the backend's source
  transforms and quantization): every node's operator, arguments, value metadata and the module
  and source-function types the partitioners match on, the signature, the dynamic ranges, and
  the bytes of every weight and constant. Whatever model, transform or quantization code made
  the graph, the same graph gives the same fingerprint.
- ``code_fingerprint``: code that runs after tracing (lowering, verification), hashed by meaning
  rather than by text: a function's syntax tree without docstrings, its local names replaced by
  their order of appearance, and every reference to another function or class of this package
  replaced by that object's own fingerprint, so moving a helper to another module, renaming it
  or renaming its locals keeps the fingerprint, and changing what any of them does changes it.
- ``value_fingerprint``: configuration objects (partitioners, passes, compile and emit
  configs) by their values: each object's type and attributes, followed down, with this
  package's functions and classes by their code fingerprints. The code that built the values
  does not enter it.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import hashlib
import inspect
import json
import textwrap
import types
from collections.abc import Iterable
from pathlib import Path, PurePath
from typing import Any

import torch

from rne_tools.paths import REPO_ROOT

_PACKAGE = "rne_tools"


# Graphs


def tensor_digest(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's dtype, shape and bytes; a tensor subclass (torchao's quantized
    weights) by its type name, its flatten context and its inner tensors' digests."""
    h = hashlib.sha256()
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter) and hasattr(
        tensor, "__tensor_flatten__"
    ):
        names, context = tensor.__tensor_flatten__()
        h.update(f"{type(tensor).__name__}|{context!r}|{tuple(tensor.shape)}".encode())
        for name in names:
            h.update(name.encode())
            h.update(tensor_digest(getattr(tensor, name)).encode())
        return h.hexdigest()
    data = tensor.detach().contiguous().cpu()
    h.update(f"{data.dtype}|{tuple(data.shape)}".encode())
    if data.numel():
        h.update(memoryview(data.reshape(-1).view(torch.uint8).numpy()))
    return h.hexdigest()


def _type_name(value: Any) -> str:
    """A type's own name, without its module: moving a class to another module keeps it."""
    if isinstance(value, type):
        return value.__name__
    return str(value).rsplit(".", 1)[-1].strip("'>")


def _node_line(node: torch.fx.Node) -> str:
    meta = node.meta
    value = meta.get("val")
    shapes = (
        [f"{v.dtype}{tuple(v.shape)}" if isinstance(v, torch.Tensor) else repr(v)
         for v in (value if isinstance(value, (list, tuple)) else [value])]
        if value is not None
        else []
    )
    modules = [(path, _type_name(kind)) for path, kind in meta.get("nn_module_stack", {}).values()]
    sources = [(name, _type_name(kind)) for name, kind in meta.get("source_fn_stack", [])]
    return repr((node.name, node.op, str(node.target), str(node.args), str(node.kwargs), shapes,
                 modules, sources))


def graph_fingerprint(exported: torch.export.ExportedProgram) -> str:
    """sha256 of a traced program: its nodes, signature, dynamic ranges, weights and constants."""
    h = hashlib.sha256()
    for module in exported.graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                h.update(_node_line(node).encode())
    h.update(str(exported.graph_signature).encode())
    h.update(str(sorted((str(k), str(v)) for k, v in exported.range_constraints.items())).encode())
    tensors = {**exported.state_dict, **exported.constants}
    for name in sorted(tensors):
        value = tensors[name]
        digest = tensor_digest(value) if isinstance(value, torch.Tensor) else repr(value)
        h.update(f"{name}={digest}".encode())
    return h.hexdigest()


# Code


def syntax_fingerprint(files: Iterable[Path], root: Path) -> str:
    """Hash of ``files``' syntax trees without docstrings, each named by its path below
    ``root``: comments, docstrings and formatting keep it; any other edit changes it."""
    h = hashlib.sha256()
    for file in files:
        tree = ast.parse(file.read_text())
        _strip_docstrings(tree)
        h.update(file.relative_to(root).as_posix().encode())
        h.update(ast.dump(tree).encode())
    return h.hexdigest()


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Pass()


class _Canonical(ast.NodeTransformer):
    """Renames every function's parameters and local names by order of appearance, and
    replaces names resolved to this package's functions and classes by their fingerprints."""

    def __init__(self, resolve: Any) -> None:
        self.resolve = resolve  # name chain -> replacement string, or None
        self.scopes: list[dict[str, str]] = []

    def _lookup(self, name: str) -> str | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _function(self, node: ast.AST) -> ast.AST:
        args = node.args  # type: ignore[attr-defined]
        params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        declared: set[str] = set()
        stored: list[str] = []
        for child in _own_nodes(node):
            if isinstance(child, (ast.Global, ast.Nonlocal)):
                declared.update(child.names)
            elif isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
                stored.append(child.id)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stored.append(child.name)
        scope: dict[str, str] = {}
        for name in [*params, *stored]:
            if name not in declared and name not in scope:
                scope[name] = f"_v{len(self.scopes)}_{len(scope)}"
        self.scopes.append(scope)
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None:
                a.arg = scope[a.arg]
                a.annotation = None
        node.returns = None  # type: ignore[attr-defined]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.name = self._lookup(node.name) or "_f"
            node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args.defaults = [self.visit(d) for d in args.defaults]  # type: ignore[attr-defined]
        body = node.body  # type: ignore[attr-defined]
        node.body = (  # type: ignore[attr-defined]
            [self.visit(b) for b in body] if isinstance(body, list) else self.visit(body)
        )
        self.scopes.pop()
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        # Annotations do not run; the assignment does.
        if node.value is None:
            return ast.Pass()
        return ast.Assign(targets=[self.visit(node.target)], value=self.visit(node.value))

    def visit_Name(self, node: ast.Name) -> ast.AST:
        local = self._lookup(node.id)
        if local is not None:
            return ast.Name(id=local, ctx=node.ctx)
        resolved = self.resolve((node.id,))
        return ast.Name(id=resolved, ctx=node.ctx) if resolved else node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        chain: list[str] = [node.attr]
        root: ast.AST = node.value
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        if isinstance(root, ast.Name) and (
            root.id in ("self", "cls") or self._lookup(root.id) is None
        ):
            resolved = self.resolve((root.id, *reversed(chain)))
            if resolved:
                return ast.Name(id=resolved, ctx=node.ctx)
        return self.generic_visit(node)


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a function's body and defaults, without descending into nested scopes
    (whose names are their own)."""
    stack = list(function.body if isinstance(function.body, list) else [function.body])  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _ours(value: Any) -> bool:
    module = getattr(value, "__module__", None) or ""
    return (module == _PACKAGE or module.startswith(_PACKAGE + ".")) and isinstance(
        value, (types.FunctionType, type)
    )


def _generated(value: Any) -> bool:
    """A function compiled from a string (a dataclass's ``__init__``): it has no source file."""
    code = getattr(inspect.unwrap(value), "__code__", None)
    return code is not None and code.co_filename.startswith("<")


class CodeFingerprinter:
    """Fingerprints functions and classes of this package, following their references."""

    def __init__(self) -> None:
        self._done: dict[int, str] = {}
        self._active: set[int] = set()

    def of(self, value: Any) -> str:
        """The fingerprint of a function, method, class or module-level object of ours."""
        value = inspect.unwrap(getattr(value, "__func__", value))
        key = id(value)
        if key in self._done:
            return self._done[key]
        if key in self._active:
            return "recursive"  # a cycle: its members are hashed where the cycle started
        self._active.add(key)
        try:
            if isinstance(value, type):
                digest = self._class(value)
            else:
                digest = self._function(value)
        finally:
            self._active.discard(key)
        self._done[key] = digest
        return digest

    def _source_tree(self, value: Any) -> ast.AST:
        tree = ast.parse(textwrap.dedent(inspect.getsource(value)))
        _strip_docstrings(tree)
        return tree.body[0]

    def _resolver(self, namespace: dict[str, Any], owner: type | None) -> Any:
        def resolve(chain: tuple[str, ...]) -> str | None:
            head, rest = chain[0], chain[1:]
            if head in ("self", "cls"):
                if owner is None or not rest:
                    return None
                target: Any = getattr(owner, rest[0], None)
                rest = rest[1:]
            elif head in namespace:
                target = namespace[head]
            else:
                return None
            for name in rest:
                if not isinstance(target, (types.ModuleType, type)):
                    return None  # an attribute of a value: left as written
                target = getattr(target, name, None)
            if _ours(target):
                return f"ref_{self.of(target)[:16]}"
            if isinstance(target, types.ModuleType) or callable(target):
                return None  # a library's module or function: its name says what it is
            data = self._data(target)
            return None if data is None else "const_" + hashlib.sha256(data.encode()).hexdigest()[:16]

        return resolve

    def _data(self, value: Any) -> str | None:
        """A stable text of a module-level value (a table, a limit, a name): a change of the
        value changes the fingerprint of code that reads it. None for what has no stable text."""
        if isinstance(value, (str, bytes, int, float, bool, type(None))):
            return repr(value)
        if isinstance(value, (tuple, list)):
            items = [self._data(v) for v in value]
            return None if None in items else f"[{','.join(items)}]"  # type: ignore[arg-type]
        if isinstance(value, (set, frozenset)):
            items = [self._data(v) for v in value]
            return None if None in items else "{" + ",".join(sorted(items)) + "}"  # type: ignore[arg-type]
        if isinstance(value, dict):
            pairs = [(self._data(k), self._data(v)) for k, v in value.items()]
            if any(k is None or v is None for k, v in pairs):
                return None
            return "{" + ",".join(sorted(f"{k}:{v}" for k, v in pairs)) + "}"
        if _ours(value):
            return f"ref_{self.of(value)}"
        if _ours(type(value)):
            fields = {k: v for k, v in vars(value).items()} if hasattr(value, "__dict__") else {}
            return f"{self.of(type(value))}{self._data(fields)}"
        if isinstance(value, PurePath):
            return _path_text(value)
        text = repr(value)
        return None if " at 0x" in text else text

    def _function(self, function: Any) -> str:
        tree = self._source_tree(function)
        owner = None
        qual = getattr(function, "__qualname__", "")
        if "." in qual and "<locals>" not in qual:
            owner = getattr(inspect.getmodule(function), qual.split(".")[0], None)
        namespace = dict(getattr(function, "__globals__", {}))
        for name, cell in zip(function.__code__.co_freevars, function.__closure__ or (),
                              strict=False):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:  # an empty cell: not assigned yet
                pass
        canonical = _Canonical(self._resolver(namespace, owner)).visit(tree)
        return hashlib.sha256(ast.dump(canonical).encode()).hexdigest()

    def _class(self, cls: type) -> str:
        h = hashlib.sha256()
        for base in cls.__bases__:
            h.update((self.of(base) if _ours(base) else _type_name(base)).encode())
        if dataclasses.is_dataclass(cls):
            # Its generated methods have no source: they are what its fields say.
            h.update(repr([(f.name, str(f.type),
                            None if f.default is dataclasses.MISSING else repr(f.default))
                           for f in dataclasses.fields(cls)]).encode())
        for name, member in sorted(vars(cls).items()):
            member = getattr(member, "__func__", member)
            if _generated(member):
                continue
            if isinstance(member, (types.FunctionType, type)) and _ours(member):
                h.update(f"{name}:{self.of(member)}".encode())
            elif isinstance(member, property):
                h.update(f"{name}:{self.of(member.fget)}".encode())
            elif not name.startswith("__") and isinstance(member, (str, int, float, bool, tuple)):
                h.update(f"{name}={member!r}".encode())
        return h.hexdigest()


def _path_text(path: PurePath) -> str:
    """A path inside the checkout by its place in it: a fingerprint is the same in every clone."""
    try:
        return "repo:" + Path(path).relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return repr(path)


def code_fingerprint(*values: Any) -> str:
    """One fingerprint of ``values`` (functions, methods, classes) and what they reference."""
    fingerprinter = CodeFingerprinter()
    return hashlib.sha256("|".join(fingerprinter.of(v) for v in values).encode()).hexdigest()


# Values


class ValueDescriber:
    """A JSON description of a configuration value that is the same in every process that
    builds an equal value (sets and dicts sorted, no addresses)."""

    def __init__(self) -> None:
        self._code = CodeFingerprinter()

    def of(self, value: Any) -> Any:
        return self._describe(value, frozenset())

    def _callable(self, value: Any) -> str:
        if _ours(value):
            return "ours:" + self._code.of(value)
        # A library's function or class: its name says what it is, the versions what it does.
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"

    def _describe(self, value: Any, active: frozenset[int]) -> Any:
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, enum.Enum):
            return f"{type(value).__qualname__}.{value.name}"
        if isinstance(value, (torch.dtype, torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            return str(value)
        if isinstance(value, types.ModuleType):
            return "module:" + value.__name__
        if isinstance(value, PurePath):
            return _path_text(value)
        if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
            return self._callable(value)
        # Pattern graphs (MLX's fusions match on them): their code.
        if isinstance(value, torch.fx.GraphModule):
            return {"graph_module": value.code}
        if isinstance(value, torch.fx.Graph):
            return {"graph": str(value)}
        if id(value) in active:
            return "cycle"
        active = active | {id(value)}
        if isinstance(value, (list, tuple)):
            return [self._describe(v, active) for v in value]
        if isinstance(value, (set, frozenset)):
            return sorted((self._describe(v, active) for v in value), key=json.dumps)
        if isinstance(value, dict):
            pairs = ([self._describe(k, active), self._describe(v, active)]
                     for k, v in value.items())
            return sorted(pairs, key=json.dumps)
        if isinstance(value, types.MethodType):
            return {"method": self._describe(value.__func__, active),
                    "of": self._describe(value.__self__, active)}
        if isinstance(value, functools.partial):
            return {"partial": self._describe(value.func, active),
                    "args": self._describe(value.args, active),
                    "keywords": self._describe(value.keywords, active)}
        kind = self._callable(type(value))
        if hasattr(value, "__dict__"):
            return {"type": kind, "attributes": self._describe(vars(value), active)}
        text = repr(value)
        if " at 0x" in text:
            raise TypeError(f"{kind} has no stable description: {text}")
        return {"type": kind, "repr": text}


def value_fingerprint(*values: Any) -> str:
    """One fingerprint of configuration ``values`` (see ``ValueDescriber``)."""
    describer = ValueDescriber()
    return hashlib.sha256(json.dumps([describer.of(v) for v in values]).encode()).hexdigest()
