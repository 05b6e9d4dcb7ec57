"""The typer app and what every command shares: ``--dir``, errors as one line, JSON, and
what a thread command starts from (`_checkpoint`: the saver, the checkpoint named).

`cli.app` (the entry point) imports this and the command modules `cli.read`,
`cli.change` and `cli.move`, which register their commands on `app`; keeping the shared
part here means the command modules import it without importing each other.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer
from typer.core import TyperGroup

from langgraph_ctx.cli.printable import json_printable, printable
from langgraph_ctx.errors import (
    OTHER_SERIALIZER,
    CliError,
    CorruptLogError,
    LangGraphCtxError,
    ThreadNotFoundError,
)

if TYPE_CHECKING:
    from rich.console import Console

    from langgraph_ctx.saver.log import CheckpointInfo

DIR_ENV = "LANGGRAPH_CTX_DIR"
DEFAULT_DIR = "chats"
DEBUG_ENV = "LANGGRAPH_CTX_DEBUG"
_PIPE_WIDTH = 100_000  # piped output is not wrapped


# ---------------------------------------------------------------------- plumbing


class _Printable(io.TextIOBase):
    """A command's stdout or stderr: what it is given, `printable`. Rich's consoles write
    to the stream beneath (`raw`), their own cursor and colour codes intact, the text of
    what they render made printable by `_print`."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return bool(self.raw.isatty())

    def fileno(self) -> int:
        return int(self.raw.fileno())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.raw, "encoding", None) or "utf-8")


def _console(stderr: bool = False) -> Console:
    """Rich output: colours and wrapping on a terminal (unless ``NO_COLOR``); neither
    when piped, so lines stay whole for ``grep``."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    stream = stream.raw if isinstance(stream, _Printable) else stream
    # NO_COLOR (https://no-color.org): no escape codes at all, bold and dim included.
    colors: Literal["auto"] | None = None if os.environ.get("NO_COLOR") else "auto"
    console = Console(file=stream, highlight=False, color_system=colors)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(file=stream, highlight=False, color_system=colors, width=_PIPE_WIDTH)
    return console


def _print(renderable: Any) -> None:
    from rich.segment import Segment, Segments

    console = _console()
    needed = console.measure(renderable).minimum
    if needed > console.width:  # ids that cannot fit: longer lines, never cut ids
        console.width = needed
    # What the renderable shows made `printable`; rich's own control segments kept.
    renderable = Segments(
        seg if seg.control else Segment(printable(seg.text), seg.style)
        for seg in console.render(renderable)
    )
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    lines = (line.rstrip() for line in captured.get().splitlines())
    console.file.write("\n".join(lines) + "\n")  # (printable already: past `_Printable`)


def _echo_json(data: Any) -> None:
    typer.echo(json_printable(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def _fail(message: str, code: int = 1) -> NoReturn:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    typer.echo(f"error: {first}", err=True)
    sys.exit(code)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    text = str(message).strip().splitlines()
    typer.echo(f"warning: {text[0] if text else category.__name__}", err=True)


_PYDANTIC_PREFIX = re.compile(r"\b(?:Value|Type|Assertion) error, ")


def _usage_message(exc: Exception) -> str:
    """click's usage message on one line, without the ``Value error,`` pydantic puts
    before a bad enum value (the accepted values stay: ``'xml' is not one of ...``)."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    return " ".join(_PYDANTIC_PREFIX.sub("", message).split())


class _Group(TyperGroup):
    """Errors as one line on stderr (``error: ...``) instead of tracebacks or boxes."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        original = warnings.showwarning
        warnings.showwarning = _show_warning
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Printable(sys.stdout), _Printable(sys.stderr)
        if not logging.getLogger().handlers:  # library log records as one-line warnings
            logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
        try:
            rv = super().main(
                args=args,
                prog_name=prog_name or "langgraph-ctx",
                complete_var=complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except typer.TyperException as exc:  # click's usage errors
            if not standalone_mode:
                raise
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.echo(f"error: {_usage_message(exc)}{hint}", err=True)
            sys.exit(getattr(exc, "exit_code", 2))
        except typer.Abort:
            if not standalone_mode:
                raise
            if sys.stdin is not None and sys.stdin.isatty():
                _fail("aborted")
            typer.echo("", err=True)  # after the prompt, which has no newline
            _fail("aborted (stdin is not a terminal: pass --yes to confirm without a prompt)")
        except KeyboardInterrupt:
            if not standalone_mode:
                raise
            typer.echo("interrupted", err=True)
            sys.exit(130)
        except (CliError, LangGraphCtxError, OSError, ValueError) as exc:
            if not standalone_mode or os.environ.get(DEBUG_ENV):
                raise
            if isinstance(exc, CorruptLogError) and OTHER_SERIALIZER not in exc.reason:
                # The saver's way out names a saver option; here, the commands that help.
                _fail(
                    f"{exc.where}: {exc.reason}. 'langgraph-ctx verify' names every bad "
                    "line; the commands that read this thread stop at it: fix or remove "
                    "the line, or read past it from Python (JsonlSaver(dir, "
                    "on_corrupt='skip'), which warns and leaves it out)"
                )
            _fail(str(exc) or type(exc).__name__)
        finally:
            warnings.showwarning = original
            sys.stdout, sys.stderr = streams
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="langgraph-ctx",
    cls=_Group,
    help="Inspect, repair and move LangGraph conversations saved by JsonlSaver.",
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: rich's help formatter imports markdown-it, pygments and rich.traceback,
    # a quarter of a second before ``--help`` prints anything.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class _State:
    def __init__(self, root: Path) -> None:
        self.root = root

    def saver(self) -> Any:
        """A `JsonlSaver` on the directory, which must exist."""
        from langgraph_ctx.saver.jsonl import JsonlSaver

        if not self.root.exists():
            raise CliError(f"no such directory: {self.root} (set --dir or ${DIR_ENV})")
        if not self.root.is_dir():
            raise CliError(f"not a directory: {self.root}")
        return JsonlSaver(self.root)


def _state(ctx: typer.Context) -> _State:
    return ctx.find_object(_State) or _State(Path(os.environ.get(DIR_ENV) or DEFAULT_DIR))


# ---------------------------------------------- what the thread commands start from


def _saver(ctx: typer.Context) -> Any:
    """The `JsonlSaver` on the command's ``--dir`` (which must exist)."""
    return _state(ctx).saver()


@contextmanager
def _thread_errors(ctx: typer.Context) -> Iterator[None]:
    """Name the directory when a thread is unknown (the usual cause: the wrong --dir)."""
    try:
        yield
    except ThreadNotFoundError as exc:
        raise CliError(
            f"{exc} in {_state(ctx).root} ('langgraph-ctx threads' lists the threads)"
        ) from None


def _checkpoint(ctx: typer.Context, thread: str, ref: str | None) -> tuple[Any, CheckpointInfo]:
    """The ``--dir`` saver and the checkpoint of `thread` the command line names: an id,
    a unique prefix of one, ``head`` or ``head~N`` (None: the head).

    Raises:
        CliError: the directory or the thread is missing.
        CheckpointNotFoundError: `ref` names no checkpoint.
        CheckpointRefError: `ref` is a prefix of several checkpoints.
    """
    from langgraph_ctx import browse

    saver = _saver(ctx)
    with _thread_errors(ctx):
        return saver, browse.resolve_checkpoint(saver, thread, ref)


def _dir_option(**extra: Any) -> Any:
    """``--dir``, taken before the command (`_root`) and after it (`DirOpt`)."""
    return typer.Option(
        "--dir",
        "-d",
        help=f"The JsonlSaver directory (default: ${DIR_ENV}, else ./{DEFAULT_DIR}).",
        show_default=False,
        **extra,
    )


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    directory: Annotated[Path | None, _dir_option()] = None,
) -> None:
    """Inspect, repair and move LangGraph conversations saved by JsonlSaver."""
    root = directory or Path(os.environ.get(DIR_ENV) or DEFAULT_DIR)
    ctx.obj = _State(root)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


def _dir_after_command(ctx: typer.Context, value: Path | None) -> Path | None:
    """``threads --dir chats`` as well as ``--dir chats threads``: the later one wins."""
    if value is not None:
        ctx.obj = _State(value)
    return value


DirOpt = Annotated[Path | None, _dir_option(callback=_dir_after_command)]
"""Every command takes ``--dir`` too (its callback sets the state `_state` reads)."""

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
ThreadArg = Annotated[str, typer.Argument(metavar="THREAD", help="Thread id.", show_default=False)]
CheckpointOpt = Annotated[
    str | None,
    typer.Option(
        "--checkpoint",
        "-c",
        help="A checkpoint id, a unique prefix of one, head, or head~N (default: head).",
    ),
]
MessagesKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--messages-key",
        help="The state key holding the conversation (default: messages).",
        show_default=False,
    ),
]


def run(argv: Sequence[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``)."""
    app(args=list(argv) if argv is not None else None, prog_name="langgraph-ctx")
