"""Values of a `SqliteSaver` database, read for an import (`langgraph_ctx.migrate`).

LangGraph's serializer, reading such a value, imports the module it names and calls the
name in it. `loads_database_value` first refuses what would make it call anything but a
data class (`_vet`), then reads the value as `SqliteSaver` does, with a `JsonPlusSerializer`
allowing just what was vetted (whatever serializer the caller gave: an
`EncryptedSerializer`'s own inner one would import and call what the file names), and
refuses one whose class this process could not make (it would be stored as plain data for
good). Pickled values are refused: unpickling runs whatever the data says.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG, JsonPlusSerializer

from langgraph_ctx.codec.classes import (
    DEFAULT_RULES,
    find_class,
    kind_of,
    scan_msgpack,
)
from langgraph_ctx.errors import (
    ClassElsewhereError,
    ClassUnavailableError,
    CodecError,
    SqliteSourceError,
)


def loads_database_value(
    serde: SerializerProtocol, data: tuple[str, bytes], where: str, plain_data: bool = False
) -> Any:
    """A value of the database, as `SqliteSaver` reads it; refused (`ClassUnavailableError`)
    when it names a class the serializer could not make in this process: LangGraph's
    serializer then returns the object's fields (a dict), which an import would store."""
    me, blocked = threading.get_ident(), []

    def listen(event: Any) -> None:
        if event.get("kind") in _BLOCKED and threading.get_ident() == me:
            blocked.append(f"{event.get('module')}.{event.get('name')}")

    type_, raw = _plaintext(serde, data, where)
    if type_ == "pickle":
        raise SqliteSourceError(
            f"{where}: a value stored with pickle, which the import does not read (unpickling "
            "runs whatever the data says): move this thread from the application, putting "
            "what its SqliteSaver reads into a JsonlSaver"
        )
    names, odd = scan_msgpack(raw) if type_ == "msgpack" else ([], False)
    allowed, lacking = _vet(names, odd, where, plain_data)
    reader = JsonPlusSerializer(allowed_msgpack_modules=[*DEFAULT_RULES.names, *allowed])
    unregister = register_serde_event_listener(listen) if not plain_data else None
    try:
        value = reader.loads_typed((type_, raw))
    except NotImplementedError:  # LangGraph's serializer, given a type it has no codec for
        raise SqliteSourceError(
            f"{where}: a value serialized as {data[0]!r}, which this serializer does not "
            "read (an EncryptedSerializer's?): call langgraph_ctx.migrate.import_sqlite("
            "..., serde=<the application's serializer>) from Python"
        ) from None
    finally:
        if unregister is not None:
            unregister()
    if plain_data:
        return value
    blocked = [b for b in blocked if b not in lacking]  # plain data in SqliteSaver's hands too
    # What the serializer could not import either: plain data (LangGraph gives its fields).
    missing = blocked + [f"{m}.{n}" for _, m, n in names if m not in sys.modules]
    if missing:
        raise ClassUnavailableError(where, sorted(set(missing)))
    return value


_BLOCKED = frozenset({"msgpack_blocked"})
"""A class the allowlist blocks (strict mode): the app's own saver, given the app's
allowlist, makes it. (A method LangGraph refuses to call, as for a `datetime` subclass, it
refuses to `SqliteSaver` in the app too: plain data there, not refused here.)"""


def _vet(
    names: list[tuple[int, str, str]], odd: bool, where: str, plain_data: bool = False
) -> tuple[list[tuple[str, str]], set[str]]:
    """Refuse, before LangGraph's serializer reads it, a value that would make it import a
    module or call anything but a data class: it imports the module a value names and
    calls the name in it (``os.system``, a library's re-export of ``subprocess``). Let
    through: LangGraph's safe types, this package's registry, pydantic's secret types, and
    a data class (a pydantic model, a dataclass, a NamedTuple; an enum looked up by value)
    found in a module already loaded here, by the application or by `import_sqlite`'s
    ``modules``; a name its loaded module lacks (LangGraph cannot find it either: plain
    data, as in `SqliteSaver`), unless the module answers names of its own (a module
    ``__getattr__``). A module not loaded is a class this process cannot make
    (`ClassUnavailableError`; with ``plain_data``, left to the serializer to block: read
    as its fields). Returns the names found, for the serializer's allowlist, and those
    their loaded module lacks (``module.name``)."""
    if odd:
        raise SqliteSourceError(f"{where}: a value names a class otherwise than by plain text")
    allowed: list[tuple[str, str]] = []
    lacking: set[str] = set()
    for code, module, name in names:
        key = (module, name)
        if key in SAFE_MSGPACK_TYPES or key in DEFAULT_RULES.names:
            continue
        if key in _VALUE_TYPES:
            allowed.append(key)
            continue
        if code == _METHOD_CALL:
            continue  # LangGraph calls only its own few methods
        if name.startswith("__"):  # a module's own methods (``os.__setattr__``), no class
            raise SqliteSourceError(f"{where}: a value names {module}.{name}: a tampered database?")
        try:
            found = find_class(module, name) if module in sys.modules else None  # no import
        except ClassElsewhereError as moved:
            raise SqliteSourceError(
                f"{where}: a value names {module}.{name}, which is {moved.home} now (moved, "
                "and imported under its old name): an import takes a class only where it "
                "is defined; import the thread with the code from before the move, whose "
                "values the saver then reads back with allowed_types=[the class]"
            ) from None
        except CodecError:
            raise SqliteSourceError(
                f"{where}: a value names {module}.{name}, not a class: a tampered database?"
            ) from None
        if (
            found is None
            and module in sys.modules
            and module != "__main__"  # an app run as a script: not this process's main
            and "__getattr__" not in vars(sys.modules[module])
        ):
            lacking.add(f"{module}.{name}")  # LangGraph's lookup fails: plain data, as in
            continue  # SqliteSaver
        if found is None:
            if plain_data:
                continue  # blocked, not imported: its fields
            raise ClassUnavailableError(where, [f"{module}.{name}"])
        kind = kind_of(found)
        if kind is None:
            raise SqliteSourceError(
                f"{where}: a value names {module}.{name}, which is not a data class "
                "(a pydantic model, a dataclass, an enum or a NamedTuple): refused"
            )
        if kind == "enum" and code != EXT_CONSTRUCTOR_SINGLE_ARG:
            raise SqliteSourceError(
                f"{where}: a value calls the enum {module}.{name} otherwise than to look a "
                "member up: refused"
            )
        allowed.append(key)
    return allowed, lacking


_VALUE_TYPES = frozenset({("pydantic.types", "SecretStr"), ("pydantic.types", "SecretBytes")})
"""Value types of pydantic an application's state holds, made from one value as LangGraph's
serializer stores them (`SqliteSaver` reads them back so)."""

_METHOD_CALL = 3  # LangGraph's EXT_METHOD_SINGLE_ARG: checked against its safe methods


def _plaintext(serde: SerializerProtocol, data: tuple[str, bytes], where: str) -> tuple[str, bytes]:
    """The value's type and bytes as LangGraph's serializer reads them: an
    `EncryptedSerializer`'s payload decrypted (an unencrypted one, from before the app
    turned encryption on, as it is). Only LangGraph's serializers are taken: one of the
    caller's own decodes by rules of its own, which the import cannot vet."""
    inner = serde.serde if isinstance(serde, EncryptedSerializer) else serde
    if not isinstance(inner, JsonPlusSerializer):
        raise SqliteSourceError(
            f"{where}: the import reads values with LangGraph's serializer (JsonPlusSerializer"
            f", or an EncryptedSerializer over it), whose rules it vets; {type(inner).__name__}"
            " decodes by rules of its own"
        )
    type_, raw = data
    if isinstance(serde, EncryptedSerializer) and "+" in type_:
        type_, ciphername = type_.split("+", 1)
        try:
            raw = serde.cipher.decrypt(ciphername, raw)
        except Exception as exc:
            raise SqliteSourceError(
                f"{where}: a value does not decrypt with this serializer's cipher "
                f"({type(exc).__name__}): another key?"
            ) from None
    return type_, raw
