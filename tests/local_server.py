"""What the throwaway servers of the tests and benchmarks share: a free loopback port to
listen on, and ``with server:`` starting the server and stopping it after.

`RedisServer` and `RedisClusterServer` (``tests/redis_server.py``) and `PostgresServer`
(``benchmarks/postgres_server.py``) are `LocalServer`s: each says how it starts and
stops, and nothing else.
"""

from __future__ import annotations

import socket
from types import TracebackType

from typing_extensions import Self


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """A server process of the test machine: `start` it (or enter ``with``), `stop` it.

    ``with`` stops the server however the block ends; a `start` that fails must clean up
    after itself, since ``__exit__`` only runs once ``__enter__`` has returned.
    """

    def start(self) -> Self:
        """Start the server and return once it answers."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the server; a server that is not running is left as it is."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
