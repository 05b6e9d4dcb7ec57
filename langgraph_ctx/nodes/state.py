"""State schemas with every key the context nodes read and write.

```python
from langgraph.graph import StateGraph
from langgraph_ctx.nodes.state import ContextState

class State(ContextState):          # add your own keys
    user_name: str

builder = StateGraph(State)
```

LangGraph silently drops writes to keys a state schema does not declare, so a graph with
the context pipeline needs these keys (all values are plain JSON or pydantic models of
this package, as docs/CONTRACTS.md requires):

| key | written by | what it holds |
|---|---|---|
| `messages` | you, the model node | the full history (never trimmed by the pipeline) |
| `mode` | you | `"chat"`, `"agent"` or `"run"`: the system prompt to compose |
| `run_context` | you | the workflow run in run mode (`RunContext` or its dict) |
| `system_prompt` | prompt | the composed system prompt (text) |
| `llm_input_messages` | pipeline | what the model is sent: system prompt, summary, history |
| `context_usage` | budget | `ContextUsage` of that request |
| `running_summary` | compaction | the running summary (JSON) |
| `compaction_log` | compaction | the last 10 compaction records (older: in the checkpoints) |
| `compaction_cursor` | compaction | where compaction stopped reading |
| `error_notebook` | model node, pipeline, tools | the last 50 failures (appended, sliding window) |
| `active_context` | context tools, you | where the model's conversation starts; a loaded archive |

Every key but `messages` can be renamed when the app already uses the name for its own
data (`StateKeys`: `context_pipeline(keys={"mode": "ctx_mode"})`, `pipeline.state_schema()`).

This module is the one home of that contract: the keys (`ContextKeys`, `PIPELINE_KEYS`,
`StateKeys`),
the smaller schemas of single nodes (`BudgetState`, `CompactionState`, ...), and the
helpers every node uses to read a state (`state_value`, `state_messages`, `view_active`,
`run_labels`, `graph_step`, `thread_id_of`, `thread_key_of`, `stands_for`,
`undeclared_keys`). The nodes, the
pipeline and the middleware import them from here. One module (over 600 lines) because the
keys, their schemas and the helpers that read them are one contract, changed together.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Annotated, Any, Final, Literal, TypeGuard, Union, get_args, get_origin

from langchain_core.messages import AnyMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState
from langgraph.graph.message import add_messages
from langgraph.prebuilt.chat_agent_executor import AgentState
from typing_extensions import NotRequired, Required, TypedDict, get_type_hints

from langgraph_ctx.context.active_context import ActiveContext, replace_active_context
from langgraph_ctx.context.budget import ContextUsage
from langgraph_ctx.context.notebook import ErrorRecord, add_errors
from langgraph_ctx.context.prompt import MODES, Mode, RunContext, read_run_context
from langgraph_ctx.errors import PromptPartError, StateKeyConflictError, StateShapeError

__all__ = [
    "COMPACTION_LOG_SIZE",
    "PIPELINE_KEYS",
    "BudgetAgentState",
    "BudgetState",
    "CompactionAgentState",
    "CompactionState",
    "ContextAgentState",
    "ContextKeys",
    "ContextState",
    "StateKeys",
    "add_compaction_records",
    "compaction_history",
    "compaction_log_reducer",
    "cursor_has_view",
    "graph_step",
    "run_labels",
    "schema_hints",
    "stands_for",
    "state_messages",
    "state_value",
    "thread_id_of",
    "thread_key_of",
    "undeclared_keys",
    "view_active",
]


#: How many compaction records `compaction_log` keeps in the state (the newest). Each is
#: a few KB; the older ones stay in the checkpoints that wrote them
#: (`graph.get_state_history(config)`, `compaction_history`).
COMPACTION_LOG_SIZE: Final[int] = 10


def compaction_log_reducer(
    size: int = COMPACTION_LOG_SIZE,
) -> Callable[[Sequence[dict[str, Any]] | None, Any], list[dict[str, Any]]]:
    """A reducer for `compaction_log` that appends records and keeps the last `size`.

    Example:
        ```python
        class State(ContextState):
            compaction_log: Annotated[list[dict[str, Any]], compaction_log_reducer(50)]
        ```
    """
    if size < 1:
        raise ValueError(f"compaction_log must keep at least one record, got size={size}")

    def add(left: Sequence[dict[str, Any]] | None, right: Any) -> list[dict[str, Any]]:
        new = [right] if isinstance(right, Mapping) else list(right or [])
        return [dict(r) for r in (*(left or []), *new)][-size:]

    add.__name__ = f"add_compaction_records_last_{size}"
    return add


add_compaction_records = compaction_log_reducer(COMPACTION_LOG_SIZE)
"""The default reducer of `compaction_log`: the 10 newest records."""


def compaction_history(
    snapshots: Iterable[Any], *, key: str = "compaction_log"
) -> list[dict[str, Any]]:
    """Every compaction record of a thread, oldest first, from its checkpoints.

    The state keeps only the newest records (`COMPACTION_LOG_SIZE`); each record is
    still in the checkpoints written after it, so walking the history finds them all.

    Args:
        snapshots: `graph.get_state_history(config)` (newest first, as LangGraph
            returns it), or any iterable of `StateSnapshot`s or state dicts.
        key: the state key of the log (renamed with `StateKeys`).

    Example:
        ```python
        from langgraph.graph import START, StateGraph

        from langgraph_ctx import (
            CompactionNode, ContextState, JsonlSaver, ModelNode, compaction_history,
            context_pipeline,
        )
        from langgraph_ctx.testing import OfflineChatModel

        compaction = CompactionNode("window", trigger=("messages", 4), target=400)
        pipeline = context_pipeline("fast", compaction=compaction)  # from 4 messages on
        builder = StateGraph(ContextState)
        builder.add_node("model", ModelNode(OfflineChatModel()))
        builder.add_edge(START, pipeline.add_to(builder, before="model"))
        graph = builder.compile(checkpointer=JsonlSaver("./chats"))
        config = {"configurable": {"thread_id": "task-001"}}
        for day in range(1, 15):
            graph.invoke({"messages": [("user", f"Day {day} in Lisbon: what to see?")]}, config)

        records = compaction_history(graph.get_state_history(config))
        len(records), len(graph.get_state(config).values["compaction_log"])   # (12, 10)
        ```
    """
    seen: set[str] = set()
    ordered: list[dict[str, Any]] = []
    states = [getattr(s, "values", s) for s in snapshots]
    for state in reversed(states):  # oldest checkpoint first
        for record in (state or {}).get(key) or []:
            ident = json.dumps(record, sort_keys=True, default=str)
            if ident not in seen:
                seen.add(ident)
                ordered.append(record)
    return ordered


class ContextKeys(TypedDict):
    """The keys of the context pipeline, the model node, the notebook and the context tools.

    A mixin: add it to your own state (`class MyState(MessagesState, ContextKeys)`).
    """

    mode: NotRequired[Mode]
    run_context: NotRequired[RunContext | dict[str, Any] | None]
    llm_input_messages: NotRequired[list[AnyMessage]]
    context_usage: NotRequired[ContextUsage]
    system_prompt: NotRequired[str | None]
    running_summary: NotRequired[dict[str, Any] | None]
    compaction_log: NotRequired[Annotated[list[dict[str, Any]], add_compaction_records]]
    compaction_cursor: NotRequired[dict[str, Any]]
    error_notebook: NotRequired[Annotated[list[ErrorRecord], add_errors]]
    active_context: NotRequired[Annotated[ActiveContext | None, replace_active_context]]


class ContextState(MessagesState, ContextKeys):
    """`MessagesState` plus the keys of the context pipeline, the model node and the notebook."""


class ContextAgentState(AgentState, ContextKeys):
    """`create_react_agent`'s `AgentState` plus the same keys as `ContextState`."""


#: Keys the host writes and the pipeline only reads.
_HOST_KEYS = ("mode", "run_context", "active_context")

#: State keys the pipeline writes; a graph state must declare them (see `ContextState`).
PIPELINE_KEYS: tuple[str, ...] = tuple(
    key for key in ContextKeys.__annotations__ if key not in _HOST_KEYS
)


def _core(annotation: Any) -> Any:
    """A declared type without `Required`/`NotRequired`, `Annotated` reducers and `None`."""
    while get_origin(annotation) in (Required, NotRequired, Annotated):
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return _core(rest[0])
        return frozenset(_core(a) for a in rest)
    return annotation


def _compatible(theirs: Any, ours: Any) -> bool:
    """Whether a host's declared type can hold the pipeline's values (element types of
    containers are not compared: `list[BaseMessage]` holds messages as well)."""
    if theirs is Any or theirs == ours:
        return True
    if get_origin(ours) is Literal:
        return get_origin(theirs) is Literal and set(get_args(theirs)) <= set(get_args(ours))
    if isinstance(theirs, frozenset):
        return all(_compatible(t, ours) for t in theirs)
    if isinstance(ours, frozenset):
        return any(_compatible(theirs, o) for o in ours)
    return bool((get_origin(theirs) or theirs) == (get_origin(ours) or ours))


def _spell(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    return text or str(annotation).replace("typing.", "")


#: What a value of each key must look like (checked before the pipeline reads it).
_VALUE_CHECKS: Final[dict[str, tuple[Callable[[Any], bool], str]]] = {
    "mode": (lambda v: v in MODES, f"one of {', '.join(MODES)}"),
    "run_context": (lambda v: isinstance(v, (RunContext, Mapping)), "a RunContext or its dict"),
    "system_prompt": (lambda v: isinstance(v, str), "a text"),
    "llm_input_messages": (lambda v: isinstance(v, Sequence), "a list of messages"),
    "running_summary": (lambda v: isinstance(v, Mapping), "a running summary (dict)"),
    "compaction_log": (lambda v: isinstance(v, Sequence), "a list of compaction records"),
    "compaction_cursor": (lambda v: isinstance(v, Mapping), "a compaction cursor (dict)"),
    "error_notebook": (lambda v: isinstance(v, Sequence), "a list of error records"),
}


@dataclass(frozen=True)
class StateKeys:
    """The names of the pipeline's state keys in the host's state (default: their own).

    An app that already has a `mode` key (or any other of `ContextKeys`) renames the
    pipeline's, and gives the same names to every part that reads the state:

    ```python
    keys = StateKeys(mode="ctx_mode")            # or a dict: {"mode": "ctx_mode"}
    pipeline = context_pipeline("fast", keys=keys)
    builder = StateGraph(pipeline.state_schema(AppState))   # AppState + the renamed keys
    builder.add_node("model", ModelNode(llm, keys=keys))
    builder.add_edge(START, pipeline.add_to(builder, before="model"))
    graph = builder.compile()
    graph.invoke({"messages": [("user", "hi")], "mode": "thorough", "ctx_mode": "agent"})
    ```

    The nodes work on a view with the pipeline's own names (`read`) and write back
    under the host's (`write`). `messages` belongs to the host and is not renamed.

    Example:
        ```python
        keys = StateKeys.of({"mode": "ctx_mode"})
        keys.read({"mode": "thorough", "ctx_mode": "agent"})   # {'mode': 'agent'}
        keys.write({"mode": "chat"})                            # {'ctx_mode': 'chat'}
        ```
    """

    mode: str = "mode"
    run_context: str = "run_context"
    llm_input_messages: str = "llm_input_messages"
    context_usage: str = "context_usage"
    system_prompt: str = "system_prompt"
    running_summary: str = "running_summary"
    compaction_log: str = "compaction_log"
    compaction_cursor: str = "compaction_cursor"
    error_notebook: str = "error_notebook"
    active_context: str = "active_context"

    def __post_init__(self) -> None:
        names = [getattr(self, f.name) for f in fields(self)]
        for name in names:
            if not isinstance(name, str) or not name.isidentifier() or name == "messages":
                raise ValueError(
                    f"StateKeys: {name!r} cannot name a pipeline key (use an identifier "
                    "other than 'messages')"
                )
        clashes = sorted({n for n in names if names.count(n) > 1})
        if clashes:
            raise ValueError(f"StateKeys: {clashes} would hold two of the pipeline's keys")

    @classmethod
    def of(cls, keys: StateKeys | Mapping[str, str] | None) -> StateKeys:
        """`keys` as `StateKeys` (a dict maps the pipeline's names to the host's).

        Raises:
            ValueError: an unknown key of the pipeline, or two keys given one name.
        """
        if keys is None:
            return cls()
        if isinstance(keys, StateKeys):
            return keys
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(keys) - known)
        if unknown:
            raise ValueError(f"StateKeys: {unknown} are not keys of the pipeline ({sorted(known)})")
        return cls(**dict(keys))

    @property
    def renamed(self) -> dict[str, str]:
        """`{pipeline name: host name}` of the renamed keys only."""
        names = {f.name: getattr(self, f.name) for f in fields(self)}
        return {key: name for key, name in names.items() if key != name}

    def name(self, key: str) -> str:
        """The host's name of the pipeline's `key` (unchanged for keys not in `ContextKeys`)."""
        return getattr(self, key, key) if key in _KEY_NAMES else key

    def read(self, state: Any) -> Any:
        """`state` as the pipeline sees it: its keys under their own names.

        Without renames the state itself; with renames a dict in which the app's own
        keys of the same names are hidden.
        """
        renamed = self.renamed
        if not renamed:
            return state
        if isinstance(state, Mapping):
            hidden = set(renamed) | set(renamed.values())
            view = {k: v for k, v in state.items() if k not in hidden}
            view.update({k: state[h] for k, h in renamed.items() if h in state})
            return view
        view = {"messages": state_value(state, "messages")}
        for key in _KEY_NAMES:
            value = state_value(state, self.name(key))
            if value is not None:
                view[key] = value
        return view

    def write(self, update: Mapping[str, Any]) -> dict[str, Any]:
        """A state update of the pipeline under the host's names."""
        return {self.name(k): v for k, v in update.items()}

    def check_values(self, view: Any) -> None:
        """Raise `StateKeyConflictError` for a pipeline key holding a value it cannot read.

        `view` is `read(state)`. A value of the wrong shape means the app uses the name
        for its own data (an app's `mode="thorough"`): the error names the key and the
        rename that frees it.
        """
        for key, (fits, expected) in _VALUE_CHECKS.items():
            value = state_value(view, key)
            if value is None or (key == "mode" and value == ""):
                continue
            if not fits(value):
                shown = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__}"
                raise StateKeyConflictError(
                    self.name(key),
                    f"the context pipeline keeps {expected} there, the state holds {shown}",
                    canonical=key,
                )

    def check_schema(self, hints: Mapping[str, Any], *, where: str = "the graph state") -> None:
        """Raise `StateKeyConflictError` when `hints` (a state schema's declared types)
        gives one of the pipeline's keys another type.

        Reducers may differ (`notebook_reducer(200)` is fine); so may `None`/`Any`.
        """
        ours = _context_hints()
        for key, annotation in ours.items():
            host = self.name(key)
            if host not in hints:
                continue
            theirs = _core(hints[host])
            if _compatible(theirs, _core(annotation)):
                continue
            raise StateKeyConflictError(
                host,
                f"{where} declares it as {_spell(theirs)}, the context pipeline keeps "
                f"{_spell(_core(annotation))} there",
                canonical=key,
            )

    def schema(self, base: type, *, name: str | None = None, source: type | None = None) -> type:
        """`base` plus the pipeline's keys under these names (a new `TypedDict`).

        `source`: where the keys' declarations come from (default `ContextKeys`; the
        middleware passes its own, with private keys marked).

        Raises:
            StateKeyConflictError: `base` declares one of these keys with another type
                (the app's own key: rename the pipeline's).

        Example:
            ```python
            State = StateKeys(mode="ctx_mode").schema(MessagesState)
            builder = StateGraph(State)
            ```
        """
        self.check_schema(schema_hints(base), where=f"state schema {base.__name__}")
        hints = get_type_hints(source or ContextKeys, include_extras=True)
        annotations = {self.name(k): v for k, v in hints.items() if k in _KEY_NAMES}
        title = name or f"{base.__name__}WithContextKeys"
        return types.new_class(
            title, (base,), exec_body=lambda ns: ns.update({"__annotations__": annotations})
        )


_KEY_NAMES: Final[frozenset[str]] = frozenset(f.name for f in fields(StateKeys))


def _context_hints() -> dict[str, Any]:
    return get_type_hints(ContextKeys, include_extras=True)


def schema_hints(schema: Any) -> dict[str, Any]:
    """The declared types of a state schema (TypedDict, dataclass or pydantic model)."""
    try:
        return get_type_hints(schema, include_extras=True)
    except Exception:
        pass
    hints: dict[str, Any] = {}
    for cls in reversed(getattr(schema, "__mro__", [schema])):
        own = getattr(cls, "__annotations__", {}) or {}
        try:
            resolved = get_type_hints(cls, include_extras=True)
        except Exception:  # a forward reference we cannot resolve: compare nothing
            resolved = {}
        hints.update({key: resolved.get(key, Any) for key in own})
    return hints


class BudgetState(TypedDict):
    """Smallest state for a graph with a `BudgetNode`; extend it with your own keys."""

    messages: Annotated[list[AnyMessage], add_messages]
    context_usage: NotRequired[ContextUsage]


class BudgetAgentState(AgentState):
    """`create_react_agent`'s `AgentState` plus `context_usage`."""

    context_usage: NotRequired[ContextUsage]


class CompactionState(TypedDict):
    """Smallest state for a graph with a `CompactionNode`; extend it with your own keys."""

    messages: Annotated[list[AnyMessage], add_messages]
    llm_input_messages: NotRequired[list[AnyMessage]]
    running_summary: NotRequired[dict[str, Any] | None]
    compaction_log: NotRequired[Annotated[list[dict[str, Any]], add_compaction_records]]
    compaction_cursor: NotRequired[dict[str, Any]]
    context_usage: NotRequired[Any]


class CompactionAgentState(AgentState):
    """`create_react_agent`'s `AgentState` plus the keys `CompactionNode` writes."""

    llm_input_messages: NotRequired[list[AnyMessage]]
    running_summary: NotRequired[dict[str, Any] | None]
    compaction_log: NotRequired[Annotated[list[dict[str, Any]], add_compaction_records]]
    compaction_cursor: NotRequired[dict[str, Any]]
    context_usage: NotRequired[Any]


# -- reading a state ------------------------------------------------------------------


#: What no LangGraph state is (a state is a dict, a pydantic model or a dataclass): read
#: as one, each has no keys, and a node would work on an empty conversation.
_NOT_A_STATE: Final = (
    str, bytes, bytearray, list, tuple, set, frozenset, int, float, complex, type(None),
    BaseMessage,
)  # fmt: skip


def state_value(state: Any, key: str) -> Any:
    """`state[key]` of a dict state, or the attribute of an object state; None if absent.

    Every read of a state goes through here, so this is where a value that is no state
    (a list of messages, a string, a message) is refused: `StateShapeError`.

    Example:
        ```python
        state_value({"mode": "chat"}, "mode"), state_value({}, "mode")  # ('chat', None)
        ```
    """
    if isinstance(state, Mapping):
        return state.get(key)
    if isinstance(state, _NOT_A_STATE):
        raise StateShapeError(state)
    return getattr(state, key, None)


def state_messages(state: Any, key: str = "messages") -> Sequence[Any]:
    """The message list under `key` (`[]` when absent); `StateShapeError` when it is not
    a list (a string would be read as one message per character). Its items are not
    looked at (they are converted where they are used).

    Example:
        ```python
        state_messages({"messages": [("user", "hi")]}), state_messages({})  # ([...], [])
        ```
    """
    value = state_value(state, key)
    if value is None:
        return []
    if type(value) is not list and (
        isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence)
    ):
        raise StateShapeError(value, key)
    return value


def undeclared_keys(config: RunnableConfig | None, keys: Iterable[str]) -> list[str]:
    """The `keys` the state of the graph running the node does not declare: LangGraph
    drops a node's writes to them without a word. `[]` outside a graph.

    Asks the running graph through the reader LangGraph puts in every task's config (the
    one conditional edges read the state with): a key it has no channel for raises
    KeyError; one it has, unset or not, does not.
    """
    read = ((config or {}).get("configurable") or {}).get("__pregel_read")
    if not callable(read):
        return []
    missing = []
    for key in keys:
        try:
            read(key)
        except KeyError:
            missing.append(key)
        except Exception:  # an empty channel (or a reader of another shape): no sign
            continue
    return missing


def view_active(state: Any) -> bool:
    """Whether a compacted view is active in `state` (see `cursor_has_view`).

    While it is, `llm_input_messages` is compaction's view of the conversation (plus the
    prompt in front of it); otherwise that key is the previous step's request and stale.
    """
    return cursor_has_view(state_value(state, "compaction_cursor"))


def cursor_has_view(cursor: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether a `compaction_cursor` value counts a compacted view (`view_tokens`)."""
    return isinstance(cursor, Mapping) and cursor.get("view_tokens") is not None


def stands_for(view_message: BaseMessage, message: BaseMessage) -> bool:
    """Whether a view message is `message` or compaction's stand-in for it (`<id>~...`).

    An id alone does not say it: with an `operator.add` messages reducer (which LangGraph
    allows) two messages can share an id, and messages can have none (`ToolNode`'s
    results; `add_messages` would give them one). So the same id also needs the same
    content; without ids, a tool result is matched by its `tool_call_id` (a preview keeps
    it), any other message by its type and content.

    >>> from langchain_core.messages import HumanMessage
    >>> full = ToolMessage("all 400 lines", tool_call_id="c1", id="t1")
    >>> stands_for(ToolMessage("a preview", tool_call_id="c1", id="t1~preview"), full)
    True
    >>> stands_for(HumanMessage("the first question", id="u"), HumanMessage("the next", id="u"))
    False
    """
    a, b = view_message.id, message.id
    if a is not None and b is not None:
        if a == b:
            return view_message.content == message.content
        return a.startswith(f"{b}~")
    if isinstance(message, ToolMessage):
        return (
            isinstance(view_message, ToolMessage)
            and view_message.tool_call_id == message.tool_call_id
        )
    return (
        a is None
        and b is None
        and view_message.type == message.type
        and view_message.content == message.content
    )


def thread_id_of(config: RunnableConfig | None) -> str | None:
    """The `thread_id` of a run's config, as a string (None outside a thread)."""
    value = ((config or {}).get("configurable") or {}).get("thread_id")
    return str(value) if value is not None else None


def thread_key_of(config: RunnableConfig | None) -> str | None:
    """The thread a node runs in, told apart from another graph's thread of the same id:
    its id and the checkpointer holding it (None outside a thread). A pipeline object may
    serve two graphs, each with its own thread "t" (a notebook rebuilding its agent)."""
    thread_id = thread_id_of(config)
    if thread_id is None:
        return None
    saver = ((config or {}).get("configurable") or {}).get("__pregel_checkpointer")
    return f"{thread_id}\x00{id(saver):x}"


def graph_step(config: RunnableConfig | None) -> int | None:
    """The LangGraph step of the running node (from `config`, else the current context)."""
    if config is None:
        try:
            from langgraph.config import get_config

            config = get_config()
        except RuntimeError:  # not inside a graph
            return None
    step = ((config or {}).get("metadata") or {}).get("langgraph_step")
    return step if isinstance(step, int) else None


def run_labels(state: Any, default_mode: str | None = None) -> dict[str, Any]:
    """`mode` and `run_id` of the state, for records and reply tags (never raises).

    `run_id` only while the state's run is active in run mode.
    """
    mode = state_value(state, "mode") or default_mode
    try:
        run = read_run_context(state_value(state, "run_context"))
    except PromptPartError:
        run = None
    # A reply belongs to a run only while the run is active and the mode is run mode:
    # after it completed (or in another mode) its run_id would be a stale tag.
    active = run is not None and run.status == "active" and mode == "run"
    return {"mode": mode, "run_id": run.run_id if active and run is not None else None}
