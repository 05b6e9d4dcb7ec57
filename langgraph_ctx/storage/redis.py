"""Redis: one LIST per thread holding the same JSON lines as a JSONL file.

Key layout (``name`` is the thread id encoded by `encode_thread_id`, so any
string is safe in a key; ``{...}`` is a Redis Cluster hash tag, so every key of
one thread lives in one slot and each script touches one slot)::

    ctx:<prefix>:thread:{<name>}            LIST    the log: line n is index n-1
    ctx:<prefix>:thread:{<name>}:gen        STRING  generation token, new on every rewrite
    ctx:<prefix>:thread:{<name>}:backup:1   LIST    the log before the last revert (then :2, ...)
    ctx:<prefix>:thread:{<name>}:lock       STRING  writer lock: a token, with an expiry

Every change is one Lua script, so it is atomic: an append pushes a whole batch
(a checkpoint and its messages) or nothing, and a rewrite swaps the whole log.
An append is conditional: it applies only if the log still has the length and
generation this process last read; otherwise it raises `LogChangedError` and
the saver re-reads and re-encodes. Line numbers therefore never mean two
things, even if a writer's lock expired under it.

Readers take no Redis lock. `sync` reads the generation and the new lines in
one script call, so what it returns is one consistent snapshot. The lines it
fetched are kept in memory (as ``bytes``, bounded by ``cache_bytes`` across
threads), so reading them again costs no round trip and always matches what
the saver indexed. A line no longer cached is fetched with plain ``LRANGE``s
followed by a ``GET`` of the generation (`_Read`), and `LogChangedError` is
raised if a rewrite happened since the sync (the saver then re-syncs). Appends
never change existing lines, so lines read under one generation stay valid.

A cold sync of a long log (`_whole`) starts at its last ``snap`` line: the script
returns that snapshot, the lines around and after it, the header and the earlier
snapshots it chains to, and the saver's index (which starts from a snapshot for
JSONL too) reads the other lines it needs on demand through a `PartialLines`.
Bulk reads are plain ``LRANGE``s rather than scripts: Redis converts every line
of a script's reply for Lua and back, tens of milliseconds for a long thread
during which it serves nobody.

A writer takes its lock in the same script call that reads the new lines, and
the write script releases the lock when it commits: a put is two round trips. On the
async door a write to a thread this process has read is one: it takes no Redis lock,
and its append checks that the log is what was read and that nobody holds the lock,
else it runs again under the lock (`_ThreadLock`, ``deferred``).

On a Redis Cluster (a ``redis.cluster.RedisCluster`` client, or a
``redis+cluster://`` URL, see `connect`) nothing changes: every script and
every read names the keys of one thread, which share one slot, so each runs
on the master that serves it, as atomically as on a single server. What spans
threads is never one command: `thread_ids` SCANs every master, and a copy
reads the source (one script) and then writes the target (another). Only
``WAIT`` names no key, so `_write_and_wait` sends it on the slot's master's
own connection.

Sync and async share one implementation: the calls of a saver's hot path (`sync`,
`read_many`, `append`, the writer lock) are generators that yield the script calls
they need (`_Run`) and pauses (`_Pause`), and check each reply themselves. `_run`
answers them with the sync client; the async door (`RedisStorage.aio`, `_RedisAio`)
with a ``redis.asyncio`` client (one server or a cluster), awaiting each on the
event loop: the same scripts, keys, lock and generation protocol, no worker thread.

One module (over 1,700 lines, the Lua scripts and both doors included) because the
scripts and the Python that calls them are one protocol: the key layout above, each
script and the step that checks its reply must be read together to see that a log line
never means two things; the async door only carries those steps' round trips.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import secrets
import socket
import ssl
import sys
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Iterator,
    Sequence,
)
from dataclasses import dataclass
from functools import cache, cached_property, partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

try:
    import redis
except ModuleNotFoundError as _exc:  # pragma: no cover - exercised in a subprocess
    from langgraph_ctx.errors import MissingExtraError

    raise MissingExtraError("RedisLogSaver", "redis", "redis") from _exc
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    ClusterError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

try:  # the redis extra's parser; its packer is C too
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - redis-py without hiredis
    _hiredis_pack = None  # type: ignore[assignment]

if sys.version_info >= (3, 11):
    from asyncio import timeout as _timeout
else:  # pragma: no cover - redis-py depends on async-timeout there
    from async_timeout import timeout as _timeout  # type: ignore[import-not-found]

from langgraph_ctx.codec import loads_line
from langgraph_ctx.codec.lines import SNAP_PREFIX, SNAPSHOT_EVERY
from langgraph_ctx.errors import (
    CorruptLineWarning,
    ForeignKeyWarning,
    LockLostWarning,
    LockTimeoutError,
    LogChangedError,
    StorageConfigError,
    StorageUnavailableError,
    ThreadNotFoundError,
    WrongKeyTypeError,
)
from langgraph_ctx.storage.base import (
    AsyncLog,
    LogStorage,
    PartialLines,
    Synced,
    ThreadLock,
    _current_task,
)
from langgraph_ctx.storage.thread_ids import (
    check_thread_id,
    decode_thread_id,
    encode_thread_id,
    hashed_thread_id,
    is_hashed,
)

DEFAULT_PREFIX = "langgraph"
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
"""URL schemes for a Redis Cluster (redis-py has none of its own): `connect` makes a
``RedisCluster`` whose start-up nodes are the URL's comma-separated ``host:port`` list."""

RedisClient = redis.Redis | RedisCluster
"""A client `RedisStorage` runs on: one server, or a Redis Cluster (same keys, same scripts)."""

if TYPE_CHECKING:
    import redis.asyncio
    import redis.asyncio.cluster

    AsyncRedisClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster
    """The async twin of `RedisClient`, for the async door."""
_PREFIX_OK = re.compile(r"[A-Za-z0-9_.:-]+")
# Replies that mean "not now" rather than "you sent something wrong".
_UNAVAILABLE_REPLIES = (
    "MISCONF",
    "LOADING",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "NOREPLICAS",
    "BUSY ",  # another client's script or function runs past busy-reply-threshold
)
_REWRITTEN = b"(rewritten)"  # never a real generation (those are hex)

# Shared by the write scripts. KEYS: log, gen, backup prefix, lock.
# ARGV[1]: the writer's lock token ('' = none), ARGV[2]: ttl ms (0 = keep).
# Each write releases the writer's lock when it commits (every locked section of
# the saver makes one write, and writes are conditional, so exclusion is no
# longer needed): one round trip less than a separate unlock.
_WRITE_PRELUDE = """
local function release()
  if ARGV[1] == '' or ARGV[1] == '?' then return 2 end
  if redis.call('GET', KEYS[4]) == ARGV[1] then
    redis.call('DEL', KEYS[4])
    return 1
  end
  return 0
end
local function refresh()
  local ttl = tonumber(ARGV[2])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
    local i = 1
    while redis.call('PEXPIRE', KEYS[3] .. i, ttl) == 1 do i = i + 1 end
  end
end
"""

# Append lines if the log is what the caller last read. Idempotent: if exactly
# these lines already end the log where the caller expected them (a retried call
# whose reply was lost), report success without pushing them twice. ARGV[1] = '?':
# a writer that skipped the lock (`RedisStorage._defers`) appends only while nobody
# holds it (else {0, length, gen, 1}: it retries under the lock, which waits).
# ARGV[3..5]: expected length, expected gen ('' = none), gen for a new log; then lines.
# Returns {1, first line, gen, released} or {0, length, gen}.
_APPEND = (
    _WRITE_PRELUDE
    + """
local n = redis.call('LLEN', KEYS[1])
local gen = redis.call('GET', KEYS[2]) or ''
local expected = tonumber(ARGV[3])
local count = #ARGV - 5
if n ~= expected or gen ~= ARGV[4] then
  if n == expected + count and (gen == ARGV[4] or expected == 0) then
    local tail = redis.call('LRANGE', KEYS[1], expected, -1)
    local same = true
    for i = 1, count do
      if tail[i] ~= ARGV[5 + i] then same = false break end
    end
    if same then return {1, expected + 1, gen, release()} end
  end
  return {0, n, gen}
end
if ARGV[1] == '?' and redis.call('EXISTS', KEYS[4]) == 1 then return {0, n, gen, 1} end
if n == 0 then
  gen = ARGV[5]
  redis.call('SET', KEYS[2], gen)
end
for i = 6, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
refresh()
return {1, expected + 1, gen, release()}
"""
)

# Replace the log, or keep its first lines, if it is what the caller last read.
# ARGV[3..7]: expected length, expected gen, new gen, backup ('1'/'0'),
# keep (-1: replace by the lines from ARGV[8] on; n >= 0: keep the first n lines).
# Returns {1, new length, released} or {0, length, gen}.
_REWRITE = (
    _WRITE_PRELUDE
    + """
local n = redis.call('LLEN', KEYS[1])
local gen = redis.call('GET', KEYS[2]) or ''
if gen == ARGV[5] then return {1, n, release()} end
if n ~= tonumber(ARGV[3]) or gen ~= ARGV[4] then return {0, n, gen} end
local keep = tonumber(ARGV[7])
local lines = nil
local first = 8
if keep >= 0 and ARGV[6] == '1' and n > 0 then
  lines = {}
  if keep > 0 then lines = redis.call('LRANGE', KEYS[1], 0, keep - 1) end
  first = 1
end
if ARGV[6] == '1' and n > 0 then
  local top = 0
  while redis.call('EXISTS', KEYS[3] .. (top + 1)) == 1 do top = top + 1 end
  for i = top, 1, -1 do redis.call('RENAME', KEYS[3] .. i, KEYS[3] .. (i + 1)) end
  redis.call('RENAME', KEYS[1], KEYS[3] .. '1')
elseif keep > 0 then
  redis.call('LTRIM', KEYS[1], 0, keep - 1)
else
  redis.call('DEL', KEYS[1])
end
if lines == nil and keep < 0 then lines = ARGV end
if lines ~= nil then
  for i = first, #lines, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(lines, i, math.min(i + 999, #lines)))
  end
end
redis.call('SET', KEYS[2], ARGV[5])
refresh()
return {1, redis.call('LLEN', KEYS[1]), release()}
"""
)

# Lines from ARGV[1] on, with the generation and length, in one atomic step; with
# a token (ARGV[2]), only after taking the writer lock (SET PX ARGV[3] ms if free).
# A lock already holding this token is ours: this is the same call sent again
# by the client's retry after its reply was lost, so it succeeds (and renews
# the expiry) instead of waiting for our own lock to expire.
# A cold read (ARGV[1] = 0) of a log longer than ARGV[5] lines starts at its last
# snapshot: the last line beginning with ARGV[6] (a ``snap`` line) among the last
# ARGV[4] lines; it returns that line, the ARGV[7] lines before it (where the
# checkpoints it names usually are) and the lines after it, the header, and the
# earlier snapshots its ``prev`` fields chain to (read from each line's first bytes;
# the saver checks them all), or, with no snapshot there, no lines at all: the caller
# then reads the log with plain LRANGEs (a script's reply of thousands of lines keeps
# Redis busy for tens of milliseconds converting them; a plain LRANGE is a memcpy).
# KEYS: log, gen, lock. Returns {1, gen, length, lines}, {2, gen, length, lines from
# ARGV[7] before the snapshot on, the first one's 0-based index, header, {chain
# indexes}, {chain lines}},
# {3, gen, length} (no snapshot near the end) or {0, current holder}.
_SNAPSHOT = """
if ARGV[2] ~= '' then
  local holder = redis.call('GET', KEYS[3])
  local ours = holder == ARGV[2]
  for i = 8, #ARGV do ours = ours or holder == ARGV[i] end
  if not holder or ours then
    redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
  else
    return {0, holder}
  end
end
local gen = redis.call('GET', KEYS[2]) or ''
local n = redis.call('LLEN', KEYS[1])
local start = tonumber(ARGV[1])
if start ~= 0 or not ARGV[4] or n <= tonumber(ARGV[5]) then
  return {1, gen, n, redis.call('LRANGE', KEYS[1], start, -1)}
end
local prefix = ARGV[6]
local floor = math.max(1, n - tonumber(ARGV[4]))
local hi = n - 1
local snap = nil
while hi >= floor and not snap do
  local lo = math.max(floor, hi - 255)
  local chunk = redis.call('LRANGE', KEYS[1], lo, hi)
  for i = #chunk, 1, -1 do
    if string.sub(chunk[i], 1, #prefix) == prefix then snap = lo + i - 1 break end
  end
  hi = lo - 1
end
if not snap then return {3, gen, n} end
local first = math.max(1, snap - tonumber(ARGV[7]))
local tail = redis.call('LRANGE', KEYS[1], first, -1)
local at, line = snap, tail[snap - first + 1]
local indexes, lines = {}, {}
while true do
  local prev = tonumber(string.match(line, '^' .. prefix .. '"prev":(%d+)', 1) or '')
  if not prev or prev < 2 or prev > at then break end
  at = prev - 1
  line = redis.call('LINDEX', KEYS[1], at)
  if not line or string.sub(line, 1, #prefix) ~= prefix then break end
  indexes[#indexes + 1] = at
  lines[#lines + 1] = line
end
return {2, gen, n, tail, first, redis.call('LINDEX', KEYS[1], 0), indexes, lines}
"""

# Remove the log, its generation and its backups. Returns {backups, released}.
_DELETE = (
    _WRITE_PRELUDE
    + """
redis.call('DEL', KEYS[1], KEYS[2])
local i = 1
while redis.call('DEL', KEYS[3] .. i) == 1 do i = i + 1 end
return {i - 1, release()}
"""
)

# Release a lock only if we still hold it. KEYS: lock. ARGV: token.
_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


_UNCONFIRMED = 4
"""Unanswered lock tokens a thread's lock remembers (`_ThreadLock.unconfirmed`)."""

_COLD = [8 * SNAPSHOT_EVERY, 4 * SNAPSHOT_EVERY, SNAP_PREFIX, 64]
"""The snapshot script's cold-read arguments: how many lines from the end it looks for a
``snap`` line in (snapshots come every `SNAPSHOT_EVERY` lines or so, twice that in a long
log, after a whole batch: `snapshot_due`); the shortest log it does so for (a shorter one
is read whole: fewer round trips than its snapshot's checks would take); how a snapshot
line begins; and how many lines before the snapshot come along (the checkpoints it names,
which its reader checks)."""

_SCRIPTS = {
    "snapshot": _SNAPSHOT,
    "append": _APPEND,
    "rewrite": _REWRITE,
    "delete": _DELETE,
    "unlock": _UNLOCK,
}
"""Every script by name, registered once on each client (sync, and async for the door)."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class _Run:
    """Run the script ``name``; answered with its reply (``wait``: a write, answered with
    ``(reply, replicas)``, see `RedisStorage._write`). ``action`` names it in a
    `StorageUnavailableError`; ``None``: the step handles Redis errors itself."""

    name: str
    keys: list[str]
    args: list[Any]
    action: str | None
    thread_id: str | None
    wait: bool = False


@dataclass(frozen=True, slots=True)
class _Read:
    """Plain ``LRANGE``s of a log (0-based inclusive ``runs``) and then ``GET`` of its
    generation, pipelined: answered with the ranges' lines, then the generation. Not a
    script, so Redis copies the lines out without converting each for Lua. Not atomic
    either: the caller compares the generation with the one it read before (a log's
    lines never change while its generation stays, and a rewrite always sets a new one)."""

    log: str
    gen: str
    runs: list[tuple[int, int]]
    thread_id: str


@dataclass(frozen=True, slots=True)
class _Pause:
    """Sleep (``time.sleep``, or ``asyncio.sleep`` in the async door)."""

    seconds: float


_Steps = Generator[_Run | _Read | _Pause, Any, _T]
"""A storage call as its Redis round trips: yields `_Run` / `_Read` / `_Pause`, returns the result.
A failed round trip is thrown into it (it may catch it, as `_release_steps` does)."""


def _generation() -> bytes:
    """A fresh log generation tag. From `secrets`, not `uuid.uuid4`: a saver must not
    draw from the generator an app (or LangGraph's tests) may seed or patch for its ids."""
    return secrets.token_hex(16).encode()


@dataclass
class _State:
    """What this process last read of one thread's log."""

    gen: bytes = b""  # b"": no generation (no log)
    lines: int = 0
    size: int = 0  # bytes in those lines
    contended: bool = False  # a write that skipped the lock found the log changed or locked


class _LineCache:
    """Lines already fetched, per thread, least recently used dropped past ``limit`` bytes.

    A thread's entry is always a prefix of its log as last synced (same
    generation), so a hit is exactly what the saver indexed. A log read from its
    last snapshot leaves holes (``None``) until the lines are read (`fill`).
    """

    _OVERHEAD = 40  # a bytes object's header, roughly

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: OrderedDict[str, list[bytes | None]] = OrderedDict()
        self.sizes: dict[str, int] = {}
        self.total = 0
        self.lock = threading.Lock()

    def _size(self, lines: Iterable[bytes | None]) -> int:
        return sum(len(x) + self._OVERHEAD for x in lines if x is not None)

    def put(self, thread_id: str, lines: list[bytes | None]) -> None:
        """Cache a whole log (lines 1..n; ``None``: not read)."""
        size = self._size(lines)
        with self.lock:
            self._drop(thread_id)
            if size > self.limit:
                return
            self.entries[thread_id] = list(lines)
            self.sizes[thread_id] = size
            self.total += size
            self._trim()

    def fill(self, thread_id: str, first: int, lines: list[bytes], length: int) -> None:
        """Lines ``first``, ``first + 1``, ... read since, into an entry of ``length`` lines
        (else nothing): they fill its holes and equal the lines it has (same generation)."""
        with self.lock:
            entry = self.entries.get(thread_id)
            if entry is None or len(entry) != length:
                return
            span = slice(first - 1, first - 1 + len(lines))
            added = self._size(lines) - self._size(entry[span])
            entry[span] = lines
            self.sizes[thread_id] += added
            self.total += added
            self._trim()

    def holes(self, thread_id: str) -> tuple[int, int, int] | None:
        """How many lines of the thread's entry were not read, the first and the last of
        them (``None``: no entry, or nothing missing)."""
        with self.lock:
            entry = self.entries.get(thread_id)
            count = 0 if entry is None else entry.count(None)
            if entry is None or not count:
                return None
            first = entry.index(None) + 1
            last = len(entry) - entry[::-1].index(None)
            return count, first, last

    def extend(self, thread_id: str, lines: Sequence[bytes], at: int) -> None:
        """Lines now at ``at + 1``, ``at + 2``, ... (dropped unless the entry ends at ``at``)."""
        size = self._size(lines)
        with self.lock:
            entry = self.entries.get(thread_id)
            if entry is None:
                return
            if len(entry) != at:
                self._drop(thread_id)
                return
            entry.extend(lines)
            self.sizes[thread_id] += size
            self.total += size
            self.entries.move_to_end(thread_id)
            self._trim()

    def get(self, thread_id: str, wanted: Sequence[int]) -> dict[int, bytes] | None:
        with self.lock:
            entry = self.entries.get(thread_id)
            if entry is None or (wanted and wanted[-1] > len(entry)):
                return None
            out = {n: entry[n - 1] for n in wanted}
            if None in out.values():
                return None
            self.entries.move_to_end(thread_id)
            return cast("dict[int, bytes]", out)

    def drop(self, thread_id: str) -> None:
        with self.lock:
            self._drop(thread_id)

    def _drop(self, thread_id: str) -> None:
        if self.entries.pop(thread_id, None) is not None:
            self.total -= self.sizes.pop(thread_id)

    def _trim(self) -> None:
        while self.total > self.limit and self.entries:
            self._drop(next(iter(self.entries)))


@dataclass(frozen=True)
class _Keys:
    log: str
    gen: str
    backup: str  # prefix: append 1, 2, ...
    lock: str

    @cached_property
    def for_write(self) -> list[str]:
        """The write scripts' keys (one list per thread, never changed by a call)."""
        return [self.log, self.gen, self.backup, self.lock]


class _ThreadLock(ThreadLock):
    """Re-entrant in-process lock plus, when exclusive, a Redis lock (SET NX PX + token).

    The Redis lock is released by the first write that commits under it (in
    the same script), or on leaving the outermost ``hold``.

    A coroutine's exclusive hold on a thread this process has read (`RedisStorage._defers`)
    takes no Redis lock at all: ``deferred``. Its `sync` then reports no new lines without
    a round trip, and its append runs only if the log is still exactly what was read and
    nobody holds the Redis lock (one script checks both); otherwise the operation raises
    `LogChangedError` and runs again under a real lock. The async door serves only
    ``get_tuple``, ``list``, ``put`` and ``put_writes`` (each write one append), so a
    put costs one round trip instead of two; every other writer takes the lock.
    """

    def __init__(self, storage: RedisStorage, thread_id: str, key: str) -> None:
        super().__init__()
        self.storage = storage
        self.thread_id = thread_id
        self.key = key
        self.token: str | None = None  # while this process holds the Redis lock
        # Tokens whose lock or unlock went out without an answer (a timeout, a dropped
        # connection, a cancelled call): the lock may hold one of them, now or once a
        # delayed script runs. The next exclusive hold takes the lock over from them with
        # a token of its own (not waiting ``lock_timeout`` out), so that an unlock of an
        # old token arriving late finds a token it does not match.
        self.unconfirmed: list[str] = []
        self.deferred = False  # held by `task` with no Redis lock taken (see above)
        self.appended = False  # a deferred hold's append ran (its script checked the log)

    def describe(self) -> str:
        return f"{self.storage.server} {self.storage.keys(self.thread_id).log}"

    def defers(self) -> bool:
        """Whether the caller holds this lock deferred (no Redis lock, see the class)."""
        return self.deferred and self.task is not None and self.task is _current_task()

    def write_token(self) -> str:
        """The token a write by the calling OS thread should release ('' = none)."""
        if self.token is None or self.owner != threading.get_ident():
            return ""
        return self.token

    def _acquire(self, exclusive: bool) -> None:
        if exclusive:
            token = self.storage._lock_token()
            try:
                self.token = self.storage._acquire(
                    self.thread_id, self.key, token, self.unconfirmed
                )
            except BaseException:
                self._unanswered(token)
                raise
            self.unconfirmed = []

    def _unanswered(self, token: str) -> None:
        """``token``'s lock or unlock got no answer (see ``unconfirmed``)."""
        self.unconfirmed = [*self.unconfirmed[-(_UNCONFIRMED - 1) :], token]

    def _release(self) -> None:
        if self.token is not None:
            token, self.token = self.token, None
            if not self.storage._release(self.thread_id, self.key, token):
                self._unanswered(token)

    async def _aacquire(self, exclusive: bool) -> None:
        if not exclusive:
            return
        storage = self.storage
        if storage._defers(self.thread_id):
            self.deferred = True
            self.appended = False
            return
        door = storage._door()
        token = storage._lock_token()
        steps = storage._acquire_steps(self.thread_id, self.key, token, self.unconfirmed)
        try:
            self.token = await door.run(steps)
        except asyncio.CancelledError:
            # Cancelled after the script may have taken the lock: drop it if it holds our
            # token (the unlock script checks), rather than leave it to lock_timeout.
            self._unanswered(token)
            release = storage._release_steps(self.thread_id, self.key, token, warn=False)
            door.spawn(door.run(release))
            raise
        except BaseException:
            self._unanswered(token)
            raise
        self.unconfirmed = []

    async def _arelease(self, cancelled: bool = False) -> None:
        if self.deferred:
            self.deferred = False
            if not self.appended and not cancelled:
                # Nothing appended, so no script checked what the operation decided from
                # (``put_writes`` finding its writes stored): check it now; a changed log
                # runs the operation again under the lock (`LogChangedError`).
                await self.storage._door().run(self.storage._confirm_steps(self.thread_id))
            return
        if self.token is not None:
            token, self.token = self.token, None
            door = self.storage._door()
            # A cancelled append may still have committed (its script went out in the
            # loop's pipeline) and released the lock: finding it gone is no lost lock.
            steps = self.storage._release_steps(self.thread_id, self.key, token, warn=not cancelled)
            if not await door.run(steps):
                self._unanswered(token)


class RedisStorage(LogStorage):
    """Thread logs as Redis lists under ``ctx:<prefix>:``, on plain Redis 6+ (no modules).

    Args:
        client: A ``redis.Redis`` client, or a ``redis.cluster.RedisCluster``
            (``decode_responses`` must be off). `RedisStorage.from_url` makes one
            with short timeouts and one quick retry, so a dead server fails fast
            and a restarted one is reconnected.
        prefix: Application namespace: keys start with ``ctx:<prefix>:``. Two
            prefixes never see each other's threads. Letters, digits, ``_.:-``.
        ttl: Seconds a thread lives after its last write (every append and
            rewrite refreshes it, backups included); ``None`` keeps threads forever.
        lock_timeout: Seconds a writer's lock lasts if it is never released
            (a crashed writer blocks its thread at most this long).
        lock_wait: Seconds to wait for another writer's lock before raising
            `LockTimeoutError`.
        wait_for_replicas: After each write, wait (Redis ``WAIT``) until this
            many replicas have it, and raise `StorageUnavailableError` if they do
            not within ``replica_timeout``: a write is then acknowledged only
            once it would survive the loss of the primary (for managed Redis such
            as ElastiCache, which has replicas but no append-only file).
        replica_timeout: Seconds to wait for replicas (with ``wait_for_replicas``).
        cache_bytes: Log lines kept in memory, across threads, so that reading
            a line again costs no round trip (least recently used threads are
            dropped first; ``0`` disables the cache).
        async_client: A ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``
            on the same server(s), or a function making one (called once per event
            loop, on its first async call): the async door then awaits Redis on the
            event loop (`aio`). ``None``: no door; async calls run in a worker thread.

    Example:
        ```python
        import redis
        from langgraph_ctx.storage.redis import RedisStorage

        storage = RedisStorage(redis.Redis(), prefix="travel", ttl=7 * 24 * 3600)
        ```
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl: float | None = None,
        lock_timeout: float = 30.0,
        lock_wait: float = 60.0,
        wait_for_replicas: int = 0,
        replica_timeout: float = 1.0,
        cache_bytes: int = 64 << 20,
        async_client: AsyncRedisClient | Callable[[], AsyncRedisClient] | None = None,
    ) -> None:
        if not _PREFIX_OK.fullmatch(prefix or ""):
            raise ValueError(
                f"prefix must be non-empty letters, digits, '_', '.', ':' or '-'; got {prefix!r}"
            )
        if client.get_encoder().decode_responses:
            raise ValueError("the Redis client must not decode responses (decode_responses=False)")
        if ttl is not None and ttl <= 0:
            raise ValueError("ttl must be a positive number of seconds, or None")
        if lock_timeout <= 0 or lock_wait < 0:
            raise ValueError("lock_timeout must be positive and lock_wait non-negative")
        if wait_for_replicas < 0 or replica_timeout <= 0:
            raise ValueError("wait_for_replicas must be >= 0 and replica_timeout positive")
        self.client = client
        self.cluster = isinstance(client, RedisCluster)
        self.prefix = prefix
        self.ttl = ttl
        self.lock_timeout = lock_timeout
        self.lock_wait = lock_wait
        self.wait_for_replicas = wait_for_replicas
        self.replica_timeout = replica_timeout
        self.namespace = f"ctx:{prefix}:thread:"
        self.server = _describe_server(client)
        self._ttl_ms = 0 if ttl is None else max(1, round(ttl * 1000))
        self._states: dict[str, _State] = {}
        self._cache = _LineCache(cache_bytes)
        self._prefetched: dict[str, tuple[_State, list[Any]]] = {}  # snapshot replies
        self._keys: dict[str, _Keys] = {}
        self._locks: dict[str, _ThreadLock] = {}
        self._guard = threading.Lock()
        self._snapshot_script = client.register_script(_SNAPSHOT)
        self._append = client.register_script(_APPEND)
        self._rewrite = client.register_script(_REWRITE)
        self._delete = client.register_script(_DELETE)
        self._unlock = client.register_script(_UNLOCK)
        self._scripts = {
            "snapshot": self._snapshot_script,
            "append": self._append,
            "rewrite": self._rewrite,
            "delete": self._delete,
            "unlock": self._unlock,
        }
        self._owner = socket.gethostname()
        self.async_client = async_client
        # one door per event loop: a redis.asyncio connection belongs to the loop it opened on
        self._doors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _RedisAio] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisStorage:
        """A storage on a new client for ``url`` (``redis://``, ``rediss://``, ``unix://``,
        ``redis+cluster://h1:p1,h2:p2``; see `connect`).

        Example:
            ```python
            storage = RedisStorage.from_url("redis://localhost:6379/0", prefix="travel")
            ```
        """
        return cls(connect(url), **kwargs)

    # ------------------------------------------------------------------ keys

    def keys(self, thread_id: str) -> _Keys:
        """The Redis keys of one thread (they may not exist)."""
        keys = self._keys.get(thread_id)
        if keys is None:
            base = f"{self.namespace}{{{encode_thread_id(check_thread_id(thread_id))}}}"
            keys = _Keys(log=base, gen=base + ":gen", backup=base + ":backup:", lock=base + ":lock")
            if len(self._keys) < 65536:
                self._keys[thread_id] = keys
        return keys

    def describe(self, thread_id: str) -> str:
        return f"{self.server} {self.keys(thread_id).log}"

    def exists(self, thread_id: str) -> bool:
        with self._unavailable("checking", thread_id):
            return bool(self.client.exists(self.keys(thread_id).log))

    def thread_ids(self) -> Iterator[str]:
        """Thread ids with a log under this prefix (SCAN: O(keys in the database)).

        On a cluster the SCAN visits every master (redis-py's ``RedisCluster.scan_iter``),
        so it lists the threads of all of them. A key of another type where a log would
        be (another application's) is skipped with a `ForeignKeyWarning` naming it.
        """
        pattern = self.namespace + "{*}"
        with self._unavailable("listing threads", None):
            found = set(self.client.scan_iter(match=pattern, count=1000))
            pipe = self.client.pipeline(transaction=False)
            for key in found:
                pipe.type(key)
            logs: set[str] = set()
            for key, kind in zip(found, pipe.execute() if found else [], strict=True):
                if kind == b"list":
                    try:
                        logs.add(key.decode())
                    except UnicodeDecodeError:  # no key this package writes
                        shown = key.decode("utf-8", "replace")
                        self._warn_foreign(shown, "list named not in UTF-8")
                elif kind != b"none":  # b"none": deleted since the scan
                    self._warn_foreign(key.decode("utf-8", "replace"), kind.decode())
            names = sorted(key[len(self.namespace) + 1 : -1] for key in logs)
            hashed = [n for n in names if is_hashed(n)]
            headers: dict[str, Any] = {}
            if hashed:
                pipe = self.client.pipeline(transaction=False)
                for name in hashed:
                    pipe.lindex(f"{self.namespace}{{{name}}}", 0)
                headers = dict(zip(hashed, pipe.execute(), strict=True))
        for name in names:
            if is_hashed(name):
                thread_id = hashed_thread_id(_header(headers.get(name)), name)
                if thread_id is not None:
                    yield thread_id
                    continue
                warnings.warn(
                    f"{self.server}: {self.namespace}{{{name}}}: its header (line 1) does not "
                    "read or names another thread, and the thread id of a long id is only "
                    "there: the thread is left out of listings",
                    CorruptLineWarning,
                    stacklevel=2,
                )
                continue
            try:
                yield decode_thread_id(name)
            except ValueError:
                continue  # not a key this package wrote

    def _warn_foreign(self, key: str, kind: str) -> None:
        warnings.warn(
            f"{self.server}: skipped key {key!r}: it is a {kind}, not a thread log (a list); "
            f"another application wrote under the prefix {self.prefix!r}. Rename or delete "
            f"it (redis-cli DEL '{key}'), or give the saver a prefix of its own",
            ForeignKeyWarning,
            stacklevel=3,
        )

    def backups(self, thread_id: str) -> list[str]:
        prefix = self.keys(thread_id).backup
        found: list[str] = []
        with self._unavailable("listing backups of", thread_id):
            while self.client.exists(f"{prefix}{len(found) + 1}"):
                found.append(f"{prefix}{len(found) + 1}")
        return found

    def read_backup(self, thread_id: str, number: int = 1) -> list[bytes]:
        """The lines of a revert backup (1 = newest), like ``<thread>.jsonl.1``.

        Example:
            ```python
            before_revert = storage.read_backup("task-001")
            ```
        """
        with self._unavailable("reading a backup of", thread_id):
            lines = self.client.lrange(f"{self.keys(thread_id).backup}{number}", 0, -1)
        return cast("list[bytes]", lines)  # the client does not decode responses

    # ------------------------------------------------------------------ locks

    def locked(self, thread_id: str, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        return self._lock(thread_id).hold(exclusive)

    def _lock(self, thread_id: str) -> _ThreadLock:
        keys = self.keys(thread_id)
        with self._guard:
            lock = self._locks.get(keys.lock)
            if lock is None:
                lock = self._locks[keys.lock] = _ThreadLock(self, thread_id, keys.lock)
        return lock

    def aio(self) -> AsyncLog | None:
        """The async door on this event loop's client (`async_client`), or ``None``
        without one (the saver then runs async calls in a worker thread)."""
        if self.async_client is None:
            return None
        return self._door()

    def _door(self) -> _RedisAio:
        loop = asyncio.get_running_loop()
        door = self._doors.get(loop)
        if door is None:
            made = self.async_client
            if made is None:
                raise RuntimeError("this RedisStorage has no async client")
            client = made() if callable(made) and not hasattr(made, "execute_command") else made
            door = self._doors[loop] = _RedisAio(self, cast("AsyncRedisClient", client))
            if client is not made:  # ours: closed with its loop, if nobody closes it first
                door.closer = self._closed_at_shutdown(loop, door)
                door.arming = loop.create_task(_first_step(door.closer))
        return door

    async def _closed_at_shutdown(self, loop: asyncio.AbstractEventLoop, door: _RedisAio) -> Any:
        """An async generator the loop finalizes when it shuts down (``asyncio.run``'s
        `shutdown_asyncgens`): then it closes the client made for that loop. Each
        ``asyncio.run`` over one saver otherwise left a connection open for good (the
        door's client holds its loop, so the weak dictionary never let go of either)."""
        try:
            yield None
        finally:
            if self._doors.get(loop) is door:
                del self._doors[loop]
            with contextlib.suppress(Exception):
                await door.close_client()

    async def aclose(self) -> None:
        """Close the async clients this storage made (from a function), on this loop."""
        loop = asyncio.get_running_loop()
        door = self._doors.pop(loop, None)
        if door is not None and door.client is not self.async_client:
            await door.close_client()

    def _run(self, steps: _Steps[_T]) -> _T:
        """Run a storage call's round trips on the sync client."""
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as stop:
                return cast("_T", stop.value)
            answer, error = None, None
            try:
                if type(request) is _Pause:
                    time.sleep(request.seconds)
                elif type(request) is _Read:
                    answer = self._read(request)
                else:
                    answer = self._call(cast(_Run, request))
            except Exception as exc:  # thrown into the steps, which may handle it
                error = exc

    def _call(self, run: _Run) -> Any:
        script = self._scripts[run.name]
        if run.wait:
            assert run.action is not None
            return self._write(script, run.action, run.thread_id or "", run.keys, run.args)
        if run.action is None:
            return script(keys=run.keys, args=run.args)
        with self._unavailable(run.action, run.thread_id):
            return script(keys=run.keys, args=run.args)

    def _read(self, read: _Read) -> list[Any]:
        with self._unavailable("reading", read.thread_id):
            pipe = self.client.pipeline(transaction=False)
            for lo, hi in read.runs:
                pipe.lrange(read.log, lo, hi)
            pipe.get(read.gen)
            return cast("list[Any]", pipe.execute())

    def _acquire(
        self, thread_id: str, key: str, token: str | None = None, over: Sequence[str] = ()
    ) -> str:
        """Take the writer lock (with ``token``, a fresh one if ``None``; from whichever
        of ``over`` holds it, tokens of this process whose calls got no answer); the same
        call reads the new lines for the next `sync`."""
        return self._run(self._acquire_steps(thread_id, key, token, over))

    def _lock_token(self) -> str:
        # The pid now, not at start: a forked child's tokens name it.
        return f"{self._owner}:{os.getpid()}:{threading.get_ident()}:{secrets.token_hex(6)}"

    def _acquire_steps(
        self, thread_id: str, key: str, token: str | None = None, over: Sequence[str] = ()
    ) -> _Steps[str]:
        token = token or self._lock_token()
        px = max(1, round(self.lock_timeout * 1000))
        keys = self.keys(thread_id)
        start = time.monotonic()
        delay = 0.001
        while True:
            state = self._states.setdefault(thread_id, _State())
            reply = yield _Run(
                "snapshot", [keys.log, keys.gen, keys.lock],
                [state.lines, token, px, *_COLD, *over],
                "locking", thread_id,
            )
            if reply[0]:
                self._prefetched[thread_id] = (state, reply)
                return token
            waited = time.monotonic() - start
            if waited >= self.lock_wait:
                holder = reply[1].decode("utf-8", "replace") or None
                raise LockTimeoutError(thread_id, key, holder, waited)
            yield _Pause(min(delay, max(0.0, self.lock_wait - waited)))
            delay = min(delay * 2, 0.05)

    def _release(self, thread_id: str, key: str, token: str) -> bool:
        return self._run(self._release_steps(thread_id, key, token))

    def _release_steps(
        self, thread_id: str, key: str, token: str, *, warn: bool = True
    ) -> _Steps[bool]:
        """Drop the writer lock if ``token`` holds it. ``False``: the unlock got no answer
        (the lock may still be held: other processes wait for ``lock_timeout`` at most,
        this one takes it over from the token next, `_ThreadLock.unconfirmed`)."""
        self._prefetched.pop(thread_id, None)
        try:
            released = yield _Run("unlock", [key], [token], None, thread_id)
        except RedisError as exc:  # the lock expires by itself; never mask the caller's result
            if warn:
                warnings.warn(
                    f"could not release the writer lock {key} ({exc}); other processes "
                    f"wait for it to expire (after {self.lock_timeout:g}s)",
                    LockLostWarning,
                    stacklevel=4,
                )
            return False
        if not released and warn:
            self._warn_lock_lost(key)
        return True

    def _warn_lock_lost(self, key: str) -> None:
        warnings.warn(
            f"the writer lock {key} expired before it was released (lock_timeout="
            f"{self.lock_timeout:g}s); writes stayed consistent (they are conditional), "
            "but another writer may have been let in early: raise lock_timeout",
            LockLostWarning,
            stacklevel=5,
        )

    def _token(self, thread_id: str) -> str:
        """The writer's lock token for a write script: '' none, '?' deferred (`_ThreadLock`)."""
        lock = self._locks.get(self.keys(thread_id).lock)
        if lock is None:
            return ""
        return "?" if lock.defers() else lock.write_token()

    def _defers(self, thread_id: str) -> bool:
        """Whether a writer may skip the Redis lock (`_ThreadLock`): this process has read
        the log (its length and generation, which the append checks), and the last write
        that skipped the lock here did not find it changed or locked (then the writer
        takes the lock, and reads what changed under it, until a write succeeds)."""
        state = self._states.get(thread_id)
        return (
            state is not None
            and state.lines > 0
            and not state.contended
            and state.gen not in (b"", _REWRITTEN)
        )

    def _committed(self, thread_id: str, released: int) -> None:
        """A write committed; ``released``: 1 it released our lock, 0 it was gone, 2 no lock."""
        if released == 2:
            return
        key = self.keys(thread_id).lock
        lock = self._locks.get(key)
        if lock is not None:
            lock.token = None
        self._prefetched.pop(thread_id, None)
        if released == 0:
            self._warn_lock_lost(key)

    # ------------------------------------------------------------------ reads

    def sync(self, thread_id: str) -> Synced:
        return self._run(self._sync_steps(thread_id))

    def _sync_steps(self, thread_id: str) -> _Steps[Synced]:
        known = self._states.setdefault(thread_id, _State())
        lock = self._locks.get(self.keys(thread_id).lock)
        if lock is not None and lock.defers():  # the append checks what this assumes
            return Synced(False, known.lines + 1, [])
        prefetched = self._prefetched.pop(thread_id, None)
        if prefetched is not None and prefetched[0] is known:
            reply = prefetched[1]  # read when the lock was taken
        else:
            reply = yield from self._snapshot(thread_id, known.lines)
        gen, length = reply[1], reply[2]
        changed = gen != known.gen or length < known.lines
        if changed and known.lines:  # those lines belong to another log: read it whole
            reply = yield from self._snapshot(thread_id, 0)
            gen, length = reply[1], reply[2]
        # Lines read from 0 replace what was indexed: a reset, unless nothing was.
        reset = changed and known.lines > 0
        if reset or not known.lines:
            lines, entry, size = yield from self._whole(thread_id, reply)
            self._states[thread_id] = _State(gen=gen, lines=length, size=size)
            self._cache.put(thread_id, entry)
            return Synced(reset, 1, lines)
        new: list[bytes] = reply[3]
        size = sum(len(x) for x in new)
        self._states[thread_id] = _State(gen, known.lines + len(new), known.size + size)
        if new:
            self._cache.extend(thread_id, new, known.lines)
        return Synced(False, known.lines + 1, new)

    def _confirm_steps(self, thread_id: str) -> _Steps[None]:
        """Raise `LogChangedError` if the log is no longer what this process read (a
        deferred hold that appended nothing: `_ThreadLock`), and take the lock next time."""
        known = self._states.get(thread_id) or _State()
        reply = yield from self._snapshot(thread_id, known.lines)
        if reply[1] != known.gen or reply[2] != known.lines:
            known.contended = True
            raise LogChangedError(
                self.describe(thread_id),
                "another writer changed the log since this process read it",
            )

    def _snapshot(self, thread_id: str, start: int) -> _Steps[list[Any]]:
        keys = self.keys(thread_id)
        reply = yield _Run(
            "snapshot", [keys.log, keys.gen, keys.lock], [start, "", 0, *_COLD], "reading",
            thread_id,
        )
        return cast("list[Any]", reply)

    def _whole(
        self, thread_id: str, reply: list[Any]
    ) -> _Steps[tuple[Sequence[bytes], list[bytes | None], int]]:
        """A whole log from the snapshot script's reply read from line 1: its lines (a
        `PartialLines` when the script started at the last snapshot), the cache entry
        (``None`` where a line was not read) and its size in bytes (estimated from the
        lines read, for `_read_steps`' choice between one read and several)."""
        kind, gen, length = reply[0], reply[1], reply[2]
        if kind == 1:
            lines: list[bytes] = reply[3]
            return lines, list(lines), sum(len(x) for x in lines)
        if kind == 3:  # no snapshot near the end: every line, with plain LRANGEs
            (lines,) = yield from self._ranges(thread_id, _State(gen, length), [(1, length)])
            return lines, list(lines), sum(len(x) for x in lines)
        tail, first, header, indexes, chain = reply[3:8]
        known: dict[int, bytes] = {1: header}
        known.update((i + 1, raw) for i, raw in zip(indexes, chain, strict=True))
        known.update(enumerate(tail, first + 1))
        entry: list[bytes | None] = [None] * length
        for n, raw in known.items():
            entry[n - 1] = raw
        size = sum(len(x) for x in known.values())
        return PartialLines(length, known, partial(self.read_many, thread_id)), entry, (
            size * length // len(known)
        )

    def read(self, thread_id: str, line: int) -> bytes:
        return self.read_many(thread_id, [line])[line]

    def read_many(self, thread_id: str, lines: Iterable[int]) -> dict[int, bytes]:
        """Lines already reported by `sync`: from memory, else in one checked round trip."""
        return self._run(self._read_steps(thread_id, lines))

    def _cached(self, thread_id: str, wanted: list[int]) -> tuple[_State, dict[int, bytes] | None]:
        """The lines from memory (``None``: not all there), after checking they exist."""
        state = self._states.get(thread_id)
        if state is None:
            raise ThreadNotFoundError(thread_id)
        if any(not 1 <= n <= state.lines for n in wanted):
            raise IndexError(f"line out of range 1..{state.lines}")
        return state, self._cache.get(thread_id, wanted)

    def _read_steps(self, thread_id: str, lines: Iterable[int]) -> _Steps[dict[int, bytes]]:
        wanted = sorted(set(lines))
        state, cached = self._cached(thread_id, wanted)
        if cached is not None:
            return cached
        holes = self._cache.holes(thread_id)
        if state.size <= self._cache.limit // 4 and (holes is None or 4 * len(wanted) >= holes[0]):
            # One read of the whole log now beats a round trip per line later (the
            # saver follows chains of references one line at a time). Not for a few
            # lines of a log read from its snapshot: a cold open's checks need those only;
            # and of such a log, only the span it lacks.
            if holes is not None:
                (span,) = yield from self._ranges(thread_id, state, [holes[1:]])
                self._cache.fill(thread_id, holes[1], span, state.lines)
                filled = self._cache.get(thread_id, wanted)
                if filled is not None:
                    return filled
            (whole,) = yield from self._ranges(thread_id, state, [(1, state.lines)])
            self._cache.put(thread_id, list(whole))
            return {n: whole[n - 1] for n in wanted}
        runs: list[tuple[int, int]] = []  # consecutive lines fetched with one LRANGE
        for n in wanted:
            if runs and runs[-1][1] == n - 1:
                runs[-1] = (runs[-1][0], n)
            else:
                runs.append((n, n))
        chunks = yield from self._ranges(thread_id, state, runs)
        got: dict[int, bytes] = {}
        for (lo, _), chunk in zip(runs, chunks, strict=True):
            got.update(enumerate(chunk, lo))
            self._cache.fill(thread_id, lo, chunk, state.lines)
        return got

    def _ranges(
        self, thread_id: str, state: _State, runs: list[tuple[int, int]]
    ) -> _Steps[list[list[bytes]]]:
        """Line ranges (1-based, inclusive), read with plain LRANGEs and checked against
        the generation ``state`` was read under (see `_Read`): each range's lines."""
        keys = self.keys(thread_id)
        *chunks, gen = yield _Read(keys.log, keys.gen, [(lo - 1, hi - 1) for lo, hi in runs],
                                   thread_id)  # fmt: skip
        if (gen or b"") != state.gen:
            raise LogChangedError(
                self.describe(thread_id), "the log was rewritten since it was read"
            )
        for (lo, hi), chunk in zip(runs, chunks, strict=True):
            if len(chunk) != hi - lo + 1:
                raise LogChangedError(self.describe(thread_id), "the log shrank since it was read")
        return cast("list[list[bytes]]", chunks)

    def read_all(self, thread_id: str) -> list[bytes]:
        """Every line of the log as it is now (for export; no sync state is touched)."""
        with self._unavailable("reading", thread_id):
            lines = self.client.lrange(self.keys(thread_id).log, 0, -1)
        return cast("list[bytes]", lines)  # the client does not decode responses

    # ----------------------------------------------------------------- writes

    def append(self, thread_id: str, lines: Sequence[bytes], *, durable: bool = True) -> int:
        # ``durable`` is for backends that flush to disk; Redis persists as configured.
        return self._run(self._append_steps(thread_id, lines))

    def _append_steps(self, thread_id: str, lines: Sequence[bytes]) -> _Steps[int]:
        keys = self.keys(thread_id)
        state = self._states.setdefault(thread_id, _State())
        new_gen = b"" if state.lines else _generation()  # the script uses it for a new log only
        args: list[Any] = [self._token(thread_id), self._ttl_ms, state.lines, state.gen, new_gen]
        args += map(_strip, lines)
        deferred = args[0] == "?"
        if deferred:  # this script checks the log: the hold's release need not
            self._locks[keys.lock].appended = True
        reply, replicas = yield _Run(
            "append", keys.for_write, args, "appending to", thread_id, wait=True
        )
        ok, first, gen = reply[:3]
        if ok:
            self._committed(thread_id, reply[3])
        else:
            if deferred:  # the retry takes the lock (and reads what changed)
                state.contended = True
            if len(reply) > 3:
                raise LogChangedError(
                    self.describe(thread_id),
                    "another writer holds the lock; re-read under the lock before appending",
                )
            raise LogChangedError(
                self.describe(thread_id),
                f"another writer changed the log (now {first} lines, this process read "
                f"{state.lines}); re-read before appending",
            )
        # Only now: if replicas fall short, the next sync reads these lines back.
        self._check_replicas(replicas, "appending to", thread_id)
        pushed: list[bytes] = args[5:]
        size = sum(map(len, pushed))
        self._states[thread_id] = _State(gen, state.lines + len(pushed), state.size + size)
        self._cache.extend(thread_id, pushed, state.lines)
        return int(first)

    def evict(self, thread_id: str) -> None:
        self._states.pop(thread_id, None)
        self._prefetched.pop(thread_id, None)
        self._cache.drop(thread_id)

    def replace(self, thread_id: str, lines: Iterable[bytes], *, backup: bool) -> None:
        self._rewrite_log(thread_id, -1, [_strip(x) for x in lines], backup=backup)

    def truncate(self, thread_id: str, n_lines: int, *, backup: bool) -> None:
        if n_lines < 0:
            raise ValueError("n_lines must not be negative")
        self._rewrite_log(thread_id, n_lines, [], backup=backup)

    def copy(self, source_id: str, target_id: str, n_lines: int | None, header: bytes) -> None:
        state = self._states.get(source_id)
        if state is None or state.lines == 0:
            raise ThreadNotFoundError(source_id)
        end = state.lines if n_lines is None else n_lines
        body = self.read_many(source_id, range(2, end + 1)) if end >= 2 else {}
        self._rewrite_log(
            target_id, -1, [_strip(header), *(body[n] for n in range(2, end + 1))], backup=False
        )

    def delete(self, thread_id: str) -> None:
        keys = self.keys(thread_id)
        self._states.pop(thread_id, None)
        self._cache.drop(thread_id)
        args = [self._token(thread_id), 0]
        reply, replicas = self._write(self._delete, "deleting", thread_id, keys.for_write, args)
        self._committed(thread_id, reply[1])
        self._check_replicas(replicas, "deleting", thread_id)

    def _rewrite_log(self, thread_id: str, keep: int, lines: list[bytes], *, backup: bool) -> None:
        """Replace (``keep=-1``) or truncate the log, if it is what was last synced."""
        keys = self.keys(thread_id)
        state = self._states.get(thread_id) or _State()
        new_gen = _generation()
        args = [self._token(thread_id), self._ttl_ms, state.lines, state.gen, new_gen]
        args += [int(backup), keep, *lines]
        result, replicas = self._write(self._rewrite, "rewriting", thread_id, keys.for_write, args)
        if result[0]:
            self._committed(thread_id, result[2])
        else:
            raise LogChangedError(
                self.describe(thread_id),
                f"another writer changed the log (now {result[1]} lines, this process read "
                f"{state.lines}); nothing was rewritten",
            )
        # The next sync reads the new log whole, and reports a reset if this
        # process had indexed the old one.
        self._states[thread_id] = _State(gen=_REWRITTEN, lines=state.lines)
        self._cache.drop(thread_id)
        self._check_replicas(replicas, "rewriting", thread_id)

    def _write(
        self, script: Any, action: str, thread_id: str, keys: list[str], args: list[Any]
    ) -> tuple[Any, int | None]:
        """Run a write script; with ``wait_for_replicas``, WAIT on the same connection.

        Returns the script's result and how many replicas acknowledged it
        (``None`` when not waiting). Callers check the result first: a refused
        write wrote nothing, so its replica count means nothing.
        """
        with self._unavailable(action, thread_id):
            if not self.wait_for_replicas:
                return script(keys=keys, args=args), None
            return self._write_and_wait(script, keys, args)

    def _write_and_wait(self, script: Any, keys: list[str], args: list[Any]) -> tuple[Any, int]:
        """The script, then WAIT, on one connection: WAIT counts the replicas that
        acknowledged that connection's writes.

        On a cluster the connection is one to the master of the thread's slot
        (a cluster client would send WAIT, which names no key, to any node). If
        the slot moved since the client last learnt the layout, the node
        refuses the script (MOVED: nothing ran), so the layout is refreshed and
        the pair sent once more.
        """
        for attempt in range(2):
            client: Any = self.client
            if isinstance(client, RedisCluster):
                client = client.get_redis_connection(client.get_node_from_key(keys[0]))
            pipe = client.pipeline(transaction=False)
            pipe.eval(script.script, len(keys), *keys, *args)
            pipe.wait(self.wait_for_replicas, max(1, round(self.replica_timeout * 1000)))
            try:
                result, replicas = pipe.execute()
            except AskError:  # MOVED is a subclass; a plain server never says either
                if not isinstance(self.client, RedisCluster) or attempt:
                    raise
                self.client.nodes_manager.initialize()
                continue
            return result, int(replicas)
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_replicas(self, replicas: int | None, action: str, thread_id: str) -> None:
        if replicas is not None and replicas < self.wait_for_replicas:
            raise StorageUnavailableError(
                self.server,
                f"{action} {self.keys(thread_id).log}",
                f"only {replicas} of {self.wait_for_replicas} replicas acknowledged the write "
                f"within {self.replica_timeout:g}s; check INFO replication",
            )

    # ----------------------------------------------------------------- errors

    @contextlib.contextmanager
    def _unavailable(self, action: str, thread_id: str | None) -> Iterator[None]:
        """Turn "Redis is not there right now" into `StorageUnavailableError`."""
        try:
            yield
        except REFUSED as exc:
            raise self._refused_error(action, thread_id, exc) from exc
        except (RedisConnectionError, RedisTimeoutError, ReadOnlyError, OutOfMemoryError) as exc:
            raise self._unavailable_error(action, thread_id, exc) from exc
        except (ClusterError, SlotNotCoveredError, AskError) as exc:
            # CLUSTERDOWN, a slot no master serves, a slot still moving after a retry
            raise self._unavailable_error(action, thread_id, exc) from exc
        except RedisClusterException as exc:
            # No node answers (redis-py's other cluster exceptions are misuse: let them be)
            if type(exc) is RedisClusterException and "cannot be connected" in str(exc):
                if _refusal(exc):  # every node refused the credentials: no retry helps
                    raise self._refused_error(action, thread_id, exc) from exc
                raise self._unavailable_error(action, thread_id, exc) from exc
            raise
        except ResponseError as exc:
            if str(exc).startswith(_UNAVAILABLE_REPLIES):
                raise self._unavailable_error(action, thread_id, exc) from exc
            if "DB index is out of range" in str(exc):  # SELECT on connecting
                raise StorageConfigError(
                    f"{self.server}: the server has no such database ({exc}); name one "
                    "below its 'databases' setting (16 by default: 0 to 15)"
                ) from None
            if "WRONGTYPE" in str(exc) and thread_id is not None:
                raise self._wrong_type(thread_id, action, exc) from None
            raise

    def _refused_error(
        self, action: str, thread_id: str | None, exc: Exception
    ) -> StorageConfigError:
        where = f" {self.keys(thread_id).log}" if thread_id is not None else ""
        return refused_error(self.server, f"{action}{where}", exc, self.namespace)

    def _wrong_type(self, thread_id: str, action: str, exc: ResponseError) -> Exception:
        """`WrongKeyTypeError` for the first of the thread's keys that has the wrong type."""
        keys = self.keys(thread_id)
        expected = [(keys.log, b"list"), (keys.gen, b"string"), (keys.lock, b"string")]
        with contextlib.suppress(RedisError):
            while self.client.type(f"{keys.backup}{len(expected) - 2}") != b"none":
                expected.append((f"{keys.backup}{len(expected) - 2}", b"list"))
            for key, want in expected:
                kind = self.client.type(key)
                if kind not in (want, b"none"):
                    found = kind.decode() if isinstance(kind, bytes) else str(kind)
                    where = f"{self.server} ({action} thread {thread_id!r})"
                    return WrongKeyTypeError(where, key, found, want.decode())
        return exc  # changed back since: the server's own message

    def _where(self, thread_id: str) -> str:
        """On a cluster, `` (slot N on host:port)``: which master an operator should look at
        (from the client's last known layout: no round trip)."""
        if not isinstance(self.client, RedisCluster):
            return ""
        key = self.keys(thread_id).log
        try:
            node = self.client.get_node_from_key(key)
        except (RedisError, RedisClusterException):  # no master known for the slot
            return f" (slot {self.client.keyslot(key)})"
        return f" (slot {self.client.keyslot(key)} on {node.host}:{node.port})"

    def _unavailable_error(
        self, action: str, thread_id: str | None, exc: Exception
    ) -> StorageUnavailableError:
        write = action not in _NOT_WRITES  # (an action not listed: said to be a write)
        if thread_id is not None:
            action = f"{action} {self.keys(thread_id).log}{self._where(thread_id)}"
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return StorageUnavailableError(self.server, action, reason + _tls_hint(exc), write=write)


REFUSED = (AuthenticationError, AuthorizationError, NoPermissionError)
"""What Redis answers a client it does not let in (credentials) or lets do less than the
saver needs (an ACL): redis-py raises the first two as ``ConnectionError``s, but no retry
helps, so they are `StorageConfigError`s (`refused_error`), not unavailability."""


_REFUSAL_REPLIES = ("WRONGPASS", "NOAUTH", "NOPERM", "invalid username-password pair")
"""How a refusal reads inside another error's message (a cluster client wraps the
nodes' `REFUSED` errors in a ``RedisClusterException`` of its own, by their text)."""


def _chain(exc: BaseException, depth: int = 4) -> Iterator[BaseException]:
    """``exc`` and the errors it came of (``__cause__``, else ``__context__``), ``depth``
    at most."""
    seen: BaseException | None = exc
    while seen is not None and depth > 0:
        yield seen
        seen, depth = seen.__cause__ or seen.__context__, depth - 1


def _refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is, wraps or reports a `REFUSED` error."""
    return any(
        isinstance(seen, REFUSED) or any(text in str(seen) for text in _REFUSAL_REPLIES)
        for seen in _chain(exc)
    )


def refused_error(
    server: str, doing: str, exc: Exception, namespace: str = "ctx:<prefix>:thread:"
) -> StorageConfigError:
    """The `StorageConfigError` for a `REFUSED` error met while ``doing``, naming the fix.

    >>> str(refused_error("redis://h:6379/0", "reading", AuthenticationError("bad pass")))
    'redis://h:6379/0 refused the saver while reading (AuthenticationError: bad pass): check the user and password, in the URL (redis://user:password@host:port/0) or your client'
    """  # noqa: E501
    credentials = isinstance(exc, AuthenticationError) or any(
        text in str(exc) for text in _REFUSAL_REPLIES if text != "NOPERM"
    )
    fix = (
        "check the user and password, in the URL (redis://user:password@host:port/0) "
        "or your client"
        if credentials
        else "the user needs the scripting (EVALSHA, EVAL, SCRIPT LOAD), list and "
        f"string commands on the keys {namespace}*"
    )
    return StorageConfigError(
        f"{server} refused the saver while {doing} ({type(exc).__name__}: {exc}): {fix}"
    )


def _tls_hint(exc: BaseException) -> str:
    """What to check when ``exc`` came of a TLS handshake (redis-py reports a
    ``rediss://`` URL to a server without TLS as a connect timeout, the handshake's own
    error only in the chain): ``""`` otherwise."""
    for seen in _chain(exc):
        if isinstance(seen, ssl.SSLError) or "_ssl.c" in str(seen):
            return (
                f"; the TLS handshake failed ({seen}): does that port serve TLS? A rediss:// "
                "URL needs the server's tls-port, a redis:// URL its plain port"
            )
    return ""


_NOT_WRITES = frozenset(
    {
        "checking",
        "connecting to the cluster",
        "listing backups of",
        "listing threads",
        "reading",
        "reading a backup of",
    }
)
"""The actions of `RedisStorage._unavailable` that write nothing: a failure of one says
so (`StorageUnavailableError.write`); every other action may have written."""


_Queued = tuple[Any, list[str], list[Any], "asyncio.Future[Any]"]
"""A script call waiting for `_RedisAio._send`: script, keys, args, where its reply goes."""


async def _first_step(agen: Any) -> None:
    """Start an async generator: the running loop then finalizes it at shutdown."""
    with contextlib.suppress(StopAsyncIteration):
        await agen.__anext__()


class _RedisAio(AsyncLog):
    """`RedisStorage`'s async door: its round trips awaited on a ``redis.asyncio`` client.

    The storage's own steps (`RedisStorage._sync_steps`, ...) decide what to send and
    check every reply, on the storage's state (shared with the sync door); this class
    only carries the round trips.
    """

    def __init__(self, storage: RedisStorage, client: AsyncRedisClient) -> None:
        if client.get_encoder().decode_responses:
            raise ValueError("the Redis client must not decode responses (decode_responses=False)")
        import redis.asyncio.cluster

        self.storage = storage
        self.client = client
        self.cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)
        self.scripts = {name: client.register_script(text) for name, text in _SCRIPTS.items()}
        # A cluster client learns the layout on its first command; many first commands at
        # once make it do so concurrently, which breaks its connections (redis-py 8):
        # the first call does it alone.
        self.ready = not self.cluster
        self._starting = asyncio.Lock()
        # Script calls made by the loop's tasks in one pass of the loop, sent together.
        self._queue: list[_Queued] = []
        self._pool_takes_name = False  # see `_connection`
        self._sending: set[asyncio.Future[Any]] = set()  # held until done (tasks are weak)
        # A client the storage made: closed by `aclose`, or when its loop shuts down.
        self.closer: Any = None
        self.arming: asyncio.Task[Any] | None = None
        self.closed = False

    async def close_client(self) -> None:
        """Close the client (once: `RedisStorage.aclose`, or the loop's shutdown)."""
        if not self.closed:
            self.closed = True
            await self.client.aclose()

    async def _start(self) -> None:
        async with self._starting:
            if not self.ready:
                client = cast("redis.asyncio.cluster.RedisCluster", self.client)
                with self.storage._unavailable("connecting to the cluster", None):
                    await client.initialize()
                self.ready = True

    def locked(
        self, thread_id: str, *, exclusive: bool
    ) -> contextlib.AbstractAsyncContextManager[None]:
        return self.storage._lock(thread_id).ahold(exclusive)

    # sync, read_many, append: `run`'s coroutine itself (one coroutine less per call,
    # alive while Redis answers)
    def sync(self, thread_id: str) -> Coroutine[Any, Any, Synced]:
        return self.run(self.storage._sync_steps(thread_id))

    def read_ready(self, thread_id: str, lines: Sequence[int]) -> dict[int, bytes] | None:
        return self.storage._cached(thread_id, sorted(set(lines)))[1]

    def read_many(
        self, thread_id: str, lines: Sequence[int]
    ) -> Coroutine[Any, Any, dict[int, bytes]]:
        return self.run(self.storage._read_steps(thread_id, lines))

    def append(
        self, thread_id: str, lines: Sequence[bytes], *, durable: bool = True
    ) -> Coroutine[Any, Any, int]:
        return self.run(self.storage._append_steps(thread_id, lines))

    async def run(self, steps: _Steps[_T]) -> _T:
        """`RedisStorage._run` on the event loop."""
        if not self.ready:
            await self._start()
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as stop:
                return cast("_T", stop.value)
            answer, error = None, None
            try:
                if type(request) is _Pause:
                    await asyncio.sleep(request.seconds)
                elif type(request) is _Read:
                    answer = await self._read(request)
                else:
                    answer = await self._call(cast(_Run, request))
            except Exception as exc:
                error = exc

    async def _read(self, read: _Read) -> list[Any]:
        with self.storage._unavailable("reading", read.thread_id):
            pipe = self.client.pipeline(transaction=False)
            for lo, hi in read.runs:
                pipe.lrange(read.log, lo, hi)
            pipe.get(read.gen)
            return await pipe.execute()

    async def _call(self, run: _Run) -> Any:
        script = self.scripts[run.name]
        storage = self.storage
        if run.action is None:
            return await self._script(script, run.keys, run.args)
        if run.wait and storage.wait_for_replicas:
            with storage._unavailable(run.action, run.thread_id):
                return await self._write_and_wait(script, run.keys, run.args)
        try:
            reply = await self._script(script, run.keys, run.args)
        except Exception:  # translated only on failure: no context manager per call
            with storage._unavailable(run.action, run.thread_id):
                raise
        return (reply, None) if run.wait else reply

    def _script(self, script: Any, keys: list[str], args: list[Any]) -> Awaitable[Any]:
        """The script's reply. On one server, the calls of every task in one pass of the
        event loop go out as one pipeline: one write and one connection for them all,
        where redis.asyncio costs a connection checkout, a send and a timeout task per
        command (each script is still atomic; a pipeline is not a transaction). A
        cluster client sends each call itself (its pipelines split by node, and a moved
        slot is its own to handle)."""
        if self.cluster:
            return cast("Awaitable[Any]", script(keys=keys, args=args))
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        if not self._queue:
            loop.call_soon(self._send_queued)
        self._queue.append((script, keys, args, reply))
        return reply

    def _send_queued(self) -> None:
        batch, self._queue = self._queue, []
        self.spawn(self._send(batch))

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` in a task of its own, kept until done (the loop keeps tasks weakly)."""
        task = asyncio.ensure_future(work)
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[_Queued]) -> None:
        try:
            results = await self._exchange(batch)
        except Exception as exc:  # the connection: every call of the batch failed
            for *_, reply in batch:
                _settle(reply, exc)
            return
        for (script, keys, args, reply), result in zip(batch, results, strict=True):
            if isinstance(result, NoScriptError):  # a restarted or flushed server
                try:
                    result = await script(keys=keys, args=args)  # loads it, then runs it
                except Exception as exc:
                    result = exc
            _settle(reply, result)

    async def _exchange(self, batch: list[_Queued]) -> list[Any]:
        """The batch's ``EVALSHA``s in one write on one pooled connection, and their
        replies (a script's error reply in its place), read under one timeout.

        What a non-transactional pipeline of them does, without its per-command costs
        (redis-py packs each argument through its encoder, wraps each reply's read in a
        timeout of its own, and the send in a task): at 50 busy threads those were a
        tenth of the client's CPU a turn. A connection error or timeout closes the
        connection and sends the batch once more, as the pipeline's retry did (every
        script is safe to run twice: appends and lock takes recognise their own call)."""
        pool = cast("redis.asyncio.Redis", self.client).connection_pool  # one server
        packed = _pack_evalshas(batch, pool.get_encoder())
        conn = await self._connection(pool)
        try:
            return cast(
                "list[Any]",
                await conn.retry.call_with_retry(
                    lambda: self._round_trip(conn, packed, len(batch)),
                    lambda _error: conn.disconnect(),
                ),
            )
        finally:
            await pool.release(conn)

    async def _connection(self, pool: Any) -> Any:
        if self._pool_takes_name:  # redis-py before 5.3 names the command
            return await pool.get_connection("EVALSHA")
        try:
            return await pool.get_connection()
        except TypeError:
            self._pool_takes_name = True
            return await pool.get_connection("EVALSHA")

    @staticmethod
    async def _round_trip(conn: Any, packed: bytes, count: int) -> list[Any]:
        await conn.send_packed_command(packed)
        replies: list[Any] = []
        try:
            async with _timeout(conn.socket_timeout):
                for _ in range(count):
                    try:  # math.inf: no timeout per reply, the one around them all
                        replies.append(await conn.read_response(timeout=math.inf))
                    except ResponseError as exc:  # read whole: the connection stays in step
                        replies.append(exc)
        except asyncio.TimeoutError:
            await conn.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout reading script replies") from None
        return replies

    async def _write_and_wait(
        self, script: Any, keys: list[str], args: list[Any]
    ) -> tuple[Any, int]:
        """`RedisStorage._write_and_wait` on the async client: the script, then WAIT,
        on one connection (on a cluster, one to the master of the thread's slot)."""
        timeout_ms = max(1, round(self.storage.replica_timeout * 1000))
        wait = self.storage.wait_for_replicas
        if not self.cluster:
            pipe = self.client.pipeline(transaction=False)
            pipe.eval(script.script, len(keys), *keys, *args)
            pipe.wait(wait, timeout_ms)
            result, replicas = await pipe.execute()
            return result, int(replicas)
        from redis.asyncio.cluster import PipelineCommand

        client = cast("redis.asyncio.cluster.RedisCluster", self.client)
        for attempt in range(2):
            node = client.get_node_from_key(keys[0])
            if node is None:  # no master known for the slot: as the sync client says it
                raise SlotNotCoveredError(f"no node serves the slot of {keys[0]}")
            commands = [
                PipelineCommand(0, "EVAL", script.script, len(keys), *keys, *args),
                PipelineCommand(1, "WAIT", wait, timeout_ms),
            ]
            await node.execute_pipeline(commands)
            result, replicas = commands[0].result, commands[1].result
            if isinstance(result, AskError) and not attempt:  # MOVED too: nothing ran
                await client.nodes_manager.initialize()
                continue
            for value in (result, replicas):
                if isinstance(value, Exception):
                    raise value
            return result, int(cast(int, replicas))
        raise AssertionError("unreachable")  # pragma: no cover


def _pack_evalshas(batch: list[_Queued], encoder: Any, *, native: bool = True) -> bytes:
    """``EVALSHA sha numkeys keys... args...`` for each queued call, in the protocol's
    wire form (RESP arrays of bulk strings), as one buffer: by hiredis's packer (C) when
    the client encodes text as hiredis does (UTF-8, strict), else here, where bytes and
    ints are written as they are and anything else goes through the client's encoder."""
    if native and _hiredis_pack is not None and _utf8(encoder):
        return b"".join(
            _hiredis_pack(("EVALSHA", script.sha, len(keys), *keys, *args))
            for script, keys, args, _ in batch
        )
    encode = encoder.encode
    out: list[bytes] = []
    for script, keys, args, _ in batch:
        sha = script.sha.encode() if isinstance(script.sha, str) else script.sha
        nkeys = b"%d" % len(keys)
        out.append(b"*%d\r\n$7\r\nEVALSHA\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
            3 + len(keys) + len(args), len(sha), sha, len(nkeys), nkeys
        ))  # fmt: skip
        for value in (*keys, *args):
            kind = type(value)
            if kind is bytes:
                raw = value
            elif kind is int:
                raw = b"%d" % value
            else:
                raw = encode(value)
            out.append(b"$%d\r\n" % len(raw))
            out.append(raw)
            out.append(b"\r\n")
    return b"".join(out)


def _utf8(encoder: Any) -> bool:
    encoding = str(getattr(encoder, "encoding", "")).lower().replace("_", "-")
    return encoding in ("utf-8", "utf8") and getattr(encoder, "encoding_errors", "") == "strict"


def _settle(reply: asyncio.Future[Any], result: Any) -> None:
    """Give a queued call its reply (or its error), unless its caller stopped waiting."""
    if reply.done():
        return
    if isinstance(result, BaseException):
        reply.set_exception(result)
    else:
        reply.set_result(result)


def connect(url: str, **kwargs: Any) -> RedisClient:
    """A client for ``url`` with settings that suit a checkpointer.

    ``redis://``, ``rediss://`` (TLS) and ``unix://`` make a ``redis.Redis``;
    ``redis+cluster://host:port[,host:port...]`` (``rediss+cluster://`` for TLS)
    makes a ``redis.cluster.RedisCluster`` that starts from those nodes and
    discovers the rest. Credentials and query options are written as for
    ``redis://`` (``redis+cluster://user:secret@10.0.0.1:7000,10.0.0.2:7000``);
    a cluster has only database 0.

    Timeouts are short (5 s) and a failed command is retried once, quickly:
    that is enough to replace a connection a server restart has broken, and
    little enough that a server that is down fails the call within moments.
    Keyword arguments override these defaults (any ``redis.Redis`` or
    ``RedisCluster`` option).

    Raises:
        ValueError: a cluster URL without a host, or with a database other than 0.
        StorageUnavailableError: no node of the cluster answered (a single
            server is connected lazily: the first command reports it).

    Example:
        ```python
        client = connect("redis+cluster://10.0.0.1:7000,10.0.0.2:7000")
        ```
    """
    from redis.retry import Retry

    options = _client_options(Retry, kwargs)
    scheme = url.partition("://")[0].lower()
    if scheme not in CLUSTER_SCHEMES:
        _check_database(url)
        return redis.Redis.from_url(url, **options)
    first, others = cluster_url(url)
    nodes = [ClusterNode(host, port) for host, port in others]
    try:
        return RedisCluster(url=first, startup_nodes=nodes, **options)
    except (RedisClusterException, RedisConnectionError, RedisTimeoutError) as exc:
        if _refusal(exc):  # (a cluster client wraps its nodes' refusals in its own error)
            raise refused_error(_redacted(url), "connecting to the cluster", exc) from exc
        raise StorageUnavailableError(
            _redacted(url),
            "connecting to the cluster",
            f"{type(exc).__name__}: {exc}",
            write=False,
        ) from exc


def connect_async(url: str, **kwargs: Any) -> AsyncRedisClient:
    """`connect`'s twin for the async door: a ``redis.asyncio`` client for ``url``, with
    the same settings (a ``redis+cluster://`` URL makes a ``redis.asyncio`` cluster
    client, which finds the cluster's layout on its first command).

    Example:
        ```python
        client = connect_async("redis://localhost:6379/0")
        ```
    """
    import redis.asyncio
    import redis.asyncio.cluster
    from redis.asyncio.retry import Retry

    options = _client_options(Retry, kwargs)
    scheme = url.partition("://")[0].lower()
    if scheme not in CLUSTER_SCHEMES:
        _check_database(url)
        # Many coroutines at once: wait for a free connection rather than fail
        # (redis.asyncio's default pool raises past 100).
        options.setdefault("max_connections", 100)
        options.setdefault("timeout", options["socket_timeout"])
        pool = redis.asyncio.BlockingConnectionPool.from_url(url, **options)
        client = redis.asyncio.Redis(connection_pool=pool)
        client.auto_close_connection_pool = True
        return client
    first, others = cluster_url(url)
    nodes = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in others]
    options.setdefault("max_connections", 1000)  # per node; the cluster client never waits
    return redis.asyncio.cluster.RedisCluster.from_url(first, startup_nodes=nodes, **options)


def _check_database(url: str) -> None:
    """A ``redis://`` URL's database is a number (redis-py takes ``/abc`` for database 0)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme.lower() not in ("redis", "rediss"):
        return  # unix:// names its database in the query
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise StorageConfigError(
            f"{_redacted(url)}: the database {path!r} is not a number (redis://host:port/0)"
        )


def _client_options(retry: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`connect`'s defaults (``retry``: the sync or the asyncio ``Retry`` class)."""
    from redis.backoff import ExponentialBackoff

    options: dict[str, Any] = {
        "socket_timeout": 5.0,
        "socket_connect_timeout": 5.0,
        "retry": retry(ExponentialBackoff(cap=0.2, base=0.02), 1),
        "health_check_interval": 30,
        **_driver_info(),
    }
    options.update(kwargs)
    options["decode_responses"] = False
    return options


@cache
def _driver_info() -> dict[str, Any]:
    """What redis-py tells the server about itself (CLIENT SETINFO), found once: without
    it, redis-py 7+ looks its own version up in the installed packages' metadata for
    every connection it opens (1-2 ms each: a cold open's, and each of a pool's)."""
    try:
        from redis.driver_info import DriverInfo
        from redis.utils import get_lib_version
    except ImportError:  # redis-py before 7: nothing to save
        return {}
    return {"driver_info": DriverInfo(lib_version=get_lib_version())}


def cluster_url(url: str) -> tuple[str, list[tuple[str, int]]]:
    """Split a ``redis+cluster://`` URL into what ``RedisCluster`` takes: a plain URL for
    the first node, and ``(host, port)`` for the other start-up nodes.

    The first node's URL carries the credentials and options to ``RedisCluster(url=...)``
    (sync or ``redis.asyncio.cluster``), which applies them to every node it connects to.

    Raises:
        ValueError: no host, a bad ``host:port``, or a database other than 0.

    Example:
        >>> cluster_url("redis+cluster://app:pw@10.0.0.1:7000,10.0.0.2:7001,[::1]/0?ssl_cert_reqs=none")
        ('redis://app:pw@10.0.0.1:7000/0?ssl_cert_reqs=none', [('10.0.0.2', 7001), ('::1', 6379)])
    """
    scheme, _, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    if "?" in netloc:  # no path: redis+cluster://h:p?ssl_cert_reqs=none
        netloc, _, query = netloc.partition("?")
        slash, tail = "/", "?" + query
    credentials, at, hosts = netloc.rpartition("@")
    nodes = [h.strip() for h in hosts.split(",") if h.strip()]
    if not nodes:
        raise ValueError(f"{_redacted(url)}: a cluster URL names at least one host:port")
    db = tail.partition("?")[0]
    if db not in ("", "0"):
        raise ValueError(f"{_redacted(url)}: a Redis Cluster has only database 0")
    plain = "rediss" if scheme.lower() == "rediss+cluster" else "redis"
    first = f"{plain}://{credentials}{at}{nodes[0]}{slash}{tail}"
    return first, [_cluster_node(url, node) for node in nodes[1:]]


def _cluster_node(url: str, node: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` (default port 6379)."""
    if node.startswith("["):
        host, _, port = node[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, colon, port = node.rpartition(":")
        if not colon:
            host, port = node, ""
    try:
        return host, int(port) if port else 6379
    except ValueError:
        raise ValueError(f"{_redacted(url)}: {node!r} is not host:port") from None


def _redacted(url: str) -> str:
    """``url`` without its password (in its user info or its query), for messages.

    >>> _redacted("redis://app:s3cret@h:6379/0?password=s3cret&db=1")
    'redis://app:***@h:6379/0?password=***&db=1'
    >>> _redacted("redis://h:6379/0?password=pre;tail")  # all of it is the password
    'redis://h:6379/0?password=***'
    """
    url, question, query = url.partition("?")
    query = _SECRET_PARAM.sub(r"\1***", query)
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    credentials, at, hosts = netloc.rpartition("@")
    if at:
        user = credentials.partition(":")[0]
        netloc = f"{user}:***@{hosts}" if user else f"***@{hosts}"
    return f"{scheme}{sep}{netloc}{slash}{tail}{question}{query}"


_SECRET_PARAM = re.compile(
    r"(?i)((?:^|&)[^=&]*(?:pass|secret|token|credential)[^=&]*=)[^&#]*"
)
"""A query parameter whose value is a secret (``password=``, ``access_token=``, ...), to
the next ``&`` (redis-py's parser splits on ``&`` only: a ``;`` is part of the value)."""


def _describe_server(client: RedisClient) -> str:
    """``redis://host:port/db``, or ``redis+cluster://h1:p1,h2:p2``, for messages (never the
    password)."""
    kw = client.get_connection_kwargs()
    if isinstance(client, RedisCluster):
        scheme = "rediss+cluster" if kw.get("ssl") else "redis+cluster"
        nodes = sorted(client.nodes_manager.startup_nodes) or ["?"]
        return f"{scheme}://{','.join(nodes)}"
    if kw.get("path"):
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    # A rediss:// URL gives the pool an SSLConnection class, not an "ssl" keyword.
    connection = getattr(getattr(client, "connection_pool", None), "connection_class", None)
    tls = kw.get("ssl") or (isinstance(connection, type) and "SSL" in connection.__name__)
    scheme = "rediss" if tls else "redis"
    return f"{scheme}://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


def _strip(line: bytes) -> bytes:
    return line[:-1] if line.endswith(b"\n") else line


def _header(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        return loads_line(raw)
    except ValueError:
        return None
