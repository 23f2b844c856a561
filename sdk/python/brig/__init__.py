"""brig — the Python SDK of brig serve (docs/serve.md, sdk/python/README.md).

    from brig import Sandbox
    with Sandbox.create(profile="default", overlay=True) as sb:
        r = sb.run("echo hello; ls /")
        print(r.exit_code, r.stdout)

Standard library only; Python 3.9 or newer.
"""
from .errors import (BadRequest, BrigError, Conflict, ConnectionError, LimitExceeded, NotFound,  # noqa: A004
                     ProtocolError, ServerError, Unauthorized, UnsafeArchive)
from .sandbox import (Chunk, Client, CommandFailed, Download, Files, Network, Process, Result, Sandbox,
                      Stream)
from ._http import default_socket

__all__ = ["Sandbox", "Client", "Result", "Process", "Stream", "Chunk", "Files", "Network", "Download",
           "BrigError", "ConnectionError", "ProtocolError", "BadRequest", "Unauthorized", "NotFound",
           "Conflict", "LimitExceeded", "ServerError", "UnsafeArchive", "CommandFailed", "default_socket"]
__version__ = "0.1.0"
