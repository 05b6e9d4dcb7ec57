"""Values of a `SqliteSaver` database, read for an import (`langgraph_ctx.migrate`).

LangGraph's serializer, reading such a value, imports the module it names and calls the
name in it. `loads_database_value` first refuses what would make it call anything but a
data class (`_vet`), then reads the value as `SqliteSaver` does, and refuses one whose
class this process could not make (it would be stored as plain data for good).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener

from langgraph_ctx.codec.classes import DEFAULT_RULES, find_class, kind_of, scan_msgpack
from langgraph_ctx.errors import ClassUnavailableError, CodecError, SqliteSourceError


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

    _vet(*_scanned(serde, data), where)
    unregister = register_serde_event_listener(listen) if not plain_data else None
    try:
        value = serde.loads_typed(data)
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
    missing = blocked + [f"{m}.{n}" for _, m, n in _named(serde, data) if m not in sys.modules]
    if missing:
        raise ClassUnavailableError(where, sorted(set(missing)))
    return value


_BLOCKED = frozenset({"msgpack_blocked"})
"""A class the allowlist blocks (strict mode): the app's own saver, given the app's
allowlist, makes it. (A method LangGraph refuses to call, as for a `datetime` subclass, it
refuses to `SqliteSaver` in the app too: plain data there, not refused here.)"""


def _vet(names: list[tuple[int, str, str]], odd: bool, where: str) -> None:
    """Refuse, before LangGraph's serializer reads it, a value that would make it call
    something other than a data class: it imports the module a value names and calls the
    name in it (``os.system`` with the file's arguments, ``subprocess.Popen``). Let through:
    LangGraph's safe types and this package's registry, an application's data class (a
    pydantic model, a dataclass, an enum, a NamedTuple) in a module loaded here, and a
    module not loaded that is not the standard library's (the application's own, which
    `SqliteSaver` in the application imports too)."""
    if odd:
        raise SqliteSourceError(f"{where}: a value names a class otherwise than by plain text")
    for code, module, name in names:
        key = (module, name)
        if key in SAFE_MSGPACK_TYPES or key in DEFAULT_RULES.names or code == _METHOD_CALL:
            continue  # (a method call: LangGraph allows only its own few)
        if module in sys.modules:
            try:
                found = find_class(module, name)
            except CodecError:
                raise SqliteSourceError(
                    f"{where}: a value names {module}.{name}, not a class: a tampered database?"
                ) from None
            if found is not None and kind_of(found) is None:
                raise SqliteSourceError(
                    f"{where}: a value names {module}.{name}, which is not a data class "
                    "(a pydantic model, a dataclass, an enum or a NamedTuple): refused"
                )
        elif module.split(".")[0] in sys.stdlib_module_names:
            raise SqliteSourceError(
                f"{where}: a value names {module}.{name}, a standard library module's: "
                "refused (reading it would import that module)"
            )


_METHOD_CALL = 3  # LangGraph's EXT_METHOD_SINGLE_ARG: checked against its safe methods


def _named(serde: SerializerProtocol, data: tuple[str, bytes]) -> list[tuple[int, str, str]]:
    """The classes a payload names (`msgpack_classes`), an `EncryptedSerializer`'s too
    (decrypted again: its own serializer gets the plain bytes only inside).

    Their modules are what must be loaded once the value is read: LangGraph's serializer
    imports a module it names, and where that fails gives the object's fields instead
    (a class its own module lacks, renamed since, is as plain in `SqliteSaver`'s hands:
    not refused)."""
    return _scanned(serde, data)[0]


def _scanned(
    serde: SerializerProtocol, data: tuple[str, bytes]
) -> tuple[list[tuple[int, str, str]], bool]:
    """`scan_msgpack` of a payload, an `EncryptedSerializer`'s decrypted."""
    type_, raw = data
    if isinstance(serde, EncryptedSerializer) and "+" in type_:
        type_, ciphername = type_.split("+", 1)
        try:
            raw = serde.cipher.decrypt(ciphername, raw)
        except Exception:
            return [], False  # `loads_typed` says what is wrong
    return scan_msgpack(raw) if type_ == "msgpack" else ([], False)
