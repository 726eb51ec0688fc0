"""The forwarder run inside a sandbox with an allow-list (docs/sandbox.md) by the system's
`python3 -I -S`, bound read-only at /run/lw-forward.py: it listens on the sandbox's own loopback
(`127.0.0.1:PORT`), forks a child that carries each connection to the proxy's unix socket,
and becomes the command (`exec`), which stays the sandbox's pid 2: when it ends, the sandbox's
pid namespace ends, the forwarder with it.

    python3 -I -S /run/lw-forward.py PORT SOCKET COMMAND...
"""

import asyncio
import os
import socket
import sys


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except OSError:
        sink.close()


async def _serve(listener: socket.socket, path: str) -> None:
    async def carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        up_writer.close()
        writer.close()

    server = await asyncio.start_server(carry, sock=listener)
    await server.serve_forever()


def main(argv: list[str]) -> None:
    port, path, *command = argv
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)  # connections wait from now on, before the child serves them
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # the command's output pipe is the command's alone
            os.dup2(null, fd)
        try:
            asyncio.run(_serve(listener, path))
        finally:
            os._exit(0)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
