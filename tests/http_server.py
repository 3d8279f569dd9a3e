"""A small real HTTP server on 127.0.0.1 for download tests: Range, faults, stalls."""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class FileServer:
    """Serves files from ``root``. Faults are set per test on the instance:

    - ``ranges``: honour Range (206) or always send the whole file (200)
    - ``drop_after``: {name: n} send the announced length but close after n bytes, once
    - ``fail_first``: {name: k} answer 503 to the first k requests
    - ``stall``: {name: seconds} send headers then hang, once
    - ``corrupt``: {name: k} serve flipped bytes for the first k requests
    - ``index``/``extra_links``: an HTML listing for folders, with extra (hostile) hrefs
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.ranges = True
        self.drop_after: dict[str, int] = {}
        self.fail_first: dict[str, int] = {}
        self.stall: dict[str, float] = {}
        self.corrupt: dict[str, int] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.index = True  # serve an HTML listing for folders
        self.extra_links: list[str] = []  # hostile hrefs added to the listing
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                server.requests.append((name, self.headers.get("Range")))
                path = server.root / name
                if server.fail_first.get(name, 0) > 0:
                    server.fail_first[name] -= 1
                    self.send_error(503)
                    return
                if path.is_dir() and server.index:  # an HTML index, as a plain mirror serves
                    links = "".join(f'<a href="{p.name}{"/" if p.is_dir() else ""}">{p.name}</a>\n'
                                    for p in sorted(path.iterdir()))
                    links += "".join(f'<a href="{h}">x</a>\n' for h in server.extra_links)
                    body = f"<html><body>{links}</body></html>".encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                if server.corrupt.get(name, 0) > 0:
                    server.corrupt[name] -= 1
                    data = bytes(b ^ 0xFF for b in data)
                start = 0
                m = re.match(r"bytes=(\d+)-", self.headers.get("Range") or "")
                if m and server.ranges:
                    start = int(m.group(1))
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if name in server.stall:
                    time.sleep(server.stall.pop(name))
                    return
                if name in server.drop_after:
                    self.wfile.write(body[:server.drop_after.pop(name)])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        # a short poll: shutdown() waits up to one interval (the default 0.5 s was each test's teardown)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
